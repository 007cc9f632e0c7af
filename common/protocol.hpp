// hone's socket protocol: frames and messages between the shim, honed and honectl.
// docs/protocol.md is the specification; this header is its one implementation.
//
// A frame is a 16-byte header and a payload of at most k_max_payload bytes. Bulk data (images,
// captures) never travels in a frame: it is written to a memfd whose descriptor rides along with
// the frame (SCM_RIGHTS), and the frame says how many bytes it holds.
#pragma once

#include "common/capture.hpp"
#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/wire.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hone::proto {

// Versions this build speaks; a peer picks the highest both speak.
constexpr uint32_t k_version_min = 1;
constexpr uint32_t k_version_max = 1;

constexpr uint32_t k_magic = 0x454E4F48; // "HONE" in little-endian byte order
constexpr uint32_t k_max_payload = 4u << 20;
constexpr size_t k_header_size = 16;

enum class MsgType : uint16_t {
  // session
  hello = 1,      // client -> daemon, first frame of every connection
  hello_ack = 2,  // daemon -> client
  error = 3,      // either way; the sender closes after a fatal one
  goodbye = 4,    // client -> daemon
  // shim reports (shim -> daemon)
  kernels = 10,   // kernels first seen since the last report
  stats = 11,     // launch counters and sampled device time
  image = 12,     // an image's bytes (memfd) and, when known, its NVRTC source
  capture = 13,   // a captured launch (Capture; data in the memfd)
  variant_status = 14, // a variant installed, refused or removed in the process
  // daemon requests (daemon -> shim)
  image_request = 20,
  capture_request = 21,
  install_variant = 22, // image in the memfd
  remove_variant = 23,
  // worker (daemon <-> honed worker)
  job = 30,       // daemon -> worker: the job bundle in the memfd
  verdict = 31,   // worker -> daemon
  // control (honectl <-> daemon): request and response share a type
  control = 40,
};

// Frame flags.
enum : uint16_t {
  k_flag_fd = 1, // one file descriptor accompanies the frame
};

struct FrameHeader {
  uint32_t magic = k_magic;
  MsgType type = MsgType::hello;
  uint16_t flags = 0;
  uint32_t length = 0; // payload bytes
  uint32_t seq = 0;    // request id; a reply carries its request's seq

  void encode(char out[k_header_size]) const;
  // Parse and check a header (magic, length bound). nullopt with `why` set when it is bad.
  static std::optional<FrameHeader> decode(const char in[k_header_size], const char** why);
};

// Who is on the client side of a connection.
enum class ClientKind : uint8_t { shim = 1, ctl = 2, worker = 3 };

struct Hello {
  uint32_t version_min = k_version_min;
  uint32_t version_max = k_version_max;
  ClientKind kind = ClientKind::shim;
  uint32_t pid = 0;
  uint32_t uid = 0;
  std::string exe;           // /proc/self/exe
  std::string hostname;
  std::string device_name;   // first device the process uses, empty if not yet known
  std::string arch;          // "sm_90"
  uint32_t driver_version = 0; // cuDriverGetVersion
  std::string client_version;  // hone version of the shim or honectl
};

struct HelloAck {
  uint32_t version = k_version_max;
  std::string daemon_version;
  uint32_t report_interval_ms = 2000;
};

struct ErrorMsg {
  uint32_t code = 0; // an ErrorCode
  std::string message;
};

enum ErrorCode : uint32_t {
  k_err_protocol = 1,    // malformed frame or message
  k_err_version = 2,     // no common protocol version
  k_err_permission = 3,  // peer credentials not allowed
  k_err_limit = 4,       // too many connections or messages
  k_err_unknown = 5,     // unknown message type
  k_err_internal = 6,
  k_err_not_found = 7,
  k_err_invalid = 8,     // a request that cannot be honoured as asked
};

enum class ImageFormat : uint8_t { unknown = 0, ptx = 1, cubin = 2, fatbin = 3 };

// A kernel the process has looked up, by the shim's handle for it.
struct KernelInfo {
  uint64_t id = 0;           // the shim's handle, unique within the process
  KernelKey key;
  ImageFormat format = ImageFormat::unknown;
  uint64_t image_size = 0;
  bool source_known = false; // the image came from NVRTC and the shim has the source
};

struct Kernels {
  std::vector<KernelInfo> kernels;
  // The process's device, in the first report after it became known when the hello could not
  // name it (a runtime-API program connects before it initializes CUDA); empty otherwise.
  // Appended after the kernels: a daemon that predates the fields ignores them.
  std::string device_name;
  std::string arch;
  uint32_t driver_version = 0;
};

struct KernelStats {
  uint64_t id = 0;
  uint64_t launches = 0;      // cumulative since the kernel was seen (including variant launches)
  uint64_t variant_launches = 0; // of those, served by an installed variant
  uint64_t fallbacks = 0;     // variant launches that failed and ran the original instead
  uint64_t sampled = 0;       // launches timed with events, cumulative
  uint64_t sampled_ns = 0;    // their device time, cumulative
  std::array<uint32_t, 3> grid{};  // of the last launch
  std::array<uint32_t, 3> block{};
};

// A kernel's part in the process's CUDA graphs (its launches above include the replays).
struct GraphKernelStats {
  uint64_t id = 0;
  uint64_t graph_launches = 0; // cumulative: launches of it that were graph replays
  uint32_t graphs = 0;         // executable graphs holding it now
  uint32_t nodes = 0;          // kernel nodes running it in those graphs
  uint32_t nodes_serving = 0;  // of those, pointed at a variant now
};

