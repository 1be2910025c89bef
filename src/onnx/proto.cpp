// The parser: protobuf bytes -> onnx::ModelProto (the ONNX project's own generated
// classes), its checker and shape inference, then the conversion into a Graph. This file
// alone sees protobuf.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "ember/base/checked.hpp"
#include "ember/tensor/gradients.hpp"
#include "ember/tensor/ops.hpp"
#include "graph.hpp"

namespace ember::onnx {

namespace pb = ::onnx;

std::string Node::describe() const {
  return "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + op_type + ")";
}
std::int64_t Node::i(const std::string& a, std::int64_t dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.i;
}
double Node::f(const std::string& a, double dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.f;
}
std::string Node::s(const std::string& a, const std::string& dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.s;
}
std::vector<std::int64_t> Node::ints(const std::string& a,
                                     const std::vector<std::int64_t>& dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.ints;
}
std::vector<double> Node::floats(const std::string& a, const std::vector<double>& dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.floats;
}

std::int64_t max_opset() {
  const auto& m = pb::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = m.find("");
  return it == m.end() ? 0 : it->second.second;
}

namespace {

const char* onnx_type_name(int t) {
  switch (t) {
    case pb::TensorProto::FLOAT:
      return "float";
    case pb::TensorProto::UINT8:
      return "uint8";
    case pb::TensorProto::INT8:
      return "int8";
    case pb::TensorProto::UINT16:
      return "uint16";
    case pb::TensorProto::INT16:
      return "int16";
    case pb::TensorProto::INT32:
      return "int32";
    case pb::TensorProto::INT64:
      return "int64";
    case pb::TensorProto::STRING:
      return "string";
    case pb::TensorProto::BOOL:
      return "bool";
    case pb::TensorProto::FLOAT16:
      return "float16";
    case pb::TensorProto::DOUBLE:
      return "double";
    case pb::TensorProto::UINT32:
      return "uint32";
    case pb::TensorProto::UINT64:
      return "uint64";
    case pb::TensorProto::COMPLEX64:
      return "complex64";
    case pb::TensorProto::COMPLEX128:
      return "complex128";
    case pb::TensorProto::BFLOAT16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

// The ember dtype of an ONNX element type, or nullopt for those ember has no dtype for.
std::optional<DType> dtype_of_onnx(int t) {
  switch (t) {
    case pb::TensorProto::FLOAT:
      return DType::F32;
    case pb::TensorProto::DOUBLE:
      return DType::F64;
    case pb::TensorProto::FLOAT16:
      return DType::F16;
    case pb::TensorProto::BFLOAT16:
      return DType::BF16;
    case pb::TensorProto::INT64:
      return DType::I64;
    case pb::TensorProto::INT32:
      return DType::I32;
    case pb::TensorProto::INT16:
      return DType::I16;
    case pb::TensorProto::INT8:
      return DType::I8;
    case pb::TensorProto::UINT8:
      return DType::U8;
    case pb::TensorProto::BOOL:
      return DType::Bool;
    // ember has no unsigned types wider than 8 bits: they widen to the next signed type
    // that holds every value (uint64 values above 2^63 - 1 are refused when read).
    case pb::TensorProto::UINT16:
      return DType::I32;
    case pb::TensorProto::UINT32:
    case pb::TensorProto::UINT64:
      return DType::I64;
    default:
      return std::nullopt;
  }
}

DType require_dtype(int t, const std::string& what) {
  auto d = dtype_of_onnx(t);
  EMBER_CHECK(d.has_value(),
              what + ": element type " + onnx_type_name(t) +
                  " is not supported (expected float, double, float16, "
                  "bfloat16, int64, int32, int16, int8, uint8, uint16, uint32, uint64 or bool)");
  return *d;
}

std::vector<std::byte> read_external(const pb::TensorProto& t, const std::string& base_dir,
                                     std::size_t expected, const std::string& what) {
  std::string location;
  std::size_t offset = 0;
  std::optional<std::size_t> length;
  for (const auto& kv : t.external_data()) {
    const auto parse_size = [&](const std::string& v) {
      std::size_t pos = 0;
      unsigned long long n = 0;
      try {
        n = std::stoull(v, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      EMBER_CHECK(pos == v.size() && !v.empty() && v[0] != '-',
                  what + ": external data " + kv.key() + " '" + v + "' is not a byte count");
      return checked_size(static_cast<std::size_t>(n), what, "external data offset/length");
    };
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = parse_size(kv.value());
    else if (kv.key() == "length")
      length = parse_size(kv.value());
  }
  EMBER_CHECK(!location.empty(), what + ": external data without a 'location' entry");
  const std::filesystem::path rel(location);
  bool escapes = rel.is_absolute();
  for (const auto& part : rel)
    if (part == "..") escapes = true;
  EMBER_CHECK(!escapes, what + ": external data location '" + location +
                            "' must be a relative path inside the model's folder");
  EMBER_CHECK(!base_dir.empty(), what + ": external data '" + location +
                                     "' but the model was loaded from memory with no folder");
  const std::filesystem::path path = std::filesystem::path(base_dir) / rel;
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), what + ": cannot open external data file '" + path.string() + "'");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::size_t>(in.tellg());
  const std::size_t n = length.value_or(file_size >= offset ? file_size - offset : 0);
  EMBER_CHECK(n == expected, what + ": external data '" + location + "' holds " +
                                 std::to_string(n) + " bytes where the shape and type need " +
                                 std::to_string(expected));
  EMBER_CHECK(offset <= file_size && n <= file_size - offset,
              what + ": external data '" + location + "' is " + std::to_string(file_size) +
                  " bytes, too short for offset " + std::to_string(offset) + " + length " +
                  std::to_string(n));
  std::vector<std::byte> bytes(n);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n));
  EMBER_CHECK(in.good() || n == 0, what + ": reading external data '" + location + "' failed");
  return bytes;
}

template <class Src, class Dst>
void narrow_copy(const Src& src, std::vector<std::byte>& bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const Dst v = static_cast<Dst>(src.Get(static_cast<int>(i)));
    std::memcpy(bytes.data() + i * sizeof(Dst), &v, sizeof(Dst));
  }
}

