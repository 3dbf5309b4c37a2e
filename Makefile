# mpcaffe — `make demo` and `make test` set up a fresh machine, build, and run.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
MPCAFFE := $(BUILD)/bin/mpcaffe

.PHONY: all deps configure build test demo clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Every C++ suite (one CTest entry per folder); Python tests join once the package exists.
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 1500

# The main job on the default device (MPCAFFE_DEVICE=<index> chooses another).
demo: build
	$(MPCAFFE) devices
	$(MPCAFFE) selfcheck

clean:
	rm -rf $(BUILD)
