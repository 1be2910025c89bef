// A character-level transformer language model: a decoder-only stack (nn::TransformerEncoder
// layers under a causal mask), trained on the fortune files of Debian's `fortunes` packages,
// printing the validation perplexity and a generated sample.
//
//   char_lm [--device cpu|cuda:0|...] [--corpus DIR_OR_FILE] [--steps N] [--batch B]
//           [--seq T] [--d-model D] [--layers L] [--heads H] [--lr LR] [--seed S]
//           [--sample N]
//
// The corpus defaults to /usr/share/games/fortunes (every regular file but the .dat
// indexes). Tokens are bytes; the vocabulary is the set of bytes in the corpus.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ember/ember.hpp>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string device = "cpu";
  std::string corpus = "/usr/share/games/fortunes";
  std::size_t steps = 600, batch = 32, seq = 64, d_model = 128, layers = 4, heads = 4;
  std::size_t sample = 300;
  double lr = 2e-3;
  std::uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    EMBER_CHECK(i + 1 < argc, "char_lm: " + a + " needs a value");
    const std::string v = argv[++i];
    const auto count = [&] { return std::size_t(std::stoull(v)); };
    if (a == "--device")
      o.device = v;
    else if (a == "--corpus")
      o.corpus = v;
    else if (a == "--steps")
      o.steps = count();
    else if (a == "--batch")
      o.batch = count();
    else if (a == "--seq")
      o.seq = count();
    else if (a == "--d-model")
      o.d_model = count();
    else if (a == "--layers")
      o.layers = count();
    else if (a == "--heads")
      o.heads = count();
    else if (a == "--sample")
      o.sample = count();
    else if (a == "--lr")
      o.lr = std::stod(v);
    else if (a == "--seed")
      o.seed = std::stoull(v);
    else
      fail("char_lm: unknown option " + a);
  }
  EMBER_CHECK(o.batch > 0 && o.seq > 1 && o.steps > 0,
              "char_lm: batch, seq and steps must be positive");
  return o;
}

std::string read_corpus(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat")
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    EMBER_CHECK(bool(in), "char_lm: cannot read " + f.string());
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  EMBER_CHECK(!text.empty(), "char_lm: no text in " + path +
                                 " (install Debian's fortunes package, or pass --corpus)");
  return text;
}

// The model: token and learned position embeddings, pre-norm transformer layers under a
// causal mask, a final norm and a linear head over the vocabulary.
struct CharLm {
  nn::Embedding tok, pos;
  nn::TransformerEncoder blocks;
  nn::Linear head;
  EMBER_MODULE(CharLm, tok, pos, blocks, head)

  // idx Int [batch, seq] -> logits [batch, seq, vocab].
  Tensor<3> forward(const Tensor<2, Int>& idx) const {
    const std::size_t seq = idx.shape()[1];
    const Device& dev = idx.device();
    auto positions = Tensor<1, Int>::arange(0, std::int64_t(seq), dev).reshape<2>(Shape{1, seq});
    Tensor<3> x = tok.forward(idx) + pos.forward(positions);
    x = blocks.forward(x, {nn::causal_mask(seq, dev), std::nullopt});
    return head.forward(x);
  }
  // Decoding: the logits of the new positions idx [batch, new], which follow the positions
  // the caches have seen (their keys and values are kept, not recomputed).
  Tensor<3> forward_cached(const Tensor<2, Int>& idx, std::vector<nn::KvCache>& caches) const {
    const std::size_t past = caches.empty() ? 0 : caches[0].seen(), fresh = idx.shape()[1];
    const Device& dev = idx.device();
    auto positions = Tensor<1, Int>::arange(std::int64_t(past), std::int64_t(past + fresh), dev)
                         .reshape<2>(Shape{1, fresh});
    return head.forward(blocks.forward_cached(tok.forward(idx) + pos.forward(positions), caches));
  }
};