// uint16, uint32 and uint64 tensors, widened to i32 / i64.
TensorData widened_unsigned(const pb::TensorProto& t, const std::string& base_dir,
                            const std::string& what, const Shape& shape) {
  const std::size_t n = checked_num_elements(shape, what);
  const int ty = t.data_type();
  const std::size_t width = ty == pb::TensorProto::UINT16   ? 2
                            : ty == pb::TensorProto::UINT32 ? 4
                                                            : 8;
  const std::size_t nbytes = checked_mul(n, width, what, "bytes");
  std::vector<std::uint64_t> v(n);
  const auto from_bytes = [&](const char* p, std::size_t size) {
    EMBER_CHECK(size == nbytes, what + ": holds " + std::to_string(size) + " bytes where shape " +
                                    shape.to_string() + " of " + onnx_type_name(ty) + " needs " +
                                    std::to_string(nbytes));
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t x = 0;
      std::memcpy(&x, p + i * width, width);  // little-endian, as ONNX stores it
      v[i] = x;
    }
  };
  const auto count = [&](int have, const char* field) {
    EMBER_CHECK(static_cast<std::size_t>(have) == n,
                what + ": " + field + " holds " + std::to_string(have) + " values where shape " +
                    shape.to_string() + " needs " + std::to_string(n));
  };
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    const auto bytes = read_external(t, base_dir, nbytes, what);
    from_bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } else if (t.has_raw_data()) {
    from_bytes(t.raw_data().data(), t.raw_data().size());
  } else if (ty == pb::TensorProto::UINT16) {
    count(t.int32_data_size(), "int32_data");
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<std::uint16_t>(t.int32_data(static_cast<int>(i)));
  } else {
    count(t.uint64_data_size(), "uint64_data");
    for (std::size_t i = 0; i < n; ++i) v[i] = t.uint64_data(static_cast<int>(i));
  }
  if (ty == pb::TensorProto::UINT16) {
    std::vector<std::int32_t> out(v.begin(), v.end());
    return TensorData::from<std::int32_t>(out, shape);
  }
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    EMBER_CHECK(
        v[i] <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
        what + ": uint64 value " + std::to_string(v[i]) + " exceeds the int64 it widens to");
    out[i] = static_cast<std::int64_t>(v[i]);
  }
  return TensorData::from<std::int64_t>(out, shape);
}

