// The conformance harness: every user-level function of ember/tensor/ops.hpp as a small
// case struct, run on every device in Device::available() and checked against an
// independent f64 reference written here with plain loops (never with ember's own ops).
//
// A case names its function, the dtypes it runs in, its trials (host inputs plus how each
// input is laid out on the device: contiguous, or a permuted / sliced / flipped / expanded
// view), the call under test and the reference. The runner (harness.cpp) materialises
// each trial on a device, runs the function twice — once on inputs the harness keeps
// referencing, once on inputs moved in — and checks the outputs against the reference, the
// kept inputs against their snapshot (clone invariance) and the sentinel-padded parents
// of sliced inputs against theirs (guard bytes: nothing writes outside a view).
//
// A case runs on the device's backend behind a probe that asks Backend::supports before
// every op: an op that neither the backend nor a registered fallback supports makes the
// case Unsupported (`n/s` in docs/ops.md); any other error is a failure.
//
// The same cases drive the gtest suite, `--mode support` (docs/ops.md) and `--mode perf`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <ember/ember.hpp>

#include "conformance/embedded_sample.hpp"

namespace conformance {

using ember::Device;
using ember::DType;
using ember::DynTensor;
using ember::Shape;

// A tensor on the host as the reference sees it: logical (row-major) values in f64.
struct HostTensor {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<double> v;

