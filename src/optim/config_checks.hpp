// The checks every optimizer config runs in init(): errors name the config and the field.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "ember/base/error.hpp"

namespace ember::optim::detail {

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
// A beta (a decay rate): in [0, 1).
inline void check_beta(const char* config, const char* field, double v) {
  EMBER_CHECK(v >= 0.0 && v < 1.0,
              std::string(config) + "::init: " + field + " must be in [0, 1), got " + num(v));
}
// A finite, non-negative coefficient (weight decay, epsilon, momentum).
inline void check_non_negative(const char* config, const char* field, double v) {
  EMBER_CHECK(std::isfinite(v) && v >= 0.0,
              std::string(config) + "::init: " + field + " must be finite and >= 0, got " + num(v));
}
inline void check_positive(const char* config, const char* field, double v) {
  EMBER_CHECK(std::isfinite(v) && v > 0.0,
              std::string(config) + "::init: " + field + " must be finite and > 0, got " + num(v));
}

}  // namespace ember::optim::detail
