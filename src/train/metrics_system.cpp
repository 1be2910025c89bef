// Metrics of the run itself: the gradient norm, CPU use, host and device memory.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include <ember/base/error.hpp>
#include <ember/train/metrics.hpp>

namespace ember::train {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double max_or_first(double peak, double v) { return std::isnan(peak) ? v : std::max(peak, v); }

}  // namespace

// ---- GradientNorm ----

void GradientNorm::update(const MetricInput& in) {
  EMBER_CHECK(!std::isnan(in.grad_norm),
              name() +
                  ": MetricInput::grad_norm is missing (NaN); the step must report the "
                  "global L2 norm of its gradients");
  add(in.grad_norm, 1);
}
std::unique_ptr<Metric> GradientNorm::clone_empty() const {
  return std::make_unique<GradientNorm>();
}

// ---- CpuUse ----

namespace {

// User plus system CPU time of every thread of the process, in seconds.
double process_cpu_seconds() {
  rusage u{};
  EMBER_CHECK(getrusage(RUSAGE_SELF, &u) == 0, "CpuUse: getrusage(RUSAGE_SELF) failed");
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percent(double cpu, double wall) { return wall > 0 ? 100.0 * cpu / wall : kNoValue; }

}  // namespace

CpuUse::CpuUse() { reset(); }

void CpuUse::update(const MetricInput&) {
  const double cpu = process_cpu_seconds();
  const double wall = wall_seconds();
  value_ = percent(cpu - start_cpu_, wall - start_wall_);
  last_ = percent(cpu - prev_cpu_, wall - prev_wall_);
  prev_cpu_ = cpu;
  prev_wall_ = wall;
}

void CpuUse::reset() {
  start_cpu_ = prev_cpu_ = process_cpu_seconds();
  start_wall_ = prev_wall_ = wall_seconds();
  value_ = last_ = kNoValue;
}

std::unique_ptr<Metric> CpuUse::clone_empty() const { return std::make_unique<CpuUse>(); }

// The process's clocks do not survive it: the state is the time since reset up to the last
// update, and a restore places the start that far before now.
nn::Json CpuUse::state() const {
  return {{"cpu_seconds", detail::state_number(prev_cpu_ - start_cpu_)},
          {"wall_seconds", detail::state_number(prev_wall_ - start_wall_)},
          {"value", detail::state_number(value_)},
          {"last", detail::state_number(last_)}};
}
void CpuUse::load_state(const nn::Json& j) {
  const double cpu = detail::state_number(detail::state_field(j, "cpu_seconds"), "cpu_seconds");
  const double wall = detail::state_number(detail::state_field(j, "wall_seconds"), "wall_seconds");
  prev_cpu_ = process_cpu_seconds();
  prev_wall_ = wall_seconds();
  start_cpu_ = prev_cpu_ - cpu;
  start_wall_ = prev_wall_ - wall;
  value_ = detail::state_number(detail::state_field(j, "value"), "value");
  last_ = detail::state_number(detail::state_field(j, "last"), "last");
}

// ---- HostMemory ----

std::size_t HostMemory::resident_bytes() {
  // statm: total program size, then resident pages, ... (proc(5)).
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  EMBER_CHECK(statm && (statm >> size >> resident),
              "HostMemory: cannot read the resident set size from /proc/self/statm");
  const long page = sysconf(_SC_PAGESIZE);
  EMBER_CHECK(page > 0, "HostMemory: sysconf(_SC_PAGESIZE) failed");
  return resident * static_cast<std::size_t>(page);
}

void HostMemory::update(const MetricInput&) {
  last_ = static_cast<double>(resident_bytes()) / kMiB;
  peak_ = max_or_first(peak_, last_);
}
void HostMemory::reset() { peak_ = last_ = kNoValue; }
std::unique_ptr<Metric> HostMemory::clone_empty() const { return std::make_unique<HostMemory>(); }

// ---- DeviceMemory ----

DeviceMemory::DeviceMemory(Device device) : device_(std::move(device)) {}

void DeviceMemory::update(const MetricInput&) {
  last_ = static_cast<double>(memory_stats(device_).in_use) / kMiB;
  peak_ = max_or_first(peak_, last_);
}
void DeviceMemory::reset() { peak_ = last_ = kNoValue; }
std::unique_ptr<Metric> DeviceMemory::clone_empty() const {
  return std::make_unique<DeviceMemory>(device_);
}

}  // namespace ember::train
