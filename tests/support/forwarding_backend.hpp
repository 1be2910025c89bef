// A test backend that hands every call to an inner backend, so that a test double overrides
// only what it changes (the fused-group capability, run_fused, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ember/backend/backend.hpp>
#include <ember/backend/fused_group.hpp>

namespace ember::testing {

class ForwardingBackend : public backend::Backend {
 public:
  explicit ForwardingBackend(std::shared_ptr<backend::Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  ir::Handle from_data(const TensorData& d) override { return inner_->from_data(d); }
  TensorData to_data(const ir::Handle& x) override { return inner_->to_data(x); }
  std::vector<ir::Handle> execute(ir::Op op) override { return inner_->execute(std::move(op)); }
  bool supports(const ir::Op& op) const override { return inner_->supports(op); }
  void seed(std::uint64_t s) override { inner_->seed(s); }
  backend::MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void sync() override { inner_->sync(); }
  bool runs_fused() const override { return inner_->runs_fused(); }
  backend::FusedCaps fused_caps() const override { return inner_->fused_caps(); }
  std::vector<ir::Handle> run_fused(backend::FusedGroup g) override {
    return inner_->run_fused(std::move(g));
  }
  backend::RandomCounters reserve_random(std::uint64_t n) override {
    return inner_->reserve_random(n);
  }
  ir::Handle draw_random(const ir::Random& op, const backend::RandomCounters& at) override {
    return inner_->draw_random(op, at);
  }

 protected:
  std::shared_ptr<backend::Backend> inner_;
};

}  // namespace ember::testing
