// onnx::generate: an ONNX graph as C++ source. The graph is loaded as onnx::load loads it
// (checked, shape-inferred, constants folded, dead nodes dropped), then each node becomes a
// line of the struct's forward:
//   - an nn layer, where the node is one on constant f32 weights: Conv (symmetric pads) ->
//     nn::ConvNd, Gemm (alpha = beta = 1, no transA) and MatMul (+ an Add of a bias [N]
//     that only it feeds) -> nn::Linear, BatchNormalization (inference) -> nn::BatchNorm,
//     LayerNormalization over the last axis -> nn::LayerNorm;
//   - one ember op, for the element-wise operators that are exactly one (ops.hpp's lists);
//   - onnx::apply otherwise, with the node's attributes written out.
// Constants of at most kInlineElements elements are written into the code; larger ones are
// members (nn::Param for floats, nn::Buffer for integers and booleans) and go into the
// weights file with the layers' tensors.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "ember/onnx/codegen.hpp"
#include "ember/record/record.hpp"
#include "ops.hpp"

namespace ember::onnx {

namespace {

constexpr std::size_t kInlineElements = 16;

std::string camel(const std::string& stem) {
  std::string out;
  bool up = true;
  for (char ch : stem) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    up = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "Model" + out;
  return out;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  return true;
}

// Names the generated code cannot use for a member or a local: C++ keywords, the struct's
// own members and those EMBER_MODULE adds, and the names the code itself uses.
const std::set<std::string>& reserved() {
  static const std::set<std::string> r = {
      "alignas",  "alignof",  "and",        "asm",       "auto",      "bool",       "break",
      "case",     "catch",    "char",       "class",     "const",     "constexpr",  "continue",
      "default",  "delete",   "do",         "double",    "else",      "enum",       "explicit",
      "export",   "extern",   "false",      "float",     "for",       "friend",     "goto",
      "if",       "inline",   "int",        "long",      "mutable",   "namespace",  "new",
      "noexcept", "not",      "nullptr",    "operator",  "or",        "private",    "protected",
      "public",   "register", "return",     "short",     "signed",    "sizeof",     "static",
      "struct",   "switch",   "template",   "this",      "throw",     "true",       "try",
      "typedef",  "typename", "union",      "unsigned",  "using",     "virtual",    "void",
      "volatile", "while",    "xor",        "init",      "load",      "forward",    "run",
      "visit",    "map",      "num_params", "to_device", "valid",     "freeze",     "unfreeze",
      "summary",  "device",   "inputs",     "ember",     "ops",       "nn",         "onnx",
      "std",      "Shape",    "DType",      "Tensor",    "DynTensor", "TensorData", "Device"};
  return r;
}

// A C++ identifier for an ONNX name, unique among `taken`.
std::string identifier(const std::string& raw, std::set<std::string>& taken,
                       const std::string& fallback) {
  std::string s;
  for (char ch : raw) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (ok)
      s += ch;
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.size() > 60) s = s.substr(s.size() - 60);
  while (!s.empty() && s.front() == '_') s.erase(0, 1);
  if (s.empty()) s = fallback;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = fallback + "_" + s;
  if (!is_identifier(s)) s = fallback;
  std::string out = s;
  for (int k = 1; taken.count(out) || reserved().count(out); ++k) out = s + "_" + std::to_string(k);
  taken.insert(out);
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch >= 0x20 && ch < 0x7f && ch != '?') {
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", ch);
      out += buf;
    }
  }
  return out + "\"";
}

std::string f64_literal(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v))
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "-std::numeric_limits<double>::infinity()";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string f32_literal(double v) {
  if (std::isnan(v) || std::isinf(v)) return "static_cast<float>(" + f64_literal(v) + ")";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

std::string i64_literal(std::int64_t v) {
  if (v == std::numeric_limits<std::int64_t>::min())
    return "std::numeric_limits<std::int64_t>::min()";
  if (v >= std::numeric_limits<std::int32_t>::min() &&
      v <= std::numeric_limits<std::int32_t>::max())
    return std::to_string(v);
  return std::to_string(v) + "LL";
}

template <class T, class F>
std::string list(const std::vector<T>& v, F&& f) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + f(v[i]);
  return out + "}";
}

std::string shape_literal(const Shape& s) {
  return "Shape" + list(s.dims(), [](std::size_t d) { return std::to_string(d); });
}

std::string dtype_literal(DType dt) {
  switch (dt) {
    case DType::F64:
      return "DType::F64";
    case DType::F32:
      return "DType::F32";
    case DType::F16:
      return "DType::F16";
    case DType::BF16:
      return "DType::BF16";
    case DType::I64:
      return "DType::I64";
    case DType::I32:
      return "DType::I32";
    case DType::I16:
      return "DType::I16";
    case DType::I8:
      return "DType::I8";
    case DType::U8:
      return "DType::U8";
    case DType::Bool:
      return "DType::Bool";
  }
  return "DType::F32";
}

