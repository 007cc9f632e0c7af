// Program::load and Kernel::launch: module variables, launch checks, blocks on the pool, and the
// cost model (emu/README.md, "Cost model: kernels").
#include "emu/cost_model.hpp"
#include "emu/exec_decode.hpp"
#include "emu/exec_interp.hpp"
#include "emu/exec_jit.hpp"
#include "emu/exec_pool.hpp"
#include "emu/kernel_registers.hpp"
#include "emu/log.hpp"
#include "emu/memory.hpp"
#include "emu/program.hpp"
#include "ptx/parser.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include <cuda.h>

namespace hone::emu {

namespace {

// Bytes of a cooperative launch's grid barrier workspace (cooperative groups uses the word at
// offset 4 as its arrival counter).
constexpr uint64_t k_grid_workspace_bytes = 256;

constexpr uint64_t k_default_budget = 10'000'000'000ull;

uint64_t default_budget() {
  static const uint64_t budget = [] {
    if (const char* e = std::getenv("HONE_EMU_INSTRUCTION_BUDGET")) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(e, &end, 10);
      if (end != e && v > 0) return uint64_t(v);
    }
    return k_default_budget;
  }();
  return budget;
}

// The order blocks are handed to the pool in: block `at(i)` is the i-th to start. Without a seed
// the grid order; with one, a seeded permutation of [0, n) that needs no memory (grids may have
// 2^63 blocks): a 4-round Feistel network on the smallest even number of bits covering n, with
// cycle-walking past values >= n, which keeps it a bijection on [0, n).
class BlockOrder {
public:
  BlockOrder(uint64_t n, uint64_t seed) : m_n(n) {
    if (seed == 0 || n < 2) return;
    unsigned bits = unsigned(std::bit_width(n - 1));
    m_half = (bits + 1) / 2;
    m_mask = (uint64_t(1) << m_half) - 1;
    uint64_t k = seed;
    for (auto& key : m_keys) key = k = schedule_mix(k);
  }

  uint64_t at(uint64_t i) const {
    if (m_half == 0) return i;
    uint64_t x = i;
    do x = feistel(x);
    while (x >= m_n);
    return x;
  }

private:
  uint64_t feistel(uint64_t x) const {
    uint64_t left = x >> m_half, right = x & m_mask;
    for (uint64_t key : m_keys) {
      uint64_t next = left ^ (schedule_mix(right ^ key) & m_mask);
      left = right;
      right = next;
    }
    return (left << m_half) | right;
  }

  uint64_t m_n;
  unsigned m_half = 0; // 0: the identity
  uint64_t m_mask = 0;
  uint64_t m_keys[4] = {};
};

// The registers of a module's kernels, compiled once, when a kernel first needs them.
class ModuleResources {
public:
  ModuleResources(std::string ptx, const CompileOptions& options)
      : m_ptx(std::move(ptx)), m_options(options) {}

  // Registers per thread of `kernel`, and whether ptxas said so (otherwise assumed).
  std::pair<uint32_t, bool> registers(const std::string& kernel) {
    std::call_once(m_once, [&] {
      m_registers = kernel_registers(m_ptx, m_options);
      m_ptx.clear();
      m_ptx.shrink_to_fit();
      if (!m_registers.lowered_version.empty()) {
        log(LogLevel::info, "cost model: ptxas refused a module's newer PTX ISA version; its "
                            "register counts are ptxas's for the module declaring .version " +
                                m_registers.lowered_version);
      }
      if (!m_registers.error.empty()) {
        log(LogLevel::warn, "cost model: no register counts for a module (" + m_registers.error +
                                "); assuming " + std::to_string(k_fallback_registers) +
                                " registers per thread");
      }
    });
    auto it = m_registers.by_kernel.find(kernel);
    if (it == m_registers.by_kernel.end()) return {k_fallback_registers, false};
    return {it->second, true};
  }

private:
  std::string m_ptx;
  CompileOptions m_options;
  std::once_flag m_once;
  ModuleRegisters m_registers;
};

class KernelImpl final : public Kernel {
public:
  KernelImpl(CompiledKernel code, std::shared_ptr<ModuleResources> resources)
      : m_code(std::move(code)), m_resources(std::move(resources)) {
    for (size_t i = 0; i < m_code.param_offsets.size(); ++i) {
      m_params.push_back({m_code.param_offsets[i], m_code.param_sizes[i]});
    }
    m_attrs.static_shared_bytes = m_code.static_shared_bytes;
    m_attrs.local_bytes = m_code.local_bytes;
    m_attrs.ptx_version = m_code.ptx_version;
    m_attrs.max_dynamic_shared_bytes =
        DeviceLimits::k_shared_per_block > m_code.static_shared_bytes
            ? DeviceLimits::k_shared_per_block - m_code.static_shared_bytes
            : 0;
  }

