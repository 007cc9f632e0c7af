#!/usr/bin/env bash
# The GPU checks, for a machine with a real NVIDIA GPU and driver (the device tool's H200; nothing
# else of hone's tests needs one). Run from the repository root with the bundle built here
# (../shared/gpu/bundle.sh build .gpu) sourced, carrying the runtime-API corpus and the emulated
# device too, so that both runtimes' traces are taken on the same machine:
#
#   carry: [".gpu", "build/tests/runtime", "build/tests/apps", "build/lib/emu",
#           "build/bench/model_pairs.ptx"]
#   source .gpu/env.sh && tests/gpu/run.sh
#
# 1. The GPU: nvidia-smi.
# 2. The runtime-API corpus (tests/runtime, nvcc -cudart shared) on NVIDIA's runtime and driver:
#    each program alone, then under libhone.so with HONE_TRACE=1 (no daemon: the shim runs
#    fail-open); stdout must be identical. The trace lines (the driver entry points each run
#    called, with the cuGetProcAddress version asked for) are compared with those of the same
#    program on the emulated device and its runtime (build/lib/emu), if carried: the entry points
#    NVIDIA's runtime calls that hone's does not, and the other way round.
# 3. PyTorch, if the machine has it: a small transformer block's forward pass (random weights),
#    eager and torch.compile'd (Triton kernels, with a fresh TRITON_CACHE_DIR filled by the plain
#    run), without and with the shim attached to a honed of the bundle (outputs must be
#    identical); the kernels hone saw with what it has to work from (CODE), and the coverage:
#    the share of GPU time by kind, and how many Triton kernels were found in the cache.
# 4. CUDA graphs: the pytorch- and llama.cpp-shaped hone-testapp-graph on the real driver, alone
#    and under the shim with a honed swapping the kernel inside the graphs (results must hold).
# 5. `make demo`'s script against the real driver: honed validating every built-in strategy's
#    candidates on the GPU with device events, and swapping the verified faster ones.
# 6. The cost model against the GPU: hone-bench-model-pairs (bench/model_pairs.cu) with event
#    timing on the GPU (--reps 20) and, when build/lib/emu is carried, on the emulated device on the
#    same machine; per kernel both times, per pair whether the GPU's direction is the one each of
#    them gives, and the Spearman rank correlation of the model's times with the GPU's.
#    Carry "build/bench/model_pairs.ptx" too.
#
# 7. The scrub (daemon/worker/scrub.hpp): the uninitialized-shared-memory corpus entry through a
#    worker on the GPU, with [validation] gpu_scrub on (must be refused) and off (printed).
# 8. The L2 flush between timed runs (Device::flush_l2) on a memory-bound kernel:
#    hone-bench-l2-flush, the gap between flushed and unflushed medians.
#
# Logs go to $OUT (default /tmp/hone-gpu); the end of the output is a short summary. Each part has
# its own time limit, so one that hangs does not take the others with it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/hone-gpu}
bundle=${HONE_BUNDLE:-$root/.gpu}
corpus=${HONE_RUNTIME_CORPUS:-$root/build/tests/runtime}
emu=${HONE_EMU_DIR:-$root/build/lib/emu}
shim=$bundle/lib/libhone.so
mkdir -p "$out"
cd "$root"
failures=0

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } \
  >"$out/gpu.txt" 2>&1 || echo "nvidia-smi failed" >>"$out/gpu.txt"
echo "== GPU"
cat "$out/gpu.txt"

# The entry points a trace names: "NAME (how, version, stream)" per line, sorted, unique.
trace_set() { sed -n 's/^hone: trace: //p' "$1" | sort -u; }

