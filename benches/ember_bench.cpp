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
//               [--json out.json] [--markdown table.md] [--check] [--no-ceilings]
//               [--torch-compile] [--torch-device cpu|cuda] [--torch-script PATH] [--fusion]
//               [--list]
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
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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
  std::optional<eb::SizeKind> size;  // unset: full on the CPU, gpu on cuda
  int reps = -1, warmup = -1;        // -1: size default
  std::string json, markdown;
  bool check = false, ceilings = true, compile = false, list = false, fusion = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember-bench: " << why
            << "\nusage: ember-bench [--device cpu|cuda|libtorch|vulkan|vulkan+fusion] [--filter "
               "a,b] [--backend "
               "ember|torch|both] [--size tiny|full|gpu] [--reps N] [--warmup N] [--json "
               "out.json] [--markdown out.md] [--check] [--no-ceilings] [--torch-compile] "
               "[--torch-device cpu|cuda] [--torch-script PATH] [--fusion] [--list]\n";
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

std::string cpu_model() {
  std::string l = read_first_line("/proc/cpuinfo", "model name");
  const auto p = l.find(':');
  return p == std::string::npos ? "unknown" : l.substr(p + 2);
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

struct GemmCeiling {
  double ember_gflops = 0, openblas_gflops = 0;
  double ember_bf16_gflops = 0;  // GPU only: reported, not a ceiling (the workloads are f32)
  std::size_t n = 2048;
  double best() const { return std::max(ember_gflops, openblas_gflops); }
  std::string source() const {
    return (openblas_gflops > ember_gflops ? "OpenBLAS sgemm " : "ember f32 matmul ") +
           std::to_string(n);
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

// CPU: ember's and OpenBLAS's sgemm at 2048. GPU: ember's f32 matmul at 8192 (cuBLASLt,
// TF32 off), plus its bf16 rate at 8192 for the header.
GemmCeiling gemm_ceiling(int threads, const ember::Device& dev, bool gpu) {
  GemmCeiling g;
  if (gpu) {
    g.n = 8192;
    g.ember_gflops = ember_gemm_gflops(dev, g.n, ember::DType::F32, 5);
    g.ember_bf16_gflops = ember_gemm_gflops(dev, g.n, ember::DType::BF16, 10);
    (void)threads;
    return g;
  }
  const std::size_t n = g.n;
  g.ember_gflops = ember_gemm_gflops(dev, n, ember::DType::F32, 3);
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
  g.openblas_gflops = flops / (best * 1e-3) / 1e9;
#else
  (void)threads;
#endif
  return g;
}

// ---- results ----

struct Row {
  std::string name, group, shape, note;
  bool available = true;
  double bytes = 0, flops = 0;
  double stream_gbs = 0;  // the case's own bandwidth ceiling (Case::stream_gbs), or 0
  std::vector<double> ember_ms, torch_ms, fused_ms;  // fused_ms: --fusion
  std::string check;                                 // "", "ok", or a mismatch description
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

  std::cout << "ember-bench  device=" << dev.name() << "  size=" << eb::name(size)
            << "  reps=" << opt.reps << " (median)  warmup=" << opt.warmup << "\n"
            << "cpu:     " << cpu_model() << ", " << std::thread::hardware_concurrency()
            << " hardware threads\n";
  if (on_gpu) std::cout << "gpu:     " << gpu.name << " (" << gpu.memory << ")\n";
  std::cout << "threads: " << threads << " (EMBER_NUM_THREADS; also OpenBLAS and torch)\n"
            << "OPENBLAS_CORETYPE: " << (coretype ? coretype : "unset") << "\n"
            << "commit:  " << commit << "\n"
            << "load:    " << fmt(load_start) << " at start"
            << (load_start > 1.5 ? "  (above 1.5: timings are noisy)" : "") << "\n";

  double bw = 0;
  std::string copy_method = "not measured";
  GemmCeiling gemm;
  if (opt.ceilings && on_gpu) {
    bw = gpu.copy_gbs;
    copy_method = "cudaMemcpyAsync device to device";
    gemm = gemm_ceiling(threads, dev, true);
    std::cout << "ceilings: copy " << fmt(bw, 1)
              << " GB/s (cudaMemcpyAsync of 256 MB device to device, reads + writes); GEMM "
              << fmt(gemm.best(), 1) << " GFLOP/s (" << gemm.source() << ", TF32 off; bf16 "
              << fmt(gemm.ember_bf16_gflops, 1) << " GFLOP/s)\n";
  } else if (opt.ceilings && opt.device.rfind("vulkan", 0) != 0) {
    const CopyCeiling copy = copy_bandwidth(threads);
    bw = copy.gbs;
    copy_method = copy.method;
    gemm = gemm_ceiling(threads, dev, false);
    std::cout << "ceilings: copy " << fmt(bw, 1)
              << " GB/s (best of memcpy and a copy loop: " << copy.method << ", 2 x 128 MiB, "
              << threads << " threads); GEMM " << fmt(gemm.best(), 1) << " GFLOP/s ("
              << gemm.source() << "; ember " << fmt(gemm.ember_gflops, 1) << ", OpenBLAS "
              << (gemm.openblas_gflops > 0 ? fmt(gemm.openblas_gflops, 1) : "n/a") << ")\n";
    pause_between_sides();
  }

  std::unique_ptr<eb::TorchBridge> torch;
  if (opt.backend != "ember") {
    const std::string script =
        opt.torch_script.empty() ? eb::default_torch_script() : opt.torch_script;
    torch = std::make_unique<eb::TorchBridge>(eb::default_python(), script, threads, opt.compile,
                                              opt.torch_device);
    if (torch->available()) {
      std::cout << "pytorch: " << torch->info() << " (" << eb::default_python() << " " << script
                << ")\n";
    } else {
      std::cout << "pytorch: unavailable: " << torch->why() << "\n";
    }
  }
  const bool have_torch = torch && torch->available();
  if (opt.check && !have_torch) {
    std::cout << "SKIP: --check needs PyTorch, which is unavailable\n";
    return 77;  // ctest's SKIP_RETURN_CODE
  }
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

  std::vector<Row> rows;
  int failures = 0;
  for (const auto& w : eb::workloads()) {
    if (!selected(opt, w)) continue;
    Row r;
    r.name = w.name;
    r.group = w.group;
    if (!w.unavailable.empty()) {
      r.available = false;
      r.note = w.unavailable;
      rows.push_back(r);
      continue;
    }
    std::cout << "  " << w.name << " ..." << std::flush;
    eb::Case c;
    try {
      c = w.make(size, dev);
      r.shape = c.shape;
      r.bytes = c.bytes;
      r.flops = c.flops;
      r.note = c.note;
      r.stream_gbs = c.stream_gbs;
      if (opt.backend != "torch") {
        for (int i = 0; i < opt.warmup; ++i) c.run();
        for (int i = 0; i < opt.reps; ++i) {
          const auto t0 = Clock::now();
          c.run();
          r.ember_ms.push_back(ms_since(t0));
        }
        std::cout << " ember " << fmt(median(r.ember_ms), 3) << " ms" << std::flush;
        if (opt.fusion) {
          eb::Case f = w.make(size, dev.fusion());
          for (int i = 0; i < opt.warmup; ++i) f.run();
          for (int i = 0; i < opt.reps; ++i) {
            const auto t0 = Clock::now();
            f.run();
            r.fused_ms.push_back(ms_since(t0));
          }
          std::cout << "  fused " << fmt(median(r.fused_ms), 3) << " ms" << std::flush;
        }
      }
    } catch (const std::exception& e) {  // e.g. out of memory: report it, go on
      r.note = std::string("ember failed: ") + e.what();
      r.ember_ms.clear();
      std::cout << "  " << r.note << "\n";
      ++failures;
      rows.push_back(r);
      continue;
    }
    if (have_torch) {
      pause_between_sides();
      const std::string out = opt.check ? tmpdir + "/" + w.name + ".bin" : "";
      try {
        auto tr = torch->run(w.name, c.params, opt.warmup, opt.reps, out);
        r.torch_ms = tr.times_ms;
        if (!tr.note.empty()) r.note += (r.note.empty() ? "PyTorch: " : "; PyTorch: ") + tr.note;
        std::cout << "  torch " << fmt(median(r.torch_ms), 3) << " ms" << std::flush;
        if (opt.check && tr.output) {
          if (r.ember_ms.empty()) c.run();
          const std::string diff = eb::compare(c.output(), *tr.output, c.rtol, c.atol);
          r.check = diff.empty() ? "ok" : diff;
          if (!diff.empty()) ++failures;
          std::cout << "  check " << (diff.empty() ? "ok" : "MISMATCH: " + diff);
        }
        std::remove(out.c_str());
      } catch (const std::exception& e) {
        r.note = std::string("PyTorch failed: ") + e.what();
        std::cout << "  " << r.note;
        if (opt.check) ++failures;
      }
      pause_between_sides();
    }
    std::cout << "\n";
    rows.push_back(r);
  }
  if (!tmpdir.empty()) rmdir(tmpdir.c_str());
  const double load_end = load_average();
  // A case with its own stream ceiling: each side's share of it, in the note.
  for (Row& r : rows) {
    if (r.stream_gbs <= 0 || r.bytes <= 0) continue;
    const double ideal_ms = r.bytes / (r.stream_gbs * 1e9) * 1e3;
    const double e = median(r.ember_ms), t = median(r.torch_ms);
    if (e > 0) r.note += "; ember at " + fmt(100.0 * ideal_ms / e, 0) + "%";
    if (t > 0) r.note += ", PyTorch at " + fmt(100.0 * ideal_ms / t, 0) + "%";
    if (e > 0 || t > 0) r.note += " of it";
  }

  // ---- the table ----
  std::cout << "\nember/torch: ember time over PyTorch time, lower is better (< 1: ember "
               "faster).\n% roofline: ideal time (bytes at copy bandwidth or FLOPs at the "
               "GEMM rate) over measured time; higher is better.\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-25s %-24s %10s %10s %8s %7s %7s %5s", "workload", "size",
                "ember ms", "torch ms", "e/torch", "ember%", "torch%", "bound");
  std::cout << line;
  if (opt.fusion) {
    std::snprintf(line, sizeof line, " %10s %9s %8s %7s", "fused ms", "f/unf.", "f/torch",
                  "fused%");
    std::cout << line;
  }
  std::cout << "\n" << std::string(opt.fusion ? 140 : 102, '-') << "\n";
  for (const auto& r : rows) {
    if (!r.available) {
      std::snprintf(line, sizeof line, "%-25s %s\n", r.name.c_str(), r.note.c_str());
      std::cout << line;
      continue;
    }
    const double e = median(r.ember_ms), t = median(r.torch_ms), f = median(r.fused_ms);
    std::string fused_cols;
    if (opt.fusion) {
      char fl[128];
      std::snprintf(fl, sizeof fl, " %10s %9s %8s %7s", f > 0 ? fmt(f, 3).c_str() : "-",
                    f > 0 && e > 0 ? fmt(f / e, 2).c_str() : "-",
                    f > 0 && t > 0 ? fmt(f / t, 2).c_str() : "-",
                    roofline_pct(r, f, bw, gemm.best()).c_str());
      fused_cols = fl;
    }
    std::snprintf(line, sizeof line, "%-25s %-24s %10s %10s %8s %7s %7s %5s%s%s\n", r.name.c_str(),
                  r.shape.c_str(), e > 0 ? fmt(e, 3).c_str() : "-", t > 0 ? fmt(t, 3).c_str() : "-",
                  e > 0 && t > 0 ? fmt(e / t, 2).c_str() : "-",
                  roofline_pct(r, e, bw, gemm.best()).c_str(),
                  roofline_pct(r, t, bw, gemm.best()).c_str(), bound(r, bw, gemm.best()),
                  fused_cols.c_str(), r.note.empty() ? "" : ("  " + r.note).c_str());
    std::cout << line;
  }
  std::cout << "\nload: " << fmt(load_start) << " at start, " << fmt(load_end)
            << " at end (the end value includes this run's own threads)"
            << (std::max(load_start, load_end) > 1.5 ? "  (above 1.5: timings are noisy)" : "")
            << "\n";
  if (opt.check) {
    std::cout << (failures ? std::to_string(failures) + " workload(s) disagree with PyTorch\n"
                           : "every workload agrees with PyTorch\n");
  }

  // ---- Markdown (the table of BENCHMARKS.md) ----
  if (!opt.markdown.empty()) {
    std::ofstream md(opt.markdown);
    md << "| workload | size | ember ms | PyTorch ms | ember/PyTorch (lower is better) | ember % "
          "roofline | PyTorch % roofline | bound |"
       << (opt.fusion ? " fused ms | fused/unfused | fused/PyTorch | fused % roofline |" : "")
       << "\n|---|---|---:|---:|---:|---:|---:|---|" << (opt.fusion ? "---:|---:|---:|---:|" : "")
       << "\n";
    for (const auto& r : rows) {
      if (!r.available) {
        md << "| " << r.name << " | " << r.note << " | | | | | | |\n";
        continue;
      }
      const double e = median(r.ember_ms), t = median(r.torch_ms);
      const std::string name = r.note.empty() ? r.name : r.name + " (" + r.note + ")";
      // Sub-millisecond times (the GPU's) keep three significant digits.
      const auto ms = [](double v) { return v <= 0 ? std::string("-") : fmt(v, v < 1 ? 3 : 2); };
      md << "| " << name << " | " << r.shape << " | " << ms(e) << " | " << ms(t) << " | "
         << (e > 0 && t > 0 ? fmt(e / t, 2) : "-") << " | " << roofline_pct(r, e, bw, gemm.best())
         << " | " << roofline_pct(r, t, bw, gemm.best()) << " | " << bound(r, bw, gemm.best())
         << " |";
      if (opt.fusion) {
        const double f = median(r.fused_ms);
        md << " " << ms(f) << " | " << (f > 0 && e > 0 ? fmt(f / e, 2) : "-") << " | "
           << (f > 0 && t > 0 ? fmt(f / t, 2) : "-") << " | " << roofline_pct(r, f, bw, gemm.best())
           << " |";
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
       << ",\n  \"warmup\": " << opt.warmup << ",\n  \"threads\": " << threads
       << ",\n  \"cpu\": " << json_str(cpu_model()) << ",\n  \"commit\": " << json_str(commit)
       << ",\n  \"openblas_coretype\": " << (coretype ? json_str(coretype) : "null")
       << ",\n  \"load_start\": " << fmt(load_start) << ",\n  \"load_end\": " << fmt(load_end)
       << ",\n  \"torch\": " << (have_torch ? json_str(torch->info()) : "null")
       << ",\n  \"copy_bandwidth_gbs\": " << fmt(bw, 2)
       << ",\n  \"copy_method\": " << json_str(copy_method)
       << ",\n  \"gemm_gflops\": " << fmt(gemm.best(), 2)
       << ",\n  \"gemm_source\": " << json_str(gemm.source())
       << ",\n  \"ember_bf16_gemm_gflops\": " << fmt(gemm.ember_bf16_gflops, 2)
       << ",\n  \"ember_gemm_gflops\": " << fmt(gemm.ember_gflops, 2)
       << ",\n  \"openblas_gemm_gflops\": " << fmt(gemm.openblas_gflops, 2)
       << ",\n  \"results\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double e = median(r.ember_ms), t = median(r.torch_ms);
      js << (i ? "," : "") << "\n    {\"workload\": " << json_str(r.name)
         << ", \"group\": " << json_str(r.group)
         << ", \"available\": " << (r.available ? "true" : "false")
         << ", \"size\": " << json_str(r.shape) << ", \"bytes\": " << fmt(r.bytes, 0)
         << ", \"flops\": " << fmt(r.flops, 0) << ", \"ember_ms\": " << (e > 0 ? fmt(e, 4) : "null")
         << ", \"torch_ms\": " << (t > 0 ? fmt(t, 4) : "null")
         << ", \"ratio\": " << (e > 0 && t > 0 ? fmt(e / t, 4) : "null")
         << ", \"ember_times_ms\": " << json_list(r.ember_ms)
         << ", \"torch_times_ms\": " << json_list(r.torch_ms)
         << ", \"fused_ms\": " << (!r.fused_ms.empty() ? fmt(median(r.fused_ms), 4) : "null")
         << ", \"fused_times_ms\": " << json_list(r.fused_ms)
         << ", \"check\": " << json_str(r.check) << ", \"note\": " << json_str(r.note) << "}";
    }
    js << "\n  ]\n}\n";
    std::cout << "wrote " << opt.json << "\n";
  }
  return failures ? 1 : 0;
}