TensorData tensor_of(const pb::TensorProto& t, const std::string& base_dir) {
  const std::string what = "tensor '" + t.name() + "'";
  const DType dt = require_dtype(t.data_type(), what);
  if (t.data_type() == pb::TensorProto::UINT16 || t.data_type() == pb::TensorProto::UINT32 ||
      t.data_type() == pb::TensorProto::UINT64) {
    std::vector<std::size_t> dims;
    for (auto d : t.dims()) {
      EMBER_CHECK(d >= 0, what + ": negative dim " + std::to_string(d));
      dims.push_back(checked_size(static_cast<std::size_t>(d), what, "dim"));
    }
    return widened_unsigned(t, base_dir, what, Shape(dims));
  }
  std::vector<std::size_t> dims;
  for (auto d : t.dims()) {
    EMBER_CHECK(d >= 0, what + ": negative dim " + std::to_string(d));
    dims.push_back(checked_size(static_cast<std::size_t>(d), what, "dim"));
  }
  Shape shape(dims);
  const std::size_t n = checked_num_elements(shape, what);
  const std::size_t nbytes = checked_bytes(shape, dt, what);
  std::vector<std::byte> bytes;
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    bytes = read_external(t, base_dir, nbytes, what);
  } else if (t.has_raw_data()) {
    EMBER_CHECK(t.raw_data().size() == nbytes,
                what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                    " bytes where shape " + shape.to_string() + " of " + name(dt) + " needs " +
                    std::to_string(nbytes));
    bytes.resize(nbytes);
    if (nbytes) std::memcpy(bytes.data(), t.raw_data().data(), nbytes);
    if (dt == DType::Bool)  // any non-zero byte is true
      for (auto& b : bytes) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  } else {
    const auto count = [&](int have, const char* field) {
      EMBER_CHECK(static_cast<std::size_t>(have) == n,
                  what + ": " + field + " holds " + std::to_string(have) + " values where shape " +
                      shape.to_string() + " needs " + std::to_string(n));
    };
    // The count first: a shape the data does not fill is never allocated.
    if (dt == DType::F32)
      count(t.float_data_size(), "float_data");
    else if (dt == DType::F64)
      count(t.double_data_size(), "double_data");
    else if (dt == DType::I64)
      count(t.int64_data_size(), "int64_data");
    else
      count(t.int32_data_size(), "int32_data");
    bytes.resize(nbytes);
    switch (dt) {
      case DType::F32:
        count(t.float_data_size(), "float_data");
        narrow_copy<decltype(t.float_data()), float>(t.float_data(), bytes, n);
        break;
      case DType::F64:
        count(t.double_data_size(), "double_data");
        narrow_copy<decltype(t.double_data()), double>(t.double_data(), bytes, n);
        break;
      case DType::I64:
        count(t.int64_data_size(), "int64_data");
        narrow_copy<decltype(t.int64_data()), std::int64_t>(t.int64_data(), bytes, n);
        break;
      case DType::I32:
        count(t.int32_data_size(), "int32_data");
        narrow_copy<decltype(t.int32_data()), std::int32_t>(t.int32_data(), bytes, n);
        break;
      case DType::I16:
        count(t.int32_data_size(), "int32_data");
        narrow_copy<decltype(t.int32_data()), std::int16_t>(t.int32_data(), bytes, n);
        break;
      case DType::I8:
        count(t.int32_data_size(), "int32_data");
        narrow_copy<decltype(t.int32_data()), std::int8_t>(t.int32_data(), bytes, n);
        break;
      case DType::U8:
        count(t.int32_data_size(), "int32_data");
        narrow_copy<decltype(t.int32_data()), std::uint8_t>(t.int32_data(), bytes, n);
        break;
      case DType::Bool:
        count(t.int32_data_size(), "int32_data");
        for (std::size_t i = 0; i < n; ++i)
          bytes[i] = t.int32_data(static_cast<int>(i)) != 0 ? std::byte{1} : std::byte{0};
        break;
      case DType::F16:
      case DType::BF16:  // the 16 bits in int32_data
        count(t.int32_data_size(), "int32_data");
        narrow_copy<decltype(t.int32_data()), std::uint16_t>(t.int32_data(), bytes, n);
        break;
    }
  }
  return TensorData(std::move(bytes), std::move(shape), dt);
}

