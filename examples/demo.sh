#!/usr/bin/env bash
# make demo: hone optimizing the kernels of a running application, on the emulated device (no GPU).
#
# Two ordinary CUDA programs run side by side, unmodified, under LD_PRELOAD=libhone.so, on the
# emulated device: hone-example-mlp (examples/mlp), a driver-API program that compiles five kernels
# with NVRTC when it starts, and hone-example-hashing (examples/hashing), a runtime-API program
# built by nvcc with -cudart shared (<<<>>> launches, kernels only in its fatbin), which runs on the
# emulated device's own CUDA runtime. Each runs an inference-like step over and over, checking its
# results against the host and fingerprinting the results of a fixed input. honed sees their
# kernels turn hot, captures some of their launches, lets its built-in strategies propose
# candidates (from the NVRTC source, or from the fatbin's PTX), proves each one equal to the
# original on the captured launches in a worker, measures it (the emulated device's modeled
# time), and swaps the verified faster ones into the running applications. The demo shows each of
# those steps as it happens until every application runs a variant of its own (honed goes on with
# the rest in the background), then stops the applications, which must report that their results
# never changed. On the emulated device the applications' kernels and honed's validation share the
# CPU: the applications run niced, as on a GPU server validation takes only its share of the GPU.
#
#   examples/demo.sh [BUILD_DIR]    (default build: relative to the repository root, or absolute)
#   DEMO_SECONDS=120                the longest the demo waits for hone to finish its work
#   DEMO_DRIVER=libcuda.so.1        run on a real GPU with this driver instead of the emulated
#                                   device (tests/gpu/run.sh); times are then the GPU's own
#
# Exit status 0 when the application ends with every check matching; 1 when it reports a mismatch
# or fails, when honed dies, or when a part of the build is missing.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) out=$build ;; *) out=$root/$build ;; esac
bin="$out/bin"
emu="$out/lib/emu"
shim="$out/lib/libhone.so"
# The applications: name, program, and the log each writes.
apps=(mlp hashing)
declare -A app_bin=([mlp]="$bin/hone-example-mlp" [hashing]="$bin/hone-example-hashing")
declare -A app_pid app_seen prev_step shown_step first_step
# The device: the emulated one (the driver in BUILD/lib/emu, first on LD_LIBRARY_PATH), or with
# DEMO_DRIVER the real driver the system has.
if [ -n "${DEMO_DRIVER:-}" ]; then
  driver=$DEMO_DRIVER device="the GPU (driver $DEMO_DRIVER)" app_libs=${LD_LIBRARY_PATH:-} runs=21
  runs_why="the default: a GPU's times vary"
  min_runs=5 min_runs_why="the default"
  app_nice=()
else
  driver=$emu/libcuda.so.1 device="the emulated device" app_libs=$emu runs=11
  runs_why="default 21: the emulated device's modeled times do not vary"
  min_runs=3 min_runs_why="default 5: no noise, so three runs settle a verdict"
  # The emulated device is the CPU: the applications' kernels and honed's validation share its
  # cores, where on a GPU server they would share the GPU (optimizer.gpu_share). The applications
  # run niced, so that validating does not wait behind them.
  app_nice=(nice -n 5)
  [ -e "$driver" ] || { echo "demo: $driver is missing: build first (make build)" >&2; exit 1; }
fi
for f in "$bin/honed" "$bin/honectl" "$shim" "${app_bin[@]}"; do
  [ -e "$f" ] || { echo "demo: $f is missing: build first (make build)" >&2; exit 1; }
done
limit=${DEMO_SECONDS:-120}
hot_min=10
sample_every=10

