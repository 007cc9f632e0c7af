// CUDA graphs: building them (cuGraphCreate, cuGraphAdd*Node, edges, clones), instantiating them
// into executable graphs, updating those, and launching them (emu/graph.hpp).
//
// A template node holds copies of everything it was given (a kernel's argument bytes included),
// an exec holds copies of the template's nodes, and a launch runs the exec's plan: each node
// through the same internals as its stream-ordered counterpart (run_kernel, run_copy_3d,
// run_memset_2d), starting in modeled time when its last dependency ends.
#include "emu/graph.hpp"

#include "emu/log.hpp"
#include "emu/memory.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

namespace hone::emu {

namespace {

// The owner key of graph memory: no context frees it with itself.
const char k_graph_memory_owner = 0;

constexpr uint64_t k_instantiate_flags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

template <class Map> auto* find_in(Map& map, Handle h) {
  auto it = map.find(h);
  return it == map.end() ? nullptr : it->second.get();
}

bool edge_is_valid(const CUgraphEdgeData& e) {
  for (unsigned char b : e.reserved) {
    if (b != 0) return false;
  }
  return e.to_port == 0 && e.type <= CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
}

// Dependencies of a new node of `g`: nodes of `g`, each once, with valid edge data.
CUresult check_deps(const Graph& g, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                    size_t count) {
  if (count > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (!g.nodes.count(from_cu(deps[i]))) return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < i; ++j) {
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    if (edges != nullptr && !edge_is_valid(edges[i])) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Fill `out` (capacity *count, may be null) from `items` as the cuGraphGet* queries do: a null
// array asks for the count; a larger one gets nulls past the end; *count becomes what was written
// (or the total, when only counting).
template <class T> void fill_list(const std::vector<T>& items, T* out, size_t* count) {
  if (out == nullptr) {
    *count = items.size();
    return;
  }
  size_t n = std::min(*count, items.size());
  for (size_t i = 0; i < n; ++i) out[i] = items[i];
  for (size_t i = n; i < *count; ++i) out[i] = T{};
  *count = n;
}

// --- building nodes from the application's structures (call without the lock) ----------------

CUresult kernel_from(const CUDA_KERNEL_NODE_PARAMS& p, bool has_kern, KernelNode& out) {
  Handle given = from_cu(p.func);
  Handle kern = 0;
  if (given == 0 && has_kern) {
    given = from_cu(p.kern);
    kern = given;
  }
  if (given == 0) return CUDA_ERROR_INVALID_VALUE;
  Handle fn = 0;
  if (CUresult rc = resolve_function(given, fn); rc != CUDA_SUCCESS)
    return rc == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_VALUE : rc;
  if (p.gridDimX == 0 || p.gridDimY == 0 || p.gridDimZ == 0 || p.blockDimX == 0 ||
      p.blockDimY == 0 || p.blockDimZ == 0)
    return CUDA_ERROR_INVALID_VALUE;
  KernelNode k;
  k.function = fn;
  k.kern = kern;
  k.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  k.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  k.shared_bytes = p.sharedMemBytes;
  if (CUresult rc = pack_kernel_params(fn, p.kernelParams, p.extra, k.args, k.slots);
      rc != CUDA_SUCCESS)
    return rc == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_VALUE : rc;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Function* f = r.function(fn);
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  k.ctx = f->ctx;
  k.attributes = std::move(out.attributes); // attributes are not parameters: they stay
  out = std::move(k);
  return CUDA_SUCCESS;
}

CUDA_KERNEL_NODE_PARAMS kernel_v2_of(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  CUDA_KERNEL_NODE_PARAMS q{};
  q.func = p.func;
  q.gridDimX = p.gridDimX;
  q.gridDimY = p.gridDimY;
  q.gridDimZ = p.gridDimZ;
  q.blockDimX = p.blockDimX;
  q.blockDimY = p.blockDimY;
  q.blockDimZ = p.blockDimZ;
  q.sharedMemBytes = p.sharedMemBytes;
  q.kernelParams = p.kernelParams;
  q.extra = p.extra;
  return q;
}

// The context a copy or memset node runs in: the one given, or the current one.
CUresult op_context(Registry& r, CUcontext given, Handle& out) {
  if (given != nullptr) {
    Context* c = live_context(r, from_cu(given));
    if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    out = c->handle;
    return CUDA_SUCCESS;
  }
  Context* c = nullptr;
  if (CUresult rc = current_context(r, c); rc != CUDA_SUCCESS) return rc;
  out = c->handle;
  return CUDA_SUCCESS;
}

CUresult copy_from(Registry& r, const CUDA_MEMCPY3D* p, CUcontext ctx, GraphNode& n) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = check_copy_3d(*p); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = op_context(r, ctx, n.op_ctx); rc != CUDA_SUCCESS) return rc;
  n.copy = *p;
  return CUDA_SUCCESS;
}

CUresult memset_from(Registry& r, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx, GraphNode& n) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = check_memset_2d(p->dst, p->pitch, p->width, p->height, p->elementSize);
      rc != CUDA_SUCCESS)
    return rc;
  if (CUresult rc = op_context(r, ctx, n.op_ctx); rc != CUDA_SUCCESS) return rc;
  n.memset = *p;
  return CUDA_SUCCESS;
}