struct CharLmConfig {
  std::size_t vocab;
  std::size_t max_seq;
  std::size_t d_model = 128;
  std::size_t layers = 4;
  std::size_t heads = 4;
  EMBER_CONFIG(CharLmConfig, vocab, max_seq, d_model, layers, heads)
  CharLm init(const Device& dev) const {
    const auto layer = nn::TransformerEncoderLayerConfig{d_model, heads}
                           .with_d_ff(4 * d_model)
                           .with_dropout(0.0)
                           .with_activation("gelu")
                           .with_norm_first(true);
    const auto embed = nn::Initializer::normal(0.0, 0.02);
    return CharLm{nn::EmbeddingConfig{vocab, d_model}.with_initializer(embed).init(dev),
                  nn::EmbeddingConfig{max_seq, d_model}.with_initializer(embed).init(dev),
                  nn::TransformerEncoderConfig{layer, layers}.with_final_norm(true).init(dev),
                  nn::LinearConfig{d_model, vocab}.init(dev)};
  }
};

// Batches of random windows: inputs [batch, seq] and the next characters as targets.
struct Windows {
  const std::vector<std::int64_t>& tokens;
  std::size_t seq;
  std::pair<Tensor<2, Int>, Tensor<2, Int>> draw(std::mt19937_64& rng, std::size_t batch,
                                                 const Device& dev) const {
    std::uniform_int_distribution<std::size_t> start(0, tokens.size() - seq - 1);
    std::vector<std::int64_t> x(batch * seq), y(batch * seq);
    for (std::size_t b = 0; b < batch; ++b) {
      const std::size_t s = start(rng);
      std::copy_n(tokens.begin() + std::ptrdiff_t(s), seq, x.begin() + std::ptrdiff_t(b * seq));
      std::copy_n(tokens.begin() + std::ptrdiff_t(s + 1), seq, y.begin() + std::ptrdiff_t(b * seq));
    }
    const auto make = [&](const std::vector<std::int64_t>& v) {
      return Tensor<2, Int>::from_data(TensorData::from(v, Shape{batch, seq}), dev);
    };
    return {make(x), make(y)};
  }
};

