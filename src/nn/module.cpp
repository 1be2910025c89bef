// The non-template parts of the module system: param ids, the checks on mapped tensors
// and the summary table.
#include "ember/nn/module.hpp"

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include "ember/base/config.hpp"

namespace ember::nn {

ParamId fresh_param_id() {
  static Atomic<ParamId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

const char* name(TensorRole role) { return role == TensorRole::Param ? "param" : "buffer"; }

namespace detail {

DynTensor prepare_param(DynTensor t, bool trainable) {
  EMBER_CHECK(t.kind() == Kind::Float,
              std::string("nn::Param: a param holds a float tensor, got dtype ") + name(t.dtype()));
  if (!t.device().is_autodiff()) return t;
  if (!trainable) return ops::detach(std::move(t));
  if (ops::is_require_grad(t)) return t;
  return ops::require_grad(std::move(t));
}

DynTensor prepare_buffer(DynTensor t) { return ops::detach(std::move(t)); }

void check_mapped(const TensorEntry& e, std::size_t rank, Kind kind) {
  EMBER_CHECK(e.tensor.rank() == rank && e.tensor.kind() == kind,
              "nn::map: '" + std::string(e.path) + "' is a rank-" + std::to_string(rank) + " " +
                  ember::name(kind) + " " + nn::name(e.role) + "; the mapper gave shape " +
                  e.tensor.shape().to_string() + " of dtype " + ember::name(e.tensor.dtype()));
}

void rethrow_from(NodeRef origin) {
#if EMBER_HAS_EXCEPTIONS
  try {
    throw;
  } catch (const LayerError&) {
    throw;
  } catch (const Error& e) {
    throw LayerError(e.what(), origin);
  }
#else
  static_cast<void>(origin);
  std::abort();
#endif
}

std::ostream& write_summary(std::ostream& os, const std::string& summary) { return os << summary; }

}  // namespace detail

void SummaryBuilder::begin_module(const std::string& path, std::string_view type) {
  // A row is named by its path below the enclosing module's ("blocks.0" inside Net).
  std::string name = path;
  if (!open_.empty()) {
    const std::string& parent = rows_[open_.back()].path;
    if (!parent.empty() && name.size() > parent.size()) name = name.substr(parent.size() + 1);
  }
  rows_.push_back(Row{open_.size(), path, std::move(name), std::string(type), {}});
  open_.push_back(rows_.size() - 1);
}

void SummaryBuilder::end_module() {
  EMBER_ASSERT(!open_.empty());
  open_.pop_back();
}

void SummaryBuilder::tensor(const std::string& path, const TensorEntry& e) {
  if (open_.empty()) begin_module(path, "Tensor");  // a bare Param or Buffer summarised
  Row& row = rows_[open_.back()];
  std::string label = path;
  if (!row.path.empty() && label.size() > row.path.size())
    label = label.substr(row.path.size() + 1);
  label += ' ' + e.shape().to_string();
  const std::size_t n = e.tensor.num_elements();
  if (e.is_param()) {
    row.params += n;
    if (e.trainable) row.trainable += n;
  } else {
    label += " (buffer)";
    row.buffers += n;
  }
  row.tensors.push_back(std::move(label));
}

namespace {
std::string with_commas(std::size_t n) {
  std::string s = std::to_string(n), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}
}  // namespace

std::string SummaryBuilder::str() const {
  // Each row's count covers its subtree: the rows after it that are deeper.
  std::vector<std::size_t> totals(rows_.size());
  std::size_t total = 0, trainable = 0, buffers = 0;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    totals[i] = rows_[i].params;
    for (std::size_t j = i + 1; j < rows_.size() && rows_[j].depth > rows_[i].depth; ++j)
      totals[i] += rows_[j].params;
    total += rows_[i].params;
    trainable += rows_[i].trainable;
    buffers += rows_[i].buffers;
  }
  std::vector<std::string> names, shapes, counts;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::string name(2 * r.depth, ' ');
    name += r.path.empty() ? r.type : r.name + " (" + r.type + ")";
    std::string tensors;
    for (const auto& t : r.tensors) tensors += (tensors.empty() ? "" : ", ") + t;
    names.push_back(std::move(name));
    shapes.push_back(std::move(tensors));
    counts.push_back(with_commas(totals[i]));
  }
  std::size_t wn = std::string("Layer (type)").size(), ws = std::string("Tensors").size(),
              wc = std::string("Params").size();
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    wn = std::max(wn, names[i].size());
    ws = std::max(ws, shapes[i].size());
    wc = std::max(wc, counts[i].size());
  }
  std::string os;  // (a string, not a stream: embedded builds have no iostreams)
  const auto line = [&](char c) { os.append(wn + ws + wc + 4, c) += '\n'; };
  const auto row = [&](const std::string& a, const std::string& b, const std::string& c) {
    os += a;
    os.append(wn - a.size() + 2, ' ') += b;
    os.append(ws - b.size() + 2, ' ').append(wc - c.size(), ' ') += c;
    os += '\n';
  };
  line('=');
  row("Layer (type)", "Tensors", "Params");
  line('=');
  for (std::size_t i = 0; i < rows_.size(); ++i) row(names[i], shapes[i], counts[i]);
  line('=');
  os += "Total params: " + with_commas(total) + "\nTrainable params: " + with_commas(trainable) +
        "\nNon-trainable params: " + with_commas(total - trainable) +
        "\nBuffer elements: " + with_commas(buffers) + '\n';
  line('=');
  return os;
}

}  // namespace ember::nn