CUresult host_from(const CUDA_HOST_NODE_PARAMS* p, GraphNode& n) {
  if (p == nullptr || p->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  n.host = *p;
  return CUDA_SUCCESS;
}

CUresult event_from(Registry& r, CUevent e, GraphNode& n) {
  if (r.event(from_cu(e)) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  n.event = from_cu(e);
  return CUDA_SUCCESS;
}

bool has_memory_nodes(Registry& r, const Graph& g) {
  for (const auto& [h, n] : g.nodes) {
    if (n.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n.type == CU_GRAPH_NODE_TYPE_MEM_FREE) return true;
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH) {
      if (const Graph* c = graph_registry().graph(n.child); c && has_memory_nodes(r, *c)) return true;
    }
  }
  return false;
}

Graph& clone_graph(Registry& r, const Graph& src);

// A child graph node's graph: a clone of `child` (or `child` itself, moved).
CUresult child_from(Registry& r, CUgraph child, bool move, GraphNode& n) {
  Graph* c = graph_registry().graph(from_cu(child));
  if (c == nullptr || c->owner_node != 0) return CUDA_ERROR_INVALID_VALUE;
  if (c->capture != 0 && graph_registry().capture(c->capture) != nullptr)
    return CUDA_ERROR_ILLEGAL_STATE;
  // A cloned child may hold no memory nodes (cuGraphAddChildGraphNode).
  if (!move && has_memory_nodes(r, *c)) return CUDA_ERROR_INVALID_VALUE;
  n.child = move ? c->handle : clone_graph(r, *c).handle;
  return CUDA_SUCCESS;
}

CUresult alloc_from(Registry& r, const CUDA_MEM_ALLOC_NODE_PARAMS* p, GraphNode& n) {
  if (p == nullptr || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUmemPoolProps& props = p->poolProps;
  if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (props.location.type != CU_MEM_LOCATION_TYPE_DEVICE || props.location.id != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (props.handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  if (p->accessDescCount > 0 && p->accessDescs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < p->accessDescCount; ++i) {
    const CUmemAccessDesc& d = p->accessDescs[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id != 0)
      return CUDA_ERROR_INVALID_VALUE;
  }
  n.pool_props = props;
  n.access.assign(p->accessDescs, p->accessDescs + p->accessDescCount);
  return new_graph_allocation(r, p->bytesize, n.alloc);
}

CUresult free_from(Registry& r, CUdeviceptr dptr, GraphNode& n) {
  if (!is_graph_allocation(r, dptr)) return CUDA_ERROR_INVALID_VALUE;
  n.free_ptr = dptr;
  return CUDA_SUCCESS;
}

// --- graphs ------------------------------------------------------------------------------------

void link(GraphRegistry&, GraphNode& from, GraphNode& to, const CUgraphEdgeData& e) {
  to.deps.push_back(from.handle);
  to.dep_edges.push_back(e);
  from.dependents.push_back(to.handle);
}

Graph& clone_graph(Registry& r, const Graph& src) {
  GraphRegistry& gr = graph_registry();
  Graph& g = new_graph(r);
  std::map<Handle, Handle> map;
  for (const auto& [h, n] : src.nodes) {
    GraphNode copy = n;
    copy.handle = r.new_handle();
    copy.graph = g.handle;
    copy.deps.clear();
    copy.dep_edges.clear();
    copy.dependents.clear();
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH) {
      if (const Graph* child = gr.graph(n.child)) {
        Graph& c = clone_graph(r, *child);
        c.owner_node = copy.handle;
        copy.child = c.handle;
      }
    }
    map[h] = copy.handle;
    g.cloned_from[copy.handle] = h;
    gr.node_graph[copy.handle] = g.handle;
    g.nodes.emplace(copy.handle, std::move(copy));
  }
  for (const auto& [h, n] : src.nodes) {
    GraphNode& to = g.nodes.at(map.at(h));
    for (size_t i = 0; i < n.deps.size(); ++i)
      link(gr, g.nodes.at(map.at(n.deps[i])), to, n.dep_edges[i]);
  }
  return g;
}

// Remove node `h` from its graph: its edges, and the child graph it owns.
void remove_node(Registry& r, Graph& g, Handle h) {
  GraphRegistry& gr = graph_registry();
  auto it = g.nodes.find(h);
  if (it == g.nodes.end()) return;
  GraphNode& n = it->second;
  for (Handle d : n.deps) {
    if (auto dit = g.nodes.find(d); dit != g.nodes.end())
      std::erase(dit->second.dependents, h);
  }
  for (Handle d : n.dependents) {
    if (auto dit = g.nodes.find(d); dit != g.nodes.end()) {
      GraphNode& to = dit->second;
      for (size_t i = 0; i < to.deps.size();) {
        if (to.deps[i] == h) {
          to.deps.erase(to.deps.begin() + i);
          to.dep_edges.erase(to.dep_edges.begin() + i);
        } else {
          ++i;
        }
      }
    }
  }
  Handle child = n.type == CU_GRAPH_NODE_TYPE_GRAPH ? n.child : 0;
  gr.node_graph.erase(h);
  g.nodes.erase(it);
  if (child != 0) destroy_graph(r, child);
}

// Node `h` and the graph holding it, both alive, or INVALID_VALUE.
CUresult find_node(Registry&, CUgraphNode h, GraphNode*& out) {
  out = graph_registry().node(from_cu(h));
  return out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult find_typed(Registry& r, CUgraphNode h, int type, GraphNode*& out) {
  if (CUresult rc = find_node(r, h, out); rc != CUDA_SUCCESS) return rc;
  return out->type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Add a node built by `build` (called with the lock held) to graph `hg`.
template <class Build>
CUresult add_built(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps,
                   const CUgraphEdgeData* edges, size_t count, int type, Build&& build) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Graph* g = graph_registry().graph(from_cu(hg));
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The dependencies first: nothing is made (a clone, graph memory) for a node that fails.
  if (CUresult rc = check_deps(*g, deps, edges, count); rc != CUDA_SUCCESS) return rc;
  GraphNode n;
  n.type = type;
  if (CUresult rc = build(r, n); rc != CUDA_SUCCESS) return rc;
  g = graph_registry().graph(from_cu(hg)); // build may have made graphs (a clone)
  Handle h = 0;
  Handle child = n.type == CU_GRAPH_NODE_TYPE_GRAPH ? n.child : 0;
  if (CUresult rc = add_node(r, *g, std::move(n), deps, edges, count, h); rc != CUDA_SUCCESS)
    return rc;
  if (child != 0) graph_registry().graph(child)->owner_node = h;
  *out = to_cu<CUgraphNode>(h);
  return CUDA_SUCCESS;
}

CUresult add_kernel(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t count,
                    const CUDA_KERNEL_NODE_PARAMS* p, bool has_kern) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (graph_registry().graph(from_cu(hg)) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  }
  KernelNode k;
  if (CUresult rc = kernel_from(*p, has_kern, k); rc != CUDA_SUCCESS) return rc;
  return add_built(out, hg, deps, nullptr, count, CU_GRAPH_NODE_TYPE_KERNEL,
                   [&](Registry&, GraphNode& n) {
                     n.kernel = std::move(k);
                     return CUDA_SUCCESS;
                   });
}

// --- instantiation -----------------------------------------------------------------------------

struct PlanError {
  int result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  Handle node = 0;
};

CUresult build_plan(Registry& r, const Graph& g, std::shared_ptr<ExecPlan>& out, PlanError& err) {
  auto plan = std::make_shared<ExecPlan>();
  std::map<Handle, size_t> index;
  for (const auto& [h, n] : g.nodes) {
    index[h] = plan->nodes.size();
    ExecNode en;
    en.node = n;
    plan->nodes.push_back(std::move(en));
  }
  std::vector<size_t> pending(plan->nodes.size());
  for (size_t i = 0; i < plan->nodes.size(); ++i) {
    ExecNode& en = plan->nodes[i];
    for (Handle d : en.node.deps) en.deps.push_back(index.at(d));
    pending[i] = en.deps.size();
    if (en.node.type == CU_GRAPH_NODE_TYPE_GRAPH) {
      const Graph* child = graph_registry().graph(en.node.child);
      if (child == nullptr) return CUDA_ERROR_INVALID_VALUE;
      if (CUresult rc = build_plan(r, *child, en.child, err); rc != CUDA_SUCCESS) {
        if (err.node == 0) err.node = en.node.handle;
        return rc;
      }
    }
  }
  // Kahn's algorithm, lowest creation index first: a deterministic topological order.
  std::set<size_t> ready;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i] == 0) ready.insert(i);
  }
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    plan->order.push_back(i);
    for (Handle d : plan->nodes[i].node.dependents) {
      size_t j = index.at(d);
      if (--pending[j] == 0) ready.insert(j);
    }
  }
  if (plan->order.size() != plan->nodes.size()) {
    err.result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i] != 0) {
        err.node = plan->nodes[i].node.handle;
        break;
      }
    }
    return CUDA_ERROR_INVALID_VALUE; // a cycle (cuGraphAddDependencies allowed it)
  }
  plan->index = std::move(index);
  out = std::move(plan);
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* out, CUgraph hg, uint64_t flags, CUstream upload, bool with_params,
                     PlanError& err) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~k_instantiate_flags) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0 && !with_params)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  GraphRegistry& gr = graph_registry();
  Graph* g = gr.graph(from_cu(hg));
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (g->capture != 0 && gr.capture(g->capture) != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0) {
    log(LogLevel::warn, "cuGraphInstantiate: device-side graph launch "
                        "(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) is not supported by the "
                        "emulated device: CUDA_ERROR_NOT_SUPPORTED");
    err.result = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, upload, false, s); rc != CUDA_SUCCESS) return rc;
  }
  std::shared_ptr<ExecPlan> plan;
  if (CUresult rc = build_plan(r, *g, plan, err); rc != CUDA_SUCCESS) {
    if (err.result == CUDA_GRAPH_INSTANTIATE_SUCCESS) err.result = CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
  }
  auto exec = std::make_unique<GraphExec>();
  exec->handle = r.new_handle();
  exec->graph = g->handle;
  exec->flags = flags;
  exec->plan = std::move(plan);
  *out = to_cu<CUgraphExec>(exec->handle);
  gr.execs.emplace(exec->handle, std::move(exec));
  return CUDA_SUCCESS;
}

// --- launch ------------------------------------------------------------------------------------

void collect_allocations(const ExecPlan& plan, std::vector<std::shared_ptr<GraphAllocation>>& out) {
  for (const ExecNode& en : plan.nodes) {
    if (en.node.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && en.node.alloc) out.push_back(en.node.alloc);
    if (en.child) collect_allocations(*en.child, out);
  }
}

CUresult run_plan(const ExecPlan& plan, uint64_t base, uint64_t& end);

