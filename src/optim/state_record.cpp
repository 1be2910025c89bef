// Optimizer and scheduler states as record files (ember/optim/state_record.hpp), over
// record's free-standing tensors (save_tensors / load_tensors / inspect).
#include "ember/optim/state_record.hpp"

namespace ember::record {

namespace {

std::vector<NamedTensor> named(const optim::OptimizerState& state) {
  std::vector<NamedTensor> tensors;
  tensors.reserve(state.tensors.size());
  for (const auto& [k, t] : state.tensors) tensors.push_back({k, t});
  return tensors;
}

SaveOptions with_meta(const optim::OptimizerState& state, const SaveOptions& options,
                      const std::string& where) {
  EMBER_CHECK(options.config.is_null(),
              "record::save(OptimizerState, " + where +
                  "): options.config must be empty (the state's meta is saved as the config)");
  EMBER_CHECK(state.meta.is_object() &&
                  (state.meta.contains("optimizer") || state.meta.contains("scheduler")),
              "record::save(OptimizerState, " + where +
                  "): the state's meta names no optimizer or scheduler");
  SaveOptions o = options;
  o.config = state.meta;
  return o;
}

optim::OptimizerState assemble(const RecordInfo& info, std::vector<NamedTensor> tensors,
                               const std::string& where) {
  EMBER_CHECK(info.config.is_object() &&
                  (info.config.contains("optimizer") || info.config.contains("scheduler")),
              "record::load(OptimizerState, " + where +
                  "): the file holds no optimizer or scheduler state (its config names "
                  "neither; a model file?)");
  optim::OptimizerState s;
  s.meta = info.config;
  for (auto& t : tensors) s.tensors.emplace_back(std::move(t.key), std::move(t.tensor));
  return s;
}

}  // namespace

void save(const optim::OptimizerState& state, const std::string& path, const SaveOptions& options) {
  save_tensors(named(state), path, with_meta(state, options, path));
}

std::vector<std::byte> save_bytes(const optim::OptimizerState& state, Format format,
                                  const SaveOptions& options) {
  std::vector<detail::SaveTensor> list;
  for (const auto& [k, t] : state.tensors)
    list.push_back(detail::SaveTensor{k, nn::TensorRole::Buffer, 0, false, false, t});
  return detail::save_tensors_bytes(list, format, with_meta(state, options, "bytes"));
}

optim::OptimizerState load(optim::OptimizerState&& into, const std::string& path, const Device& dev,
                           const LoadOptions& options) {
  into = assemble(inspect(path, options), load_tensors(path, dev, options), path);
  return std::move(into);
}

optim::OptimizerState load(optim::OptimizerState&& into, std::span<const std::byte> bytes,
                           const Device& dev, const LoadOptions& options) {
  into = assemble(inspect(bytes, options), load_tensors(bytes, dev, options), "bytes");
  return std::move(into);
}

}  // namespace ember::record
