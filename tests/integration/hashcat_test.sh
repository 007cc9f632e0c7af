#!/bin/bash
# hashcat (Debian's 6.2.6, `make deps` installs it) on the emulated device: real mask attacks
# (-a 3) that must crack a known password for MD5 (-m 0), SHA1 (-m 100), NTLM (-m 1000) and
# SHA2-256 (-m 1400), each with hashcat's pure kernels and with its optimized ones (-O). hashcat
# compiles its kernels with NVRTC, links them with cuLinkCreate/AddData/Complete (the emulated
# JIT linker), loads the image with cuModuleLoadDataEx, self-tests each kernel on a known hash
# before the attack (and aborts if that fails) and times its kernels with events. The cracked
# plaintext is read back from --outfile; the exit status must be 0 ("cracked").
#
# usage: hashcat_test.sh <build>/lib/emu <CUDA lib dir (NVRTC)> <scratch dir>
# HONE_HASHCAT names another hashcat binary. Fails (never skips) when hashcat is missing.
set -u

emu_lib=$1
cuda_lib=$2
work=$3
hashcat=${HONE_HASHCAT:-hashcat}

fail() {
  echo "hashcat_test: FAIL: $*" >&2
  exit 1
}

command -v "$hashcat" >/dev/null ||
  fail "no hashcat ('$hashcat'): 'make deps' installs it (hashcat=6.2.6+ds1-1+b1, hashcat-data)"
version=$("$hashcat" --version 2>&1) || fail "'$hashcat --version' failed: $version"
[ -e "$emu_lib/libcuda.so.1" ] || fail "no emulated driver at $emu_lib/libcuda.so.1"
ls "$cuda_lib"/libnvrtc.so* >/dev/null 2>&1 || fail "no NVRTC in $cuda_lib"
command -v python3 >/dev/null || fail "python3 is needed to compute the hashes"

rm -rf "$work"
mkdir -p "$work/home"
# A fresh hashcat home (kernel cache, sessions) and emulator cache for every run of the test.
export HOME=$work/home XDG_CACHE_HOME=$work/home/.cache XDG_DATA_HOME=$work/home/.local/share \
  XDG_CONFIG_HOME=$work/home/.config
export LD_LIBRARY_PATH=$emu_lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HONE_EMU_CACHE_DIR=$work/emu-cache
# The interpreter: compiling hashcat's kernels to host code costs more than running them here (the
# MD5 search kernel took 77 s to compile on a 2-core machine, and a kernel that holds the address
# of a module variable, as hashcat's do, is compiled again by every process). HONE_HASHCAT_EXEC
# picks another path (emu/README.md, "Execution paths").
exec_path=${HONE_HASHCAT_EXEC:-interpret}

# hash <mode> <password>: the hash hashcat's mode <mode> cracks to <password>.
hash() {
  python3 - "$1" "$2" <<'EOF'
import hashlib, struct, sys

def md4(data):
    # RFC 1320; hashlib's md4 is gone from OpenSSL 3's default provider.
    f = lambda x, y, z: (x & y) | (~x & z)
    g = lambda x, y, z: (x & y) | (x & z) | (y & z)
    h = lambda x, y, z: x ^ y ^ z
    rol = lambda v, s: ((v << s) | (v >> (32 - s))) & 0xffffffff
    msg = data + b"\x80" + b"\0" * ((55 - len(data)) % 64) + struct.pack("<Q", 8 * len(data))
    a, b, c, d = 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476
    for off in range(0, len(msg), 64):
        x = struct.unpack("<16I", msg[off:off + 64])
        aa, bb, cc, dd = a, b, c, d
        for i in range(16):
            k, s = i, (3, 7, 11, 19)[i % 4]
            a, b, c, d = d, rol((a + f(b, c, d) + x[k]) & 0xffffffff, s), b, c
        for i in range(16):
            k, s = (i % 4) * 4 + i // 4, (3, 5, 9, 13)[i % 4]
            a, b, c, d = d, rol((a + g(b, c, d) + x[k] + 0x5a827999) & 0xffffffff, s), b, c
        for i in range(16):
            k = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)[i]
            s = (3, 9, 11, 15)[i % 4]
            a, b, c, d = d, rol((a + h(b, c, d) + x[k] + 0x6ed9eba1) & 0xffffffff, s), b, c
        a, b, c, d = [(v + w) & 0xffffffff for v, w in zip((a, b, c, d), (aa, bb, cc, dd))]
    return struct.pack("<4I", a, b, c, d).hex()