echo "== runtime-API corpus on NVIDIA's runtime, without and with the shim (HONE_TRACE=1)"
if [ -d "$corpus" ]; then
  mkdir -p "$out/corpus"
  for prog in "$corpus"/*; do
    [ -f "$prog" ] && [ -x "$prog" ] || continue
    name=$(basename "$prog")
    d=$out/corpus/$name
    mkdir -p "$d"
    # NVIDIA's runtime: the system's libcudart.so.13 and libcuda.so.1 (no emulated device first).
    env -u LD_PRELOAD timeout 120 "$prog" >"$d/plain.out" 2>"$d/plain.err"
    plain=$?
    HONE_SOCKET=$out/no-daemon.sock HONE_TRACE=1 LD_PRELOAD=$shim timeout 120 "$prog" \
      >"$d/shim.out" 2>"$d/shim.err"
    shimmed=$?
    verdict=ok
    if [ $plain -ne 0 ]; then
      verdict="fails on its own (exit $plain)"
    elif [ $shimmed -ne $plain ] || ! cmp -s "$d/plain.out" "$d/shim.out"; then
      verdict="DIFFERS under the shim (exit $shimmed)"
      failures=$((failures + 1))
    fi
    trace_set "$d/shim.err" >"$d/gpu.trace"
    line="  $name: $verdict, $(wc -l <"$d/gpu.trace") driver entry points traced"
    if [ -e "$emu/libcudart.so.13" ]; then
      HONE_SOCKET=$out/no-daemon.sock HONE_TRACE=1 LD_PRELOAD=$shim LD_LIBRARY_PATH=$emu:${LD_LIBRARY_PATH:-} \
        timeout 300 "$prog" >"$d/emu.out" 2>"$d/emu.err"
      trace_set "$d/emu.err" >"$d/emu.trace"
      # Compared by entry point name alone: the versions asked for are in the files.
      sed 's/ (.*//' "$d/gpu.trace" | sort -u >"$d/gpu.names"
      sed 's/ (.*//' "$d/emu.trace" | sort -u >"$d/emu.names"
      comm -23 "$d/gpu.names" "$d/emu.names" >"$d/only_nvidia"
      comm -13 "$d/gpu.names" "$d/emu.names" >"$d/only_hone"
      cmp -s "$d/plain.out" "$d/emu.out" || line+=", the emulated device's output differs"
      line+="; only NVIDIA's runtime: $(tr '\n' ' ' <"$d/only_nvidia")"
      line+="; only hone's: $(tr '\n' ' ' <"$d/only_hone")"
    fi
    echo "$line"
  done
  cat "$out"/corpus/*/gpu.trace 2>/dev/null | sort | uniq -c | sort -rn >"$out/corpus-gpu-trace.txt"
  echo "  (every entry point NVIDIA's runtime called, with its version, counted over the corpus:"
  echo "   $out/corpus-gpu-trace.txt)"
else
  echo "  no corpus at $corpus (carry build/tests/runtime)"
fi

echo "== PyTorch under the shim"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  cat >"$out/model.py" <<'PY'
import hashlib, sys, torch
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self, d=512, heads=8):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))
    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))
model = torch.nn.Sequential(Block(), Block()).cuda().eval()
if len(sys.argv) > 1 and sys.argv[1] == "compile":
    model = torch.compile(model)
x = torch.randn(8, 128, 512, device="cuda")
with torch.no_grad():
    for _ in range(50):
        y = model(x)
torch.cuda.synchronize()
print("sha256", hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest())
PY
  mkdir -p "$out/torch"
  cat >"$out/torch/hone.toml" <<TOML
[server]
socket = "$out/torch/hone.sock"
report_interval_ms = 250
[store]
state_dir = "$out/torch/state"
[optimizer]
enabled = false
hot_min_launches = 10
hot_top = 200
TOML
  export TRITON_CACHE_DIR=$out/torch/triton-cache
  for mode in eager compile; do
    timeout 300 python3 "$out/model.py" $mode >"$out/torch/plain-$mode.out" 2>"$out/torch/plain-$mode.err"
  done
  "$bundle/bin/honed" --config "$out/torch/hone.toml" >"$out/torch/honed.log" 2>&1 &
  honed=$!
  for _ in $(seq 50); do [ -S "$out/torch/hone.sock" ] && break; sleep 0.1; done
  for mode in eager compile; do
    HONE_SOCKET=$out/torch/hone.sock LD_PRELOAD=$shim timeout 300 python3 "$out/model.py" $mode \
      >"$out/torch/shim-$mode.out" 2>"$out/torch/shim-$mode.err"
    if cmp -s "$out/torch/plain-$mode.out" "$out/torch/shim-$mode.out"; then
      echo "  forward pass ($mode): identical output under the shim ($(cat "$out/torch/plain-$mode.out"))"
    else
      echo "  forward pass ($mode): DIFFERS under the shim"
      failures=$((failures + 1))
    fi
  done
  sleep 3 # the last reports, and the images honed asked for
  "$bundle/bin/honectl" --socket "$out/torch/hone.sock" kernels >"$out/torch/kernels.txt" 2>&1
  "$bundle/bin/honectl" --socket "$out/torch/hone.sock" kernels --json >"$out/torch/kernels.json" 2>&1
  kill $honed 2>/dev/null; wait $honed 2>/dev/null
  echo "  kernels hone saw (CODE: what it has to work from):"
  sed 's/^/    /' "$out/torch/kernels.txt" | head -40
  python3 - "$out/torch/kernels.json" <<'PY' || true
import collections, json, sys
r = json.load(open(sys.argv[1]))
r = r.get("result", r)
kinds = collections.Counter(k.get("code", "unknown") for k in r.get("kernels", []))
print("  kernels by kind:", dict(kinds))
for k in r.get("coverage", {}).get("kinds", []):
    if k["kernels"]:
        print(f"  coverage {k['kind']:10s} {k['kernels']:4d} kernels  {100 * k['share']:5.1f}% of GPU time"
              f"  ({100 * k['workable_share']:5.1f}% workable)")
print(f"  workable share: {100 * r.get('coverage', {}).get('workable_share', 0):.1f}%")
PY
else
  echo "  no PyTorch with CUDA on this machine: skipped"
fi

echo "== CUDA graphs: hone-testapp-graph on the real driver, without and with the shim"
# The pytorch- and llama.cpp-shaped programs replay the kernel only in graphs; under a honed of
# the bundle with the optimizer on, the verified variant is pointed into the graphs' nodes. The
# programs check every replay; the kernel's mean time before and after its swap shows in the
# replays' event time (honectl show).
graph_app=$root/build/tests/apps/hone-testapp-graph
if [ -x "$graph_app" ]; then
  for mode in pytorch llama; do
    d=$out/graph-$mode
    mkdir -p "$d"
    cat >"$d/hone.toml" <<TOML
[server]
socket = "$d/hone.sock"
report_interval_ms = 250
[store]
state_dir = "$d/state"
[optimizer]
enabled = true
hot_min_launches = 50
TOML
    timeout 60 "$graph_app" --mode $mode --seconds 10 >"$d/plain.out" 2>&1
    "$bundle/bin/honed" --config "$d/hone.toml" >"$d/honed.log" 2>&1 &
    honed=$!
    for _ in $(seq 50); do [ -S "$d/hone.sock" ] && break; sleep 0.1; done
    # pytorch with per-node CUPTI timing, llama with the event-based estimate.
    cupti=0; [ $mode = pytorch ] && cupti=1
    HONE_SOCKET=$d/hone.sock HONE_SAMPLE_EVERY=10 HONE_CUPTI=$cupti HONE_LOG=info LD_PRELOAD=$shim \
      timeout 120 "$graph_app" --mode $mode --seconds 60 >"$d/shim.out" 2>"$d/shim.err"
    grep -h "HONE_CUPTI" "$d/shim.err" | sed 's/^/    /'
    "$bundle/bin/honectl" --socket "$d/hone.sock" show _ZN7hone_rt6bucketIjEEvPT_PKS1_jjj \
      >"$d/show.txt" 2>&1
    "$bundle/bin/honectl" --socket "$d/hone.sock" variants >"$d/variants.txt" 2>&1
    kill $honed 2>/dev/null; wait $honed 2>/dev/null
    if grep -q "mismatches 0" "$d/plain.out" && grep -q "mismatches 0" "$d/shim.out"; then
      echo "  $mode: results unchanged ($(tail -1 "$d/shim.out"))"
    else
      echo "  $mode: RESULTS DIFFER or the program failed"
      failures=$((failures + 1))
    fi
    sed 's/^/    /' "$d/show.txt" | grep -E 'launches|runs as|served|GPU time|shadow' | head -8
    sed 's/^/    /' "$d/variants.txt" | head -6
  done
else
  echo "  $graph_app not carried: skipped"
fi

echo "== demo on the real driver"
DEMO_DRIVER=${HONE_GPU_DRIVER:-libcuda.so.1} DEMO_SECONDS=${DEMO_SECONDS:-240} \
  timeout 420 examples/demo.sh "$bundle" >"$out/demo.log" 2>&1
demo=$?
echo "  exit $demo (0: results unchanged, swaps as listed)"
grep -E '^  (verdict +jobs? |swap +|serving +)' "$out/demo.log" | sed 's/  */ /g' | tail -40
grep -E 'fingerprint_changes|device time of one step|demo (ok|FAILED)' "$out/demo.log"
[ $demo -eq 0 ] || failures=$((failures + 1))
echo "== cost model: optimization pairs on the GPU and on the emulated device"
pairs=$bundle/bin/hone-bench-model-pairs
pairs_ptx=$root/build/bench/model_pairs.ptx
if [ -x "$pairs" ] && [ -f "$pairs_ptx" ]; then
  timeout 300 "$pairs" --ptx "$pairs_ptx" --reps 20 --json >"$out/pairs-gpu.txt" 2>&1
  gpu_rc=$?
  sed -n '1,/^10 pairs\|pairs:/p' "$out/pairs-gpu.txt" | grep -v '^{' | head -30
  if [ -d "$emu" ]; then
    LD_LIBRARY_PATH=$emu timeout 300 "$pairs" --ptx "$pairs_ptx" --json >"$out/pairs-model.txt" 2>&1
    python3 - "$out/pairs-gpu.txt" "$out/pairs-model.txt" <<'PY' | tee "$out/pairs-compare.txt"
