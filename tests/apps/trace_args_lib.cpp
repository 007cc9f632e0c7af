// libhone_testapp_traceargs.so: functions with driver-style names (cu + an upper-case letter), so
// that the shim's dlsym hands out trace thunks for them under HONE_TRACE, taking every kind of
// argument the SysV ABI passes: six integer registers, eight vector registers, arguments on the
// stack, and a variadic call (rax holds the number of vector registers used). Each folds all of
// them into one value the caller can check.
#include <cstdarg>
#include <cstdint>

extern "C" {

__attribute__((visibility("default"))) double cuTestManyArgs(int64_t a, int64_t b, int64_t c,
                                                              int64_t d, int64_t e, int64_t f,
                                                              double x0, double x1, double x2,
                                                              double x3, double x4, double x5,
                                                              double x6, double x7, int64_t s1,
                                                              double s2, int64_t s3) {
  return double(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f) + x0 + 2 * x1 + 3 * x2 + 4 * x3 +
         5 * x4 + 6 * x5 + 7 * x6 + 8 * x7 + double(100 * s1) + 1000 * s2 + double(10000 * s3);
}

__attribute__((visibility("default"))) double cuTestVariadic(int count, ...) {
  va_list ap;
  va_start(ap, count);
  double sum = 0;
  for (int i = 0; i < count; ++i) sum += (i + 1) * va_arg(ap, double);
  va_end(ap);
  return sum;
}

} // extern "C"