ValueInfo value_info_of(const pb::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (v.type().value_case() == pb::TypeProto::VALUE_NOT_SET) return out;  // untyped: f32, any shape
  EMBER_CHECK(v.type().has_tensor_type(),
              "onnx::load: value '" + v.name() + "' is " +
                  (v.type().has_sequence_type()   ? "a sequence"
                   : v.type().has_optional_type() ? "an optional"
                   : v.type().has_map_type()      ? "a map"
                                                  : "not a tensor") +
                  "; ember imports graphs whose inputs and outputs are tensors");
  const auto& tt = v.type().tensor_type();
  auto d = dtype_of_onnx(tt.elem_type());
  out.dtype = d.value_or(DType::F32);
  if (tt.has_shape()) {
    std::vector<Dim> dims;
    for (const auto& dim : tt.shape().dim()) {
      Dim x;
      if (dim.has_dim_value() && dim.dim_value() >= 0)
        x.value = static_cast<std::size_t>(dim.dim_value());
      else if (dim.has_dim_param())
        x.symbol = dim.dim_param();
      dims.push_back(x);
    }
    out.shape = std::move(dims);
  }
  return out;
}

struct Converter {
  Device device;
  std::string base_dir;
  bool trainable;
  std::int64_t opset;

  Attr attr_of(const pb::AttributeProto& a, const std::string& where) {
    Attr x;
    switch (a.type()) {
      case pb::AttributeProto::FLOAT:
        x.type = Attr::Type::Float;
        x.f = a.f();
        break;
      case pb::AttributeProto::INT:
        x.type = Attr::Type::Int;
        x.i = a.i();
        break;
      case pb::AttributeProto::STRING:
        x.type = Attr::Type::String;
        x.s = a.s();
        break;
      case pb::AttributeProto::TENSOR:
        x.type = Attr::Type::Tensor;
        x.t = tensor_of(a.t(), base_dir);
        break;
      case pb::AttributeProto::GRAPH:
        x.type = Attr::Type::Graph;
        x.g = graph_of(a.g(), /*main=*/false);
        break;
      case pb::AttributeProto::FLOATS:
        x.type = Attr::Type::Floats;
        x.floats.assign(a.floats().begin(), a.floats().end());
        break;
      case pb::AttributeProto::INTS:
        x.type = Attr::Type::Ints;
        x.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case pb::AttributeProto::STRINGS:
        x.type = Attr::Type::Strings;
        x.strings.assign(a.strings().begin(), a.strings().end());
        break;
      default:
        (void)where;
        x.type = Attr::Type::Other;  // sparse tensors, type protos: no operator here reads them
        break;
    }
    return x;
  }

  std::shared_ptr<Graph> graph_of(const pb::GraphProto& gp, bool main) {
    auto g = std::make_shared<Graph>();
    g->name = gp.name();
    g->opset = opset;
    g->device = device;
    std::set<std::string> init_names;
    for (const auto& t : gp.initializer()) {
      init_names.insert(t.name());
      g->initializer_names.push_back(t.name());
      DynTensor v = ops::from_data(tensor_of(t, base_dir), device);
      if (main && trainable && device.is_autodiff() && is_float(v.dtype())) {
        v = ops::require_grad(std::move(v));
        g->trainable.push_back(t.name());
      }
      g->constants.insert_or_assign(t.name(), std::move(v));
    }
    EMBER_CHECK(
        gp.sparse_initializer_size() == 0,
        "onnx::load: graph '" + gp.name() + "' has sparse initializers, which are not supported");
    for (const auto& v : gp.input())
      if (!init_names.count(v.name())) g->inputs.push_back(value_info_of(v));
    for (const auto& v : gp.output()) g->outputs.push_back(value_info_of(v));
    for (const auto& v : gp.value_info())
      if (v.type().has_tensor_type()) g->value_info[v.name()] = value_info_of(v);
    int k = 0;
    for (const auto& np : gp.node()) {
      Node n;
      n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
      ++k;
      n.op_type = np.op_type();
      n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
      n.inputs.assign(np.input().begin(), np.input().end());
      n.outputs.assign(np.output().begin(), np.output().end());
      for (const auto& a : np.attribute()) n.attrs[a.name()] = attr_of(a, n.describe());
      g->nodes.push_back(std::move(n));
    }
    g->stats.nodes = g->nodes.size();
    return g;
  }
};

}  // namespace

