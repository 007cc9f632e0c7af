// CUDA graphs and stream capture on the emulated device: the objects behind CUgraph, CUgraphNode
// and CUgraphExec, the capture sequences of cuStreamBeginCapture, and the helpers the entry points
// (driver_graph.cpp, driver_capture.cpp) and the stream-ordered calls that may be captured
// (launches, async copies and memsets, host functions, event records and waits, stream-ordered
// allocation) share.
//
// Everything here lives under the one registry mutex (driver.hpp, Registry::mutex): a call takes
// it, looks its handles up, copies out what it needs and lets go before any kernel runs or any
// memory is copied. Graph, node and exec handles come from the registry's handle counter, so they
// are never reused and a destroyed one is an error, never a use after free.
//
// Work runs synchronously: cuGraphLaunch runs the exec's nodes one after another, in a topological
// order, on the calling thread. Each node still starts, in modeled time, when the last of its
// dependencies ends, so independent branches overlap on the model as they would on a GPU.
#pragma once

#include "emu/driver.hpp"

#include <cuda.h>

#include <map>
#include <memory>
#include <vector>

namespace hone::emu {

// Memory of a graph's allocation node (cuGraphAddMemAllocNode, or cuMemAllocAsync captured). Its
// address is fixed when the node is made, as CUDA documents, and the memory stays mapped while any
// graph, clone or exec holds the node: `live` says whether a launch has allocated it and nothing
// has freed it since (the launch of a node that frees it, cuMemFreeAsync, cuMemFree).
struct GraphAllocation {
  uint64_t base = 0;
  uint64_t bytes = 0;
  bool live = false;
  ~GraphAllocation();
};

struct KernelNode {
  Handle function = 0; // the CUfunction launched (a CUkernel is resolved when the node is made)
  Handle kern = 0;     // the CUkernel it was given as, if any (reported back by GetParams)
  Handle ctx = 0;      // the function's context
  Dim3 grid, block;
  uint32_t shared_bytes = 0;
  std::vector<uint8_t> args;       // the parameter buffer, copied when the node was made
  std::vector<ParamSlot> slots;    // where each parameter lives in `args`
  std::vector<void*> param_ptrs;   // kernelParams reported by GetParams: into `args`
  std::map<int, CUlaunchAttributeValue> attributes; // cuGraphKernelNodeSetAttribute
  bool cooperative() const;
};

struct GraphNode {
  Handle handle = 0;
  Handle graph = 0;
  int type = CU_GRAPH_NODE_TYPE_EMPTY;
  // Incoming edges, in the order they were added, with their data; and the outgoing ones.
  std::vector<Handle> deps;
  std::vector<CUgraphEdgeData> dep_edges;
  std::vector<Handle> dependents;

