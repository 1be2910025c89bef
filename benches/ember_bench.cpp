// ember-bench: runs the workloads of benches/workloads.cpp on ember and, in the same
// invocation, on PyTorch (benches/torch_workloads.py in a child process), alternating the
// two workload by workload so that drifts in machine load hit both sides alike. Each
// result is the median of N repetitions after warm-up, printed next to the ratio
// ember/PyTorch and to the share of the machine's roofline it reaches: the roofline is set
// by a copy bandwidth and a GEMM rate measured at start, so the numbers say how far each
// side is from what the hardware allows, not only from each other.
//
//   ember-bench [--device cpu|cuda|libtorch|vulkan|vulkan+fusion] [--filter a,b]
//               [--backend ember|torch|both] [--size tiny|full|gpu] [--reps N] [--warmup N]
//               [--rounds N] [--json out.json] [--markdown table.md] [--check]
//               [--no-ceilings] [--torch-compile] [--torch-device cpu|cuda]
//               [--torch-script PATH] [--torch-python2 PATH] [--fusion] [--list]
//
// --rounds N runs the whole list N times, alternating workload by workload in each round;
// a side's time is the median over the rounds of each round's median, so that a slow spell
// of a shared machine moves one round, not the result. --torch-python2 PATH starts a second
// PyTorch (e.g. another version) beside the first, always eager, and adds its columns; the
// first PyTorch stays the reference of the ratios and of the ceilings' check.
//
// --device cuda runs ember on Device::cuda(0) (training steps on Device::cuda(0).autodiff())
// and PyTorch on torch.device("cuda"); every timed repetition ends with a device sync on
// both sides. Its default size is gpu. --device libtorch runs ember on Device::libtorch()
// (ATen's CPU kernels behind ember's API) beside PyTorch on the CPU: the gap to --device
// cpu is the per-op gap between ember's Cpu kernels and ATen's. --device vulkan runs ember
// on Device::vulkan(0) (vulkan+fusion: on Device::vulkan(0).fusion()), every repetition
// ending with a device sync, beside PyTorch on the CPU, or on the GPU with --torch-device
// cuda; its default size is full (gpu with --torch-device cuda); no ceilings are measured.
//
// --fusion also runs each workload on the device's Fusion stack (Device::cpu().fusion(),
// Device::cuda(0).fusion(); training steps on .fusion().autodiff()), right after the plain
// device, and adds its time, its ratio to the plain device (fused/unf.) and to PyTorch.
//
// On the CPU the GEMM ceiling is the best f32 rate at 2048 of every library in the run:
// ember's matmul, OpenBLAS's sgemm (when linked), and through each PyTorch torch.matmul (MKL
// in PyPI's builds, OpenBLAS in Debian's) and oneDNN's inner product (mkldnn_linear), each
// printed with its source, so that no GEMM-bound row reads above 100% of it.
//
// EMBER_NUM_THREADS (default 2) sets the threads of ember, OpenBLAS and PyTorch alike.
// EMBER_BENCH_PYTHON picks the interpreter (default /usr/bin/python3);
// EMBER_BENCH_TORCH_SCRIPT or --torch-script the PyTorch side (see default_torch_script).
#ifdef EMBER_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ember/cpu/cpu.hpp>

#include "ember_bench_commit.hpp"
#include "gpu_info.hpp"
#include "torch_bridge.hpp"
#include "workloads.hpp"

namespace eb = ember::bench;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::vector<std::string> filters;
  std::string backend = "both";
  std::string device = "cpu";
  std::string torch_device;          // empty: cuda with --device cuda, else cpu
  std::string torch_script;          // empty: default_torch_script()
  std::string torch_python2;         // a second PyTorch's interpreter, or empty
  std::optional<eb::SizeKind> size;  // unset: full on the CPU, gpu on cuda
  int reps = -1, warmup = -1;        // -1: size default
  int warmup_ms = -1;                // -1: size default (Note [Warm-up by time])
  int rounds = 1;
  std::string json, markdown;
  bool check = false, ceilings = true, compile = false, list = false, fusion = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember-bench: " << why
            << "\nusage: ember-bench [--device cpu|cuda|libtorch|vulkan|vulkan+fusion] [--filter "
               "a,b] [--backend "
               "ember|torch|both] [--size tiny|full|gpu] [--reps N] [--warmup N] [--warmup-ms M] "
               "[--rounds N] "
               "[--json out.json] [--markdown out.md] [--check] [--no-ceilings] "
               "[--torch-compile] [--torch-device cpu|cuda] [--torch-script PATH] "
               "[--torch-python2 PATH] [--fusion] [--list]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--filter") {
      std::istringstream is(value());
      for (std::string f; std::getline(is, f, ',');) {
        if (!f.empty()) o.filters.push_back(f);
      }
    } else if (a == "--backend") {
      o.backend = value();
      if (o.backend != "ember" && o.backend != "torch" && o.backend != "both") {
        usage("--backend is ember, torch or both");
      }
    } else if (a == "--device") {
      o.device = value();
      if (o.device != "cpu" && o.device != "cuda" && o.device != "libtorch" &&
          o.device != "vulkan" && o.device != "vulkan+fusion") {
        usage("--device is cpu, cuda, libtorch, vulkan or vulkan+fusion");
      }
    } else if (a == "--torch-device") {
      o.torch_device = value();
      if (o.torch_device != "cpu" && o.torch_device != "cuda")
        usage("--torch-device is cpu or cuda");
    } else if (a == "--torch-script") {
      o.torch_script = value();
    } else if (a == "--torch-python2") {
      o.torch_python2 = value();
    } else if (a == "--size") {
      const std::string s = value();
      if (s != "tiny" && s != "full" && s != "gpu") usage("--size is tiny, full or gpu");
      o.size = s == "tiny"   ? eb::SizeKind::Tiny
               : s == "full" ? eb::SizeKind::Full
                             : eb::SizeKind::Gpu;
    } else if (a == "--reps") {
      o.reps = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--warmup") {
      o.warmup = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--warmup-ms") {
      o.warmup_ms = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--rounds") {
      o.rounds = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--markdown") {
      o.markdown = value();
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--no-ceilings") {
      o.ceilings = false;
    } else if (a == "--torch-compile") {
      o.compile = true;
    } else if (a == "--fusion") {
      o.fusion = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage("unknown argument " + a);
    }
  }
  if (o.torch_device.empty()) o.torch_device = o.device == "cuda" ? "cuda" : "cpu";
  if (!o.size) {
    o.size =
        o.device == "cuda" || o.torch_device == "cuda" ? eb::SizeKind::Gpu : eb::SizeKind::Full;
  }
  // GPU calls are short: more repetitions, and warm-ups that also cover NVRTC compiling
  // each kernel on its first use.
  const bool tiny = *o.size == eb::SizeKind::Tiny, gpu = *o.size == eb::SizeKind::Gpu;
  if (o.reps < 0) o.reps = tiny ? 3 : gpu ? 20 : 7;
  if (o.warmup < 0) o.warmup = tiny ? 1 : gpu ? 3 : 2;
  if (o.warmup_ms < 0) o.warmup_ms = tiny || gpu ? 0 : 200;
  return o;
}

