# ember's entry points. Each installs what is missing, configures, builds and runs.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= 2
CMAKE_FLAGS ?=
# e.g. make bench BENCH_ARGS='--filter matmul,softmax --size full --json bench.json'
BENCH_ARGS ?=
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all deps configure build demo test test-asan bench format clean ops-doc fuzz

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/examples/quickstart
	@if [ -x $(BUILD)/examples/fashion_mnist ]; then $(BUILD)/examples/fashion_mnist; fi

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800

bench: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHES=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	$(BUILD)/benches/ember-bench $(BENCH_ARGS)

# libFuzzer on the record readers, seeded with the committed fixtures (FUZZ_SECONDS each run).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
fuzz: deps
	CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON \
	  -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_record
	mkdir -p $(FUZZ_BUILD)/corpus
	cp tests/record/fixtures/v*/*.ember tests/record/fixtures/torch/* $(FUZZ_BUILD)/corpus/
	$(FUZZ_BUILD)/fuzz_record -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
	  $(FUZZ_BUILD)/corpus

format:
	@find include src tests benches examples tools -name '*.hpp' -o -name '*.cpp' -o -name '*.inc' 2>/dev/null \
	  | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

# Regenerates docs/ops.md (function x backend x dtype) from the conformance cases.
.PHONY: ops-doc
ops-doc: build
	$(BUILD)/tests/test_conformance --mode support --out docs/ops.md
