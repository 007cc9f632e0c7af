// hone-testapp-traceargs: calls the functions of libhone_testapp_traceargs.so through pointers
// from dlsym (under the shim and HONE_TRACE, trace thunks) twice each, the first call being the
// one the thunk logs, and checks every result against a direct computation. Prints "args ok" and
// exits 0, or says which call was wrong and exits 1.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

using Many = double (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double,
                        double, double, double, double, double, double, int64_t, double, int64_t);
using Variadic = double (*)(int, ...);

int main() {
  void* lib = dlopen("libhone_testapp_traceargs.so", RTLD_NOW);
  if (!lib) {
    std::printf("dlopen: %s\n", dlerror());
    return 2;
  }
  auto many = reinterpret_cast<Many>(dlsym(lib, "cuTestManyArgs"));
  auto variadic = reinterpret_cast<Variadic>(dlsym(lib, "cuTestVariadic"));
  if (!many || !variadic) {
    std::printf("dlsym failed\n");
    return 2;
  }
  bool ok = true;
  for (int round = 0; round < 2; ++round) {
    double want = double(1 + 2 * 2 + 3 * 3 + 4 * 4 + 5 * 5 + 6 * 6) + 0.5 + 2 * 1.5 + 3 * 2.5 +
                  4 * 3.5 + 5 * 4.5 + 6 * 5.5 + 7 * 6.5 + 8 * 7.5 + 100.0 * -7 + 1000 * 0.25 +
                  10000.0 * 9;
    double got = many(1, 2, 3, 4, 5, 6, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, -7, 0.25, 9);
    if (got != want) {
      std::printf("cuTestManyArgs round %d: %.17g, want %.17g\n", round, got, want);
      ok = false;
    }
    double v = variadic(5, 1.0, 2.0, 3.0, 4.0, 5.0);
    if (v != 1 + 4 + 9 + 16 + 25) {
      std::printf("cuTestVariadic round %d: %.17g\n", round, v);
      ok = false;
    }
  }
  std::printf(ok ? "args ok\n" : "args WRONG\n");
  return ok ? 0 : 1;
}