namespace {

// Note [Convolution ranks in ONNX shape inference]
// ONNX 1.12's shape inference of the convolutions trusts the weight's rank: Conv,
// ConvInteger and QLinearConv take the kernel's extents from the weight's dims 2.. and
// index the input's dims and the dilations with them (a weight of higher rank than the
// input reads past both), and ConvTranspose reads the weight's dims 1 and 2.. unchecked.
// So shape inference runs with RankGuardedSchemas, which hands out these operators'
// schemas with an inference function that first compares the ranks it is given and, where
// they disagree, infers nothing for that node; check_conv_ranks then names the node from
// the ranks that are declared or were inferred (graph inputs, initializers, value_info).

// The input index of a convolution's weight, or -1 for any other operator.
int conv_weight_index(const std::string& op_type, const std::string& domain) {
  if (!domain.empty() && domain != "ai.onnx") return -1;
  if (op_type == "Conv" || op_type == "ConvInteger" || op_type == "ConvTranspose") return 1;
  if (op_type == "QLinearConv") return 3;
  return -1;
}

// What is wrong with a convolution of input rank `x` and weight rank `w` (-1: unknown), or
// an empty string.
std::string conv_rank_problem(const std::string& op_type, int x, int w) {
  const bool transpose = op_type == "ConvTranspose";
  if (transpose && w >= 0 && w < 3)
    return "the weight has rank " + std::to_string(w) +
           "; expected [C, O / group, *kernel] of rank 3 to 5";
  if (x >= 0 && w >= 0 && x != w)
    return "the input has rank " + std::to_string(x) + " and the weight rank " + std::to_string(w) +
           "; expected equal ranks ([N, C, *spatial] and " +
           (transpose ? "[C, O / group, *kernel])" : "[O, C / group, *kernel])");
  return {};
}

class RankGuardedSchemas final : public pb::ISchemaRegistry {
 public:
  const pb::OpSchema* GetSchema(const std::string& key, const int max_version,
                                const std::string& domain) const override {
    const pb::OpSchema* s = pb::OpSchemaRegistry::Schema(key, max_version, domain);
    const int wi = conv_weight_index(key, domain);
    if (s == nullptr || wi < 0 || !s->has_type_and_shape_inference_function()) return s;
    auto& guarded = guarded_[s];
    if (!guarded) {
      guarded = std::make_unique<pb::OpSchema>(*s);
      guarded->TypeAndShapeInferenceFunction(
          [this, key, wi,
           infer = s->GetTypeAndShapeInferenceFunction()](pb::InferenceContext& ctx) {
            const auto rank = [&ctx](std::size_t i) {
              const pb::TypeProto* t = i < ctx.getNumInputs() ? ctx.getInputType(i) : nullptr;
              return t && t->has_tensor_type() && t->tensor_type().has_shape()
                         ? t->tensor_type().shape().dim_size()
                         : -1;
            };
            const std::string problem = conv_rank_problem(key, rank(0), rank(wi));
            if (problem.empty()) return infer(ctx);
            if (first_problem_.empty()) first_problem_ = key + ": " + problem;
          });
    }
    return guarded.get();
  }
  // The first convolution whose inference was skipped ("Conv: the input has rank ...").
  const std::string& first_problem() const { return first_problem_; }

