// The Fusion decorator's report: counters, the recent groups and the close reasons behind
// fusion::report(device), and the EMBER_FUSION_LOG lines. Private to src/fusion/.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "ember/backend/fused_group.hpp"

namespace ember::fusion {

class ReportState {
 public:
  explicit ReportState(int log_level) : log_(log_level) {}
  int log_level() const { return log_; }

  // A flush of `records` records, for `why`.
  void flush(std::size_t records, backend::CloseReason why);
  // An op run alone (not inside a group).
  void alone(const char* op);
  // A group of instructions; fills info.plan_cached from the keys seen before.
  void group(backend::FusionGroupInfo info);
  void recorded() {
    std::lock_guard lk(mu_);
    ++r_.records;
  }
  // EMBER_FUSION_LOG=3: one decision of the grouping.
  void decision(const std::string& line) const;

  backend::FusionReport snapshot() const;
  void reset();

 private:
  mutable std::mutex mu_;
  int log_;
  backend::FusionReport r_;
  std::unordered_set<std::uint64_t> keys_;
};

}  // namespace ember::fusion
