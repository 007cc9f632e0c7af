// hone-testapp-rtld-next: a program linked with a wrapping library (libhone_testapp_wrap.so) and
// the library it wraps (libhone_testapp_base.so), in that order. The wrapper finds the wrapped
// definition with dlsym(RTLD_NEXT): what a preloaded dlsym override must leave working.
//
// stdout: "value 43" (42 from the base, +1 from the wrapper). Not a CUDA program: it never touches
// the driver, so the shim's dlsym is all of the shim it meets.
#include <cstdio>

extern "C" int hone_testapp_value();

int main() {
  int v = hone_testapp_value();
  std::printf("value %d\n", v);
  return v == 43 ? 0 : 1;
}
