#!/usr/bin/env bash
# Run every fuzz target for a bounded time: run.sh BUILD_DIR SECONDS.
# Seeds come from tests/fuzz/seeds/<target>; what the fuzzer learns stays in BUILD_DIR.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:-30}
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
  echo "fuzz: $name for ${seconds}s (seeds: $seeds)"
  if ! "$fuzzer" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-crash-$name-" 2>"$build/fuzz-$name.log"; then
    tail -n 60 "$build/fuzz-$name.log"
    echo "fuzz: $name FAILED (reproducer: $build/fuzz-crash-$name-*)"
    status=1
  else
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$build/fuzz-$name.log" | sed "s/^/fuzz: $name /"
  fi
done
exit $status
