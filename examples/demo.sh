#!/usr/bin/env bash
# make demo: the whole loop on the emulated device, no GPU needed.
#
# An unmodified application (tests/apps/serve_app.cpp: it launches one kernel over and over and
# checks every result on the host) runs under LD_PRELOAD=libhone.so against the emulated driver.
# honed sees its kernel, a kernel engineer submits a faster version and a wrong one with honectl;
# honed captures the application's own launches, validates both on them in a worker, rejects the
# wrong one, swaps the right one into the running application, and honectl shows the launches it
# served. disable/enable switch it off and on again. The application must end with 0 mismatches.
#
#   examples/demo.sh [BUILD_DIR]     (default build)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/$build/bin"
emu="$root/$build/lib/emu"
shim="$root/$build/lib/libhone.so"
app="$root/$build/tests/apps/hone-testapp-serve"
for f in "$bin/honed" "$bin/honectl" "$emu/libcuda.so.1" "$shim" "$app"; do
  [ -e "$f" ] || { echo "demo: $f is missing: build first (make build)" >&2; exit 1; }
done

work=$(mktemp -d)
honed_pid=""
app_pid=""
cleanup() {
  touch "$work/stop"
  [ -n "$app_pid" ] && wait "$app_pid" 2>/dev/null || true
  [ -n "$honed_pid" ] && kill "$honed_pid" 2>/dev/null && wait "$honed_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctl() { echo "\$ honectl $*"; "$bin/honectl" --socket "$work/hone.sock" "$@"; }

cat >"$work/hone.toml" <<TOML
[server]
socket = "$work/hone.sock"
report_interval_ms = 200
[store]
state_dir = "$work/state"
[worker]
driver = "$emu/libcuda.so.1"   # the emulated device; on a GPU server: libcuda.so.1
[optimizer]
hot_min_launches = 50
gpu_share = 0.5
TOML

say "start honed (state in $work/state, workers on the emulated device)"
"$bin/honed" --config "$work/hone.toml" --log-level info >"$work/honed.log" 2>&1 &
honed_pid=$!
for _ in $(seq 100); do [ -S "$work/hone.sock" ] && break; sleep 0.1; done
[ -S "$work/hone.sock" ] || { cat "$work/honed.log"; exit 1; }
echo "honed $honed_pid listening on $work/hone.sock"

say "run an unmodified CUDA application under libhone.so"
echo "\$ LD_PRELOAD=libhone.so hone-testapp-serve --n 1024 --reps 4096"
HONE_SOCKET="$work/hone.sock" LD_PRELOAD="$shim" LD_LIBRARY_PATH="$emu" \
  "$app" --seconds 300 --n 1024 --reps 4096 --stop-file "$work/stop" >"$work/app.log" 2>&1 &
app_pid=$!
for _ in $(seq 300); do
  "$bin/honectl" --socket "$work/hone.sock" kernels --json 2>/dev/null | grep -q '"accumulate"' && break
  sleep 0.1
done
sleep 2
ctl status --top 3

say "built-in strategy: honed re-JITs the hot kernel with other JIT options by itself"
echo "(on the emulated device JIT options change nothing measurable: expect 'not faster')"
for _ in $(seq 300); do
  "$bin/honectl" --socket "$work/hone.sock" jobs --json | grep -q '"state": "done"' && break
  sleep 0.2
done
ctl jobs

say "a wrong candidate: it reads the output's old contents (honed poisons outputs first)"
ctl submit accumulate "$root/examples/candidates/accumulate_wrong.cu" --bitwise || true

say "a faster candidate: validated bit for bit on captured launches, measured, swapped in"
ctl submit accumulate "$root/examples/candidates/accumulate_fast.cu" --bitwise
sleep 2
ctl kernels

say "the verified variant and its evidence"
variant=$("$bin/honectl" --socket "$work/hone.sock" variants accumulate --json |
  sed -n 's/.*"id": "\([0-9a-f]*\)".*/\1/p' | while read -r id; do
    if "$bin/honectl" --socket "$work/hone.sock" show "$id" --json | grep -q '"state": "verified"'; then
      echo "$id"
    fi
  done | head -1)
ctl show "$variant" | head -32 || true
echo "  ..."

say "switch it off: every process runs the original within a second; then on again"
ctl disable accumulate
sleep 2
ctl enable accumulate
sleep 2
ctl kernels

say "stop the application: it checked every launch on the host"
touch "$work/stop"
wait "$app_pid" && status=0 || status=$?
app_pid=""
tail -1 "$work/app.log"
if [ "$status" -ne 0 ]; then
  echo "demo: the application failed (exit $status)" >&2
  exit 1
fi

say "what honed logged"
grep -E "job|variant|captured|worker" "$work/honed.log" | cut -c25- | head -30