import json, sys
def load(path):
    for line in reversed(open(path).read().splitlines()):
        if line.startswith('{'):
            return json.loads(line)
    raise SystemExit(f"{path}: no JSON line")
gpu, model = load(sys.argv[1]), load(sys.argv[2])
times = {}
for side, doc in (("gpu", gpu), ("model", model)):
    for p in doc.get("pairs", []):
        times.setdefault(p["a_kernel"], {})[side] = p["a_us"]
        times.setdefault(p["b_kernel"], {})[side] = p["b_us"]
both = [(k, v["gpu"], v["model"]) for k, v in times.items() if "gpu" in v and "model" in v]
def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r
print(f"{'kernel':28} {'GPU us':>10} {'model us':>10}")
for k, g, m in sorted(both, key=lambda t: t[1]):
    print(f"{k:28} {g:10.2f} {m:10.2f}")
rg, rm = ranks([b[1] for b in both]), ranks([b[2] for b in both])
n = len(both)
mg, mm = sum(rg) / n, sum(rm) / n
cov = sum((a - mg) * (b - mm) for a, b in zip(rg, rm))
var = (sum((a - mg) ** 2 for a in rg) * sum((b - mm) ** 2 for b in rm)) ** 0.5
print(f"Spearman rank correlation over {n} kernels: {cov / var:.3f}")
gp = {p["pair"]: p for p in gpu.get("pairs", [])}
for p in model.get("pairs", []):
    g = gp.get(p["pair"])
    if g:
        print(f"{p['pair']:14} GPU A/B {g['ratio']:.3f} ({g['measured']}), model {p['ratio']:.3f} "
              f"({p['measured']}): {'agree' if g['measured'] == p['measured'] else 'DISAGREE'}")
