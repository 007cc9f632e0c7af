// The emulated driver's JIT linker (emu/driver_link.cpp, emu/link.cpp, emu/link_image.cpp):
// cuLinkCreate/AddData/AddFile/Complete/Destroy in every ABI version, the inputs applications
// give it (PTX, fatbins, host objects and archives built by nvcc -rdc, its own linked images), the
// rules of relocatable device code linking, the JIT options and logs, and the image it returns,
// loaded by cuModuleLoadData[Ex] and cuLibraryLoadData and launched.
//
// An ordinary driver-API program linked with the emulated libcuda.so.1.
#include <cuda.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string error_name(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS ? name : std::to_string(rc);
}

#define CU_OK(call) ASSERT_EQ(error_name(CUDA_SUCCESS), error_name(call))
#define EXPECT_CU(expected, call) EXPECT_EQ(error_name(expected), error_name(call))
#define ASSERT_CU(expected, call) ASSERT_EQ(error_name(expected), error_name(call))

// A kernel calling an external function and reading an external variable (what nvcc -rdc writes
// for `extern __device__`), and an internal helper whose name another input uses for its own.
// use_bar: out[i] = bar(i) + gval; use_helper: out[i] = helper(i) = i + 1000.
constexpr const char* k_user_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.extern .func (.param .b32 func_retval0) bar
(
	.param .b32 bar_param_0
)
;
.extern .global .align 4 .u32 gval;

.func (.param .b32 func_retval0) helper(
	.param .b32 helper_param_0
)
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [helper_param_0];
	add.s32 %r2, %r1, 1000;
	st.param.b32 [func_retval0+0], %r2;
	ret;
}

.visible .entry use_bar(
	.param .u64 use_bar_param_0
)
{
	.reg .b32 %r<5>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [use_bar_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), bar, (param0);
	ld.param.b32 %r2, [retval0+0];
	}
	ld.global.u32 %r3, [gval];
	add.s32 %r4, %r3, %r2;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r4;
	ret;
}

.visible .entry use_helper(
	.param .u64 use_helper_param_0
)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [use_helper_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), helper, (param0);
	ld.param.b32 %r2, [retval0+0];
	}
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r2;
	ret;
}
)";

// The definitions: gval = 7, bar(x) = 3x, and an internal helper(x) = x + 1 of its own, which
// lib_kernel uses: out[i] = helper(i).
constexpr const char* k_lib_ptx = R"(
.version 8.0
.target sm_80
.address_size 64

.visible .global .align 4 .u32 gval = 7;

.func (.param .b32 func_retval0) helper(
	.param .b32 helper_param_0
)
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [helper_param_0];
	add.s32 %r2, %r1, 1;
	st.param.b32 [func_retval0+0], %r2;
	ret;
}

.visible .func (.param .b32 func_retval0) bar(
	.param .b32 bar_param_0
)
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [bar_param_0];
	mul.lo.s32 %r2, %r1, 3;
	st.param.b32 [func_retval0+0], %r2;
	ret;
}

.visible .entry lib_kernel(
	.param .u64 lib_kernel_param_0
)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [lib_kernel_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), helper, (param0);
	ld.param.b32 %r2, [retval0+0];
	}
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r2;
	ret;
}
)";

// pick() as a weak or visible definition returning `value`; the first also has the entry
// `which`: out[0] = pick().
std::string pick_ptx(const char* linkage, int value, bool with_entry) {
  std::string s =
      std::string(".version 8.0\n.target sm_90\n.address_size 64\n\n") + linkage +
      " .func (.param .b32 func_retval0) pick()\n{\n\t.reg .b32 %r<2>;\n\tmov.u32 %r1, " +
      std::to_string(value) + ";\n\tst.param.b32 [func_retval0+0], %r1;\n\tret;\n}\n";
  if (with_entry) {
    s += R"(
.visible .entry which(.param .u64 which_param_0)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [which_param_0];
	{
	.param .b32 retval0;
	call.uni (retval0), pick, ();
	ld.param.b32 %r1, [retval0+0];
	}
	st.global.u32 [%rd1], %r1;
	ret;
}
)";
  }
  return s;
}

