# jag — the commands people type. Each installs what it needs first
# (scripts/setup.sh), then builds with CMake.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=

.PHONY: all build setup test test-c test-python test-torch sanitize ubsan tsan memcheck fuzz demo bench bench-sweep install clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# ctest runs JOBS programs at once, each with an OpenMP thread per core:
# libgomp's workers, spinning while they wait, then hold the cores the other
# program needs. Passive waiting changes no result and halves the suite's
# time (ctest of a Release build on 2 cores: 57 -> 25 s). LLVM's libomp
# (the clang builds: ubsan, tsan) showed no difference (54 and 58 s).
TEST_ENV = OMP_WAIT_POLICY=passive

# The test suite: every C test under ctest, then the Python tests.
test: build
	@cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS)
	@$(MAKE) test-python

# --- Python package (python/, tests/python/) -------------------------------
# Makes .venv (scripts/python_env.sh: numpy, pytest, scikit-build-core; a .pth
# puts python/ on .venv's path), builds the extension
# jag._C in place (python/jag/) against $(BUILD)/libjag.so with an rpath to
# it (python/setup.py), then runs pytest on tests/python.
test-python: build
	@scripts/python_env.sh >/dev/null
	@cd python && JAG_BUILD_DIR=$(abspath $(BUILD)) ../.venv/bin/python setup.py -q build_ext --inplace --force >/dev/null
	@JAG_BUILD_DIR=$(abspath $(BUILD)) .venv/bin/python -m pytest tests/python -q
# --- end Python package ----------------------------------------------------

# jag <-> torch.nested interop (tests/python/test_torch_interop.py; skipped by
# make test, whose .venv has no torch) in .venv-bench, where
# scripts/bench_setup.sh --torch installs torch from PyPI (about 5 GB, once),
# with pytest added.
test-torch: build
	@scripts/python_env.sh >/dev/null
	@cd python && JAG_BUILD_DIR=$(abspath $(BUILD)) ../.venv/bin/python setup.py -q build_ext --inplace --force >/dev/null
	@py=$$(scripts/bench_setup.sh --torch) || { echo "test-torch: $$py"; exit 1; }; \
		$$py -c 'import pytest' 2>/dev/null || $$py -m pip install -q --disable-pip-version-check pytest; \
		JAG_BUILD_DIR=$(abspath $(BUILD)) $$py -m pytest tests/python/test_torch_interop.py -q

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize: setup
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DJAG_SANITIZE=ON -DJAG_USE_MPI=OFF -DJAG_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && $(TEST_ENV) ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The suite under clang's UndefinedBehaviorSanitizer alone (build-ubsan/):
# checks gcc's lacks (float-to-int overflow, arithmetic on a null pointer).
ubsan: setup
	@JAG_SETUP_EXTRA="clang libclang-rt-dev libomp-dev" scripts/setup.sh
	@cmake -S . -B build-ubsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-O1 -g" \
		-DJAG_UBSAN=ON -DJAG_USE_MPI=OFF -DJAG_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-ubsan -j $(JOBS)
	@cd build-ubsan && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The suite under ThreadSanitizer (clang, Debug at -O1, build-tsan/): every
# test program (tests/test_threads.c runs jag from 8 threads at once) and
# example stops at its first data race. jag's OpenMP loops run on LLVM's
# libomp with its libarcher tool, so TSan understands OpenMP too; see
# scripts/tsan_run.sh for the options and docs/FUZZING.md.
tsan: setup
	@JAG_SETUP_EXTRA="clang libclang-rt-dev libomp-dev" scripts/setup.sh
	@cmake -S . -B build-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-O1 -g" \
		-DJAG_TSAN=ON -DJAG_USE_MPI=OFF -DJAG_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@JOBS=$(JOBS) scripts/tsan_run.sh build-tsan

# The suite under valgrind: zero leaks, zero errors.
memcheck: setup
	@cmake -S . -B build-memcheck -DCMAKE_BUILD_TYPE=Debug -DJAG_PORTABLE=ON -DJAG_USE_MPI=OFF -DJAG_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-memcheck -j $(JOBS)
	@scripts/memcheck.sh build-memcheck

# libFuzzer targets (fuzz/, clang with ASan + UBSan, build-fuzz/), each run
# for FUZZ_SECONDS on its seed corpus fuzz/corpus/<target>/ (new inputs go
# to build-fuzz/corpus/, crashes to build-fuzz/artifacts/). See docs/FUZZING.md.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= fuzz_load fuzz_nested fuzz_ops fuzz_program
fuzz: setup
	@scripts/fuzz_setup.sh
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-O1 -g" \
		-DJAG_FUZZ=ON -DJAG_USE_MPI=OFF -DJAG_BUILD_TESTS=OFF -DJAG_BUILD_BENCH=OFF -DJAG_BUILD_EXAMPLES=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	@scripts/fuzz_run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: build
	@$(BUILD)/examples/demo
	@echo
	@echo "5. training a small transformer on the same ragged text, nested end to end"
	@$(BUILD)/examples/train_ragged --steps 100 --compare 10 --repeats 3 --print-trace

# Benchmarks on the Release build: bench/results/<date>-<host>.json, then
# bench/report.md and its plots (matplotlib in .venv, see scripts/bench_setup.sh).
# BENCH_ARGS=--quick: under two minutes; BENCH_ARGS="--threads N": OpenMP threads.
# TORCH=1: also jag against PyTorch on the same data (bench/bench_torch.py, the
# report's summary); installs torch from PyPI into .venv-bench once (about 5 GB).
TORCH ?=
bench: build
	@scripts/bench.sh $(BUILD) $(BENCH_ARGS) $(if $(filter 1,$(TORCH)),--torch)

# jag against torch op by op on dense float32 tensors, forward and forward +
# backward (bench/bench_sweep.py; SWEEP_ARGS: --quick, --only=NAME, --json),
# in .venv-bench with torch (scripts/bench_setup.sh --torch).
bench-sweep: build
	@scripts/python_env.sh >/dev/null
	@cd python && JAG_BUILD_DIR=$(abspath $(BUILD)) ../.venv/bin/python setup.py -q build_ext --inplace --force >/dev/null
	@py=$$(scripts/bench_setup.sh --torch) || { echo "bench-sweep: $$py"; exit 1; }; \
		PYTHONPATH=python $$py bench/bench_sweep.py $(SWEEP_ARGS)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-ubsan build-tsan build-memcheck build-fuzz
