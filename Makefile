# The two commands a user needs: `make demo` and `make test`. Everything else is for
# developers. Every target installs missing Debian packages first (fast when none are).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
FUZZ_DIR  ?= build-fuzz
# make fuzz: how long each harness runs; make fuzz-smoke: how long each fuzzes after its corpus.
FUZZ_SECONDS ?= 120
FUZZ_SMOKE_SECONDS ?= 5
BUILD_TYPE ?= RelWithDebInfo
JOBS      ?= $(shell nproc)
# Tests at once (more is quicker, as the suites mostly wait on the processes they start,
# but timing-bound suites such as the elections' then meet a machine busier than the CPU
# hog they are written to survive).
TEST_JOBS ?= $(JOBS)
CTEST_ARGS ?= --output-on-failure
PREFIX    ?= /usr/local

.PHONY: all build deps test test-unit test-integration test-cluster thread-safety asan fuzz \
	fuzz-smoke fuzz-seeds demo bench bench-store clean install \
	mooncake-conformance fault-matrix

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) > /dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) -- --no-print-directory

# The CTest suites; they replay every fuzz harness's corpus too (fuzz_replay_*), while
# fuzzing proper, with clang and the sanitizers, is fuzz-smoke and fuzz.
test: build
	cd $(BUILD_DIR) && ctest $(CTEST_ARGS) -j $(TEST_JOBS)

# One label of it (tests/README.md): test-unit runs the in-process suites (seconds, no
# program of ours started), test-integration the suites on a real master and daemon,
# test-cluster the ones with several daemons, HA over etcd, Prometheus, the fault matrix.
test-unit: build
	cd $(BUILD_DIR) && ctest $(CTEST_ARGS) -j $(TEST_JOBS) -L unit

test-integration: build
	cd $(BUILD_DIR) && ctest $(CTEST_ARGS) -j $(TEST_JOBS) -L integration

test-cluster: build
	cd $(BUILD_DIR) && ctest $(CTEST_ARGS) -j $(TEST_JOBS) -L cluster

# clang's lock analysis over common/, master/, daemon/, libmc/ and cli/: every lock is an
# absl::Mutex whose guarded state and callers' duties are annotated (ABSL_GUARDED_BY ...;
# docs/architecture.md). One -fsyntax-only parse per file with the build's own flags
# (compile_commands.json; the build makes the generated headers); fails on a lock error.
thread-safety: build
	@python3 scripts/thread_safety.py $(BUILD_DIR) --jobs $(JOBS)

# The fault matrix's long version (docs/durability.md, "The fault matrix"): every cell
# FAULT_MATRIX_RUNS times with FAULT_MATRIX_KEYS keys, the table printed in markdown at the
# end and written as CSV to $(BUILD_DIR)/fault_matrix.csv (a row per run). `make test` runs
# the short version (one run, 1,500 keys). Fails, after the table, when a cell broke its bound.
FAULT_MATRIX_RUNS ?= 3
FAULT_MATRIX_KEYS ?= 6000
fault-matrix: build
	@rm -f $(BUILD_DIR)/fault_matrix.csv
	cd $(BUILD_DIR) && MC_BUILD_DIR=$(abspath $(BUILD_DIR)) FAULT_MATRIX_RUNS=$(FAULT_MATRIX_RUNS) \
	  FAULT_MATRIX_KEYS=$(FAULT_MATRIX_KEYS) FAULT_MATRIX_CSV=$(abspath $(BUILD_DIR))/fault_matrix.csv \
	  tests/cluster/fault_matrix_test

# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	@cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DMC_ASAN=ON > /dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS) -- --no-print-directory
	cd $(ASAN_DIR) && ctest $(CTEST_ARGS) -j $(JOBS)

# The libFuzzer harnesses (docs/fuzzing.md), built with clang in $(FUZZ_DIR): each runs
# for FUZZ_SECONDS; crash inputs land in $(FUZZ_DIR)/artifacts/.
fuzz: deps
	@bash scripts/fuzz.sh --build-dir $(FUZZ_DIR) --seconds $(FUZZ_SECONDS)

fuzz-smoke: deps
	@bash scripts/fuzz.sh --build-dir $(FUZZ_DIR) --seconds $(FUZZ_SMOKE_SECONDS) --smoke

# Rewrites the committed seeds (fuzz/corpus/*/seed-*) from the current encoders.
fuzz-seeds: deps
	@bash scripts/fuzz.sh --build-dir $(FUZZ_DIR) --write-seeds

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

bench: build
	$(BUILD_DIR)/bench/master_bench --spawn_master $(BUILD_DIR)/master/mooncake-master
	$(BUILD_DIR)/bench/store_bench --build_dir $(BUILD_DIR)
	$(BUILD_DIR)/bench/durability_bench --spawn_master $(BUILD_DIR)/master/mooncake-master
	$(BUILD_DIR)/bench/fresh_bench --build_dir $(BUILD_DIR)
	$(BUILD_DIR)/bench/eviction_bench --build_dir $(BUILD_DIR)
	$(BUILD_DIR)/bench/ssd_bench
	$(BUILD_DIR)/bench/failover_bench --build_dir $(BUILD_DIR)

# store_bench's one-daemon table beside a redis-server it starts for the run (4 KiB and
# 1 MiB, about a minute), with issue 18's goal lines; the table also as CSV and PNG
# (bench/plot_store_bench.gnuplot) in $(BUILD_DIR)/bench.
bench-store: build
	$(BUILD_DIR)/bench/store_bench --build_dir $(BUILD_DIR) --sizes 4KB,1MB --max_ops 20000 \
	  --csv $(BUILD_DIR)/bench/store_bench.csv --png $(BUILD_DIR)/bench/store_bench.png

# Upstream Mooncake's own Python store tests, unchanged, against this build
# (docs/mooncake-api.md, "Mooncake's own tests"): MOONCAKE_SRC is a clone of
# kvcache-ai/Mooncake holding commit 3b5a594.
mooncake-conformance: build
	@test -n "$(MOONCAKE_SRC)" || { echo "make mooncake-conformance: set MOONCAKE_SRC to a clone of https://github.com/kvcache-ai/Mooncake"; exit 2; }
	/usr/bin/python3 scripts/mooncake_conformance.py --mooncake-src "$(MOONCAKE_SRC)" --build $(BUILD_DIR)

# Installs under PREFIX (binaries, library, header, pkg-config and CMake files, the Python
# module, the Java binding, man pages, systemd units, sysusers, example configs, docs);
# DESTDIR is put in front of every path, for packaging (docs/operations.md, "Install").
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
