#!/bin/sh
# The whole survey, by hand (hours: NVRTC compiles every kernel file of hashcat's, about 10 s each
# on a 2-core machine): every PTX module of llama.cpp's prebuilt CUDA backend and every kernel file
# of hashcat's OpenCL folder, each compiled the way hashcat 6.2.6 compiles it (README.md).
#
#   tests/survey/survey_all.sh BUILD OUT [JOBS]
#
# BUILD is the build directory (its tests/survey/hone-emu-survey), OUT a directory for the results:
# survey-<chunk>.json and .txt per chunk of kernel files, the PTX NVRTC made (reused by a second
# run), and summary.txt: the refusal histogram over every finished chunk, and the kernel files
# NVRTC could not compile with hashcat's general options alone (their modules add options of their
# own).
set -eu

build=${1:?usage: survey_all.sh BUILD OUT [JOBS]}
out=${2:?usage: survey_all.sh BUILD OUT [JOBS]}
jobs=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
survey=$build/tests/survey/hone-emu-survey
root=${HONE_HASHCAT_ROOT:-/usr/share/hashcat}
deps=${HONE_LLAMA_DEPS:-$here/../../.deps/llama}
llama=$deps/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so

mkdir -p "$out"
(cd "$root/OpenCL" && ls m[0-9]*.cl amp_a*.cl markov_*.cl shared.cl) > "$out/kernels.txt"
echo "survey_all: $(wc -l < "$out/kernels.txt") hashcat kernel files in $jobs jobs, and $llama"

# Chunks of 20 kernel files, one survey each, `jobs` at a time: a run stopped halfway keeps the
# chunks it finished (and the PTX NVRTC made), and a second run redoes only the missing ones. The
# llama.cpp modules are chunk "llama".
split -l 20 -d -a 3 "$out/kernels.txt" "$out/chunk-"
chunks="llama $(cd "$out" && ls chunk-* | sed 's/^chunk-//')"
run_chunk() {
  if [ "$1" = llama ]; then
    sources="elf:$llama"
  else
    sources=$(sed 's/^/hashcat:/' "$out/chunk-$1")
  fi
  # shellcheck disable=SC2086 # one argument per source
  "$survey" --json "$out/survey-$1.json.tmp" --hashcat-root "$root" \
    --hashcat-modes "$here/hashcat_modes.tsv" --ptx-dir "$out/ptx" $sources \
    > "$out/survey-$1.txt" 2>&1 || true # refusals and NVRTC failures are results here
  if [ -f "$out/survey-$1.json.tmp" ]; then mv "$out/survey-$1.json.tmp" "$out/survey-$1.json"; fi
}
running=0
for c in $chunks; do
  [ -f "$out/survey-$c.json" ] && continue
  run_chunk "$c" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
done
wait || true

python3 - "$out" > "$out/summary.txt" <<'EOF'
import glob, json, re, sys, collections
out = sys.argv[1]
histogram = collections.defaultdict(lambda: [0, set()])
outcomes = collections.Counter()
modules = 0
slow = []
for path in sorted(glob.glob(f"{out}/survey-*.json")):
    for m in json.load(open(path)):
        modules += 1
        slow.append((m["load_ms"], m["ptx_bytes"], m["module"]))
        if m["load_error"]:
            histogram["module: " + m["load_error"][:120]][1].add(m["module"])
        for k in m["kernels"]:
            outcomes[(m["origin"], k["outcome"])] += 1
            if k["outcome"] == "refused":
                histogram[k["detail"]][0] += 1
                histogram[k["detail"]][1].add(m["module"])
failed = []
for path in sorted(glob.glob(f"{out}/survey-*.txt")):
    for line in open(path):
        m = re.match(r"source error: (\S+): nvrtc: compiling", line)
        if m:
            failed.append(m.group(1))
print(f"{modules} modules surveyed")
for (origin, outcome), n in sorted(outcomes.items()):
    print(f"  {origin}: {outcome} {n}")
print("refused (kernels, modules: reason):")
for reason, (n, mods) in sorted(histogram.items(), key=lambda x: -x[1][0]):
    print(f"  {n:6} {len(mods):4}  {reason}")
print("slowest loads (parse and decode):")
for ms, size, name in sorted(slow, reverse=True)[:10]:
    print(f"  {ms:8.0f} ms {size / 1e6:6.1f} MB  {name}")
print(f"{len(failed)} hashcat kernel files NVRTC could not compile with hashcat's general options:")
print("  " + " ".join(sorted(failed)))
EOF
cat "$out/summary.txt"
