#!/usr/bin/env bash
# The GPU check of the agent, for a machine with a real NVIDIA GPU and driver (the device tool's
# H200; nothing else of hone's tests needs one). Run from the repository root with the bundle built
# here (../shared/gpu/bundle.sh build .gpu) sourced:
#
#   source .gpu/env.sh && tests/gpu/run.sh
#
# It records the GPU, then runs `make demo`'s script against the real driver: the demo
# application under libhone.so, honed validating every built-in strategy's candidates on the GPU
# with device events, and swapping the verified faster ones. The demo's verdict lines are the
# speedups the built-in strategies reach there, per kernel; its last lines say whether the
# application's results stayed the same. Logs go to $OUT (default /tmp/hone-gpu); the end of the
# output is a short summary.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/hone-gpu}
bundle=${HONE_BUNDLE:-$root/.gpu}
mkdir -p "$out"
cd "$root"

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } \
  >"$out/gpu.txt" 2>&1 || echo "nvidia-smi failed" >>"$out/gpu.txt"

DEMO_DRIVER=${HONE_GPU_DRIVER:-libcuda.so.1} DEMO_SECONDS=${DEMO_SECONDS:-240} \
  timeout 420 examples/demo.sh "$bundle" >"$out/demo.log" 2>&1
demo=$?

echo "== GPU"
cat "$out/gpu.txt"
echo "== demo on the real driver: exit $demo (0: results unchanged, swaps as listed)"
grep -E '^  (verdict +jobs? |swap +|serving +)' "$out/demo.log" | sed 's/  */ /g' | tail -40
grep -E 'fingerprint_changes|device time of one step|demo (ok|FAILED)' "$out/demo.log"
exit $demo