// Run one node that starts at `start` (modeled); `end` is when it ends. Called without the lock.
CUresult run_node(const ExecNode& en, uint64_t start, uint64_t& end) {
  const GraphNode& n = en.node;
  end = start;
  if (!en.enabled) return CUDA_SUCCESS; // a disabled node is an empty one
  Registry& r = registry();
  uint64_t ns = 0;
  switch (n.type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    const KernelNode& k = n.kernel;
    if (CUresult rc = run_kernel(k.ctx, k.function, k.grid, k.block, k.shared_bytes, k.args,
                                 k.cooperative(), start, ns);
        rc != CUDA_SUCCESS)
      return rc;
    end = start + ns;
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    if (CUresult rc = run_copy_3d(n.copy, ns); rc != CUDA_SUCCESS) return rc;
    end = start + ns;
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMSET:
    if (CUresult rc = run_memset_2d(n.memset.dst, n.memset.pitch, n.memset.value, n.memset.width,
                                    n.memset.height, n.memset.elementSize, ns);
        rc != CUDA_SUCCESS)
      return rc;
    end = start + ns;
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_HOST:
    // As a host function on a stream: on the calling thread, no lock held.
    n.host.fn(n.host.userData);
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
    std::lock_guard lock(r.mutex);
    Event* ev = r.event(n.event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    ev->recorded = true;
    ev->time_ns = start;
    ev->capture = 0;
    ev->capture_nodes.clear();
    ev->capture_edges.clear();
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
    std::lock_guard lock(r.mutex);
    Event* ev = r.event(n.event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (ev->recorded) end = std::max(start, ev->time_ns);
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_GRAPH:
    return en.child ? run_plan(*en.child, start, end) : CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
    std::lock_guard lock(r.mutex);
    n.alloc->live = true;
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_MEM_FREE: {
    std::lock_guard lock(r.mutex);
    auto it = graph_registry().allocations.find(n.free_ptr);
    if (it != graph_registry().allocations.end()) {
      if (auto a = it->second.lock()) a->live = false;
    }
    return CUDA_SUCCESS;
  }
  default:
    return CUDA_SUCCESS; // empty nodes
  }
}

CUresult run_plan(const ExecPlan& plan, uint64_t base, uint64_t& end) {
  std::vector<uint64_t> ends(plan.nodes.size(), base);
  end = base;
  for (size_t i : plan.order) {
    const ExecNode& en = plan.nodes[i];
    uint64_t start = base;
    for (size_t d : en.deps) start = std::max(start, ends[d]);
    uint64_t node_end = start;
    if (CUresult rc = run_node(en, start, node_end); rc != CUDA_SUCCESS) return rc;
    ends[i] = node_end;
    end = std::max(end, node_end);
  }
  return CUDA_SUCCESS;
}

// A graph rebuilt from an exec's plan (a launch into a capturing stream becomes a child node).
Graph& graph_of_plan(Registry& r, const ExecPlan& plan) {
  GraphRegistry& gr = graph_registry();
  Graph& g = new_graph(r);
  std::vector<Handle> handles;
  for (const ExecNode& en : plan.nodes) {
    GraphNode n = en.node;
    n.handle = r.new_handle();
    n.graph = g.handle;
    n.deps.clear();
    n.dep_edges.clear();
    n.dependents.clear();
    if (!en.enabled) n.type = CU_GRAPH_NODE_TYPE_EMPTY;
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH && en.child) {
      Graph& c = graph_of_plan(r, *en.child);
      c.owner_node = n.handle;
      n.child = c.handle;
    }
    handles.push_back(n.handle);
    gr.node_graph[n.handle] = g.handle;
    g.nodes.emplace(n.handle, std::move(n));
  }
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    for (size_t k = 0; k < plan.nodes[i].deps.size(); ++k) {
      link(gr, g.nodes.at(handles[plan.nodes[i].deps[k]]), g.nodes.at(handles[i]),
           plan.nodes[i].node.dep_edges[k]);
    }
  }
  return g;
}

CUresult launch_graph(CUgraphExec he, CUstream hs, bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::shared_ptr<ExecPlan> plan;
  Handle ctx_handle = 0;
  Handle stream_handle = 0;
  uint64_t base = 0;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    GraphExec* exec = graph_registry().exec(from_cu(he));
    if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (captured) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_GRAPH;
      node.child = graph_of_plan(r, *exec->plan).handle;
      Handle h = 0;
      if (CUresult rc = capture_node(r, *s, std::move(node), &h); rc != CUDA_SUCCESS) return rc;
      graph_registry().graph(graph_registry().node(h)->child)->owner_node = h;
      return CUDA_SUCCESS;
    }
    // Allocations a previous launch made and nothing freed: refused, unless the exec frees them.
    std::vector<std::shared_ptr<GraphAllocation>> allocs;
    collect_allocations(*exec->plan, allocs);
    for (const auto& a : allocs) {
      if (!a->live) continue;
      if ((exec->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (const auto& a : allocs) a->live = false;
    plan = exec->plan;
    ctx_handle = ctx->handle;
    stream_handle = s->legacy ? 0 : s->handle;
    base = op_start(r, *ctx, *s);
  }
  uint64_t end = base;
  CUresult status = run_plan(*plan, base, end);
  std::lock_guard lock(r.mutex);
  if (Context* ctx = live_context(r, ctx_handle)) {
    Stream* s = stream_handle == 0 ? &ctx->legacy : r.stream(stream_handle);
    if (s != nullptr) op_finish(*s, end);
  }
  return status;
}

CUresult upload_graph(CUgraphExec he, CUstream hs, bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  if (graph_registry().exec(from_cu(he)) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
  // Nothing to upload: device memory is host memory. An operation of the stream all the same.
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  if (!captured) op_finish(*s, op_start(r, *ctx, *s));
  return CUDA_SUCCESS;
}

// --- updates of executable graphs ---------------------------------------------------------------

struct UpdateError {
  int result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  Handle node = 0, from = 0;
};

bool same_memory_types(const CUDA_MEMCPY3D& a, const CUDA_MEMCPY3D& b) {
  return a.srcMemoryType == b.srcMemoryType && a.dstMemoryType == b.dstMemoryType;
}

// Whether `n` may replace exec node `old` in an update (cuGraphExecUpdate's rules per node type).
int node_update_result(Registry&, const GraphNode& old, const GraphNode& n) {
  switch (n.type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    // The function may change, within the same context; cooperative launches may not change.
    if (old.kernel.ctx != n.kernel.ctx) return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
    if (old.kernel.cooperative() != n.kernel.cooperative())
      return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    if (old.op_ctx != n.op_ctx || !same_memory_types(old.copy, n.copy))
      return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMSET:
    // Only 1D memsets may change shape; the context may not change.
    if (old.op_ctx != n.op_ctx) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    if ((old.memset.height > 1 || n.memset.height > 1) &&
        (old.memset.width != n.memset.width || old.memset.height != n.memset.height ||
         old.memset.elementSize != n.memset.elementSize))
      return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    if (old.alloc->base != n.alloc->base || old.alloc->bytes != n.alloc->bytes)
      return CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEM_FREE:
    if (old.free_ptr != n.free_ptr) return CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  default:
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
  }
}

// The plan `plan` updated with the nodes of `g`, paired in creation order, or the reason why not.
bool try_update(Registry& r, const ExecPlan& plan, const Graph& g, std::shared_ptr<ExecPlan>& out,
                UpdateError& err) {
  GraphRegistry& gr = graph_registry();
  if (g.nodes.size() != plan.nodes.size()) {
    err.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return false;
  }
  std::map<Handle, size_t> pair;
  size_t i = 0;
  for (const auto& [h, n] : g.nodes) pair[h] = i++;
  auto next = std::make_shared<ExecPlan>(plan);
  i = 0;
  for (const auto& [h, n] : g.nodes) {
    ExecNode& en = next->nodes[i];
    const GraphNode& old = plan.nodes[i].node;
    if (n.type != old.type) {
      err.result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
      err.node = h;
      return false;
    }
    std::set<size_t> deps;
    for (Handle d : n.deps) deps.insert(pair.at(d));
    std::set<size_t> old_deps(plan.nodes[i].deps.begin(), plan.nodes[i].deps.end());
    if (deps != old_deps) {
      err.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
      err.node = h;
      for (Handle d : n.deps) {
        if (!old_deps.count(pair.at(d))) {
          err.from = d;
          break;
        }
      }
      return false;
    }
    if (int res = node_update_result(r, old, n); res != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      err.result = res;
      err.node = h;
      return false;
    }
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH) {
      const Graph* child = gr.graph(n.child);
      std::shared_ptr<ExecPlan> child_plan;
      if (child == nullptr || !plan.nodes[i].child ||
          !try_update(r, *plan.nodes[i].child, *child, child_plan, err)) {
        if (err.result == CU_GRAPH_EXEC_UPDATE_SUCCESS)
          err.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        err.node = h;
        return false;
      }
      en.child = std::move(child_plan);
    }
    // The payload is the new node's; the exec's own edges (by index) and enable state stay.
    std::vector<Handle> keep_deps = en.node.deps;
    std::vector<CUgraphEdgeData> keep_edges = en.node.dep_edges;
    std::vector<Handle> keep_out = en.node.dependents;
    Handle keep_handle = en.node.handle;
    en.node = n;
    en.node.handle = keep_handle;
    en.node.deps = std::move(keep_deps);
    en.node.dep_edges = std::move(keep_edges);
    en.node.dependents = std::move(keep_out);
    next->index[h] = i; // the update's nodes name the exec's nodes from now on too
    ++i;
  }
  out = std::move(next);
  return true;
}

// Change one node of an exec: `change` edits a copy of the plan's node (copy on write).
template <class Change>
CUresult exec_change(CUgraphExec he, CUgraphNode hn, Change&& change) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  GraphExec* exec = graph_registry().exec(from_cu(he));
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto it = exec->plan->index.find(from_cu(hn));
  if (it == exec->plan->index.end()) return CUDA_ERROR_INVALID_VALUE;
  auto next = std::make_shared<ExecPlan>(*exec->plan);
  if (CUresult rc = change(r, next->nodes[it->second]); rc != CUDA_SUCCESS) return rc;
  exec->plan = std::move(next);
  return CUDA_SUCCESS;
}

