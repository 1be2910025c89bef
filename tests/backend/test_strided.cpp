// The strided-tensor layer every buffer-based backend shares (ember/backend/strided_view.hpp,
// strided_tensor.hpp): dim collapse, broadcast strides, walks, dim splits, the in-place
// reuse rule and the view ops, each checked against a direct enumeration of the elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <ember/backend/strided_tensor.hpp>
#include <ember/backend/strided_view.hpp>

using namespace ember;
using backend::StridedView;

namespace {

using Strides = std::vector<std::int64_t>;

// Every element's offset, in row-major order of the multi-index, for each operand.
template <std::size_t N>
std::vector<std::array<std::int64_t, N>> offsets(const std::vector<std::size_t>& shape,
                                                 const std::array<Strides, N>& strides) {
  std::size_t total = 1;
  for (std::size_t e : shape) total *= e;
  std::vector<std::array<std::int64_t, N>> out;
  std::vector<std::size_t> idx(shape.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    std::array<std::int64_t, N> o{};
    for (std::size_t k = 0; k < N; ++k) {
      for (std::size_t d = 0; d < shape.size(); ++d) {
        o[k] += static_cast<std::int64_t>(idx[d]) * strides[k][d];
      }
    }
    out.push_back(o);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(StridedView, CollapseKeepsEveryOffsetInOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t rank = 1 + rng() % 5;
    std::vector<std::size_t> shape(rank);
    for (auto& e : shape) e = 1 + rng() % 4;
    // Operand 0 contiguous, 1 a permutation of a contiguous layout, 2 broadcast or flipped.
    std::array<Strides, 3> st;
    st[0] = backend::contiguous_strides(Shape(shape));
    std::vector<std::size_t> perm(rank);
    for (std::size_t i = 0; i < rank; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    st[1].assign(rank, 0);
    std::int64_t acc = 1;
    for (std::size_t i = rank; i-- > 0;) {
      st[1][perm[i]] = acc;
      acc *= static_cast<std::int64_t>(shape[perm[i]]);
    }
    st[2] = st[0];
    for (auto& s : st[2]) {
      const unsigned r = rng() % 3;
      s = r == 0 ? 0 : r == 1 ? -s : s;
    }
    const auto want = offsets<3>(shape, st);
    std::vector<std::size_t> cshape = shape;
    std::array<Strides, 3> cst = st;
    backend::collapse_dims(cshape, cst);
    ASSERT_GE(cshape.size(), 1u);
    ASSERT_LE(cshape.size(), rank);
    for (const auto& s : cst) ASSERT_EQ(s.size(), cshape.size());
    EXPECT_EQ(offsets<3>(cshape, cst), want) << "trial " << trial;
  }
}

TEST(StridedView, CollapseMergesWhatIsContiguousAndKeepsWhatIsNot) {
  std::vector<std::size_t> shape{2, 3, 4};
  std::array<Strides, 1> st{Strides{12, 4, 1}};
  backend::collapse_dims(shape, st);
  EXPECT_EQ(shape, (std::vector<std::size_t>{24}));
  EXPECT_EQ(st[0], (Strides{1}));

  std::vector<std::size_t> t{3, 4};  // a transpose: two dims stay
  std::array<Strides, 2> tst{Strides{1, 3}, Strides{4, 1}};
  backend::collapse_dims(t, tst);
  EXPECT_EQ(t, (std::vector<std::size_t>{3, 4}));

  // One element: one dim of extent 1 with unit strides, whatever the strides were.
  std::vector<std::int64_t> one{1, 1, 1};
  std::vector<Strides> ost{Strides{0, 0, 0}, Strides{5, 7, 9}};
  backend::collapse_dims(one, ost);
  EXPECT_EQ(one, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(ost[0], (Strides{1}));
  EXPECT_EQ(ost[1], (Strides{1}));
}

TEST(StridedView, BroadcastStridesWalksOneElementAlongBroadcastDims) {
  const Shape x{3, 1}, out{3, 4};
  const Strides s = backend::broadcast_strides(x, {1, 1}, out);
  EXPECT_EQ(s, (Strides{1, 0}));
  // Every element of out reads x[i, 0]: offset i.
  const auto offs = offsets<1>({3, 4}, {s});
  for (std::size_t n = 0; n < offs.size(); ++n) {
    EXPECT_EQ(offs[n][0], static_cast<std::int64_t>(n / 4));
  }
  // expand_view is the same arithmetic.
  EXPECT_EQ(backend::expand_view(StridedView{x, {1, 1}, 5}, out).strides, s);
}

TEST(StridedView, WalkOf) {
  const Shape out{2, 3};
  EXPECT_EQ(backend::walk_of(out, {3, 1}, out), backend::Walk::Linear);
  EXPECT_EQ(backend::walk_of(Shape{1, 1}, {1, 1}, out), backend::Walk::Scalar);
  EXPECT_EQ(backend::walk_of(Shape{1, 3}, {3, 1}, out), backend::Walk::Strided);
  EXPECT_EQ(backend::walk_of(out, {1, 2}, out), backend::Walk::Strided);  // a transpose
  // Extent-1 dims carry no layout: [2, 1] with any stride on the 1 walks linearly.
  EXPECT_EQ(backend::walk_of(Shape{2, 1}, {1, 99}, Shape{2, 1}), backend::Walk::Linear);
}

TEST(StridedView, SplitAt) {
  const auto d = backend::split_at(Shape{2, 3, 4, 5}, 2);
  EXPECT_EQ(d.outer, 6u);
  EXPECT_EQ(d.n, 4u);
  EXPECT_EQ(d.inner, 5u);
  const auto e = backend::split_at<std::int64_t>(Shape{7}, 0);
  EXPECT_EQ(e.outer, 1);
  EXPECT_EQ(e.n, 7);
  EXPECT_EQ(e.inner, 1);
}

// A host buffer standing in for a backend's.
class TestBuffer {
 public:
  explicit TestBuffer(std::size_t bytes) : data_(bytes) {}
  void* data() const { return const_cast<std::byte*>(data_.data()); }
  std::size_t bytes() const { return data_.size(); }

 private:
  std::vector<std::byte> data_;
};
using Tensor = backend::StridedTensor<TestBuffer>;

std::shared_ptr<Tensor> make(std::size_t bytes, Shape shape, Strides strides,
                             std::int64_t offset = 0, DType dt = DType::F32) {
  return std::make_shared<Tensor>(std::make_shared<TestBuffer>(bytes), std::move(shape), dt,
                                  std::move(strides), offset);
}

TEST(InPlaceReuse, SoleOwnedWholeContiguousBufferIsReused) {
  ir::Handle x = make(24, Shape{2, 3}, {3, 1});
  EXPECT_TRUE(backend::reusable<TestBuffer>(x, Shape{2, 3}, DType::F32));
}

TEST(InPlaceReuse, AnyOtherReferenceForbidsIt) {
  ir::Handle x = make(24, Shape{2, 3}, {3, 1});
  ir::Handle other = x;  // another Tensor of the same handle
  EXPECT_FALSE(backend::reusable<TestBuffer>(x, Shape{2, 3}, DType::F32));
  other.reset();
  const auto& t = static_cast<const Tensor&>(*x);
  ir::Handle view = backend::with_layout(t, t.layout());  // a view sharing the buffer
  EXPECT_FALSE(backend::reusable<TestBuffer>(x, Shape{2, 3}, DType::F32));
}

TEST(InPlaceReuse, OnlyTheWholeBufferWithTheOutputsShapeAndDtype) {
  const Shape s{2, 3};
  EXPECT_FALSE(backend::reusable<TestBuffer>(make(24, s, {3, 1}), s, DType::I32));  // dtype
  EXPECT_FALSE(backend::reusable<TestBuffer>(make(24, s, {3, 1}), Shape{3, 2}, DType::F32));
  EXPECT_FALSE(backend::reusable<TestBuffer>(make(24, s, {1, 2}), s, DType::F32));     // transpose
  EXPECT_FALSE(backend::reusable<TestBuffer>(make(28, s, {3, 1}, 1), s, DType::F32));  // offset
  // A contiguous prefix of a larger buffer (x[0:2] of a dropped x of 4 rows): written fresh,
  // so the output never keeps the rest of the buffer alive (`==`, Note [In-place reuse]).
  EXPECT_FALSE(backend::reusable<TestBuffer>(make(48, s, {3, 1}), s, DType::F32));
  // An empty tensor (a one-byte allocation) holds nothing to reuse.
  EXPECT_FALSE(
      backend::reusable<TestBuffer>(make(1, Shape{0, 3}, {3, 1}), Shape{0, 3}, DType::F32));
  EXPECT_FALSE(backend::reusable<TestBuffer>(nullptr, s, DType::F32));
}

TEST(StridedTensor, ViewOpsShareTheBufferAndRewriteTheLayout) {
  auto x = make(24 * 4, Shape{2, 3, 4}, {12, 4, 1});
  const auto& xt = *x;
  const auto as = [](const ir::Handle& h) -> const Tensor& {
    return static_cast<const Tensor&>(*h);
  };
  auto p = backend::permute<TestBuffer>(ir::Permute{x, {2, 0, 1}});
  EXPECT_EQ(p->shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(as(p).strides(), (Strides{1, 12, 4}));
  EXPECT_EQ(as(p).buffer(), xt.buffer());
  auto sl = backend::slice<TestBuffer>(ir::Slice{x, {{1, 2, 1}, {0, 3, 2}, {1, 4, 1}}});
  EXPECT_EQ(sl->shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(as(sl).offset(), 13);
  EXPECT_EQ(as(sl).strides(), (Strides{12, 8, 1}));
  auto f = backend::flip<TestBuffer>(ir::Flip{x, {2}});
  EXPECT_EQ(as(f).offset(), 3);
  EXPECT_EQ(as(f).strides(), (Strides{12, 4, -1}));
  EXPECT_EQ(as(f).data(), static_cast<std::byte*>(xt.buffer()->data()) + 12);

  // Reshape: a view where the layout allows, the backend's contiguous copy where not.
  int copies = 0;
  const auto contiguous = [&](const ir::Handle& h) {
    ++copies;
    const auto& t = static_cast<const Tensor&>(*h);
    return make(t.shape().num_elements() * 4, t.shape(), backend::contiguous_strides(t.shape()));
  };
  auto r = backend::reshape<TestBuffer>(ir::Reshape{x, Shape{6, 4}}, contiguous);
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(as(r).buffer(), xt.buffer());
  auto rp = backend::reshape<TestBuffer>(ir::Reshape{p, Shape{24}}, contiguous);
  EXPECT_EQ(copies, 1);
  EXPECT_NE(as(rp).buffer(), xt.buffer());
  EXPECT_EQ(as(rp).strides(), (Strides{1}));
}

}  // namespace
