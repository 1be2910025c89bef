// The same inference as firmware_model.cpp written as plain loops over the same weights (raw
// f32 in a fixed order, fashion_small.cpp export --weights), with no ember at all: the
// baseline of the framework's cost in flash and in instructions (docs/embedded.md, Sizes).
// It checks its predictions against the host's too, so the baseline is known to compute the
// same thing. The exit code is the number of failed cases.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "board.hpp"
#include "check.hpp"

extern "C" const unsigned char ember_weights_start[], ember_weights_end[];
extern "C" const unsigned char ember_inputs_start[], ember_inputs_end[];

namespace {

constexpr int kH = 28, kW = 28, kC1 = 8, kC2 = 16, kHidden = 32, kClasses = 10;
constexpr float kEps = 1e-5f, kMean = 0.2860f, kStd = 0.3530f;

struct Weights {
  const float *conv1_w, *conv1_b, *bn1_w, *bn1_b, *bn1_mean, *bn1_var;
  const float *conv2_w, *conv2_b, *bn2_w, *bn2_b, *bn2_mean, *bn2_var;
  const float *fc1_w, *fc1_b, *fc2_w, *fc2_b;
};

// 3x3 convolution, padding 1, then batch norm (running statistics), relu and 2x2 max pool:
// in [cin, h, w] -> out [cout, h / 2, w / 2].
void conv_bn_relu_pool(const float* in, int cin, int h, int w, int cout, const float* wt,
                       const float* bias, const float* g, const float* beta, const float* mean,
                       const float* var, float* out) {
  for (int o = 0; o < cout; ++o) {
    const float scale = g[o] / std::sqrt(var[o] + kEps);
    for (int y = 0; y < h / 2; ++y) {
      for (int x = 0; x < w / 2; ++x) {
        float best = 0.0f;  // relu's floor: max(relu(v)) = max(0, max(v))
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            const int oy = 2 * y + dy, ox = 2 * x + dx;
            float acc = bias[o];
            for (int c = 0; c < cin; ++c) {
              for (int ky = 0; ky < 3; ++ky) {
                const int iy = oy + ky - 1;
                if (iy < 0 || iy >= h) continue;
                for (int kx = 0; kx < 3; ++kx) {
                  const int ix = ox + kx - 1;
                  if (ix < 0 || ix >= w) continue;
                  acc += wt[((o * cin + c) * 3 + ky) * 3 + kx] * in[(c * h + iy) * w + ix];
                }
              }
            }
            const float v = (acc - mean[o]) * scale + beta[o];
            if (v > best) best = v;
          }
        }
        out[(o * (h / 2) + y) * (w / 2) + x] = best;
      }
    }
  }
}

void linear(const float* in, int n_in, int n_out, const float* wt, const float* bias, bool relu,
            float* out) {
  for (int o = 0; o < n_out; ++o) {
    float acc = bias[o];
    for (int i = 0; i < n_in; ++i) acc += wt[o * n_in + i] * in[i];
    out[o] = relu && acc < 0.0f ? 0.0f : acc;
  }
}

float g_x[kH * kW], g_h1[kC1 * 14 * 14], g_h2[kC2 * 7 * 7], g_fc1[kHidden], g_out[kClasses];

void classify(const Weights& m, const std::uint8_t* pixels) {
  const float a = 1.0f / (255.0f * kStd), b = -kMean / kStd;
  for (int i = 0; i < kH * kW; ++i) g_x[i] = static_cast<float>(pixels[i]) * a + b;
  conv_bn_relu_pool(g_x, 1, kH, kW, kC1, m.conv1_w, m.conv1_b, m.bn1_w, m.bn1_b, m.bn1_mean,
                    m.bn1_var, g_h1);
  conv_bn_relu_pool(g_h1, kC1, 14, 14, kC2, m.conv2_w, m.conv2_b, m.bn2_w, m.bn2_b, m.bn2_mean,
                    m.bn2_var, g_h2);
  linear(g_h2, kC2 * 7 * 7, kHidden, m.fc1_w, m.fc1_b, true, g_fc1);
  linear(g_fc1, kHidden, kClasses, m.fc2_w, m.fc2_b, false, g_out);
}

std::uint32_t u32_at(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

int main() {
  using ember::firmware::report;
  // The weights, in write_weights' order.
  const int conv1 = kC1 * 9, conv2 = kC2 * kC1 * 9, fc1 = kHidden * kC2 * 49;
  const int sizes[] = {conv1,   kC1,   kC1, kC1,     kC1,
                       kC1,     conv2, kC2, kC2,     kC2,
                       kC2,     kC2,   fc1, kHidden, kClasses * kHidden,
                       kClasses};
  const float* ptrs[16];
  std::size_t total = 0;
  for (int i = 0; i < 16; ++i) {
    ptrs[i] = reinterpret_cast<const float*>(ember_weights_start) + total;
    total += std::size_t(sizes[i]);
  }
  if (total * 4 != std::size_t(ember_weights_end - ember_weights_start)) {
    report("weights_blob", false, "the weights blob is not the model's size");
    return ember::firmware::summary();
  }
  const Weights m{ptrs[0], ptrs[1], ptrs[2],  ptrs[3],  ptrs[4],  ptrs[5],  ptrs[6],  ptrs[7],
                  ptrs[8], ptrs[9], ptrs[10], ptrs[11], ptrs[12], ptrs[13], ptrs[14], ptrs[15]};
  // The inputs blob (fashion_small.cpp's write_inputs); firmware_model.cpp checks it fully.
  const unsigned char* in = ember_inputs_start;
  const std::uint32_t count = u32_at(in + 4);
  const unsigned char* pixels = in + 20;
  const std::size_t px = std::size_t(count) * kH * kW;
  const unsigned char* pred_at = pixels + ((px + 3) & ~std::size_t{3}) + ((count + 3) & ~3u);
  std::vector<std::int32_t> predicted, host(count);
  std::memcpy(host.data(), pred_at, 4 * count);
  std::vector<float> logits;
  std::vector<double> host_logits;
  for (std::uint32_t i = 0; i < count; ++i) {
    float l[kClasses];
    std::memcpy(l, pred_at + 4 * count + 4 * kClasses * i, sizeof l);
    host_logits.insert(host_logits.end(), l, l + kClasses);
  }
  unsigned long long median_ticks = 0;
  std::vector<unsigned long long> ticks;
  for (std::uint32_t i = 0; i < count; ++i) {
    const unsigned long long t0 = ember::board::ticks();
    classify(m, pixels + std::size_t(i) * kH * kW);
    ticks.push_back(ember::board::ticks() - t0);
    int best = 0;
    for (int k = 1; k < kClasses; ++k) best = g_out[k] > g_out[best] ? k : best;
    predicted.push_back(best);
    logits.insert(logits.end(), g_out, g_out + kClasses);
    std::printf("image %u: predicted %d (host %d), %llu instructions\n", unsigned(i), best,
                int(host[i]), ticks.back());
  }
  std::sort(ticks.begin(), ticks.end());
  median_ticks = ticks[ticks.size() / 2];
  std::printf("# plain loops: instructions per inference (QEMU -icount): median %llu\n",
              median_ticks);
  ember::firmware::check_equal("plain_predictions_equal_host", predicted, host);
  ember::firmware::check_close("plain_logits_close_to_host", logits, host_logits, 1e-3, 1e-3);
  return ember::firmware::summary();
}
