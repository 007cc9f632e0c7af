// libhone-emu-jit.so: compiles decoded kernels to host code with LLVM's ORC JIT, for the block
// runner of the emulated device (emu/jit/README.md). One JIT per process, made at the first
// compile. A kernel's code is named by a digest of its generated IR: the same kernel loaded twice
// in a process shares one copy, and the object code is kept in the cache directory, so a kernel is
// optimized and compiled once per machine.
#include "emu/jit/abi.hpp"
#include "emu/jit/codegen.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace hone::emu::jit {

namespace {

struct CodeImpl : Code {
  std::string key;
  std::vector<uint8_t> entries;
  llvm::orc::ResourceTrackerSP tracker;
  uint32_t refs = 1;
};

// A cached object file ends with "HONEJIT1" and the xxh3-128 of the object before it.
constexpr size_t k_trailer_bytes = 8 + 16;

std::string object_trailer(llvm::StringRef object) {
  XXH128_hash_t h = XXH3_128bits(object.data(), object.size());
  std::string t = "HONEJIT1";
  t.append(reinterpret_cast<const char*>(&h.low64), 8);
  t.append(reinterpret_cast<const char*>(&h.high64), 8);
  return t;
}

// Writes what LLVM compiles to the file the engine named for the module (best effort: a cache
// that cannot be written only costs the next process a compile).
class ObjectFiles final : public llvm::ObjectCache {
public:
  void expect(const std::string& module, const std::string& path) {
    std::lock_guard lock(m_mutex);
    m_paths[module] = path;
  }

  void notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef object) override {
    std::string path;
    {
      std::lock_guard lock(m_mutex);
      auto it = m_paths.find(m->getModuleIdentifier());
      if (it == m_paths.end()) return;
      path = it->second;
      m_paths.erase(it);
    }
    const std::string dir = path.substr(0, path.rfind('/'));
    if (llvm::sys::fs::create_directories(dir)) return;
    llvm::SmallString<128> tmp;
    int fd = -1;
    if (llvm::sys::fs::createUniqueFile(path + ".%%%%%%", fd, tmp)) return;
    {
      // The object, then a trailer: a file changed or cut afterwards is never handed to LLVM.
      llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << object.getBuffer();
      const std::string trailer = object_trailer(object.getBuffer());
      out << trailer;
      out.close();
      if (out.has_error()) {
        out.clear_error();
        llvm::sys::fs::remove(tmp);
        return;
      }
    }
    if (llvm::sys::fs::rename(tmp, path)) llvm::sys::fs::remove(tmp);
  }

  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module*) override {
    return nullptr; // the engine reads the file itself, before optimizing anything
  }

private:
  std::mutex m_mutex;
  std::map<std::string, std::string> m_paths;
};

class Engine {
public:
  // The process's JIT, or nullptr with `error` set.
  static Engine* get(std::string& error) {
    static std::once_flag once;
    static Engine* engine = nullptr;
    static std::string failure;
    std::call_once(once, [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
      if (!host) {
        failure = "no target for this host: " + llvm::toString(host.takeError());
        return;
      }
      host->setCodeGenOptLevel(llvm::CodeGenOpt::Less);
      // Everything the object code depends on besides the IR: a cached object from another
      // LLVM, CPU or setting never matches.
      std::string salt = "hone-emu-jit abi " + std::to_string(k_abi_version) + " llvm " +
                         LLVM_VERSION_STRING + " " + host->getTargetTriple().str() + " " +
                         host->getCPU() + " " + host->getFeatures().getString() +
                         " codegen less, ir O1\n";
      auto files = std::make_unique<ObjectFiles>();
      ObjectFiles* cache = files.get();
      auto jit = llvm::orc::LLJITBuilder()
                     .setJITTargetMachineBuilder(*host)
                     .setCompileFunctionCreator(
                         [cache](llvm::orc::JITTargetMachineBuilder jtmb)
                             -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                           auto tm = jtmb.createTargetMachine();
                           if (!tm) return tm.takeError();
                           return std::make_unique<llvm::orc::TMOwningSimpleCompiler>(
                               std::move(*tm), cache);
                         })
                     .create();
      if (!jit) {
        failure = "cannot start LLVM's JIT: " + llvm::toString(jit.takeError());
        return;
      }
      // Math functions LLVM calls where the host lacks an instruction (fmaf without FMA,
      // roundevenf without SSE4.1) come from the process, which has libm.
      auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
          (*jit)->getDataLayout().getGlobalPrefix());
      if (!process) {
        failure = "cannot search the process for symbols: " + llvm::toString(process.takeError());
        return;
      }
      (*jit)->getMainJITDylib().addGenerator(std::move(*process));
      engine = new Engine(std::move(*jit), std::move(files), std::move(salt)); // for the process
    });
    if (!engine) error = failure;
    return engine;
  }

  const Code* compile(const CompiledKernel& kernel, const std::string& cache_dir,
                      std::string& error) {
    auto context = std::make_unique<llvm::LLVMContext>();
    Generated g;
    try {
      g = generate(kernel, *context, "hone_kernel");
    } catch (const std::exception& e) {
      error = e.what();
      return nullptr;
    }
    const std::string key = digest(*g.module);
    std::lock_guard lock(m_mutex);
    if (auto it = m_loaded.find(key); it != m_loaded.end()) {
      ++it->second->refs;
      return it->second;
    }
    const std::string symbol = "hone_kernel_" + key;
    g.module->getFunction("hone_kernel")->setName(symbol);
    g.module->setModuleIdentifier(key);
    g.module->setDataLayout(m_jit->getDataLayout());
    auto code = std::make_unique<CodeImpl>();
    code->key = key;
    code->entries = std::move(g.entry);
    code->entry = code->entries.data();
    code->instructions = uint32_t(code->entries.size());
    code->inline_forms = g.inline_forms;
    code->helper_forms = g.helper_forms;
    const std::string path = cache_dir.empty() ? std::string() : cache_dir + "/" + key + ".jit.o";
    if (!path.empty() && load_object(*code, path, symbol)) {
      code->from_cache = true;
    } else {
      optimize(*g.module);
      if (!path.empty()) m_files->expect(key, path);
      code->tracker = m_jit->getMainJITDylib().createResourceTracker();
      if (auto e = m_jit->addIRModule(
              code->tracker, llvm::orc::ThreadSafeModule(std::move(g.module), std::move(context)))) {
        error = "LLVM rejected the module: " + llvm::toString(std::move(e));
        return nullptr;
      }
      auto address = m_jit->lookup(symbol);
      if (!address) {
        error = "LLVM could not compile the module: " + llvm::toString(address.takeError());
        llvm::consumeError(code->tracker->remove());
        return nullptr;
      }
      code->run = reinterpret_cast<void (*)(Frame*)>(address->getAddress());
    }
    m_loaded[key] = code.get();
    return code.release();
  }

  void release(const Code* released) {
    auto* code = const_cast<CodeImpl*>(static_cast<const CodeImpl*>(released));
    std::lock_guard lock(m_mutex);
    if (--code->refs) return;
    m_loaded.erase(code->key);
    llvm::consumeError(code->tracker->remove());
    delete code;
  }

