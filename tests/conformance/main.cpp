// Entry point of test_conformance. Without --mode it is a gtest binary: one test per
// (device, function, dtype), registered at start-up from the case table and
// Device::available(), so a backend that registers itself is tested with no new test code.
// With --mode it is a tool:
//   --mode support [--out docs/ops.md]  runs every case and writes the support table
//   --mode perf [--filter NAME]         times each function alone at a larger size
//   --mode grad [--filter NAME]         gradients on every autodiff stack vs finite differences
//   --mode embedded --out FILE          the firmware tests' sample
//   (conformance/embedded_sample.hpp)
//   --mode test [--filter NAME]         runs the cases and prints one line per result
//   --mode fusion [--seed S] [--programs N] [--device D] [--one-thread]  the differential
//                                       tester of the Fusion decorator, on every device or
//                                       on D ("cuda:0", "vulkan"); --one-thread: no two-thread
//                                       programs
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "conformance/harness.hpp"
#include "ember/ir/scalar_table.hpp"

namespace conformance {
namespace {

std::string test_name(const std::string& s) {
  std::string out;
  for (char ch : s) out += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  return out;
}

class CaseTest : public testing::Test {
 public:
  CaseTest(const Case* c, Device dev, DType dt) : c_(c), dev_(std::move(dev)), dt_(dt) {}
  void TestBody() override {
    const Result r = run_case(*c_, dev_, dt_);
    switch (r.outcome) {
      case Outcome::Pass:
        break;
      case Outcome::Fail:
        ADD_FAILURE() << r.message;
        break;
      case Outcome::Unsupported:
        GTEST_SKIP() << "unsupported: " << r.message;
      case Outcome::KnownFailure:
        GTEST_SKIP() << "known failure: " << r.message;
    }
  }

 private:
  const Case* c_;
  Device dev_;
  DType dt_;
};

void register_tests() {
  for (const Device& dev : conformance_devices()) {
    for (const Case& c : all_cases()) {
      for (DType dt : c.dtypes) {
        const std::string suite = "Conformance_" + test_name(dev.name());
        const std::string tname = test_name(c.fn) + "_" + ember::name(dt);
        testing::RegisterTest(
            suite.c_str(), tname.c_str(), nullptr, nullptr, __FILE__, __LINE__,
            [c = &c, dev, dt]() -> testing::Test* { return new CaseTest(c, dev, dt); });
      }
    }
  }
}

// Grad mode in the suite: one test per device, over its autodiff stacks (the finite
// differences, on the plain Cpu, computed once for all of them), every case with f64 trials.
class GradStackTest : public testing::Test {
 public:
  explicit GradStackTest(std::vector<Device> stacks) : stacks_(std::move(stacks)) {}
  void TestBody() override {
    std::vector<std::size_t> checked(stacks_.size(), 0);
    for (const Case& c : all_cases()) {
      const std::vector<GradResult> rs = run_grad_case(c, stacks_);
      for (std::size_t s = 0; s < rs.size(); ++s) {
        checked[s] += rs[s].checked;
        if (rs[s].outcome == Outcome::Fail) ADD_FAILURE() << rs[s].message;
      }
    }
    for (std::size_t s = 0; s < stacks_.size(); ++s) {
      EXPECT_GT(checked[s], 0u) << "no gradient element was compared on " << stacks_[s].name();
    }
  }