  void set_limits(std::optional<std::array<int64_t, 3>> maxntid,
                  std::optional<std::array<int64_t, 3>> reqntid) {
    m_reqntid = reqntid;
    if (maxntid) {
      int64_t n = (*maxntid)[0] * (*maxntid)[1] * (*maxntid)[2];
      if (n > 0 && n < DeviceLimits::k_max_threads_per_block) m_attrs.max_threads_per_block = uint32_t(n);
    }
    if (reqntid) {
      int64_t n = (*reqntid)[0] * (*reqntid)[1] * (*reqntid)[2];
      if (n > 0 && n < DeviceLimits::k_max_threads_per_block) m_attrs.max_threads_per_block = uint32_t(n);
    }
  }

  const std::string& name() const override { return m_code.name; }
  const std::vector<ParamSlot>& params() const override { return m_params; }
  uint32_t param_bytes() const override { return m_code.param_bytes; }
  KernelAttributes& attributes() override {
    m_attrs.num_regs = m_resources->registers(m_code.name).first;
    return m_attrs;
  }

  LaunchOutcome launch(const LaunchRequest& r) override {
    LaunchOutcome out;
    auto invalid = [&](const std::string& why) {
      out.status = CUDA_ERROR_INVALID_VALUE;
      out.message = "launch of " + m_code.name + ": " + why;
      return out;
    };
    if (!m_code.unsupported.empty()) {
      out.status = CUDA_ERROR_NOT_SUPPORTED;
      out.message = "kernel " + m_code.name + " cannot run on the emulated device: " +
                    m_code.unsupported;
      return out;
    }
    const Dim3& b = r.block;
    const Dim3& g = r.grid;
    if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z) return invalid("a zero grid or block dimension");
    if (b.x > DeviceLimits::k_max_block_dim_xy || b.y > DeviceLimits::k_max_block_dim_xy ||
        b.z > DeviceLimits::k_max_block_dim_z) {
      return invalid("block dimension over the device limit");
    }
    if (b.count() > m_attrs.max_threads_per_block) {
      return invalid("block of " + std::to_string(b.count()) + " threads; the kernel allows " +
                     std::to_string(m_attrs.max_threads_per_block));
    }
    if (m_reqntid && (int64_t(b.x) != (*m_reqntid)[0] || int64_t(b.y) != (*m_reqntid)[1] ||
                      int64_t(b.z) != (*m_reqntid)[2])) {
      return invalid("block shape differs from the kernel's .reqntid");
    }
    if (g.x > DeviceLimits::k_max_grid_dim_x || g.y > DeviceLimits::k_max_grid_dim_yz ||
        g.z > DeviceLimits::k_max_grid_dim_yz) {
      return invalid("grid dimension over the device limit");
    }
    if (r.dynamic_shared_bytes > m_attrs.max_dynamic_shared_bytes) {
      return invalid(std::to_string(r.dynamic_shared_bytes) +
                     " bytes of dynamic shared memory; the kernel allows " +
                     std::to_string(m_attrs.max_dynamic_shared_bytes) +
                     " (raise it with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    if (r.params_size < m_code.param_bytes || (m_code.param_bytes && !r.params)) {
      return invalid("parameter buffer of " + std::to_string(r.params_size) +
                     " bytes; the kernel takes " + std::to_string(m_code.param_bytes));
    }

    // A cooperative grid's barrier workspace: zeroed memory the kernel's accesses are checked
    // against like any allocation, freed with the launch.
    struct Workspace {
      uint64_t address = 0;
      ~Workspace() {
        if (address) memory().release(address);
      }
    } workspace;
    if (r.cooperative) {
      auto w = memory().allocate(k_grid_workspace_bytes, AllocKind::device, this);
      if (!w) {
        out.status = CUDA_ERROR_OUT_OF_MEMORY;
        out.message = "launch of " + m_code.name + ": no memory for the grid's barrier";
        return out;
      }
      workspace.address = *w;
    }

    LaunchShared shared;
    shared.grid_workspace = workspace.address;
    shared.kernel = &m_code;
    shared.grid = g;
    shared.block = b;
    shared.dynamic_shared_bytes = r.dynamic_shared_bytes;
    shared.params = r.params;
    auto table = memory().snapshot();
    shared.table = table.get();
    shared.instruction_budget = r.instruction_budget ? r.instruction_budget : default_budget();
    shared.schedule_seed = r.schedule_seed;
    shared.fill_seed = r.fill_seed;
    shared.print_fifo_bytes = r.print_fifo_bytes;
    shared.globaltimer_ns = r.globaltimer_ns;

    const uint64_t blocks = g.count();
    const auto [registers, from_ptxas] = m_resources->registers(m_code.name);
    const uint32_t shared_bytes =
        r.dynamic_shared_bytes
            ? uint32_t((uint64_t(m_code.static_shared_bytes) + m_code.dynamic_shared_align - 1) /
                           m_code.dynamic_shared_align * m_code.dynamic_shared_align +
                       r.dynamic_shared_bytes)
            : m_code.static_shared_bytes;
    const cost::Occupancy occupancy = cost::occupancy(uint32_t(b.count()), registers, shared_bytes);
    cost::SectorSet sectors;
    cost::LaunchModel model(blocks, occupancy);
    shared.sectors = &sectors;
    shared.l1_bytes_per_block = occupancy.l1_bytes_per_block;
    // Each warp remembers about its share of the block's L1, in sectors (a power of two).
    const uint64_t per_warp = occupancy.l1_bytes_per_block / cost::k_sector_bytes /
                              occupancy.warps_per_block;
    shared.history_sectors =
        uint32_t(std::bit_floor(std::clamp<uint64_t>(per_warp, 16, 4096)));
    // A cooperative grid's blocks wait for each other at grid barriers: all of them run at once,
    // one host thread each (the driver checked that the grid fits the device at once).
    const unsigned workers = r.cooperative ? unsigned(blocks) : pool_workers();
    const ExecMode mode = execution_mode();
    shared.code = m_jit.for_launch(m_code, mode, blocks * b.count());
    out.path = shared.code ? ExecPath::compiled : ExecPath::interpreter;
    std::vector<std::unique_ptr<BlockRunner>> runners(workers);
    std::mutex merge;
    std::vector<std::pair<uint64_t, std::vector<DevicePrint>>> prints; // by block
    uint64_t fail_block = UINT64_MAX;
    BlockResult failure;
    const BlockOrder order(blocks, r.schedule_seed);
    auto run_block = [&](unsigned w, uint64_t position) {
      // `i` is the block's linear index: what it computes and, for the cost model, which SM it
      // is charged to, whatever order it started in.
      const uint64_t i = order.at(position);
      if (shared.abort.load(std::memory_order_relaxed)) return;
      try {
        if (!runners[w]) runners[w] = std::make_unique<BlockRunner>(shared);
      } catch (const std::bad_alloc&) {
        std::lock_guard lock(merge);
        if (i < fail_block) {
          fail_block = i;
          failure.status = CUDA_ERROR_OUT_OF_MEMORY;
          failure.message = "out of host memory for the block state of " + m_code.name;
        }
        shared.abort = true;
        return;
      }
      BlockResult br = runners[w]->run(i);
      std::lock_guard lock(merge);
      if (br.status) {
        if (i < fail_block) {
          fail_block = i;
          failure = br;
        }
        shared.abort = true;
      } else if (!br.message.empty() || br.warp_instructions) {
        // a block stopped because another failed leaves status 0 and no message
      }
      model.add(i, br.cost);
      out.warp_instructions += br.warp_instructions;
      out.thread_instructions += br.thread_instructions;
      out.memory_sectors += br.memory_sectors;
      out.compiled_warp_instructions += br.compiled_warp_instructions;
      out.prints_dropped += br.prints_dropped;
      if (!br.prints.empty()) prints.emplace_back(i, std::move(br.prints));
    };
    if (r.cooperative) {
      std::vector<std::thread> threads;
      try {
        threads.reserve(blocks);
        for (uint64_t b = 0; b < blocks; ++b) threads.emplace_back(run_block, unsigned(b), b);
      } catch (const std::exception&) {
        // Blocks already started may wait at a grid barrier for those that could not: stop them.
        shared.abort = true;
        for (auto& t : threads) t.join();
        out.status = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
        out.message = "launch of " + m_code.name + ": cannot run its " + std::to_string(blocks) +
                      " cooperative blocks at once on this host";
        return out;
      }
      for (auto& t : threads) t.join();
    } else {
      parallel_for(blocks, run_block);
    }
    if (fail_block != UINT64_MAX) {
      out.status = failure.status;
      out.message = failure.message;
    }
    // printf records in block order, as a GPU whose blocks ran one after another would give them
    std::sort(prints.begin(), prints.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [block, records] : prints)
      for (auto& p : records) out.prints.push_back(std::move(p));
    if (out.path == ExecPath::interpreter) m_jit.interpreted(out.thread_instructions);
    const cost::Breakdown m = model.finish(registers, from_ptxas);
    out.modeled_ns = cost::cycles_to_ns(m.total_cycles);
    ModeledCost& mc = out.cost;
    mc.registers = registers;
    mc.registers_assumed = !from_ptxas;
    mc.blocks_per_sm = occupancy.blocks_per_sm;
    mc.warps_per_sm = occupancy.blocks_per_sm * occupancy.warps_per_block;
    mc.occupancy_limit = occupancy.limit;
    mc.waves = m.waves;
    mc.issue_ns = cost::cycles_to_ns(m.issue_cycles);
    mc.latency_ns = cost::cycles_to_ns(m.path_cycles);
    mc.l1_ns = cost::cycles_to_ns(m.l1_cycles);
    mc.l2_ns = cost::cycles_to_ns(m.l2_cycles);
    mc.dram_ns = cost::cycles_to_ns(m.dram_cycles);
    mc.l2_bytes = m.l2_bytes;
    mc.dram_bytes = m.dram_bytes;
    mc.bound = m.bound;
    return out;
  }

private:
  CompiledKernel m_code;
  std::shared_ptr<ModuleResources> m_resources;
  std::vector<ParamSlot> m_params;
  KernelAttributes m_attrs;
  std::optional<std::array<int64_t, 3>> m_reqntid;
  KernelCode m_jit;
};

class ProgramImpl final : public Program {
public:
  ~ProgramImpl() override {
    for (auto& [name, g] : m_globals) {
      if (!m_borrowed.count(name)) memory().release(g.address);
    }
  }

