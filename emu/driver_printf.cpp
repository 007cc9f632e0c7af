// Device printf's FIFO: the records launches made, printed at the host's next synchronization.
//
// CUDA C++ Programming Guide, "Formatted Output": the output buffer "is flushed only when one of
// these actions is performed: kernel launch (at the start of the launch), synchronization
// (cudaDeviceSynchronize, cuCtxSynchronize, cudaStreamSynchronize, cuStreamSynchronize,
// cudaEventSynchronize, cuEventSynchronize), memory copies via any blocking version of
// cudaMemcpy*() or cuMemcpy*(), module loading/unloading, context destruction, prior to executing a
// stream callback"; "the buffer is not flushed automatically when the program exits". Its size is
// CU_LIMIT_PRINTF_FIFO_SIZE (1 MiB by default). The guide calls the buffer circular with older
// output overwritten; what GPUs are seen to do, and what this FIFO does, is keep what fits since the
// last flush and drop later records.
#include "emu/driver.hpp"

#include "emu/log.hpp"

#include <cstdio>

namespace hone::emu {

uint64_t printf_room(const Context& ctx) {
  const uint64_t limit = ctx.limits[CU_LIMIT_PRINTF_FIFO_SIZE];
  return ctx.printf_used < limit ? limit - ctx.printf_used : 0;
}

void printf_append(Context& ctx, LaunchOutcome& outcome) {
  const uint64_t limit = ctx.limits[CU_LIMIT_PRINTF_FIFO_SIZE];
  ctx.printf_dropped += outcome.prints_dropped;
  for (DevicePrint& p : outcome.prints) {
    if (ctx.printf_used + p.fifo_bytes > limit) {
      ++ctx.printf_dropped;
      continue;
    }
    ctx.printf_used += p.fifo_bytes;
    ctx.printf_pending += p.text;
  }
  outcome.prints.clear();
}

void printf_flush(Context& ctx) {
  if (!ctx.printf_pending.empty()) {
    // The application's own stdout stream: what it printed before stays before.
    std::fwrite(ctx.printf_pending.data(), 1, ctx.printf_pending.size(), stdout);
    std::fflush(stdout);
  }
  if (ctx.printf_dropped) {
    log(LogLevel::info, std::to_string(ctx.printf_dropped) +
                            " device printf records did not fit the printf FIFO "
                            "(CU_LIMIT_PRINTF_FIFO_SIZE " +
                            std::to_string(ctx.limits[CU_LIMIT_PRINTF_FIFO_SIZE]) +
                            " bytes) and were dropped, as on a GPU");
  }
  ctx.printf_pending.clear();
  ctx.printf_used = 0;
  ctx.printf_dropped = 0;
}

} // namespace hone::emu
