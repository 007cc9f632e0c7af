#include "shim/graph.hpp"

#include "shim/capture.hpp"
#include "shim/config.hpp"
#include "shim/cupti.hpp"
#include "shim/guard_check.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/reporter.hpp"
#include "shim/sampler.hpp"
#include "shim/shim.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace hone::shim {

std::atomic<uint64_t> g_swap_generation{1};

namespace {

constexpr uint32_t k_max_params = 1024;
constexpr size_t k_max_nodes = 1u << 16; // kernel nodes tracked per graph

// One kernel node of an executable graph, as the graph runs it now.
struct Node {
  CUgraphNode node = nullptr;   // of the graph it was instantiated from: names it in exec calls
  CUgraphNode source = nullptr; // the same node in the graph whose parameters it runs now
  KernelRecord* record = nullptr;
  void* original = nullptr; // the application's function (CUfunction or CUkernel)
  void* current = nullptr;  // what the executable graph runs now (original or a variant)
  const void* served_as = nullptr; // the handle variants are published for (original's CUkernel)
  // A kernel in a child graph (depth 1) is changed through its child graph node: `parent` in the
  // instantiated graph, `parent_source` in the source graph. Deeper ones are only counted.
  int depth = 0;
  CUgraphNode parent = nullptr;
  CUgraphNode parent_source = nullptr;
  bool enabled = true;
  unsigned grid[3] = {1, 1, 1};  // the application's shape of the node
  unsigned block[3] = {1, 1, 1};
  // The shape the executable graph's node runs now: the application's, or the one a variant that
  // reshapes its launches (Guard::reshape_block) runs with.
  unsigned run_grid[3] = {1, 1, 1};
  unsigned run_block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<std::string> args; // each parameter's bytes
  std::vector<void*> arg_ptrs;   // into args: the kernelParams the node is set with
  uint64_t weight = 1;           // threads: how its graph's sampled time is shared out
  NodeTime* cupti = nullptr;     // its kernels' times from CUPTI records (HONE_CUPTI), if any
  uint64_t cupti_folded = 0, cupti_folded_ns = 0;

  LaunchArgs launch_args() {
    return LaunchArgs{{grid[0], grid[1], grid[2]},
                      {block[0], block[1], block[2]},
                      shared,
                      nullptr,
                      false,
                      arg_ptrs.empty() ? nullptr : arg_ptrs.data(),
                      nullptr};
  }
  // The node's parameters running `function` with the application's shape.
  CUDA_KERNEL_NODE_PARAMS params(void* function) { return params(function, grid, block); }
  // What it runs now: its current function with the shape it runs.
  CUDA_KERNEL_NODE_PARAMS params_now() { return params(current, run_grid, run_block); }
  CUDA_KERNEL_NODE_PARAMS params(void* function, const unsigned* g, const unsigned* b) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = static_cast<CUfunction>(function);
    p.gridDimX = g[0];
    p.gridDimY = g[1];
    p.gridDimZ = g[2];
    p.blockDimX = b[0];
    p.blockDimY = b[1];
    p.blockDimZ = b[2];
    p.sharedMemBytes = shared;
    p.kernelParams = arg_ptrs.empty() ? nullptr : arg_ptrs.data();
    return p;
  }
};

// Sampled replays of one executable graph; never freed (a timing pair may outlive the graph).
struct Timing {
  std::atomic<uint64_t> sampled{0};
  std::atomic<uint64_t> sampled_ns{0};
};

struct Exec {
  CUgraphExec exec = nullptr;
  CUgraph graph = nullptr;  // instantiated from; kept alive while this lives
  CUgraph source = nullptr; // whose parameters it runs (the last cuGraphExecUpdate's); kept too
  void* context = nullptr;

  std::mutex mutex; // nodes, folded, the flags below (application threads and the reporter)
  std::vector<Node> nodes;
  uint64_t folded = 0;
  uint64_t folded_sampled = 0, folded_sampled_ns = 0;
  bool untouchable = false; // observed only: never patched, never copied
  std::string copy_why;     // non-empty: its shadow inputs cannot be captured (why)
  bool destroyed = false;
  std::atomic<bool> dirty{true}; // reconcile before the next replay

  std::atomic<uint64_t> replays{0};
  std::atomic<uint64_t> next_sample{0};
  uint64_t capture_turns = 0; // replays captured: which of a kernel's nodes is captured next
  std::atomic<uint64_t> generation{0}; // g_swap_generation it was reconciled at
  Timing* timing = new Timing;
};

// CUgraphExec -> Exec, lock-free for cuGraphLaunch. Keys are never removed (a destroyed graph's
// slot points at nothing; the driver may hand its handle out again).
class ExecTable {
public:
  static constexpr size_t k_capacity = 1u << 14;
  Exec* find(const void* h) const {
    uintptr_t key = reinterpret_cast<uintptr_t>(h);
    if (!key) return nullptr;
    size_t i = hash(key);
    for (size_t probe = 0; probe < k_capacity; ++probe, i = (i + 1) & (k_capacity - 1)) {
      uintptr_t k = m_keys[i].load(std::memory_order_acquire);
      if (k == key) return m_values[i].load(std::memory_order_acquire);
      if (k == 0) return nullptr;
    }
    return nullptr;
  }
  // Caller holds g_mutex. False when full.
  bool put(const void* h, Exec* e) {
    uintptr_t key = reinterpret_cast<uintptr_t>(h);
    size_t i = hash(key);
    for (size_t probe = 0; probe < k_capacity; ++probe, i = (i + 1) & (k_capacity - 1)) {
      uintptr_t k = m_keys[i].load(std::memory_order_relaxed);
      if (k == key || k == 0) {
        m_values[i].store(e, std::memory_order_release);
        if (k == 0) m_keys[i].store(key, std::memory_order_release);
        return true;
      }
    }
    return false;
  }

private:
  static size_t hash(uintptr_t k) {
    return size_t((k >> 4) * 0x9E3779B97F4A7C15ull >> 50) & (k_capacity - 1);
  }
  std::atomic<uintptr_t> m_keys[k_capacity] = {};
  std::atomic<Exec*> m_values[k_capacity] = {};
};