// A kernel ptxas gives 56 registers unconstrained (48 loaded values live at once), to see the
// register options reach the cost model's ptxas.
std::string heavy_ptx(const char* entry) {
  constexpr int n = 48;
  std::ostringstream s;
  s << ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry " << entry
    << "(.param .u64 in, .param .u64 out)\n{\n\t.reg .f32 %f<" << 2 * n + 2
    << ">;\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [in];\n\tld.param.u64 %rd2, [out];\n";
  for (int i = 0; i < n; ++i)
    s << "\tld.global.volatile.f32 %f" << i << ", [%rd1+" << 4 * i << "];\n";
  for (int i = 0; i < n; ++i)
    s << "\tmul.f32 %f" << n + i << ", %f" << i << ", %f" << (i * 7 + 3) % n << ";\n";
  s << "\tmov.f32 %f" << 2 * n << ", 0f00000000;\n";
  for (int i = 0; i < n; ++i)
    s << "\tfma.rn.f32 %f" << 2 * n << ", %f" << n + i << ", %f" << (i * 5 + 1) % n << ", %f"
      << 2 * n << ";\n";
  s << "\tst.global.f32 [%rd2], %f" << 2 * n << ";\n\tret;\n}\n";
  return s.str();
}

std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::path(HONE_BINARY_DIR) / "tests" / "emu_link";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = scratch_dir() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// The options hashcat 6.2.6 gives cuLinkCreate (src/backend.c), with its 8 KiB logs.
struct HashcatOptions {
  static constexpr size_t k_log = 8192;
  std::vector<char> info = std::vector<char>(k_log + 1, 'x');
  std::vector<char> error = std::vector<char>(k_log + 1, 'x');
  CUjit_option opts[7] = {CU_JIT_TARGET_FROM_CUCONTEXT, CU_JIT_LOG_VERBOSE,
                          CU_JIT_INFO_LOG_BUFFER,       CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER,      CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_MAX_REGISTERS};
  void* vals[7] = {nullptr,
                   reinterpret_cast<void*>(1),
                   info.data(),
                   reinterpret_cast<void*>(k_log),
                   error.data(),
                   reinterpret_cast<void*>(k_log),
                   reinterpret_cast<void*>(128)};
  size_t info_size() const { return reinterpret_cast<uintptr_t>(vals[3]); }
  size_t error_size() const { return reinterpret_cast<uintptr_t>(vals[5]); }
};

class Link : public ::testing::Test {
protected:
  static void SetUpTestSuite() { ASSERT_EQ(CUDA_SUCCESS, cuInit(0)); }

  void SetUp() override { CU_OK(cuCtxCreate(&m_ctx, nullptr, 0, 0)); }

  void TearDown() override {
    for (CUlinkState s : m_states) cuLinkDestroy(s);
    if (m_ctx != nullptr) cuCtxDestroy(m_ctx);
    CUcontext c = nullptr;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
    }
  }

  CUlinkState create(unsigned n = 0, CUjit_option* opts = nullptr, void** vals = nullptr) {
    CUlinkState s = nullptr;
    EXPECT_CU(CUDA_SUCCESS, cuLinkCreate(n, opts, vals, &s));
    if (s != nullptr) m_states.push_back(s);
    return s;
  }

  static CUresult add_ptx(CUlinkState s, const std::string& ptx, const char* name) {
    return cuLinkAddData(s, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1, name,
                         0, nullptr, nullptr);
  }

  // Link `inputs` (PTX) and load the image as a module.
  CUmodule link_and_load(const std::vector<std::string>& inputs) {
    CUlinkState s = create();
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_CU(CUDA_SUCCESS, add_ptx(s, inputs[i], ("input" + std::to_string(i)).c_str()));
    }
    void* image = nullptr;
    size_t size = 0;
    EXPECT_CU(CUDA_SUCCESS, cuLinkComplete(s, &image, &size));
    CUmodule m = nullptr;
    if (image != nullptr) {
      EXPECT_CU(CUDA_SUCCESS, cuModuleLoadData(&m, image));
    }
    return m;
  }

  // Run `name` of `m` with one block of `n` threads on a fresh buffer and return it.
  std::vector<uint32_t> run_kernel(CUmodule m, const char* name, unsigned n = 32) {
    CUfunction f = nullptr;
    EXPECT_CU(CUDA_SUCCESS, cuModuleGetFunction(&f, m, name));
    CUdeviceptr out = 0;
    EXPECT_CU(CUDA_SUCCESS, cuMemAlloc(&out, n * 4));
    EXPECT_CU(CUDA_SUCCESS, cuMemsetD32(out, 0xdeadbeef, n));
    void* args[] = {&out};
    EXPECT_CU(CUDA_SUCCESS, cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr));
    std::vector<uint32_t> host(n);
    EXPECT_CU(CUDA_SUCCESS, cuMemcpyDtoH(host.data(), out, n * 4));
    cuMemFree(out);
    return host;
  }

  static int num_regs(CUmodule m, const char* name) {
    CUfunction f = nullptr;
    EXPECT_CU(CUDA_SUCCESS, cuModuleGetFunction(&f, m, name));
    int regs = -1;
    EXPECT_CU(CUDA_SUCCESS, cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    return regs;
  }

  static void expect_linked_results(CUmodule m, const std::vector<uint32_t>& use_bar,
                                    const std::vector<uint32_t>& use_helper,
                                    const std::vector<uint32_t>& lib_kernel) {
    for (uint32_t i = 0; i < 32; ++i) {
      EXPECT_EQ(3 * i + 7, use_bar[i]) << "use_bar " << i;
      EXPECT_EQ(i + 1000, use_helper[i]) << "use_helper " << i;
      EXPECT_EQ(i + 1, lib_kernel[i]) << "lib_kernel " << i;
    }
    (void)m;
  }

  CUcontext m_ctx = nullptr;
  std::vector<CUlinkState> m_states;
};