CUresult exec_set_kernel(CUgraphExec he, CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS* p,
                         bool has_kern) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  KernelNode k;
  if (CUresult rc = kernel_from(*p, has_kern, k); rc != CUDA_SUCCESS) return rc;
  return exec_change(he, hn, [&](Registry&, ExecNode& en) {
    if (en.node.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    // The function may change, but not its context (cuGraphExecKernelNodeSetParams).
    if (k.ctx != en.node.kernel.ctx) return CUDA_ERROR_INVALID_VALUE;
    k.attributes = en.node.kernel.attributes;
    en.node.kernel = std::move(k);
    return CUDA_SUCCESS;
  });
}

// --- CUgraphNodeParams (cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams) --------

CUresult unsupported_node_type(int type) {
  log(LogLevel::warn, "graph node type " + std::to_string(type) +
                          (type == CU_GRAPH_NODE_TYPE_CONDITIONAL ? " (conditional)" : "") +
                          " is not supported by the emulated device: CUDA_ERROR_NOT_SUPPORTED");
  return CUDA_ERROR_NOT_SUPPORTED;
}

bool reserved_zero(const CUgraphNodeParams& p) {
  return p.reserved0[0] == 0 && p.reserved0[1] == 0 && p.reserved0[2] == 0;
}

CUresult add_generic(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps,
                     const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* p) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (p == nullptr || !reserved_zero(*p)) return CUDA_ERROR_INVALID_VALUE;
  const int type = enum_value(p->type);
  switch (type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      if (graph_registry().graph(from_cu(hg)) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    }
    CUDA_KERNEL_NODE_PARAMS k;
    static_assert(sizeof k == sizeof p->kernel);
    std::memcpy(&k, &p->kernel, sizeof k);
    KernelNode kn;
    if (CUresult rc = kernel_from(k, true, kn); rc != CUDA_SUCCESS) return rc;
    return add_built(out, hg, deps, edges, count, type, [&](Registry&, GraphNode& n) {
      n.kernel = std::move(kn);
      return CUDA_SUCCESS;
    });
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    if (p->memcpy.flags != 0 || p->memcpy.reserved != 0) return CUDA_ERROR_INVALID_VALUE;
    return add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      return copy_from(r, &p->memcpy.copyParams, p->memcpy.copyCtx, n);
    });
  case CU_GRAPH_NODE_TYPE_MEMSET:
    return add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      CUDA_MEMSET_NODE_PARAMS m{};
      m.dst = p->memset.dst;
      m.pitch = p->memset.pitch;
      m.value = p->memset.value;
      m.elementSize = p->memset.elementSize;
      m.width = p->memset.width;
      m.height = p->memset.height;
      return memset_from(r, &m, p->memset.ctx, n);
    });
  case CU_GRAPH_NODE_TYPE_HOST:
    return add_built(out, hg, deps, edges, count, type, [&](Registry&, GraphNode& n) {
      CUDA_HOST_NODE_PARAMS h{p->host.fn, p->host.userData};
      return host_from(&h, n);
    });
  case CU_GRAPH_NODE_TYPE_GRAPH: {
    const int own = enum_value(p->graph.ownership);
    if (own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE && own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
      return CUDA_ERROR_INVALID_VALUE;
    if (own == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE && p->graph.graph == hg)
      return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      return child_from(r, p->graph.graph, own == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, n);
    });
    if (rc == CUDA_SUCCESS) {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      p->graph.graph = to_cu<CUgraph>(graph_registry().node(from_cu(*out))->child);
    }
    return rc;
  }
  case CU_GRAPH_NODE_TYPE_EMPTY:
    return add_built(out, hg, deps, edges, count, type,
                     [](Registry&, GraphNode&) { return CUDA_SUCCESS; });
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      return event_from(r, p->eventWait.event, n);
    });
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      return event_from(r, p->eventRecord.event, n);
    });
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
    CUresult rc = add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      CUDA_MEM_ALLOC_NODE_PARAMS a{};
      a.poolProps = p->alloc.poolProps;
      a.accessDescs = p->alloc.accessDescs;
      a.accessDescCount = p->alloc.accessDescCount;
      a.bytesize = p->alloc.bytesize;
      return alloc_from(r, &a, n);
    });
    if (rc == CUDA_SUCCESS) {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      p->alloc.dptr = graph_registry().node(from_cu(*out))->alloc->base;
    }
    return rc;
  }
  case CU_GRAPH_NODE_TYPE_MEM_FREE:
    return add_built(out, hg, deps, edges, count, type, [&](Registry& r, GraphNode& n) {
      return free_from(r, p->free.dptr, n);
    });
  default:
    return unsupported_node_type(type);
  }
}

// Apply CUgraphNodeParams to an existing node `n` (template or exec copy): only the parameters
// change, never the node's type.
CUresult set_generic(Registry& r, GraphNode& n, const CUgraphNodeParams& p, KernelNode* kernel) {
  const int type = enum_value(p.type);
  if (type != n.type) return CUDA_ERROR_INVALID_VALUE;
  switch (type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    kernel->attributes = n.kernel.attributes;
    n.kernel = std::move(*kernel);
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMCPY: {
    GraphNode m = n;
    if (CUresult rc = copy_from(r, &p.memcpy.copyParams, p.memcpy.copyCtx, m); rc != CUDA_SUCCESS)
      return rc;
    n.copy = m.copy;
    n.op_ctx = m.op_ctx;
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS ms{p.memset.dst,   p.memset.pitch, p.memset.value,
                               p.memset.elementSize, p.memset.width, p.memset.height};
    GraphNode m = n;
    if (CUresult rc = memset_from(r, &ms, p.memset.ctx, m); rc != CUDA_SUCCESS) return rc;
    n.memset = m.memset;
    n.op_ctx = m.op_ctx;
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_HOST: {
    CUDA_HOST_NODE_PARAMS h{p.host.fn, p.host.userData};
    return host_from(&h, n);
  }
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return event_from(r, p.eventWait.event, n);
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return event_from(r, p.eventRecord.event, n);
  case CU_GRAPH_NODE_TYPE_EMPTY:
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_CONDITIONAL:
    return unsupported_node_type(type);
  default:
    return CUDA_ERROR_INVALID_VALUE; // memory nodes and child graphs cannot be changed this way
  }
}

CUresult kernel_of_generic(const CUgraphNodeParams* p, KernelNode& out, bool& is_kernel) {
  is_kernel = p != nullptr && enum_value(p->type) == CU_GRAPH_NODE_TYPE_KERNEL;
  if (!is_kernel) return CUDA_SUCCESS;
  CUDA_KERNEL_NODE_PARAMS k;
  std::memcpy(&k, &p->kernel, sizeof k);
  return kernel_from(k, true, out);
}

// --- DOT -------------------------------------------------------------------------------------

const char* type_name(int type) {
  switch (type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: return "KERNEL";
  case CU_GRAPH_NODE_TYPE_MEMCPY: return "MEMCPY";
  case CU_GRAPH_NODE_TYPE_MEMSET: return "MEMSET";
  case CU_GRAPH_NODE_TYPE_HOST: return "HOST";
  case CU_GRAPH_NODE_TYPE_GRAPH: return "GRAPH";
  case CU_GRAPH_NODE_TYPE_EMPTY: return "EMPTY";
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "WAIT_EVENT";
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "EVENT_RECORD";
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "MEM_ALLOC";
  case CU_GRAPH_NODE_TYPE_MEM_FREE: return "MEM_FREE";
  default: return "NODE";
  }
}

void dot_graph(Registry& r, const Graph& g, const std::string& prefix, std::string& out) {
  out += "subgraph cluster_" + prefix + " {\nlabel=\"graph " + std::to_string(g.handle) + "\";\n";
  int i = 0;
  std::map<Handle, std::string> names;
  for (const auto& [h, n] : g.nodes) names[h] = prefix + "_" + std::to_string(i++);
  for (const auto& [h, n] : g.nodes) {
    std::string label = type_name(n.type);
    if (n.type == CU_GRAPH_NODE_TYPE_KERNEL) {
      if (Function* f = r.function(n.kernel.function)) label += "\\n" + f->name;
      label += "\\n<<<" + std::to_string(n.kernel.grid.x) + "," + std::to_string(n.kernel.grid.y) +
               "," + std::to_string(n.kernel.grid.z) + "), (" + std::to_string(n.kernel.block.x) +
               "," + std::to_string(n.kernel.block.y) + "," + std::to_string(n.kernel.block.z) +
               ")>>>";
    } else if (n.type == CU_GRAPH_NODE_TYPE_MEMCPY) {
      label += "\\n" + std::to_string(n.copy.WidthInBytes * n.copy.Height * n.copy.Depth) + " bytes";
    } else if (n.type == CU_GRAPH_NODE_TYPE_MEMSET) {
      label += "\\n" + std::to_string(n.memset.width * n.memset.height) + " x " +
               std::to_string(n.memset.elementSize) + " bytes";
    } else if (n.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n.alloc) {
      label += "\\n" + std::to_string(n.alloc->bytes) + " bytes";
    }
    out += names[h] + " [shape=box label=\"" + label + "\"];\n";
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH) {
      if (const Graph* c = graph_registry().graph(n.child)) dot_graph(r, *c, names[h], out);
    }
  }
  for (const auto& [h, n] : g.nodes) {
    for (Handle d : n.deps) out += names[d] + " -> " + names[h] + ";\n";
  }
  out += "}\n";
}

} // namespace

