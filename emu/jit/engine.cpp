// libhone-emu-jit.so: compiles decoded kernels to host code with LLVM's ORC JIT, for the block
// runner of the emulated device (emu/jit/README.md). One JIT per process, made at the first
// compile; every kernel is a module of its own, removed again by release().
#include "emu/jit/abi.hpp"
#include "emu/jit/codegen.hpp"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace hone::emu::jit {

namespace {

struct CodeImpl : Code {
  std::vector<uint8_t> entries;
  llvm::orc::ResourceTrackerSP tracker;
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
      auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*host)).create();
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
      engine = new Engine(std::move(*jit)); // lives as long as the process
    });
    if (!engine) error = failure;
    return engine;
  }

  const Code* compile(const CompiledKernel& kernel, std::string& error) {
    const std::string name = "hone_kernel_" + std::to_string(m_next.fetch_add(1));
    auto context = std::make_unique<llvm::LLVMContext>();
    Generated g;
    try {
      g = generate(kernel, *context, name);
    } catch (const std::exception& e) {
      error = e.what();
      return nullptr;
    }
    g.module->setDataLayout(m_jit->getDataLayout());
    optimize(*g.module);
    auto code = std::make_unique<CodeImpl>();
    code->entries = std::move(g.entry);
    code->entry = code->entries.data();
    code->instructions = uint32_t(code->entries.size());
    code->inline_forms = g.inline_forms;
    code->helper_forms = g.helper_forms;
    std::lock_guard lock(m_mutex);
    code->tracker = m_jit->getMainJITDylib().createResourceTracker();
    if (auto e = m_jit->addIRModule(code->tracker,
                                    llvm::orc::ThreadSafeModule(std::move(g.module), std::move(context)))) {
      error = "LLVM rejected the module: " + llvm::toString(std::move(e));
      return nullptr;
    }
    auto symbol = m_jit->lookup(name);
    if (!symbol) {
      error = "LLVM could not compile the module: " + llvm::toString(symbol.takeError());
      llvm::consumeError(code->tracker->remove());
      return nullptr;
    }
    code->run = reinterpret_cast<void (*)(Frame*)>(symbol->getAddress());
    return code.release();
  }

  void release(const Code* code) {
    auto* c = const_cast<CodeImpl*>(static_cast<const CodeImpl*>(code));
    {
      std::lock_guard lock(m_mutex);
      llvm::consumeError(c->tracker->remove());
    }
    delete c;
  }

private:
  explicit Engine(std::unique_ptr<llvm::orc::LLJIT> jit) : m_jit(std::move(jit)) {}

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
  std::mutex m_mutex;
  std::atomic<uint64_t> m_next{0};
};

const Code* compile(const CompiledKernel& kernel, std::string& error) {
  Engine* engine = Engine::get(error);
  return engine ? engine->compile(kernel, error) : nullptr;
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
