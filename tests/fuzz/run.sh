#!/usr/bin/env bash
# Run every fuzz target for a bounded time: run.sh BUILD_DIR SECONDS [RUNS].
# With RUNS, each target runs until it has executed RUNS inputs instead (SECONDS is then ignored):
# the long run before a release (make fuzz-release). Seeds come from tests/fuzz/seeds/<target>;
# what the fuzzer learns stays in BUILD_DIR.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS [RUNS]}
seconds=${2:-30}
runs=${3:-}
bound=(-max_total_time="$seconds")
[ -n "$runs" ] && bound=(-runs="$runs")
here=$(cd "$(dirname "$0")" && pwd)
status=0
for fuzzer in "$build"/fuzz/*_fuzz; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer" _fuzz)
  seeds=$here/seeds/${name%%_*}
  corpus=$build/fuzz-corpus/$name
  mkdir -p "$corpus"
  dict=()
  [ -f "$here/${name%%_*}.dict" ] && dict=(-dict="$here/${name%%_*}.dict")
  echo "fuzz: $name for ${runs:-${seconds}s} ${runs:+executions }(seeds: $seeds)"
  if ! "$fuzzer" "$corpus" "$seeds" "${dict[@]}" "${bound[@]}" -timeout=10 \
       -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-crash-$name-" 2>"$build/fuzz-$name.log"; then
    tail -n 60 "$build/fuzz-$name.log"
    echo "fuzz: $name FAILED (reproducer: $build/fuzz-crash-$name-*)"
    status=1
  else
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$build/fuzz-$name.log" | sed "s/^/fuzz: $name /"
    grep -E '^Done [0-9]+ runs in [0-9]+ second' "$build/fuzz-$name.log" | sed "s/^/fuzz: $name /" || true
  fi
done
exit $status