// --- shared with the rest of the driver ----------------------------------------------------------

GraphAllocation::~GraphAllocation() {
  if (base != 0) memory().release(base);
}

bool KernelNode::cooperative() const {
  auto it = attributes.find(CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  return it != attributes.end() && it->second.cooperative != 0;
}

Graph* GraphRegistry::graph(Handle h) {
  return find_in(graphs, h);
}
GraphNode* GraphRegistry::node(Handle h) {
  auto it = node_graph.find(h);
  if (it == node_graph.end()) return nullptr;
  Graph* g = graph(it->second);
  if (g == nullptr) return nullptr;
  auto nit = g->nodes.find(h);
  return nit == g->nodes.end() ? nullptr : &nit->second;
}
GraphExec* GraphRegistry::exec(Handle h) {
  return find_in(execs, h);
}
Capture* GraphRegistry::capture(uint64_t id) {
  auto it = captures.find(id);
  return it == captures.end() ? nullptr : it->second.get();
}

GraphRegistry& graph_registry() {
  // Never destroyed, like the registry itself.
  static GraphRegistry* g = new GraphRegistry();
  return *g;
}

Graph& new_graph(Registry& r) {
  auto g = std::make_unique<Graph>();
  g->handle = r.new_handle();
  Graph& ref = *g;
  graph_registry().graphs.emplace(ref.handle, std::move(g));
  return ref;
}

void destroy_graph(Registry& r, Handle h) {
  GraphRegistry& gr = graph_registry();
  Graph* g = gr.graph(h);
  if (g == nullptr) return;
  std::vector<Handle> children;
  for (const auto& [nh, n] : g->nodes) {
    gr.node_graph.erase(nh);
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH && n.child != 0) children.push_back(n.child);
  }
  gr.graphs.erase(h);
  for (Handle c : children) destroy_graph(r, c);
}

CUresult add_node(Registry& r, Graph& g, GraphNode node, const CUgraphNode* deps,
                  const CUgraphEdgeData* edges, size_t count, Handle& out) {
  if (CUresult rc = check_deps(g, deps, edges, count); rc != CUDA_SUCCESS) return rc;
  node.handle = r.new_handle();
  node.graph = g.handle;
  node.deps.clear();
  node.dep_edges.clear();
  node.dependents.clear();
  Handle h = node.handle;
  GraphNode& n = g.nodes.emplace(h, std::move(node)).first->second;
  graph_registry().node_graph[h] = g.handle;
  for (size_t i = 0; i < count; ++i) {
    CUgraphEdgeData e{};
    if (edges != nullptr) e = edges[i];
    link(graph_registry(), g.nodes.at(from_cu(deps[i])), n, e);
  }
  out = h;
  return CUDA_SUCCESS;
}

CUresult new_graph_allocation(Registry&, uint64_t bytes, std::shared_ptr<GraphAllocation>& out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto base = memory().allocate(bytes, AllocKind::device, &k_graph_memory_owner);
  if (!base) {
    log(LogLevel::info, base.error().message);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto a = std::make_shared<GraphAllocation>();
  a->base = *base;
  a->bytes = bytes;
  graph_registry().allocations[*base] = a;
  out = std::move(a);
  return CUDA_SUCCESS;
}

bool is_graph_allocation(Registry&, uint64_t base) {
  auto& all = graph_registry().allocations;
  auto it = all.find(base);
  if (it == all.end()) return false;
  if (it->second.expired()) {
    all.erase(it);
    return false;
  }
  return true;
}

bool graph_memory_free(Registry&, uint64_t base, CUresult& status) {
  auto& all = graph_registry().allocations;
  auto it = all.find(base);
  if (it == all.end()) return false;
  auto a = it->second.lock();
  if (!a) {
    all.erase(it);
    return false;
  }
  status = a->live ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  a->live = false;
  return true;
}

} // namespace hone::emu

using namespace hone::emu;

namespace {

// A body under the registry lock, after the initialization check.
template <class F> CUresult locked(F&& body) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    return body(r, graph_registry());
  });
}

CUresult get_deps(CUgraphNode hn, CUgraphNode* out, CUgraphEdgeData* edges, size_t* count,
                  bool dependents) {
  return locked([&](Registry& r, GraphRegistry& gr) -> CUresult {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphNode* n = nullptr;
    if (CUresult rc = find_node(r, hn, n); rc != CUDA_SUCCESS) return rc;
    std::vector<CUgraphNode> list;
    std::vector<CUgraphEdgeData> data;
    if (!dependents) {
      for (size_t i = 0; i < n->deps.size(); ++i) {
        list.push_back(to_cu<CUgraphNode>(n->deps[i]));
        data.push_back(n->dep_edges[i]);
      }
    } else {
      for (Handle d : n->dependents) {
        list.push_back(to_cu<CUgraphNode>(d));
        const GraphNode* to = gr.node(d);
        CUgraphEdgeData e{};
        if (to != nullptr) {
          for (size_t i = 0; i < to->deps.size(); ++i) {
            if (to->deps[i] == n->handle) e = to->dep_edges[i];
          }
        }
        data.push_back(e);
      }
    }
    size_t c = *count;
    fill_list(list, out, count);
    if (edges != nullptr && out != nullptr) {
      size_t k = c;
      fill_list(data, edges, &k);
    }
    return CUDA_SUCCESS;
  });
}

CUresult get_edges(CUgraph hg, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges,
                   size_t* count) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (count == nullptr || ((from == nullptr) != (to == nullptr))) return CUDA_ERROR_INVALID_VALUE;
    Graph* g = gr.graph(from_cu(hg));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUgraphNode> f, t;
    std::vector<CUgraphEdgeData> d;
    for (const auto& [h, n] : g->nodes) {
      for (size_t i = 0; i < n.deps.size(); ++i) {
        f.push_back(to_cu<CUgraphNode>(n.deps[i]));
        t.push_back(to_cu<CUgraphNode>(h));
        d.push_back(n.dep_edges[i]);
      }
    }
    size_t c = *count;
    fill_list(f, from, count);
    if (to != nullptr) {
      size_t k = c;
      fill_list(t, to, &k);
    }
    if (edges != nullptr && from != nullptr) {
      size_t k = c;
      fill_list(d, edges, &k);
    }
    return CUDA_SUCCESS;
  });
}