std::mutex g_mutex; // g_execs, g_deferred; taken before an Exec's mutex, never after
std::mutex g_variants_mutex; // g_variants alone (read under an Exec's mutex)
ExecTable* g_table = new ExecTable;
std::vector<Exec*>* g_execs = new std::vector<Exec*>; // live and destroyed-not-yet-folded
// Graphs the application destroyed while executable graphs made from them live.
std::map<CUgraph, int>* g_deferred = new std::map<CUgraph, int>;
// Variant function -> the application's function it stands for (nodes recorded as variants).
std::unordered_map<void*, void*>* g_variants = new std::unordered_map<void*, void*>;
// CUfunction a graph node holds -> the CUkernel the application gave for it (under
// g_variants_mutex).
std::unordered_map<void*, const void*>* g_kernel_of = new std::unordered_map<void*, const void*>;
std::atomic<uint64_t> g_replays_folded{0};
std::atomic<uint64_t> g_nodes_patched{0};

template <class F> F real_fn(Fn f) { return real_as<F>(f); }

// The bytes of each parameter of `function` from a node's parameters. False when the driver
// cannot describe the parameters.
bool copy_args(void* function, const CUDA_KERNEL_NODE_PARAMS& p, Node& n) {
  using ParamInfo = CUresult (*)(void*, size_t, size_t*, size_t*);
  auto func_info = real_as<ParamInfo>(Fn::cuFuncGetParamInfo);
  auto kernel_info = real_as<ParamInfo>(Fn::cuKernelGetParamInfo);
  std::vector<std::pair<size_t, size_t>> layout; // offset, size
  for (uint32_t i = 0; i < k_max_params; ++i) {
    size_t off = 0, size = 0;
    bool ok = func_info && func_info(function, i, &off, &size) == CUDA_SUCCESS;
    if (!ok && i == 0 && kernel_info && kernel_info(function, 0, &off, &size) == CUDA_SUCCESS) {
      func_info = kernel_info; // a CUkernel handle
      ok = true;
    }
    if (!ok) break;
    layout.emplace_back(off, size);
  }
  if (!func_info && !kernel_info) return false;
  n.args.clear();
  if (p.kernelParams) {
    for (size_t i = 0; i < layout.size(); ++i) {
      if (!p.kernelParams[i]) return false;
      n.args.emplace_back(static_cast<const char*>(p.kernelParams[i]), layout[i].second);
    }
  } else if (!layout.empty()) {
    const uint8_t* buffer = nullptr;
    size_t size = 0;
    if (!extra_buffer(p.extra, &buffer, &size)) return false;
    for (const auto& [off, sz] : layout) {
      if (off + sz > size) return false;
      n.args.emplace_back(reinterpret_cast<const char*>(buffer) + off, sz);
    }
  }
  n.arg_ptrs.clear();
  for (auto& a : n.args) n.arg_ptrs.push_back(a.data());
  return true;
}

// A graph node holds what the driver made of the function it was given: for a CUkernel (what
// the runtime launches), the CUfunction it resolves to in the graph's context, which the
// application never looked up. Find the CUkernel it came from among the kernels of that name.
KernelRecord* record_of_kernel_function(void* function) {
  using GetName = CUresult (*)(const char**, CUfunction);
  using KernelFunction = CUresult (*)(CUfunction*, CUkernel);
  auto get_name = real_fn<GetName>(Fn::cuFuncGetName);
  auto kernel_function = real_fn<KernelFunction>(Fn::cuKernelGetFunction);
  const char* name = nullptr;
  if (!get_name || !kernel_function ||
      get_name(&name, static_cast<CUfunction>(function)) != CUDA_SUCCESS || !name) {
    return nullptr;
  }
  for (KernelRecord* r : registry().records()) {
    if (r->key.entry != name) continue;
    for (const auto& h : registry().handles_of(r->key)) {
      if (!h.kernel_handle) continue;
      CUfunction f = nullptr;
      if (kernel_function(&f, static_cast<CUkernel>(const_cast<void*>(h.handle))) ==
              CUDA_SUCCESS &&
          f == function) {
        registry().alias_function(function, h.handle);
        std::lock_guard lock(g_variants_mutex);
        (*g_kernel_of)[function] = h.handle;
        return registry().functions.find(function);
      }
    }
  }
  return nullptr;
}

KernelRecord* record_for(void* function) {
  KernelRecord* r = registry().functions.find(function);
  if (!r) r = record_of_kernel_function(function);
  if (!r) {
    registry().function_unknown(function);
    r = registry().functions.find(function);
  }
  return r;
}

// A kernel node's state from the driver's parameters of it.
bool node_from(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS& p, Node& n,
               std::string* why) {
  void* fn = p.func ? static_cast<void*>(p.func) : static_cast<void*>(p.kern);
  n.node = node;
  n.source = node;
  n.current = fn;
  n.original = application_function(fn);
  n.record = record_for(n.original);
  n.served_as = n.original;
  {
    std::lock_guard lock(g_variants_mutex);
    auto it = g_kernel_of->find(n.original);
    if (it != g_kernel_of->end()) n.served_as = it->second;
  }
  n.grid[0] = p.gridDimX;
  n.grid[1] = p.gridDimY;
  n.grid[2] = p.gridDimZ;
  n.block[0] = p.blockDimX;
  n.block[1] = p.blockDimY;
  n.block[2] = p.blockDimZ;
  std::copy(n.grid, n.grid + 3, n.run_grid);
  std::copy(n.block, n.block + 3, n.run_block);
  n.shared = p.sharedMemBytes;
  n.weight = uint64_t(p.gridDimX) * p.gridDimY * p.gridDimZ * p.blockDimX * p.blockDimY *
             p.blockDimZ;
  if (n.weight == 0) n.weight = 1;
  if (!copy_args(fn, p, n)) {
    *why = "the driver cannot describe the parameters of a kernel node";
    return false;
  }
  return true;
}

// The nodes a driver list query gives (cuGraphGetNodes of a graph, cuGraphNodeGetDependencies or
// ...GetDependentNodes of a node): their count, then the nodes. False when a call fails.
template <class Of>
bool node_list(CUresult (*query)(Of, CUgraphNode*, size_t*), Of of, std::vector<CUgraphNode>& out) {
  size_t count = 0;
  if (query(of, nullptr, &count) != CUDA_SUCCESS) return false;
  out.resize(count);
  if (count && query(of, out.data(), &count) != CUDA_SUCCESS) return false;
  out.resize(count);
  return true;
}