mode, password = sys.argv[1], sys.argv[2].encode()
print({"0": lambda: hashlib.md5(password).hexdigest(),
       "100": lambda: hashlib.sha1(password).hexdigest(),
       "1000": lambda: md4(sys.argv[2].encode("utf-16-le")),
       "1400": lambda: hashlib.sha256(password).hexdigest(),
       "md4": lambda: md4(password)}[mode]())
EOF
}

# The MD4 above against RFC 1320's test suite, so that a wrong NTLM hash is never blamed on the
# emulated device.
[ "$(hash md4 "")" = 31d6cfe0d16ae931b73c59d7e0c089c0 ] &&
  [ "$(hash md4 abc)" = a448017aaf21d8525fc10ae87aa6729d ] ||
  fail "the test's own MD4 does not match RFC 1320"

seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

total_start=$(date +%s.%N)
runs=0
# crack <mode> <password> <mask> [-O]
crack() {
  local mode=$1 password=$2 mask=$3 opt=${4:-}
  local name="m$mode${opt:+ $opt}"
  local target hashfile=$work/hash-$mode$opt.txt outfile=$work/out-$mode$opt.txt
  target=$(hash "$mode" "$password") || fail "$name: cannot compute the hash"
  echo "$target" >"$hashfile"
  rm -f "$outfile"
  local start end rc
  start=$(date +%s.%N)
  # -n 1 -u 1 -T 64 (which need --force): hashcat sizes its buffers for 132 SMs x 1024 threads x
  # up to 1024 accel (1.4 GB of host memory, bzero and atinit kernels over 86 M elements, a minute
  # of emulated work each) and autotunes with full-size launches; one work item per thread and 64
  # threads keep a run to its compilation, self-test and the 1000 candidates. --force changes
  # nothing else that matters here: the self-test still runs, and still aborts the run on failure.
  HONE_EMU_EXEC=$exec_path "$hashcat" -m "$mode" -a 3 $opt -d 1 --force -n 1 -u 1 -T 64 \
    --backend-ignore-opencl --potfile-disable --session="hone-test-$mode$opt" \
    --outfile="$outfile" --outfile-format=2 --quiet \
    "$hashfile" "$mask" >"$work/log-$mode$opt.txt" 2>&1
  rc=$?
  end=$(date +%s.%N)
  if [ "$rc" -ne 0 ]; then
    cat "$work/log-$mode$opt.txt" >&2
    fail "$name: hashcat exited $rc (0 is 'cracked'; 1 exhausted, 255 an error such as a failed self-test)"
  fi
  grep -qi "self-test" "$work/log-$mode$opt.txt" && {
    cat "$work/log-$mode$opt.txt" >&2
    fail "$name: hashcat reported a self-test problem"
  }
  [ -f "$outfile" ] || fail "$name: no outfile written"
  local got
  got=$(cat "$outfile")
  [ "$got" = "$password" ] || fail "$name: recovered '$got', expected '$password'"
  printf 'hashcat_test: -m %-4s %-2s cracked %-8s in %5s s\n' "$mode" "$opt" "$password" \
    "$(seconds "$start" "$end")"
  runs=$((runs + 1))
}

# A known prefix and three digits: 1000 candidates, so that a run is its kernels' compilation,
# self-test and autotune, not the search.
for mode in 0 100 1000 1400; do
  crack "$mode" hone583 'hone?d?d?d'
  crack "$mode" hone583 'hone?d?d?d' -O
done
total_end=$(date +%s.%N)
printf 'hashcat_test: %d cracks in %s s\n' "$runs" "$(seconds "$total_start" "$total_end")"
echo "hashcat_test: ok"
