#include "ember/data/transforms.hpp"

#include <algorithm>
#include <cmath>

#include "ember/base/error.hpp"

namespace ember::data {

namespace {
std::string size_string(std::size_t h, std::size_t w) {
  return std::to_string(h) + " x " + std::to_string(w);
}
void check_image(const Image& image, const char* who) {
  EMBER_CHECK(image.pixels.size() == image.channels * image.height * image.width,
              std::string(who) + ": image " + image.shape_string() + " holds " +
                  std::to_string(image.pixels.size()) + " pixels");
}
}  // namespace

Image normalize(Image image, const std::vector<float>& mean, const std::vector<float>& std) {
  check_image(image, "normalize");
  const std::size_t c = image.channels;
  EMBER_CHECK((mean.size() == 1 || mean.size() == c) && (std.size() == 1 || std.size() == c),
              "normalize: " + std::to_string(mean.size()) + " means and " +
                  std::to_string(std.size()) + " deviations for an image " + image.shape_string() +
                  " (expected 1 or " + std::to_string(c) + " each)");
  for (float s : std) {
    EMBER_CHECK(s > 0.0f,
                "normalize: a standard deviation must be positive, got " + std::to_string(s));
  }
  const std::size_t plane = image.height * image.width;
  for (std::size_t k = 0; k < c; ++k) {
    const float m = mean[mean.size() == 1 ? 0 : k], s = std[std.size() == 1 ? 0 : k];
    float* p = image.pixels.data() + k * plane;
    for (std::size_t i = 0; i < plane; ++i) p[i] = (p[i] - m) / s;
  }
  return image;
}

Image pad(Image image, std::size_t padding, float fill) {
  check_image(image, "pad");
  if (padding == 0) return image;
  Image out(image.channels, image.height + 2 * padding, image.width + 2 * padding, fill);
  for (std::size_t c = 0; c < image.channels; ++c) {
    for (std::size_t y = 0; y < image.height; ++y) {
      std::copy_n(&image.pixels[(c * image.height + y) * image.width], image.width,
                  &out.at(c, y + padding, padding));
    }
  }
  return out;
}

Image crop(const Image& image, std::size_t top, std::size_t left, std::size_t h, std::size_t w) {
  check_image(image, "crop");
  EMBER_CHECK(h > 0 && w > 0 && top + h <= image.height && left + w <= image.width,
              "crop: a " + size_string(h, w) + " window at (" + std::to_string(top) + ", " +
                  std::to_string(left) + ") does not lie inside an image " + image.shape_string());
  Image out(image.channels, h, w);
  for (std::size_t c = 0; c < image.channels; ++c) {
    for (std::size_t y = 0; y < h; ++y) {
      std::copy_n(&image.pixels[(c * image.height + top + y) * image.width + left], w,
                  &out.at(c, y, 0));
    }
  }
  return out;
}

Image center_crop(const Image& image, std::size_t h, std::size_t w) {
  EMBER_CHECK(
      h <= image.height && w <= image.width,
      "center_crop: cannot take " + size_string(h, w) + " from an image " + image.shape_string());
  // Python's round (ties to even), as torchvision.
  const auto top = std::size_t(std::nearbyint(double(image.height - h) / 2.0));
  const auto left = std::size_t(std::nearbyint(double(image.width - w) / 2.0));
  return crop(image, top, left, h, w);
}

Image random_crop(Image image, std::size_t h, std::size_t w, std::size_t padding, Rng& rng,
                  float fill) {
  check_image(image, "random_crop");
  const std::size_t ph = image.height + 2 * padding, pw = image.width + 2 * padding;
  EMBER_CHECK(h > 0 && w > 0 && h <= ph && w <= pw,
              "random_crop: cannot take " + size_string(h, w) + " from an image " +
                  image.shape_string() + " padded by " + std::to_string(padding));
  const auto top = std::size_t(rng.below(ph - h + 1));
  const auto left = std::size_t(rng.below(pw - w + 1));
  // crop(pad(image)) without the padded copy: window pixel (y, x) is source pixel
  // (top + y - padding, left + x - padding) where that lies inside, `fill` elsewhere.
  Image out(image.channels, h, w, fill);
  const auto p = std::ptrdiff_t(padding);
  const std::ptrdiff_t y0 = std::max<std::ptrdiff_t>(0, p - std::ptrdiff_t(top));
  const std::ptrdiff_t y1 = std::min<std::ptrdiff_t>(
      std::ptrdiff_t(h), std::ptrdiff_t(image.height) + p - std::ptrdiff_t(top));
  const std::ptrdiff_t x0 = std::max<std::ptrdiff_t>(0, p - std::ptrdiff_t(left));
  const std::ptrdiff_t x1 = std::min<std::ptrdiff_t>(
      std::ptrdiff_t(w), std::ptrdiff_t(image.width) + p - std::ptrdiff_t(left));
  if (y0 >= y1 || x0 >= x1) return out;
  for (std::size_t c = 0; c < image.channels; ++c) {
    for (std::ptrdiff_t y = y0; y < y1; ++y) {
      const auto sy = std::size_t(std::ptrdiff_t(top) + y - p);
      const auto sx = std::size_t(std::ptrdiff_t(left) + x0 - p);
      std::copy_n(&image.pixels[(c * image.height + sy) * image.width + sx], x1 - x0,
                  &out.at(c, std::size_t(y), std::size_t(x0)));
    }
  }
  return out;
}

Image horizontal_flip(Image image) {
  check_image(image, "horizontal_flip");
  for (std::size_t r = 0; r < image.channels * image.height; ++r) {
    auto row = image.pixels.begin() + std::ptrdiff_t(r * image.width);
    std::reverse(row, row + std::ptrdiff_t(image.width));
  }
  return image;
}

Image random_horizontal_flip(Image image, double p, Rng& rng) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0,
              "random_horizontal_flip: probability " + std::to_string(p) + " is not in [0, 1]");
  return rng.bernoulli(p) ? horizontal_flip(std::move(image)) : image;
}