  KernelNode kernel;
  CUDA_MEMCPY3D copy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
  Handle op_ctx = 0; // the context of a copy or memset node
  CUDA_HOST_NODE_PARAMS host{};
  Handle event = 0;       // event record / wait nodes
  Handle child = 0;       // child graph nodes: the graph the node owns
  std::shared_ptr<GraphAllocation> alloc; // alloc nodes
  CUmemPoolProps pool_props{};            // alloc nodes, as given
  std::vector<CUmemAccessDesc> access;    // alloc nodes, as given
  uint64_t free_ptr = 0;                  // free nodes
};

struct Graph {
  Handle handle = 0;
  std::map<Handle, GraphNode> nodes; // by handle: creation order
  Handle owner_node = 0;             // a child graph: the node that owns it
  // A clone: the node of the original each node was cloned from (cuGraphNodeFindInClone).
  std::map<Handle, Handle> cloned_from;
  uint64_t capture = 0; // the capture sequence recording into it, if any
};

// One node of an executable graph: a copy of the template node taken at instantiation (later
// edits of the template do not reach it, and its edits do not reach the template).
struct ExecNode {
  GraphNode node;
  std::vector<size_t> deps;           // indices of its dependencies in ExecPlan::nodes
  std::shared_ptr<struct ExecPlan> child; // child graph nodes: the child, instantiated
  bool enabled = true;
};

// What a launch runs. Launches take a reference to the plan under the lock and run it without;
// an update replaces the plan (copy on write), so a launch on another thread keeps its own.
struct ExecPlan {
  std::vector<ExecNode> nodes;  // in the template's creation order (cuGraphExecUpdate pairs them)
  std::vector<size_t> order;    // a topological order of `nodes`
  std::map<Handle, size_t> index; // node handle (of the template, or of an update's graph) → node
};

struct GraphExec {
  Handle handle = 0;
  Handle graph = 0; // the template it was instantiated from
  uint64_t flags = 0;
  std::shared_ptr<ExecPlan> plan;
};

// A capture sequence (cuStreamBeginCapture .. cuStreamEndCapture).
struct Capture {
  uint64_t id = 0;
  Handle graph = 0;
  Handle origin = 0; // the stream it began on (a Stream's handle; never the legacy stream)
  Handle ctx = 0;
  int mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  uint64_t thread = 0; // the host thread that began it
  bool invalidated = false;
  bool into_existing = false; // cuStreamBeginCaptureToGraph: the graph is the caller's
  std::set<Handle> streams;   // every stream that takes part, the origin included
  // What streams destroyed while they took part did last: like a live joined stream's, it must be
  // joined back into the origin by the end of the capture.
  std::vector<CUgraphNode> departed;
};

// Every graph, node, exec and capture. Lock Registry::mutex around any access.
struct GraphRegistry {
  std::unordered_map<Handle, std::unique_ptr<Graph>> graphs;
  std::unordered_map<Handle, Handle> node_graph; // node → its graph
  std::unordered_map<Handle, std::unique_ptr<GraphExec>> execs;
  std::unordered_map<uint64_t, std::unique_ptr<Capture>> captures;
  // Graph allocations by base, while a node holds them (cuMemFree and cuMemFreeAsync find them).
  std::map<uint64_t, std::weak_ptr<GraphAllocation>> allocations;

