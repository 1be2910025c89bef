// Fashion-MNIST with a 784-256-10 MLP, trained on the Cpu through the Autodiff decorator
// with raw tensor ops and a hand-written SGD step: the first end-to-end training demo.
//
//   fashion_mnist [epochs] [data_dir] [device]
//
// device is a Device::parse name (default cpu; libtorch trains on ATen's kernels).
//
// The data are Debian's dataset-fashion-mnist gzip IDX files
// (/usr/share/datasets/fashion-mnist by default). Prints loss and accuracy per epoch with
// a progress line, then the test accuracy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <ember/ember.hpp>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Split {
  Tensor<2> images;       // [n, 784] f32 in [0, 1], normalised
  Tensor<1, Int> labels;  // [n] i64
};

Split load_split(const std::string& dir, const std::string& prefix, const Device& dev) {
  TensorData img = data::load_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
  TensorData lab = data::load_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
  EMBER_CHECK(
      img.shape().rank() == 3 && lab.shape().rank() == 1 && img.shape()[0] == lab.shape()[0],
      "fashion_mnist: unexpected shapes " + img.shape().to_string() + " and " +
          lab.shape().to_string() + " in " + dir);
  const std::size_t n = img.shape()[0], pixels = img.shape()[1] * img.shape()[2];
  auto u8 = Tensor<3>::from_data(img.convert(DType::F32), dev).reshape<2>(Shape{n, pixels});
  // Scale to [0, 1], then centre with the training set's mean and deviation.
  auto x = (u8 / 255.0 - 0.2860) / 0.3530;
  return {std::move(x), Tensor<1, Int>::from_data(lab.convert(DType::I64), dev)};
}

// PyTorch's nn.Linear initialisation: kaiming-uniform with a = sqrt(5) gives weights and
// biases in U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
struct Linear {
  Tensor<2> w;  // [in, out]
  Tensor<1> b;  // [out]
  Linear(std::size_t in, std::size_t out, const Device& dev)
      : w(Tensor<2>::random(Shape{in, out}, uniform(in), dev).require_grad()),
        b(Tensor<1>::random(Shape{out}, uniform(in), dev).require_grad()) {}
  Linear(Tensor<2> w_, Tensor<1> b_) : w(std::move(w_)), b(std::move(b_)) {}
  static Distribution uniform(std::size_t fan_in) {
    const double bound = 1.0 / std::sqrt(double(fan_in));
    return Distribution::uniform(-bound, bound);
  }
  Tensor<2> forward(const Tensor<2>& x) const { return x.matmul(w) + b.unsqueeze<2>(); }
};

struct Mlp {
  Linear fc1, fc2;
  Tensor<2> forward(const Tensor<2>& x) const {
    return fc2.forward(activation::relu(fc1.forward(x)));
  }
};

// p <- p - lr * grad, outside the graph, as a fresh leaf.
template <std::size_t D>
void sgd(Tensor<D>& p, Gradients& grads, double lr) {
  auto g = p.grad_remove(grads);
  if (!g) return;
  p = Tensor<D>::from_inner(p.inner() - std::move(*g) * lr).require_grad();
}

std::size_t correct(const Tensor<2>& logits, const Tensor<1, Int>& labels) {
  auto pred = logits.argmax_dim(1).squeeze<1>(1);
  return static_cast<std::size_t>(pred.equal(labels).int_().sum().into_scalar<std::int64_t>());
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::string dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
  const std::size_t batch = 64;
  const double lr = 0.1;

  try {
    const Device ad = Device::parse(argc > 3 ? argv[3] : "cpu").autodiff();
    const Device cpu = ad.inner();
    ad.seed(42);
    const auto t_load = Clock::now();
    Split train = load_split(dir, "train", cpu);
    Split test = load_split(dir, "t10k", cpu);
    const std::size_t n = train.labels.shape()[0];
    std::printf("fashion-mnist: %zu training and %zu test images (loaded in %.2f s)\n", n,
                test.labels.shape()[0],
                std::chrono::duration<double>(Clock::now() - t_load).count());

    Mlp model{Linear(784, 256, ad), Linear(256, 10, ad)};
    std::vector<std::int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(7);
    const auto t_train = Clock::now();

    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto t0 = Clock::now();
      std::shuffle(order.begin(), order.end(), rng);
      double loss_sum = 0;
      std::size_t right = 0, seen = 0, steps = 0;
      for (std::size_t start = 0; start + batch <= n; start += batch) {
        std::vector<std::int64_t> ids(order.begin() + std::ptrdiff_t(start),
                                      order.begin() + std::ptrdiff_t(start + batch));
        auto idx = Tensor<1, Int>::from_data(TensorData::from(ids), cpu);
        auto x = Tensor<2>::from_inner(train.images.select(0, idx));
        auto y = train.labels.select(0, idx);

        auto logits = model.forward(x);
        auto logp = activation::log_softmax(logits, 1);
        auto loss = -logp.gather(1, Tensor<2, Int>::from_inner(y.unsqueeze_dim<2>(1))).mean();
        Gradients grads = loss.backward();
        sgd(model.fc1.w, grads, lr);
        sgd(model.fc1.b, grads, lr);
        sgd(model.fc2.w, grads, lr);
        sgd(model.fc2.b, grads, lr);

        loss_sum += loss.into_scalar<double>();
        right += correct(logits.inner(), y);
        seen += batch;
        if (++steps % 100 == 0) {
          std::printf("\r  epoch %d [%5zu/%zu] loss %.4f acc %.2f%%", epoch, seen, n,
                      loss_sum / double(steps), 100.0 * double(right) / double(seen));
          std::fflush(stdout);
        }
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      std::printf("\r  epoch %d: loss %.4f, train accuracy %.2f%%, %.2f s (%.2f ms/step)   \n",
                  epoch, loss_sum / double(steps), 100.0 * double(right) / double(seen), secs,
                  1000.0 * secs / double(steps));
    }
    const double train_secs = std::chrono::duration<double>(Clock::now() - t_train).count();

    // Evaluation needs no graph: run on the inner device with the parameters' values.
    const Mlp eval{Linear(model.fc1.w.inner(), model.fc1.b.inner()),
                   Linear(model.fc2.w.inner(), model.fc2.b.inner())};
    const std::size_t nt = test.labels.shape()[0];
    std::size_t right = 0;
    for (std::size_t start = 0; start < nt; start += 1000) {
      const std::int64_t len = std::int64_t(std::min<std::size_t>(1000, nt - start));
      const std::int64_t s = std::int64_t(start);
      auto x = test.images.slice({{s, s + len}});
      auto y = test.labels.slice({{s, s + len}});
      right += correct(eval.forward(x), y);
    }
    std::printf("test accuracy: %.2f%% (%zu/%zu), training time %.1f s\n",
                100.0 * double(right) / double(nt), right, nt, train_secs);
    std::printf("memory in use: %.1f MiB\n", double(memory_stats(cpu).in_use) / (1 << 20));
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
