// The op IR as a specification: each struct's traits (name, class, operands), the output
// shapes and dtypes inferred in ir/ against closed forms and against what the Cpu backend
// produces, Backend::supports and the registry's fallback, and docs/ir.md's op table,
// which is generated from the IR (EMBER_WRITE_DOCS=1 rewrites it; `make ir-doc`).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <ember/backend/registry.hpp>
#include <ember/ember.hpp>
#include <ember/ir/infer.hpp>

namespace {

using namespace ember;

// Calls f(std::type_identity<T>) for every op struct T of ir::Op, in OpKind order.
template <class F>
void for_each_op_type(F f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<std::variant_alternative_t<I, ir::Op>>{}), ...);
  }
  (std::make_index_sequence<ir::kNumOps>{});
}

TEST(IrTraits, KindsNamesAndClassesComeFromTheStructs) {
  std::set<std::string> names;
  std::size_t i = 0;
  for_each_op_type([&](auto t) {
    using T = typename decltype(t)::type;
    const auto k = ir::kind_v<T>;
    EXPECT_EQ(static_cast<std::size_t>(k), i++);
    EXPECT_STREQ(ir::name(k), T::kName);
    EXPECT_EQ(ir::op_class(k), T::kClass);
    EXPECT_EQ(ir::is_arithmetic(k), T::kArithmetic);
    EXPECT_EQ(ir::kind_of(ir::Op{T{}}), k);
    EXPECT_TRUE(names.insert(T::kName).second) << "duplicate name " << T::kName;
  });
  EXPECT_EQ(i, static_cast<std::size_t>(ir::OpKind::Count_));
}

TEST(IrTraits, OperandsAreTheStructsHandlesInOrder) {
  auto a = std::make_shared<ir::TensorNode>(Shape{2, 3}, DType::F32);
  auto b = std::make_shared<ir::TensorNode>(Shape{2, 3}, DType::F32);
  auto c = std::make_shared<ir::TensorNode>(Shape{2, 3}, DType::Bool);

  ir::Op where = ir::Where{c, a, b, Shape{2, 3}};
  ASSERT_EQ(ir::operand_count(where), 3u);
  EXPECT_EQ(ir::operand(where, 0), c);
  EXPECT_EQ(ir::operand(where, 1), a);
  EXPECT_EQ(ir::operand(where, 2), b);

  // Mutable access writes through to the op's own members.
  ir::operand(where, 1) = b;
  EXPECT_EQ(std::get<ir::Where>(where).a, b);
  ir::for_each_operand(where, [&](ir::Handle& h) { h = a; });
  EXPECT_EQ(std::get<ir::Where>(where).cond, a);
  EXPECT_EQ(std::get<ir::Where>(where).b, a);

  // Optional operands keep their slot; Cat has one slot per input; creation has none.
  ir::Op ln = ir::LayerNorm{a, nullptr, b, 1, 1e-5};
  ASSERT_EQ(ir::operand_count(ln), 3u);
  EXPECT_EQ(ir::operand(ln, 1), nullptr);
  EXPECT_EQ(ir::operand(ln, 2), b);
  ir::Op cat = ir::Cat{{a, b, a, b}, 0, Shape{8, 3}};
  EXPECT_EQ(ir::operand_count(cat), 4u);
  EXPECT_EQ(ir::operand(cat, 3), b);
  const ir::Op fill = ir::Fill{Shape{2}, DType::F32, 1.0, 0};
  EXPECT_EQ(ir::operand_count(fill), 0u);
  std::size_t visited = 0;
  ir::for_each_operand(fill, [&](const ir::Handle&) { ++visited; });
  EXPECT_EQ(visited, 0u);
}

ir::Handle node(Shape s, DType dt = DType::F32) {
  return std::make_shared<ir::TensorNode>(std::move(s), dt);
}