// --- what hashcat does ---------------------------------------------------------------------------

TEST_F(Link, OnePtxInputWithHashcatsOptionsGivesAnElfImageThatLoadsAndRuns) {
  HashcatOptions o;
  CUlinkState s = nullptr;
  CU_OK(cuLinkCreate(7, o.opts, o.vals, &s));
  m_states.push_back(s);
  const std::string ptx = k_lib_ptx;
  CU_OK(cuLinkAddData(s, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1,
                      "lib_kernel", 0, nullptr, nullptr));
  void* image = nullptr;
  size_t size = 0;
  CU_OK(cuLinkComplete(s, &image, &size));
  ASSERT_NE(nullptr, image);
  // A cubin's shape: ELF64, little-endian, EM_CUDA, the SM in e_flags as ptxas 13.0 writes it.
  const auto* b = static_cast<const unsigned char*>(image);
  ASSERT_GE(size, 64u);
  EXPECT_EQ(0, std::memcmp(b,
                           "\x7f"
                           "ELF\x02\x01",
                           6));
  EXPECT_EQ(190, b[0x12] | (b[0x13] << 8));
  EXPECT_EQ(90, b[0x31]);
  // The size option is in/out: the bytes of log written, terminator included.
  EXPECT_EQ(std::strlen(o.info.data()) + 1, o.info_size());
  EXPECT_NE(std::string(o.info.data()).find("lib_kernel"), std::string::npos) << o.info.data();
  EXPECT_EQ(1u, o.error_size());
  EXPECT_EQ('\0', o.error[0]);

  // hashcat loads it with its own module options, then destroys the link state.
  HashcatOptions mo;
  CUmodule m = nullptr;
  CU_OK(cuModuleLoadDataEx(&m, image, 7, mo.opts, mo.vals));
  const auto out = run_kernel(m, "lib_kernel");
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(i + 1, out[i]);
  CUdeviceptr gval = 0;
  size_t bytes = 0;
  CU_OK(cuModuleGetGlobal(&gval, &bytes, m, "gval"));
  EXPECT_EQ(4u, bytes);

  // And the image, saved to hashcat's kernel cache, loads again in a later run (from a copy).
  std::string copy(static_cast<const char*>(image), size);
  CUmodule again = nullptr;
  CU_OK(cuModuleLoadData(&again, copy.data()));
  EXPECT_EQ(2u, run_kernel(again, "lib_kernel")[1]);
  std::string path = write_file("linked.cubin", copy);
  CU_OK(cuModuleLoad(&again, path.c_str()));
  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, copy.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr;
  CU_OK(cuLibraryGetKernel(&k, lib, "lib_kernel"));
  CU_OK(cuLibraryUnload(lib));
}