// The kernel nodes of `graph` and of its child graphs.
void walk(CUgraph graph, CUgraphNode parent, Exec& e, int depth) {
  const bool top_level = depth == 0;
  using GetNodes = CUresult (*)(CUgraph, CUgraphNode*, size_t*);
  using GetType = CUresult (*)(CUgraphNode, CUgraphNodeType*);
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using GetChild = CUresult (*)(CUgraphNode, CUgraph*);
  auto get_nodes = real_fn<GetNodes>(Fn::cuGraphGetNodes);
  auto get_type = real_fn<GetType>(Fn::cuGraphNodeGetType);
  auto get_params = real_fn<GetParams>(Fn::cuGraphKernelNodeGetParams_v2);
  auto get_child = real_fn<GetChild>(Fn::cuGraphChildGraphNodeGetGraph);
  if (!get_nodes || !get_type || !get_params || !get_child) {
    e.untouchable = true;
    e.copy_why = "the driver lacks the graph queries the shim needs";
    return;
  }
  if (depth > 16) {
    e.untouchable = true;
    e.copy_why = "child graphs nest deeper than 16";
    return;
  }
  std::vector<CUgraphNode> nodes;
  if (!node_list(get_nodes, graph, nodes)) {
    e.untouchable = true;
    e.copy_why = "its nodes could not be listed";
    return;
  }
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    if (get_type(node, &type) != CUDA_SUCCESS) continue;
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS p{};
      Node n;
      std::string why;
      if (get_params(node, &p) != CUDA_SUCCESS || !node_from(node, p, n, &why)) {
        e.untouchable = true;
        if (e.copy_why.empty()) e.copy_why = why.empty() ? "a kernel node could not be read" : why;
        continue;
      }
      n.depth = depth;
      n.parent = n.parent_source = parent;
      n.cupti = cupti_node(node);
      if (e.nodes.size() < k_max_nodes) e.nodes.push_back(std::move(n));
      break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      CUgraph child = nullptr;
      if (get_child(node, &child) == CUDA_SUCCESS) walk(child, top_level ? node : parent, e, depth + 1);
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      if (e.copy_why.empty()) {
        e.copy_why = "it allocates or frees memory (a copy could not be instantiated beside it)";
      }
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      e.untouchable = true;
      if (e.copy_why.empty()) e.copy_why = "it has conditional nodes";
      break;
    default: break;
    }
  }
}

// Fold the replays since the last fold into the kernels' counters. Caller holds e.mutex.
void fold_locked(Exec& e) {
  uint64_t replays = e.replays.load(std::memory_order_relaxed);
  uint64_t delta = replays - e.folded;
  uint64_t sampled = e.timing->sampled.load(std::memory_order_relaxed);
  uint64_t sampled_ns = e.timing->sampled_ns.load(std::memory_order_relaxed);
  uint64_t d_sampled = sampled - e.folded_sampled;
  uint64_t d_ns = sampled_ns - e.folded_sampled_ns;
  e.folded = replays;
  e.folded_sampled = sampled;
  e.folded_sampled_ns = sampled_ns;
  // Nodes with CUPTI records are timed by them, each kernel on its own; the replays' event time
  // is shared out over the others.
  uint64_t total_weight = 0;
  for (Node& n : e.nodes) {
    if (!n.record) continue;
    if (n.cupti) {
      uint64_t k = n.cupti->kernels.load(std::memory_order_relaxed);
      uint64_t ns = n.cupti->ns.load(std::memory_order_relaxed);
      if (k != n.cupti_folded) {
        n.record->sampled.fetch_add(k - n.cupti_folded, std::memory_order_relaxed);
        n.record->sampled_ns.fetch_add(ns - n.cupti_folded_ns, std::memory_order_relaxed);
        n.cupti_folded = k;
        n.cupti_folded_ns = ns;
      }
      if (k) continue;
    }
    if (n.enabled) total_weight += n.weight;
  }
  if (!delta && !d_sampled) return;
  for (Node& n : e.nodes) {
    if (!n.enabled || !n.record) continue;
    KernelRecord* r = n.record;
    const bool by_cupti = n.cupti && n.cupti_folded;
    r->launches.fetch_add(delta, std::memory_order_relaxed);
    r->graph_launches.fetch_add(delta, std::memory_order_relaxed);
    if (n.current != n.original) r->variant_launches.fetch_add(delta, std::memory_order_relaxed);
    if (d_sampled && total_weight && !by_cupti) {
      // A sampled replay is a timed launch of each of its kernels; its time is shared out by
      // the kernels' thread counts (an estimate: the event pair times the whole graph).
      r->sampled.fetch_add(d_sampled, std::memory_order_relaxed);
      r->sampled_ns.fetch_add(uint64_t(double(d_ns) * double(n.weight) / double(total_weight)),
                              std::memory_order_relaxed);
    }
    uint64_t g = uint64_t(n.grid[0]) | uint64_t(n.grid[1]) << 32;
    uint64_t b = uint64_t(n.block[0]) | uint64_t(n.block[1]) << 16 | uint64_t(n.block[2]) << 32;
    r->grid.store(g, std::memory_order_relaxed);
    r->grid_z.store(n.grid[2], std::memory_order_relaxed);
    r->block.store(b, std::memory_order_relaxed);
  }
  g_replays_folded.fetch_add(delta, std::memory_order_relaxed);
}

using ExecSetParams = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
using ExecSetChild = CUresult (*)(CUgraphExec, CUgraphNode, CUgraph);
using GetChild = CUresult (*)(CUgraphNode, CUgraph*);
using CloneGraph = CUresult (*)(CUgraph*, CUgraph);
using FindInClone = CUresult (*)(CUgraphNode*, CUgraphNode, CUgraph);
using SetNodeParams = CUresult (*)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
using DestroyGraph = CUresult (*)(CUgraph);

bool patchable(const Node& n) { return n.record && n.depth <= 1; }

// What a node is to run: a function (nullptr: leave the node as it is) with a grid and block.
struct Want {
  void* function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  bool same_as(const Node& n) const {
    return function == n.current && std::equal(grid, grid + 3, n.run_grid) &&
           std::equal(block, block + 3, n.run_block);
  }
  void ran_by(Node& n) const {
    n.current = function;
    std::copy(grid, grid + 3, n.run_grid);
    std::copy(block, block + 3, n.run_block);
  }
};

// The node's function with the application's shape.
Want as_application(const Node& n, void* function) {
  Want w;
  w.function = function;
  std::copy(n.grid, n.grid + 3, w.grid);
  std::copy(n.block, n.block + 3, w.block);
  return w;
}