// Closed forms: floor((in + 2 p - d (k - 1) - 1) / s) + 1 window positions per dim.
TEST(IrInfer, WindowShapes) {
  const ir::Window w{{3, 2}, {2, 3}, {1, 0}, {1, 2}};
  // dim 0: (7 + 2 - 2 - 1) / 2 + 1 = 4; dim 1: (9 - 2 - 1) / 3 + 1 = 3.
  EXPECT_EQ(ir::out_shape(ir::Pool{node({5, 2, 7, 9}), w, ir::PoolFn::Max}), (Shape{5, 2, 4, 3}));
  EXPECT_EQ(ir::out_shape(ir::Unfold{node({5, 2, 7, 9}), w, 0.0}), (Shape{5, 2 * 6, 12}));
  EXPECT_EQ(ir::out_shape(ir::Fold{node({5, 12, 12}), {7, 9}, w}), (Shape{5, 2, 7, 9}));
  const ir::Window w1{{4}, {1}, {0}, {3}};  // (20 - 9 - 1) / 1 + 1 = 11
  EXPECT_EQ(ir::out_shape(ir::Pool{node({1, 3, 20}), w1, ir::PoolFn::Sum}), (Shape{1, 3, 11}));
}

TEST(IrInfer, MatmulCatReduceShapes) {
  EXPECT_EQ(ir::matmul_shape(Shape{2, 1, 3, 4}, Shape{5, 4, 6}, "t"), (Shape{2, 5, 3, 6}));
  EXPECT_EQ(ir::matmul_shape(Shape{3, 4}, Shape{4, 6}, "t"), (Shape{3, 6}));
  EXPECT_THROW(ir::matmul_shape(Shape{2, 3, 4}, Shape{3, 4, 6}, "t"), Error);
  EXPECT_EQ(ir::cat_shape({node({2, 3}), node({2, 5}), node({2, 1})}, 1), (Shape{2, 9}));
  EXPECT_EQ(ir::out_shape(ir::Reduce{ir::ReduceFn::Sum, node({4, 5, 6}), 1, DType::F32}),
            (Shape{4, 1, 6}));
  EXPECT_EQ(ir::reduce_dtype(ir::ReduceFn::ArgMax, DType::F16), DType::I64);
  EXPECT_EQ(ir::reduce_dtype(ir::ReduceFn::Any, DType::I8), DType::Bool);
  EXPECT_EQ(ir::reduce_dtype(ir::ReduceFn::Mean, DType::BF16), DType::BF16);
  EXPECT_EQ(ir::out_shape(ir::Slice{node({10, 4}), {{1, 8, 3}, {0, 4, 1}}}), (Shape{3, 4}));
  EXPECT_EQ(ir::out_shape(ir::Permute{node({2, 3, 4}), {2, 0, 1}}), (Shape{4, 2, 3}));
  EXPECT_EQ(ir::out_dtype(ir::Sort{node({3}), 0, false}, 1), DType::I64);
}