TEST_F(Link, EveryAbiNameIsExportedAndFoundByGetProcAddress) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(nullptr, lib);
  struct Case {
    const char* symbol;
    int version;
    const char* expected;
  };
  const Case cases[] = {
      {"cuLinkCreate", 13000, "cuLinkCreate_v2"},   {"cuLinkCreate", 6000, "cuLinkCreate"},
      {"cuLinkAddData", 13000, "cuLinkAddData_v2"}, {"cuLinkAddData", 6000, "cuLinkAddData"},
      {"cuLinkAddFile", 13000, "cuLinkAddFile_v2"}, {"cuLinkAddFile", 6000, "cuLinkAddFile"},
      {"cuLinkComplete", 13000, "cuLinkComplete"},  {"cuLinkDestroy", 13000, "cuLinkDestroy"},
  };
  for (const Case& c : cases) {
    void* fn = nullptr;
    CU_OK(cuGetProcAddress(c.symbol, &fn, c.version, 0, nullptr)) << c.symbol;
    EXPECT_EQ(dlsym(lib, c.expected), fn) << c.symbol << " at " << c.version;
  }
  // The legacy names are implementations too, not stubs: the 5.5 entry points link like _v2.
  using Create = CUresult (*)(unsigned, CUjit_option*, void**, CUlinkState*);
  using AddData = CUresult (*)(CUlinkState, CUjitInputType, void*, size_t, const char*, unsigned,
                               CUjit_option*, void**);
  auto create = reinterpret_cast<Create>(dlsym(lib, "cuLinkCreate"));
  auto add = reinterpret_cast<AddData>(dlsym(lib, "cuLinkAddData"));
  ASSERT_NE(nullptr, create);
  ASSERT_NE(nullptr, add);
  CUlinkState s = nullptr;
  CU_OK(create(0, nullptr, nullptr, &s));
  m_states.push_back(s);
  std::string ptx = k_lib_ptx;
  CU_OK(add(s, CU_JIT_INPUT_PTX, ptx.data(), ptx.size() + 1, "lib", 0, nullptr, nullptr));
  void* image = nullptr;
  CU_OK(cuLinkComplete(s, &image, nullptr));
}

// --- relocatable device code ---------------------------------------------------------------------

TEST_F(Link, ExternsResolveAcrossInputsAndInternalNamesStayApart) {
  // Both orders: a definition may come after its use or before it.
  for (bool user_first : {true, false}) {
    SCOPED_TRACE(user_first ? "user first" : "library first");
    CUmodule m = user_first ? link_and_load({k_user_ptx, k_lib_ptx})
                            : link_and_load({k_lib_ptx, k_user_ptx});
    ASSERT_NE(nullptr, m);
    expect_linked_results(m, run_kernel(m, "use_bar"), run_kernel(m, "use_helper"),
                          run_kernel(m, "lib_kernel"));
    CUdeviceptr gval = 0;
    CU_OK(cuModuleGetGlobal(&gval, nullptr, m, "gval"));
    uint32_t v = 0;
    CU_OK(cuMemcpyDtoH(&v, gval, 4));
    EXPECT_EQ(7u, v);
    // One variable: a kernel of either input sees what the host writes.
    v = 100;
    CU_OK(cuMemcpyHtoD(gval, &v, 4));
    EXPECT_EQ(3u * 1 + 100, run_kernel(m, "use_bar")[1]);
  }
}

TEST_F(Link, AnUndefinedReferenceFailsAtCompleteNamingTheSymbolInTheErrorLog) {
  char error[4096] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {error, reinterpret_cast<void*>(sizeof error)};
  CUlinkState s = create(2, opts, vals);
  CU_OK(add_ptx(s, k_user_ptx, "user.ptx")); // each input alone is fine
  void* image = nullptr;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuLinkComplete(s, &image, nullptr));
  EXPECT_EQ(nullptr, image);
  const std::string log = error;
  EXPECT_NE(log.find("Undefined reference to 'bar' in 'user.ptx'"), std::string::npos) << log;
  EXPECT_NE(log.find("'gval'"), std::string::npos) << log;
  EXPECT_EQ(log.size() + 1, reinterpret_cast<uintptr_t>(vals[1]));

  // A log buffer smaller than the message: cut, NUL-terminated, the size it was given.
  char small[16];
  std::memset(small, 'x', sizeof small);
  void* small_vals[] = {small, reinterpret_cast<void*>(sizeof small)};
  CUlinkState t = create(2, opts, small_vals);
  CU_OK(add_ptx(t, k_user_ptx, "user.ptx"));
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuLinkComplete(t, &image, nullptr));
  EXPECT_EQ('\0', small[15]);
  EXPECT_EQ(15u, std::strlen(small));
  EXPECT_EQ(16u, reinterpret_cast<uintptr_t>(small_vals[1]));

  // The same PTX loaded without a link cannot run its kernel that calls bar either.
}

