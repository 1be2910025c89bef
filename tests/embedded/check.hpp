// A few checks for firmware tests: each case prints "ok <name>" or "FAIL <name>: why" over
// semihosting, and the firmware's exit code is the number of failed cases.
#pragma once

#include <cmath>
#include <cstdio>
#include <vector>

namespace ember::firmware {

inline int g_failed = 0, g_passed = 0;

inline void report(const char* name, bool ok, const char* why = "") {
  if (ok) {
    ++g_passed;
    std::printf("ok %s\n", name);
  } else {
    ++g_failed;
    std::printf("FAIL %s: %s\n", name, why);
  }
}

// Each got[i] within atol + rtol * |want[i]| of want[i] (and the same count).
inline void check_close(const char* name, const std::vector<float>& got,
                        const std::vector<double>& want, double atol, double rtol = 0.0) {
  if (got.size() != want.size()) {
    char why[96];
    std::snprintf(why, sizeof why, "%u values, expected %u", static_cast<unsigned>(got.size()),
                  static_cast<unsigned>(want.size()));
    return report(name, false, why);
  }
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double excess = err - (atol + rtol * std::fabs(want[i]));
    if (!(excess <= 0.0) && (excess > worst || std::isnan(excess))) {
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
    }
  }
  if (worst == 0.0) return report(name, true);
  char why[160];
  std::snprintf(why, sizeof why, "element %u is %.9g, expected %.9g", static_cast<unsigned>(at),
                static_cast<double>(got[at]), want[at]);
  report(name, false, why);
}

template <class T>
void check_equal(const char* name, const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] != want[i]) {
      char why[96];
      std::snprintf(why, sizeof why, "element %u is %lld, expected %lld", static_cast<unsigned>(i),
                    static_cast<long long>(got[i]), static_cast<long long>(want[i]));
      return report(name, false, why);
    }
  }
  report(name, got.size() == want.size(), "a different number of values");
}

inline int summary() {
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed;
}

}  // namespace ember::firmware