 private:
  mutable std::map<const pb::OpSchema*, std::unique_ptr<pb::OpSchema>> guarded_;
  mutable std::string first_problem_;
};

void check_conv_ranks(const pb::GraphProto& g, std::int64_t opset) {
  std::map<std::string, int> rank;
  const auto declare = [&rank](const pb::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      rank[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : g.input()) declare(v);
  for (const auto& v : g.value_info()) declare(v);
  for (const auto& v : g.output()) declare(v);
  for (const auto& t : g.initializer()) rank[t.name()] = t.dims_size();
  int k = -1;
  for (const auto& n : g.node()) {
    ++k;
    for (const auto& a : n.attribute())
      if (a.has_g()) check_conv_ranks(a.g(), opset);
    const int wi = conv_weight_index(n.op_type(), n.domain());
    if (wi < 0 || n.input_size() <= wi) continue;
    const auto known = [&rank](const std::string& name) {
      const auto it = rank.find(name);
      return it == rank.end() ? -1 : it->second;
    };
    const std::string problem =
        conv_rank_problem(n.op_type(), known(n.input(0)), known(n.input(wi)));
    const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(k) : n.name();
    EMBER_CHECK(problem.empty(), "onnx::load: node '" + name + "' (" + n.op_type() + ") (opset " +
                                     std::to_string(opset) + "): input '" + n.input(0) +
                                     "', weight '" + n.input(wi) + "': " + problem);
  }
}

}  // namespace

std::shared_ptr<Graph> parse_model(const void* data, std::size_t size, const Device& device,
                                   const std::string& base_dir, bool trainable) {
  EMBER_CHECK(size <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
              "onnx::load: the model is " + std::to_string(size) +
                  " bytes; a protobuf message is at most 2 GiB (put the weights in external data)");
  pb::ModelProto model;
  EMBER_CHECK(size > 0 && model.ParseFromArray(data, static_cast<int>(size)),
              "onnx::load: the file is not a valid ONNX model (protobuf ModelProto): "
              "malformed or truncated (" +
                  std::to_string(size) + " bytes)");
  EMBER_CHECK(model.has_graph(), "onnx::load: the model has no graph");
  // The default domain's opset, checked before the checker so that the message says what
  // is readable.
  std::int64_t opset = -1;
  std::unordered_map<std::string, int> imports;
  for (const auto& o : model.opset_import()) {
    const std::string dom = o.domain() == "ai.onnx" ? "" : o.domain();
    imports[dom] = static_cast<int>(o.version());
    if (dom.empty()) opset = o.version();
  }
  EMBER_CHECK(opset >= 0,
              "onnx::load: the model imports no opset of the default domain "
              "(ai.onnx); expected one of " +
                  std::to_string(kMinOpset) + " to " + std::to_string(max_opset()));
  EMBER_CHECK(opset >= 1 && opset <= max_opset(),
              "onnx::load: the model's opset " + std::to_string(opset) +
                  " (ai.onnx) is not supported; expected " + std::to_string(kMinOpset) + " to " +
                  std::to_string(max_opset()));
  // Below opset 7, a model loads when each of its operators is the one of opset 7 (it has
  // not changed since); the others name their node and the opset that changed them.
  if (opset < kMinOpset) {
    const std::function<void(const pb::GraphProto&)> check_old = [&](const pb::GraphProto& g) {
      for (const auto& n : g.node()) {
        if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
        const auto* old = pb::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset));
        const auto* v7 = pb::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kMinOpset));
        EMBER_CHECK(old && v7 && old->SinceVersion() == v7->SinceVersion(),
                    "onnx::load: node '" + n.name() + "' (" + n.op_type() + ") (opset " +
                        std::to_string(opset) + "): the operator changed at opset " +
                        (v7 ? std::to_string(v7->SinceVersion()) : std::string("?")) +
                        "; models of opset " + std::to_string(opset) +
                        " load only when every operator is unchanged by opset " +
                        std::to_string(kMinOpset) + " (expected opset " +
                        std::to_string(kMinOpset) + " to " + std::to_string(max_opset()) + ")");
        for (const auto& a : n.attribute())
          if (a.has_g()) check_old(a.g());
      }
    };
    check_old(model.graph());
  }
  RankGuardedSchemas schemas;  // Note [Convolution ranks in ONNX shape inference]
  try {
    pb::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    ctx.set_opset_imports(imports);
    ctx.set_model_dir(base_dir);
    EMBER_CHECK(model.ir_version() >= 1 && model.ir_version() <= pb::Version::IR_VERSION,
                "onnx::load: IR version " + std::to_string(model.ir_version()) +
                    " is not supported; expected 1 to " + std::to_string(pb::Version::IR_VERSION));
    pb::checker::LexicalScopeContext lex;
    pb::checker::check_graph(model.graph(), ctx, lex);
    pb::shape_inference::InferShapes(model, &schemas);
  } catch (const pb::checker::ValidationError& e) {
    fail(std::string("onnx::load: the ONNX checker rejects the model: ") + e.what());
  } catch (const pb::InferenceError& e) {
    fail(std::string("onnx::load: ONNX shape inference rejects the model: ") + e.what());
  } catch (const ember::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(std::string("onnx::load: the ONNX library rejects the model: ") + e.what());
  }
  check_conv_ranks(model.graph(), opset);
  EMBER_CHECK(schemas.first_problem().empty(), "onnx::load: a node of the model (opset " +
                                                   std::to_string(opset) +
                                                   "): " + schemas.first_problem());
  Converter c{device, base_dir, trainable, opset};
  return c.graph_of(model.graph(), /*main=*/true);
}

TensorData read_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "onnx::read_tensor_file: cannot open '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  pb::TensorProto t;
  EMBER_CHECK(t.ParseFromString(bytes),
              "onnx::read_tensor_file: '" + path + "' is not a serialized onnx.TensorProto");
  return tensor_of(t, std::filesystem::path(path).parent_path().string());
}

}  // namespace ember::onnx