TEST_F(Link, DefinitionsFollowTheRdcRules) {
  // Two strong definitions of one symbol.
  {
    char error[1024] = {};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {error, reinterpret_cast<void*>(sizeof error)};
    CUlinkState s = create(2, opts, vals);
    CU_OK(add_ptx(s, k_lib_ptx, "a.ptx"));
    CU_OK(add_ptx(s, k_lib_ptx, "b.ptx"));
    void* image = nullptr;
    EXPECT_CU(CUDA_ERROR_INVALID_PTX, cuLinkComplete(s, &image, nullptr));
    EXPECT_NE(std::string(error).find("Multiple definition of 'bar' in 'b.ptx', first defined in "
                                      "'a.ptx'"),
              std::string::npos)
        << error;
  }
  // A kernel keeps its name, linkage directive or not: two inputs with one kernel conflict.
  {
    const std::string k =
        ".version 8.0\n.target sm_90\n.address_size 64\n.entry k()\n{\n\tret;\n}\n";
    CUlinkState s = create();
    CU_OK(add_ptx(s, k, "a.ptx"));
    CU_OK(add_ptx(s, k, "b.ptx"));
    void* image = nullptr;
    EXPECT_CU(CUDA_ERROR_INVALID_PTX, cuLinkComplete(s, &image, nullptr));
  }
  // A visible definition overrides weak ones, wherever it comes; of weak ones, the first stays.
  struct Case {
    std::vector<std::string> inputs;
    uint32_t expected;
  };
  const Case cases[] = {
      {{pick_ptx(".weak", 1, true), pick_ptx(".visible", 2, false)}, 2},
      {{pick_ptx(".visible", 2, false), pick_ptx(".weak", 1, true)}, 2},
      {{pick_ptx(".weak", 1, true), pick_ptx(".weak", 3, false)}, 1},
      {{pick_ptx(".weak", 3, false), pick_ptx(".weak", 1, true)}, 3},
  };
  for (const Case& c : cases) {
    CUmodule m = link_and_load(c.inputs);
    ASSERT_NE(nullptr, m);
    EXPECT_EQ(c.expected, run_kernel(m, "which", 1)[0]);
  }
}

TEST_F(Link, ALinkedImageIsACubinInputAndImagesStayValidUntilDestroy) {
  CUlinkState first = create();
  CU_OK(add_ptx(first, k_lib_ptx, "lib.ptx"));
  void* lib_image = nullptr;
  size_t lib_size = 0;
  CU_OK(cuLinkComplete(first, &lib_image, &lib_size));

  CUlinkState second = create();
  CU_OK(add_ptx(second, k_user_ptx, "user.ptx"));
  CU_OK(cuLinkAddData(second, CU_JIT_INPUT_CUBIN, lib_image, lib_size, "lib.cubin", 0, nullptr,
                      nullptr));
  void* image = nullptr;
  CU_OK(cuLinkComplete(second, &image, nullptr));
  void* image_again = nullptr;
  CU_OK(cuLinkComplete(second, &image_again, nullptr));
  // Both images of `second` (and `first`'s) are still valid.
  CUmodule m = nullptr, m2 = nullptr, m3 = nullptr;
  CU_OK(cuModuleLoadData(&m, image));
  CU_OK(cuModuleLoadData(&m2, image_again));
  CU_OK(cuModuleLoadData(&m3, lib_image));
  expect_linked_results(m, run_kernel(m, "use_bar"), run_kernel(m, "use_helper"),
                        run_kernel(m2, "lib_kernel"));
  EXPECT_EQ(5u, run_kernel(m3, "lib_kernel")[4]);

  CU_OK(cuLinkDestroy(second));
  m_states.erase(std::find(m_states.begin(), m_states.end(), second));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(second));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLinkComplete(second, &image, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, add_ptx(second, k_lib_ptx, "x"));
  // The module loaded from the destroyed state's image is the driver's own copy.
  EXPECT_EQ(3u * 2 + 7, run_kernel(m, "use_bar")[2]);
}