// A TensorData expression holding d's values exactly.
std::string data_literal(const TensorData& d) {
  const std::string shape = shape_literal(d.shape());
  switch (d.dtype()) {
    case DType::F64:
      return "TensorData::from<double>(" + list(d.to_vector<double>(), f64_literal) + ", " + shape +
             ")";
    case DType::F32:
    case DType::F16:
    case DType::BF16: {
      std::string e = "TensorData::from<float>(std::vector<float>" +
                      list(d.to_vector<double>(), f32_literal) + ", " + shape + ")";
      return d.dtype() == DType::F32 ? e : e + ".convert(" + dtype_literal(d.dtype()) + ")";
    }
    case DType::Bool:
    case DType::U8: {
      std::string e =
          "TensorData::from<std::uint8_t>(std::vector<std::uint8_t>" +
          list(d.to_vector<std::int64_t>(), [](std::int64_t v) { return std::to_string(v); }) +
          ", " + shape + ")";
      return d.dtype() == DType::U8 ? e : e + ".convert(DType::Bool)";
    }
    default: {
      std::string e = "TensorData::from<std::int64_t>(std::vector<std::int64_t>" +
                      list(d.to_vector<std::int64_t>(), i64_literal) + ", " + shape + ")";
      return d.dtype() == DType::I64 ? e : e + ".convert(" + dtype_literal(d.dtype()) + ")";
    }
  }
}

std::string attr_literal(const Node& n, const std::string& key, const Attr& a) {
  switch (a.type) {
    case Attr::Type::Int:
      return "onnx::AttrValue::of_int(" + i64_literal(a.i) + ")";
    case Attr::Type::Float:
      return "onnx::AttrValue::of_float(" + f64_literal(a.f) + ")";
    case Attr::Type::String:
      return "onnx::AttrValue::of_string(" + quote(a.s) + ")";
    case Attr::Type::Ints:
      return "onnx::AttrValue::of_ints(" + list(a.ints, i64_literal) + ")";
    case Attr::Type::Floats:
      return "onnx::AttrValue::of_floats(" + list(a.floats, f64_literal) + ")";
    case Attr::Type::Strings:
      return "onnx::AttrValue::of_strings(" + list(a.strings, quote) + ")";
    case Attr::Type::Tensor:
      return "onnx::AttrValue::of_tensor(" + data_literal(*a.t) + ")";
    case Attr::Type::Graph:
    case Attr::Type::Other:
      break;
  }
  fail("onnx::generate: " + n.describe() + ": attribute '" + key +
       "' is a subgraph or of a type the code generator cannot write; load this model with "
       "onnx::load");
}

// A tensor with its own dense storage (a transposed weight is a view).
DynTensor materialize(const DynTensor& t) { return ops::from_data(t.to_data(), t.device()); }

