#!/bin/sh
# Install llama.cpp's prebuilt CUDA backend (node-llama-cpp 3.22.1 and its Linux x64 CUDA and CPU
# binaries, from the npm registry) and llama.cpp's source (the git bundle inside node-llama-cpp)
# into DEST, for the tests in tests/llama/. `make deps` runs it; nothing is downloaded at test time.
#
#   tests/llama/deps.sh DEST
#
# Pinned: package-lock.json (beside this script) records every package's version and sha512
# (`npm view <pkg>@<version> dist.integrity`), and `npm ci` refuses a tarball whose hash differs.
# Installs only when DEST does not already hold exactly this lock's packages, so a second run
# returns at once. Node.js and npm come from Debian (apt) when missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: deps.sh DEST}
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "deps: installing nodejs npm (Debian)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm
fi

# node-llama-cpp 3.22.1 declares Node.js 20 or newer (`engines` in its package.json); Debian 12's
# own nodejs is 18 (this machine and CI have Node.js 20 from the nodesource package). Only
# llama_run_test needs node itself (test-backend-ops and the survey use the prebuilt libraries directly): it
# fails saying so. Warn here, where it can be fixed.
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then
  echo "deps: warning: node $(node --version 2>/dev/null) is older than 20: node-llama-cpp 3.22.1 cannot run on it," >&2
  echo "      so llama_run_test will fail; install Node.js 20 or newer (Debian 12's nodejs is 18)" >&2
fi

stamp="$dest/.installed"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$dest/node_modules/node-llama-cpp" ] &&
   [ -d "$dest/llama.cpp/.git" ]; then
  echo "deps: llama.cpp prebuilt (node-llama-cpp 3.22.1) installed in $dest"
  exit 0
fi

echo "deps: installing node-llama-cpp 3.22.1 and its Linux x64 CUDA and CPU binaries into $dest"
mkdir -p "$dest"
rm -f "$stamp"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
# `npm install` with the lock in place installs exactly the locked versions and checks each
# tarball against the lock's sha512. (`npm ci` would refuse this lock: node-llama-cpp names
# @node-llama-cpp/linux-riscv64@3.22.1 as an optional dependency, a version never published, so
# the lock cannot list it.) The lock must come out unchanged: anything npm had to resolve anew
# would be unpinned. --omit=optional: node-llama-cpp's other platforms' binaries (its
# optionalDependencies) are not wanted; the two Linux x64 ones are direct dependencies here.
# --ignore-scripts: its postinstall would look for binaries to download or build.
rm -rf "$dest/node_modules"
(cd "$dest" && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
if ! cmp -s "$here/package-lock.json" "$dest/package-lock.json"; then
  echo "deps: npm changed package-lock.json while installing: the pins in $here are stale" >&2
  exit 1
fi

# llama.cpp's own source at the prebuilt's release: headers and tests/test-backend-ops.cpp.
rm -rf "$dest/llama.cpp"
git -c advice.detachedHead=false clone --quiet "$dest/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$dest/llama.cpp"
echo "$want" > "$stamp"
echo "deps: installed in $dest"