CUresult change_deps(CUgraph hg, const CUgraphNode* from, const CUgraphNode* to,
                     const CUgraphEdgeData* edges, size_t count, bool add) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    Graph* g = gr.graph(from_cu(hg));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (count > 0 && (from == nullptr || to == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    // All checked before any changes.
    for (size_t i = 0; i < count; ++i) {
      auto a = g->nodes.find(from_cu(from[i]));
      auto b = g->nodes.find(from_cu(to[i]));
      if (a == g->nodes.end() || b == g->nodes.end() || a == b) return CUDA_ERROR_INVALID_VALUE;
      if (edges != nullptr && !edge_is_valid(edges[i])) return CUDA_ERROR_INVALID_VALUE;
      bool exists = std::find(b->second.deps.begin(), b->second.deps.end(), a->first) !=
                    b->second.deps.end();
      if (exists == add) return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; ++i) {
      GraphNode& a = g->nodes.at(from_cu(from[i]));
      GraphNode& b = g->nodes.at(from_cu(to[i]));
      if (add) {
        CUgraphEdgeData e{};
        if (edges != nullptr) e = edges[i];
        link(gr, a, b, e);
      } else {
        std::erase(a.dependents, b.handle);
        for (size_t k = 0; k < b.deps.size(); ++k) {
          if (b.deps[k] == a.handle) {
            b.deps.erase(b.deps.begin() + k);
            b.dep_edges.erase(b.dep_edges.begin() + k);
            break;
          }
        }
      }
    }
    return CUDA_SUCCESS;
  });
}

CUresult kernel_get(CUgraphNode hn, CUDA_KERNEL_NODE_PARAMS* out) {
  return locked([&](Registry& r, GraphRegistry&) -> CUresult {
    if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphNode* n = nullptr;
    if (CUresult rc = find_typed(r, hn, CU_GRAPH_NODE_TYPE_KERNEL, n); rc != CUDA_SUCCESS)
      return rc;
    KernelNode& k = n->kernel;
    // kernelParams point into the node's own copy of the arguments, valid until it changes.
    k.param_ptrs.clear();
    for (const ParamSlot& s : k.slots) k.param_ptrs.push_back(k.args.data() + s.offset);
    *out = CUDA_KERNEL_NODE_PARAMS{};
    out->func = to_cu<CUfunction>(k.function);
    out->gridDimX = k.grid.x;
    out->gridDimY = k.grid.y;
    out->gridDimZ = k.grid.z;
    out->blockDimX = k.block.x;
    out->blockDimY = k.block.y;
    out->blockDimZ = k.block.z;
    out->sharedMemBytes = k.shared_bytes;
    out->kernelParams = k.param_ptrs.empty() ? nullptr : k.param_ptrs.data();
    out->extra = nullptr;
    out->kern = to_cu<CUkernel>(k.kern);
    out->ctx = to_cu<CUcontext>(k.ctx);
    return CUDA_SUCCESS;
  });
}

CUresult kernel_set(CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS* p, bool has_kern) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    KernelNode k;
    if (CUresult rc = kernel_from(*p, has_kern, k); rc != CUDA_SUCCESS) return rc;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    GraphNode* n = nullptr;
    if (CUresult rc = find_typed(r, hn, CU_GRAPH_NODE_TYPE_KERNEL, n); rc != CUDA_SUCCESS)
      return rc;
    k.attributes = n->kernel.attributes;
    n->kernel = std::move(k);
    return CUDA_SUCCESS;
  });
}

CUresult instantiate_legacy(CUgraphExec* out, CUgraph hg, CUgraphNode* err_node, char* log_buffer,
                            size_t size) {
  return guarded([&]() -> CUresult {
    PlanError err;
    CUresult rc = instantiate(out, hg, 0, nullptr, false, err);
    if (err_node != nullptr) *err_node = to_cu<CUgraphNode>(err.node);
    if (log_buffer != nullptr && size > 0) {
      std::string text = rc == CUDA_SUCCESS ? "" : "graph instantiation failed";
      if (err.result == CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE) text += ": the graph has a cycle";
      std::snprintf(log_buffer, size, "%s", text.c_str());
    }
    return rc;
  });
}

CUresult exec_update(CUgraphExec he, CUgraph hg, CUgraphExecUpdateResultInfo* info) {
  return locked([&](Registry& r, GraphRegistry& gr) -> CUresult {
    if (info == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *info = CUgraphExecUpdateResultInfo{};
    GraphExec* exec = gr.exec(from_cu(he));
    Graph* g = gr.graph(from_cu(hg));
    if (exec == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<ExecPlan> next;
    UpdateError err;
    if (!try_update(r, *exec->plan, *g, next, err)) {
      info->result = static_cast<CUgraphExecUpdateResult>(err.result);
      info->errorNode = to_cu<CUgraphNode>(err.node);
      info->errorFromNode = to_cu<CUgraphNode>(err.from);
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    exec->plan = std::move(next);
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
  });
}

template <class F> CUresult node_get(CUgraphNode hn, int type, F&& get) {
  return locked([&](Registry& r, GraphRegistry&) -> CUresult {
    GraphNode* n = nullptr;
    if (CUresult rc = find_typed(r, hn, type, n); rc != CUDA_SUCCESS) return rc;
    return get(r, *n);
  });
}

} // namespace

extern "C" {

// --- graphs and nodes -----------------------------------------------------------------------

CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  return locked([&](Registry& r, GraphRegistry&) -> CUresult {
    if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    *phGraph = to_cu<CUgraph>(new_graph(r).handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  return locked([&](Registry& r, GraphRegistry& gr) -> CUresult {
    Graph* g = gr.graph(from_cu(hGraph));
    // A child graph belongs to its node; a graph being captured into to its capture.
    if (g == nullptr || g->owner_node != 0) return CUDA_ERROR_INVALID_VALUE;
    if (g->capture != 0 && gr.capture(g->capture) != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
    destroy_graph(r, g->handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphClone(CUgraph* phGraphClone, CUgraph originalGraph) {
  return locked([&](Registry& r, GraphRegistry& gr) -> CUresult {
    if (phGraphClone == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Graph* g = gr.graph(from_cu(originalGraph));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *phGraphClone = to_cu<CUgraph>(clone_graph(r, *g).handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode* phNode, CUgraphNode hOriginalNode,
                                        CUgraph hClonedGraph) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (phNode == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Graph* g = gr.graph(from_cu(hClonedGraph));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& [clone, original] : g->cloned_from) {
      if (original == from_cu(hOriginalNode) && g->nodes.count(clone)) {
        *phNode = to_cu<CUgraphNode>(clone);
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  return locked([&](Registry& r, GraphRegistry&) -> CUresult {
    if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphNode* n = nullptr;
    if (CUresult rc = find_node(r, hNode, n); rc != CUDA_SUCCESS) return rc;
    *type = static_cast<CUgraphNodeType>(n->type);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (numNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Graph* g = gr.graph(from_cu(hGraph));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUgraphNode> list;
    for (const auto& [h, n] : g->nodes) list.push_back(to_cu<CUgraphNode>(h));
    fill_list(list, nodes, numNodes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode* rootNodes, size_t* numRootNodes) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (numRootNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Graph* g = gr.graph(from_cu(hGraph));
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUgraphNode> list;
    for (const auto& [h, n] : g->nodes) {
      if (n.deps.empty()) list.push_back(to_cu<CUgraphNode>(h));
    }
    fill_list(list, rootNodes, numRootNodes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to,
                                 size_t* numEdges) {
  return get_edges(hGraph, from, to, nullptr, numEdges);
}
CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to,
                                    CUgraphEdgeData* edgeData, size_t* numEdges) {
  return get_edges(hGraph, from, to, edgeData, numEdges);
}
CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode* dependencies,
                                            size_t* numDependencies) {
  return get_deps(hNode, dependencies, nullptr, numDependencies, false);
}
CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode* dependencies,
                                               CUgraphEdgeData* edgeData,
                                               size_t* numDependencies) {
  return get_deps(hNode, dependencies, edgeData, numDependencies, false);
}
CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode* dependentNodes,
                                              size_t* numDependentNodes) {
  return get_deps(hNode, dependentNodes, nullptr, numDependentNodes, true);
}
CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode* dependentNodes,
                                                 CUgraphEdgeData* edgeData,
                                                 size_t* numDependentNodes) {
  return get_deps(hNode, dependentNodes, edgeData, numDependentNodes, true);
}
CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode* from,
                                        const CUgraphNode* to, size_t numDependencies) {
  return change_deps(hGraph, from, to, nullptr, numDependencies, true);
}
CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode* from,
                                           const CUgraphNode* to, const CUgraphEdgeData* edgeData,
                                           size_t numDependencies) {
  return change_deps(hGraph, from, to, edgeData, numDependencies, true);
}
CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode* from,
                                           const CUgraphNode* to, size_t numDependencies) {
  return change_deps(hGraph, from, to, nullptr, numDependencies, false);
}
CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode* from,
                                              const CUgraphNode* to,
                                              const CUgraphEdgeData* edgeData,
                                              size_t numDependencies) {
  return change_deps(hGraph, from, to, edgeData, numDependencies, false);
}

CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode) {
  return locked([&](Registry& r, GraphRegistry& gr) -> CUresult {
    GraphNode* n = nullptr;
    if (CUresult rc = find_node(r, hNode, n); rc != CUDA_SUCCESS) return rc;
    remove_node(r, *gr.graph(n->graph), n->handle);
    return CUDA_SUCCESS;
  });
}

// --- adding nodes ----------------------------------------------------------------------------

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                      const CUgraphNode* dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  return guarded([&] {
    if (nodeParams == nullptr)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUDA_KERNEL_NODE_PARAMS p = kernel_v2_of(*nodeParams);
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &p, false);
  });
}
CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                         const CUgraphNode* dependencies, size_t numDependencies,
                                         const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  return guarded([&] {
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, nodeParams, true);
  });
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                      const CUgraphNode* dependencies, size_t numDependencies,
                                      const CUDA_MEMCPY3D* copyParams, CUcontext ctx) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_MEMCPY,
                     [&](Registry& r, GraphNode& n) { return copy_from(r, copyParams, ctx, n); });
  });
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                      const CUgraphNode* dependencies, size_t numDependencies,
                                      const CUDA_MEMSET_NODE_PARAMS* memsetParams, CUcontext ctx) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_MEMSET, [&](Registry& r, GraphNode& n) {
                       return memset_from(r, memsetParams, ctx, n);
                     });
  });
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                    const CUgraphNode* dependencies, size_t numDependencies,
                                    const CUDA_HOST_NODE_PARAMS* nodeParams) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_HOST,
                     [&](Registry&, GraphNode& n) { return host_from(nodeParams, n); });
  });
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                          const CUgraphNode* dependencies, size_t numDependencies,
                                          CUgraph childGraph) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_GRAPH,
                     [&](Registry& r, GraphNode& n) { return child_from(r, childGraph, false, n); });
  });
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                     const CUgraphNode* dependencies, size_t numDependencies) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_EMPTY, [](Registry&, GraphNode&) { return CUDA_SUCCESS; });
  });
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                           const CUgraphNode* dependencies, size_t numDependencies,
                                           CUevent event) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                     [&](Registry& r, GraphNode& n) { return event_from(r, event, n); });
  });
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                         const CUgraphNode* dependencies, size_t numDependencies,
                                         CUevent event) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                     [&](Registry& r, GraphNode& n) { return event_from(r, event, n); });
  });
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                        const CUgraphNode* dependencies, size_t numDependencies,
                                        CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  return guarded([&] {
    CUresult rc = add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                            CU_GRAPH_NODE_TYPE_MEM_ALLOC,
                            [&](Registry& r, GraphNode& n) { return alloc_from(r, nodeParams, n); });
    if (rc == CUDA_SUCCESS) {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      nodeParams->dptr = graph_registry().node(from_cu(*phGraphNode))->alloc->base;
    }
    return rc;
  });
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                       const CUgraphNode* dependencies, size_t numDependencies,
                                       CUdeviceptr dptr) {
  return guarded([&] {
    return add_built(phGraphNode, hGraph, dependencies, nullptr, numDependencies,
                     CU_GRAPH_NODE_TYPE_MEM_FREE,
                     [&](Registry& r, GraphNode& n) { return free_from(r, dptr, n); });
  });
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                const CUgraphNode* dependencies, size_t numDependencies,
                                CUgraphNodeParams* nodeParams) {
  return guarded([&] {
    return add_generic(phGraphNode, hGraph, dependencies, nullptr, numDependencies, nodeParams);
  });
}
CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                   const CUgraphNode* dependencies,
                                   const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                   CUgraphNodeParams* nodeParams) {
  return guarded([&] {
    return add_generic(phGraphNode, hGraph, dependencies, dependencyData, numDependencies,
                       nodeParams);
  });
}

CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams* nodeParams) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (nodeParams == nullptr || !reserved_zero(*nodeParams)) return CUDA_ERROR_INVALID_VALUE;
    KernelNode k;
    bool is_kernel = false;
    if (CUresult rc = kernel_of_generic(nodeParams, k, is_kernel); rc != CUDA_SUCCESS) return rc;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    GraphNode* n = nullptr;
    if (CUresult rc = find_node(r, hNode, n); rc != CUDA_SUCCESS) return rc;
    return set_generic(r, *n, *nodeParams, &k);
  });
}

// --- node parameters ----------------------------------------------------------------------------

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                            CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  return guarded([&]() -> CUresult {
    if (nodeParams == nullptr)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUDA_KERNEL_NODE_PARAMS p{};
    if (CUresult rc = kernel_get(hNode, &p); rc != CUDA_SUCCESS) return rc;
    std::memcpy(nodeParams, &p, sizeof *nodeParams); // v1 is v2's leading fields
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                               CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  return kernel_get(hNode, nodeParams);
}
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                            const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  return guarded([&] {
    if (nodeParams == nullptr)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUDA_KERNEL_NODE_PARAMS p = kernel_v2_of(*nodeParams);
    return kernel_set(hNode, &p, false);
  });
}
CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                               const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  return kernel_set(hNode, nodeParams, true);
}

CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                               CUkernelNodeAttrValue* value_out) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_KERNEL, [&](Registry&, GraphNode& n) -> CUresult {
    if (value_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto it = n.kernel.attributes.find(enum_value(attr));
    *value_out = it != n.kernel.attributes.end() ? it->second : CUkernelNodeAttrValue{};
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                               const CUkernelNodeAttrValue* value) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_KERNEL, [&](Registry&, GraphNode& n) -> CUresult {
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const int id = enum_value(attr);
    // Clusters cannot be honoured (as for cuLaunchKernelEx); the rest are hints or cooperative.
    if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
        (value->clusterDim.x > 1 || value->clusterDim.y > 1 || value->clusterDim.z > 1))
      return CUDA_ERROR_NOT_SUPPORTED;
    n.kernel.attributes[id] = *value;
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  return locked([&](Registry& r, GraphRegistry&) -> CUresult {
    GraphNode* d = nullptr;
    GraphNode* s = nullptr;
    if (CUresult rc = find_typed(r, dst, CU_GRAPH_NODE_TYPE_KERNEL, d); rc != CUDA_SUCCESS)
      return rc;
    if (CUresult rc = find_typed(r, src, CU_GRAPH_NODE_TYPE_KERNEL, s); rc != CUDA_SUCCESS)
      return rc;
    d->kernel.attributes = s->kernel.attributes;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, [&](Registry&, GraphNode& n) -> CUresult {
    if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = n.copy;
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, [&](Registry& r, GraphNode& n) -> CUresult {
    GraphNode m = n;
    if (CUresult rc = copy_from(r, nodeParams, to_cu<CUcontext>(n.op_ctx), m); rc != CUDA_SUCCESS)
      return rc;
    n.copy = m.copy;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEMSET, [&](Registry&, GraphNode& n) -> CUresult {
    if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = n.memset;
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                            const CUDA_MEMSET_NODE_PARAMS* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEMSET, [&](Registry& r, GraphNode& n) -> CUresult {
    GraphNode m = n;
    if (CUresult rc = memset_from(r, nodeParams, to_cu<CUcontext>(n.op_ctx), m);
        rc != CUDA_SUCCESS)
      return rc;
    n.memset = m.memset;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_HOST, [&](Registry&, GraphNode& n) -> CUresult {
    if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = n.host;
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode,
                                          const CUDA_HOST_NODE_PARAMS* nodeParams) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_HOST, [&](Registry&, GraphNode& n) -> CUresult {
    return host_from(nodeParams, n);
  });
}

CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_GRAPH, [&](Registry&, GraphNode& n) -> CUresult {
    if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *phGraph = to_cu<CUgraph>(n.child);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent* event_out) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, [&](Registry&, GraphNode& n) -> CUresult {
    if (event_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *event_out = to_cu<CUevent>(n.event);
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                  [&](Registry& r, GraphNode& n) { return event_from(r, event, n); });
}
CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent* event_out) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, [&](Registry&, GraphNode& n) -> CUresult {
    if (event_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *event_out = to_cu<CUevent>(n.event);
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                  [&](Registry& r, GraphNode& n) { return event_from(r, event, n); });
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                              CUDA_MEM_ALLOC_NODE_PARAMS* params_out) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, [&](Registry&, GraphNode& n) -> CUresult {
    if (params_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *params_out = CUDA_MEM_ALLOC_NODE_PARAMS{};
    params_out->poolProps = n.pool_props;
    params_out->accessDescs = n.access.empty() ? nullptr : n.access.data();
    params_out->accessDescCount = n.access.size();
    params_out->bytesize = n.alloc->bytes;
    params_out->dptr = n.alloc->base;
    return CUDA_SUCCESS;
  });
}
CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr* dptr_out) {
  return node_get(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, [&](Registry&, GraphNode& n) -> CUresult {
    if (dptr_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = n.free_ptr;
    return CUDA_SUCCESS;
  });
}

// Every flag gives the same description: node kinds, kernel names and shapes, sizes, edges.
CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char* path, unsigned int /*flags*/) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::string text = "digraph hone_graph {\n";
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      Graph* g = graph_registry().graph(from_cu(hGraph));
      if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
      dot_graph(r, *g, "g", text);
    }
    text += "}\n";
    std::FILE* f = std::fopen(path, "w");
    if (f == nullptr) return CUDA_ERROR_OPERATING_SYSTEM;
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = std::fclose(f) == 0 && ok;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
  });
}

