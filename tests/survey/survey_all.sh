#!/bin/sh
# The whole survey, by hand (hours: NVRTC compiles every kernel file of hashcat's, about 10 s each
# on a 2-core machine): every PTX module of llama.cpp's prebuilt CUDA backend and every kernel file
# of hashcat's OpenCL folder, each compiled the way hashcat 6.2.6 compiles it (README.md).
#
#   tests/survey/survey_all.sh BUILD OUT [JOBS]
#
# BUILD is the build directory (its tests/survey/hone-emu-survey), OUT a directory for the results:
# survey-N.json and survey-N.txt per job, the PTX NVRTC made (reused by a second run), and
# summary.txt: the refusal histogram over everything, and the kernel files NVRTC could not compile
# with hashcat's general options alone (their modules add options of their own).
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

# Job i takes every jobs-th file; job 0 also the llama.cpp modules.
i=0
while [ "$i" -lt "$jobs" ]; do
  sources=$(awk -v n="$jobs" -v i="$i" 'NR % n == i { print "hashcat:" $0 }' "$out/kernels.txt")
  [ "$i" -eq 0 ] && sources="elf:$llama $sources"
  # shellcheck disable=SC2086 # one argument per source
  "$survey" --json "$out/survey-$i.json" --hashcat-root "$root" \
    --hashcat-modes "$here/hashcat_modes.tsv" --ptx-dir "$out/ptx" $sources \
    > "$out/survey-$i.txt" 2>&1 &
  i=$((i + 1))
done
wait || true

python3 - "$out" "$jobs" > "$out/summary.txt" <<'EOF'
import json, re, sys, collections
out, jobs = sys.argv[1], int(sys.argv[2])
histogram = collections.defaultdict(lambda: [0, set()])
outcomes = collections.Counter()
modules = 0
slow = []
for i in range(jobs):
    for m in json.load(open(f"{out}/survey-{i}.json")):
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
for i in range(jobs):
    for line in open(f"{out}/survey-{i}.txt"):
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