PY
  fi
  [ $gpu_rc -eq 0 ] || failures=$((failures + 1))
else
  echo "  $pairs or $pairs_ptx not carried: skipped"
fi

echo "== scrub: uninitialized shared memory on the GPU, with and without the scrub"
# tests/cheats/uninitialized_shared.cu against block_sum through a worker on the real driver:
# [validation] gpu_scrub on must give `nondeterministic` (the test asserts it), off prints what
# the GPU gives without it. Carry "build/tests" (worker_test, hone_worker_host).
if [ -x "$root/build/tests/worker_test" ]; then
  HONE_TEST_DRIVER=libcuda.so.1 HONE_TEST_WORKER_HOST=$root/build/tests/hone_worker_host \
    HONE_TEST_SOURCE_DIR=$root timeout 300 "$root/build/tests/worker_test" \
    --gtest_filter='WorkerTest.UninitializedSharedMemoryIsCaughtWithTheScrub' >"$out/scrub.log" 2>&1
  scrub=$?
  grep -E '^gpu_scrub|OK \]|FAILED \]' "$out/scrub.log"
  [ $scrub -eq 0 ] || failures=$((failures + 1))
else
  echo "  build/tests/worker_test not carried: skipped"
fi

echo "== L2 flush between timed runs: a memory-bound kernel with and without it"
# hone-bench-l2-flush: the worker's Device times a kernel reading 16 MiB (fits the L2) without a
# flush between runs and with the worker's flush before each; the gap is what an unflushed
# timing would credit a candidate that only finds its data in cache.
if [ -x "$bundle/bin/hone-bench-l2-flush" ]; then
  timeout 120 "$bundle/bin/hone-bench-l2-flush" --mb 16 --reps 50 >"$out/l2_flush.log" 2>&1
  l2=$?
  cat "$out/l2_flush.log"
  [ $l2 -eq 0 ] || failures=$((failures + 1))
fi

echo "== $failures failure(s)"
[ $failures -eq 0 ]