bool selected(const Options& o, const eb::Workload& w) {
  if (o.filters.empty()) return true;
  return std::any_of(o.filters.begin(), o.filters.end(), [&](const std::string& f) {
    return w.name.find(f) != std::string::npos || w.group == f;
  });
}

std::string read_first_line(const std::string& path, const std::string& prefix = "") {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return {};
}

std::string cpuinfo_field(const std::string& key) {
  const std::string l = read_first_line("/proc/cpuinfo", key);
  const auto p = l.find(": ");
  return p == std::string::npos ? "" : l.substr(p + 2);
}

std::string cpu_model() {
  const std::string m = cpuinfo_field("model name");
  return m.empty() ? "unknown" : m;
}

// cpu0's data caches as Linux lists them ("L1d 48K L2 1024K L3 32768K"), or "" where it
// lists none: the sizes the Cpu's fused tiles follow (Note [Tile size]).
std::string cpu_caches() {
  std::string out;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
    std::string lv, ty, sz;
    if (!(level >> lv) || !(type >> ty) || !(size >> sz) || ty == "Instruction") continue;
    out += std::string(out.empty() ? "" : " ") + "L" + lv + (ty == "Data" ? "d " : " ") + sz;
  }
  return out;
}

// The ISA extensions among /proc/cpuinfo's flags that the CPU kernels of ember, MKL or
// oneDNN choose between, in this order, those present.
std::vector<std::string> cpu_isa_extensions() {
  static const char* const kernel_flags[] = {
      "avx2",        "fma",         "f16c",        "avx512f",  "avx512bw", "avx512dq", "avx512vl",
      "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"};
  std::istringstream is(cpuinfo_field("flags"));
  const std::set<std::string> flags{std::istream_iterator<std::string>(is),
                                    std::istream_iterator<std::string>()};
  std::vector<std::string> out;
  for (const char* f : kernel_flags) {
    if (flags.count(f)) out.emplace_back(f);
  }
  return out;
}

// The kernels ember's Cpu backend runs (ember::cpu::kernel_isa(): EMBER_CPU_ISA's choice, else
// the best this CPU supports), and whether EMBER_CPU_ISA chose them.
std::string ember_cpu_isa() {
  const char* env = std::getenv("EMBER_CPU_ISA");
  return ember::cpu::kernel_isa() +
         (env && *env ? " (EMBER_CPU_ISA)" : " (the best of this CPU; EMBER_CPU_ISA unset)");
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string o;
  for (std::size_t i = 0; i < v.size(); ++i) o += (i ? sep : "") + v[i];
  return o;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---- ceilings ----

// STREAM-style copy of 128 MiB into 128 MiB, each thread copying its own half; bandwidth
// counts bytes read plus bytes written, best of 5 (after a first pass that faults pages in).
// Two copies are tried, and the faster one is the ceiling: glibc's memcpy (non-temporal
// stores at this size) and a plain vectorized loop with ordinary stores, as a kernel
// writes; which one wins depends on the machine.
struct CopyCeiling {
  double gbs = 0;
  const char* method = "";
};

double copy_once_ms(float* dst, const float* src, std::size_t n, int threads, bool use_memcpy) {
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  const std::size_t chunk = n / std::size_t(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const std::size_t off = std::size_t(t) * chunk;
      const std::size_t len = t == threads - 1 ? n - off : chunk;
      if (use_memcpy) {
        std::memcpy(dst + off, src + off, len * sizeof(float));
      } else {
        // "+ 0.0f" is not an identity for -0.0f, so the compiler cannot turn the loop back
        // into a memcpy call; it stays a load/add/store loop like an element-wise kernel.
        for (std::size_t i = off; i < off + len; ++i) dst[i] = src[i] + 0.0f;
      }
    });
  }
  for (auto& th : pool) th.join();
  return ms_since(t0);
}

