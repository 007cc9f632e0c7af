// Launch-shape tuning (DESIGN.md, "Agent"): the same kernel, launched with another block size and
// the grid that keeps the launch's thread count, where the PTX proves that what each thread
// computes cannot depend on how threads are grouped into blocks.
//
// Applications pick block sizes by heuristics written for all GPUs: hashcat launches its mask
// generators (`l_markov`, `r_markov`) and its `gpu_bzero`/`gpu_memset` helpers with blocks of the
// device's largest size, so a launch of 8448 work items is 9 blocks of 1024 threads that occupy 9
// of an H100's 132 SMs. Blocks of 64 threads spread the same work over 132 SMs.
//
// The proof, on the entry's PTX (conservative: anything it does not recognize refuses):
// - the only special registers read are %tid.x, %ntid.x and %ctaid.x, and each read of them
//   (a `mov` into a register defined nowhere else) feeds one computation only: the thread's
//   linear index, %ctaid.x * %ntid.x + %tid.x (`mad.lo`, or `mul.lo` and an `add`), the CUDA
//   idiom `blockIdx.x * blockDim.x + threadIdx.x`. With blocks of B' threads and a grid of
//   grid.x * B / B' blocks, every linear index the application's launch ran runs exactly once;
// - nothing is shared between the threads of a block or a warp: no shared memory, barrier,
//   shuffle, vote, match, warp reduction or cluster instruction, no call (not followed), no
//   instruction the IR keeps as text;
// - no `.reqntid` (a promise of the exact shape); under `.maxntid` only block sizes it allows.
// One-dimensional launches only (the guard refuses others at launch time), the block shape every
// captured launch used, and the same code: results compare bitwise.
#include "agent/launch_shape.hpp"

#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