// --- executable graphs ---------------------------------------------------------------------------

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                    CUgraphNode* phErrorNode, char* logBuffer, size_t bufferSize) {
  return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                       CUgraphNode* phErrorNode, char* logBuffer,
                                       size_t bufferSize) {
  return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  return guarded([&] {
    PlanError err;
    return instantiate(phGraphExec, hGraph, flags, nullptr, false, err);
  });
}

static CUresult instantiate_with_params(CUgraphExec* phGraphExec, CUgraph hGraph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return guarded([&]() -> CUresult {
    if (p == nullptr) return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    PlanError err;
    CUresult rc = instantiate(phGraphExec, hGraph, p->flags, p->hUploadStream, true, err);
    p->hErrNode_out = to_cu<CUgraphNode>(err.node);
    p->result_out = static_cast<CUgraphInstantiateResult>(
        rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                           : (err.result == CUDA_GRAPH_INSTANTIATE_SUCCESS ? CUDA_GRAPH_INSTANTIATE_ERROR
                                                                           : err.result));
    return rc;
  });
}
CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}
CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  // A launch running on another thread keeps its plan; the exec goes at once.
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    return gr.execs.erase(from_cu(hGraphExec)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t* flags) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphExec* e = gr.exec(from_cu(hGraphExec));
    if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = e->flags;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return upload_graph(hGraphExec, hStream, false); });
}
CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return upload_graph(hGraphExec, hStream, true); });
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return launch_graph(hGraphExec, hStream, false); });
}
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return guarded([&] { return launch_graph(hGraphExec, hStream, true); });
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  return guarded([&] {
    if (nodeParams == nullptr)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUDA_KERNEL_NODE_PARAMS p = kernel_v2_of(*nodeParams);
    return exec_set_kernel(hGraphExec, hNode, &p, false);
  });
}
CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  return guarded([&] { return exec_set_kernel(hGraphExec, hNode, nodeParams, true); });
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMCPY3D* copyParams, CUcontext ctx) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_MEMCPY) return CUDA_ERROR_INVALID_VALUE;
      GraphNode m = en.node;
      if (CUresult rc = copy_from(r, copyParams, ctx, m); rc != CUDA_SUCCESS) return rc;
      // Operands may not change kind (host/device) nor context.
      if (m.op_ctx != en.node.op_ctx || !same_memory_types(m.copy, en.node.copy))
        return CUDA_ERROR_INVALID_VALUE;
      en.node.copy = m.copy;
      return CUDA_SUCCESS;
    });
  });
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS* memsetParams,
                                                CUcontext ctx) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_MEMSET) return CUDA_ERROR_INVALID_VALUE;
      GraphNode m = en.node;
      if (CUresult rc = memset_from(r, memsetParams, ctx, m); rc != CUDA_SUCCESS) return rc;
      if (node_update_result(r, en.node, m) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
      en.node.memset = m.memset;
      return CUDA_SUCCESS;
    });
  });
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS* nodeParams) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry&, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
      return host_from(nodeParams, en.node);
    });
  });
}

CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    CUgraph childGraph) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_GRAPH || !en.child) return CUDA_ERROR_INVALID_VALUE;
      const Graph* g = graph_registry().graph(from_cu(childGraph));
      if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
      // The new child must have the instantiated child's topology (the update rules apply).
      std::shared_ptr<ExecPlan> next;
      UpdateError err;
      if (!try_update(r, *en.child, *g, next, err)) return CUDA_ERROR_INVALID_VALUE;
      en.child = std::move(next);
      return CUDA_SUCCESS;
    });
  });
}

CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    CUevent event) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_EVENT_RECORD) return CUDA_ERROR_INVALID_VALUE;
      return event_from(r, event, en.node);
    });
  });
}

CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  CUevent event) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (en.node.type != CU_GRAPH_NODE_TYPE_WAIT_EVENT) return CUDA_ERROR_INVALID_VALUE;
      return event_from(r, event, en.node);
    });
  });
}

CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                          CUgraphNodeParams* nodeParams) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (nodeParams == nullptr || !reserved_zero(*nodeParams)) return CUDA_ERROR_INVALID_VALUE;
    KernelNode k;
    bool is_kernel = false;
    if (CUresult rc = kernel_of_generic(nodeParams, k, is_kernel); rc != CUDA_SUCCESS) return rc;
    return exec_change(hGraphExec, hNode, [&](Registry& r, ExecNode& en) -> CUresult {
      if (is_kernel && en.node.type == CU_GRAPH_NODE_TYPE_KERNEL && k.ctx != en.node.kernel.ctx)
        return CUDA_ERROR_INVALID_VALUE;
      GraphNode m = en.node;
      if (CUresult rc = set_generic(r, m, *nodeParams, &k); rc != CUDA_SUCCESS) return rc;
      if (node_update_result(r, en.node, m) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
      en.node = std::move(m);
      return CUDA_SUCCESS;
    });
  });
}

CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                       unsigned int isEnabled) {
  return guarded([&] {
    return exec_change(hGraphExec, hNode, [&](Registry&, ExecNode& en) -> CUresult {
      // Only kernel, memset and memcpy nodes can be disabled.
      if (en.node.type != CU_GRAPH_NODE_TYPE_KERNEL && en.node.type != CU_GRAPH_NODE_TYPE_MEMSET &&
          en.node.type != CU_GRAPH_NODE_TYPE_MEMCPY)
        return CUDA_ERROR_INVALID_VALUE;
      en.enabled = isEnabled != 0;
      return CUDA_SUCCESS;
    });
  });
}

CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                       unsigned int* isEnabled) {
  return locked([&](Registry&, GraphRegistry& gr) -> CUresult {
    if (isEnabled == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphExec* e = gr.exec(from_cu(hGraphExec));
    if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto it = e->plan->index.find(from_cu(hNode));
    if (it == e->plan->index.end()) return CUDA_ERROR_INVALID_VALUE;
    const ExecNode& en = e->plan->nodes[it->second];
    if (en.node.type != CU_GRAPH_NODE_TYPE_KERNEL && en.node.type != CU_GRAPH_NODE_TYPE_MEMSET &&
        en.node.type != CU_GRAPH_NODE_TYPE_MEMCPY)
      return CUDA_ERROR_INVALID_VALUE;
    *isEnabled = en.enabled ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                   CUgraphNode* hErrorNode_out,
                                   CUgraphExecUpdateResult* updateResult_out) {
  CUgraphExecUpdateResultInfo info{};
  CUresult rc = exec_update(hGraphExec, hGraph, &info);
  if (hErrorNode_out != nullptr) *hErrorNode_out = info.errorNode;
  if (updateResult_out != nullptr) *updateResult_out = info.result;
  return rc;
}
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                      CUgraphExecUpdateResultInfo* resultInfo) {
  return exec_update(hGraphExec, hGraph, resultInfo);
}

// Conditional nodes are not emulated: neither are their handles.
CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle* /*pHandle_out*/,
                                                CUgraph /*hGraph*/, CUcontext /*ctx*/,
                                                unsigned int /*defaultLaunchValue*/,
                                                unsigned int /*flags*/) {
  return guarded([&]() -> CUresult {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return unsupported_node_type(CU_GRAPH_NODE_TYPE_CONDITIONAL);
  });
}

} // extern "C"
