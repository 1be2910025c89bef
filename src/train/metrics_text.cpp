// Language metrics: perplexity, the character and word error rates, and BLEU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <ember/base/error.hpp>
#include <ember/train/metrics.hpp>

#include "train/metric_inputs.hpp"

namespace ember::train {

// ---- Perplexity ----

void Perplexity::update(const MetricInput& in) {
  const double loss = detail::read_loss(in, name());
  const double w = in.items == 0 ? 1.0 : static_cast<double>(in.items);
  sum_ += loss * w;
  weight_ += w;
  last_ = std::exp(loss);
}

double Perplexity::value() const { return weight_ == 0 ? kNoValue : std::exp(sum_ / weight_); }
void Perplexity::reset() {
  sum_ = weight_ = 0;
  last_ = kNoValue;
}
std::unique_ptr<Metric> Perplexity::clone_empty() const { return std::make_unique<Perplexity>(); }

// ---- edit distance, CER, WER ----

std::size_t edit_distance(const std::vector<std::u32string>& a,
                          const std::vector<std::u32string>& b) {
  // One row of the dynamic programme: row[j] is the distance of a[0, i) to b[0, j).
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];  // distance of a[0, i-1) to b[0, j-1)
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({up + 1, row[j - 1] + 1, substitution});
      diagonal = up;
    }
  }
  return row[b.size()];
}

namespace {

double error_rate(std::size_t errors, std::size_t length, bool any) {
  if (!any) return kNoValue;
  if (length == 0) return errors == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(errors) / static_cast<double>(length);
}

// The code points of UTF-8 text; a byte that does not start a valid sequence is one unit.
std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    bool valid = len > 0 && i + len <= s.size();
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      valid = (d >> 6) == 0x2;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (!valid) {
      out.push_back(char32_t{0x110000} + c);  // a lone byte: beyond every code point
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::size_t i = 0;
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (i < s.size()) {
    while (i < s.size() && space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !space(s[i])) ++i;
    if (i > start) words.push_back(s.substr(start, i - start));
  }
  return words;
}

}  // namespace

void ErrorRateMetric::update(const MetricInput& in) {
  const detail::TextBatch t = detail::read_texts(in, name());
  std::size_t errors = 0, length = 0;
  for (std::size_t i = 0; i < t.hypotheses.size(); ++i) {
    const std::vector<std::u32string> ref = units(t.references[i]);
    errors += edit_distance(units(t.hypotheses[i]), ref);
    length += ref.size();
  }
  last_errors_ = errors;
  last_length_ = length;
  errors_ += errors;
  length_ += length;
  updated_ = true;
}

double ErrorRateMetric::value() const { return error_rate(errors_, length_, updated_); }
double ErrorRateMetric::last() const { return error_rate(last_errors_, last_length_, updated_); }
void ErrorRateMetric::reset() {
  errors_ = length_ = last_errors_ = last_length_ = 0;
  updated_ = false;
}

std::vector<std::u32string> CharErrorRate::units(const std::string& text) const {
  std::vector<std::u32string> out;
  for (char32_t c : decode_utf8(text)) out.emplace_back(1, c);
  return out;
}
std::unique_ptr<Metric> CharErrorRate::clone_empty() const {
  return std::make_unique<CharErrorRate>();
}

std::vector<std::u32string> WordErrorRate::units(const std::string& text) const {
  std::vector<std::u32string> out;
  for (const std::string& w : split_words(text)) out.push_back(decode_utf8(w));
  return out;
}
std::unique_ptr<Metric> WordErrorRate::clone_empty() const {
  return std::make_unique<WordErrorRate>();
}

// ---- Bleu ----

Bleu::Bleu(BleuConfig config) : config_(config) {
  EMBER_CHECK(config_.max_n >= 1, "Bleu: max_n is 0; expected an n-gram order >= 1");
  reset();
}

namespace {

// Every n-gram of the words with its count.
std::map<std::vector<std::string>, std::size_t> ngrams(const std::vector<std::string>& words,
                                                       std::size_t n) {
  std::map<std::vector<std::string>, std::size_t> out;
  for (std::size_t i = 0; i + n <= words.size(); ++i) {
    ++out[std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(i),
                                   words.begin() + static_cast<std::ptrdiff_t>(i + n))];
  }
  return out;
}

}  // namespace

void Bleu::update(const MetricInput& in) {
  const detail::TextBatch t = detail::read_texts(in, name());
  Counts c;
  c.matches.assign(config_.max_n, 0);
  c.candidates.assign(config_.max_n, 0);
  for (std::size_t i = 0; i < t.hypotheses.size(); ++i) {
    const std::vector<std::string> hyp = split_words(t.hypotheses[i]);
    const std::vector<std::string> ref = split_words(t.references[i]);
    c.hypothesis_length += hyp.size();
    c.reference_length += ref.size();
    for (std::size_t n = 1; n <= config_.max_n; ++n) {
      const auto h = ngrams(hyp, n);
      const auto r = ngrams(ref, n);
      for (const auto& [gram, count] : h) {
        const auto it = r.find(gram);
        c.matches[n - 1] += it == r.end() ? 0 : std::min(count, it->second);
        c.candidates[n - 1] += count;
      }
    }
  }
  for (std::size_t n = 0; n < config_.max_n; ++n) {
    counts_.matches[n] += c.matches[n];
    counts_.candidates[n] += c.candidates[n];
  }
  counts_.hypothesis_length += c.hypothesis_length;
  counts_.reference_length += c.reference_length;
  last_ = std::move(c);
  updated_ = true;
}

double Bleu::score(const Counts& c) const {
  if (!updated_) return kNoValue;
  if (c.hypothesis_length == 0) return 0.0;
  double log_sum = 0;
  for (std::size_t n = 0; n < config_.max_n; ++n) {
    double m = static_cast<double>(c.matches[n]);
    double d = static_cast<double>(c.candidates[n]);
    if (config_.smooth && n > 0) {
      m += 1;
      d += 1;
    }
    if (m == 0 || d == 0) return 0.0;
    log_sum += std::log(m / d);
  }
  const double h = static_cast<double>(c.hypothesis_length);
  const double r = static_cast<double>(c.reference_length);
  const double brevity = h >= r ? 1.0 : std::exp(1.0 - r / h);
  return brevity * std::exp(log_sum / static_cast<double>(config_.max_n));
}

double Bleu::value() const { return score(counts_); }
double Bleu::last() const { return score(last_); }

void Bleu::reset() {
  counts_ = {};
  counts_.matches.assign(config_.max_n, 0);
  counts_.candidates.assign(config_.max_n, 0);
  last_ = counts_;
  updated_ = false;
}

std::unique_ptr<Metric> Bleu::clone_empty() const { return std::make_unique<Bleu>(config_); }

}  // namespace ember::train