void count_patch(const Node& n, void* want) {
  if (n.current == n.original && want != n.original) {
    g_nodes_patched.fetch_add(1, std::memory_order_relaxed);
  } else if (n.current != n.original && want == n.original) {
    g_nodes_patched.fetch_sub(1, std::memory_order_relaxed);
  }
}

// Make every patchable node run want[i] (nullptr: leave it): a node of the graph through
// cuGraphExecKernelNodeSetParams, the kernels of a child graph all at once, as a copy of the
// child graph with their functions set, through cuGraphExecChildGraphNodeSetParams. False with
// the first error. Caller holds e.mutex.
CUresult apply_locked(Exec& e, const std::vector<Want>& want) {
  auto set = real_fn<ExecSetParams>(Fn::cuGraphExecKernelNodeSetParams_v2);
  auto set_child = real_fn<ExecSetChild>(Fn::cuGraphExecChildGraphNodeSetParams);
  auto get_child = real_fn<GetChild>(Fn::cuGraphChildGraphNodeGetGraph);
  auto clone = real_fn<CloneGraph>(Fn::cuGraphClone);
  auto find = real_fn<FindInClone>(Fn::cuGraphNodeFindInClone);
  auto set_node = real_fn<SetNodeParams>(Fn::cuGraphKernelNodeSetParams_v2);
  auto destroy = real_fn<DestroyGraph>(Fn::cuGraphDestroy);
  if (!set) return CUDA_ERROR_NOT_FOUND;
  std::map<CUgraphNode, bool> children; // child graph nodes with a kernel to change
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    Node& n = e.nodes[i];
    if (!want[i].function || want[i].same_as(n) || !patchable(n)) continue;
    if (n.depth == 1) {
      children[n.parent] = true;
      continue;
    }
    CUDA_KERNEL_NODE_PARAMS p = n.params(want[i].function, want[i].grid, want[i].block);
    if (CUresult r = set(e.exec, n.node, &p)) return r;
    count_patch(n, want[i].function);
    want[i].ran_by(n);
  }
  for (const auto& [parent, _] : children) {
    if (!set_child || !get_child || !clone || !find || !set_node || !destroy) {
      return CUDA_ERROR_NOT_FOUND;
    }
    CUgraphNode parent_source = nullptr;
    for (const Node& n : e.nodes) {
      if (n.depth == 1 && n.parent == parent) parent_source = n.parent_source;
    }
    CUgraph child = nullptr, copy = nullptr;
    if (CUresult r = get_child(parent_source, &child)) return r;
    if (CUresult r = clone(&copy, child)) return r;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < e.nodes.size() && r == CUDA_SUCCESS; ++i) {
      Node& n = e.nodes[i];
      if (n.depth != 1 || n.parent != parent || !n.record) continue;
      CUgraphNode cn = nullptr;
      r = find(&cn, n.source, copy);
      if (r == CUDA_SUCCESS) {
        CUDA_KERNEL_NODE_PARAMS p =
            want[i].function ? n.params(want[i].function, want[i].grid, want[i].block)
                             : n.params_now();
        r = set_node(cn, &p);
      }
    }
    if (r == CUDA_SUCCESS) r = set_child(e.exec, parent, copy);
    destroy(copy);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      Node& n = e.nodes[i];
      if (n.depth != 1 || n.parent != parent || !n.record || !want[i].function) continue;
      count_patch(n, want[i].function);
      want[i].ran_by(n);
    }
  }
  return CUDA_SUCCESS;
}

// Point every patched node back at the application's function. Caller holds e.mutex.
void restore_locked(Exec& e) {
  fold_locked(e);
  std::vector<Want> want;
  for (const Node& n : e.nodes) want.push_back(as_application(n, n.original));
  if (apply_locked(e, want) != CUDA_SUCCESS && first_time(Once::graph_restore_failed)) {
    log(Level::warn, "a graph kernel node could not be restored to the original");
  }
}

// Stop touching `e`: restore it, and from now on only count its replays. Caller holds e.mutex.
void give_up_locked(Exec& e, const char* why) {
  restore_locked(e);
  e.untouchable = true;
  if (e.copy_why.empty()) e.copy_why = why;
  log(Level::info, "a CUDA graph is observed only from now on: %s", why);
}

// Before a replay, on the application's thread: each node runs the variant serving its kernel
// when its arguments pass the guard, else the original. Caller holds e.mutex.
void reconcile_locked(Exec& e, uint64_t generation) {
  e.dirty = false;
  e.generation.store(generation, std::memory_order_relaxed);
  if (e.untouchable) return;
  fold_locked(e); // the replays so far ran what the nodes ran until now
  std::vector<Want> want;
  for (Node& n : e.nodes) {
    Want w = as_application(n, n.original);
    if (patchable(n)) {
      const FunctionTable::Slot* slot = registry().functions.find_slot(n.served_as);
      const Swap* s = slot ? slot->swap.load(std::memory_order_acquire) : nullptr;
      // A variant that reshapes its launches runs the node with its own grid and block (the
      // guard checks the application's shape; the same thread count, so the node's
      // parameters are unchanged).
      if (s && s->context == e.context) {
        LaunchArgs a = n.launch_args();
        if (guard_passes(*s, a) &&
            (!s->guard.reshape_block || reshaped(s->guard, n.grid, n.block, w.grid, w.block))) {
          w.function = s->function;
        }
      }
    }
    want.push_back(w);
  }
  if (CUresult res = apply_locked(e, want)) {
    if (first_time(Once::graph_patch_failed)) {
      log(Level::warn, "pointing a graph kernel node at its variant failed (error %d)", int(res));
    }
    give_up_locked(e, "changing a kernel node failed");
  }
}

Exec* live_exec(CUgraphExec exec) {
  Exec* e = g_table->find(exec);
  return e && !e->destroyed ? e : nullptr;
}

// Executable graphs that name `graph` (made from it, or running its parameters). g_mutex held.
int execs_using(CUgraph graph) {
  int n = 0;
  for (Exec* e : *g_execs) {
    n += (!e->destroyed && (e->graph == graph || e->source == graph)) ? 1 : 0;
  }
  return n;
}

