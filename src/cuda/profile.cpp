// EMBER_CUDA_PROFILE=1: see profile.hpp. Counters are relaxed atomics (ops may run on
// several threads); the report is printed by a static object's destructor at exit.
#include "cuda/profile.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace ember::cuda::profile {
namespace {

constexpr std::size_t kKinds = std::variant_size_v<ir::Op>;

struct Stat {
  std::atomic<std::uint64_t> n{0}, ns{0};
  void add(std::uint64_t t) {
    n.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(t, std::memory_order_relaxed);
  }
};

const char* counter_name(Counter c) {
  switch (c) {
    case Counter::Launch:
      return "kernel launches";
    case Counter::Gemm:
      return "cuBLASLt matmuls";
    case Counter::GemmHeuristic:
      return "cuBLASLt algorithm queries";
    case Counter::Cudnn:
      return "cuDNN convolutions";
    case Counter::Sync:
      return "stream syncs";
    case Counter::Copy:
      return "layout copies for kernels";
    case Counter::kCount:
      break;
  }
  return "?";
}

struct Profile {
  std::array<Stat, kKinds> ops, fallbacks;
  Stat fused, to_host, to_device, waits;
  std::array<std::atomic<std::uint64_t>, std::size_t(Counter::kCount)> counters{};
  std::atomic<std::uint64_t> first{0}, last{0};

  void touch(std::uint64_t t) {
    std::uint64_t zero = 0;
    first.compare_exchange_strong(zero, t, std::memory_order_relaxed);
    last.store(t, std::memory_order_relaxed);
  }

  ~Profile() {
    if (first.load() == 0) return;
    const double span = double(last.load() - first.load()) * 1e-6;
    std::fprintf(stderr, "ember cuda profile: %.1f ms from the first op to the last\n", span);
    std::fprintf(stderr, "  %-16s %9s %11s %8s\n", "op", "calls", "host ms", "us/call");
    std::vector<std::pair<std::uint64_t, std::string>> rows;
    std::uint64_t total_n = 0, total_ns = 0;
    const auto row = [&](const char* what, const Stat& s) {
      const std::uint64_t n = s.n.load(), ns = s.ns.load();
      if (!n) return;
      char line[160];
      std::snprintf(line, sizeof line, "  %-16s %9llu %11.2f %8.2f", what,
                    static_cast<unsigned long long>(n), double(ns) * 1e-6,
                    double(ns) * 1e-3 / double(n));
      rows.emplace_back(ns, line);
    };
    for (std::size_t k = 0; k < kKinds; ++k) {
      total_n += ops[k].n.load();
      total_ns += ops[k].ns.load();
      row(ir::name(static_cast<ir::OpKind>(k)), ops[k]);
      if (fallbacks[k].n.load()) {
        const std::string what = std::string("FALLBACK ") + ir::name(static_cast<ir::OpKind>(k));
        row(what.c_str(), fallbacks[k]);
      }
    }
    row("fused group", fused);
    row("to_data", to_host);
    row("from_data", to_device);
    row("sync wait", waits);
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& r : rows) std::fprintf(stderr, "%s\n", r.second.c_str());
    std::fprintf(stderr, "  ops %llu, %.2f ms of host time in execute()\n",
                 static_cast<unsigned long long>(total_n), double(total_ns) * 1e-6);
    for (std::size_t c = 0; c < counters.size(); ++c)
      std::fprintf(stderr, "  %s: %llu\n", counter_name(static_cast<Counter>(c)),
                   static_cast<unsigned long long>(counters[c].load()));
  }
};

Profile& the() {
  static Profile p;
  return p;
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_CUDA_PROFILE");
    if (!v || std::strcmp(v, "1") != 0) return false;
    the();  // constructed now, so destroyed (and printed) after the backend's users
    return true;
  }();
  return on;
}

void count(Counter c, std::uint64_t n) {
  the().counters[std::size_t(c)].fetch_add(n, std::memory_order_relaxed);
}

void op(ir::OpKind k, std::uint64_t ns, bool fallback) {
  auto& p = the();
  (fallback ? p.fallbacks : p.ops)[std::size_t(k)].add(ns);
  p.touch(now_ns());
}

void fused(std::uint64_t ns) {
  the().fused.add(ns);
  the().touch(now_ns());
}
void transfer(bool to_host, std::uint64_t ns) {
  (to_host ? the().to_host : the().to_device).add(ns);
}
void sync_wait(std::uint64_t ns) { the().waits.add(ns); }

}  // namespace ember::cuda::profile
