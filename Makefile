# mpcaffe — `make demo` and `make test` set up a fresh machine, build, and run.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
MPCAFFE := $(BUILD)/bin/mpcaffe
# The shared models and papers: ../shared beside the checkout unless MPCAFFE_SHARED_DIR names
# another folder (a clone made elsewhere). CMake records it (MPCAFFE_SHARED_DIR) for the tests;
# the demo and the scripts read it from the environment.
# A clone made elsewhere on this workplace's machines (a temporary folder) finds them in
# /work/shared, as .ci/run does.
MPCAFFE_SHARED_DIR ?= $(if $(wildcard $(CURDIR)/../shared/models),$(abspath $(CURDIR)/../shared),$\
  $(if $(wildcard /work/shared/models),/work/shared,$(abspath $(CURDIR)/../shared)))
export MPCAFFE_SHARED_DIR

.PHONY: all deps configure build test test-sweep demo clean fuzz test-asan test-oclgrind bench

all: build

# deps keeps its own wall time in $(BUILD)/install.seconds (scripts/test-budget.py reports it: on a
# new machine, the bare install; elsewhere, the check that everything is present).
deps:
	@start=$$(date +%s.%N); scripts/install-deps.sh && mkdir -p $(BUILD) && \
	  awk -v a=$$start -v b=$$(date +%s.%N) 'BEGIN { print b - a }' > $(BUILD)/install.seconds

# The Python extension is part of the build (pybind11 and the interpreter python3 runs), so
# `make test` installs the package from this tree instead of compiling the libraries again.
PYTHON ?= python3
configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DMPCAFFE_SHARED_DIR=$(MPCAFFE_SHARED_DIR) \
	  -DMPCAFFE_BUILD_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PYTHON)) \
	  -Dpybind11_DIR=$$($(PYTHON) -m pybind11 --cmakedir)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Every C++ suite (one CTest entry per folder), then the Python suite against the installed
# package. The device-dependent suites run once per device (entries <suite>@pocl, @intel,
# @rusticl, @gpu; an absent device's entries are skipped, and scripts/ctest-devices.sh says why
# and where each one ran), except the entries labelled `sweep` (tests/CMakeLists.txt
# MPCAFFE_TEST_SUITES_<device>: rusticl's slow suites), which make test-sweep runs. Cold and
# hermetic, as on a new machine: every run starts with an empty kernel cache and tuning table of
# its own and empty driver caches (PoCL's, Mesa's, CUDA's JIT), all under $(BUILD)/test-cache,
# never the user's. It ends with scripts/test-budget.py's table (time, programs compiled, cache
# hits per entry), which fails when an entry compiled a program twice.
# Two CTest jobs: a suite on one device beside a suite on another (tests/CMakeLists.txt).
TEST_CACHE_DIR := $(abspath $(BUILD))/test-cache
TEST_ENV := MPCAFFE_CACHE=$(TEST_CACHE_DIR)/kernels.sqlite POCL_CACHE_DIR=$(TEST_CACHE_DIR)/pocl \
  MESA_SHADER_CACHE_DIR=$(TEST_CACHE_DIR)/mesa CUDA_CACHE_PATH=$(TEST_CACHE_DIR)/cuda
# When make started (before configure and build): the whole run's time in test-budget.py's report.
MAKE_STARTED := $(shell date +%s.%N)
test: build
	rm -rf $(TEST_CACHE_DIR) && mkdir -p $(TEST_CACHE_DIR)/compiles $(TEST_CACHE_DIR)/reports
	start=$$(date +%s.%N); \
	  cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure --timeout 4000 -j2 -LE sweep; c=$$?; \
	  awk -v a=$$start -v b=$$(date +%s.%N) 'BEGIN { print b - a }' \
	    > $(TEST_CACHE_DIR)/ctest.seconds; \
	  cd $(CURDIR) && scripts/ctest-devices.sh $(BUILD); \
	  start=$$(date +%s.%N); \
	  $(TEST_ENV) MPCAFFE_COMPILE_LOG=$(TEST_CACHE_DIR)/compiles/python.log \
	    MPCAFFE_PYTHON_BUILD_DIR=$(BUILD) PYTHON=$(PYTHON) scripts/python-test.sh; \
	  p=$$?; awk -v a=$$start -v b=$$(date +%s.%N) 'BEGIN { print b - a }' \
	    > $(TEST_CACHE_DIR)/python.seconds; \
	  awk -v a=$(MAKE_STARTED) -v b=$$(date +%s.%N) 'BEGIN { print b - a }' \
	    > $(TEST_CACHE_DIR)/make.seconds; \
	  scripts/test-budget.py $(BUILD); b=$$?; \
	  echo "make test: C++ suites $$([ $$c = 0 ] && echo passed || echo FAILED)," \
	    "Python suite $$([ $$p = 0 ] && echo passed || echo FAILED)," \
	    "budget $$([ $$b = 0 ] && echo kept || echo BROKEN)"; \
	  [ $$c = 0 ] && [ $$p = 0 ] && [ $$b = 0 ]

# The exhaustive sweeps, not part of `make test`: the device suites (with those make test leaves
# out, label `sweep`), the CUDA suite and the Oclgrind sweep with MPCAFFE_TEST_SWEEP=1, where
# every test over a family's configurations compiles all of them (every tuner candidate, every
# shape × option of its own lists) instead of the covering sample `make test` compiles
# (tests/testing/sweep.h). Cold, like `make test`; most of an hour on a 2-core machine.
SWEEP_ENTRIES := ^(device|codegen|quant|libdnn|layers|net)@|^cuda$$|^oclgrind$$
test-sweep: build
	rm -rf $(TEST_CACHE_DIR) && mkdir -p $(TEST_CACHE_DIR)/compiles $(TEST_CACHE_DIR)/reports
	cd $(BUILD) && $(TEST_ENV) MPCAFFE_TEST_SWEEP=1 ctest --output-on-failure --timeout 14400 -j2 \
	  -R '$(SWEEP_ENTRIES)'; c=$$?; \
	  cd $(CURDIR) && scripts/ctest-devices.sh $(BUILD); scripts/test-budget.py $(BUILD); b=$$?; \
	  [ $$c = 0 ] && [ $$b = 0 ]

# The main job on the default device (MPCAFFE_DEVICE=<index> chooses another).
demo: build
	MPCAFFE=$(MPCAFFE) scripts/demo.sh

# The benchmarks: regenerates every table of docs/BENCHMARKS.md and docs/img/bench/*.png (the
# steps are listed in scripts/bench.sh; BENCH_STEPS picks some).
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
# out-of-bounds accesses, barrier divergence, API errors), every candidate configuration (the
# CTest entry `oclgrind` of `make test` runs a covering sample of them): fails on any report or
# failed test (scripts/oclgrind.sh; OCLGRIND_FAMILIES=<regex> runs some).
test-oclgrind: build
	BUILD=$(BUILD) MPCAFFE_TEST_SWEEP=1 scripts/oclgrind.sh

clean:
	rm -rf $(BUILD)
