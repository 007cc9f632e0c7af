// hone-bench-l2-flush: what the worker's L2 flush between timed runs (Device::flush_l2) does to a
// memory-bound kernel's time. A kernel reads a buffer that fits the L2 (sum of float4s), timed
// with the worker's own Device (events on its stream) `reps` times without a flush between the
// runs, then `reps` times with one before each; prints both medians and their ratio. On a GPU the
// unflushed runs read from L2 and the flushed ones from DRAM; the emulated device keeps no cache
// between launches, so the worker does not flush there and the bench says so.
//
//   hone-bench-l2-flush [--driver PATH] [--mb N] [--reps R]
#include "cuda/driver_api.hpp"
#include "daemon/worker/device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char* k_ptx = R"(
.version 7.0
.target sm_50
.address_size 64

.visible .entry l2_read(.param .u64 in, .param .u64 out, .param .u32 n4)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n4];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    mov.u32 %r6, %nctaid.x;
    mul.lo.u32 %r6, %r6, %r3;
    mov.f32 %f1, 0f00000000;
$Lloop:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra.uni $Ldone;
    mul.wide.u32 %rd3, %r5, 16;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.v4.f32 {%f2, %f3, %f4, %f5}, [%rd4];
    add.f32 %f1, %f1, %f2;
    add.f32 %f1, %f1, %f3;
    add.f32 %f1, %f1, %f4;
    add.f32 %f1, %f1, %f5;
    add.u32 %r5, %r5, %r6;
    bra.uni $Lloop;
$Ldone:
    mad.lo.u32 %r5, %r2, %r3, %r4;
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.global.f32 [%rd4], %f1;
    ret;
}
)";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int usage(const char* why) {
  std::fprintf(stderr,
               "hone-bench-l2-flush: %s\nusage: hone-bench-l2-flush [--driver PATH] "
               "[--mb N] [--reps R]\n",
               why);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::string driver = "libcuda.so.1";
  uint32_t mb = 16, reps = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("hone-bench-l2-flush [--driver PATH] [--mb N] [--reps R]\n"
                  "Times a memory-bound kernel (reads N MiB, default 16, which fits the L2 of a\n"
                  "Hopper GPU) R times (default 20) without and with the worker's L2 flush before\n"
                  "each run, and prints both medians and their ratio.\n");
      return 0;
    }
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    std::string v = argv[++i];
    if (a == "--driver") {
      driver = v;
    } else if (a == "--mb") {
      mb = uint32_t(std::strtoul(v.c_str(), nullptr, 10));
      if (mb == 0 || mb > 4096) return usage("--mb takes 1 to 4096");
    } else if (a == "--reps") {
      reps = uint32_t(std::strtoul(v.c_str(), nullptr, 10));
      if (reps == 0 || reps > 100000) return usage("--reps takes 1 to 100000");
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  auto api = hone::cuda::DriverApi::open(driver);
  if (!api)
    return std::fprintf(stderr, "hone-bench-l2-flush: %s\n", api.error().message.c_str()), 1;
  auto opened = hone::worker::Device::open(*api);
  if (!opened) {
    return std::fprintf(stderr, "hone-bench-l2-flush: %s\n", opened.error().message.c_str()), 1;
  }
  auto& d = **opened;
  auto fail = [](const hone::Error& e) {
    std::fprintf(stderr, "hone-bench-l2-flush: %s\n", e.message.c_str());
    return 1;
  };
  auto module = d.load(k_ptx);
  if (!module) return fail(module.error());
  auto fn = module->function("l2_read");
  if (!fn) return fail(fn.error());
  int sms = 0, l2 = 0;
  d.api().cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.device());
  d.api().cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d.device());
  const size_t bytes = size_t(mb) << 20;
  hone::worker::LaunchShape shape;
  shape.grid = {uint32_t(std::max(1, sms) * 4), 1, 1};
  shape.block = {256, 1, 1};
  const size_t threads = size_t(shape.grid[0]) * shape.block[0];
  CUdeviceptr in = 0, out = 0;
  if (d.api().cuMemAlloc(&in, bytes) != CUDA_SUCCESS ||
      d.api().cuMemAlloc(&out, threads * sizeof(float)) != CUDA_SUCCESS) {
    std::fprintf(stderr, "hone-bench-l2-flush: cannot allocate %u MiB\n", mb);
    return 1;
  }
  if (auto r = d.fill(in, 0x3c, bytes); !r) return fail(r.error());
  std::string params(20, '\0');
  uint64_t pin = in, pout = out;
  uint32_t n4 = uint32_t(bytes / 16);
  std::memcpy(params.data(), &pin, 8);
  std::memcpy(params.data() + 8, &pout, 8);
  std::memcpy(params.data() + 16, &n4, 4);
  std::vector<double> warm, flushed;
  bool flushes = true;
  for (uint32_t i = 0; i < reps + 1; ++i) { // the first run warms the L2 and is not counted
    auto t = d.run(*fn, shape, params);
    if (!t) return fail(t.error());
    if (i > 0) warm.push_back(*t);
  }
  for (uint32_t i = 0; i < reps; ++i) {
    flushes = d.flush_l2() && flushes;
    auto t = d.run(*fn, shape, params);
    if (!t) return fail(t.error());
    flushed.push_back(*t);
  }
  std::printf("device: %s, L2 %d KiB, %d SMs\n", d.name().c_str(), l2 >> 10, sms);
  std::printf("kernel: reads %u MiB (sum of float4s), grid %u x 256, %u runs each\n", mb,
              shape.grid[0], reps);
  std::printf("median without flush: %.0f ns (%.1f GB/s)\n", median(warm),
              double(bytes) / median(warm));
  std::printf("median with flush:    %.0f ns (%.1f GB/s)%s\n", median(flushed),
              double(bytes) / median(flushed),
              flushes ? "" : "  [no flush: the worker does not flush this device]");
  std::printf("flushed / unflushed: %.2fx\n", median(flushed) / median(warm));
  d.api().cuMemFree(in);
  d.api().cuMemFree(out);
  return 0;
}