// A member's type as the header writes it, outside `using namespace ember`.
std::string qualified(std::string t) {
  const auto replace = [&](const std::string& from, const std::string& to) {
    for (std::size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
      t.replace(at, from.size(), to);
  };
  replace("nn::", "ember::nn::");
  replace("Tensor<", "ember::Tensor<");
  replace(", Int>", ", ember::Int>");
  replace(", Bool>", ", ember::Bool>");
  return t;
}

const char* kind_name(Kind k) {
  return k == Kind::Float ? "Float" : k == Kind::Int ? "Int" : "Bool";
}

// A tensor member of the struct: a layer, or a constant.
struct Member {
  std::string field;    // C++ field name
  std::string type;     // C++ type
  std::string init;     // expression building it on `device` (placeholder tensors)
  std::string comment;  // what it comes from
  // The record's tensors: key (under the field) -> value.
  std::vector<std::pair<std::string, DynTensor>> tensors;
};

class Generator {
 public:
  Generator(const Graph& g, const GenerateOptions& o, std::string model_name)
      : g_(g), options_(o), model_name_(std::move(model_name)) {}

  void run(Generated& out, std::string& header, std::string& source);
  const std::vector<Member>& members() const { return members_; }

 private:
  const Graph& g_;
  const GenerateOptions& options_;
  std::string model_name_;
  std::set<std::string> fields_taken_, locals_taken_;
  std::vector<Member> members_;
  std::map<std::string, std::string> expr_;  // ONNX value -> C++ expression
  std::map<std::string, std::string> member_of_constant_;
  std::vector<std::string> body_;
  std::vector<std::string> literals_;
  std::map<std::string, std::size_t> uses_;
  bool uses_device_ = false;
  Generated* stats_ = nullptr;

  bool is_const(const std::string& name) const { return g_.constants.count(name) != 0; }
  const DynTensor& constant(const std::string& name) const { return g_.constants.at(name); }
  std::optional<std::size_t> rank_of(const std::string& name) const {
    for (const auto& v : g_.inputs)
      if (v.name == name) return v.shape ? std::optional(v.shape->size()) : std::nullopt;
    if (is_const(name)) return constant(name).rank();
    auto it = g_.value_info.find(name);
    if (it != g_.value_info.end() && it->second.shape) return it->second.shape->size();
    auto r = ranks_.find(name);
    if (r != ranks_.end()) return r->second;
    return std::nullopt;
  }
  // Ranks the generator derives where shape inference left them unknown: an element-wise
  // op's output has its inputs' largest rank, a layer's output its input's.
  std::map<std::string, std::size_t> ranks_;
  void derive_rank(const Node& n, const std::string& out, const std::vector<std::string>& from) {
    std::size_t r = 0;
    for (const auto& f : from) {
      const auto fr = rank_of(f);
      if (!fr) return;
      r = std::max(r, *fr);
    }
    ranks_[out] = r;
    (void)n;
  }
  bool f32_const(const std::string& name, std::size_t rank) const {
    return !name.empty() && is_const(name) && constant(name).dtype() == DType::F32 &&
           constant(name).rank() == rank;
  }
  bool is_graph_output(const std::string& name) const {
    for (const auto& o : g_.outputs)
      if (o.name == name) return true;
    return false;
  }
  // The layer's field name: from its weight's name ("conv1.weight" -> conv1), else from
  // the node's name as PyTorch writes it ("/layer1/layer1.0/conv1/Conv" -> layer1_0_conv1),
  // else the op's.
  std::string layer_field(const Node& n, const std::string& weight, const std::string& fallback) {
    std::string base;
    const std::string suffix = ".weight";
    if (weight.size() > suffix.size() &&
        weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0) {
      base = weight.substr(0, weight.size() - suffix.size());
    } else if (n.name.size() > 1 && n.name[0] == '/') {
      std::string path = n.name.substr(1);
      const auto slash = path.rfind('/');
      if (slash != std::string::npos) path = path.substr(0, slash);  // drop "/Conv"
      // "/layer1/layer1.0/conv1" repeats each parent: keep the last segment of each level.
      const auto last = path.rfind('/');
      base = last == std::string::npos ? path : path.substr(last + 1);
      if (base.find('.') == std::string::npos && last != std::string::npos) base = path;
      if (path.find('/') == std::string::npos && slash == std::string::npos) base.clear();
    }
    if (base.empty()) base = fallback + "_" + std::to_string(members_.size());
    return identifier(base, fields_taken_, fallback);
  }
  std::string value(const std::string& name);
  std::string local(const std::string& name) {
    const std::string id = identifier(name, locals_taken_, "v");
    expr_[name] = id;
    return id;
  }
  std::string typed(const std::string& name, std::size_t rank) {
    return "Tensor<" + std::to_string(rank) + ">(" + value(name) + ")";
  }

  bool try_conv(const Node& n);
  bool try_linear(const Node& n, const std::vector<Node>& nodes, std::size_t idx,
                  std::set<std::size_t>& consumed);
  bool try_batch_norm(const Node& n);
  bool try_layer_norm(const Node& n);
  void direct_or_apply(const Node& n);
};

std::string Generator::value(const std::string& name) {
  auto it = expr_.find(name);
  if (it != expr_.end()) return it->second;
  if (!is_const(name)) fail("onnx::generate: value '" + name + "' is read before it is computed");
  const DynTensor& t = constant(name);
  if (t.num_elements() <= kInlineElements) {
    const std::string id = identifier(name, locals_taken_, "c");
    literals_.push_back("  const DynTensor " + id + " = ops::from_data(" +
                        data_literal(t.to_data()) + ", device);");
    uses_device_ = true;
    expr_[name] = id;
    return id;
  }
  EMBER_CHECK(t.rank() >= 1 && t.rank() <= 8, "onnx::generate: constant '" + name + "' has rank " +
                                                  std::to_string(t.rank()) +
                                                  "; members hold ranks 1 to 8");
  Member m;
  m.field = identifier(name, fields_taken_, "constant");
  const std::string tensor_type =
      "Tensor<" + std::to_string(t.rank()) +
      (t.kind() == Kind::Float ? "" : std::string(", ") + kind_name(t.kind())) + ">";
  const std::string zeros = tensor_type + "(ops::zeros(" + shape_literal(t.shape()) + ", " +
                            dtype_literal(t.dtype()) + ", device))";
  m.type = t.kind() == Kind::Float ? "nn::Param<" + tensor_type + ">"
                                   : "nn::Buffer<" + tensor_type + ">";
  m.init = m.type + "(" + zeros + ")";
  m.comment = "constant '" + name + "' " + ember::name(t.dtype()) + " " + t.shape().to_string();
  m.tensors.push_back({"", t});
  members_.push_back(std::move(m));
  const std::string e = members_.back().field + ".val().dyn()";
  expr_[name] = e;
  return e;
}

bool Generator::try_conv(const Node& n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const std::string& w = n.inputs[1];
  if (w.empty() || !is_const(w) || constant(w).dtype() != DType::F32) return false;
  const Shape ws = constant(w).shape();
  if (ws.rank() < 3 || ws.rank() > 5) return false;
  const std::size_t sp = ws.rank() - 2;
  const bool bias = n.inputs.size() >= 3 && !n.inputs[2].empty();
  if (bias && !f32_const(n.inputs[2], 1)) return false;
  const std::string auto_pad = n.s("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
  const auto ks = n.ints("kernel_shape");
  for (std::size_t i = 0; i < ks.size(); ++i)
    if (ks.size() != sp || ks[i] != static_cast<std::int64_t>(ws[i + 2])) return false;
  auto per_dim = [&](const char* a) {
    auto v = n.ints(a);
    if (v.empty()) v.assign(sp, 1);
    return v;
  };
  const auto strides = per_dim("strides"), dil = per_dim("dilations");
  auto pads = n.ints("pads");
  if (auto_pad == "VALID" || pads.empty()) pads.assign(2 * sp, 0);
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return false;
  for (std::size_t i = 0; i < sp; ++i)
    if (pads[i] != pads[i + sp] || pads[i] < 0 || strides[i] < 1 || dil[i] < 1) return false;
  const std::int64_t groups = n.i("group", 1);
  if (groups < 1 || ws[0] % static_cast<std::size_t>(groups) != 0) return false;
  const auto rank = rank_of(n.inputs[0]);
  if (rank && *rank != ws.rank()) return false;
  const std::size_t c_out = ws[0], c_in = ws[1] * static_cast<std::size_t>(groups);
  const std::string dims = std::to_string(sp) + "d";
  Member m;
  m.field = layer_field(n, w, "conv");
  m.type = "nn::Conv" + dims;
  std::vector<std::int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
  auto ints = [](const std::vector<std::int64_t>& v) {
    return list(v, [](std::int64_t x) { return std::to_string(x); });
  };
  std::string init = "nn::Conv" + dims + "Config{" + std::to_string(c_in) + ", " +
                     std::to_string(c_out) + ", " + ints(kernel) + "}";
  if (strides != std::vector<std::int64_t>(sp, 1))
    init += "\n          .with_stride(" + ints(strides) + ")";
  std::vector<std::int64_t> p(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(sp));
  if (p != std::vector<std::int64_t>(sp, 0))
    init += "\n          .with_padding(nn::Padding" + ints(p) + ")";
  if (dil != std::vector<std::int64_t>(sp, 1))
    init += "\n          .with_dilation(" + ints(dil) + ")";
  if (groups != 1) init += "\n          .with_groups(" + std::to_string(groups) + ")";
  if (!bias) init += "\n          .with_bias(false)";
  m.init = init + "\n          .init(device)";
  m.comment = "node '" + n.name + "' (Conv)";
  m.tensors.push_back({"weight", constant(w)});
  if (bias) m.tensors.push_back({"bias", constant(n.inputs[2])});
  const std::string field = m.field;
  members_.push_back(std::move(m));
  const std::string in = typed(n.inputs[0], ws.rank());
  const std::string out = local(n.outputs[0]);
  body_.push_back("  DynTensor " + out + " = " + field + ".forward(" + in + ").dyn();");
  return true;
}

bool Generator::try_linear(const Node& n, const std::vector<Node>& nodes, std::size_t idx,
                           std::set<std::size_t>& consumed) {
  if (n.outputs.size() != 1 || n.inputs.size() < 2) return false;
  const std::string& x = n.inputs[0];
  const std::string& w = n.inputs[1];
  if (!f32_const(w, 2) || is_const(x)) return false;
  // Gemm's A is 2-D by the operator's definition, whatever shape inference knew.
  const auto rank = n.op_type == "Gemm" ? std::optional<std::size_t>(2) : rank_of(x);
  if (!rank || *rank < 1) return false;
  std::optional<DynTensor> weight_;  // [out, in]
  std::optional<DynTensor> bias;
  std::string out_name = n.outputs[0];
  if (n.op_type == "Gemm") {
    if (n.i("transA", 0) != 0 || n.f("alpha", 1.0) != 1.0 || n.f("beta", 1.0) != 1.0 || *rank != 2)
      return false;
  }
  weight_ = n.op_type == "Gemm" && n.i("transB", 0) ? constant(w)
                                                    : materialize(ops::transpose(constant(w)));
  const DynTensor& weight = *weight_;
  if (n.op_type == "Gemm") {
    if (n.inputs.size() >= 3 && !n.inputs[2].empty()) {
      const std::string& c = n.inputs[2];
      if (!is_const(c) || constant(c).dtype() != DType::F32 ||
          constant(c).num_elements() != weight.shape()[0] ||
          (constant(c).rank() == 2 && constant(c).shape()[0] != 1) || constant(c).rank() > 2)
        return false;
      bias = ops::reshape(constant(c), Shape{weight.shape()[0]});
    }
  } else {  // MatMul, and the Add of a bias that only it feeds
    if (!is_graph_output(out_name)) {
      std::size_t readers = 0, add_at = 0;
      for (std::size_t k = idx + 1; k < nodes.size(); ++k)
        for (const auto& i : nodes[k].inputs)
          if (i == out_name) {
            ++readers;
            add_at = k;
          }
      if (readers == 1 && nodes[add_at].op_type == "Add" && nodes[add_at].inputs.size() == 2) {
        const Node& a = nodes[add_at];
        const std::string& other = a.inputs[0] == out_name ? a.inputs[1] : a.inputs[0];
        if (f32_const(other, 1) && constant(other).shape()[0] == weight.shape()[0] &&
            a.inputs[0] != a.inputs[1]) {
          bias = constant(other);
          consumed.insert(add_at);
          out_name = a.outputs[0];
        }
      }
    }
  }
  Member m;
  m.field = layer_field(n, w, "linear");
  m.type = "nn::Linear";
  m.init = "nn::LinearConfig{" + std::to_string(weight.shape()[1]) + ", " +
           std::to_string(weight.shape()[0]) + "}" + (bias ? "" : ".with_bias(false)") +
           ".init(device)";
  m.comment =
      "node '" + n.name + "' (" + n.op_type + (out_name != n.outputs[0] ? " + Add" : "") + ")";
  m.tensors.push_back({"weight", weight});
  if (bias) m.tensors.push_back({"bias", *bias});
  const std::string field = m.field;
  members_.push_back(std::move(m));
  const std::string in = typed(x, *rank);
  const std::string out = local(out_name);
  ranks_[out_name] = *rank;
  body_.push_back("  DynTensor " + out + " = " + field + ".forward(" + in + ").dyn();");
  return true;
}

bool Generator::try_batch_norm(const Node& n) {
  if (n.inputs.size() != 5 || n.i("training_mode", 0) != 0) return false;
  for (std::size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty()) return false;
  for (std::size_t k = 1; k < 5; ++k)
    if (!f32_const(n.inputs[k], 1)) return false;
  const std::size_t c = constant(n.inputs[1]).shape()[0];
  for (std::size_t k = 2; k < 5; ++k)
    if (constant(n.inputs[k]).shape()[0] != c) return false;
  Member m;
  m.field = layer_field(n, n.inputs[1], "batch_norm");
  m.type = "nn::BatchNorm";
  m.init = "nn::BatchNormConfig{" + std::to_string(c) + "}.with_eps(" +
           f64_literal(n.f("epsilon", 1e-5)) + ").init(device)";
  m.comment = "node '" + n.name + "' (BatchNormalization)";
  m.tensors.push_back({"weight", constant(n.inputs[1])});
  m.tensors.push_back({"bias", constant(n.inputs[2])});
  m.tensors.push_back({"running_mean", constant(n.inputs[3])});
  m.tensors.push_back({"running_var", constant(n.inputs[4])});
  m.tensors.push_back({"num_batches_tracked",
                       ops::from_data(TensorData::from<std::int64_t>({0}, Shape{}), g_.device)});
  const std::string field = m.field;
  members_.push_back(std::move(m));
  const std::string in = value(n.inputs[0]);
  const std::string out = local(n.outputs[0]);
  body_.push_back("  DynTensor " + out + " = " + field + ".forward_dyn(" + in + ");");
  return true;
}

bool Generator::try_layer_norm(const Node& n) {
  if (n.inputs.size() < 2) return false;
  for (std::size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty()) return false;
  const auto rank = rank_of(n.inputs[0]);
  const std::int64_t axis = n.i("axis", -1);
  if (!(axis == -1 || (rank && axis == static_cast<std::int64_t>(*rank) - 1))) return false;
  if (!f32_const(n.inputs[1], 1)) return false;
  const std::size_t d = constant(n.inputs[1]).shape()[0];
  const bool bias = n.inputs.size() >= 3 && !n.inputs[2].empty();
  if (bias && (!f32_const(n.inputs[2], 1) || constant(n.inputs[2]).shape()[0] != d)) return false;
  Member m;
  m.field = layer_field(n, n.inputs[1], "layer_norm");
  m.type = "nn::LayerNorm";
  m.init = "nn::LayerNormConfig{" + std::to_string(d) + "}.with_eps(" +
           f64_literal(n.f("epsilon", 1e-5)) + ")" + (bias ? "" : ".with_bias(false)") +
           ".init(device)";
  m.comment = "node '" + n.name + "' (LayerNormalization)";
  m.tensors.push_back({"weight", constant(n.inputs[1])});
  if (bias) m.tensors.push_back({"bias", constant(n.inputs[2])});
  const std::string field = m.field;
  members_.push_back(std::move(m));
  const std::string in = value(n.inputs[0]);
  const std::string out = local(n.outputs[0]);
  body_.push_back("  DynTensor " + out + " = " + field + ".forward_dyn(" + in + ");");
  return true;
}

void Generator::direct_or_apply(const Node& n) {
  static const std::map<std::string, std::string> unary = {
#define EMBER_ONNX_NAME(op, fn) {#op, "ir::UnaryFn::" #fn},
      EMBER_ONNX_UNARY_OPS(EMBER_ONNX_NAME)
#undef EMBER_ONNX_NAME
  };
  static const std::map<std::string, std::string> binary = {
#define EMBER_ONNX_NAME(op, fn) {#op, "ir::BinaryFn::" #fn},
      EMBER_ONNX_BINARY_OPS(EMBER_ONNX_NAME)
#undef EMBER_ONNX_NAME
  };
  const std::string comment = "  // " + n.op_type + " '" + n.name + "'";
  if (n.outputs.size() == 1 && !n.outputs[0].empty() && n.attrs.empty()) {
    auto u = unary.find(n.op_type);
    if (u != unary.end() && n.inputs.size() == 1 && !n.inputs[0].empty()) {
      const std::string in = value(n.inputs[0]);
      const std::string out = local(n.outputs[0]);
      derive_rank(n, n.outputs[0], {n.inputs[0]});
      body_.push_back("  DynTensor " + out + " = ops::unary(" + u->second + ", " + in + ");");
      ++stats_->direct_ops;
      return;
    }
    auto b = binary.find(n.op_type);
    if (b != binary.end() && n.inputs.size() == 2 && !n.inputs[0].empty() && !n.inputs[1].empty()) {
      const std::string x = value(n.inputs[0]), y = value(n.inputs[1]);
      const std::string out = local(n.outputs[0]);
      derive_rank(n, n.outputs[0], {n.inputs[0], n.inputs[1]});
      body_.push_back("  DynTensor " + out + " = ops::binary(" + b->second + ", " + x + ", " + y +
                      ");");
      ++stats_->direct_ops;
      return;
    }
  }
  std::vector<std::string> ins;
  for (const auto& i : n.inputs) ins.push_back(i.empty() ? "std::nullopt" : value(i));
  std::string attrs;
  for (const auto& [k, a] : n.attrs)
    attrs += std::string(attrs.empty() ? "" : ",\n      ") + "{" + quote(k) + ", " +
             attr_literal(n, k, a) + "}";
  std::string call = "onnx::apply(" + quote(n.op_type) + ", " + std::to_string(g_.opset) +
                     ", device, " + list(ins, [](const std::string& s) { return s; });
  if (!attrs.empty() || n.outputs.size() != 1) call += ",\n      {" + attrs + "}";
  if (n.outputs.size() != 1) call += ", " + std::to_string(n.outputs.size());
  call += ")";
  uses_device_ = true;
  ++stats_->applied_ops;
  body_.push_back(comment);
  static const std::set<std::string> same_rank = {
      "Div",     "Pow",      "Softmax", "LogSoftmax", "Gelu", "Erf",         "Clip",
      "Dropout", "Identity", "Cast",    "LeakyRelu",  "Elu",  "HardSigmoid", "HardSwish",
      "Where",   "Max",      "Min",     "Sum",        "Mean"};
  if (same_rank.count(n.op_type) && !n.outputs[0].empty()) {
    std::vector<std::string> from;
    for (const auto& i : n.inputs)
      if (!i.empty()) from.push_back(i);
    if (n.op_type == "Clip" || n.op_type == "Dropout") from.resize(1);
    derive_rank(n, n.outputs[0], from);
  }
  if ((n.op_type == "Transpose" ||
       (n.op_type.rfind("Reduce", 0) == 0 && n.i("keepdims", 1) != 0)) &&
      n.outputs.size() == 1 && !n.inputs.empty())
    derive_rank(n, n.outputs[0], {n.inputs[0]});
  if (n.op_type == "Reshape" && n.inputs.size() == 2 && n.outputs.size() == 1) {
    // The output's rank is the length of the shape input, where that is static.
    const std::string& sh = n.inputs[1];
    if (is_const(sh) && constant(sh).rank() == 1) {
      ranks_[n.outputs[0]] = constant(sh).shape()[0];
    } else {
      auto it = g_.value_info.find(sh);
      if (it != g_.value_info.end() && it->second.shape && it->second.shape->size() == 1 &&
          (*it->second.shape)[0].value)
        ranks_[n.outputs[0]] = *(*it->second.shape)[0].value;
    }
  }
  if (n.outputs.size() == 1) {
    const std::string out = local(n.outputs[0]);
    body_.push_back("  DynTensor " + out + " = " + call + "[0];");
    return;
  }
  const std::string tuple = identifier(n.name + "_outputs", locals_taken_, "outputs");
  body_.push_back("  const std::vector<DynTensor> " + tuple + " = " + call + ";");
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k].empty()) continue;
    const std::string out = local(n.outputs[k]);
    body_.push_back("  const DynTensor& " + out + " = " + tuple + "[" + std::to_string(k) + "];");
  }
}

