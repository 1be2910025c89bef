# ember's entry points. Each installs what is missing, configures, builds and runs.
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= 2
CMAKE_FLAGS ?=
# e.g. make bench BENCH_ARGS='--filter matmul,softmax --size full --json bench.json'
BENCH_ARGS ?=
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: bench-onnx all deps configure build demo test test-asan test-tsan test-vulkan fuzz fuzz-record bench format clean ops-doc fuzz-onnx onnx-nodes

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# DEMO_ARGS='--epochs 8 --device cuda' passes flags to the training program.
DEMO_ARGS ?=
demo: build
	$(BUILD)/examples/quickstart
	$(BUILD)/examples/fashion_mnist $(DEMO_ARGS)
	$(BUILD)/examples/fashion_mnist_infer

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@if command -v arm-none-eabi-g++ >/dev/null && command -v qemu-system-arm >/dev/null; then \
	  $(MAKE) --no-print-directory embedded-run; \
	else \
	  echo "make test: SKIPPED the firmware tests (Cortex-M4 on QEMU): arm-none-eabi-g++ or" \
	       "qemu-system-arm is not installed; make embedded-test installs them and runs them"; \
	fi

# The firmware tests (docs/embedded.md): ember's embedded build for a Cortex-M4F
# (arm-none-eabi, -fno-exceptions -fno-rtti), each image run on QEMU's mps2-an386 under ctest.
# embedded-test installs the toolchain and QEMU first; `make test` runs them where present.
EMBEDDED_BUILD ?= build-embedded
.PHONY: embedded-test embedded-run embedded-host-tool
embedded-test:
	@bash scripts/install-embedded-deps.sh
	@$(MAKE) --no-print-directory configure
	@$(MAKE) --no-print-directory embedded-run

# The model firmware links the host's predictions, which the host build's fashion_small
# computes, and firmware_cases the harness's sample, which its test_conformance exports
# (embedded/CMakeLists.txt's EMBER_HOST_BUILD): they are built first, when a host build is
# configured.
embedded-host-tool:
	@if [ -f $(BUILD)/build.ninja ]; then cmake --build $(BUILD) -j $(JOBS) --target fashion_small test_conformance; fi

$(EMBEDDED_BUILD)/build.ninja: | embedded-host-tool
	cmake -S embedded -B $(EMBEDDED_BUILD) -G Ninja --toolchain $(CURDIR)/cmake/arm-none-eabi.cmake \
	  -DEMBER_HOST_BUILD=$(abspath $(BUILD))

