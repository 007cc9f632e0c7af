/* What the emulated device's cost model made of a function's last completed launch: the one
   entry point libcuda.so.1 of the emulated device exports beside the driver API. It is hone's own
   interface to its own emulated driver; a real driver lacks it, and callers find it with dlsym.

   The validation worker reads it after timing a kernel, so that a candidate's verdict can say what
   bounds the original and the candidate (issue, latency, the L1 data path, L2 or DRAM), their
   occupancy and the bytes they moved (emu/README.md, "Cost model: kernels"). */
#ifndef HONE_EMU_LAUNCH_COST_H
#define HONE_EMU_LAUNCH_COST_H

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HONE_EMU_LAUNCH_COST_VERSION 1u
#define HONE_EMU_LAUNCH_COST_SYMBOL "hone_emu_launch_cost"

typedef struct hone_emu_cost {
  uint32_t version;            /* the caller sets HONE_EMU_LAUNCH_COST_VERSION */
  uint32_t registers;          /* per thread, from ptxas for sm_90 */
  uint32_t registers_assumed;  /* 1: ptxas gave none and the model assumed a count */
  uint32_t blocks_per_sm;      /* resident blocks per SM */
  uint32_t warps_per_sm;       /* resident warps per SM, of 64 */
  char occupancy_limit[16];    /* "registers", "shared memory", "warps" or "blocks" */
  char bound[16];              /* the largest term: "issue", "latency", "L1", "L2" or "DRAM" */
  uint64_t waves;              /* waves of resident blocks on the busiest SM */
  uint64_t modeled_ns;         /* the launch's modeled duration */
  uint64_t issue_ns;           /* the terms it is made of (emu/README.md) */
  uint64_t latency_ns;
  uint64_t l1_ns;
  uint64_t l2_ns;
  uint64_t dram_ns;
  uint64_t l2_bytes;           /* traffic between the SMs and L2 */
  uint64_t dram_bytes;         /* traffic between L2 and DRAM */
  uint64_t dram_bytes_per_s;   /* the model's DRAM bandwidth: the roofline */
} hone_emu_cost;

/* The last completed launch of `fn` in this process. CUDA_ERROR_NOT_FOUND: it has not completed a
   launch yet; CUDA_ERROR_INVALID_VALUE: `out` is null or its version is not this one. */
__attribute__((visibility("default"))) CUresult hone_emu_launch_cost(CUfunction fn,
                                                                    hone_emu_cost* out);
typedef CUresult (*hone_emu_launch_cost_fn)(CUfunction fn, hone_emu_cost* out);

#ifdef __cplusplus
}
#endif

#endif