struct Stats {
  uint64_t uptime_ns = 0;     // since the shim initialised
  std::vector<KernelStats> kernels; // only kernels launched since the last report
  // Appended after the kernels, only when the process has replayed graphs: a daemon that
  // predates them ignores the fields.
  std::vector<GraphKernelStats> graph_kernels; // only kernels whose graph part changed
  uint64_t graph_replays = 0;       // cumulative cuGraphLaunch calls of observed graphs
  uint64_t graph_nodes_patched = 0; // kernel nodes pointed at a variant now
  // Appended after the graph part (written, possibly empty, whenever this is not): kernels whose
  // guard misses changed, as (id, cumulative misses). A daemon that predates it ignores it.
  std::vector<std::pair<uint64_t, uint64_t>> guard_misses;
};

struct ImageRequest {
  ImageHash image;
};

struct SourceInfo {
  std::string name;                  // program name given to nvrtcCreateProgram
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers; // include name, contents
  std::vector<std::string> options;  // nvrtcCompileProgram options
};

// Reply to ImageRequest: the bytes are in the accompanying memfd.
struct Image {
  ImageHash image;
  bool available = false;    // false: the shim no longer has the bytes (nothing attached)
  ImageFormat format = ImageFormat::unknown;
  uint64_t size = 0;
  std::optional<SourceInfo> source;
  // For a cubin (or a fatbin's ELF entries): the PTX Triton compiled it from, found in the
  // application's Triton cache by the cubin's bytes (cuda/triton_cache.hpp).
  struct Triton {
    std::string cubin_path;
    std::string ptx;
  };
  std::optional<Triton> triton;
  // For a cubin the JIT linker made in the process (cuLinkComplete): what went into the link, so
  // that its kernels are known by the PTX they were linked from (shim/hooks_link.cpp).
  struct LinkInput {
    uint8_t type = 0;        // CUjitInputType: 0 cubin, 1 PTX, 2 fatbin, 3 object, 4 library, ...
    std::string name;        // as given to cuLinkAddData, or the path of cuLinkAddFile
    std::string ptx;         // PTX inputs: the text, without a NUL; empty for other inputs
    uint64_t ptx_size = 0;   // PTX inputs: the text's size, also when the text was not sent
    bool from_nvrtc = false; // this PTX is the output of the NVRTC program that is `source`
  };
  struct Linked {
    std::vector<LinkInput> inputs; // in the order they were added
  };
  // Appended after `triton`: an older peer ignores it.
  std::optional<Linked> linked;
};

// Capture the next `launches` launches of kernel `kernel` (the shim's id).
struct CaptureRequest {
  uint64_t request = 0;
  uint64_t kernel = 0;
  uint32_t launches = 1;
  uint64_t max_bytes = 256ull << 20; // per capture; larger ones are skipped and reported
  bool with_outputs = false;         // also copy the buffers right after the launch
  // A shadow check of the variant serving the kernel: capture only launches the variant serves,
  // with the variant running and its outputs copied after it (with_outputs implied); launches
  // it does not serve go on uncaptured.
  bool shadow = false;
  // Copy whole allocations, without a bounds probe: a bounded capture of the kernel proved
  // unusable in the worker (shim/README.md, "Bounded captures"). Encoded with `shadow` in one
  // flags byte (bit 0 shadow, bit 1 whole), so a request without it reads as before.
  bool whole = false;
};

// Serve launches of `kernel` that pass `guard` with `entry` of the image in the memfd.
struct InstallVariant {
  KernelKey kernel;
  VariantId variant;
  ImageFormat format = ImageFormat::ptx;
  uint64_t size = 0;
  std::string entry;
  std::vector<std::string> jit_options;
  Guard guard;
};

// Stop serving `variant` (all variants of the kernel when it is zero).
struct RemoveVariant {
  KernelKey kernel;
  VariantId variant;
};

struct VariantStatus {
  KernelKey kernel;
  VariantId variant;
  bool installed = false;   // false: refused (message says why) or removed
  std::string message;
};

void encode(wire::Writer& w, const Hello& m);
void encode(wire::Writer& w, const HelloAck& m);
void encode(wire::Writer& w, const ErrorMsg& m);
void encode(wire::Writer& w, const Kernels& m);
void encode(wire::Writer& w, const Stats& m);
void encode(wire::Writer& w, const ImageRequest& m);
void encode(wire::Writer& w, const Image& m);
void encode(wire::Writer& w, const CaptureRequest& m);
void encode(wire::Writer& w, const InstallVariant& m);
void encode(wire::Writer& w, const RemoveVariant& m);
void encode(wire::Writer& w, const VariantStatus& m);

// Decoders read the whole payload; trailing bytes are ignored (fields a newer peer appended).
bool decode(wire::Reader& r, Hello& m);
bool decode(wire::Reader& r, HelloAck& m);
bool decode(wire::Reader& r, ErrorMsg& m);
bool decode(wire::Reader& r, Kernels& m);
bool decode(wire::Reader& r, Stats& m);
bool decode(wire::Reader& r, ImageRequest& m);
bool decode(wire::Reader& r, Image& m);
bool decode(wire::Reader& r, CaptureRequest& m);
bool decode(wire::Reader& r, InstallVariant& m);
bool decode(wire::Reader& r, RemoveVariant& m);
bool decode(wire::Reader& r, VariantStatus& m);

// A whole frame: header plus payload, ready to send.
std::string frame(MsgType type, uint32_t seq, const wire::Writer& payload, uint16_t flags = 0);

template <class M> std::string frame_of(MsgType type, uint32_t seq, const M& msg, uint16_t flags = 0) {
  wire::Writer w;
  encode(w, msg);
  return frame(type, seq, w, flags);
}

const char* type_name(MsgType t);

} // namespace hone::proto