TEST_F(Link, InputsTheEmulatedDeviceCannotLinkAreRefusedSayingWhy) {
  char error[2048] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {error, reinterpret_cast<void*>(sizeof error)};
  CUlinkState s = create(2, opts, vals);
  std::string bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k( {\n";
  EXPECT_CU(CUDA_ERROR_INVALID_PTX, add_ptx(s, bad, "bad.ptx"));
  EXPECT_NE(std::string(error).find("bad.ptx:"), std::string::npos) << error;
  std::string newer = std::string(k_lib_ptx);
  newer.replace(newer.find("sm_80"), 5, "sm_100");
  EXPECT_CU(CUDA_ERROR_INVALID_PTX, add_ptx(s, newer, "newer.ptx"));
  EXPECT_NE(std::string(error).find("sm_100"), std::string::npos) << error;
  std::string nvvm = "BC\xc0\xde";
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuLinkAddData(s, CU_JIT_INPUT_NVVM, nvvm.data(), nvvm.size(),
                                                    "lto.bc", 0, nullptr, nullptr));
  EXPECT_NE(std::string(error).find("LTO-IR"), std::string::npos) << error;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkAddData(s, CU_JIT_NUM_INPUT_TYPES, nvvm.data(),
                                                    nvvm.size(), "x", 0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLinkAddData(s, CU_JIT_INPUT_PTX, nullptr, 10, "x", 0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_FILE_NOT_FOUND,
            cuLinkAddFile(s, CU_JIT_INPUT_PTX, "/nonexistent/x.ptx", 0, nullptr, nullptr));
  // Not an archive, not an object.
  EXPECT_CU(CUDA_ERROR_INVALID_IMAGE, cuLinkAddData(s, CU_JIT_INPUT_LIBRARY, nvvm.data(),
                                                    nvvm.size(), "x.a", 0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_IMAGE, cuLinkAddData(s, CU_JIT_INPUT_OBJECT, nvvm.data(),
                                                    nvvm.size(), "x.o", 0, nullptr, nullptr));
  // Per input, the logs, wall time and target are refused, as cuda.h documents.
  CUjit_option per_input[] = {CU_JIT_ERROR_LOG_BUFFER};
  void* per_input_vals[] = {error};
  std::string ptx = k_lib_ptx;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkAddData(s, CU_JIT_INPUT_PTX, ptx.data(), ptx.size() + 1,
                                                    "lib.ptx", 1, per_input, per_input_vals));
  // Nothing was added: there is nothing to link.
  void* image = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkComplete(s, &image, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkComplete(s, nullptr, nullptr));
}

TEST_F(Link, CreateChecksItsOptionsAndNeedsAContextForItsTarget) {
  CUlinkState s = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(0, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, nullptr, nullptr, &s));
  {
    CUjit_option o[] = {CU_JIT_TARGET, CU_JIT_THREADS_PER_BLOCK};
    void* v[] = {reinterpret_cast<void*>(uintptr_t(CU_TARGET_COMPUTE_90)),
                 reinterpret_cast<void*>(uintptr_t(128))};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(2, o, v, &s));
  }
  {
    CUjit_option o[] = {CU_JIT_TARGET};
    void* v[] = {reinterpret_cast<void*>(uintptr_t(91))};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, o, v, &s));
  }
  {
    CUjit_option o[] = {CU_JIT_OPTIMIZATION_LEVEL};
    void* v[] = {reinterpret_cast<void*>(uintptr_t(5))};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, o, v, &s));
  }
  {
    CUjit_option o[] = {CU_JIT_NUM_OPTIONS};
    void* v[] = {nullptr};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, o, v, &s));
  }
  {
    // Accepted and meaningless here: optimization level, debug and line information, cache mode,
    // fallback strategy, log verbosity, position-independent code.
    CUjit_option o[] = {CU_JIT_OPTIMIZATION_LEVEL,        CU_JIT_GENERATE_DEBUG_INFO,
                        CU_JIT_GENERATE_LINE_INFO,        CU_JIT_CACHE_MODE,
                        CU_JIT_FALLBACK_STRATEGY,         CU_JIT_LOG_VERBOSE,
                        CU_JIT_POSITION_INDEPENDENT_CODE, CU_JIT_WALL_TIME};
    void* v[] = {reinterpret_cast<void*>(uintptr_t(2)),
                 reinterpret_cast<void*>(uintptr_t(1)),
                 reinterpret_cast<void*>(uintptr_t(1)),
                 reinterpret_cast<void*>(uintptr_t(CU_JIT_CACHE_OPTION_CG)),
                 reinterpret_cast<void*>(uintptr_t(CU_PREFER_PTX)),
                 nullptr,
                 nullptr,
                 reinterpret_cast<void*>(uintptr_t(0xffffffff))};
    CUlinkState t = create(8, o, v);
    CU_OK(add_ptx(t, k_lib_ptx, "lib.ptx"));
    void* image = nullptr;
    CU_OK(cuLinkComplete(t, &image, nullptr));
    float ms = -1;
    std::memcpy(&ms, &v[7], sizeof ms); // the wall time, written into the value slot
    EXPECT_GE(ms, 0.0f);
    EXPECT_LT(ms, 60000.0f);
  }
  // Without a current context the target must be given.
  CUcontext popped = nullptr;
  CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuLinkCreate(0, nullptr, nullptr, &s));
  CUjit_option o[] = {CU_JIT_TARGET};
  void* v[] = {reinterpret_cast<void*>(uintptr_t(CU_TARGET_COMPUTE_90))};
  CU_OK(cuLinkCreate(1, o, v, &s));
  m_states.push_back(s);
  CU_OK(cuCtxPushCurrent(popped));
}

