#!/bin/sh
# llama.cpp's test-backend-ops on the emulated device: the CUDA backend (libggml-cuda.so, as
# node-llama-cpp ships it) against the CPU backend, case by case, by llama.cpp's own error
# thresholds (tests/llama/README.md).
#
#   backend_ops.sh TEST_BACKEND_OPS BINS_DIR decode|batch
#
# BINS_DIR holds the prebuilt libraries; test-backend-ops runs there because the prebuilt
# libggml.so looks for its backends (libggml-cuda.so, libggml-cpu-*.so) in the executable's
# directory and then the current one. LD_LIBRARY_PATH must select the emulated device.
#
# Each line below is one run: `-o OPS -p PARAMS`. A run fails the test when test-backend-ops fails,
# when CUDA0 is not the emulated device, or when the filter selects no case (a filter that went
# stale with llama.cpp's test list would otherwise pass having tested nothing).
#
# What the filters leave out, and why (README.md, "test-backend-ops"):
# - MUL_MAT cases routed to cuBLAS on compute 9.0 (ggml_cuda_mul_mat in ggml-cuda.cu): src1 not
#   f32; float weights that neither mul_mat_vec_f takes (f16: one column, and at most 512 rows or
#   no batch) nor mul_mat_f (k a multiple of 64 for f16, rows a multiple of 32, at most 16
#   columns). cuBLAS is NVIDIA's own code and cannot run here: such a case aborts the process.
# - Types and shapes a llama with f16, Q4_0, Q8_0 or Q4_K weights and an f16 (or q8_0) KV cache
#   never meets, to keep the run to minutes (each case costs the emulator seconds, not
#   microseconds).
set -u

bin=${1:?usage: backend_ops.sh TEST_BACKEND_OPS BINS_DIR decode|batch}
bins=${2:?BINS_DIR}
group=${3:?decode|batch}

case "$group" in
decode)
  # What one decoded token runs: vector kernels (mul_mat_vec_q up to 8 columns for quantized
  # weights, mul_mat_vec_f for one f16 column), flash attention's vector kernel (one query), and
  # the element-wise, norm, rope and copy kernels of a llama layer. Shapes of millions of elements
  # are left out (16M-element ADD and MUL, ROPE_SET_ROWS over 512 rows, the 2-9M-element CONT
  # permutes): each costs the emulator seconds and a llama's decode step meets none of them.
  runs='MUL_MAT|type_a=(q4_0|q8_0|q4_K),type_b=f32,m=16,n=[1-8],k=\d+,bs=\[(?!1536)
MUL_MAT|type_a=f16,type_b=f32,(m=16,n=1,k=(4|256),bs=\[\d,\d\],nr=\[\d,\d\],per=\[0,1,2,3\]|m=(128|129),n=1,k=1056,bs=\[1,1\])
MUL_MAT_VEC_FUSION|type=((q4_0|q8_0),glu_op=2,m=[1248]|f16,glu_op=2,m=1),n=32,k=256,use_id=0,
FLASH_ATTN_EXT|hsk=(64|128),hsv=(64|128),nh=4,nr23=\[(1|4),1\],kv=(512|1024),nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=(f16|q8_0),type_V=(f16|q8_0),permute=\[0,1,2,3\]
SOFT_MAX|type=f32,ne=\[(?!102[34],102[34]|2000|643251)
ROPE|type=(f32|f16),ne_a=\[(128|64),.*mode=0,
ROPE_SET_ROWS|type=(f32|f16),type_idx=i64,ne_a=\[128,32,(1|8),[13]\],mode=0
RMS_NORM|type=f32,
RMS_NORM_MUL_ADD|ne=\[(64,5,4,3|1025,1,1,1)\],eps=0.000001,
ADD_RMS_NORM|ne=\[(64,5,4,3|1025,1,1,1)\],eps=0.000001,
GET_ROWS|type=(f32|f16|q4_0|q8_0),n=(1|256),m=(5|8),r=\d+,be1=(1|7),
SET_ROWS|type_src=f32,type_dst=(f32|f16|q8_0),
CPY|type_src=(f32|f16),type_dst=(f32|f16|q8_0),
CONT|type=(f32|f16),ne=\[(?!1024,64,64|2304,64,64|1000,33,65)
ADD|type=f32,ne=\[(?!64,262144|1,1,65536)
MUL|type=f32,ne=\[(?!64,262144|1,1,65536)
SCALE|type=f32,
SWIGLU|type=f32,'
  ;;
batch)
  # What a prompt of more than 8 tokens in one batch runs: MMQ (ldmatrix, mma.sync s8) for
  # quantized weights (9, 16 and 64 columns; batched with broadcast, and permuted), mul_mat_f
  # (mma.sync f16) for f16 weights up to 16 columns, flash attention's mma kernel for 3 and 75
  # queries (a partial tile). An MMQ case costs the emulator seconds, flash attention's ten.
  runs='MUL_MAT|type_a=(q4_0|q8_0|q4_K),type_b=f32,(m=16,n=(9|16),k=256,bs=\[1,1\],nr=\[1,1\]|m=16,n=16,k=256,bs=\[(3,2\],nr=\[2,2|2,3\],nr=\[1,1\],per=\[0,2,1,3)\]|m=1,n=64,k=256,)
MUL_MAT|type_a=f16,type_b=f32,(m=64,n=2,|m=1056,n=1,k=128,bs=\[(?!1,1\]))
FLASH_ATTN_EXT|hsk=(64|128),hsv=(64|128),nh=4,nr23=\[(1|4),1\],kv=512,nb=(3|75),mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=\[0,1,2,3\]'
  ;;
*)
  echo "backend_ops.sh: no group $group (decode or batch)" >&2
  exit 2
  ;;
esac

cd "$bins" || exit 1
# A failing case aborts test-backend-ops; ggml would then attach gdb for a backtrace of the host.
export GGML_NO_BACKTRACE=1
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "$runs" | while IFS='|' read -r ops params; do
  start=$(date +%s)
  if [ -n "$params" ]; then
    "$bin" test -b CUDA0 -o "$ops" -p "$params" > "$log" 2>&1
  else
    "$bin" test -b CUDA0 -o "$ops" > "$log" 2>&1
  fi
  rc=$?
  took=$(( $(date +%s) - start ))
  # "  N/M tests passed" for the backend; M counts the cases the filter selected and the backend
  # supports.
  summary=$(grep -E '^ *[0-9]+/[0-9]+ tests passed' "$log" | head -n1 | sed 's/^ *//')
  total=${summary#*/}
  total=${total%% *}
  unsupported=$(grep -c 'not supported' "$log")
  echo "$group: $ops ${params:+-p '$params'}: ${summary:-no summary} ($unsupported not supported by CUDA0) in ${took}s"
  if [ "$rc" -ne 0 ] || [ -z "$summary" ]; then
    echo "--- test-backend-ops failed (exit $rc); what the emulated device said, and the last lines:"
    grep -E '^hone-emu: CUDA_ERROR|CUDA error|FAIL' "$log" | grep -v 'cost model' | head -n 10
    grep -v -E 'CUDA graph warmup|^hone-emu: cost model' "$log" | tail -n 15
    exit 1
  fi
  if ! grep -q 'Device description: hone emulated device' "$log"; then
    echo "--- CUDA0 is not the emulated device (LD_LIBRARY_PATH?):"
    grep -E 'Backend|Device' "$log" | head
    exit 1
  fi
  if [ "${total:-0}" -eq 0 ]; then
    echo "--- the filter selected no case CUDA0 supports: it no longer matches llama.cpp's test list"
    exit 1
  fi
done || status=1
exit $status