embedded-run: embedded-host-tool $(EMBEDDED_BUILD)/build.ninja
	cmake --build $(EMBEDDED_BUILD) -j $(JOBS)
	cd $(EMBEDDED_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

# CI (.ci/run) runs `make test`, `make test-asan` and `make test-tsan` in that order on 2 cores;
# docs/testing.md has what each runs and the measured times (cold Release build ~1,800 s CPU,
# its ctest ~310 s CPU with the conformance cases in 6 shards; firmware build 210 s CPU cold).
# The sanitizer trees compile at -O1 with line tables only (-g1): about half
# the CPU of RelWithDebInfo's -O2 -g a file, a fraction of the link, and every frame of a
# report still named by file and line. (The Cpu kernels keep their -O3.) Neither tree builds
# what it does not run: no examples, no Cuda or Vulkan backend, no bench workloads.
SANITIZE_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -g1 -DNDEBUG' \
  -DEMBER_CUDA=OFF -DEMBER_VULKAN=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_TEST_BENCH_WORKLOADS=OFF

# Every unit suite under AddressSanitizer and UndefinedBehaviorSanitizer in full, and a
# deterministic sample of the long sweeps: 1 of every ASAN_SAMPLE conformance cases (gtest
# shards, spread over every op, dtype and device), the API fuzzer with a smaller budget.
# Left out to keep CI short: the Cuda backend (its tests need a GPU; its NVRTC compile test
# runs in `make test`), the Vulkan backend (its tests run lavapipe, an uninstrumented LLVM JIT;
# `make test` runs them), the examples, the PyTorch-driven workload check, the per-ISA reruns
# of the conformance cases and the package install check. The Cpu backend's own suite does
# run under every ISA this CPU has (cpu_isa_*_backend, ~40 s): a kernel's vector width decides
# where it reads, and a read one element past an image was found only under
# EMBER_CPU_ISA=scalar. ASAN_SAMPLE=1 runs every case.
ASAN_SAMPLE ?= 4
ASAN_EXCLUDE ?= cpu_isa_.*_conformance|package_install
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja $(SANITIZE_CMAKE_FLAGS) -DEMBER_SANITIZE=ON \
	  -DEMBER_LONG_TEST_SAMPLE=$(ASAN_SAMPLE) $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800 -E '$(ASAN_EXCLUDE)'

# The threading tests under ThreadSanitizer: only their binaries are built (the library
# with them), to keep CI short. The fusion differential's programs include the two-thread
# ones (one in five: a second thread records half a program, this one the rest over values
# pending in the other's stream, while the other runs the program again), so the Fusion
# decorator's cross-thread flushes run under TSan too.
TSAN_TESTS ?= test_concurrent_backward test_grad test_conformance
TSAN_FUSION_PROGRAMS ?= 2000
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja $(SANITIZE_CMAKE_FLAGS) -DEMBER_SANITIZE_THREAD=ON $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(TSAN_BUILD)/tests/test_concurrent_backward
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/test_grad --gtest_filter='*Threads*'
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(TSAN_BUILD)/tests/test_conformance \
	  --mode fusion --device cpu --seed 117000001 --programs $(TSAN_FUSION_PROGRAMS)

# Every conformance case in every dtype on the Vulkan devices and on vulkan:0+fusion (CI's
# vulkan_conformance runs f32, i32 and bool, vulkan_fusion_conformance f32), and 2000
# programs of the fusion differential tester; on lavapipe where no GPU driver is installed.
test-vulkan: build
	$(BUILD)/tests/test_vulkan
	$(BUILD)/tests/test_conformance --gtest_filter='Conformance_vulkan*'
	$(BUILD)/tests/test_conformance --mode fusion --device vulkan --programs 2000

# The API fuzzer beyond CI's fixed budget: FUZZ_SEEDS x FUZZ_CALLS calls.
FUZZ_SEEDS ?= 1 2 3 4 5 6 7 8
FUZZ_CALLS ?= 200000
fuzz: build
	@for s in $(FUZZ_SEEDS); do $(BUILD)/tests/ember_fuzz --seed $$s --calls $(FUZZ_CALLS) || exit 1; done

bench: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHES=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	$(BUILD)/benches/ember-bench $(BENCH_ARGS)

# libFuzzer on the record readers, seeded with the committed fixtures (FUZZ_SECONDS each run).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
fuzz-record: deps
	CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON \
	  -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_record
	mkdir -p $(FUZZ_BUILD)/corpus
	cp tests/record/fixtures/v*/*.ember tests/record/fixtures/torch/* $(FUZZ_BUILD)/corpus/
	$(FUZZ_BUILD)/fuzz_record -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
	  $(FUZZ_BUILD)/corpus

# libFuzzer on the ONNX parser and loader, seeded with the committed models and a sample of
# the node tests' models (FUZZ_SECONDS).
fuzz-onnx: deps
	CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON \
	  -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_onnx
	mkdir -p $(FUZZ_BUILD)/corpus-onnx
	cp tests/onnx/models/*.onnx tests/onnx/fuzz_findings/*.onnx $(FUZZ_BUILD)/corpus-onnx/
	for d in /usr/share/libonnx-testdata/data/node/test_[a-c]*; do cp $$d/model.onnx $(FUZZ_BUILD)/corpus-onnx/$$(basename $$d).onnx; done
	$(FUZZ_BUILD)/fuzz_onnx -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
	  $(FUZZ_BUILD)/corpus-onnx

# Imported ONNX models on ember beside onnxruntime (the bench venv's, scripts/bench-venv.sh):
# ResNet-18 and MobileNetV2 at 224x224, the LSTM, the Transformer encoder, the small CNN.
bench-onnx: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHES=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target bench_onnx
	/usr/bin/python3 tests/onnx/export_real_models.py --out $(BUILD)/onnx-bench-models --size 224
	$(BUILD)/benches/bench_onnx --models $(BUILD)/onnx-bench-models --models tests/onnx/models \
	  --python .venv/bin/python $(BENCH_ARGS)

# Every ONNX node test through the loader, with the report docs/onnx.md is made from.
onnx-nodes: build
	$(BUILD)/tests/onnx_node_tests --report $(BUILD)/onnx-node-tests.md

format:
	@find include src tests benches examples tools -name '*.hpp' -o -name '*.cpp' -o -name '*.inc' 2>/dev/null \
	  | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(EMBEDDED_BUILD)

# Regenerates the op table of docs/ir.md from the IR (test_ir fails while it is stale).
.PHONY: ir-doc
ir-doc: build
	EMBER_WRITE_DOCS=1 $(BUILD)/tests/test_ir --gtest_filter=IrDoc.*

# Regenerates docs/autodiff.md's rule table from the derivative table's formulas.
.PHONY: autodiff-doc
autodiff-doc: build
	EMBER_WRITE_DOCS=1 $(BUILD)/tests/test_grad --gtest_filter=AutodiffDoc.*

# Regenerates docs/ops.md (function x backend x dtype) from the conformance cases.
.PHONY: ops-doc
ops-doc: build
	$(BUILD)/tests/test_conformance --mode support --out docs/ops.md