  Graph* graph(Handle h);
  GraphNode* node(Handle h);
  GraphExec* exec(Handle h);
  Capture* capture(uint64_t id);
};

GraphRegistry& graph_registry();

// --- graphs (call with the registry locked) ---------------------------------------------------

// A new, empty graph.
Graph& new_graph(Registry& r);
// Destroy a graph, its nodes and the child graphs they own.
void destroy_graph(Registry& r, Handle g);
// Add `node` (its payload filled in) to `g` after `deps`, which must be nodes of `g`, with their
// edge data (nullptr: all default). CUDA_ERROR_INVALID_VALUE for a foreign or repeated dependency.
CUresult add_node(Registry& r, Graph& g, GraphNode node, const CUgraphNode* deps,
                  const CUgraphEdgeData* edges, size_t count, Handle& out);

// The copy-node form of a 1D copy of `bytes` (cuMemcpy*Async captured): unified addressing on
// both sides.
CUDA_MEMCPY3D linear_copy(uint64_t dst, uint64_t src, size_t bytes);

// --- stream capture (driver_capture.cpp; call with the registry locked) ------------------------

// What an operation about to be issued on `s` must do. CUDA_SUCCESS with `captured` false: run it;
// `captured` true: record it on the stream with capture_node instead. An error: fail with it
// (work on the legacy NULL stream while a blocking stream of its context captures is
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and invalidates that capture; work on a stream whose capture
// was invalidated is CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).
CUresult capture_check(Registry& r, Context& ctx, Stream& s, bool& captured);
// Record `node` as the next operation of the capturing stream `s`: it depends on the stream's
// capture dependencies, and becomes them. `out`: the node's handle.
CUresult capture_node(Registry& r, Stream& s, GraphNode node, Handle* out = nullptr);
// A potentially unsafe call (a synchronous copy or memset, a synchronization) made while captures
// may be live: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that forbid it,
// when the calling thread's capture mode (cuThreadExchangeStreamCaptureMode) and the live
// captures forbid it; CUDA_SUCCESS otherwise.
CUresult capture_forbids_unsafe(Registry& r);
// Invalidate the capture `s` takes part in, if any.
void capture_invalidate(Registry& r, const Stream& s);
// Whether a blocking stream of `ctx` is capturing (the legacy stream is then unusable).
bool blocking_capture_in(Registry& r, const Context& ctx);
// The capture dependencies of `s` after an event record: what the event carries into
// cuStreamWaitEvent (capture.cpp).
void capture_record_event(Registry& r, Stream& s, Event& ev);
// cuStreamWaitEvent on an event recorded in a capture (or on a capturing stream): joins `s` into
// the event's capture, or adds the event's nodes to its dependencies. `handled` false: not a
// capture matter, wait as usual.
CUresult capture_wait_event(Registry& r, Context& ctx, Stream& s, Event& ev, unsigned flags,
                            bool& handled);
// Record an allocation node of `bytes` of new graph memory on the capturing stream `s`.
CUresult capture_alloc_node(Registry& r, Stream& s, GraphNode node, uint64_t bytes, Handle& out);
// A stream is being destroyed: take it out of its capture (invalidating it).
void capture_forget_stream(Registry& r, Stream& s);

// --- graph memory (driver_graph.cpp; call with the registry locked) ----------------------------

// New graph memory of `bytes` for an allocation node (its address is fixed from now on).
CUresult new_graph_allocation(Registry& r, uint64_t bytes, std::shared_ptr<GraphAllocation>& out);
// Whether `base` is the address of graph memory some node holds.
bool is_graph_allocation(Registry& r, uint64_t base);
// cuMemFree/cuMemFreeAsync of `base`: true when it is a graph allocation (then it is marked freed,
// `status` says whether that was allowed), false when it is not graph memory.
bool graph_memory_free(Registry& r, uint64_t base, CUresult& status);

// --- work the graph launch shares with the stream-ordered calls (call without the lock) --------

// A kernel launch, checked and run as cuLaunchKernel does it, in context `ctx`, with the packed
// parameter buffer `args`, starting at `start_ns` on its stream's modeled clock (what %globaltimer
// counts from, after the epoch): `modeled_ns` is its modeled duration. Faults become the context's sticky
// error (the call still succeeds), as for cuLaunchKernel.
CUresult run_kernel(Handle ctx, Handle function, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                    const std::vector<uint8_t>& args, bool cooperative, uint64_t start_ns,
                    uint64_t& modeled_ns);
// The parameter buffer of a launch (kernelParams or the extra buffer), with the function's slots.
// Locks the registry itself.
CUresult pack_kernel_params(Handle function, void** params, void** extra,
                            std::vector<uint8_t>& args, std::vector<ParamSlot>& slots);
// A 3D copy (CUDA_MEMCPY3D, the form of every copy node), checked: CUDA_ERROR_INVALID_VALUE for
// a device side outside one allocation, a zero extent or reserved fields set; arrays are
// CUDA_ERROR_NOT_SUPPORTED. Takes no lock.
CUresult check_copy_3d(const CUDA_MEMCPY3D& c);
// The copy, checked again and performed (locks the registry itself): `modeled_ns` is its duration.
CUresult run_copy_3d(const CUDA_MEMCPY3D& c, uint64_t& modeled_ns);
// A memset of `height` rows of `width` elements of `elem_size` (1, 2 or 4) bytes, `pitch` apart,
// checked (takes no lock), and performed (locks the registry itself).
CUresult check_memset_2d(uint64_t dst, size_t pitch, size_t width, size_t height,
                         unsigned elem_size);
CUresult run_memset_2d(uint64_t dst, size_t pitch, uint32_t value, size_t width, size_t height,
                       unsigned elem_size, uint64_t& modeled_ns);

} // namespace hone::emu