private:
  Engine(std::unique_ptr<llvm::orc::LLJIT> jit, std::unique_ptr<ObjectFiles> files, std::string salt)
      : m_jit(std::move(jit)), m_files(std::move(files)), m_salt(std::move(salt)) {}

  // The name of a kernel's code: SHA-1 of the settings and the IR before optimization.
  std::string digest(const llvm::Module& module) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os, nullptr);
    os.flush();
    llvm::SHA1 sha;
    sha.update(m_salt);
    sha.update(text);
    const auto hash = sha.final();
    static const char* const k_hex = "0123456789abcdef";
    std::string out;
    for (unsigned char c : hash.str()) {
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
    return out;
  }

  // Links the object file at `path` (written by an earlier compile of the same IR); false when
  // there is none or it does not load, and nothing stays linked.
  bool load_object(CodeImpl& code, const std::string& path, const std::string& symbol) {
    auto file = llvm::MemoryBuffer::getFile(path);
    if (!file) return false;
    llvm::StringRef bytes = (*file)->getBuffer();
    if (bytes.size() <= k_trailer_bytes ||
        bytes.substr(bytes.size() - k_trailer_bytes) !=
            object_trailer(bytes.substr(0, bytes.size() - k_trailer_bytes))) {
      llvm::sys::fs::remove(path); // changed, cut or foreign: compiled and written again
      return false;
    }
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
        bytes.substr(0, bytes.size() - k_trailer_bytes), path);
    code.tracker = m_jit->getMainJITDylib().createResourceTracker();
    if (auto e = m_jit->addObjectFile(code.tracker, std::move(buffer))) {
      llvm::consumeError(std::move(e));
      llvm::consumeError(code.tracker->remove());
      return false;
    }
    auto address = m_jit->lookup(symbol);
    if (!address) {
      llvm::consumeError(address.takeError());
      llvm::consumeError(code.tracker->remove());
      llvm::sys::fs::remove(path); // unusable: the next compile writes it again
      return false;
    }
    code.run = reinterpret_cast<void (*)(Frame*)>(address->getAddress());
    return true;
  }

  // LLVM's O1 pipeline: promotes the timeline to registers, forwards register values between
  // instructions and removes dead stores; code generation at the "less" level.
  static void optimize(llvm::Module& module) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb;
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1).run(module, mam);
  }

  std::unique_ptr<llvm::orc::LLJIT> m_jit;
  std::unique_ptr<ObjectFiles> m_files;
  std::string m_salt;
  std::mutex m_mutex;
  std::map<std::string, CodeImpl*> m_loaded; // by key
};

const Code* compile(const CompiledKernel& kernel, const std::string& cache_dir,
                    std::string& error) {
  Engine* engine = Engine::get(error);
  return engine ? engine->compile(kernel, cache_dir, error) : nullptr;
}

void release(const Code* code) {
  std::string ignored;
  if (code) Engine::get(ignored)->release(code);
}

const Api k_api{k_abi_version, &compile, &release};

} // namespace

} // namespace hone::emu::jit

extern "C" __attribute__((visibility("default"))) const hone::emu::jit::Api*
hone_emu_jit_api(uint32_t abi_version) {
  return abi_version == hone::emu::jit::k_abi_version ? &hone::emu::jit::k_api : nullptr;
}