  HostTensor() = default;
  HostTensor(Shape s, DType t) : shape(std::move(s)), dtype(t), v(shape.num_elements(), 0.0) {}
  HostTensor(Shape s, DType t, std::vector<double> vals)
      : shape(std::move(s)), dtype(t), v(std::move(vals)) {}
  std::size_t numel() const { return v.size(); }
  std::size_t rank() const { return shape.rank(); }
};

// How an input reaches the function under test. All but Contiguous are views over a
// buffer laid out differently, so kernels meet strides, offsets and zero strides.
enum class Layout : std::uint8_t { Contiguous, Permuted, Sliced, Flipped, Expanded };
const char* name(Layout l);

enum class Scale : std::uint8_t { Test, Perf };

using Params = std::vector<double>;  // a trial's scalar arguments (dims, k, ...)

struct Trial {
  std::string label;
  std::vector<HostTensor> inputs;
  std::vector<Layout> layouts;  // per input; missing entries are Contiguous
  Params params = {};
};

struct Tolerance {
  double rtol = 0, atol = 0;
};

using Tensors = std::vector<DynTensor>;
using RunFn = std::function<Tensors(Tensors&&, const Params&)>;
using RefFn = std::function<std::vector<HostTensor>(const std::vector<HostTensor>&, const Params&)>;
// Checks outputs without an exact reference (random draws): returns "" when they pass.
using VerifyFn = std::function<std::string(const std::vector<HostTensor>& in,
                                           const std::vector<HostTensor>& out, const Params& p)>;

// The one IR-level call a case's run makes, when it is exactly that: ops::unary(fn, x, p0,
// p1), ops::binary(fn, a, b), ops::reduce(fn, x, params[0]) or ops::reduce_all(fn, x). The
// firmware tests replay such cases from exported trials (--mode embedded,
// conformance/embedded_sample.hpp).
struct IrCall {
  using Kind = sample::CallKind;
  Kind kind;
  std::uint8_t fn;  // the UnaryFn, BinaryFn or ReduceFn
  double p0 = 0, p1 = 0;
};

struct Case {
  std::string fn;  // the user-level function, as named in ops.hpp / tensor.hpp
  // Other public functions the run calls: the ops:: function behind a Tensor method of
  // another name, or the function that variant cases (grid_sample_<mode>_...) share.
  // ConformanceCoverage.EveryPublicFunctionHasACase reads fn and these.
  std::vector<std::string> also;
  std::string family;  // for grouping in docs/ops.md
  std::vector<DType> dtypes;
  std::function<std::vector<Trial>(DType, Scale)> trials;
  RunFn run;
  RefFn ref;
  VerifyFn verify;                          // used instead of ref when set
  double tol_scale = 1.0;                   // multiplies the dtype's default tolerance
  double atol_extra = 0.0;                  // added absolute tolerance (large reductions)
  std::function<Tolerance(DType)> tol;      // replaces the default tolerance when set
  std::string known_failure;                // non-empty: the case is skipped with this reason
  std::vector<DType> known_failure_dtypes;  // limits known_failure to these dtypes
  std::string no_grad;  // non-empty: grad mode does not differentiate the case, for this reason
  std::optional<IrCall> ir_call;  // set where run is exactly that call
};

// ---- the case tables (one function per family file, called explicitly: no static init) ----
void add_elementwise_cases(std::vector<Case>& cases);
void add_reduce_cases(std::vector<Case>& cases);
void add_layout_cases(std::vector<Case>& cases);
void add_compute_cases(std::vector<Case>& cases);
void add_conv_cases(std::vector<Case>& cases);
void add_composite_cases(std::vector<Case>& cases);
void add_attention_cases(std::vector<Case>& cases);
const std::vector<Case>& all_cases();

// ---- devices ----
// Every device this build can run, from Device::available() ("cpu", "cuda:0", ...).
std::vector<Device> conformance_devices();

// ---- running ----
enum class Outcome : std::uint8_t { Pass, Fail, Unsupported, KnownFailure };
struct Result {
  Outcome outcome = Outcome::Pass;
  std::string message;  // first failure, or the reason for Unsupported / KnownFailure
  std::size_t trials = 0;
  std::uint64_t op_kinds = 0;  // bit k: the case ran an IR op of ir::OpKind k
};
Result run_case(const Case& c, const Device& dev, DType dt, Scale scale = Scale::Test);
// --mode embedded: the f32 trials (inputs of at most max_elements each, at most
// trials_per_case of each case) of every case with an ir_call, with their references and
// tolerances, written to path in the format of conformance/embedded_sample.hpp. Returns
// the number of trials written.
std::size_t export_embedded_sample(const std::string& path, std::size_t max_elements,
                                   std::size_t trials_per_case);

// ---- grad mode (harness.cpp): autodiff on a stack against finite differences ----
// The autodiff stacks of every available device, by device: d.autodiff(),
// d.fusion().autodiff() for the Cpu and Cuda, and the Cpu's d.autodiff(Balanced).
struct GradStacks {
  std::string device;  // as Device::available() names it
  std::vector<Device> stacks;
};
std::vector<GradStacks> grad_stacks();
struct GradResult {
  Outcome outcome = Outcome::Pass;
  std::string message;
  std::size_t trials = 0, checked = 0, kinks = 0;  // differences compared, and skipped on kinks
  std::size_t directions = 0;  // trials checked along a random direction (larger inputs)
};
// Elements of an f64 input above which a trial is not differentiated (the cost bound), and
// the coordinates sampled from an input of more than max_elements.
inline constexpr std::size_t kMaxGradInput = 1 << 14;
inline constexpr std::size_t kSampledCoordinates = 3;
// Runs the case's f64 trials (up to max_trials, finite values, at most kMaxGradInput
// elements per f64 input) on each of `stacks` with every f64 input tracked, differentiates
// sum(out * w) over the f64 outputs and compares each input's gradient with central finite
// differences of the same function on the plain Cpu (computed once for every stack): every
// element of an input of at most max_elements; of a larger one kSampledCoordinates random
// elements, and the trial's directional derivative along a random direction through every
// input (<grad, v> against one central difference). Differences where the one-sided ones
// disagree (ties, bounds, rounding steps) are skipped. Cases without f64 or with verify are
// skipped. One result per stack.
std::vector<GradResult> run_grad_case(const Case& c, const std::vector<Device>& stacks,
                                      std::size_t max_elements = 24, std::size_t max_trials = 3);
// perf mode: the median of 5 timed runs of the function alone (inputs on the device,
// warmed up, the device synced), averaged over the trials; -1 when it fails.
double time_case(const Case& c, const Device& dev, DType dt, Scale scale, std::size_t& trials);

// ---- fusion mode (fusion_mode.cpp): random programs, fused vs plain, bit for bit ----
struct DifferentialResult {
  std::size_t programs = 0, failures = 0;
  std::vector<std::string> reproducers;  // shrunk failing programs, with their seeds
};
// `programs` programs on plain and on fused (its fusion stack): seeds seed, seed + 1, ...,
// each at two size sets; a fifth of them on two threads unless `threads` is false.
DifferentialResult run_fusion_differential(std::uint64_t seed, std::size_t programs,
                                           const Device& plain, const Device& fused,
                                           bool threads = true);
int cli_main(int argc, char** argv);

// ---- input generation ----
using Rng = std::mt19937_64;
enum class Domain : std::uint8_t {
  Any,       // about [-4, 4]
  Positive,  // about [0.1, 4]
  Unit,      // (-1, 1) open
  Small,     // about [-2, 2]
  NonZero,   // Any without zero (divisors)
};
HostTensor random_host(const Shape& s, DType dt, Rng& rng, Domain d = Domain::Any);
// Puts NaN, +Inf and -Inf at a few positions of a float tensor (no-op otherwise).
void add_specials(HostTensor& t, Rng& rng);
// Shapes for element-wise style cases: empty, size-1, odd, thread-crossing sizes.
std::vector<Shape> standard_shapes(Scale scale);
// The standard trials for functions of one tensor: each shape contiguous and as a view.
std::vector<Trial> unary_trials(DType dt, Scale scale, Domain d, bool specials, std::uint64_t seed);

// ---- reference helpers (plain loops over row-major f64 data) ----
std::vector<std::size_t> strides_of(const Shape& s);
// Multi-index of flat position p.
std::vector<std::size_t> unravel(std::size_t p, const Shape& s);
std::size_t ravel(const std::vector<std::size_t>& idx, const Shape& s);
Shape broadcast(const Shape& a, const Shape& b);
// Flat position in `from` (right-aligned, size-1 dims broadcast) of idx in a larger shape.
std::size_t broadcast_index(const std::vector<std::size_t>& idx, const Shape& from);
// Rounds v to the values dtype can hold (the storage rounding of ember's element types).
double quantize(DType dt, double v);
bool is_float_dtype(DType dt);
std::size_t normalize(std::int64_t dim, std::size_t rank);

// Dtype lists.
extern const std::vector<DType> kFloats;      // f32 f64
extern const std::vector<DType> kAllFloats;   // f32 f64 f16 bf16
extern const std::vector<DType> kInts;        // i64 i32 i16 i8 u8
extern const std::vector<DType> kSignedInts;  // i64 i32 i16 i8
extern const std::vector<DType> kAllDtypes;
std::vector<DType> concat(std::vector<DType> a, const std::vector<DType>& b);

// Runs f on x wrapped in the typed facade Tensor<D> for its rank (1..4), so that cases
// reach the functions that exist only there (activation::hard_sigmoid, ...).
template <class F>
DynTensor with_typed(DynTensor x, F&& f) {
  switch (x.rank()) {
    case 1:
      return f(ember::Tensor<1>(std::move(x))).dyn();
    case 2:
      return f(ember::Tensor<2>(std::move(x))).dyn();
    case 3:
      return f(ember::Tensor<3>(std::move(x))).dyn();
    case 4:
      return f(ember::Tensor<4>(std::move(x))).dyn();
    default:
      ember::fail("with_typed: rank " + std::to_string(x.rank()) + " not covered");
  }
}

}  // namespace conformance