// A graph the application destroyed is destroyed once no executable graph names it any more.
void release_graph(CUgraph graph) {
  if (!graph) return;
  bool destroy = false;
  {
    std::lock_guard lock(g_mutex);
    auto it = g_deferred->find(graph);
    if (it != g_deferred->end() && execs_using(graph) == 0) {
      g_deferred->erase(it);
      destroy = true;
    }
  }
  if (destroy) {
    using Destroy = CUresult (*)(CUgraph);
    if (auto d = real_fn<Destroy>(Fn::cuGraphDestroy)) d(graph);
  }
}

// A capture of one replay is due: any record with launches to capture, among this graph's.
std::atomic<uint32_t> g_capture_hint{0};

// The node of `copy` (a clone of `original`, or the child graph a clone embeds for it) that
// stands for `node`: by cuGraphNodeFindInClone, else by its place in the node list (a clone
// lists its nodes in the original's order).
bool node_in_copy(CUgraph original, CUgraphNode node, CUgraph copy, CUgraphNode* out) {
  using Find = CUresult (*)(CUgraphNode*, CUgraphNode, CUgraph);
  using GetNodes = CUresult (*)(CUgraph, CUgraphNode*, size_t*);
  auto find = real_fn<Find>(Fn::cuGraphNodeFindInClone);
  auto get_nodes = real_fn<GetNodes>(Fn::cuGraphGetNodes);
  if (find && find(out, node, copy) == CUDA_SUCCESS) return true;
  if (!get_nodes) return false;
  std::vector<CUgraphNode> a, b;
  if (!node_list(get_nodes, original, a) || !node_list(get_nodes, copy, b) || a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == node) {
      *out = b[i];
      return true;
    }
  }
  return false;
}

// Is a capture of `n` due in a replay? A shadow check's capture is of a launch a variant serves:
// only a node that runs a variant now (the graph was reconciled just before) takes it.
bool capture_due_at(const Node& n) {
  if (!n.enabled || !n.record || !n.record->captures_pending()) return false;
  return !n.record->capture_shadow.load(std::memory_order_acquire) || n.current != n.original;
}

// At most this many kernels captured in one replay: each adds a bounds probe (a synchronized
// launch) and its copies to the replay the application waits for.
constexpr size_t k_captures_per_replay = 8;