CopyCeiling copy_bandwidth(int threads) {
  const std::size_t n = (std::size_t(128) << 20) / sizeof(float);
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  CopyCeiling best;
  for (const bool use_memcpy : {true, false}) {
    double ms = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      const double t = copy_once_ms(dst.data(), src.data(), n, threads, use_memcpy);
      if (rep > 0) ms = std::min(ms, t);
    }
    const double gbs = 2.0 * double(n * sizeof(float)) / (ms * 1e-3) / 1e9;
    if (gbs > best.gbs) best = {gbs, use_memcpy ? "memcpy" : "copy loop"};
  }
  if (dst[n / 2] != 1.0f) std::abort();  // keeps the copies observable
  return best;
}

struct GemmRate {
  std::string source;
  double gflops = 0;
};

// Every f32 GEMM rate measured at n x n x n; the best is the ceiling.
struct GemmCeiling {
  std::vector<GemmRate> rates;
  double ember_bf16_gflops = 0;  // GPU only: reported, not a ceiling (the workloads are f32)
  std::size_t n = 2048;
  const GemmRate* best_rate() const {
    const auto it = std::max_element(rates.begin(), rates.end(), [](const auto& a, const auto& b) {
      return a.gflops < b.gflops;
    });
    return it == rates.end() ? nullptr : &*it;
  }
  double best() const { return best_rate() ? best_rate()->gflops : 0.0; }
  std::string source() const {
    return best_rate() ? best_rate()->source + " at " + std::to_string(n) : "not measured";
  }
  // Each rate at the better of this and `o` (the same sources, measured again).
  void keep_best(const GemmCeiling& o) {
    for (const auto& r : o.rates) {
      const auto it = std::find_if(rates.begin(), rates.end(),
                                   [&](const GemmRate& x) { return x.source == r.source; });
      if (it == rates.end()) {
        rates.push_back(r);
      } else {
        it->gflops = std::max(it->gflops, r.gflops);
      }
    }
  }
  // "ember f32 matmul 150, OpenBLAS sgemm 140, ..." (GFLOP/s)
  std::string summary() const {
    std::string o;
    for (const auto& r : rates) {
      o += (o.empty() ? "" : ", ") + r.source + " " +
           (r.gflops > 0 ? std::to_string(int(r.gflops + 0.5)) : std::string("n/a"));
    }
    return o;
  }
};

// ember's matmul rate for n x n x n in `dtype` on `dev`: best of `reps` after one warm-up.
double ember_gemm_gflops(const ember::Device& dev, std::size_t n, ember::DType dtype, int reps) {
  const double flops = 2.0 * double(n) * double(n) * double(n);
  auto a = ember::Tensor<2>::from_data(eb::input_data(ember::Shape{n, n}, 1), dev).cast(dtype);
  auto b = ember::Tensor<2>::from_data(eb::input_data(ember::Shape{n, n}, 2), dev).cast(dtype);
  double best = 1e30;
  for (int rep = 0; rep <= reps; ++rep) {
    const auto t0 = Clock::now();
    auto c = a.matmul(b);
    dev.sync();
    if (rep > 0) best = std::min(best, ms_since(t0));
  }
  return flops / (best * 1e-3) / 1e9;
}

// PyTorch's f32 rates at n through `torch` (eager, best of 5 after 2 warm-ups): torch.matmul
// (MKL in PyPI's builds, OpenBLAS in Debian's) and matmul_onednn (oneDNN's inner product,
// where the build has oneDNN; a rate of 0 prints as n/a).
void add_torch_gemm_rates(GemmCeiling& g, eb::TorchBridge& torch, const std::string& label) {
  const auto n = static_cast<std::int64_t>(g.n);
  const double flops = 2.0 * double(n) * double(n) * double(n);
  const std::pair<const char*, const char*> kinds[] = {{"matmul_2048", "torch.matmul"},
                                                       {"matmul_onednn", "oneDNN mkldnn_linear"}};
  for (const auto& [workload, what] : kinds) {
    GemmRate r{label + " " + what, 0.0};
    try {
      const auto run = torch.run(workload, {{"b", {1}}, {"m", {n}}, {"k", {n}}, {"n", {n}}}, 2,
                                 /*warmup_ms=*/200, 5, "", /*eager=*/true);
      const double ms = *std::min_element(run.times_ms.begin(), run.times_ms.end());
      r.gflops = flops / (ms * 1e-3) / 1e9;
    } catch (const std::exception& e) {
      std::cout << "ceilings: " << r.source << " not measured: " << e.what() << "\n";
    }
    g.rates.push_back(r);
  }
}

// CPU: ember's and OpenBLAS's sgemm at 2048 (PyTorch's are added by add_torch_gemm_rates).
// GPU: ember's f32 matmul at 8192 (cuBLASLt, TF32 off), plus its bf16 rate at 8192 for the
// header.
GemmCeiling gemm_ceiling(int threads, const ember::Device& dev, bool gpu) {
  GemmCeiling g;
  if (gpu) {
    g.n = 8192;
    g.rates.push_back({"ember f32 matmul", ember_gemm_gflops(dev, g.n, ember::DType::F32, 5)});
    g.ember_bf16_gflops = ember_gemm_gflops(dev, g.n, ember::DType::BF16, 10);
    (void)threads;
    return g;
  }
  const std::size_t n = g.n;
  g.rates.push_back({"ember f32 matmul", ember_gemm_gflops(dev, n, ember::DType::F32, 3)});
#ifdef EMBER_BENCH_HAVE_OPENBLAS
  const double flops = 2.0 * double(n) * double(n) * double(n);
  openblas_set_num_threads(threads);
  std::vector<float> x(n * n, 0.5f), y(n * n, 0.25f), z(n * n);
  double best = 1e30;
  const int s = static_cast<int>(n);
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, x.data(), s, y.data(), s,
                0.0f, z.data(), s);
    if (rep > 0) best = std::min(best, ms_since(t0));
  }
  g.rates.push_back({"OpenBLAS sgemm", flops / (best * 1e-3) / 1e9});
