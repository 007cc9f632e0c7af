// Stream capture (cuStreamBeginCapture .. cuStreamEndCapture): work issued to a capturing stream
// is recorded as graph nodes instead of running (emu/graph.hpp, capture_check and capture_node,
// which the stream-ordered calls use), events carry a capture's nodes to the streams that wait
// on them, and the calls that are unsafe during a capture are refused as the capture modes say
// (cuda.h, cuThreadExchangeStreamCaptureMode).
#include "emu/graph.hpp"

#include "emu/log.hpp"

#include <algorithm>
#include <atomic>

namespace hone::emu {

namespace {

// The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
thread_local int t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

// A number per host thread, never reused (thread ids are).
uint64_t this_thread_token() {
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t token = next.fetch_add(1);
  return token;
}

CUgraphEdgeData no_edge_data() {
  CUgraphEdgeData e{};
  return e;
}

bool edge_is_default(const CUgraphEdgeData& e) {
  static const CUgraphEdgeData zero{};
  return std::memcmp(&e, &zero, sizeof e) == 0;
}

// The live capture `s` takes part in, or nullptr (forgetting a stale one).
Capture* capture_of(Registry&, Stream& s) {
  if (s.capture == 0) return nullptr;
  Capture* c = graph_registry().capture(s.capture);
  if (c == nullptr) {
    s.capture = 0;
    s.capture_deps.clear();
    s.capture_edges.clear();
  }
  return c;
}

// Leave the capture: the stream works normally again.
void leave_capture(Stream& s) {
  s.capture = 0;
  s.capture_deps.clear();
  s.capture_edges.clear();
}

// Every node `from` reaches going backwards along dependencies, `from` included.
std::set<Handle> ancestors(Registry&, const std::vector<CUgraphNode>& from) {
  std::set<Handle> seen;
  std::vector<Handle> todo;
  for (CUgraphNode n : from) todo.push_back(from_cu(n));
  while (!todo.empty()) {
    Handle h = todo.back();
    todo.pop_back();
    if (!seen.insert(h).second) continue;
    if (const GraphNode* n = graph_registry().node(h)) {
      for (Handle d : n->deps) todo.push_back(d);
    }
  }
  return seen;
}

// Check that `deps` are nodes of `g`; copies them (and their edge data) out.
CUresult capture_deps_of(Registry&, const Graph& g, const CUgraphNode* deps,
                         const CUgraphEdgeData* edges, size_t count,
                         std::vector<CUgraphNode>& out_deps,
                         std::vector<CUgraphEdgeData>& out_edges) {
  if (count > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    const GraphNode* n = graph_registry().node(from_cu(deps[i]));
    if (n == nullptr || n->graph != g.handle) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(out_deps.begin(), out_deps.end(), deps[i]) != out_deps.end()) continue;
    out_deps.push_back(deps[i]);
    out_edges.push_back(edges != nullptr ? edges[i] : no_edge_data());
  }
  return CUDA_SUCCESS;
}

CUresult begin_capture(CUstream h, bool per_thread, int mode, CUgraph into,
                       const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t count) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  // The legacy NULL stream cannot capture (cuda.h); a stream captures one sequence at a time.
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (capture_of(r, *s) != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  GraphRegistry& gr = graph_registry();
  Graph* g = nullptr;
  if (into != nullptr) {
    g = gr.graph(from_cu(into));
    if (g == nullptr || g->owner_node != 0) return CUDA_ERROR_INVALID_VALUE;
    if (g->capture != 0 && gr.capture(g->capture) != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  }
  std::vector<CUgraphNode> first_deps;
  std::vector<CUgraphEdgeData> first_edges;
  if (g != nullptr) {
    if (CUresult rc = capture_deps_of(r, *g, deps, edges, count, first_deps, first_edges);
        rc != CUDA_SUCCESS)
      return rc;
  } else if (count != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (g == nullptr) g = &new_graph(r);
  auto c = std::make_unique<Capture>();
  c->id = r.new_id();
  c->graph = g->handle;
  c->origin = s->handle;
  c->ctx = ctx->handle;
  c->mode = mode;
  c->thread = this_thread_token();
  c->into_existing = into != nullptr;
  c->streams.insert(s->handle);
  g->capture = c->id;
  s->capture = c->id;
  s->capture_deps = std::move(first_deps);
  s->capture_edges = std::move(first_edges);
  gr.captures.emplace(c->id, std::move(c));
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream h, bool per_thread, CUgraph* out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  Capture* c = capture_of(r, *s);
  if (c == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  // Ended where it began: on its stream and, unless relaxed, on its thread.
  if (c->origin != s->handle) {
    c->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != this_thread_token())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  CUresult status = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  GraphRegistry& gr = graph_registry();
  if (status == CUDA_SUCCESS) {
    // Every stream forked from the origin must have been joined back: what it did last is among
    // what the origin's next node would depend on.
    std::set<Handle> joined = ancestors(r, s->capture_deps);
    for (Handle other : c->streams) {
      Stream* o = r.stream(other);
      if (o == nullptr || o == s || o->capture != c->id) continue;
      for (CUgraphNode n : o->capture_deps) {
        if (!joined.count(from_cu(n))) status = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
      }
    }
    for (CUgraphNode n : c->departed) {
      if (!joined.count(from_cu(n))) status = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
  }
  for (Handle other : c->streams) {
    Stream* o = r.stream(other);
    if (o != nullptr && o->capture == c->id) leave_capture(*o);
  }
  leave_capture(*s);
  Handle graph = c->graph;
  bool into_existing = c->into_existing;
  gr.captures.erase(c->id);
  if (Graph* g = gr.graph(graph)) g->capture = 0;
  if (status != CUDA_SUCCESS) {
    *out = nullptr;
    if (!into_existing) destroy_graph(r, graph);
    return status;
  }
  *out = to_cu<CUgraph>(graph);
  return CUDA_SUCCESS;
}

// cuStreamGetCaptureInfo in all its versions: `edges` and `graph` may be absent from the ABI.
CUresult capture_info(CUstream h, bool per_thread, CUstreamCaptureStatus* status, cuuint64_t* id,
                      CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                      size_t* count) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (edges != nullptr && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  if (s->legacy && blocking_capture_in(r, *ctx)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  Capture* c = capture_of(r, *s);
  if (c == nullptr) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (count != nullptr) *count = 0;
    return CUDA_SUCCESS;
  }
  *status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (c->invalidated) return CUDA_SUCCESS;
  if (deps != nullptr && edges == nullptr) {
    for (const CUgraphEdgeData& e : s->capture_edges) {
      if (!edge_is_default(e)) return CUDA_ERROR_LOSSY_QUERY;
    }
  }
  if (id != nullptr) *id = c->id;
  if (graph != nullptr) *graph = to_cu<CUgraph>(c->graph);
  // The stream's own arrays: valid until the next call that operates on the stream, as documented.
  if (deps != nullptr) *deps = s->capture_deps.empty() ? nullptr : s->capture_deps.data();
  if (edges != nullptr) *edges = s->capture_edges.empty() ? nullptr : s->capture_edges.data();
  if (count != nullptr) *count = s->capture_deps.size();
  return CUDA_SUCCESS;
}

CUresult update_capture_deps(CUstream h, bool per_thread, CUgraphNode* deps,
                             const CUgraphEdgeData* edges, size_t count, unsigned flags) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  Capture* c = capture_of(r, *s);
  if (c == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  Graph* g = graph_registry().graph(c->graph);
  if (g == nullptr) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::vector<CUgraphNode> new_deps;
  std::vector<CUgraphEdgeData> new_edges;
  if (flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES) {
    new_deps = s->capture_deps;
    new_edges = s->capture_edges;
  }
  if (CUresult rc = capture_deps_of(r, *g, deps, edges, count, new_deps, new_edges);
      rc != CUDA_SUCCESS)
    return rc;
  s->capture_deps = std::move(new_deps);
  s->capture_edges = std::move(new_edges);
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream h, bool per_thread, CUstreamCaptureStatus* status) {
  return capture_info(h, per_thread, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}

} // namespace

bool blocking_capture_in(Registry& r, const Context& ctx) {
  for (Handle h : ctx.streams) {
    Stream* s = r.stream(h);
    if (s != nullptr && s->blocking() && capture_of(r, *s) != nullptr) return true;
  }
  return false;
}

CUresult capture_check(Registry& r, Context& ctx, Stream& s, bool& captured) {
  captured = false;
  if (s.legacy) {
    if (!blocking_capture_in(r, ctx)) return CUDA_SUCCESS;
    // The legacy stream would wait for the capturing streams: their captures cannot hold that.
    for (Handle h : ctx.streams) {
      Stream* o = r.stream(h);
      if (o != nullptr && o->blocking()) capture_invalidate(r, *o);
    }
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  Capture* c = capture_of(r, s);
  if (c == nullptr) return CUDA_SUCCESS;
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  captured = true;
  return CUDA_SUCCESS;
}

CUresult capture_node(Registry& r, Stream& s, GraphNode node, Handle* out) {
  Capture* c = capture_of(r, s);
  if (c == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  Graph* g = graph_registry().graph(c->graph);
  if (g == nullptr) {
    c->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  // Dependencies destroyed through the graph API since are dropped, not an error.
  std::vector<CUgraphNode> deps;
  std::vector<CUgraphEdgeData> edges;
  for (size_t i = 0; i < s.capture_deps.size(); ++i) {
    const GraphNode* n = graph_registry().node(from_cu(s.capture_deps[i]));
    if (n == nullptr || n->graph != g->handle) continue;
    deps.push_back(s.capture_deps[i]);
    edges.push_back(s.capture_edges[i]);
  }
  Handle h = 0;
  if (CUresult rc = add_node(r, *g, std::move(node), deps.data(), edges.data(), deps.size(), h);
      rc != CUDA_SUCCESS)
    return rc;
  s.capture_deps.assign(1, to_cu<CUgraphNode>(h));
  s.capture_edges.assign(1, no_edge_data());
  if (out != nullptr) *out = h;
  return CUDA_SUCCESS;
}

CUresult capture_alloc_node(Registry& r, Stream& s, GraphNode node, uint64_t bytes, Handle& out) {
  if (CUresult rc = new_graph_allocation(r, bytes, node.alloc); rc != CUDA_SUCCESS) return rc;
  return capture_node(r, s, std::move(node), &out);
}

CUresult capture_forbids_unsafe(Registry&) {
  const int mode = t_capture_mode;
  if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const uint64_t me = this_thread_token();
  bool forbidden = false;
  for (auto& [id, c] : graph_registry().captures) {
    if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
    // This thread's own captures forbid it in both modes; another thread's global captures
    // forbid it in global mode.
    bool forbids = c->thread == me ||
                   (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL && mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (forbids) {
      c->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

void capture_invalidate(Registry&, const Stream& s) {
  if (s.capture == 0) return;
  if (Capture* c = graph_registry().capture(s.capture)) c->invalidated = true;
}

void capture_record_event(Registry&, Stream& s, Event& ev) {
  ev.capture = s.capture;
  ev.capture_nodes = s.capture_deps;
  ev.capture_edges = s.capture_edges;
}

CUresult capture_wait_event(Registry& r, Context&, Stream& s, Event& ev, unsigned flags,
                            bool& handled) {
  handled = false;
  GraphRegistry& gr = graph_registry();
  Capture* ec = ev.capture != 0 ? gr.capture(ev.capture) : nullptr;
  Capture* sc = capture_of(r, s);
  if (sc == nullptr) {
    if (ec == nullptr) return CUDA_SUCCESS;
    handled = true;
    // Joining the event's capture: the stream captures from now on, after the event's nodes.
    if (ec->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (s.legacy) {
      ec->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    s.capture = ec->id;
    s.capture_deps = ev.capture_nodes;
    s.capture_edges = ev.capture_edges;
    ec->streams.insert(s.handle);
    return CUDA_SUCCESS;
  }
  handled = true;
  if ((flags & CU_EVENT_WAIT_EXTERNAL) != 0) {
    GraphNode node;
    node.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    node.event = ev.handle;
    return capture_node(r, s, std::move(node));
  }
  if (ec == nullptr) {
    if (!ev.recorded) return CUDA_SUCCESS; // complete: nothing to depend on
    // A dependency of captured work on work outside the capture.
    sc->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (ec != sc) {
    sc->invalidated = true;
    ec->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  for (size_t i = 0; i < ev.capture_nodes.size(); ++i) {
    if (std::find(s.capture_deps.begin(), s.capture_deps.end(), ev.capture_nodes[i]) !=
        s.capture_deps.end())
      continue;
    s.capture_deps.push_back(ev.capture_nodes[i]);
    s.capture_edges.push_back(ev.capture_edges[i]);
  }
  return CUDA_SUCCESS;
}

void capture_forget_stream(Registry& r, Stream& s) {
  if (Capture* c = capture_of(r, s)) {
    // Destroying the origin ends the capture for good. A stream forked into the capture may be
    // destroyed once its work is in (NVIDIA's graphMemoryNodes sample creates and destroys one
    // inside the capture); its last work must still be joined back by cuStreamEndCapture.
    if (c->origin == s.handle) c->invalidated = true;
    else c->departed.insert(c->departed.end(), s.capture_deps.begin(), s.capture_deps.end());
    c->streams.erase(s.handle);
  }
  leave_capture(s);
}

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) {
  return guarded([&] {
    return begin_capture(hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr, nullptr, nullptr,
                         0);
  });
}
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) {
  return guarded([&] {
    return begin_capture(hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr, nullptr, nullptr,
                         0);
  });
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  return guarded([&] {
    return begin_capture(hStream, false, enum_value(mode), nullptr, nullptr, nullptr, 0);
  });
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  return guarded([&] {
    return begin_capture(hStream, true, enum_value(mode), nullptr, nullptr, nullptr, 0);
  });
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode* dependencies,
                                             const CUgraphEdgeData* dependencyData,
                                             size_t numDependencies, CUstreamCaptureMode mode) {
  return guarded([&] {
    if (hGraph == nullptr) return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return begin_capture(hStream, false, enum_value(mode), hGraph, dependencies, dependencyData,
                         numDependencies);
  });
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData,
                                                  size_t numDependencies,
                                                  CUstreamCaptureMode mode) {
  return guarded([&] {
    if (hGraph == nullptr) return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return begin_capture(hStream, true, enum_value(mode), hGraph, dependencies, dependencyData,
                         numDependencies);
  });
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  return guarded([&] { return end_capture(hStream, false, phGraph); });
}
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  return guarded([&] { return end_capture(hStream, true, phGraph); });
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  return guarded([&] { return is_capturing(hStream, false, captureStatus); });
}
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  return guarded([&] { return is_capturing(hStream, true, captureStatus); });
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                        cuuint64_t* id_out) {
  return guarded([&] {
    return capture_info(hStream, false, captureStatus_out, id_out, nullptr, nullptr, nullptr,
                        nullptr);
  });
}
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                             CUstreamCaptureStatus* captureStatus_out,
                                             cuuint64_t* id_out) {
  return guarded([&] {
    return capture_info(hStream, true, captureStatus_out, id_out, nullptr, nullptr, nullptr,
                        nullptr);
  });
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
                                           CUstreamCaptureStatus* captureStatus_out,
                                           cuuint64_t* id_out, CUgraph* graph_out,
                                           const CUgraphNode** dependencies_out,
                                           size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out,
                        nullptr, numDependencies_out);
  });
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out,
                        nullptr, numDependencies_out);
  });
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream,
                                           CUstreamCaptureStatus* captureStatus_out,
                                           cuuint64_t* id_out, CUgraph* graph_out,
                                           const CUgraphNode** dependencies_out,
                                           const CUgraphEdgeData** edgeData_out,
                                           size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
  });
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                const CUgraphEdgeData** edgeData_out,
                                                size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
  });
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode* dependencies,
                                                   size_t numDependencies, unsigned int flags) {
  return guarded([&] {
    return update_capture_deps(hStream, false, dependencies, nullptr, numDependencies, flags);
  });
}
CUresult CUDAAPI cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream,
                                                        CUgraphNode* dependencies,
                                                        size_t numDependencies,
                                                        unsigned int flags) {
  return guarded([&] {
    return update_capture_deps(hStream, true, dependencies, nullptr, numDependencies, flags);
  });
}
CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode* dependencies,
                                                      const CUgraphEdgeData* dependencyData,
                                                      size_t numDependencies, unsigned int flags) {
  return guarded([&] {
    return update_capture_deps(hStream, false, dependencies, dependencyData, numDependencies,
                               flags);
  });
}
CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream,
                                                           CUgraphNode* dependencies,
                                                           const CUgraphEdgeData* dependencyData,
                                                           size_t numDependencies,
                                                           unsigned int flags) {
  return guarded([&] {
    return update_capture_deps(hStream, true, dependencies, dependencyData, numDependencies,
                               flags);
  });
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int wanted = enum_value(*mode);
  if (wanted != CU_STREAM_CAPTURE_MODE_GLOBAL && wanted != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      wanted != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  int previous = t_capture_mode;
  t_capture_mode = wanted;
  *mode = static_cast<CUstreamCaptureMode>(previous);
  return CUDA_SUCCESS;
}

} // extern "C"