// One replay of `e` with the shadow inputs of the kernel nodes whose captures are due captured:
// an instrumented clone of the graph (the executable graph's current node parameters,
// device-to-host copies of each captured node's buffers right before it, and after it when
// outputs are asked for, ahead of everything that depends on it) is launched in the replay's
// place, then discarded. Each kernel is captured at one of its nodes (taking turns between the
// nodes that run it, replay by replay), up to k_captures_per_replay kernels at once, so that an
// application that replays its graph a few times still gives every hot kernel in it a capture.
// A captured node runs the original, except for a shadow check's capture: then it runs what it
// serves now (the variant), and the copies after it are the variant's outputs, which the worker
// compares with the original's on the same inputs (as shadowed() in hooks_launch.cpp does for a
// direct launch). False when no capture is due here: the caller replays as usual.
bool capture_graph_replay(Exec* e, CUstream stream, bool per_thread, int* res_out) {
  std::lock_guard lock(e->mutex);
  // The nodes whose kernel asks for a capture, by kernel, in node order.
  std::vector<std::pair<KernelRecord*, std::vector<Node*>>> due;
  for (Node& n : e->nodes) {
    if (!capture_due_at(n)) continue;
    auto it = std::find_if(due.begin(), due.end(),
                           [&](const auto& d) { return d.first == n.record; });
    if (it != due.end()) {
      it->second.push_back(&n);
    } else if (due.size() < k_captures_per_replay) {
      due.push_back({n.record, {&n}});
    }
  }
  if (due.empty()) return false;
  const uint64_t turn = e->capture_turns++;

  struct Target {
    Node* node = nullptr;
    KernelRecord* record = nullptr;
    bool shadow = false;
    CaptureRequestInfo req;
    CapturePlan plan;
    bool planned = false;
    CUgraphNode in_clone = nullptr;
    CUgraph where = nullptr; // the graph (the clone, or a child graph in it) its copies go into
  };
  std::vector<Target> targets;
  targets.reserve(due.size());
  CaptureInFlight in_flight;
  RelaxedCaptureMode relaxed;
  for (auto& [record, nodes] : due) {
    Target t;
    t.node = nodes[turn % nodes.size()];
    t.record = record;
    // Read before the claim, as the launch path does: the request a claimed launch serves is the
    // one the reporter installed with its shadow flag first.
    t.shadow = record->capture_shadow.load(std::memory_order_acquire);
    if (!capture_claim(record, &t.req)) continue;
    if (e->untouchable || !e->copy_why.empty() || t.node->depth > 1) {
      std::string why = t.node->depth > 1 ? "the kernel runs in a child graph of a child graph"
                        : e->copy_why.empty() ? "the graph is observed only"
                                              : e->copy_why;
      capture_refuse(record, t.req.request, CaptureStatus::unsupported,
                     "the kernel is replayed in a CUDA graph whose launch the shim cannot copy: " +
                         why);
      continue;
    }
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return false;

  using Clone = CUresult (*)(CUgraph*, CUgraph);
  using Find = CUresult (*)(CUgraphNode*, CUgraphNode, CUgraph);
  using SetParams = CUresult (*)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
  using Edges = CUresult (*)(CUgraphNode, CUgraphNode*, size_t*);
  using AddCopy = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                               const CUDA_MEMCPY3D*, CUcontext);
  using AddEdges = CUresult (*)(CUgraph, const CUgraphNode*, const CUgraphNode*, size_t);
  using Instantiate = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
  using Launch = CUresult (*)(CUgraphExec, CUstream);
  using ExecDestroy = CUresult (*)(CUgraphExec);
  using Destroy = CUresult (*)(CUgraph);
  using GetChildGraph = CUresult (*)(CUgraphNode, CUgraph*);
  auto clone_graph = real_fn<Clone>(Fn::cuGraphClone);
  auto find = real_fn<Find>(Fn::cuGraphNodeFindInClone);
  auto set_params = real_fn<SetParams>(Fn::cuGraphKernelNodeSetParams_v2);
  auto dependencies = real_fn<Edges>(Fn::cuGraphNodeGetDependencies);
  auto dependents = real_fn<Edges>(Fn::cuGraphNodeGetDependentNodes);
  auto add_copy = real_fn<AddCopy>(Fn::cuGraphAddMemcpyNode);
  auto add_edges = real_fn<AddEdges>(Fn::cuGraphAddDependencies);
  auto instantiate = real_fn<Instantiate>(Fn::cuGraphInstantiateWithFlags);
  auto launch = real_fn<Launch>(per_thread ? Fn::cuGraphLaunch_ptsz : Fn::cuGraphLaunch);
  auto exec_destroy = real_fn<ExecDestroy>(Fn::cuGraphExecDestroy);
  auto destroy = real_fn<Destroy>(Fn::cuGraphDestroy);
  auto get_child = real_fn<GetChildGraph>(Fn::cuGraphChildGraphNodeGetGraph);
  if (!clone_graph || !find || !set_params || !dependencies || !dependents || !add_copy ||
      !add_edges || !instantiate || !launch || !exec_destroy || !destroy || !get_child) {
    for (Target& t : targets) {
      capture_refuse(t.record, t.req.request, CaptureStatus::failed,
                     "the driver lacks a graph function capture needs");
    }
    return false;
  }
  // Each capture's plan: its buffers (bounded by a probe of the node's launch, or whole), and
  // pinned memory for them. A refused plan is reported by capture_plan; the others go on.
  for (Target& t : targets) {
    LaunchArgs a = t.node->launch_args();
    a.stream = stream;
    a.per_thread = per_thread;
    // What the captured node runs in the clone; the variant's parameters are laid out as the
    // original's (validation refused any other layout).
    void* const runs = t.shadow ? t.node->current : t.node->original;
    t.planned = capture_plan(t.record, runs, a, t.req, t.plan);
  }
  std::erase_if(targets, [](const Target& t) { return !t.planned; });
  if (targets.empty()) return false;

  CUgraph clone = nullptr;
  CUgraphExec clone_exec = nullptr;
  auto fail = [&](const char* why) {
    if (clone_exec) exec_destroy(clone_exec);
    if (clone) destroy(clone);
    for (Target& t : targets) capture_abandon(t.record, t.plan, why);
    return false;
  };
  if (clone_graph(&clone, e->source) != CUDA_SUCCESS) return fail("cloning the graph failed");
  for (Node& n : e->nodes) {
    if (n.depth > 1 || !n.record) continue;
    CUgraph in = clone;
    CUgraphNode cn = nullptr;
    if (n.depth == 1) {
      CUgraphNode cparent = nullptr;
      CUgraph child = nullptr;
      if (find(&cparent, n.parent_source, clone) != CUDA_SUCCESS ||
          get_child(cparent, &in) != CUDA_SUCCESS || get_child(n.parent_source, &child) != CUDA_SUCCESS ||
          !node_in_copy(child, n.source, in, &cn)) {
        return fail("a child graph's node is missing from the clone");
      }
    } else if (find(&cn, n.source, clone) != CUDA_SUCCESS) {
      return fail("a node is missing from the clone");
    }
    // A captured node runs the original with the application's shape, or (a shadow check) what
    // it runs now; every other node what it runs now.
    auto t = std::find_if(targets.begin(), targets.end(),
                          [&](const Target& x) { return x.node == &n; });
    CUDA_KERNEL_NODE_PARAMS p =
        t != targets.end() && !t->shadow ? n.params(n.original) : n.params_now();
    if (set_params(cn, &p) != CUDA_SUCCESS) return fail("setting a cloned node's parameters failed");
    if (t != targets.end()) {
      t->in_clone = cn;
      t->where = in;
    }
  }
  for (Target& t : targets) {
    CUgraphNode tc = t.in_clone;
    // Read now, after the copies of the targets before it were added: its copies before it then
    // also follow the copies after a target it depends on, which only orders copies.
    std::vector<CUgraphNode> before, after;
    if (!tc || !node_list(dependencies, tc, before) || !node_list(dependents, tc, after)) {
      return fail("the captured node's edges could not be read");
    }
    CapturePlan& plan = t.plan;
    auto copy_node = [&](uint64_t base, size_t size, uint64_t offset, const CUgraphNode* deps,
                         size_t ndeps, CUgraphNode* out) {
      CUDA_MEMCPY3D m{};
      m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      m.srcDevice = base;
      m.dstMemoryType = CU_MEMORYTYPE_HOST;
      m.dstHost = static_cast<char*>(plan.host) + offset;
      m.WidthInBytes = size;
      m.Height = 1;
      m.Depth = 1;
      return add_copy(out, t.where, deps, ndeps, &m, static_cast<CUcontext>(e->context)) ==
             CUDA_SUCCESS;
    };
    for (const auto& [base, size] : plan.allocations) {
      if (!size) continue;
      CUgraphNode cn = nullptr;
      if (!copy_node(base, size, plan.offset_of[base], before.data(), before.size(), &cn) ||
          add_edges(t.where, &cn, &tc, 1) != CUDA_SUCCESS) {
        return fail("adding the copies before the node failed");
      }
      if (!plan.outputs) continue;
      CUgraphNode an = nullptr;
      if (!copy_node(base, size, plan.before_bytes + plan.offset_of[base], &tc, 1, &an)) {
        return fail("adding the copies after the node failed");
      }
      for (CUgraphNode d : after) {
        if (add_edges(t.where, &an, &d, 1) != CUDA_SUCCESS) {
          return fail("ordering the copies after the node failed");
        }
      }
    }
  }
  if (instantiate(&clone_exec, clone, 0) != CUDA_SUCCESS) {
    clone_exec = nullptr;
    return fail("instantiating the instrumented copy of the graph failed");
  }
  int res = launch(clone_exec, stream);
  // An executable graph destroyed while it runs is freed when it completes.
  exec_destroy(clone_exec);
  destroy(clone);
  if (res == CUDA_SUCCESS && targets.size() > 1) {
    std::string names;
    for (const Target& t : targets) names += (names.empty() ? "" : ", ") + t.record->key.entry;
    log(Level::info, "captured %zu kernels in one replay of a CUDA graph: %s", targets.size(),
        names.c_str());
  }
  for (Target& t : targets) capture_finish(t.record, t.plan, stream, per_thread, true, res);
  if (res != CUDA_SUCCESS) return false; // the replay itself then runs as the application made it
  *res_out = res;
  return true;
}

} // namespace

void graph_capture_requested() { g_capture_hint.store(1, std::memory_order_release); }

