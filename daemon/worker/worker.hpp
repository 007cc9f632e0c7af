// honed worker: the only part of honed that touches a GPU (DESIGN.md, "Processes and trust
// boundaries"). honed starts one per device as `honed worker --fd N --driver PATH` and talks to it
// over a socket pair: Hello{kind worker} and HelloAck, then `job` frames (the bundle in a memfd)
// each answered by a `verdict` frame with the same seq, one job at a time.
#pragma once

#include <string>

namespace hone::worker {

// Exit statuses of main().
inline constexpr int k_exit_ok = 0;           // honed closed the socket
inline constexpr int k_exit_protocol = 1;     // the socket failed or honed spoke nonsense
inline constexpr int k_exit_context_lost = 3; // a candidate's fault left the context unusable;
                                              // its verdict was sent first. Start a fresh worker.

// Serve jobs on `fd` (a connected Unix stream socket, adopted and closed) with the CUDA driver
// library `driver` (a path or a soname, e.g. "libcuda.so.1"). Returns the exit status. Without a
// usable driver or device the worker still serves: every job gets an `internal` verdict saying why.
int main(int fd, const std::string& driver);

} // namespace hone::worker
