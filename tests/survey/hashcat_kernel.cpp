#include "hashcat_kernel.hpp"

#include "cuda/nvrtc.hpp"

#include <xxhash.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

namespace hone::survey {

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

Result<HashcatModes> read_hashcat_modes(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  HashcatModes modes;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    unsigned long long mode = 0, kern = 0;
    HashcatMode m;
    if (std::sscanf(line.c_str(), "%llu %llu %u %u %u %u %u %u", &mode, &kern, &m.attack_exec,
                    &m.dgst_r[0], &m.dgst_r[1], &m.dgst_r[2], &m.dgst_r[3], &m.dgst_elem) != 8) {
      return make_error(path + ": cannot read the line '" + line + "'");
    }
    m.kern_type = kern;
    modes[uint32_t(mode)] = m;
  }
  return modes;
}

Result<std::string> compile_hashcat_kernel(const std::string& root, const std::string& file,
                                           const HashcatModes& modes, const std::string& ptx_dir) {
  // hashcat's cpath_real: the OpenCL folder's real path (src/folder.c), the value of INCLUDE_PATH
  // through which every kernel includes its headers (#include M2S(INCLUDE_PATH/inc_vendor.h)).
  char real[PATH_MAX];
  const std::string opencl = root + "/OpenCL";
  if (realpath(opencl.c_str(), real) == nullptr) return make_error("no hashcat kernels in " + opencl);
  const std::string path = std::string(real) + "/" + file;
  auto source = read_file(path);
  if (!source) return source.error();

  // The mode and the attack from the name: m<mode>_a<attack>-<pure|optimized>.cl, or
  // m<mode>-<pure|optimized>.cl for a slow hash (its loop kernels take no attack).
  HashcatMode mode = modes.count(0) ? modes.at(0) : HashcatMode{};
  unsigned attack = 0;
  std::smatch match;
  static const std::regex mode_name(R"(m(\d+)(_a(\d))?-(pure|optimized)\.cl)");
  static const std::regex amp_name(R"(amp_a(\d)\.cl)");
  if (std::regex_match(file, match, mode_name)) {
    const auto it = modes.find(uint32_t(std::stoul(match[1])));
    if (it == modes.end()) return make_error(file + ": mode " + match[1].str() + " is not in the table");
    mode = it->second;
    if (match[3].matched) attack = unsigned(std::stoul(match[3]));
  } else if (std::regex_match(file, match, amp_name)) {
    // The amplifier kernels are loaded only for hashes looped outside the kernel (src/backend.c:
    // "amplifier kernel", attack_exec != ATTACK_EXEC_INSIDE_KERNEL); their build options say so,
    // and inc_platform.cl declares the rule and mask buffers only then.
    attack = unsigned(std::stoul(match[1]));
    mode.attack_exec = 10;
  }
  // ATTACK_KERN: straight 0, combinator 1, brute force (mask) 3 (include/types.h), the same
  // numbers as the attack modes these kernels serve.
  const unsigned attack_kern = attack;

  // src/backend.c (hashcat 6.2.6), load_kernel() and the build options before it: the fixed
  // NVRTC options, then build_options_buf split at spaces (nvrtc_make_options_array_from_string).
  // CUDA devices: LOCAL_MEM_TYPE CL_LOCAL (1), VENDOR_ID_NV (32), CUDA_ARCH sm*100+minor*10,
  // has_add/addc/sub/subc/bfe/lop3/mov64/prmt true from sm 5.0 on, the AMD-only vadd... flags
  // false, VECT_SIZE the vector width (1 on CUDA without a tuning-database entry),
  // DEVICE_TYPE CL_DEVICE_TYPE_GPU (4). A module's own jit_build_options (110 modules; most add
  // "-D _unroll" under conditions on the device) are not reproduced.
  std::vector<std::string> options = {
      "--restrict", "--device-as-default-execution-space", "--gpu-architecture", "compute_90",
      "-D INCLUDE_PATH=" + std::string(real), "-D XM2S(x)=#x", "-D M2S(x)=XM2S(x)"};
  char build[2048];
  std::snprintf(build, sizeof build,
                "-D KERNEL_STATIC -D LOCAL_MEM_TYPE=1 -D VENDOR_ID=32 -D CUDA_ARCH=900 -D HAS_ADD=1 "
                "-D HAS_ADDC=1 -D HAS_SUB=1 -D HAS_SUBC=1 -D HAS_VADD=0 -D HAS_VADDC=0 "
                "-D HAS_VADD_CO=0 -D HAS_VADDC_CO=0 -D HAS_VSUB=0 -D HAS_VSUBB=0 -D HAS_VSUB_CO=0 "
                "-D HAS_VSUBB_CO=0 -D HAS_VPERM=0 -D HAS_VADD3=0 -D HAS_VBFE=0 -D HAS_BFE=1 "
                "-D HAS_LOP3=1 -D HAS_MOV64=1 -D HAS_PRMT=1 -D VECT_SIZE=1 -D DEVICE_TYPE=4 "
                "-D DGST_R0=%u -D DGST_R1=%u -D DGST_R2=%u -D DGST_R3=%u -D DGST_ELEM=%u "
                "-D KERN_TYPE=%llu -D ATTACK_EXEC=%u -D ATTACK_KERN=%u -D ATTACK_MODE=%u -w",
                mode.dgst_r[0], mode.dgst_r[1], mode.dgst_r[2], mode.dgst_r[3], mode.dgst_elem,
                static_cast<unsigned long long>(mode.kern_type), mode.attack_exec, attack_kern, attack);
  std::istringstream words(build);
  for (std::string w; words >> w;) options.push_back(w);

  std::string cached;
  if (!ptx_dir.empty()) {
    std::string key = *source + cuda::nvrtc_version();
    for (const auto& o : options) key += '\n' + o;
    char name[64];
    std::snprintf(name, sizeof name, "-%016llx.ptx",
                  static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
    cached = ptx_dir + "/" + file + name;
    if (auto ptx = read_file(cached)) return ptx;
  }
  auto out = cuda::nvrtc_compile(*source, path, options);
  if (!out) return make_error(file + ": " + out.error().message);
  if (!cached.empty()) {
    std::filesystem::create_directories(ptx_dir);
    const std::string tmp = cached + ".tmp";
    std::ofstream(tmp, std::ios::binary) << out->ptx;
    std::filesystem::rename(tmp, cached);
  }
  return std::move(out->ptx);
}

} // namespace hone::survey