#else
  (void)threads;
#endif
  return g;
}

// ---- results ----

// One side's times of one workload, by round. Its time is the median over the rounds of
// each round's median (with one round, the plain median).
struct Series {
  std::vector<std::vector<double>> rounds;
  void add(std::vector<double> times) {
    if (!times.empty()) rounds.push_back(std::move(times));
  }
  bool empty() const { return rounds.empty(); }
  std::vector<double> round_medians() const {
    std::vector<double> m;
    for (const auto& r : rounds) m.push_back(median(r));
    return m;
  }
  double ms() const { return median(round_medians()); }
  std::vector<double> all() const {
    std::vector<double> a;
    for (const auto& r : rounds) a.insert(a.end(), r.begin(), r.end());
    return a;
  }
};

struct Row {
  std::string name, group, shape, note;
  bool available = true, failed = false;
  double bytes = 0, flops = 0;
  double stream_gbs = 0;      // the case's own bandwidth ceiling (Case::stream_gbs), or 0
  Series ember, fused;        // fused: --fusion
  std::vector<Series> torch;  // one per PyTorch side, the reference first
  std::string check;          // "", "ok", or a mismatch description
  void add_note(const std::string& n) {
    if (n.empty() || note.find(n) != std::string::npos) return;  // once, not once a round
    note += (note.empty() ? "" : "; ") + n;
  }
};

// A PyTorch process and how the table names it: "PyTorch 2.15.0" (eager) or "PyTorch 2.15.0
// compile"; the reference side is first.
struct TorchSide {
  std::unique_ptr<eb::TorchBridge> bridge;
  std::string python, label;
};