bool stream_capturing(void* stream, bool per_thread) {
  using IsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);
  auto f = real_fn<IsCapturing>(per_thread ? Fn::cuStreamIsCapturing_ptsz
                                           : Fn::cuStreamIsCapturing);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  // Unknown counts as capturing: the launch is then neither timed nor captured, never wrong.
  if (!f || f(static_cast<CUstream>(stream), &st) != CUDA_SUCCESS) return true;
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void note_captured_variant(void* function, const void* original) {
  try {
    std::lock_guard lock(g_variants_mutex);
    (*g_variants)[function] = const_cast<void*>(original);
  } catch (...) {
  }
}

void* application_function(void* function) {
  std::lock_guard lock(g_variants_mutex);
  if (g_variants->empty()) return function;
  auto it = g_variants->find(function);
  return it == g_variants->end() ? function : it->second;
}

void graph_instantiated(CUgraphExec exec, CUgraph graph) {
  if (!enabled() || !exec) return;
  try {
    auto* e = new Exec;
    e->exec = exec;
    e->graph = graph;
    e->source = graph;
    using GetCurrent = CUresult (*)(CUcontext*);
    if (auto get = real_fn<GetCurrent>(Fn::cuCtxGetCurrent)) {
      CUcontext ctx = nullptr;
      get(&ctx);
      e->context = ctx;
    }
    walk(graph, nullptr, *e, 0);
    e->next_sample.store(config().sample_every, std::memory_order_relaxed);
    // Nodes recorded as variants during a capture count as patched from the start.
    for (const Node& n : e->nodes) {
      if (n.current != n.original) g_nodes_patched.fetch_add(1, std::memory_order_relaxed);
    }
    std::lock_guard lock(g_mutex);
    if (!g_table->put(exec, e)) {
      if (first_time(Once::graph_table_full)) {
        log(Level::warn, "more than %zu executable graphs: later ones are not observed",
            ExecTable::k_capacity);
      }
      delete e;
      return;
    }
    g_execs->push_back(e);
  } catch (...) {
    // out of memory: the graph runs unobserved
  }
  on_activity();
}

void graph_exec_destroyed(CUgraphExec exec) {
  CUgraph graph = nullptr, source = nullptr;
  {
    std::lock_guard lock(g_mutex);
    Exec* e = g_table->find(exec);
    if (!e) return;
    g_table->put(exec, nullptr);
    std::lock_guard elock(e->mutex);
    fold_locked(*e);
    for (const Node& n : e->nodes) {
      if (n.current != n.original) g_nodes_patched.fetch_sub(1, std::memory_order_relaxed);
    }
    e->destroyed = true; // the reporter frees it
    graph = e->graph;
    source = e->source;
  }
  release_graph(graph);
  if (source != graph) release_graph(source);
}

void graph_exec_kernel_params_set(CUgraphExec exec, CUgraphNode node,
                                  const CUDA_KERNEL_NODE_PARAMS* params) {
  Exec* e = live_exec(exec);
  if (!e || !params) return;
  std::lock_guard lock(e->mutex);
  if (e->untouchable) return;
  for (Node& n : e->nodes) {
    if (n.node != node) continue;
    fold_locked(*e);
    Node fresh;
    std::string why;
    if (!node_from(node, *params, fresh, &why)) {
      give_up_locked(*e, "a kernel node was given parameters the shim cannot read");
      return;
    }
    if (n.current != n.original) g_nodes_patched.fetch_sub(1, std::memory_order_relaxed);
    fresh.enabled = n.enabled;
    fresh.depth = n.depth;
    fresh.parent = n.parent;
    fresh.parent_source = n.parent_source;
    fresh.source = n.source;
    n = std::move(fresh); // the application's function now; the guard is checked again
    if (n.current != n.original) g_nodes_patched.fetch_add(1, std::memory_order_relaxed);
    e->dirty = true;
    return;
  }
  // A node the shim does not know in this graph: it cannot follow.
  give_up_locked(*e, "a kernel node the shim does not know was changed");
}

namespace {

// Caller holds e.mutex. Returns the graph whose parameters it ran before (to release).
CUgraph update_locked(Exec* e, CUgraph graph) {
  fold_locked(*e);
  // The executable graph now runs `graph`'s parameters with its own topology: read them again.
  // Node handles of the graph it was instantiated from still name its nodes; the update pairs
  // them with `graph`'s in the same order, which is the order the driver lists nodes in.
  std::vector<Node> old = std::move(e->nodes);
  for (const Node& n : old) {
    if (n.current != n.original) g_nodes_patched.fetch_sub(1, std::memory_order_relaxed);
  }
  e->nodes.clear();
  bool was_untouchable = e->untouchable;
  std::string was_why = e->copy_why;
  e->copy_why.clear();
  walk(graph, nullptr, *e, 0);
  if (was_untouchable) {
    e->untouchable = true;
    e->copy_why = was_why;
  }
  if (e->nodes.size() != old.size()) {
    e->nodes = std::move(old);
    give_up_locked(*e, "an update changed its kernel nodes in a way the shim cannot follow");
    return nullptr;
  }
  for (size_t i = 0; i < e->nodes.size(); ++i) {
    e->nodes[i].node = old[i].node; // exec calls keep naming the instantiated graph's nodes
    e->nodes[i].parent = old[i].parent;
    e->nodes[i].enabled = old[i].enabled;
    if (e->nodes[i].current != e->nodes[i].original) {
      g_nodes_patched.fetch_add(1, std::memory_order_relaxed);
    }
  }
  e->dirty = true;
  // A copy of one replay is made from the graph whose parameters it runs now.
  CUgraph previous = e->source;
  e->source = graph;
  return previous;
}

} // namespace

void graph_exec_updated(CUgraphExec exec, CUgraph graph, bool ok) {
  Exec* e = live_exec(exec);
  if (!e || !ok) return; // a refused update changes nothing
  CUgraph previous;
  {
    std::lock_guard lock(e->mutex);
    previous = update_locked(e, graph);
  }
  if (previous && previous != e->graph) release_graph(previous);
}

void graph_exec_untrackable(CUgraphExec exec, const char* why) {
  Exec* e = live_exec(exec);
  if (!e) return;
  std::lock_guard lock(e->mutex);
  if (e->copy_why.empty()) e->copy_why = why;
}

void graph_exec_give_up(CUgraphExec exec, const char* why) {
  Exec* e = live_exec(exec);
  if (!e) return;
  std::lock_guard lock(e->mutex);
  if (!e->untouchable) give_up_locked(*e, why);
}

