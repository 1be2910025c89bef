// Distribution: how `random` fills a tensor.
#pragma once

namespace ember {

struct Distribution {
  enum class Kind { Default, Uniform, Normal, Bernoulli };
  Kind kind = Kind::Default;
  double a = 0.0, b = 1.0;  // uniform: [a, b); normal: mean a, std b; bernoulli: p = a

  static Distribution default_() { return {}; }  // uniform [0, 1)
  static Distribution uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static Distribution normal(double mean, double std) { return {Kind::Normal, mean, std}; }
  static Distribution bernoulli(double p) { return {Kind::Bernoulli, p, 0.0}; }
};

}  // namespace ember
