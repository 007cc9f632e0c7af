// libhone_testapp_wrap.so: wraps hone_testapp_value() the way interposing libraries wrap
// functions: dlsym(RTLD_NEXT, name) must be the next definition after *this* library, which glibc
// decides from the caller's return address. A dlsym override that is not a tail call makes glibc
// see the override's library as the caller, and RTLD_NEXT can then return this very function.
#include <dlfcn.h>

#include <cstdio>

extern "C" __attribute__((visibility("default"))) int hone_testapp_value() {
  using Fn = int (*)();
  auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "hone_testapp_value"));
  if (next == nullptr) {
    std::printf("RTLD_NEXT: no next definition\n");
    return -1;
  }
  if (next == &hone_testapp_value) {
    std::printf("RTLD_NEXT: returned the caller's own definition\n");
    return -2;
  }
  return next() + 1;
}