Image resize_bilinear(const Image& image, std::size_t h, std::size_t w) {
  check_image(image, "resize_bilinear");
  EMBER_CHECK(h > 0 && w > 0 && image.height > 0 && image.width > 0,
              "resize_bilinear: cannot resize an image " + image.shape_string() + " to " +
                  size_string(h, w));
  // Source coordinate of a destination pixel centre, clamped at the first pixel (PyTorch's
  // align_corners = false), and the two source pixels with the weight of the second.
  struct Tap {
    std::size_t i0, i1;
    float t;
  };
  auto taps = [](std::size_t in, std::size_t out) {
    std::vector<Tap> v(out);
    const float scale = float(in) / float(out);
    for (std::size_t o = 0; o < out; ++o) {
      const float src = std::max(0.0f, scale * (float(o) + 0.5f) - 0.5f);
      const auto i0 = std::min(std::size_t(src), in - 1);
      v[o] = {i0, std::min(i0 + 1, in - 1), src - float(i0)};
    }
    return v;
  };
  const auto ty = taps(image.height, h), tx = taps(image.width, w);
  Image out(image.channels, h, w);
  for (std::size_t c = 0; c < image.channels; ++c) {
    for (std::size_t y = 0; y < h; ++y) {
      const Tap& a = ty[y];
      for (std::size_t x = 0; x < w; ++x) {
        const Tap& b = tx[x];
        const float top = (1 - b.t) * image.at(c, a.i0, b.i0) + b.t * image.at(c, a.i0, b.i1);
        const float bottom = (1 - b.t) * image.at(c, a.i1, b.i0) + b.t * image.at(c, a.i1, b.i1);
        out.at(c, y, x) = (1 - a.t) * top + a.t * bottom;
      }
    }
  }
  return out;
}

}  // namespace ember::data