namespace hone::agent {

namespace {

using ptx::Instruction;
using ptx::Opcode;
using ptx::Operand;

// Every register name an operand mentions (address bases and vector elements included).
void registers_of(const Operand& o, std::vector<std::string_view>& out) {
  switch (o.kind) {
  case Operand::Kind::reg:
    out.push_back(o.name);
    break;
  case Operand::Kind::address:
    if (o.base_is_reg) out.push_back(o.name);
    for (const auto& e : o.elems) registers_of(e, out);
    break;
  case Operand::Kind::vector:
  case Operand::Kind::pair:
  case Operand::Kind::list:
    for (const auto& e : o.elems) registers_of(e, out);
    break;
  default:
    break;
  }
}

// Does `op` write its first operand? (every PTX instruction that has a destination names it
// first; these have none, or only a memory one)
bool writes_first_operand(Opcode op) {
  switch (op) {
  case Opcode::st:
  case Opcode::red:
  case Opcode::bra:
  case Opcode::brx:
  case Opcode::call:
  case Opcode::ret:
  case Opcode::exit:
  case Opcode::prefetch:
  case Opcode::prefetchu:
  case Opcode::sust:
  case Opcode::sured:
  case Opcode::fence:
  case Opcode::membar:
  case Opcode::trap:
  case Opcode::pmevent:
  case Opcode::nanosleep:
  case Opcode::discard:
  case Opcode::applypriority:
    return false;
  default:
    return true;
  }
}

struct Use {
  const Instruction* at = nullptr;
  size_t operand = 0;
};

// Why the results of `f` (an entry) may depend on its block size, or nullopt when they cannot.
std::optional<std::string> block_size_dependence(const ptx::Function& f) {
  std::map<std::string_view, int> defs;                 // register -> instructions writing it
  std::map<std::string_view, std::vector<Use>> uses;    // register -> where it is read
  std::map<std::string_view, std::string_view> sreg_of; // register -> the special register moved in
  for (const auto& st : f.body) {
    if (std::holds_alternative<ptx::Opaque>(st.item)) {
      return "it holds an instruction hone's PTX reader keeps as text";
    }
    const auto* in = std::get_if<Instruction>(&st.item);
    if (!in) continue;
    switch (in->op) {
    case Opcode::bar:
    case Opcode::barrier:
    case Opcode::shfl:
    case Opcode::vote:
    case Opcode::match:
    case Opcode::redux:
    case Opcode::activemask:
    case Opcode::elect:
    case Opcode::mbarrier:
    case Opcode::getctarank:
    case Opcode::mapa:
    case Opcode::clusterlaunchcontrol:
    case Opcode::griddepcontrol:
    case Opcode::ldmatrix:
    case Opcode::stmatrix:
    case Opcode::movmatrix:
    case Opcode::mma:
    case Opcode::cp:
    case Opcode::tcgen05:
      return "it uses " + std::string(ptx::opcode_name(in->op)) +
             ", which works across the threads of a warp or block";
    case Opcode::call:
      return "it calls a function (calls are not followed)";
    default:
      break;
    }
    if (in->has_mod("shared")) return "it uses shared memory";
    for (size_t i = 0; i < in->operands.size(); ++i) {
      std::vector<std::string_view> regs;
      registers_of(in->operands[i], regs);
      const bool dest = i == 0 && writes_first_operand(in->op) &&
                        in->operands[i].kind != Operand::Kind::address;
      for (auto r : regs) {
        if (dest) {
          ++defs[r];
        } else {
          uses[r].push_back({in, i});
        }
      }
    }
    if (in->guard.size()) uses[in->guard].push_back({in, size_t(-1)});
  }

  static const std::set<std::string_view> k_allowed = {"%tid.x", "%ntid.x", "%ctaid.x"};
  // Special registers: read only by `mov` into a register, and only the three above.
  for (const auto& [reg, where] : uses) {
    if (!reg.starts_with("%")) continue;
    auto kind = ptx::external_kind(reg);
    const bool special = kind.has_value() || reg.starts_with("%tid") || reg.starts_with("%ntid") ||
                         reg.starts_with("%ctaid") || reg.starts_with("%nctaid") ||
                         reg.starts_with("%laneid") || reg.starts_with("%warpid") ||
                         reg.starts_with("%nwarpid") || reg.starts_with("%smid") ||
                         reg.starts_with("%cluster") || reg.starts_with("%is_explicit_cluster") ||
                         reg.starts_with("%lanemask") || reg.starts_with("%dynamic_smem_size") ||
                         reg.starts_with("%total_smem_size") || reg.starts_with("%aggr_smem_size");
    if (!special) continue;
    if (!k_allowed.count(reg)) return "it reads " + std::string(reg);
    for (const Use& u : where) {
      const Instruction& in = *u.at;
      if (in.op != Opcode::mov || u.operand != 1 || in.operands.size() != 2 ||
          in.operands[0].kind != Operand::Kind::reg || !in.guard.empty()) {
        return "it reads " + std::string(reg) + " other than by moving it into a register";
      }
      sreg_of[in.operands[0].name] = reg;
    }
  }
  if (sreg_of.empty()) return std::nullopt; // no thread index at all: every thread alike

  auto only_use = [&](std::string_view reg) -> const Use* {
    auto it = uses.find(reg);
    if (defs[reg] != 1 || it == uses.end() || it->second.size() != 1) return nullptr;
    return &it->second.front();
  };
  auto operand_reg = [](const Instruction& in, size_t i) -> std::string_view {
    if (i >= in.operands.size() || in.operands[i].kind != Operand::Kind::reg ||
        in.operands[i].negated) {
      return {};
    }
    return in.operands[i].name;
  };
  auto is_lo_int = [](const Instruction& in) {
    return in.has_mod("lo") && (in.has_mod("s32") || in.has_mod("u32")) && in.guard.empty();
  };
  auto is_add32 = [](const Instruction& in) {
    return in.op == Opcode::add && (in.has_mod("s32") || in.has_mod("u32")) && in.guard.empty() &&
           !in.has_mod("sat") && !in.has_mod("cc");
  };
  // Each register holding %tid.x must be the addend of a linear index whose product is
  // %ctaid.x * %ntid.x; each %ctaid.x and %ntid.x register must be a factor of one.
  std::set<const Instruction*> linear; // the instructions that compute a linear index
  for (const auto& [reg, sreg] : sreg_of) {
    const Use* u = only_use(reg);
    if (!u) {
      return "the register holding " + std::string(sreg) +
             " is used more than once or written more than once";
    }
    const Instruction& in = *u->at;
    if (sreg == "%tid.x") {
      if (in.op == Opcode::mad && is_lo_int(in) && u->operand == 3) {
        auto a = sreg_of.find(operand_reg(in, 1));
        auto b = sreg_of.find(operand_reg(in, 2));
        if (a != sreg_of.end() && b != sreg_of.end() &&
            std::set<std::string_view>{a->second, b->second} ==
                std::set<std::string_view>{"%ctaid.x", "%ntid.x"}) {
          linear.insert(&in);
          continue;
        }
      } else if (is_add32(in) && (u->operand == 1 || u->operand == 2)) {
        std::string_view product = operand_reg(in, u->operand == 1 ? 2 : 1);
        const Use* pu = product.empty() ? nullptr : only_use(product);
        // the product's defining instruction
        const Instruction* mul = nullptr;
        for (const auto& st : f.body) {
          const auto* d = std::get_if<Instruction>(&st.item);
          if (d && d->op == Opcode::mul && is_lo_int(*d) && operand_reg(*d, 0) == product) mul = d;
        }
        if (pu && mul) {
          auto a = sreg_of.find(operand_reg(*mul, 1));
          auto b = sreg_of.find(operand_reg(*mul, 2));
          if (a != sreg_of.end() && b != sreg_of.end() &&
              std::set<std::string_view>{a->second, b->second} ==
                  std::set<std::string_view>{"%ctaid.x", "%ntid.x"}) {
            linear.insert(&in);
            linear.insert(mul);
            continue;
          }
        }
      }
      return "%tid.x is used other than in the thread's linear index "
             "(%ctaid.x * %ntid.x + %tid.x)";
    }
  }
  // %ctaid.x and %ntid.x: only as the factors of those products.
  for (const auto& [reg, sreg] : sreg_of) {
    if (sreg == "%tid.x") continue;
    const Use* u = only_use(reg);
    if (!u || !linear.count(u->at) || (u->operand != 1 && u->operand != 2)) {
      return std::string(sreg) + " is used other than in the thread's linear index "
                                 "(%ctaid.x * %ntid.x + %tid.x)";
    }
  }
  return std::nullopt;
}

class LaunchShape final : public Strategy {
public:
  std::string id() const override { return "launch_shape"; }
  bool needs_captures() const override { return true; }
  double expected_speedup() const override { return 1.1; }
  double cost_gpu_seconds() const override { return 3.0; } // up to five candidates

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    // One block shape in every captured launch, one-dimensional; the thread counts they ran.
    std::optional<std::array<uint32_t, 3>> shape;
    std::vector<uint64_t> threads;
    for (const auto& c : task.captures) {
      if (c.status != CaptureStatus::ok) continue;
      if (shape && *shape != c.block) {
        return decline(task, "the captured launches use different block shapes");
      }
      shape = c.block;
      if (c.grid[1] != 1 || c.grid[2] != 1) {
        return decline(task, "a captured launch has a grid of more than one dimension");
      }
      threads.push_back(uint64_t(c.grid[0]) * c.block[0]);
    }
    if (!shape) return decline(task, "no complete capture gives the block shape");
    if ((*shape)[1] != 1 || (*shape)[2] != 1) {
      return decline(task, "the captured blocks have more than one dimension");
    }
    const uint32_t block = (*shape)[0];
    if (block == 0 || block > 1024) return decline(task, "the captured block size is not valid");