work=$(mktemp -d)
honed_pid=""
cleanup() {
  touch "$work/stop"
  for a in "${apps[@]}"; do [ -n "${app_pid[$a]:-}" ] && wait "${app_pid[$a]}" 2>/dev/null; done || true
  [ -n "$honed_pid" ] && kill "$honed_pid" 2>/dev/null && wait "$honed_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ -t 1 ]; then bold=$'\033[1m' red=$'\033[1;31m' plain=$'\033[0m'; else bold="" red="" plain=""; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
ctl() { "$bin/honectl" --socket "$work/hone.sock" "$@"; }
# Fails the demo loudly, with the end of the logs that say why.
die() {
  printf '\n%sdemo FAILED: %s%s\n' "$red" "$*" "$plain" >&2
  for f in honed.log "${apps[@]/%/.log}"; do
    [ -s "$work/$f" ] && { echo "--- last lines of $f" >&2; tail -15 "$work/$f" >&2; }
  done
  exit 1
}

cat >"$work/hone.toml" <<TOML
[server]
socket = "$work/hone.sock"
report_interval_ms = 250   # shims report every 250 ms (default 2000)
[store]
state_dir = "$work/state"
[worker]
driver = "$driver"   # $device
[optimizer]
hot_min_launches = $hot_min      # default 100
gpu_share = 1.0            # validate back to back (default 0.25 leaves the GPU to the applications)
[validation]
runs = $runs                  # $runs_why
min_runs = $min_runs              # $min_runs_why
warmup = 1
TOML

say "honed: the daemon (state in a temporary directory, its worker on $device)"
"$bin/honed" --config "$work/hone.toml" --log-level info >"$work/honed.log" 2>&1 &
honed_pid=$!
for _ in $(seq 100); do [ -S "$work/hone.sock" ] && break; sleep 0.1; done
[ -S "$work/hone.sock" ] || die "honed did not start"
echo "honed $honed_pid listening on $work/hone.sock; the settings that differ from the defaults:"
sed -n 's/^\([a-z_]*\) = \([^#]*[^ #]\) *# \(.*\)/  \1 = \2   (\3)/p' "$work/hone.toml"

say "the applications: ordinary CUDA programs, unmodified, under LD_PRELOAD=libhone.so"
echo "  hone-example-mlp: the driver API, its kernels compiled by NVRTC at start"
echo "  hone-example-hashing: the runtime API (nvcc -cudart shared, <<<>>>), kernels only in its fatbin"
echo "  HONE_SAMPLE_EVERY=$sample_every: the shim times 1 launch in $sample_every with events (default 100; these"
echo "  applications launch each kernel a few times a second)"
for a in "${apps[@]}"; do
  echo "\$ LD_PRELOAD=libhone.so $(basename "${app_bin[$a]}")"
  HONE_SOCKET="$work/hone.sock" HONE_SAMPLE_EVERY=$sample_every LD_PRELOAD="$shim" \
    LD_LIBRARY_PATH="$app_libs" \
    "${app_nice[@]}" "${app_bin[$a]}" --seconds 600 --check-every 5 --stop-file "$work/stop" >"$work/$a.log" 2>&1 &
  app_pid[$a]=$!
  app_seen[$a]=0
done
for a in "${apps[@]}"; do
  # the first check comes after five steps; a first run on the emulated device compiles the
  # applications' kernels (several seconds for the larger ones) before its first step ends
  for _ in $(seq 1200); do grep -q '^check 1 ' "$work/$a.log" 2>/dev/null && break; sleep 0.1; done
  sed -n '1,3p' "$work/$a.log" | sed 's/^/  /'
  grep -q '^check 1 .* ok$' "$work/$a.log" || die "$a did not start"
  first_step[$a]=$(sed -n 's/^check 1 .* step_us \([0-9.]*\) .*/\1/p' "$work/$a.log")
done

# --- following honed's log and the application's checks ------------------------------------------

declare -A job_of   # job id -> "kernel strategy"
declare -A swapped_at # process id -> when a variant was first loaded into it
honed_seen=0

# Lines FROM to TO of FILE (complete lines only: TO was counted before).
lines_between() {
  [ "$3" -ge "$2" ] && sed -n "$2,$3p" "$1"
  return 0
}

clip() { local s=$1; [ ${#s} -gt 112 ] && s="${s:0:111}…"; printf '%s' "$s"; }
# C++ kernel names (the runtime-API application's) read demangled where c++filt is there.
demangle() { if command -v c++filt >/dev/null; then c++filt -p <<<"$1"; else printf '%s' "$1"; fi; }
print_event() { printf '  %-10s %s\n' "$1" "$(clip "$(demangle "$2")")"; }
event() { flush_group; print_event "$@"; }

# Candidates and verdicts come in runs (a strategy proposes several candidates at once, and they
# often fare alike): a run of the same kernel, strategy (and verdict) is shown as one line.
group_tag="" group_key="" group_jobs="" group_count=0 group_text="" group_since=0
flush_group() {
  [ -n "$group_tag" ] || return 0
  local first=${group_jobs%%,*} last=${group_jobs##*,} label more=""
  if [ "$group_count" -eq 1 ]; then
    label="job $first"
  elif [ $((last - first + 1)) -eq "$group_count" ]; then
    label="jobs $first-$last"
  else
    label="jobs $group_jobs"
  fi
  [ "$group_tag" = candidate ] && [ "$group_count" -gt 1 ] && more=" (and $((group_count - 1)) more)"
  print_event "$group_tag" "$label  $group_text$more"
  group_tag=""
}
# TAG KEY JOB TEXT: TEXT of the run's first line stands for the run.
group_event() {
  if [ "$1" != "$group_tag" ] || [ "$2" != "$group_key" ]; then
    flush_group
    group_tag=$1 group_key=$2 group_jobs="" group_count=0 group_text=$4
  fi
  group_jobs+="${group_jobs:+,}$3"
  group_count=$((group_count + 1))
  group_since=$SECONDS
}

# One line of honed's log, shown when it is part of the story.
honed_line() {
  local line=$1 level msg
  [[ $line =~ honed\[[0-9]+\]\ ([a-z]+):\ (.*)$ ]] || return 0
  level=${BASH_REMATCH[1]}
  msg=${BASH_REMATCH[2]}
  msg=$(sed -E 's/[0-9a-f]{32}://g' <<<"$msg") # kernel keys: just the entry name
  if [[ $msg =~ ^process\ ([0-9]+)\ \((.*)\)\ attached ]]; then
    event attach "process ${BASH_REMATCH[1]} ($(basename "${BASH_REMATCH[2]}")) attached to honed"
  elif [[ $msg =~ ^captured\ a\ launch\ of\ (.*) ]]; then
    event capture "${BASH_REMATCH[1]/ (/: a launch captured (}"
  elif [[ $msg =~ ^job\ ([0-9]+):\ ([^ ]+)\ candidate\ for\ ([^ ]+)\ \((.*)\)$ ]]; then
    job_of[${BASH_REMATCH[1]}]="${BASH_REMATCH[3]} ${BASH_REMATCH[2]}"
    [ "${BASH_REMATCH[2]}" = submit ] && return 0
    group_event candidate "${BASH_REMATCH[3]} ${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}" \
      "${BASH_REMATCH[3]}  ${BASH_REMATCH[2]}: ${BASH_REMATCH[4]}"
  elif [[ $msg =~ ^job\ ([0-9]+):\ queued ]]; then
    :
  elif [[ $msg =~ ^job\ ([0-9]+):\ (.*)$ ]]; then
    local what=${job_of[${BASH_REMATCH[1]}]:-}
    [[ $what == *" submit" ]] && return 0
    local job=${BASH_REMATCH[1]} verdict=${BASH_REMATCH[2]%%;*}
    verdict=${verdict/correct on * captures, but not faster: /}
    group_event verdict "$what $verdict" "$job" "${what/ /  }: $verdict"
  elif [[ $msg =~ ^variant\ ([0-9a-f]{12})[0-9a-f]*\ of\ ([^ ]+)\ pushed\ to\ process\ ([0-9]+) ]]; then
    [ -n "${swapped_at[${BASH_REMATCH[3]}]:-}" ] || swapped_at[${BASH_REMATCH[3]}]=$SECONDS
    event swap "${BASH_REMATCH[2]}: variant ${BASH_REMATCH[1]} loaded into process ${BASH_REMATCH[3]}"
  elif [[ $msg =~ ^variant\ .*not\ serving || $msg =~ ^worker\ [0-9]+\ (killed|exited) ]]; then
    event "${msg%% *}" "$msg"
  elif [[ $level != info && $level != debug && $level != trace ]]; then
    event "$level" "$msg"
  fi
}

# One line of application A's output. A check is shown when the device time of a step has
# changed and held for two checks in a row (a step with a captured launch takes longer: the
# capture's copies run on the application's stream).
app_line() {
  local a=$1 line=$2
  if [[ $line =~ ^check\ ([0-9]+)\ iteration\ ([0-9]+)\ .*step_us\ ([0-9.]+)\ ok$ ]]; then
    local step=${BASH_REMATCH[3]}
    if [ "$step" = "${prev_step[$a]:-}" ] && [ "$step" != "${shown_step[$a]:-}" ]; then
      event "$a" "check ${BASH_REMATCH[1]} (iteration ${BASH_REMATCH[2]}): results ok; a step takes $step us of device time"
      shown_step[$a]=$step
    fi
    prev_step[$a]=$step
  elif [[ $line =~ MISMATCH|^mismatch ]]; then
    event "$a" "$line"
    die "$a reports a mismatch"
  fi
}

follow() {
  local line n
  n=$(wc -l <"$work/honed.log")
  while IFS= read -r line; do
    honed_line "$line"
  done < <(lines_between "$work/honed.log" $((honed_seen + 1)) "$n")
  honed_seen=$n
  local a
  for a in "${apps[@]}"; do
    n=$(wc -l <"$work/$a.log")
    while IFS= read -r line; do
      app_line "$a" "$line"
    done < <(lines_between "$work/$a.log" $((app_seen[$a] + 1)) "$n")
    app_seen[$a]=$n
  done
  # A run not continued for a few seconds is over.
  [ -z "$group_tag" ] || [ $((SECONDS - group_since)) -lt 4 ] || flush_group
  kill -0 "$honed_pid" 2>/dev/null || die "honed died"
  for a in "${apps[@]}"; do
    [ -z "${app_pid[$a]:-}" ] || kill -0 "${app_pid[$a]}" 2>/dev/null || die "$a stopped by itself"
  done
}

# Whether every application has run a variant of its own for a while (long enough for a few of
# its checks to show the new device time).
all_served() {
  local a at
  for a in "${apps[@]}"; do
    at=${swapped_at[${app_pid[$a]}]:-}
    [ -n "$at" ] && [ $((SECONDS - at)) -ge 5 ] || return 1
  done
}

# "name launches variant_launches state est_gpu_ns" per kernel, from honectl kernels --json (its
# keys come in alphabetical order: variant_launches is the last one of a kernel).
kernel_rows() {
  ctl kernels --json 2>/dev/null | awk '
    /^ *"est_gpu_ns":/ { e = $2; gsub(/[^0-9]/, "", e) }
    /^ *"launches":/ { l = $2; gsub(/[^0-9]/, "", l) }
    /^ *"name":/ { n = $2; gsub(/[",]/, "", n) }
    /^ *"state":/ { s = $2; gsub(/[",]/, "", s) }
    /^ *"variant_launches":/ { v = $2; gsub(/[^0-9]/, "", v); print n, l, v, s, e }' || true
}

say "what hone does, as it happens (honed's log and the application's checks, filtered)"
start=$SECONDS
hot_at=""
table_shown=""
served_at=""
settled_at=""
declare -A serving
while :; do
  follow
  rows=$(kernel_rows)
  hot=$(awk -v m="$hot_min" '$2 >= m' <<<"$rows" | wc -l)
  # The table of hot kernels, shortly after the first one turned hot.
  [ -n "$hot_at" ] || [ "$hot" -eq 0 ] || hot_at=$SECONDS
  if [ -n "$hot_at" ] && [ -z "$table_shown" ] && [ $((SECONDS - hot_at)) -ge 2 ]; then
    table_shown=1
    flush_group
    echo
    echo "  \$ honectl kernels      (hot: launched at least $hot_min times; ranked by estimated GPU time,"
    echo "                         which shows once the shim has timed a launch: 1 in $sample_every is timed)"
    ctl kernels | sed 's/^/    /' || true
    echo
  fi
  while read -r name launches served state est; do
    if [ "${served:-0}" -gt 0 ] && [ -z "${serving[$name]:-}" ]; then
      serving[$name]=1
      event serving "$name: the variant serves the application's launches ($served so far)"
      [ -n "$served_at" ] || served_at=$SECONDS
    fi
  done <<<"$rows"
  jobs=$(ctl jobs --json 2>/dev/null || true)
  pending=$(grep -c '"state": "\(waiting\|queued\|running\)"' <<<"$jobs" || true)
  finished=$(grep -c '"state": "done"' <<<"$jobs" || true)
  if [ "$pending" -eq 0 ] && [ "$finished" -gt 0 ]; then
    [ -n "$settled_at" ] || settled_at=$SECONDS
  else
    settled_at=""
  fi
  # Done: a variant has served for a while and nothing is left to validate, or nothing has been
  # left to validate for a few seconds (the agent has nothing more to try), or the time is up.
  if [ -n "$served_at" ] && [ $((SECONDS - served_at)) -ge 8 ] && [ -n "$settled_at" ]; then break; fi
  # Or every application runs a variant of its own, and has for a while: what is still queued
  # goes on in the background, and the end of the demo says how much.
  if all_served; then
    [ "$pending" -eq 0 ] || echo "  (every application runs a variant now; honed goes on with the $pending job(s) still queued, in the background)"
    break
  fi
  if [ -z "$served_at" ] && [ -n "$settled_at" ] && [ $((SECONDS - settled_at)) -ge 5 ]; then break; fi
  if [ $((SECONDS - start)) -ge "$limit" ]; then
    echo "  ($limit s passed: stopping here; $pending job(s) still pending)"
    break
  fi
  sleep 1
done
follow
flush_group
[ -n "$served_at" ] || echo "  (no candidate was verified faster: nothing was swapped, the application runs its own kernels)"

say "a kernel engineer's hand-written conv1d, missing a barrier (a race): honed rejects it"
echo "\$ honectl submit conv1d examples/mlp/candidates/conv1d_no_barrier.cu --bitwise"
ctl submit conv1d "$root/examples/mlp/candidates/conv1d_no_barrier.cu" --bitwise --wait 60 |
  sed 's/^/  /' || true
follow
flush_group

say "honectl status   (while the application runs; its list of variants: below, per kernel)"
ctl status --top 5 | awk '/^Variants$/ { skip = 1; next } /^Agent$/ { skip = 0 } !skip { print "  " $0 }'
# The kernels whose variants serve now, else the hottest one.
swapped=$(kernel_rows | awk '$3 > 0 { print $1 }')
[ -n "$swapped" ] || swapped=$(kernel_rows | awk 'NR == 1 { print $1 }')

say "stop the applications: their results must be what they were without hone"
touch "$work/stop"
declare -A status
for a in "${apps[@]}"; do
  status[$a]=0
  wait "${app_pid[$a]}" || status[$a]=$?
  app_pid[$a]=""
done
follow
for a in "${apps[@]}"; do
  echo "  $a:"
  grep -E '^check ' "$work/$a.log" | tail -1 | sed 's/^/    last check: /'
  final=$(tail -1 "$work/$a.log")
  echo "    $final"
  last_step=$(grep -E '^check ' "$work/$a.log" | tail -1 | sed -n 's/.* step_us \([0-9.]*\) .*/\1/p')
  if [ -n "${first_step[$a]}" ] && [ -n "$last_step" ]; then
    awk -v a="${first_step[$a]}" -v b="$last_step" 'BEGIN {
      printf "    device time of one step (modeled): %.2f us at the start, %.2f us at the end (%.2fx)\n",
             a, b, (b > 0 ? a / b : 0) }'
  fi
  [ "${status[$a]}" -eq 0 ] && [[ $final == *"result ok" ]] ||
    die "$a failed (exit ${status[$a]}): $final"
done

for k in $swapped; do
  say "honectl variants $k"
  ctl variants "$k" | sed 's/^/  /'
  id=$(ctl variants "$k" --json | awk '
    /^ *"id":/ { i = $2; gsub(/[",]/, "", i) }
    /^ *"state":/ { if ($2 ~ /"verified"/ && !found++) print i }')
  if [ -n "$id" ]; then
    say "honectl show ${id:0:12}   (the evidence behind the swap, in short)"
    ctl show "$id" | awk '/^Evidence/ { evidence = 1; print "  evidence"; next }
      !evidence { print "  " $0 }
      evidence && /^    "(description|comparison|captures_used|original_ns|candidate_ns)"/ {
        sub(/^ +/, ""); sub(/,$/, ""); print "    " $0 }'
  fi
done
kill -0 "$honed_pid" 2>/dev/null || die "honed died"
printf '\n%sdemo ok%s (%d s): both applications ran under hone and their results never changed\n' \
  "$bold" "$plain" "$SECONDS"
