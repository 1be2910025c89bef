// Every benchmark workload (benches/workloads.cpp) at its tiny size, with ember's output
// checked against PyTorch's on identical inputs (benches/torch_workloads.py). This keeps the
// benchmark honest — a fast wrong answer fails here — and is a broad end-to-end test of the
// op library. Skipped, with the reason, when Python or torch is missing. Nothing is timed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "torch_bridge.hpp"
#include "workloads.hpp"

namespace {

namespace eb = ember::bench;

// One PyTorch process for the whole test binary: starting torch costs seconds.
eb::TorchBridge& torch() {
  static eb::TorchBridge bridge(eb::default_python(), eb::default_torch_script(), 2, false);
  return bridge;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto& w : eb::workloads()) names.push_back(w.name);
  return names;
}

const eb::Workload& find(const std::string& name) {
  for (const auto& w : eb::workloads()) {
    if (w.name == name) return w;
  }
  throw std::runtime_error("no workload " + name);
}

class BenchWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchWorkload, AgreesWithPyTorchAtTinySize) {
  const eb::Workload& w = find(GetParam());
  if (!w.unavailable.empty()) GTEST_SKIP() << w.name << ": " << w.unavailable;
  eb::Case c = w.make(eb::SizeKind::Tiny, ember::Device::cpu());
  c.run();
  const ember::TensorData got = c.output();
  ASSERT_GT(got.num_elements(), 0u);
  if (!torch().available()) GTEST_SKIP() << "PyTorch unavailable: " << torch().why();
  const std::string out =
      "/tmp/ember-test-bench-" + std::to_string(getpid()) + "-" + w.name + ".bin";
  eb::TorchRun tr = torch().run(w.name, c.params, 0, /*warmup_ms=*/0, 1, out);
  std::remove(out.c_str());
  ASSERT_TRUE(tr.output.has_value());
  EXPECT_EQ(eb::compare(got, *tr.output, c.rtol, c.atol), "") << w.name;
}

INSTANTIATE_TEST_SUITE_P(All, BenchWorkload, ::testing::ValuesIn(workload_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The generated inputs are what the Python side regenerates: pin a few values so that a
// change to one side's hash cannot go unnoticed even when PyTorch is absent.
TEST(BenchInputs, HashIsStable) {
  EXPECT_GE(eb::input_value(0, 1), -1.0f);
  EXPECT_LT(eb::input_value(0, 1), 1.0f);
  EXPECT_NE(eb::input_value(0, 1), eb::input_value(1, 1));
  EXPECT_NE(eb::input_value(0, 1), eb::input_value(0, 2));
}

}  // namespace
