# hone: entry points for people and CI. `make demo` and `make test` work on a fresh Debian 12
# machine with the CUDA toolkit at /usr/local/cuda: they install what the build needs first.

BUILD        ?= build
FUZZ_BUILD   ?= build-fuzz
JOBS         ?= 2
FUZZ_SECONDS ?= 30
CUDA_HOME    ?= /usr/local/cuda
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Real applications the tests run on the emulated device, installed by `make deps` (never at test
# time): llama.cpp's prebuilt CUDA backend as npm's node-llama-cpp 3.22.1 ships it, with its Linux
# x64 CUDA and CPU binaries, pinned with their sha512 in tests/llama/package-lock.json, and
# llama.cpp's source from the git bundle inside it (tests/llama/deps.sh; Node.js and npm from
# Debian when missing). CMake finds them through HONE_LLAMA_DEPS.
LLAMA_DEPS   ?= .deps/llama

# Debian packages the build and the tests need.
DEB_PACKAGES := cmake ninja-build g++ clang libclang-rt-14-dev pkg-config \
                libgtest-dev libgmock-dev libbenchmark-dev \
                nlohmann-json3-dev libcli11-dev libxxhash-dev libzstd-dev liblz4-dev \
                librocksdb-dev libboost-dev libspdlog-dev libfmt-dev libsystemd-dev \
                libtomlplusplus-dev libcurl4-openssl-dev llvm-14-dev systemd procps \
                libhiredis-dev libsodium-dev redis-server nginx-light prometheus python3-yaml \
                debhelper dpkg-dev help2man lintian systemd-container
# Real applications the tests run (name=version, Debian 12's): installed when that exact version is
# missing, so that every machine tests against the same program.
DEB_PINNED   := hashcat=6.2.6+ds1-1+b1 hashcat-data=6.2.6+ds1-1

.PHONY: all deps configure build test unit fuzz-smoke fuzz-release demo bench clean deb

all: build

# Installs only what is missing, so it is fast when everything is there.
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	for p in $(DEB_PINNED); do \
	  [ "$$(dpkg-query -W -f='$${Status} $${Version}' $${p%%=*} 2>/dev/null)" = "install ok installed $${p#*=}" ] || \
	    missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else \
	  echo "deps: all $(words $(DEB_PACKAGES) $(DEB_PINNED)) packages installed"; \
	fi
	@test -x $(CUDA_HOME)/bin/nvcc || { \
	  echo "deps: no CUDA toolkit at $(CUDA_HOME) (nvcc, ptxas, NVRTC and cuda.h are needed to build;"; \
	  echo "      install the CUDA 12/13 toolkit or pass CUDA_HOME=/path)"; exit 1; }
	@tests/llama/deps.sh $(abspath $(LLAMA_DEPS))

configure: deps
	@mkdir -p $(BUILD) && cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_INSTALL_PREFIX=/usr -DHONE_SYSTEMD_UNIT_DIR=/lib/systemd/system \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME) -DHONE_LLAMA_DEPS=$(abspath $(LLAMA_DEPS)) \
	  > $(BUILD)/configure.log 2>&1 || { cat $(BUILD)/configure.log; exit 1; }

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Every test: the Debian package of this build (for package_test), unit and integration tests
# through CTest, then a bounded fuzzing run.
test: build
	$(MAKE) --no-print-directory deb DEB_BUILD=$(BUILD)
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	$(MAKE) --no-print-directory fuzz-smoke

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Every libFuzzer target (tests/fuzz/README.md), built with clang and ASan/UBSan, each run for
# FUZZ_SECONDS: eight targets, about 4.5 minutes at the default 30 s, plus the clang build.
fuzz-smoke: deps
	@mkdir -p $(FUZZ_BUILD) && cmake -S . -B $(FUZZ_BUILD) -G Ninja -DHONE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME) > $(FUZZ_BUILD)/configure.log 2>&1 || \
	  { cat $(FUZZ_BUILD)/configure.log; exit 1; }
	cmake --build $(FUZZ_BUILD) -j$(JOBS)
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Before a release: every target until it has executed FUZZ_RUNS inputs (10 M), one after another,
# the counts and times in $(FUZZ_BUILD)/fuzz-release.txt for tests/fuzz/README.md. Hours of one core.
FUZZ_RUNS ?= 10000000
fuzz-release: fuzz-smoke
	tests/fuzz/run.sh $(FUZZ_BUILD) 0 $(FUZZ_RUNS) > $(FUZZ_BUILD)/fuzz-release.txt 2>&1; \
	  status=$$?; cat $(FUZZ_BUILD)/fuzz-release.txt; exit $$status

demo: build
	examples/demo.sh $(BUILD)

bench: build
	$(BUILD)/bin/hone-bench-ptx-parse
	$(BUILD)/bin/hone-bench-emu
	LD_LIBRARY_PATH=$(BUILD)/lib/emu $(BUILD)/bin/hone-bench-model-pairs
	$(BUILD)/bin/hone-bench-shim-launch
	$(BUILD)/bin/hone-bench-graph-launch
	$(BUILD)/bin/hone-bench-status
	$(BUILD)/bin/hone-bench-loop
	$(BUILD)/bin/hone-bench-fleet
	$(BUILD)/bin/hone-bench-strategies

# The Debian package: $(DEB_OUT)/hone_<version>_amd64.deb (debian/, docs/install.md). DEB_BUILD is
# the CMake build directory debian/rules builds in: a new one is configured the Debian way
# (dpkg-buildflags, hardening) and builds only what the package ships; one already configured,
# e.g. DEB_BUILD=$(BUILD) after `make build`, is reused with only its install paths set.
DEB_BUILD ?= build-deb
DEB_OUT   ?= $(DEB_BUILD)/deb
HONE_VERSION = $(shell sed -n 's/^project.hone VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
deb: deps
	@c=$$(dpkg-parsechangelog -S Version); if [ "$(HONE_VERSION)" != "$$c" ]; then \
	  echo "deb: CMakeLists.txt says version $(HONE_VERSION), debian/changelog $$c: add a changelog entry (dch -v $(HONE_VERSION))"; \
	  exit 1; \
	fi
	@mkdir -p $(DEB_OUT)
	DEB_BUILD=$(DEB_BUILD) DEB_OUT=$(abspath $(DEB_OUT)) CUDA_HOME=$(CUDA_HOME) \
	  dpkg-buildpackage --build=binary --no-sign -j$(JOBS) \
	  --buildinfo-option=-u$(abspath $(DEB_OUT)) --changes-option=-u$(abspath $(DEB_OUT)) \
	  --buildinfo-file=$(abspath $(DEB_OUT))/hone_$(HONE_VERSION)_amd64.buildinfo \
	  --changes-file=$(abspath $(DEB_OUT))/hone_$(HONE_VERSION)_amd64.changes
	@ls -1 $(abspath $(DEB_OUT))/*.deb

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-deb
