// CUDA graphs in the application (DESIGN.md, "Graphs"). A replayed kernel never passes through
// cuLaunchKernel, so the shim keeps, per executable graph, the kernel nodes it holds (function,
// shape, argument bytes) from instantiation on, follows the application's updates, and
//  - counts each cuGraphLaunch as one launch of every enabled kernel node: one atomic add on the
//    launch path, expanded per kernel by the reporter;
//  - times 1 replay in HONE_SAMPLE_EVERY with events and spreads the time over its kernels;
//  - captures a graph kernel's shadow inputs by launching, for one replay, an instrumented clone
//    of the graph in its place (the node running the original; for a shadow check of a variant
//    that serves the node, the variant, with its outputs copied after it);
//  - points kernel nodes whose arguments pass a variant's guard at the variant
//    (cuGraphExecKernelNodeSetParams), and back, on the application's thread just before a
//    replay: graph objects are not the shim's to touch from another thread.
// Anything unexpected restores the graph as the application made it and the shim stops
// touching it (it is then observed only, counted by the replays it knows).
#pragma once

#include "shim/cuda_abi.hpp"
#include "shim/registry.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace hone::shim {

// Bumped whenever a variant is published or withdrawn: a graph whose nodes were reconciled at
// an older value is reconciled again before its next replay.
extern std::atomic<uint64_t> g_swap_generation;

// Launch path of cuLaunchKernel* while a capture is live: is `stream` being captured?
bool stream_capturing(void* stream, bool per_thread);
// A launch recorded into a capture ran `function` (a variant) for the application's `original`:
// remember it, so the node can be told apart and restored.
void note_captured_variant(void* function, const void* original);
// The handle the application gave for a function a captured node runs (a variant's original).
void* application_function(void* function);

// Hooks (hooks_graph.cpp) call these with the driver's result already known to be success.
void graph_instantiated(CUgraphExec exec, CUgraph graph);
void graph_exec_destroyed(CUgraphExec exec);
// Before the real call: false when the application's call must go through untouched.
void graph_exec_kernel_params_set(CUgraphExec exec, CUgraphNode node,
                                  const CUDA_KERNEL_NODE_PARAMS* params);
void graph_exec_updated(CUgraphExec exec, CUgraph graph, bool ok);
// An exec-level change a copy of the graph would not repeat: replays stay counted and patched,
// shadow inputs are no longer captured from it.
void graph_exec_untrackable(CUgraphExec exec, const char* why);
// A change the shim cannot follow: restore the graph and stop touching it.
void graph_exec_give_up(CUgraphExec exec, const char* why);
void graph_node_enabled(CUgraphExec exec, CUgraphNode node, bool enabled);
// cuGraphDestroy: false when the shim keeps the graph alive for the executable graphs made from
// it (their nodes are named by its nodes); it is destroyed with the last of them.
bool graph_destroy_deferred(CUgraph graph);
// cuGraphDestroyNode of a node an executable graph's patching names: stop patching that graph.
void graph_node_destroying(CUgraphNode node);

// cuGraphLaunch[_ptsz]: the whole launch (reconcile, count, time, capture) around `launch`.
CUresult graph_launch(CUgraphExec exec, CUstream stream, bool per_thread);

// Reporter thread: fold replays into the kernels' counters; fill the graph part of a report.
struct GraphKernelTotals {
  uint64_t graph_launches = 0;
  uint32_t graphs = 0;
  uint32_t nodes = 0;
  uint32_t nodes_serving = 0;
};
void graph_fold();
// The daemon asked for captures: graph replays look for kernels to capture until none is due.
void graph_capture_requested();
std::vector<std::pair<KernelRecord*, GraphKernelTotals>> graph_totals();
uint64_t graph_replays_total();
uint64_t graph_nodes_patched_total();
void graph_reset_after_fork();

} // namespace hone::shim
