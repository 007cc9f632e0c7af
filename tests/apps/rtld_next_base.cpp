// libhone_testapp_base.so: the definition of hone_testapp_value() that the wrapper in
// libhone_testapp_wrap.so finds with dlsym(RTLD_NEXT) (see rtld_next_app.cpp).
extern "C" __attribute__((visibility("default"))) int hone_testapp_value() {
  return 42;
}