  Result<void> init(std::string_view ptx, std::string_view name, const ManagedSymbols* shared,
                    const CompileOptions& options) {
    auto parsed = ptx::parse(ptx, name);
    if (!parsed) return make_error(parsed.error().message, CUDA_ERROR_INVALID_PTX);
    m_module = std::move(*parsed);
    if (auto r = allocate_variables(shared); !r) return r;
    SymbolAddresses addresses;
    for (const auto& [n, g] : m_globals) addresses[n] = g.address;
    auto resources = std::make_shared<ModuleResources>(std::string(ptx), options);
    for (const auto* f : m_module.entries()) {
      auto k = std::make_unique<KernelImpl>(decode_kernel(m_module, *f, addresses), resources);
      const ptx::FuncDirective* maxntid = f->directive("maxntid");
      const ptx::FuncDirective* reqntid = f->directive("reqntid");
      auto dims = [](const ptx::FuncDirective* d) -> std::optional<std::array<int64_t, 3>> {
        if (!d || d->values.empty()) return std::nullopt;
        std::array<int64_t, 3> v{1, 1, 1};
        for (size_t i = 0; i < d->values.size() && i < 3; ++i) v[i] = d->values[i];
        return v;
      };
      k->set_limits(dims(maxntid), dims(reqntid));
      m_kernels.push_back(std::move(k));
    }
    return ok();
  }