Tensor<1> loss_of(const CharLm& m, const Tensor<2, Int>& x, const Tensor<2, Int>& y,
                  std::size_t vocab) {
  const std::size_t n = x.shape()[0] * x.shape()[1];
  return nn::loss::cross_entropy(m.forward(x).reshape<2>(Shape{n, vocab}), y.reshape<1>(Shape{n}));
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const std::string text = read_corpus(o.corpus);
  std::array<int, 256> id{};
  id.fill(-1);
  std::vector<unsigned char> chars;
  for (unsigned char c : text)
    if (id[c] < 0) id[c] = 0, chars.push_back(c);
  std::sort(chars.begin(), chars.end());
  for (std::size_t i = 0; i < chars.size(); ++i) id[chars[i]] = int(i);
  std::vector<std::int64_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = id[static_cast<unsigned char>(text[i])];
  const std::size_t split = tokens.size() * 9 / 10, vocab = chars.size();
  const std::vector<std::int64_t> train(tokens.begin(), tokens.begin() + std::ptrdiff_t(split));
  const std::vector<std::int64_t> valid(tokens.begin() + std::ptrdiff_t(split), tokens.end());
  EMBER_CHECK(valid.size() > o.seq + 1,
              "char_lm: the corpus is too short for --seq " + std::to_string(o.seq));

  const Device dev = Device::parse(o.device);
  const Device ad = dev.autodiff();
  dev.seed(o.seed);
  std::printf("char_lm: %zu characters (%zu train, %zu valid), vocabulary %zu, device %s\n",
              tokens.size(), train.size(), valid.size(), vocab, o.device.c_str());
  const CharLmConfig cfg =
      CharLmConfig{vocab, o.seq}.with_d_model(o.d_model).with_layers(o.layers).with_heads(o.heads);
  CharLm model = cfg.init(ad);
  std::printf("model: %zu parameters, %zu layers of d_model %zu, context %zu\n", model.num_params(),
              o.layers, o.d_model, o.seq);

  auto opt = optim::no_decay_on_biases_and_norms(optim::AdamWConfig{}.with_weight_decay(0.1));
  const std::size_t warmup = std::max<std::size_t>(1, o.steps / 10);
  auto sched = optim::SequentialLr::of(
      {warmup}, optim::LinearLrConfig{o.lr / warmup, o.lr, warmup}.init(),
      optim::CosineAnnealingLrConfig{o.lr, o.steps - std::min(o.steps, warmup)}
          .with_min_lr(o.lr / 10)
          .init());
  std::mt19937_64 rng(o.seed);
  const Windows train_windows{train, o.seq}, valid_windows{valid, o.seq};

  const auto t0 = Clock::now();
  double smoothed = std::log(double(vocab));
  for (std::size_t step = 1; step <= o.steps; ++step) {
    auto [x, y] = train_windows.draw(rng, o.batch, ad);
    auto loss = loss_of(model, x, y, vocab);
    const double l = loss.into_scalar<double>();
    EMBER_CHECK(std::isfinite(l), "char_lm: the loss became " + std::to_string(l) + " at step " +
                                      std::to_string(step));
    auto gp = optim::GradientsParams::from_grads(loss.backward(), model);
    optim::clip_grad_norm(gp, 1.0);
    model = opt.step(sched.step(), std::move(model), std::move(gp));
    smoothed = 0.95 * smoothed + 0.05 * l;
    if (step % 50 == 0 || step == o.steps) {
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      std::printf("step %5zu/%zu  loss %.3f  %.0f tokens/s\n", step, o.steps, smoothed,
                  double(step * o.batch * o.seq) / secs);
      std::fflush(stdout);
    }
  }
  const double train_secs = std::chrono::duration<double>(Clock::now() - t0).count();

  // Validation perplexity over fixed windows, outside the graph.
  const CharLm eval = model.valid();
  std::mt19937_64 vrng(o.seed + 1);
  double total = 0;
  const std::size_t vbatches = 8;
  for (std::size_t i = 0; i < vbatches; ++i) {
    auto [x, y] = valid_windows.draw(vrng, o.batch, dev);
    total += loss_of(eval, x, y, vocab).into_scalar<double>();
  }
  const double vloss = total / double(vbatches);
  std::printf("validation: loss %.3f, perplexity %.2f (uniform: %zu); %.1f s of training\n", vloss,
              std::exp(vloss), vocab, train_secs);
  EMBER_CHECK(std::exp(vloss) < 0.5 * double(vocab),
              "char_lm: the model did not learn: validation perplexity " +
                  std::to_string(std::exp(vloss)) + " is not below half the vocabulary size");

  // A sample, drawn character by character from the softmax of the last position, with a
  // key/value cache (the context restarts from its last half when it is full).
  const std::string prompt = "The ";
  std::vector<std::int64_t> ctx;
  for (unsigned char c : prompt) ctx.push_back(id[c] >= 0 ? id[c] : 0);
  std::string out = prompt;
  std::mt19937_64 srng(o.seed + 2);
  std::vector<nn::KvCache> caches;
  std::vector<std::int64_t> feed = ctx;
  for (std::size_t i = 0; i < o.sample; ++i) {
    if ((caches.empty() ? 0 : caches[0].seen()) + feed.size() > o.seq) {
      caches.clear();
      feed.assign(ctx.end() - std::ptrdiff_t(o.seq / 2), ctx.end());
    }
    const std::size_t n = feed.size();
    auto x = Tensor<2, Int>::from_data(TensorData::from(feed, Shape{1, n}), dev);
    auto logits =
        eval.forward_cached(x, caches).narrow(1, std::int64_t(n - 1), 1).reshape<1>(Shape{vocab});
    const auto p =
        activation::softmax(logits.mul_scalar(1.0 / 0.8), 0).to_data().to_vector<double>();
    std::discrete_distribution<std::size_t> pick(p.begin(), p.end());
    const std::size_t next = pick(srng);
    ctx.push_back(std::int64_t(next));
    feed.assign(1, std::int64_t(next));
    out.push_back(char(chars[next]));
  }
  std::printf("--- sample ---\n%s\n--------------\n", out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