void Generator::run(Generated& out, std::string& header, std::string& source) {
  stats_ = &out;
  const std::string name = options_.struct_name.empty() ? camel(model_name_) : options_.struct_name;
  EMBER_CHECK(is_identifier(name) && !reserved().count(name),
              "onnx::generate: struct name '" + name + "' is not a C++ identifier");
  EMBER_CHECK(is_identifier(options_.ns),
              "onnx::generate: namespace '" + options_.ns + "' is not a C++ identifier");
  out.struct_name = name;
  locals_taken_.insert(name);
  std::vector<std::string> params;
  for (const auto& v : g_.inputs) {
    const std::string id = identifier(v.name, locals_taken_, "input");
    expr_[v.name] = id;
    params.push_back(id);
  }
  for (const auto& n : g_.nodes)
    for (const auto& [k, a] : n.attrs)
      if (a.g)
        fail("onnx::generate: " + n.describe() + " (opset " + std::to_string(g_.opset) +
             ") has a subgraph ('" + k +
             "'); the code generator writes graphs without control flow; load this model "
             "with onnx::load");
  std::set<std::size_t> consumed;
  for (std::size_t idx = 0; idx < g_.nodes.size(); ++idx) {
    if (consumed.count(idx)) continue;
    const Node& n = g_.nodes[idx];
    bool layer = false;
    if (n.op_type == "Conv")
      layer = try_conv(n);
    else if (n.op_type == "Gemm" || n.op_type == "MatMul")
      layer = try_linear(n, g_.nodes, idx, consumed);
    else if (n.op_type == "BatchNormalization")
      layer = try_batch_norm(n);
    else if (n.op_type == "LayerNormalization")
      layer = try_layer_norm(n);
    if (layer) {
      ++out.layers;
      continue;
    }
    direct_or_apply(n);
  }
  std::vector<std::string> results;
  for (const auto& o : g_.outputs) results.push_back(value(o.name));

  // ---- header ----
  const std::string stem = options_.file_stem.empty() ? model_name_ : options_.file_stem;
  std::ostringstream h;
  h << "// Generated by ember-onnx from " << model_name_ << ".onnx (ONNX opset " << g_.opset << "; "
    << g_.stats.nodes << " nodes, " << g_.stats.kept
    << " after constant folding and dead-node elimination): " << out.layers << " nn layers, "
    << out.direct_ops << " ember ops, " << out.applied_ops << " operators through onnx::apply.\n"
    << "// The tensors load from the weights file written beside it (" << stem << "."
    << options_.weights_format << ").\n"
    << "#pragma once\n\n#include <string>\n#include <vector>\n\n#include <ember/ember.hpp>\n"
    << "#include <ember/onnx/codegen.hpp>\n\nnamespace " << options_.ns << " {\n\n"
    << "struct " << name << " {\n";
  std::vector<std::string> fields;
  for (const auto& m : members_) {
    h << "  " << qualified(m.type) << " " << m.field << ";  // " << m.comment << "\n";
    fields.push_back(m.field);
  }
  h << "  EMBER_MODULE(" << name;
  for (const auto& f : fields) h << ", " << f;
  h << ")\n\n"
    << "  // The architecture, with the layers' default initialisation and zero constants.\n"
    << "  static " << name << " init(const ember::Device& device);\n"
    << "  // init, then every tensor from the weights file.\n"
    << "  static " << name
    << " load(const std::string& weights_path, const ember::Device& device);\n\n"
    << "  // The graph: its inputs in order";
  for (const auto& v : g_.inputs) {
    h << ", " << v.name << " " << ember::name(v.dtype);
    if (v.shape) {
      h << " [";
      for (std::size_t k = 0; k < v.shape->size(); ++k) {
        const auto& d = (*v.shape)[k];
        h << (k ? ", " : "")
          << (d.value            ? std::to_string(*d.value)
              : d.symbol.empty() ? "?"
                                 : d.symbol);
      }
      h << "]";
    }
  }
  h << " -> its outputs in order.\n";
  std::string sig = "(";
  for (std::size_t k = 0; k < params.size(); ++k)
    sig += (k ? ", " : "") + std::string("const ember::DynTensor& ") + params[k];
  sig += ") const";
  const bool single = g_.outputs.size() == 1;
  const std::string ret = single ? "ember::DynTensor" : "std::vector<ember::DynTensor>";
  h << "  " << ret << " forward" << sig << ";\n"
    << "  // forward on a list of inputs, as onnx::Model::run.\n"
    << "  std::vector<ember::DynTensor> run(const std::vector<ember::DynTensor>& inputs) const;\n"
    << "};\n\n}  // namespace " << options_.ns << "\n";
  header = h.str();

  // ---- source ----
  std::ostringstream s;
  s << "// Generated by ember-onnx from " << model_name_ << ".onnx.\n"
    << "#include \"" << stem << ".hpp\"\n\n#include <cstdint>\n#include <limits>\n"
    << "#include <optional>\n\nnamespace " << options_.ns << " {\n\nusing namespace ember;\n\n"
    << name << " " << name << "::init(const Device& device) {\n";
  if (members_.empty()) {
    s << "  (void)device;\n  return " << name << "{};\n";
  } else {
    s << "  return " << name << "{\n";
    for (std::size_t k = 0; k < members_.size(); ++k)
      s << "      " << members_[k].init << (k + 1 < members_.size() ? "," : "") << "\n";
    s << "  };\n";
  }
  s << "}\n\n"
    << name << " " << name << "::load(const std::string& weights_path, const Device& device) {\n"
    << "  return record::load(init(device), weights_path, device);\n}\n\n";
  std::string impl_sig = "(";
  for (std::size_t k = 0; k < params.size(); ++k)
    impl_sig += (k ? ", " : "") + std::string("const DynTensor& ") + params[k];
  impl_sig += ") const";
  s << (single ? "DynTensor " : "std::vector<DynTensor> ") << name << "::forward" << impl_sig
    << " {\n";
  if (uses_device_) {
    EMBER_CHECK(!params.empty(),
                "onnx::generate: the graph has no inputs, so its forward has no device");
    s << "  const Device& device = " << params[0] << ".device();\n";
  }
  for (const auto& l : literals_) s << l << "\n";
  for (const auto& l : body_) s << l << "\n";
  if (single)
    s << "  return " << results[0] << ";\n";
  else
    s << "  return " << list(results, [](const std::string& r) { return r; }) << ";\n";
  s << "}\n\n"
    << "std::vector<DynTensor> " << name << "::run(const std::vector<DynTensor>& inputs) const {\n"
    << "  EMBER_CHECK(inputs.size() == " << params.size() << ", \"" << name
    << "::run: got \" + std::to_string(inputs.size()) + \" inputs; the graph has " << params.size()
    << "\");\n";
  std::string args;
  for (std::size_t k = 0; k < params.size(); ++k)
    args += (k ? ", " : "") + std::string("inputs[") + std::to_string(k) + "]";
  if (single)
    s << "  return {forward(" << args << ")};\n";
  else
    s << "  return forward(" << args << ");\n";
  s << "}\n\n}  // namespace " << options_.ns << "\n";
  source = s.str();
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  EMBER_CHECK(f.good(), "onnx::generate: cannot write '" + p.string() + "'");
  f << text;
  f.close();
  EMBER_CHECK(f.good(), "onnx::generate: writing '" + p.string() + "' failed");
}

}  // namespace