TEST_F(Link, AnImageLinkedForAnotherTargetDoesNotLoadHere) {
  for (CUjit_target target : {CU_TARGET_COMPUTE_80, CU_TARGET_COMPUTE_100}) {
    CUjit_option o[] = {CU_JIT_TARGET};
    void* v[] = {reinterpret_cast<void*>(uintptr_t(target))};
    CUlinkState s = create(1, o, v);
    std::string ptx = k_lib_ptx; // .target sm_80: fits both
    CU_OK(add_ptx(s, ptx, "lib.ptx"));
    void* image = nullptr;
    CU_OK(cuLinkComplete(s, &image, nullptr));
    EXPECT_EQ(int(target), static_cast<const unsigned char*>(image)[0x31]);
    CUmodule m = nullptr;
    EXPECT_CU(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, image));
  }
}

// --- the register options reach the cost model's ptxas ------------------------------------------

TEST_F(Link, MaxRegistersActsAsOnAModuleLoadAndPerInputOptionsApplyToThatInputOnly) {
  const std::string heavy = heavy_ptx("heavy");
  // Unconstrained, and as cuModuleLoadDataEx applies CU_JIT_MAX_REGISTERS.
  CUmodule plain = nullptr, limited = nullptr;
  CU_OK(cuModuleLoadData(&plain, heavy.c_str()));
  CUjit_option o[] = {CU_JIT_MAX_REGISTERS};
  void* v[] = {reinterpret_cast<void*>(uintptr_t(32))};
  CU_OK(cuModuleLoadDataEx(&limited, heavy.c_str(), 1, o, v));
  const int unconstrained = num_regs(plain, "heavy");
  const int at_32 = num_regs(limited, "heavy");
  ASSERT_GT(unconstrained, 32) << "ptxas is needed for this test (HONE_EMU_PTXAS)";
  ASSERT_LE(at_32, 32);

  // The link's option: the image carries it, and the load's own options do not change it (a GPU
  // compiles nothing when it loads a cubin).
  CUlinkState s = create(1, o, v);
  CU_OK(add_ptx(s, heavy, "heavy.ptx"));
  void* image = nullptr;
  CU_OK(cuLinkComplete(s, &image, nullptr));
  CUmodule linked = nullptr;
  CUjit_option more[] = {CU_JIT_MAX_REGISTERS};
  void* more_v[] = {reinterpret_cast<void*>(uintptr_t(200))};
  CU_OK(cuModuleLoadDataEx(&linked, image, 1, more, more_v));
  EXPECT_EQ(at_32, num_regs(linked, "heavy"));
  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr;
  CU_OK(cuLibraryGetKernel(&k, lib, "heavy"));
  int regs = -1;
  CU_OK(cuKernelGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
  EXPECT_EQ(at_32, regs);
  CU_OK(cuLibraryUnload(lib));

  // Per input: the first input is limited, the second is not.
  CUlinkState t = create();
  std::string a = heavy_ptx("heavy_a"), b = heavy_ptx("heavy_b");
  CU_OK(cuLinkAddData(t, CU_JIT_INPUT_PTX, a.data(), a.size() + 1, "a.ptx", 1, o, v));
  CU_OK(add_ptx(t, b, "b.ptx"));
  CU_OK(cuLinkComplete(t, &image, nullptr));
  CUmodule both = nullptr;
  CU_OK(cuModuleLoadData(&both, image));
  EXPECT_LE(num_regs(both, "heavy_a"), 32);
  EXPECT_EQ(unconstrained, num_regs(both, "heavy_b"));
}

// --- inputs nvcc builds --------------------------------------------------------------------------

TEST_F(Link, FatbinsHostObjectsAndArchivesFromNvcc) {
  const std::string nvcc = HONE_NVCC;
  if (!std::filesystem::exists(nvcc)) GTEST_SKIP() << "no nvcc at " << nvcc;
  const auto dir = scratch_dir();
  const std::string bin = std::filesystem::path(nvcc).parent_path().string();
  // lib_b.o defines what user.ptx needs; lib_c.o defines `bar` too, and a static linker does not
  // pull it once lib_b.o has defined it (else: a multiple definition).
  write_file("lib_b.cu", "__device__ int gval = 7;\n"
                         "extern \"C\" __device__ int bar(int x) { return 3 * x; }\n");
  write_file("lib_c.cu", "extern \"C\" __device__ int bar(int x) { return -x; }\n"
                         "extern \"C\" __device__ int other(int x) { return x; }\n");
  const std::string gencode = " -rdc=true -gencode arch=compute_90,code=[compute_90,sm_90] ";
  const auto p = [&](const char* name) { return (dir / name).string(); };
  ASSERT_TRUE(run(nvcc + gencode + "-c " + p("lib_b.cu") + " -o " + p("lib_b.o")));
  ASSERT_TRUE(run(nvcc + gencode + "-c " + p("lib_c.cu") + " -o " + p("lib_c.o")));
  std::filesystem::remove(p("libbc.a"));
  ASSERT_TRUE(run(nvcc + " -lib " + p("lib_b.o") + " " + p("lib_c.o") + " -o " + p("libbc.a")));
  std::string lib_ptx = write_file("lib.ptx", k_lib_ptx);
  ASSERT_TRUE(run(bin + "/fatbinary --create=" + p("lib.fatbin") +
                  " -64 --image3=kind=ptx,sm=80,file=" + lib_ptx));
  ASSERT_TRUE(run(bin + "/ptxas -arch=sm_90 " + lib_ptx + " -o " + p("lib.cubin")));

  auto link_user_with = [&](CUjitInputType type, const std::string& path, bool from_file) {
    CUlinkState s = create();
    EXPECT_CU(CUDA_SUCCESS, add_ptx(s, k_user_ptx, "user.ptx"));
    if (from_file) {
      EXPECT_CU(CUDA_SUCCESS, cuLinkAddFile(s, type, path.c_str(), 0, nullptr, nullptr));
    } else {
      std::string bytes = read_file(path);
      EXPECT_CU(CUDA_SUCCESS, cuLinkAddData(s, type, bytes.data(), bytes.size(), path.c_str(), 0,
                                            nullptr, nullptr));
    }
    void* image = nullptr;
    EXPECT_CU(CUDA_SUCCESS, cuLinkComplete(s, &image, nullptr));
    CUmodule m = nullptr;
    if (image != nullptr) {
      EXPECT_CU(CUDA_SUCCESS, cuModuleLoadData(&m, image));
    }
    return m;
  };
  for (bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "cuLinkAddFile" : "cuLinkAddData");
    for (auto [type, path] : {std::pair{CU_JIT_INPUT_OBJECT, p("lib_b.o")},
                              std::pair{CU_JIT_INPUT_LIBRARY, p("libbc.a")}}) {
      SCOPED_TRACE(path);
      CUmodule m = link_user_with(type, path, from_file);
      ASSERT_NE(nullptr, m);
      const auto out = run_kernel(m, "use_bar");
      for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(3 * i + 7, out[i]);
    }
    CUmodule m = link_user_with(CU_JIT_INPUT_FATBINARY, p("lib.fatbin"), from_file);
    ASSERT_NE(nullptr, m);
    expect_linked_results(m, run_kernel(m, "use_bar"), run_kernel(m, "use_helper"),
                          run_kernel(m, "lib_kernel"));
  }

  // A cubin holds SASS only.
  char error[1024] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {error, reinterpret_cast<void*>(sizeof error)};
  CUlinkState s = create(2, opts, vals);
  EXPECT_CU(CUDA_ERROR_NO_BINARY_FOR_GPU,
            cuLinkAddFile(s, CU_JIT_INPUT_CUBIN, p("lib.cubin").c_str(), 0, nullptr, nullptr));
  EXPECT_NE(std::string(error).find("SASS"), std::string::npos) << error;
}

} // namespace