// What the Cpu backend allocates is what ir/ says.
TEST(IrInfer, CpuOutputsMatchTheInferredShapes) {
  auto be = backend::Registry::global().backend("cpu", 0);
  auto x = be->from_data(TensorData::from(std::vector<float>(2 * 3 * 7 * 9, 1.0f), {2, 3, 7, 9}));
  const ir::Window w{{3, 2}, {2, 3}, {1, 0}, {1, 2}};
  const std::vector<ir::Op> ops = {
      ir::Pool{x, w, ir::PoolFn::Max},
      ir::Unfold{x, w, 0.0},
      ir::Reduce{ir::ReduceFn::ArgMin, x, 2, DType::I64},
      ir::Permute{x, {3, 1, 0, 2}},
  };
  for (const ir::Op& op : ops) {
    const auto out = be->execute(op);
    std::visit(
        [&](const auto& o) {
          if constexpr (requires { ir::out_shape(o); }) {
            EXPECT_EQ(out[0]->shape(), ir::out_shape(o)) << ir::name(ir::kind_of(op));
            EXPECT_EQ(out[0]->dtype(), ir::out_dtype(o)) << ir::name(ir::kind_of(op));
          }
        },
        op);
  }
  // Batch norm and its gradient: x's shape, then [2, C].
  for (const ir::Op& op : {ir::Op(ir::BatchNorm{x, {}, {}, 1e-5}),
                           ir::Op(ir::BatchNormGrad{
                               x, {}, be->execute(ir::BatchNorm{x, {}, {}, 1e-5})[1], x, 1e-5})}) {
    const auto out = be->execute(op);
    ASSERT_EQ(out.size(), 2u);
    std::visit(
        [&](const auto& o) {
          if constexpr (ir::MultiOutput<std::decay_t<decltype(o)>> &&
                        requires { ir::out_shape(o, 1); }) {
            for (std::size_t k = 0; k < 2; ++k) {
              EXPECT_EQ(out[k]->shape(), ir::out_shape(o, k)) << ir::name(ir::kind_of(op));
              EXPECT_EQ(out[k]->dtype(), ir::out_dtype(o, k)) << ir::name(ir::kind_of(op));
            }
          }
        },
        op);
    EXPECT_EQ(out[1]->shape(), (Shape{2, 3}));
  }
  auto cols = be->execute(ir::Unfold{x, w, 0.0})[0];
  const ir::Fold fold{cols, {7, 9}, w};
  EXPECT_EQ(be->execute(fold)[0]->shape(), ir::out_shape(fold));
}

// ---- supports and the fallback ----

TEST(Supports, DefaultIsTheIrDtypeRule) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const auto f32 = node({1, 4, 3}), i32 = node({1, 4, 3}, DType::I32);
  const ir::Window w{{2}, {1}, {0}, {1}};
  EXPECT_TRUE(be->supports(ir::Fold{f32, {4}, w}));
  EXPECT_FALSE(be->supports(ir::Fold{i32, {4}, w}));  // fold sums: float dtypes only
  EXPECT_FALSE(be->supports(ir::Pool{node({1, 1, 4}, DType::Bool), w, ir::PoolFn::Max}));
  EXPECT_FALSE(be->supports(ir::Matmul{i32, node({1, 3, 2}, DType::I32), Shape{1, 4, 2}}));
  EXPECT_TRUE(be->supports(ir::Matmul{f32, node({1, 3, 2}), Shape{1, 4, 2}}));
  EXPECT_FALSE(be->supports(ir::Gather{f32, 0, f32}));  // index: an integer dtype
}

TEST(Supports, AnOpNoBackendRunsIsAClearError) {
  auto& cpu = Device::cpu().backend();
  auto x = cpu.from_data(TensorData::from(std::vector<std::int32_t>(12, 1), {1, 4, 3}));
  try {
    cpu.execute(ir::Fold{x, {4}, ir::Window{{2}, {1}, {0}, {1}}});
    FAIL() << "expected ember::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cpu: Fold of ([1, 4, 3] i32) is not supported"), std::string::npos) << m;
  }
}

// A backend that stores its tensors on the registered Cpu and runs everything but matmul itself:
// matmul reaches the registry's fallback, which is the registered "cpu".
class NoMatmulBackend final : public backend::Backend {
 public:
  std::string name() const override { return "no_matmul"; }
  ir::Handle from_data(const TensorData& d) override {
    ++copies_in;
    return store_->from_data(d);
  }
  TensorData to_data(const ir::Handle& x) override { return store_->to_data(x); }
  std::vector<ir::Handle> execute(ir::Op op) override {
    if (!supports(op)) return backend::execute_on_fallback(*this, std::move(op));
    return store_->execute(std::move(op));
  }
  bool supports(const ir::Op& op) const override {
    return !std::holds_alternative<ir::Matmul>(op) && Backend::supports(op);
  }
  void seed(std::uint64_t) override {}
  backend::MemoryStats memory_stats() const override { return {}; }
  void empty_cache() override {}
  void sync() override {}

  int copies_in = 0;