Generated generate(const std::string& model_path, const std::string& out_dir,
                   const GenerateOptions& options) {
  EMBER_CHECK(options.weights_format == "ember" || options.weights_format == "safetensors",
              "onnx::generate: weights_format '" + options.weights_format +
                  "' is not one of ember, safetensors");
  LoadOptions lo;
  lo.trainable = false;
  auto g = load_graph(model_path, Device::cpu(), lo);
  const std::string model_name = std::filesystem::path(model_path).stem().string();
  Generated out;
  std::string header, source;
  Generator gen(*g, options, model_name);
  gen.run(out, header, source);
  const std::string stem = options.file_stem.empty() ? model_name : options.file_stem;
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  out.header_path = (dir / (stem + ".hpp")).string();
  out.source_path = (dir / (stem + ".cpp")).string();
  out.weights_path = (dir / (stem + "." + options.weights_format)).string();
  std::vector<record::NamedTensor> tensors;
  for (const auto& m : gen.members())
    for (const auto& [key, t] : m.tensors)
      tensors.push_back({key.empty() ? m.field : m.field + "." + key, t});
  out.tensors = tensors.size();
  record::save_tensors(tensors, out.weights_path);
  write_file(out.header_path, header);
  write_file(out.source_path, source);
  return out;
}

}  // namespace ember::onnx
