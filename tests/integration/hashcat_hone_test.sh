#!/bin/bash
# hashcat (Debian's 6.2.6) under hone on the emulated device, with honed optimizing: the kernels
# hashcat compiles with NVRTC and links with cuLinkCreate/AddData/Complete are known by the PTX the
# linker was given (CODE `ptx` or `source`, not `sass`), honed validates candidates on captures of
# hashcat's hot kernel, and a variant that is verified serves the next crack, which must still be
# right. One MD5 mask attack (-m 0 -a 3 -O), cracked three times:
#   1. cold (hashcat compiles and links its kernels): honed learns the image and the link's inputs;
#   2. from hashcat's kernel cache (the linked cubin, loaded without a link): the same image hash,
#      so honed still knows its PTX; this process's launches are captured and the jobs run;
#   3. with the variants honed verified (on any of the kernels it took up, after crack 2 exited:
#      hashcat's mask generator l_markov gains by launch_shape): each must serve, and the crack
#      must still be right. A run where nothing is verified fails: the gain is what the test
#      guards.
#
# usage: hashcat_hone_test.sh <build dir> <CUDA lib dir (NVRTC)> <scratch dir>
# HONE_HASHCAT names another hashcat binary. Fails (never skips) when hashcat is missing.
set -u

build=$(cd "$1" && pwd) || { echo "hashcat_hone_test: FAIL: no build directory $1" >&2; exit 1; }
cuda_lib=$2
work=$3
hashcat=${HONE_HASHCAT:-hashcat}
emu_lib=$build/lib/emu
honed=$build/bin/honed
honectl=$build/bin/honectl
shim=$build/lib/libhone.so
sock=$work/hone.sock

fail() {
  echo "hashcat_hone_test: FAIL: $*" >&2
  if [ -f "$work/honed.log" ]; then
    echo "--- the end of honed's log:" >&2
    tail -n 40 "$work/honed.log" >&2
  fi
  exit 1
}

command -v "$hashcat" >/dev/null ||
  fail "no hashcat ('$hashcat'): 'make deps' installs it (hashcat=6.2.6+ds1-1+b1, hashcat-data)"
for f in "$emu_lib/libcuda.so.1" "$honed" "$honectl" "$shim"; do
  [ -e "$f" ] || fail "$f is missing (build hone_emu, honed, honectl and hone_shim)"
done
ls "$cuda_lib"/libnvrtc.so* >/dev/null 2>&1 || fail "no NVRTC in $cuda_lib"
command -v python3 >/dev/null || fail "python3 is needed to compute the hash and read honectl's JSON"

rm -rf "$work"
mkdir -p "$work/home" "$work/state"
# A fresh hashcat home (kernel cache, sessions) and emulator cache for every run of the test.
export HOME=$work/home XDG_CACHE_HOME=$work/home/.cache XDG_DATA_HOME=$work/home/.local/share \
  XDG_CONFIG_HOME=$work/home/.config
export LD_LIBRARY_PATH=$emu_lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HONE_EMU_CACHE_DIR=$work/emu-cache
# The interpreter, for hashcat and for honed's worker alike: compiling hashcat's kernels to host
# code costs more than running them here (hashcat_test.sh).
export HONE_EMU_EXEC=${HONE_HASHCAT_EXEC:-interpret}

# A kernel turns hot at its first launch (hashcat launches its attack kernel a handful of times
# per crack); only the four kernels with the most device time are worked on (the attack kernel
# ranks third, after gpu_bzero and l_markov); one capture per kernel; validation runs kept short.
# Every strategy but rejit: it compiles the same PTX again with other JIT options, which the
# emulated device times as the original (its four jobs per kernel were a third of this test's
# time, all "not faster"); agent_test and runtime_loop_test judge it.
cat >"$work/honed.toml" <<CONF
[agent]
strategies = ["specialize", "launch_bounds", "launch_shape", "readonly"]
[server]
report_interval_ms = 200
[worker]
driver = "$emu_lib/libcuda.so.1"
start_timeout_s = 120
[optimizer]
enabled = true
hot_min_launches = 1
hot_top = 4
gpu_share = 1.0
[capture]
captures_per_kernel = 1
timeout_s = 120
[validation]
warmup = 0
runs = 3
min_runs = 3
job_timeout_s = 120
CONF

"$honed" --config "$work/honed.toml" --socket "$sock" --state-dir "$work/state" \
  --log-level info >"$work/honed.log" 2>&1 &
honed_pid=$!
trap 'kill $honed_pid 2>/dev/null; wait $honed_pid 2>/dev/null' EXIT