 private:
  std::vector<Device> stacks_;
};

void register_grad_tests() {
  for (const GradStacks& g : grad_stacks()) {
    testing::RegisterTest(
        "ConformanceGrad", test_name(g.device).c_str(), nullptr, nullptr, __FILE__, __LINE__,
        [stacks = g.stacks]() -> testing::Test* { return new GradStackTest(stacks); });
  }
}

// Every IR op is run by some case (on the Cpu, in each case's first dtype): an op added
// without a harness case fails here.
TEST(ConformanceCoverage, EveryIrOpHasACase) {
  const Device cpu = Device::cpu();
  std::uint64_t kinds = 0;
  for (const Case& c : all_cases()) {
    if (!c.dtypes.empty()) kinds |= run_case(c, cpu, c.dtypes.front()).op_kinds;
  }
  for (std::size_t k = 0; k < ember::ir::kNumOps; ++k) {
    EXPECT_TRUE(kinds >> k & 1) << "no conformance case runs ir::"
                                << ember::ir::name(static_cast<ember::ir::OpKind>(k));
  }
}

bool matches(const Case& c, const std::string& filter) {
  return filter.empty() || c.fn == filter || c.family == filter ||
         (filter.back() == '*' && c.fn.rfind(filter.substr(0, filter.size() - 1), 0) == 0);
}

const char* mark(Outcome o) {
  switch (o) {
    case Outcome::Pass:
      return "pass";
    case Outcome::Fail:
      return "FAIL";
    case Outcome::Unsupported:
      return "unsupported";
    case Outcome::KnownFailure:
      return "known failure";
  }
  return "?";
}

// docs/ops.md: one row per function, one column per (device, dtype) that any case uses.
int write_support(const std::string& out_path, const std::string& filter) {
  const auto devices = conformance_devices();
  std::vector<DType> dtypes;
  for (DType dt : kAllDtypes) {
    for (const Case& c : all_cases()) {
      if (std::find(c.dtypes.begin(), c.dtypes.end(), dt) != c.dtypes.end()) {
        dtypes.push_back(dt);
        break;
      }
    }
  }
  std::ostringstream md;
  md << "# Operator support\n\n"
        "Generated by `test_conformance --mode support --out docs/ops.md` (`make ops-doc`); do\n"
        "not edit by hand. Each user-level function of `ember/tensor/ops.hpp` and\n"
        "`ember/tensor/tensor.hpp` is run on every available backend against an independent\n"
        "f64 reference, with contiguous and strided (permuted, sliced, flipped, expanded) "
        "inputs.\n\n"
        "Legend: `ok` passes, `FAIL` fails, `n/s` runs an op that neither the backend nor a\n"
        "fallback supports (`Backend::supports`), `known` a known failure (see the notes),\n"
        "blank: the function is not defined for the dtype.\n\n";
  std::vector<std::string> notes;
  std::size_t failures = 0;
  std::map<std::string, std::size_t> pass_per_dtype;
  for (const Device& dev : devices) {
    md << "## Backend `" << dev.name() << "`\n\n| family | function |";
    for (DType dt : dtypes) md << ' ' << ember::name(dt) << " |";
    md << "\n| --- | --- |";
    for (std::size_t i = 0; i < dtypes.size(); ++i) md << " :-: |";
    md << '\n';
    for (const Case& c : all_cases()) {
      if (!matches(c, filter)) continue;
      md << "| " << c.family << " | `" << c.fn << "` |";
      for (DType dt : dtypes) {
        if (std::find(c.dtypes.begin(), c.dtypes.end(), dt) == c.dtypes.end()) {
          md << "  |";
          continue;
        }
        const Result r = run_case(c, dev, dt);
        const char* cell = r.outcome == Outcome::Pass          ? "ok"
                           : r.outcome == Outcome::Fail        ? "FAIL"
                           : r.outcome == Outcome::Unsupported ? "n/s"
                                                               : "known";
        if (r.outcome == Outcome::Pass) ++pass_per_dtype[ember::name(dt)];
        if (r.outcome == Outcome::Fail) {
          ++failures;
          std::fprintf(stderr, "FAIL %s\n", r.message.c_str());
        }
        if (r.outcome == Outcome::KnownFailure) {
          notes.push_back("`" + c.fn + "` (" + ember::name(dt) + "): " + r.message);
        }
        md << ' ' << cell << " |";
      }
      md << '\n';
    }
    md << '\n';
  }
  if (!notes.empty()) {
    md << "## Notes\n\n";
    for (const auto& n : notes) md << "- " << n << '\n';
    md << '\n';
  }
  std::set<std::string> fns;
  for (const Case& c : all_cases()) fns.insert(c.fn);
  md << "Functions covered: " << fns.size() << ". Passing (function, dtype) pairs per dtype:";
  for (DType dt : dtypes)
    md << ' ' << ember::name(dt) << ' ' << pass_per_dtype[ember::name(dt)] << ';';
  md << '\n';
  if (out_path.empty()) {
    std::fputs(md.str().c_str(), stdout);
  } else {
    std::ofstream f(out_path);
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
      return 2;
    }
    f << md.str();
    std::printf("wrote %s\n", out_path.c_str());
  }
  return failures == 0 ? 0 : 1;
}

int run_perf(const std::string& filter) {
  std::printf("%-10s %-22s %-6s %12s %8s\n", "device", "function", "dtype", "ms/run", "trials");
  for (const Device& dev : conformance_devices()) {
    for (const Case& c : all_cases()) {
      if (!matches(c, filter)) continue;
      for (DType dt : c.dtypes) {
        // The function alone: inputs already on the device, warmed up, median of 5 runs.
        std::size_t trials = 0;
        const double ms = time_case(c, dev, dt, Scale::Perf, trials);
        if (ms < 0) {
          std::printf("%-10s %-22s %-6s %12s\n", dev.name().c_str(), c.fn.c_str(), ember::name(dt),
                      "fails");
          continue;
        }
        std::printf("%-10s %-22s %-6s %12.4f %8zu\n", dev.name().c_str(), c.fn.c_str(),
                    ember::name(dt), ms, trials);
      }
    }
  }
  return 0;
}

// Every case's gradients on every autodiff stack (grad_stacks), one line per (stack, case).
int run_grad(const std::string& filter) {
  int failures = 0;
  for (const GradStacks& g : grad_stacks()) {
    std::vector<std::string> lines(g.stacks.size());
    for (const Case& c : all_cases()) {
      if (!matches(c, filter)) continue;
      const std::vector<GradResult> rs = run_grad_case(c, g.stacks);
      for (std::size_t s = 0; s < rs.size(); ++s) {
        const GradResult& r = rs[s];
        if (r.trials == 0 && r.outcome == Outcome::Pass) continue;
        failures += r.outcome == Outcome::Fail;
        char line[512];
        std::snprintf(line, sizeof line,
                      "%-22s %-22s %-12s %4zu differences %3zu kinks %2zu directions ",
                      g.stacks[s].name().c_str(), c.fn.c_str(), mark(r.outcome), r.checked, r.kinks,
                      r.directions);
        lines[s] += line + r.message + "\n";
      }
    }
    for (const auto& l : lines) std::fputs(l.c_str(), stdout);
  }
  return failures == 0 ? 0 : 1;
}

int run_listing(const std::string& filter) {
  int failures = 0;
  for (const Device& dev : conformance_devices()) {
    for (const Case& c : all_cases()) {
      if (!matches(c, filter)) continue;
      for (DType dt : c.dtypes) {
        const Result r = run_case(c, dev, dt);
        failures += r.outcome == Outcome::Fail;
        std::printf("%-10s %-22s %-6s %s %s\n", dev.name().c_str(), c.fn.c_str(), ember::name(dt),
                    mark(r.outcome), r.outcome == Outcome::Pass ? "" : r.message.c_str());
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int cli_main(int argc, char** argv) {
  std::string mode, out, filter;
  std::uint64_t seed = 1;
  std::size_t programs = 2000;
  std::string device;   // fusion mode: only this device ("cpu", "cuda:0"); every one if empty
  bool threads = true;  // fusion mode: the two-thread programs (--one-thread: none)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--mode")
      mode = next();
    else if (a == "--out")
      out = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--programs")
      programs = std::stoull(next());
    else if (a == "--device")
      device = next();
    else if (a == "--one-thread")
      threads = false;
  }
  if (mode == "support") return write_support(out, filter);
  if (mode == "perf") return run_perf(filter);
  if (mode == "grad") return run_grad(filter);
  if (mode == "embedded") {  // the firmware tests' sample: f32 trials of up to 64 elements
    const std::size_t n = export_embedded_sample(out, 64, 2);
    std::printf("wrote %zu trials to %s\n", n, out.c_str());
    return n > 0 ? 0 : 1;
  }
  if (mode == "fusion") {  // every device (or --device's) against its fusion stack
    std::size_t failures = 0;
    for (const std::string& n : Device::available()) {
      if (!device.empty() && n != device && n.substr(0, n.find(':')) != device) continue;
      const Device plain = Device::parse(n);
      const Device fused = plain.fusion();
      // In chunks of 200 programs (100 seeds), each reported as it ends, so a run cut short
      // still says how far it got.
      std::size_t done = 0, failed = 0, shown = 0;
      while (done < programs) {
        const std::size_t chunk = std::min<std::size_t>(200, programs - done);
        const DifferentialResult r =
            run_fusion_differential(seed + done / 2, chunk, plain, fused, threads);
        done += r.programs;
        failed += r.failures;
        for (const auto& rep : r.reproducers) {
          if (shown++ < 3) std::fputs(rep.c_str(), stdout);
        }
        std::printf("%-10s   ... %zu programs, %zu failures\n", n.c_str(), done, failed);
        std::fflush(stdout);
        if (r.programs < chunk) break;
      }
      std::printf("%-10s fusion: %zu programs from seed %llu, %zu failures\n", n.c_str(), done,
                  static_cast<unsigned long long>(seed), failed);
      failures += failed;
    }
    return failures == 0 ? 0 : 1;
  }
  if (mode == "test" || mode.empty()) return run_listing(filter);
  std::fprintf(stderr, "unknown mode '%s' (test, support, perf, grad, embedded, fusion)\n",
               mode.c_str());
  return 2;
}

// Every element-wise function has a case named as the function, over every dtype the
// table defines it for: adding a function without its case fails here.
TEST(ConformanceCases, EveryElementwiseFunctionHasACase) {
  const auto covered = [](const char* fn, auto defined) {
    for (const Case& c : all_cases()) {
      if (c.fn != fn) continue;
      for (DType dt : kAllDtypes) {
        const bool listed = std::find(c.dtypes.begin(), c.dtypes.end(), dt) != c.dtypes.end();
        EXPECT_EQ(listed, defined(dt)) << "case " << fn << ", dtype " << ember::name(dt);
      }
      return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < std::size_t(ember::ir::UnaryFn::Count_); ++i) {
    const auto f = ember::ir::UnaryFn(i);
    EXPECT_TRUE(
        covered(ember::ir::name(f), [f](DType dt) { return ember::ir::sx::defined_for(f, dt); }))
        << "no conformance case for " << ember::ir::name(f);
  }
  for (std::size_t i = 0; i < std::size_t(ember::ir::BinaryFn::Count_); ++i) {
    const auto f = ember::ir::BinaryFn(i);
    EXPECT_TRUE(
        covered(ember::ir::name(f), [f](DType dt) { return ember::ir::sx::defined_for(f, dt); }))
        << "no conformance case for " << ember::ir::name(f);
  }
}

}  // namespace conformance

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" || a == "--filter" || a == "--out" || a == "--seed" || a == "--programs" ||
        a == "--device")
      return conformance::cli_main(argc, argv);
  }
  testing::InitGoogleTest(&argc, argv);
  conformance::register_tests();
  conformance::register_grad_tests();
  return RUN_ALL_TESTS();
}