  Kernel* kernel(std::string_view kname) override {
    for (auto& k : m_kernels) {
      if (k->name() == kname) return k.get();
    }
    return nullptr;
  }

  std::vector<std::string> kernel_names() const override {
    std::vector<std::string> out;
    for (const auto& k : m_kernels) out.push_back(k->name());
    return out;
  }

  std::optional<GlobalSymbol> global(std::string_view gname) const override {
    auto it = m_globals.find(gname);
    if (it == m_globals.end()) return std::nullopt;
    return it->second;
  }

  ManagedSymbols managed() const override {
    ManagedSymbols out;
    for (auto name : m_managed) out.emplace(std::string(name), m_globals.at(name));
    return out;
  }

private:
  // .global and .const variables live in device memory the program owns, initialized from
  // their initializers (which may hold the addresses of other variables).
  Result<void> allocate_variables(const ManagedSymbols* shared) {
    std::vector<const ptx::VarDecl*> vars;
    for (const auto& it : m_module.items) {
      const auto* v = std::get_if<ptx::VarDecl>(&it.item);
      if (!v || (v->space != ptx::Space::global && v->space != ptx::Space::const_)) continue;
      if (v->is_extern()) continue;
      const bool managed = v->space == ptx::Space::global && is_managed(*v);
      if (managed) m_managed.push_back(v->name);
      if (managed && shared) {
        // One managed variable per library: the memory the library's first program made. It was
        // initialized then (and may have been written since): leave it as it is.
        if (auto s = shared->find(v->name); s != shared->end()) {
          m_globals[v->name] = s->second;
          m_borrowed.insert(v->name);
          continue;
        }
      }
      uint64_t size = std::max<uint64_t>(v->size_bytes(), 1);
      auto addr = memory().allocate(
          size, v->space == ptx::Space::const_ ? AllocKind::const_var : AllocKind::global_var,
          this, managed);
      if (!addr) return addr.error();
      m_globals[v->name] = GlobalSymbol{*addr, v->size_bytes()};
      vars.push_back(v);
    }
    for (const auto* v : vars) {
      if (v->init.empty()) continue;
      if (!v->init_parsed) {
        return make_error("variable " + std::string(v->name) +
                              ": initializer form is not supported by the emulated device",
                          CUDA_ERROR_NOT_SUPPORTED);
      }
      auto* base = reinterpret_cast<uint8_t*>(m_globals[v->name].address);
      uint32_t esize = ptx::type_size(v->type);
      uint64_t size = v->size_bytes();
      uint64_t off = 0;
      for (const auto& iv : v->init_values) {
        if (off + esize > size) break;
        uint64_t bits = iv.bits;
        if (iv.kind == ptx::InitValue::Kind::symbol) {
          auto it = m_globals.find(iv.name);
          if (it == m_globals.end()) {
            return make_error("variable " + std::string(v->name) + ": initializer names " +
                                  std::string(iv.name) + ", which is not a global variable",
                              CUDA_ERROR_NOT_SUPPORTED);
          }
          bits = it->second.address + uint64_t(iv.offset);
        } else if (v->type == ptx::Type::f32 && iv.kind == ptx::InitValue::Kind::f64) {
          float f = float(std::bit_cast<double>(bits));
          bits = std::bit_cast<uint32_t>(f);
        } else if (v->type == ptx::Type::f32 && iv.kind == ptx::InitValue::Kind::integer) {
          bits = std::bit_cast<uint32_t>(float(int64_t(bits)));
        } else if (v->type == ptx::Type::f64 && iv.kind == ptx::InitValue::Kind::f32) {
          bits = std::bit_cast<uint64_t>(double(std::bit_cast<float>(uint32_t(bits))));
        } else if (v->type == ptx::Type::f64 && iv.kind == ptx::InitValue::Kind::integer) {
          bits = std::bit_cast<uint64_t>(double(int64_t(bits)));
        }
        std::memcpy(base + off, &bits, esize);
        off += esize;
      }
    }
    return ok();
  }

  static bool is_managed(const ptx::VarDecl& v) {
    return std::any_of(v.attrs.begin(), v.attrs.end(), [](std::string_view a) {
      return a.find(".managed") != std::string_view::npos;
    });
  }

  ptx::Module m_module;
  std::vector<std::unique_ptr<KernelImpl>> m_kernels;
  std::map<std::string_view, GlobalSymbol> m_globals;
  std::vector<std::string_view> m_managed;    // the .managed ones among m_globals
  std::set<std::string_view> m_borrowed;      // those that are another program's memory
};

} // namespace

Result<std::shared_ptr<Program>> Program::load(std::string_view ptx, std::string_view name,
                                               const ManagedSymbols* shared,
                                               const CompileOptions& options) {
  try {
    auto p = std::make_shared<ProgramImpl>();
    if (auto r = p->init(ptx, name, shared, options); !r) return r.error();
    return std::shared_ptr<Program>(std::move(p));
  } catch (const std::bad_alloc&) {
    return make_error("out of host memory loading " + std::string(name), CUDA_ERROR_OUT_OF_MEMORY);
  }
}

} // namespace hone::emu