ctl() { "$honectl" --socket "$sock" "$@"; }

# wait_for <seconds> <what> <command...>: run the command until it succeeds, or fail at the
# deadline.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local deadline=$(($(date +%s) + limit))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$what: not within $limit s"
    sleep 0.5
  done
}
ctl_quiet() {
  kill -0 "$honed_pid" 2>/dev/null || fail "honed exited"
  ctl "$@" >/dev/null 2>&1
}
wait_for 30 "honed listening on $sock" ctl_quiet status

password=hone583
python3 -c "import hashlib, sys; print(hashlib.md5(sys.argv[1].encode()).hexdigest())" \
  "$password" >"$work/hash.txt"
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
total_start=$(date +%s.%N)

# crack <n>: one MD5 mask attack under the shim; it must crack the password, with no self-test
# problem (hashcat_test.sh says why -n 1 -u 1 -T 64 --force).
crack() {
  local n=$1 out=$work/out-$1.txt log=$work/log-$1.txt start end rc
  start=$(date +%s.%N)
  LD_PRELOAD=$shim HONE_SOCKET=$sock HONE_SAMPLE_EVERY=1 \
    "$hashcat" -m 0 -a 3 -O -d 1 --force -n 1 -u 1 -T 64 --backend-ignore-opencl \
    --potfile-disable --session="hone-test-$n" --outfile="$out" --outfile-format=2 --quiet \
    "$work/hash.txt" 'hone?d?d?d' >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  if [ "$rc" -ne 0 ]; then
    cat "$log" >&2
    fail "crack $n: hashcat exited $rc (0 is 'cracked'; 255 an error such as a failed self-test)"
  fi
  if grep -qi "self-test" "$log"; then
    cat "$log" >&2
    fail "crack $n: hashcat reported a self-test problem"
  fi
  [ "$(cat "$out" 2>/dev/null)" = "$password" ] ||
    fail "crack $n: recovered '$(cat "$out" 2>/dev/null)', expected '$password'"
  echo "hashcat_hone_test: crack $n cracked $password in $(seconds "$start" "$end") s"
}

# kernel <field>: a field of hashcat's attack kernel (m00000_*, the one launched most) in
# `honectl kernels --json`; empty when it is not known.
kernel() {
  ctl kernels --json 2>>"$work/honectl.err" | python3 -c '
import json, sys
field = sys.argv[1]
try:
    data = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
ks = data.get("kernels", data) if isinstance(data, dict) else data
ks = [k for k in ks if k.get("name", "").startswith("m00000_") and k.get("launches", 0) > 0]
if ks:
    k = max(ks, key=lambda k: k.get("launches", 0))
    v = k.get(field, "")
    print(json.dumps(v) if isinstance(v, (dict, list)) else v)
' "$1"
}
classified() { [ -n "$(kernel code)" ] && [ "$(kernel code)" != unknown ]; }

crack 1
wait_for 60 "the attack kernel classified" classified
name=$(kernel name)
code=$(kernel code)
echo "hashcat_hone_test: $name: CODE $code ($(kernel ptx))"
case "$code" in
ptx | source) ;;
*) fail "$name: CODE '$code', expected ptx or source (the JIT link's PTX input): $(kernel ptx)" ;;
esac

# jobs_done: every job on the kernel has a verdict, and at least one job ran.
jobs_report() {
  ctl jobs --json 2>>"$work/honectl.err" | python3 -c '
import json, sys
key = sys.argv[1]
data = json.load(sys.stdin)
jobs = data.get("jobs", data) if isinstance(data, dict) else data
mine = [j for j in jobs if j.get("kernel") == key]
for j in mine:
    print("%s\t%s\t%s\t%s\t%s\t%s" % (j.get("strategy"), j.get("state"), j.get("verdict", "-"),
                                      j.get("speedup", "-"), j.get("captures_used", 0),
                                      j.get("message", "").replace("\n", " ")))
' "$1"
}
jobs_done() {
  local report
  report=$(jobs_report "$key")
  [ -n "$report" ] || return 1
  printf '%s\n' "$report" | awk -F'\t' '$2 != "done" { exit 1 }' || return 1
  # and the kernel has left the queue: no strategy is left to start
  case "$(kernel state)" in verified | rejected) return 0 ;; *) return 1 ;; esac
}