    auto module = ptx::parse(*ptx_text, "original");
    if (!module) return decline(task, "the PTX does not parse: " + module.error().message);
    const ptx::Function* f = module->function(task.key.entry);
    if (!f || !f->is_entry || !f->has_body) return decline(task, "no body of the entry in the PTX");
    if (f->directive("reqntid")) return decline(task, "the kernel requires its block shape (.reqntid)");
    uint64_t max_threads = 1024;
    if (const auto* d = f->directive("maxntid")) {
      max_threads = 1;
      for (int64_t v : d->values) max_threads *= uint64_t(std::max<int64_t>(v, 1));
    }
    if (auto why = block_size_dependence(*f)) {
      return decline(task, "its results may depend on the block size: " + *why);
    }

    std::vector<Candidate> out;
    for (uint32_t b = 32; b <= 1024 && out.size() < 5; b *= 2) {
      if (b == block || b > max_threads) continue;
      // Every captured launch must be one it can serve: the thread count divides evenly.
      bool serves_all = std::all_of(threads.begin(), threads.end(),
                                    [&](uint64_t n) { return n % b == 0; });
      if (!serves_all) continue;
      Candidate c;
      c.description = "blocks of " + std::to_string(b) + " threads instead of " +
                      std::to_string(block) +
                      ", the grid scaled to the same thread count (the PTX uses the thread "
                      "index only as blockIdx.x * blockDim.x + threadIdx.x)";
      c.kind = CandidateKind::ptx;
      c.code = *ptx_text;
      c.entry = task.key.entry;
      c.comparison = Comparison::bitwise;
      c.guard.block = *shape;
      c.guard.reshape_block = b;
      c.tag = b;
      out.push_back(std::move(c));
    }
    if (out.empty()) {
      return decline(task, "no other block size divides every captured launch's thread count");
    }
    return fixed_session(std::move(out));
  }
};

} // namespace

std::optional<std::string> launch_shape_refusal(const ptx::Function& entry) {
  return block_size_dependence(entry);
}

std::unique_ptr<Strategy> make_launch_shape_strategy() {
  return std::make_unique<LaunchShape>();
}

} // namespace hone::agent
