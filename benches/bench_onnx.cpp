// bench_onnx: imported ONNX models on ember (onnx::load + Model::run) beside onnxruntime,
// alternating model by model: ember's median of --reps runs after --warmup, then
// onnxruntime's (benches/onnx_ort_time.py under the bench venv's Python, the same input
// and threads). The models are those of tests/onnx/export_real_models.py (ResNet-18,
// MobileNetV2, the LSTM) and tests/onnx/models (the Transformer encoder, the small CNN).
//
//   bench_onnx --models DIR [--models DIR2] [--device cpu|cuda:0] [--reps 7] [--warmup 2]
//              [--python .venv/bin/python] [--only a,b] [--markdown FILE] [--cpu-time]
//
// --cpu-time times each run in the process's CPU time (all threads) instead of wall time,
// on both sides: steadier than wall time on a loaded machine, and with one thread the
// same quantity.
//
// EMBER_NUM_THREADS (default 2) sets ember's threads and onnxruntime's intra-op threads.
// Each ember run ends with to_data() of the output, so asynchronous devices are timed to
// completion.
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/onnx/onnx.hpp"

namespace fs = std::filesystem;
using namespace ember;

namespace {

Shape shape_of(const nlohmann::json& j) {
  std::vector<std::size_t> d;
  for (auto& e : j) d.push_back(e.get<std::size_t>());
  return Shape(d);
}

// The process's CPU time (user + system, all threads) in ms.
double cpu_ms() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return (double(r.ru_utime.tv_sec) + double(r.ru_stime.tv_sec)) * 1e3 +
         (double(r.ru_utime.tv_usec) + double(r.ru_stime.tv_usec)) / 1e3;
}

// A time in ms to three significant digits (the small graphs run in tenths of a ms).
std::string ms3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// stdout of a command, and its exit status.
std::pair<std::string, int> capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {"", -1};
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  return {out, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dirs, only;
  std::string device = "cpu", python = ".venv/bin/python", markdown;
  int reps = 7, warmup = 2;
  bool cpu_time = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "bench_onnx: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models")
      dirs.push_back(next());
    else if (a == "--device")
      device = next();
    else if (a == "--reps")
      reps = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--python")
      python = next();
    else if (a == "--markdown")
      markdown = next();
    else if (a == "--cpu-time")
      cpu_time = true;
    else if (a == "--only") {
      std::stringstream ss(next());
      for (std::string s; std::getline(ss, s, ',');) only.push_back(s);
    } else {
      std::cerr << "bench_onnx: unknown option " << a << "\n";
      return 2;
    }
  }
  if (dirs.empty() || reps < 1 || warmup < 0) {
    std::cerr << "usage: bench_onnx --models DIR [--device D] [--reps N] [--warmup N] "
                 "[--python PY] [--only a,b] [--markdown FILE] [--cpu-time]\n";
    return 2;
  }
  setenv("EMBER_NUM_THREADS", "2", 0);
  const int threads = std::max(1, std::atoi(std::getenv("EMBER_NUM_THREADS")));
  const Device dev = Device::parse(device);
  const bool cuda = device.rfind("cuda", 0) == 0;
  const std::string script = (fs::path(argv[0]).parent_path() / "onnx_ort_time.py").string();
  const std::string ort_script = fs::exists(script) ? script : "benches/onnx_ort_time.py";
  std::ostringstream table;
  table
      << "| model | input | ember " << device << " (ms) | onnxruntime (ms) | provider | "
      << "ember/onnxruntime | ember vs PyTorch (max err / max) |\n|---|---|---|---|---|---|---|\n";
  std::cout << "bench_onnx: device " << dev.name() << ", threads " << threads << ", median of "
            << reps << " after " << warmup << " warm-ups, "
            << (cpu_time ? "process CPU time" : "wall time") << "\n";
  for (const auto& dir : dirs)
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".onnx") continue;
      const std::string name = entry.path().stem().string();
      if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
      const fs::path meta_path = fs::path(dir) / (name + ".json");
      if (!fs::exists(meta_path)) continue;
      std::ifstream mf(meta_path);
      const auto meta = nlohmann::json::parse(mf);
      try {
        onnx::Model m = onnx::load(entry.path().string(), dev);
        auto x = ops::from_data(TensorData::from<float>(meta["input"].get<std::vector<float>>(),
                                                        shape_of(meta["input_shape"])),
                                dev);
        std::vector<double> t;
        for (int r = 0; r < warmup + reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          const double c0 = cpu_ms();
          auto out = m.run({x});
          (void)out[0].to_data();
          const double c1 = cpu_ms();
          const auto t1 = std::chrono::steady_clock::now();
          if (r >= warmup)
            t.push_back(cpu_time ? c1 - c0
                                 : std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        const double ember_ms = median(t);
        // How far ember's output is from PyTorch's (the export's): max |d| / max |y|.
        const auto got = m.run({x})[0].to_data().to_vector<double>();
        const auto want = meta["output"].get<std::vector<double>>();
        double err = got.size() == want.size() ? 0 : 1e9, scale = 0;
        for (std::size_t k = 0; k < got.size() && k < want.size(); ++k) {
          err = std::max(err, std::abs(got[k] - want[k]));
          scale = std::max(scale, std::abs(want[k]));
        }
        char errs[64];
        std::snprintf(errs, sizeof errs, "%.1e", scale > 0 ? err / scale : err);
        std::string ort_ms = "—", provider = "—", ratio = "—";
        const auto [out, rc] = capture(python + " " + ort_script + " " + dir + " " + name + " " +
                                       std::to_string(threads) + " " + std::to_string(reps) + " " +
                                       std::to_string(warmup) + (cuda ? " --cuda" : "") +
                                       (cpu_time ? " --cpu-time" : "") + " 2>/dev/null");
        if (rc == 0) {
          const auto j = nlohmann::json::parse(out);
          const double o = j["median_ms"].get<double>();
          ort_ms = ms3(o);
          provider = j["provider"].get<std::string>() + " " + j["onnxruntime"].get<std::string>();
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.2f", ember_ms / o);
          ratio = buf;
        }
        const std::string em = ms3(ember_ms);
        table << "| " << name << " | " << shape_of(meta["input_shape"]).to_string() << " | " << em
              << " | " << ort_ms << " | " << provider << " | " << ratio << " | " << errs << " |\n";
        std::cout << name << ": ember " << em << " ms, onnxruntime " << ort_ms << " ms ("
                  << provider << "), ratio " << ratio << ", error vs PyTorch " << errs << std::endl;
      } catch (const std::exception& e) {
        table << "| " << name << " | | error | | | | |\n";
        std::cout << name << ": error: " << e.what() << std::endl;
      }
    }
  std::cout << "\n" << table.str();
  if (!markdown.empty()) std::ofstream(markdown) << table.str();
  return 0;
}
