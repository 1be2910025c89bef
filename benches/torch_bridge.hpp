// TorchBridge: a long-lived PyTorch process (benches/torch_workloads.py) driven over pipes,
// so the runner can alternate ember and PyTorch workload by workload in one invocation.
// The protocol is one line each way: a JSON request (workload name, parameters, warm-up and
// repetitions, where to write the output) and a plain "ok key=value ..." or "err message"
// reply that needs no JSON parser on this side.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "workloads.hpp"

namespace ember::bench {

struct TorchRun {
  std::vector<double> times_ms;
  std::optional<TensorData> output;  // when an output path was requested
  std::string note;                  // e.g. why torch.compile fell back to eager
};

class TorchBridge {
 public:
  // Starts `python script --threads N --device D`; available() is false (and why() says
  // why) when the interpreter, torch, the script or (for "cuda") a GPU is missing.
  // `compile` asks for torch.compile.
  TorchBridge(const std::string& python, const std::string& script, int threads, bool compile,
              const std::string& device = "cpu");
  ~TorchBridge();
  TorchBridge(const TorchBridge&) = delete;
  TorchBridge& operator=(const TorchBridge&) = delete;

  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  // What the Python side reported at start: "torch=... device=... threads=... blas=...".
  const std::string& info() const { return info_; }
  // One field of info(): info_field("torch") is the version, "mode" eager or compile.
  std::string info_field(const std::string& key) const;

  // Runs one workload; throws std::runtime_error with PyTorch's message on failure.
  // `out_path` non-empty: PyTorch writes its last output there and it is read back.
  // `eager`: run eager even when the process was started with torch.compile. The warm-ups
  // go on until `warmup_ms` have passed too (Note [Warm-up by time] in ember_bench.cpp).
  TorchRun run(const std::string& workload, const Params& params, int warmup, int warmup_ms,
               int reps, const std::string& out_path, bool eager = false);

 private:
  std::string request(const std::string& line);

  pid_t pid_ = -1;
  std::FILE* to_ = nullptr;
  std::FILE* from_ = nullptr;
  bool available_ = false;
  std::string why_, info_;
};

// The default interpreter: $EMBER_BENCH_PYTHON (a path, or a bare name looked up on PATH,
// e.g. EMBER_BENCH_PYTHON=python3 on the GPU machine), else /usr/bin/python3 (Debian's,
// which has python3-torch), never whatever `python3` is first on PATH unless asked.
std::string default_python();
// The PyTorch workload script: $EMBER_BENCH_TORCH_SCRIPT; else torch_workloads.py next to
// the running executable (the build copies it there, so a build folder copied to another
// machine carries it); else benches/torch_workloads.py under the working directory; else
// the source tree this was built from.
std::string default_torch_script();

}  // namespace ember::bench
