// A child program for store_test: a process the test can SIGKILL while it writes, or one that holds
// the store the way a running honed does.
//
//   store_crash_helper write DIR SEED   write kernels and variants until killed; print the id of
//                                       each variant once put_variant has returned (synced)
//   store_crash_helper hold DIR         open the store, print "ready", wait to be killed
#include "store/store.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

using namespace hone;
using namespace hone::store;

namespace {

// The bytes of variant `i` written with `seed` (store_test.cpp checks them with the same formula).
std::string pattern(uint64_t seed, uint64_t i, size_t size) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = char((k * 131 + i * 7 + seed * 13) & 0xff);
  return s;
}

uint64_t next(uint64_t& x) { // splitmix64
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int write_loop(const char* dir, uint64_t seed) {
  auto store = Store::open(dir);
  if (!store) {
    std::printf("error: %s\n", store.error().message.c_str());
    return 1;
  }
  uint64_t rng = seed;
  KernelKey kernel{ImageHash{seed + 1, 0x5eed}, "crash_kernel"};
  for (uint64_t i = 0;; ++i) {
    KernelRecord k;
    k.key = KernelKey{kernel.image, "crash_kernel_" + std::to_string(i % 4)};
    k.launches = i;
    k.est_gpu_ns = i * 1000;
    k.last_seen = int64_t(i);
    k.tried = {"rejit", "seed" + std::to_string(seed)};
    if (auto r = (*store)->put_kernel(k); !r) {
      std::printf("error: %s\n", r.error().message.c_str());
      return 1;
    }

    VariantRecord v;
    v.kernel = KernelKey{kernel.image, "crash_kernel_" + std::to_string(i % 4)};
    v.arch = "sm_90";
    v.driver_major = 13;
    v.strategy = "crash";
    // Mostly small, now and then large enough to fill a memtable in a few writes, so kills also
    // land during flushes and compactions.
    uint64_t r = next(rng);
    size_t size = (r % 8 == 0) ? 200000 + r % 300000 : 64 + r % 4096;
    v.image = pattern(seed, i, size);
    v.entry = "crash_entry";
    v.jit_options = {"seed=" + std::to_string(seed), "i=" + std::to_string(i)};
    v.evidence_json = "{\"seed\":" + std::to_string(seed) + ",\"i\":" + std::to_string(i) + "}";
    v.speedup = 1.5;
    v.id = variant_id_of(v);
    if (auto w = (*store)->put_variant(v); !w) {
      std::printf("error: %s\n", w.error().message.c_str());
      return 1;
    }
    std::printf("%s\n", v.id.hex().c_str());
    std::fflush(stdout);
  }
}

int hold(const char* dir) {
  auto store = Store::open(dir);
  if (!store) {
    std::printf("error: %s\n", store.error().message.c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "write") == 0)
    return write_loop(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (argc == 3 && std::strcmp(argv[1], "hold") == 0) return hold(argv[2]);
  std::fprintf(stderr, "usage: store_crash_helper write DIR SEED | hold DIR\n");
  return 2;
}
