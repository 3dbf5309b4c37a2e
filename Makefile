# mpcaffe — `make demo` and `make test` set up a fresh machine, build, and run.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
MPCAFFE := $(BUILD)/bin/mpcaffe
# The shared models and papers: ../shared beside the checkout unless MPCAFFE_SHARED_DIR names
# another folder (a clone made elsewhere). CMake records it (MPCAFFE_SHARED_DIR) for the tests;
# the demo and the scripts read it from the environment.
MPCAFFE_SHARED_DIR ?= $(abspath $(CURDIR)/../shared)
export MPCAFFE_SHARED_DIR

.PHONY: all deps configure build test demo clean fuzz test-asan test-oclgrind bench

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DMPCAFFE_SHARED_DIR=$(MPCAFFE_SHARED_DIR)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Every C++ suite (one CTest entry per folder); Python tests join once the package exists.
# The device-dependent suites run once per device (entries <suite>@pocl, @intel, @gpu; an absent
# device's entries are skipped, and scripts/ctest-devices.sh says why and where each one ran).
# Hermetic: every run starts with its own empty kernel cache and tuning table
# ($(BUILD)/test-cache, shared by the suites of this run for speed), never the user's.
# Two CTest jobs: a suite on one device beside a suite on another (tests/CMakeLists.txt).
TEST_CACHE := $(abspath $(BUILD))/test-cache/kernels.sqlite
test: build
	rm -rf $(dir $(TEST_CACHE)) && mkdir -p $(dir $(TEST_CACHE))
	cd $(BUILD) && MPCAFFE_CACHE=$(TEST_CACHE) ctest --output-on-failure --timeout 2400 -j2; status=$$?; \
	  cd $(CURDIR) && scripts/ctest-devices.sh $(BUILD); exit $$status
	MPCAFFE_CACHE=$(TEST_CACHE) scripts/python-test.sh

# The main job on the default device (MPCAFFE_DEVICE=<index> chooses another).
demo: build
	MPCAFFE=$(MPCAFFE) scripts/demo.sh

# The network benchmark (AlexNet, batch 1 and 16, every dtype, ONNX Runtime and CLBlast peers):
# regenerates docs/BENCHMARKS.md's net tables and docs/img/bench/*.png (see scripts/bench.sh).
bench: build
	MPCAFFE=$(MPCAFFE) scripts/bench.sh

# libFuzzer targets (model-file parsers, kernel-cache reader), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: build
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# The C++ suites under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan, -O1 so the
# kernel references stay fast enough), one suite at a time; LeakSanitizer ignores only what PoCL
# keeps for the life of the process (tests/sanitizers/lsan.supp). ASAN_SUITES=<regex> runs some.
ASAN_SUITES ?= .
test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
	  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	  ctest --output-on-failure --timeout 3000 -R '$(ASAN_SUITES)'

# Every generated kernel family in every dtype on small shapes under Oclgrind (data races,
# out-of-bounds accesses, barrier divergence, API errors): fails on any report or failed test
# (scripts/oclgrind.sh; OCLGRIND_FAMILIES=<regex> runs some).
test-oclgrind: build
	BUILD=$(BUILD) scripts/oclgrind.sh

clean:
	rm -rf $(BUILD)