std::string fmt(double v, int prec = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// Share of the roofline: the time an ideal run would take (bytes at copy bandwidth or
// FLOPs at the GEMM rate, whichever is longer) over the measured time.
std::string roofline_pct(const Row& r, double ms, double bw_gbs, double gflops) {
  if (ms <= 0 || (r.bytes == 0 && r.flops == 0) || bw_gbs <= 0) return "-";
  const double ideal_ms =
      std::max(r.bytes / (bw_gbs * 1e9), gflops > 0 ? r.flops / (gflops * 1e9) : 0.0) * 1e3;
  return fmt(100.0 * ideal_ms / ms, 0) + "%";
}

const char* bound(const Row& r, double bw_gbs, double gflops) {
  if ((r.bytes == 0 && r.flops == 0) || bw_gbs <= 0) return "-";
  if (gflops > 0 && r.flops / (gflops * 1e9) > r.bytes / (bw_gbs * 1e9)) return "gemm";
  return "bw";
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string json_list(const std::vector<double>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + fmt(v[i], 4);
  return o + "]";
}

void pause_between_sides() {
  // OpenMP and OpenBLAS workers spin for a while after a parallel region; let them go idle
  // so one side's leftover spinning does not eat the other side's cores.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  // Before anything starts ember's thread pool: one thread count for every library.
  setenv("EMBER_NUM_THREADS", "2", /*overwrite=*/0);
  const int threads = std::max(1, std::atoi(std::getenv("EMBER_NUM_THREADS")));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");  // inherited by the PyTorch child

  if (opt.list) {
    for (const auto& w : eb::workloads()) {
      std::cout << w.name << "  (" << w.group << ")"
                << (w.unavailable.empty() ? "" : "  -- " + w.unavailable) << "\n";
    }
    return 0;
  }

  const double load_start = load_average();
  const std::string started = utc_now();
  const std::string commit = EMBER_BENCH_COMMIT;  // the build's (build_commit.cmake)
  const eb::SizeKind size = *opt.size;
  const bool on_gpu = opt.device == "cuda";
  // The device first: without a GPU (or a Cuda build) --device cuda stops here, clearly.
  std::optional<ember::Device> device;
  eb::GpuInfo gpu;
  try {
    if (on_gpu) {
      device = ember::Device::cuda(0);
      gpu = eb::gpu_info(0, opt.ceilings);
    } else if (opt.device == "libtorch") {
      device = ember::Device::libtorch();
    } else if (opt.device == "vulkan" || opt.device == "vulkan+fusion") {
      device =
          opt.device == "vulkan" ? ember::Device::vulkan(0) : ember::Device::vulkan(0).fusion();
    } else {
      device = ember::Device::cpu();
    }
  } catch (const std::exception& e) {
    std::cerr << "ember-bench: --device " << opt.device << ": " << e.what() << "\n";
    return 1;
  }
  const ember::Device dev = *device;

  const std::vector<std::string> isa_ext = cpu_isa_extensions();
  const std::string caches = cpu_caches();
  const std::string cpu_line =
      cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) +
      " hardware threads; ISA extensions: " +
      (isa_ext.empty() ? "none of avx2 and above" : join(isa_ext, " ")) +
      "; ember's Cpu kernels: " + ember_cpu_isa() + (caches.empty() ? "" : "; caches: " + caches);
  std::cout << "ember-bench  device=" << dev.name() << "  size=" << eb::name(size)
            << "  reps=" << opt.reps << " (median)  warmup=" << opt.warmup << " (and "
            << opt.warmup_ms << " ms)"
            << "  rounds=" << opt.rounds << "\n"
            << "cpu:     " << cpu_line << "\n";
  if (on_gpu) std::cout << "gpu:     " << gpu.name << " (" << gpu.memory << ")\n";
  std::cout << "threads: " << threads << " (EMBER_NUM_THREADS; also OpenBLAS and torch)\n"
            << "OPENBLAS_CORETYPE: " << (coretype ? coretype : "unset") << "\n"
            << "commit:  " << commit << "\n"
            << "date:    " << started << "\n"
            << "load:    " << fmt(load_start) << " at start"
            << (load_start > 1.5 ? "  (above 1.5: timings are noisy)" : "") << "\n";

  // The PyTorch sides, before the ceilings: their GEMM rates are among the candidates.
  std::vector<TorchSide> torch;
  if (opt.backend != "ember") {
    const std::string script =
        opt.torch_script.empty() ? eb::default_torch_script() : opt.torch_script;
    // The reference (torch.compile with --torch-compile), then --torch-python2's, always
    // eager; without a reference there is no second side either.
    std::vector<std::pair<std::string, bool>> pythons{{eb::default_python(), opt.compile}};
    if (!opt.torch_python2.empty()) pythons.emplace_back(opt.torch_python2, false);
    for (std::size_t i = 0; i < pythons.size() && torch.size() == i; ++i) {
      const auto& [python, compile] = pythons[i];
      TorchSide side;
      side.python = python;
      side.bridge =
          std::make_unique<eb::TorchBridge>(python, script, threads, compile, opt.torch_device);
      if (side.bridge->available()) {
        const std::string version = side.bridge->info_field("torch");
        side.label = "PyTorch " + version.substr(0, version.find('+')) +
                     (side.bridge->info_field("mode") == "compile" ? " compile" : "");
        std::cout << "pytorch: " << side.bridge->info() << " (" << python << " " << script << ")\n";
        torch.push_back(std::move(side));
      } else {
        std::cout << "pytorch: unavailable at " << python << ": " << side.bridge->why() << "\n";
      }
    }
  }
  const bool have_torch = !torch.empty();
  if (opt.check && !have_torch) {
    std::cout << "SKIP: --check needs PyTorch, which is unavailable\n";
    return 77;  // ctest's SKIP_RETURN_CODE
  }

  double bw = 0;
  std::string copy_method = "not measured", ceilings_line;
  GemmCeiling gemm;
  if (opt.ceilings && on_gpu) {
    bw = gpu.copy_gbs;
    copy_method = "cudaMemcpyAsync device to device";
    gemm = gemm_ceiling(threads, dev, true);
    ceilings_line = "copy " + fmt(bw, 1) +
                    " GB/s (cudaMemcpyAsync of 256 MB device to device, reads + writes); GEMM " +
                    fmt(gemm.best(), 1) + " GFLOP/s (" + gemm.source() + ", TF32 off; bf16 " +
                    fmt(gemm.ember_bf16_gflops, 1) + " GFLOP/s)";
  }
  // Note [CPU ceilings by round]: on the CPU the ceilings are measured again before every
  // round and each rate is kept at its best over the rounds. One measurement can land in a
  // slow spell of a shared machine, and the rows' medians would then read above 100% of it.
  const bool cpu_ceilings = opt.ceilings && !on_gpu && opt.device.rfind("vulkan", 0) != 0;
  const auto measure_cpu_ceilings = [&] {
    const CopyCeiling copy = copy_bandwidth(threads);
    if (copy.gbs > bw) {
      bw = copy.gbs;
      copy_method = copy.method;
    }
    GemmCeiling now = gemm_ceiling(threads, dev, false);
    if (opt.torch_device == "cpu") {
      for (auto& side : torch) {
        pause_between_sides();
        add_torch_gemm_rates(now, *side.bridge, side.label);
      }
    }
    gemm.keep_best(now);
    ceilings_line = "copy " + fmt(bw, 1) + " GB/s (best of memcpy and a copy loop: " + copy_method +
                    ", 2 x 128 MiB, " + std::to_string(threads) + " threads); GEMM " +
                    fmt(gemm.best(), 1) + " GFLOP/s (" + gemm.source() +
                    ", the best f32 rate of: " + gemm.summary() + ")" +
                    (opt.rounds > 1 ? "; each the best over the rounds" : "");
    pause_between_sides();
    std::cout << "ceilings: copy " << fmt(copy.gbs, 1) << " GB/s; GEMM " << now.summary()
              << " GFLOP/s\n";
  };
  if (on_gpu && !ceilings_line.empty()) std::cout << "ceilings: " << ceilings_line << "\n";

  std::string tmpdir;
  if (opt.check) {
    char tmpl[] = "/tmp/ember-bench-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::cerr << "ember-bench: mkdtemp failed\n";
      return 1;
    }
    tmpdir = tmpl;
  }
  std::cout << std::endl;

  // The rows, in the order of eb::workloads(); each round adds one series of times to each.
  std::vector<Row> rows;
  for (const auto& w : eb::workloads()) {
    if (!selected(opt, w)) continue;
    Row r;
    r.name = w.name;
    r.group = w.group;
    r.torch.resize(torch.size());
    if (!w.unavailable.empty()) {
      r.available = false;
      r.note = w.unavailable;
    }
    rows.push_back(r);
  }
  int failures = 0;
  // Note [Warm-up by time]: on the 2-vCPU development machines, the second core comes to a
  // process's threads only some tens of milliseconds into a burst of parallel work after an
  // idle spell: two threads summing in parallel took 15-26 ms, not 12.7, in a process's first
  // 50 ms, and matmul 1024^2's median of 9 runs after 2 warm-ups was 9.5-9.8 ms in most
  // processes (slower than one thread's 8.6) and 4.3 ms in the rest — 4.2-4.4 in all of
  // them after 170 ms of warm-up. So the warm-ups go on until --warmup-ms have passed (200 on
  // the CPU), on both sides (the PyTorch script does the same).
  const auto timed = [&](eb::Case& c) {
    const auto w0 = Clock::now();
    for (int i = 0; i < opt.warmup || ms_since(w0) < opt.warmup_ms; ++i) c.run();
    std::vector<double> ms;
    for (int i = 0; i < opt.reps; ++i) {
      const auto t0 = Clock::now();
      c.run();
      ms.push_back(ms_since(t0));
    }
    return ms;
  };
  for (int round = 0; round < opt.rounds; ++round) {
    if (opt.rounds > 1) std::cout << "round " << round + 1 << " of " << opt.rounds << "\n";
    if (cpu_ceilings) measure_cpu_ceilings();
    const bool check = opt.check && round == 0;
    for (Row& r : rows) {
      const eb::Workload* w = nullptr;
      for (const auto& x : eb::workloads()) {
        if (x.name == r.name) w = &x;
      }
      if (!r.available || r.failed || !w) continue;
      std::cout << "  " << r.name << " ..." << std::flush;
      eb::Case c;
      try {
        c = w->make(size, dev);
        r.shape = c.shape;
        r.bytes = c.bytes;
        r.flops = c.flops;
        if (round == 0) {  // a case's own ceiling (and its note) from its first round
          r.add_note(c.note);
          r.stream_gbs = c.stream_gbs;
        }
        if (opt.backend != "torch") {
          r.ember.add(timed(c));
          std::cout << " ember " << fmt(median(r.ember.rounds.back()), 3) << " ms" << std::flush;
          if (opt.fusion) {
            eb::Case f = w->make(size, dev.fusion());
            r.fused.add(timed(f));
            std::cout << "  fused " << fmt(median(r.fused.rounds.back()), 3) << " ms" << std::flush;
          }
        }
      } catch (const std::exception& e) {  // e.g. out of memory: report it, go on
        r.add_note(std::string("ember failed: ") + e.what());
        r.failed = true;
        r.ember = {};
        std::cout << "  " << r.note << "\n";
        ++failures;
        continue;
      }
      for (std::size_t s = 0; s < torch.size(); ++s) {
        pause_between_sides();
        const bool check_side = check && s == 0;
        const std::string out = check_side ? tmpdir + "/" + r.name + ".bin" : "";
        const std::string who = s == 0 ? "PyTorch" : torch[s].label;
        try {
          auto tr =
              torch[s].bridge->run(r.name, c.params, opt.warmup, opt.warmup_ms, opt.reps, out);
          if (!tr.note.empty()) r.add_note(who + ": " + tr.note);
          std::cout << "  " << (s == 0 ? "torch" : "torch" + std::to_string(s + 1)) << " "
                    << fmt(median(tr.times_ms), 3) << " ms" << std::flush;
          r.torch[s].add(std::move(tr.times_ms));
          if (check_side && tr.output) {
            if (r.ember.empty()) c.run();
            const std::string diff = eb::compare(c.output(), *tr.output, c.rtol, c.atol);
            r.check = diff.empty() ? "ok" : diff;
            if (!diff.empty()) ++failures;
            std::cout << "  check " << (diff.empty() ? "ok" : "MISMATCH: " + diff);
          }
          std::remove(out.c_str());
        } catch (const std::exception& e) {
          r.add_note(who + " failed: " + e.what());
          std::cout << "  " << who << " failed: " << e.what();
          if (check_side) ++failures;
        }
      }
      if (!torch.empty()) pause_between_sides();
      std::cout << "\n";
    }
  }
  if (!tmpdir.empty()) rmdir(tmpdir.c_str());
  const double load_end = load_average();
  const std::string ended = utc_now();
  if (cpu_ceilings) std::cout << "\nceilings: " << ceilings_line << "\n";
  // A case with its own stream ceiling: each side's share of it, in the note.
  for (Row& r : rows) {
    if (r.stream_gbs <= 0 || r.bytes <= 0) continue;
    const double ideal_ms = r.bytes / (r.stream_gbs * 1e9) * 1e3;
    const double e = r.ember.ms(), t = r.torch.empty() ? 0.0 : r.torch[0].ms();
    std::string share;
    if (e > 0) share += "ember at " + fmt(100.0 * ideal_ms / e, 0) + "%";
    if (t > 0)
      share += std::string(e > 0 ? ", " : "") + "PyTorch at " + fmt(100.0 * ideal_ms / t, 0) + "%";
    if (!share.empty()) r.add_note(share + " of it");
  }

  // ---- the table ----
  // Per row: ember's time; each PyTorch side's time and ember/that side; the % roofline of
  // ember and of each side; the bound; the fused columns with --fusion.
  const auto ratio = [](double a, double b) { return a > 0 && b > 0 ? fmt(a / b, 2) : "-"; };
  const auto side_ms = [](const Row& r, std::size_t s) { return r.torch[s].ms(); };
  std::cout << "\nember/torch: ember time over PyTorch time, lower is better (< 1: ember "
               "faster).\n% roofline: ideal time (bytes at copy bandwidth or FLOPs at the "
               "GEMM rate) over measured time; higher is better.\n";
  for (std::size_t s = 1; s < torch.size(); ++s) {
    std::cout << "torch" << s + 1 << ": " << torch[s].label << "; torch: " << torch[0].label
              << "\n";
  }
  std::cout << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-25s %-24s %10s %10s %8s", "workload", "size", "ember ms",
                "torch ms", "e/torch");
  std::string head = line;
  for (std::size_t s = 1; s < torch.size(); ++s) {
    const std::string n = "torch" + std::to_string(s + 1);
    std::snprintf(line, sizeof line, " %10s %8s", (n + " ms").c_str(), ("e/" + n).c_str());
    head += line;
  }
  std::snprintf(line, sizeof line, " %7s %7s", "ember%", "torch%");
  head += line;
  for (std::size_t s = 1; s < torch.size(); ++s) {
    std::snprintf(line, sizeof line, " %7s", ("torch" + std::to_string(s + 1) + "%").c_str());
    head += line;
  }
  std::snprintf(line, sizeof line, " %5s", "bound");
  head += line;
  if (opt.fusion) {
    std::snprintf(line, sizeof line, " %10s %9s %8s %7s", "fused ms", "f/unf.", "f/torch",
                  "fused%");
    head += line;
  }
  std::cout << head << "\n" << std::string(head.size(), '-') << "\n";
  const double gf = gemm.best();
  for (const auto& r : rows) {
    if (!r.available) {
      std::cout << r.name << std::string(r.name.size() < 26 ? 26 - r.name.size() : 1, ' ') << r.note
                << "\n";
      continue;
    }
    const double e = r.ember.ms(), t = torch.empty() ? 0.0 : side_ms(r, 0), f = r.fused.ms();
    const auto ms = [](double v) { return v > 0 ? fmt(v, 3) : std::string("-"); };
    std::snprintf(line, sizeof line, "%-25s %-24s %10s %10s %8s", r.name.c_str(), r.shape.c_str(),
                  ms(e).c_str(), ms(t).c_str(), ratio(e, t).c_str());
    std::string out = line;
    for (std::size_t s = 1; s < torch.size(); ++s) {
      std::snprintf(line, sizeof line, " %10s %8s", ms(side_ms(r, s)).c_str(),
                    ratio(e, side_ms(r, s)).c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, " %7s %7s", roofline_pct(r, e, bw, gf).c_str(),
                  roofline_pct(r, t, bw, gf).c_str());
    out += line;
    for (std::size_t s = 1; s < torch.size(); ++s) {
      std::snprintf(line, sizeof line, " %7s", roofline_pct(r, side_ms(r, s), bw, gf).c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, " %5s", bound(r, bw, gf));
    out += line;
    if (opt.fusion) {
      std::snprintf(line, sizeof line, " %10s %9s %8s %7s", ms(f).c_str(), ratio(f, e).c_str(),
                    ratio(f, t).c_str(), roofline_pct(r, f, bw, gf).c_str());
      out += line;
    }
    std::cout << out << (r.note.empty() ? "" : "  " + r.note) << "\n";
  }
  std::cout << "\nload: " << fmt(load_start) << " at start, " << fmt(load_end)
            << " at end (the end value includes this run's own threads)"
            << (std::max(load_start, load_end) > 1.5 ? "  (above 1.5: timings are noisy)" : "")
            << "\n";
  if (opt.check) {
    std::cout << (failures ? std::to_string(failures) + " workload(s) disagree with PyTorch\n"
                           : "every workload agrees with PyTorch\n");
  }

  // ---- Markdown (the table of BENCHMARKS.md, with the run's machine and ceilings) ----
  if (!opt.markdown.empty()) {
    std::ofstream md(opt.markdown);
    md << "- CPU: " << cpu_line << "\n";
    if (on_gpu) md << "- GPU: " << gpu.name << " (" << gpu.memory << ")\n";
    md << "- Run: " << started << " to " << ended << ", commit `" << commit << "`, device "
       << dev.name() << ", " << threads << " threads, load average " << fmt(load_start)
       << " at start and " << fmt(load_end) << " at the end; median of " << opt.reps
       << " repetitions after " << opt.warmup << " warm-ups (and at least " << opt.warmup_ms
       << " ms of them)"
       << (opt.rounds > 1 ? ", in each of " + std::to_string(opt.rounds) +
                                " alternated rounds, then the median over the rounds"
                          : "")
       << "\n";
    if (!ceilings_line.empty()) md << "- Ceilings: " << ceilings_line << "\n";
    for (const auto& side : torch) md << "- " << side.label << ": " << side.bridge->info() << "\n";
    md << "\n";
    const std::string ref = torch.empty() ? "PyTorch" : torch[0].label;
    md << "| workload | size | ember ms | " << ref << " ms | ember/" << ref
       << " (lower is better) |";
    std::string align = "|---|---|---:|---:|---:|";
    for (std::size_t s = 1; s < torch.size(); ++s) {
      md << " " << torch[s].label << " ms | ember/" << torch[s].label << " |";
      align += "---:|---:|";
    }
    md << " ember % roofline | " << ref << " % roofline |";
    align += "---:|---:|";
    for (std::size_t s = 1; s < torch.size(); ++s) {
      md << " " << torch[s].label << " % roofline |";
      align += "---:|";
    }
    md << " bound |"
       << (opt.fusion ? " fused ms | fused/unfused | fused/PyTorch | fused % roofline |" : "");
    align += std::string("---|") + (opt.fusion ? "---:|---:|---:|---:|" : "");
    md << "\n" << align << "\n";
    const std::size_t columns = std::size_t(std::count(align.begin(), align.end(), '|')) - 1;
    for (const auto& r : rows) {
      if (!r.available) {
        md << "| " << r.name << " | " << r.note << " |";
        for (std::size_t i = 2; i < columns; ++i) md << " |";
        md << "\n";
        continue;
      }
      const double e = r.ember.ms(), t = torch.empty() ? 0.0 : side_ms(r, 0);
      const std::string name = r.note.empty() ? r.name : r.name + " (" + r.note + ")";
      // Sub-millisecond times (the GPU's) keep three significant digits.
      const auto ms = [](double v) { return v <= 0 ? std::string("-") : fmt(v, v < 1 ? 3 : 2); };
      md << "| " << name << " | " << r.shape << " | " << ms(e) << " | " << ms(t) << " | "
         << ratio(e, t) << " |";
      for (std::size_t s = 1; s < torch.size(); ++s) {
        md << " " << ms(side_ms(r, s)) << " | " << ratio(e, side_ms(r, s)) << " |";
      }
      md << " " << roofline_pct(r, e, bw, gf) << " | " << roofline_pct(r, t, bw, gf) << " |";
      for (std::size_t s = 1; s < torch.size(); ++s) {
        md << " " << roofline_pct(r, side_ms(r, s), bw, gf) << " |";
      }
      md << " " << bound(r, bw, gf) << " |";
      if (opt.fusion) {
        const double f = r.fused.ms();
        md << " " << ms(f) << " | " << ratio(f, e) << " | " << ratio(f, t) << " | "
           << roofline_pct(r, f, bw, gf) << " |";
      }
      md << "\n";
    }
    std::cout << "wrote " << opt.markdown << "\n";
  }

  // ---- JSON ----
  if (!opt.json.empty()) {
    std::ofstream js(opt.json);
    js << "{\n  \"device\": " << json_str(dev.name())
       << ",\n  \"gpu\": " << (on_gpu ? json_str(gpu.name) : "null")
       << ",\n  \"size\": " << json_str(eb::name(size)) << ",\n  \"reps\": " << opt.reps
       << ",\n  \"warmup\": " << opt.warmup << ",\n  \"warmup_ms\": " << opt.warmup_ms
       << ",\n  \"rounds\": " << opt.rounds << ",\n  \"threads\": " << threads
       << ",\n  \"cpu\": " << json_str(cpu_model())
       << ",\n  \"cpu_isa_extensions\": " << json_str(join(isa_ext, " "))
       << ",\n  \"ember_cpu_isa\": " << json_str(ember_cpu_isa())
       << ",\n  \"commit\": " << json_str(commit) << ",\n  \"started\": " << json_str(started)
       << ",\n  \"ended\": " << json_str(ended)
       << ",\n  \"openblas_coretype\": " << (coretype ? json_str(coretype) : "null")
       << ",\n  \"load_start\": " << fmt(load_start) << ",\n  \"load_end\": " << fmt(load_end)
       << ",\n  \"torch\": " << (have_torch ? json_str(torch[0].bridge->info()) : "null")
       << ",\n  \"torch2\": "
       << (torch.size() > 1 ? json_str(torch[1].bridge->info()) : std::string("null"))
       << ",\n  \"copy_bandwidth_gbs\": " << fmt(bw, 2)
       << ",\n  \"copy_method\": " << json_str(copy_method)
       << ",\n  \"gemm_gflops\": " << fmt(gf, 2)
       << ",\n  \"gemm_source\": " << json_str(gemm.source()) << ",\n  \"gemm_rates_gflops\": {";
    for (std::size_t i = 0; i < gemm.rates.size(); ++i) {
      js << (i ? ", " : "") << json_str(gemm.rates[i].source) << ": "
         << fmt(gemm.rates[i].gflops, 2);
    }
    js << "},\n  \"ember_bf16_gemm_gflops\": " << fmt(gemm.ember_bf16_gflops, 2)
       << ",\n  \"results\": [";
    const auto num = [](double v) { return v > 0 ? fmt(v, 4) : std::string("null"); };
    const auto ratio4 = [](double a, double b) {
      return a > 0 && b > 0 ? fmt(a / b, 4) : std::string("null");
    };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double e = r.ember.ms(), t = torch.empty() ? 0.0 : side_ms(r, 0);
      const double t2 = torch.size() > 1 ? side_ms(r, 1) : 0.0;
      js << (i ? "," : "") << "\n    {\"workload\": " << json_str(r.name)
         << ", \"group\": " << json_str(r.group)
         << ", \"available\": " << (r.available ? "true" : "false")
         << ", \"size\": " << json_str(r.shape) << ", \"bytes\": " << fmt(r.bytes, 0)
         << ", \"flops\": " << fmt(r.flops, 0) << ", \"ember_ms\": " << num(e)
         << ", \"torch_ms\": " << num(t) << ", \"ratio\": " << ratio4(e, t)
         << ", \"torch2_ms\": " << num(t2) << ", \"ratio2\": " << ratio4(e, t2)
         << ", \"ember_round_ms\": " << json_list(r.ember.round_medians())
         << ", \"torch_round_ms\": "
         << json_list(torch.empty() ? std::vector<double>{} : r.torch[0].round_medians())
         << ", \"ember_times_ms\": " << json_list(r.ember.all()) << ", \"torch_times_ms\": "
         << json_list(torch.empty() ? std::vector<double>{} : r.torch[0].all())
         << ", \"torch2_times_ms\": "
         << json_list(torch.size() > 1 ? r.torch[1].all() : std::vector<double>{})
         << ", \"fused_ms\": " << num(r.fused.ms())
         << ", \"fused_times_ms\": " << json_list(r.fused.all())
         << ", \"check\": " << json_str(r.check) << ", \"note\": " << json_str(r.note) << "}";
    }
    js << "\n  ]\n}\n";
    std::cout << "wrote " << opt.json << "\n";
  }
  return failures ? 1 : 0;
}