key=$(kernel key)
# The second crack loads the linked cubin from hashcat's cache: no link, the same image.
crack 2
# (Read until it answers: a failed honectl call, in honectl.err, is not a change.)
same_code() {
  local now
  now=$(kernel code)
  [ "$now" = "$code" ] && return 0
  [ -n "$now" ] && fail "$name: CODE changed to '$now' in the second crack"
  return 1
}
wait_for 30 "$name's CODE after the second crack" same_code
wait_for 300 "every job on $name judged" jobs_done
echo "hashcat_hone_test: jobs on $name (strategy, state, verdict, speedup, captures, message):"
jobs_report "$key" | sed 's/^/  /'
jobs_report "$key" | awk -F'\t' '$3 == "internal error" { exit 1 }' ||
  fail "$name: a job ended in an internal error"
jobs_report "$key" | awk -F'\t' '$3 != "unsupported" && $5 > 0 { ok = 1 } END { exit !ok }' ||
  fail "$name: no job was judged on a capture"
# The capture a job ran on held the buffers its pointer parameters point into (the pointer
# analysis reads the link's PTX input), which the worker restored before each run.
grep -Eq "captured a launch of $name \([1-9][0-9]* buffers" "$work/honed.log" ||
  fail "$name: no capture of it copied a buffer of its pointer parameters"

# Every other kernel honed took up (hashcat's mask generators l_markov and r_markov, gpu_bzero):
# wait until no job is left, then any variant verified on any of them must serve crack 3.
# all_kernels: name, key, state and served launches of every kernel with launches.
all_kernels() {
  ctl kernels --json 2>>"$work/honectl.err" | python3 -c '
import json, sys
try:
    data = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
ks = data.get("kernels", data) if isinstance(data, dict) else data
for k in ks:
    if k.get("launches", 0) > 0:
        print("%s\t%s\t%s\t%s" % (k.get("name"), k.get("key"), k.get("state"),
                                   k.get("variant_launches", 0)))
'
}
# jobs_are <condition>: honed's jobs (`jobs`, a list) meet the Python condition.
jobs_are() {
  ctl jobs --json 2>>"$work/honectl.err" | python3 -c '
import json, sys
data = json.load(sys.stdin)
jobs = data.get("jobs", data) if isinstance(data, dict) else data
sys.exit(0 if eval(sys.argv[1]) else 1)
' "$1"
}
no_job_left() { jobs_are 'jobs and all(j.get("state") == "done" for j in jobs)'; }
# A job whose kernel was not captured before crack 2 exited waits for the next crack (its capture
# deadline counts only while a process runs the kernel), as it would for a user's next run: run
# hashcat again while jobs wait and none runs, at most three more times.
jobs_running() { jobs_are 'any(j.get("state") == "running" for j in jobs)'; }
extra=0
deadline=$(($(date +%s) + 600))
until no_job_left; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "every job on every kernel judged: not within 600 s"
  if ! jobs_running && [ "$extra" -lt 3 ]; then
    sleep 2
    if ! jobs_running && ! no_job_left; then
      extra=$((extra + 1))
      crack "2.$extra"
      continue
    fi
  fi
  sleep 1
done
ctl jobs --json 2>>"$work/honectl.err" | python3 -c '
import json, sys
data = json.load(sys.stdin)
jobs = data.get("jobs", data) if isinstance(data, dict) else data
bad = [j for j in jobs if j.get("verdict") == "internal error"]
for j in bad:
    print("%s %s: %s" % (j.get("kernel"), j.get("strategy"), j.get("message")))
sys.exit(1 if bad else 0)
' || fail "a job ended in an internal error"
verified=$(all_kernels | awk -F'\t' '$3 == "verified" { print $1 }' | tr '\n' ' ')
echo "hashcat_hone_test: kernels (name, key, state, served launches):"
all_kernels | sed 's/^/  /'
if [ -n "$verified" ]; then
  echo "hashcat_hone_test: verified: $verified"
  crack 3
  for k in $verified; do
    # (the crack's last report reaches honed after hashcat exits: read until it is in)
    served_launches() {
      served=$(all_kernels | awk -F'\t' -v k="$k" '$1 == k { print $4 }' | head -n 1)
      [ "${served:-0}" -gt 0 ]
    }
    wait_for 30 "$k: a variant is verified, and crack 3's launches of it served by it" \
      served_launches
    echo "hashcat_hone_test: crack 3 served $served launch(es) of $k by its variant"
  done
else
  fail "no variant of any kernel verified (l_markov gains by launch_shape): nothing to serve"
fi
total_end=$(date +%s.%N)
echo "hashcat_hone_test: $(seconds "$total_start" "$total_end") s in all"
echo "hashcat_hone_test: ok"
