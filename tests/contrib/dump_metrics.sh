#!/usr/bin/env bash
# dump_metrics: start a honed of this build in a temporary directory, write what
# `honectl metrics` prints to OUT, stop it. The dump is what check_contrib.sh compares the
# dashboard's and the alerts' metric names with.
#
#   dump_metrics.sh BIN_DIR DRIVER OUT
#
# BIN_DIR holds honed and honectl; DRIVER is the libcuda.so.1 honed's workers load (the emulated
# one, build/lib/emu/libcuda.so.1). honed gets a remote tier that is never reached
# (redis://127.0.0.1:9, asked only once a kernel turns hot, which none does here) so that the
# remote tier's metrics, exported only when one is configured, are in the dump.
set -euo pipefail

bin=$1
driver=$2
out=$3
# honed takes a driver path only when absolute.
if [[ $driver == */* && $driver != /* ]]; then driver=$PWD/$driver; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dump_metrics.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

: >"$work/hone.toml"
HONE_STORE_REMOTE_URLS=redis://127.0.0.1:9 "$bin/honed" --config "$work/hone.toml" \
  --socket "$work/hone.sock" --state-dir "$work/state" --driver "$driver" --log-level warn \
  >"$work/honed.log" 2>&1 &
pid=$!

for _ in $(seq 100); do
  if "$bin/honectl" --socket "$work/hone.sock" status >/dev/null 2>&1; then
    mkdir -p "$(dirname "$out")"
    "$bin/honectl" --socket "$work/hone.sock" metrics >"$out.tmp"
    mv "$out.tmp" "$out"
    echo "dump_metrics: $(grep -c '^# TYPE ' "$out") metrics from honed $("$bin/honed" --version) in $out"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
echo "FAIL: honed did not answer on $work/hone.sock within 10 s; its log:"
cat "$work/honed.log"
exit 1