void graph_node_enabled(CUgraphExec exec, CUgraphNode node, bool on) {
  Exec* e = live_exec(exec);
  if (!e) return;
  std::lock_guard lock(e->mutex);
  fold_locked(*e);
  bool kernel = false;
  for (Node& n : e->nodes) {
    if (n.node == node) {
      n.enabled = on;
      kernel = true;
    }
  }
  if (!kernel && e->copy_why.empty()) {
    e->copy_why = "a node of it was disabled in place, which a copy would not repeat";
  }
}

bool graph_destroy_deferred(CUgraph graph) {
  if (!graph) return false;
  std::lock_guard lock(g_mutex);
  if (execs_using(graph) == 0) return false;
  (*g_deferred)[graph] = 1;
  return true;
}

void graph_node_destroying(CUgraphNode node) {
  // g_mutex held throughout: the reporter frees destroyed executable graphs under it.
  std::lock_guard glock(g_mutex);
  for (Exec* e : *g_execs) {
    std::lock_guard lock(e->mutex);
    if (e->destroyed || e->untouchable) continue;
    bool names = std::any_of(e->nodes.begin(), e->nodes.end(),
                             [&](const Node& n) { return n.node == node; });
    if (names) give_up_locked(*e, "a node of the graph it was made from was destroyed");
  }
}

CUresult graph_launch(CUgraphExec exec, CUstream stream, bool per_thread) {
  using Launch = CUresult (*)(CUgraphExec, CUstream);
  auto real = real_fn<Launch>(per_thread ? Fn::cuGraphLaunch_ptsz : Fn::cuGraphLaunch);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!enabled()) return real(exec, stream);
  Exec* e = g_table->find(exec);
  if (__builtin_expect(!e, 0)) return real(exec, stream);
  // Launched into a stream being captured, the graph becomes a child graph node: nothing runs.
  if (__builtin_expect(stream_captures() != 0, 0) &&
      stream_capturing(stream, per_thread)) {
    return real(exec, stream);
  }
  uint64_t generation = g_swap_generation.load(std::memory_order_acquire);
  if (__builtin_expect(e->generation.load(std::memory_order_relaxed) != generation || e->dirty, 0)) {
    std::lock_guard lock(e->mutex);
    reconcile_locked(*e, generation);
  }
  if (__builtin_expect(g_capture_hint.load(std::memory_order_relaxed) != 0, 0)) {
    int res = 0;
    if (capture_graph_replay(e, stream, per_thread, &res)) {
      if (res == CUDA_SUCCESS) e->replays.fetch_add(1, std::memory_order_relaxed);
      return CUresult(res);
    }
  }
  CUresult res;
  uint64_t due = e->next_sample.load(std::memory_order_relaxed);
  SampleSlot slot;
  if (__builtin_expect(due != 0, 1) &&
      e->replays.load(std::memory_order_relaxed) + 1 >= due &&
      e->next_sample.compare_exchange_strong(due, due + config().sample_every,
                                             std::memory_order_relaxed) &&
      sample_begin(stream, per_thread, &slot)) {
    res = real(exec, stream);
    sample_end_into(slot, stream, per_thread, &e->timing->sampled, &e->timing->sampled_ns,
                    res == CUDA_SUCCESS);
  } else {
    res = real(exec, stream);
  }
  if (__builtin_expect(res == CUDA_SUCCESS, 1)) e->replays.fetch_add(1, std::memory_order_relaxed);
  return res;
}

void graph_fold() {
  std::vector<Exec*> execs, gone;
  {
    std::lock_guard lock(g_mutex);
    execs = *g_execs;
  }
  bool capture_due = false;
  for (Exec* e : execs) {
    std::lock_guard lock(e->mutex);
    fold_locked(*e);
    if (e->destroyed) gone.push_back(e); // freed below, under g_mutex
    for (const Node& n : e->nodes) capture_due = capture_due || capture_due_at(n);
  }
  if (!capture_due) g_capture_hint.store(0, std::memory_order_relaxed);
  if (gone.empty()) return;
  std::lock_guard lock(g_mutex);
  for (Exec* e : gone) {
    g_execs->erase(std::remove(g_execs->begin(), g_execs->end(), e), g_execs->end());
    delete e; // its Timing stays: a pair in flight may still add to it
  }
}

std::vector<std::pair<KernelRecord*, GraphKernelTotals>> graph_totals() {
  std::map<KernelRecord*, GraphKernelTotals> by;
  std::vector<Exec*> execs;
  {
    std::lock_guard lock(g_mutex);
    execs = *g_execs;
  }
  for (Exec* e : execs) {
    std::lock_guard lock(e->mutex);
    if (e->destroyed) continue;
    std::map<KernelRecord*, bool> in_this;
    for (const Node& n : e->nodes) {
      if (!n.record) continue;
      GraphKernelTotals& t = by[n.record];
      t.nodes += 1;
      if (n.current != n.original) t.nodes_serving += 1;
      in_this[n.record] = true;
    }
    for (auto& [r, _] : in_this) by[r].graphs += 1;
  }
  // Kernels whose graphs are all gone still have their replays to report.
  for (KernelRecord* r : registry().records()) {
    if (r->graph_launches.load(std::memory_order_relaxed) && !by.count(r)) by[r] = {};
  }
  std::vector<std::pair<KernelRecord*, GraphKernelTotals>> out;
  for (auto& [r, t] : by) {
    t.graph_launches = r->graph_launches.load(std::memory_order_relaxed);
    out.emplace_back(r, t);
  }
  return out;
}

uint64_t graph_replays_total() { return g_replays_folded.load(std::memory_order_relaxed); }
uint64_t graph_nodes_patched_total() {
  int64_t v = int64_t(g_nodes_patched.load(std::memory_order_relaxed));
  return v < 0 ? 0 : uint64_t(v);
}

void graph_reset_after_fork() {
  // The child has no graphs of its parent's that it may launch safely with our bookkeeping.
  g_table = new ExecTable;
  g_execs = new std::vector<Exec*>;
  g_deferred = new std::map<CUgraph, int>;
  g_variants = new std::unordered_map<void*, void*>;
  g_kernel_of = new std::unordered_map<void*, const void*>;
  g_launch_divert.fetch_and(k_divert_capture - 1, std::memory_order_relaxed); // no capture live
  g_replays_folded.store(0, std::memory_order_relaxed);
  g_nodes_patched.store(0, std::memory_order_relaxed);
  g_capture_hint.store(0, std::memory_order_relaxed);
}

} // namespace hone::shim