 private:
  std::shared_ptr<backend::Backend> store_ = backend::Registry::global().backend("cpu", 0);
};

TEST(Supports, AnUnsupportedOpRunsOnTheRegistrysFallback) {
  NoMatmulBackend be;
  auto a = be.from_data(TensorData::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
  auto b = be.from_data(TensorData::from(std::vector<float>{1, 0, -1, 2, 0.5f, 1}, {3, 2}));
  EXPECT_EQ(be.copies_in, 2);
  const auto out = be.execute(ir::Matmul{a, b, Shape{2, 2}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(be.copies_in, 3);  // the result came back into this backend
  const auto r = be.to_data(out[0]);
  // [[1, 2, 3], [4, 5, 6]] x [[1, 0], [-1, 2], [0.5, 1]]
  const std::vector<double> want = {1 - 2 + 1.5, 0 + 4 + 3, 4 - 5 + 3, 0 + 10 + 6};
  ASSERT_EQ(r.shape(), (Shape{2, 2}));
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(r.get_f64(i), want[i]) << i;
  // What this backend supports, it runs itself.
  be.execute(ir::Unary{ir::UnaryFn::Neg, a, DType::F32});
  EXPECT_EQ(be.copies_in, 3);
}

TEST(Registry, UnindexedBackendsHaveOneDeviceName) {
  const auto names = Device::available();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "cpu:0"), names.end());
}

// ---- docs/ir.md's op table ----

std::string op_table() {
  std::ostringstream s;
  s << "| op | class | operands | computes on values |\n| --- | --- | :-: | :-: |\n";
  for_each_op_type([&](auto t) {
    using T = typename decltype(t)::type;
    T op{};
    const auto slots = T::handles(op);
    const bool variadic = !requires { std::tuple_size<decltype(slots)>::value; };
    s << "| `" << T::kName << "` | " << ir::name(T::kClass) << " | "
      << (variadic ? std::string("1 or more") : std::to_string(std::size(slots))) << " | "
      << (T::kArithmetic ? "yes" : "no") << " |\n";
  });
  return s.str();
}

TEST(IrDoc, OpTableIsCurrent) {
  const std::string path = std::string(EMBER_SOURCE_DIR) + "/docs/ir.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string begin = "<!-- op table: generated by test_ir (make ir-doc) -->\n";
  const std::string end = "<!-- end of op table -->";
  const auto b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << path << " has no generated op table between \"" << begin << "\" and \"" << end << "\"";
  const std::string want = op_table();
  const std::string have = doc.substr(b + begin.size(), e - b - begin.size());
  if (have != want && std::getenv("EMBER_WRITE_DOCS")) {
    std::ofstream(path) << doc.substr(0, b + begin.size()) << want << doc.substr(e);
    return;
  }
  EXPECT_EQ(have, want) << path << " is stale: run `make ir-doc`";
}

}  // namespace

// Bool takes the arg reductions at the IR level (false < true, the first maximum wins),
// though the tensor layer offers only any/all on bool.
TEST(Supports, ArgReductionsOfBoolRunOnTheCpu) {
  auto be = backend::Registry::global().backend("cpu", 0);
  auto x = be->from_data(
      TensorData({std::byte{0}, std::byte{1}, std::byte{1}, std::byte{0}}, Shape{4}, DType::Bool));
  const ir::Reduce amax{ir::ReduceFn::ArgMax, x, 0, DType::I64};
  const ir::Reduce amin{ir::ReduceFn::ArgMin, x, 0, DType::I64};
  ASSERT_TRUE(be->supports(amax));
  EXPECT_EQ(be->to_data(be->execute(amax)[0]).to_vector<std::int64_t>(),
            std::vector<std::int64_t>{1});
  EXPECT_EQ(be->to_data(be->execute(amin)[0]).to_vector<std::int64_t>(),
            std::vector<std::int64_t>{0});
  EXPECT_FALSE(be->supports(ir::Reduce{ir::ReduceFn::Sum, x, 0, DType::Bool}));
}
