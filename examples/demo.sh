#!/usr/bin/env bash
# make demo: what hone can show today, on any machine, without a GPU.
#
# Today: the PTX toolkit. A kernel from the corpus is compiled by nvcc, parsed, analyzed (which
# parameters are pointers and what the kernel does through them), printed back and re-assembled by
# ptxas. When the pipeline lands, this becomes the whole loop on the emulated device: an
# application under the shim, honed optimizing its hot kernels, validated variants swapped in.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "compile tests/kernels/softmax_layernorm.cu to PTX for sm_90 (nvcc -ptx)"
"$cuda/bin/nvcc" -ptx -arch=sm_90 -I"$cuda/include" "$root/tests/kernels/softmax_layernorm.cu" \
  -o "$work/softmax.ptx"
echo "$(wc -c <"$work/softmax.ptx") bytes of PTX"

say "hone-ptx info: entries, parameter layout, pointer access, resources"
"$root/$build/bin/hone-ptx" info "$work/softmax.ptx"

say "hone-ptx print: parse and print back, then assemble the printed module with ptxas"
"$root/$build/bin/hone-ptx" print "$work/softmax.ptx" >"$work/printed.ptx"
"$cuda/bin/ptxas" -arch=sm_90 "$work/printed.ptx" -o "$work/printed.cubin"
echo "ptxas assembled the printed module: $(wc -c <"$work/printed.cubin") bytes of sm_90 code"

say "what this demo becomes"
cat <<'TXT'
The next parts of hone turn this into the whole loop on the emulated device (no GPU needed):
an unmodified application under LD_PRELOAD=libhone.so reports its hot kernels to honed, which
captures their inputs, builds faster variants, proves them equal on those inputs, measures them,
and swaps them into the running application; `honectl status` then shows what was swapped and by
how much it helped.
TXT
