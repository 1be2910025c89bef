// The kernels of batch norm (ir::BatchNorm) and its gradient (ir::BatchNormGrad), in two
// launches each (Note [Channel splits]), and of group norm (ir::GroupNorm, ir::GroupNormGrad)
// on the same chunk walk and sums (Note [Group splits]).
#include <string>
#include <tuple>
#include <vector>

#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary

// Note [Channel splits]: x [N, C, *] holds each channel's M = N * L values (L = prod(*)) as
// N runs of L contiguous elements, C * L apart. A channel's M values, in the order
// m = n * L + l, are cut into S chunks of `chunk` values; block (c, s) of the grid (c * S + s,
// walked with a grid stride) owns chunk s of channel c. The first kernel sums its chunk
// into two f64 partials, part[(c * S + s) * 2 + {0, 1}]; the second has every block re-add
// its channel's S partials in one order (so all of a channel's blocks agree bit for bit),
// derive the per-channel coefficients, and write its chunk. S is chosen by the launcher
// (kernels/norm.cpp) so that a few thousand values make a chunk and C * S blocks fill the
// device even for a few channels. A thread walks its chunk's values blockDim apart,
// stepping (n, l) without dividing.
//   sums:   forward, of x - shift and (x - shift)^2 with the shift the channel's first value
//           (as the Cpu: the variance then cancels only as far as the mean is from it);
//           grad, of g and g (x - mean), mean from stats (stats[c / per]: `per` channels
//           share a mean in group norm's gradient, Note [Group splits]; 1 here); or, for
//           RMS norm's rows (Note [Long rows] in kernels/norm.cpp), of x^2 and g w x.
//   apply:  forward, y = (x - mean) scale + shift (scale = weight rstd, shift = bias), the
//           statistics [2, C] (mean, biased variance) by block (c, 0);
//           grad, dx = a g + b (x - mean) + k with a = weight rstd,
//           b = -a rstd^2 sum(g (x - mean)) / M, k = -a sum(g) / M, and [2, C] (dweight =
//           rstd sum(g (x - mean)), dbias = sum(g)) by block (c, 0).
namespace {

// The walk over a block's chunk, `unroll` values a thread at a time: their offsets first,
// then every load (`load(u, off, row)`, value u of the step), then the arithmetic
// (`use(u, off, row)`), so a thread has `unroll` loads in flight; the chunk's tail one value
// at a time. A value m of the chunk's run is (n, l) = (m / L, m % L); `offset` is its
// element's offset in n, l and c (batch norm's (n * NC + c) * L + l), and with `rows` its n
// is kept next to the offset (`row`: group norm's channel within its group). `load` also
// takes the value's m (`idx`: a row's position, Note [Long rows]).
template <class Load, class Use>
std::string chunk_loop(int unroll, const std::string& offset, bool rows, const Load& load,
                       const Use& use) {
  const std::string step =
      "n += dn; l += dl;"
      " if (l >= L) { l -= L; ++n; }";
  std::string s =
      "    const i64 m1 = m0 + chunk < M ? m0 + chunk : M;\n"
      "    i64 m = m0 + threadIdx.x;\n"
      "    i64 n = m / L, l = m - n * L;\n"
      "    const i64 dn = (i64)blockDim.x / L, dl = (i64)blockDim.x - dn * L;\n";
  if (unroll > 1) {
    const std::string u = std::to_string(unroll);
    s += "    for (; m + (i64)(" + u + " - 1) * blockDim.x < m1; m += (i64)" + u +
         " * blockDim.x) {\n"
         "      i64 offs[" +
         u + "];\n";
    if (rows) s += "      i64 rows[" + u + "];\n";
    for (int k = 0; k < unroll; ++k) {
      const std::string ks = std::to_string(k);
      s += "      offs[" + ks + "] = " + offset + "; " +
           (rows ? "rows[" + ks + "] = n; " : std::string()) + step + "\n";
    }
    for (int k = 0; k < unroll; ++k) {
      const std::string ks = std::to_string(k);
      s += load(ks, "offs[" + ks + "]", "rows[" + ks + "]", "(m + (i64)" + ks + " * blockDim.x)");
    }
    for (int k = 0; k < unroll; ++k) {
      const std::string ks = std::to_string(k);
      s += use(ks, "offs[" + ks + "]", "rows[" + ks + "]");
    }
    s += "    }\n";
  }
  s += "    for (; m < m1; m += blockDim.x) {\n"
       "      const i64 off = " +
       offset + ";\n" + load("t", "off", "n", "m") + use("t", "off", "n") + "      " + step +
       "\n    }\n";
  return s;
}
constexpr const char* kChannelOffset = "(n * NC + c) * L + l";

}  // namespace

KernelSource gen_batch_norm_sums(DType dt, NormSums kind, int unroll) {
  KernelSource k;
  const char* names[] = {"sums_", "grad_sums_", "square_sums_"};
  k.name = std::string("em_batch_norm_") + names[static_cast<int>(kind)] + dname(dt) + "_u" +
           std::to_string(unroll);
  const std::string T = storage_type(dt);
  const auto load_v = [&](const std::string& u, const std::string& off, const std::string&,
                          const std::string& idx) {
    std::string s =
        "      const double xv" + u + " = (double)" + load(dt, "x[" + off + "]") + ";\n";
    if (kind == NormSums::kGrad)
      s += "      const double gv" + u + " = (double)" + load(dt, "g[" + off + "]") + ";\n";
    if (kind == NormSums::kSquares)
      s += "      const double gv" + u + " = g ? (double)" + load(dt, "g[" + off + "]") +
           " * (w ? (double)" + load(dt, "w[" + idx + "]") + " : 1.0) : 0.0;\n";
    return s;
  };
  const auto use_v = [&](const std::string& u, const std::string&, const std::string&) {
    switch (kind) {
      case NormSums::kShifted:
        return "      { const double d = xv" + u + " - sh; s0 += d; s1 += d * d; }\n";
      case NormSums::kGrad:
        return "      s0 += gv" + u + "; s1 += gv" + u + " * (xv" + u + " - sh);\n";
      case NormSums::kSquares:
        break;
    }
    return "      s0 += xv" + u + " * xv" + u + "; s1 += gv" + u + " * xv" + u + ";\n";
  };
  const std::string shift = kind == NormSums::kGrad ? "(double)" + load(dt, "stats[c / per]")
                            : kind == NormSums::kShifted
                                ? "M > 0 ? (double)" + load(dt, "x[c * L]") + " : 0.0"
                                : std::string("0.0");
  const std::string body = chunk_loop(unroll, kChannelOffset, false, load_v, use_v);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T + "* __restrict__ x, const " +
           T + "* __restrict__ g, const " + T + "* __restrict__ w, const " + T +
           "* __restrict__ stats, double* __restrict__ part, i64 NC, i64 L, i64 M, i64 S, "
           "i64 chunk, i64 per) {\n" +
           typedefs(dt) +
           "  (void)g; (void)w; (void)stats; (void)per;\n"
           "  __shared__ double sv[2][32];\n"
           "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
           "  const int nwarps = (blockDim.x + 31) >> 5;\n"
           "  for (i64 blk = blockIdx.x; blk < NC * S; blk += gridDim.x) {\n"
           "    const i64 c = blk / S, m0 = (blk - c * S) * chunk;\n"
           "    const double sh = " +
           shift +
           ";\n"
           "    (void)sh;\n"
           "    double s0 = 0, s1 = 0;\n" +
           body +
           "    for (int o = 16; o > 0; o >>= 1) {\n"
           "      s0 += __shfl_down_sync(0xffffffffu, s0, o);\n"
           "      s1 += __shfl_down_sync(0xffffffffu, s1, o);\n"
           "    }\n"
           "    if (lane == 0) { sv[0][warp] = s0; sv[1][warp] = s1; }\n"
           "    __syncthreads();\n"
           "    if (threadIdx.x == 0) {\n"
           "      double t0 = 0, t1 = 0;\n"
           "      for (int v = 0; v < nwarps; ++v) { t0 += sv[0][v]; t1 += sv[1][v]; }\n"
           "      part[blk * 2] = t0;\n"
           "      part[blk * 2 + 1] = t1;\n"
           "    }\n"
           "    __syncthreads();\n"
           "  }\n"
           "}\n";
  return k;
}

KernelSource gen_batch_norm_apply(DType dt, bool grad, int unroll) {
  KernelSource k;
  k.name = std::string("em_batch_norm_") + (grad ? "grad_apply_" : "apply_") + dname(dt) + "_u" +
           std::to_string(unroll);
  const std::string T = storage_type(dt);
  // coef[0] the mean subtracted from x, coef[1..3] the kernel's a, b, k (forward: a unused).
  const std::string coefs =
      grad ? "      const double mean = (double)" + load(dt, "stats[c]") +
                 ";\n"
                 "      const double rstd = 1.0 / sqrt((double)" +
                 load(dt, "stats[NC + c]") +
                 " + eps);\n"
                 "      const double a = (w ? (double)" +
                 load(dt, "w[c]") +
                 " : 1.0) * rstd;\n"
                 "      coef[0] = mean; coef[1] = a; coef[2] = -a * rstd * rstd * t1 / cnt;\n"
                 "      coef[3] = -a * t0 / cnt;\n"
                 "      if (blk - c * S == 0) { out2[c] = " +
                 from_f64(dt, "t1 * rstd") + "; out2[NC + c] = " + from_f64(dt, "t0") + "; }\n"
           : "      const double dm = t0 / cnt;\n"
             "      double var = t1 / cnt - dm * dm;\n"
             "      var = var < 0.0 ? 0.0 : var;  // rounding; NaN stays NaN\n"
             "      const double mean = (M > 0 ? (double)" +
                 load(dt, "x[c * L]") +
                 " : 0.0) + dm;\n"
                 "      coef[0] = mean; coef[1] = 0;\n"
                 "      coef[2] = (w ? (double)" +
                 load(dt, "w[c]") +
                 " : 1.0) / sqrt(var + eps);\n"
                 "      coef[3] = b ? (double)" +
                 load(dt, "b[c]") +
                 " : 0.0;\n"
                 "      if (blk - c * S == 0) { out2[c] = " +
                 from_f64(dt, "mean") + "; out2[NC + c] = " + from_f64(dt, "var") + "; }\n";
  const auto load_v = [&](const std::string& u, const std::string& off, const std::string&,
                          const std::string&) {
    std::string s = "      const C xv" + u + " = " + load(dt, "x[" + off + "]") + ";\n";
    if (grad) s += "      const C gv" + u + " = " + load(dt, "g[" + off + "]") + ";\n";
    return s;
  };
  const auto use_v = [&](const std::string& u, const std::string& off, const std::string&) {
    return "      y[" + off + "] = " +
           store(dt, grad ? "ca * gv" + u + " + cb * (xv" + u + " - cm) + ck"
                          : "cb * (xv" + u + " - cm) + ck") +
           ";\n";
  };
  const std::string body = chunk_loop(unroll, kChannelOffset, false, load_v, use_v);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T + "* __restrict__ x, const " +
           T + "* __restrict__ g, const " + T + "* __restrict__ w, const " + T +
           "* __restrict__ b, const " + T +
           "* __restrict__ stats, const double* __restrict__ part, double eps, " + T +
           "* __restrict__ y, " + T +
           "* __restrict__ out2, i64 NC, i64 L, i64 M, i64 S, i64 chunk) {\n" + typedefs(dt) +
           "  __shared__ double coef[4];\n"
           "  (void)g; (void)b; (void)stats;\n"
           "  const double cnt = (double)M;\n"
           "  for (i64 blk = blockIdx.x; blk < NC * S; blk += gridDim.x) {\n"
           "    const i64 c = blk / S, m0 = (blk - c * S) * chunk;\n"
           "    if (threadIdx.x == 0) {\n"
           "      double t0 = 0, t1 = 0;\n"
           "      for (i64 s = 0; s < S; ++s) { t0 += part[(c * S + s) * 2];"
           " t1 += part[(c * S + s) * 2 + 1]; }\n" +
           coefs +
           "    }\n"
           "    __syncthreads();\n"
           "    const C cm = (C)coef[0], ca = (C)coef[1], cb = (C)coef[2], ck = (C)coef[3];\n"
           "    (void)ca;\n" +
           body +
           "    __syncthreads();\n"
           "  }\n"
           "}\n";
  return k;
}

// Note [Group splits]: group norm's statistics are per unit u = (sample, group), whose
// M = K L values (K = C / G channels of L = prod(*) elements) are one contiguous run of x
// [N, C, *], at u M. So x is batch norm's [1, N G, M] (Note [Channel splits]): the forward
// sums are gen_batch_norm_sums' over that view, S chunks a unit, each block re-adding its
// unit's partials in one order. The affine is per channel, (u % G) K + n for the value
// (n, l) of unit u's run, so gen_group_norm_apply walks the chunk keeping n with each offset
// and reads weight[c] and bias[c] per value (a few cached loads: the pass is bound by x).
// The gradient needs two sums per unit, S1 = sum(w g) and S2 = sum(w g (x - mean)), and two
// per channel over the samples, sum(g) and sum(g xhat); both come from the sums of g and
// g (x - mean) over each (sample, channel) run of L values, which gen_batch_norm_sums makes
// over x as [1, N C, L] (SR chunks a run, the mean stats[r / K] of run r's unit). Then:
//   apply:  every block of unit u adds its K runs' partials, w-weighted, a run a thread and
//           the threads' sums in a fixed tree (so the unit's blocks agree bit for bit), and
//           writes dx = a g + b (x - mean) + k with a = w[c] rstd, b = -rstd^3 S2 / M,
//           k = -rstd S1 / M (the Cpu kernel's coefficients);
//   affine: a thread per channel adds the partials of its N runs in sample order, dbias =
//           sum(g) and dweight = sum over samples of rstd(u) sum(g (x - mean)).
KernelSource gen_group_norm_apply(DType dt, bool grad, bool rms, int unroll) {
  KernelSource k;
  k.name = std::string(rms ? "em_rms_norm_rows_" : "em_group_norm_") +
           (grad ? "grad_apply_" : "apply_") + dname(dt) + "_u" + std::to_string(unroll);
  const std::string T = storage_type(dt);
  const std::string weight = "(w ? " + load(dt, "w[c0 + ROW]") + " : (C)1)";
  const auto load_v = [&](const std::string& u, const std::string& off, const std::string& row,
                          const std::string&) {
    std::string s = "      const C xv" + u + " = " + load(dt, "x[" + off + "]") + ";\n";
    if (grad) s += "      const C gv" + u + " = " + load(dt, "g[" + off + "]") + ";\n";
    s += "      const C wv" + u + " = " + subst(weight, "ROW", row) + ";\n";
    if (!grad)
      s += "      const C bv" + u + " = b ? " + load(dt, "b[c0 + " + row + "]") + " : (C)0;\n";
    return s;
  };
  const auto use_v = [&](const std::string& u, const std::string& off, const std::string&) {
    return "      y[" + off + "] = " +
           store(dt, grad ? "(wv" + u + " * cr) * gv" + u + " + cb * (xv" + u + " - cm) + ck"
                          : "(wv" + u + " * cr) * (xv" + u + " - cm) + bv" + u) +
           ";\n";
  };
  // coef[0] the mean, coef[1] rstd, coef[2..3] the gradient's b and k.
  // RMS norm's rows (Note [Long rows]): no mean, rstd from the unit's sum of squares t0 and,
  // for dx = rstd w g - x rstd^3 sum(g w x) / M, b from its sum t1 of g w x.
  const std::string rms_coefs =
      "    if (threadIdx.x == 0) {\n"
      "      double t0 = 0, t1 = 0;\n"
      "      for (i64 s = 0; s < S; ++s) { t0 += part[(c * S + s) * 2];"
      " t1 += part[(c * S + s) * 2 + 1]; }\n"
      "      const double rstd = 1.0 / sqrt(t0 / cnt + eps);\n"
      "      coef[0] = 0; coef[1] = rstd; coef[2] = -rstd * rstd * rstd * t1 / cnt; coef[3] = 0;\n"
      "      if (rs && blk - c * S == 0) rs[c] = rstd;\n"
      "    }\n";
  const std::string coefs =
      rms ? rms_coefs
      : grad
          ? "    double s1 = 0, s2 = 0;\n"
            "    for (i64 j = threadIdx.x; j < K; j += blockDim.x) {\n"
            "      const i64 r = c * K + j;\n"
            "      double t0 = 0, t1 = 0;\n"
            "      for (i64 s = 0; s < SR; ++s) { t0 += part[(r * SR + s) * 2];"
            " t1 += part[(r * SR + s) * 2 + 1]; }\n"
            "      const double wc = w ? (double)" +
                load(dt, "w[c0 + j]") +
                " : 1.0;\n"
                "      s1 += wc * t0; s2 += wc * t1;\n"
                "    }\n"
                "    for (int o = 16; o > 0; o >>= 1) {\n"
                "      s1 += __shfl_down_sync(0xffffffffu, s1, o);\n"
                "      s2 += __shfl_down_sync(0xffffffffu, s2, o);\n"
                "    }\n"
                "    if (lane == 0) { sv[0][warp] = s1; sv[1][warp] = s2; }\n"
                "    __syncthreads();\n"
                "    if (threadIdx.x == 0) {\n"
                "      double t1 = 0, t2 = 0;\n"
                "      for (int v = 0; v < nwarps; ++v) { t1 += sv[0][v]; t2 += sv[1][v]; }\n"
                "      const double mean = (double)" +
                load(dt, "stats[c]") +
                ";\n"
                "      const double rstd = 1.0 / sqrt((double)" +
                load(dt, "stats[NG + c]") +
                " + eps);\n"
                "      coef[0] = mean; coef[1] = rstd;\n"
                "      coef[2] = -rstd * rstd * rstd * t2 / cnt; coef[3] = -rstd * t1 / cnt;\n"
                "    }\n"
          : "    if (threadIdx.x == 0) {\n"
            "      double t0 = 0, t1 = 0;\n"
            "      for (i64 s = 0; s < S; ++s) { t0 += part[(c * S + s) * 2];"
            " t1 += part[(c * S + s) * 2 + 1]; }\n"
            "      const double dm = t0 / cnt;\n"
            "      double var = t1 / cnt - dm * dm;\n"
            "      var = var < 0.0 ? 0.0 : var;  // rounding; NaN stays NaN\n"
            "      const double mean = (M > 0 ? (double)" +
                load(dt, "x[c * M]") +
                " : 0.0) + dm;\n"
                "      coef[0] = mean; coef[1] = 1.0 / sqrt(var + eps); coef[2] = 0; coef[3] = 0;\n"
                "      if (out2 && blk - c * S == 0) { out2[c] = " +
                from_f64(dt, "mean") + "; out2[NG + c] = " + from_f64(dt, "var") +
                "; }\n"
                "    }\n";
  const std::string body = chunk_loop(unroll, "(c * K + n) * L + l", true, load_v, use_v);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T + "* __restrict__ x, const " +
           T + "* __restrict__ g, const " + T + "* __restrict__ w, const " + T +
           "* __restrict__ b, const " + T +
           "* __restrict__ stats, const double* __restrict__ part, double eps, " + T +
           "* __restrict__ y, " + T +
           "* __restrict__ out2, double* __restrict__ rs, i64 NG, i64 G, i64 K, i64 L, i64 M, "
           "i64 S, i64 chunk, i64 SR) {\n" +
           typedefs(dt) + "  __shared__ double coef[4];\n" +
           (grad && !rms ? "  __shared__ double sv[2][32];\n" : "") +
           "  (void)g; (void)b; (void)stats; (void)out2; (void)rs; (void)SR;\n"
           "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
           "  const int nwarps = (blockDim.x + 31) >> 5;\n"
           "  (void)lane; (void)warp; (void)nwarps;\n"
           "  const double cnt = (double)M;\n"
           "  for (i64 blk = blockIdx.x; blk < NG * S; blk += gridDim.x) {\n"
           "    const i64 c = blk / S, m0 = (blk - c * S) * chunk;\n"
           "    const i64 c0 = (c % G) * K;  // the unit's first channel\n" +
           coefs +
           "    __syncthreads();\n"
           "    const C cm = (C)coef[0], cr = (C)coef[1], cb = (C)coef[2], ck = (C)coef[3];\n"
           "    (void)cb; (void)ck;\n" +
           body +
           "    __syncthreads();\n"
           "  }\n"
           "}\n";
  return k;
}

KernelSource gen_group_norm_affine_grad(DType dt) {
  KernelSource k;
  k.name = "em_group_norm_affine_grad_" + dname(dt);
  const std::string T = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T +
           "* __restrict__ stats, const double* __restrict__ part, double eps, " + T +
           "* __restrict__ dwb, i64 N, i64 NCh, i64 G, i64 SR) {\n" + typedefs(dt) +
           "  const i64 K = NCh / G;\n"
           "  for (i64 ch = (i64)blockIdx.x * blockDim.x + threadIdx.x; ch < NCh;"
           " ch += (i64)gridDim.x * blockDim.x) {\n"
           "    double sg = 0, sgx = 0;\n"
           "    for (i64 i = 0; i < N; ++i) {\n"
           "      const i64 r = i * NCh + ch;\n"
           "      const double rstd = 1.0 / sqrt((double)" +
           load(dt, "stats[N * G + i * G + ch / K]") +
           " + eps);\n"
           "      double t0 = 0, t1 = 0;\n"
           "      for (i64 s = 0; s < SR; ++s) { t0 += part[(r * SR + s) * 2];"
           " t1 += part[(r * SR + s) * 2 + 1]; }\n"
           "      sg += t0; sgx += t1 * rstd;\n"
           "    }\n"
           "    dwb[ch] = " +
           from_f64(dt, "sgx") + ";\n    dwb[NCh + ch] = " + from_f64(dt, "sg") +
           ";\n"
           "  }\n"
           "}\n";
  return k;
}

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

// The kernels come in every float dtype and one or four values a thread (`unroll`), with
// each value of their other flags: sums, each kind; batch norm's apply, forward and
// gradient; group norm's apply, forward and gradient, of group norm and of RMS norm's rows.
template <class Spec, class... Flags>
std::vector<Spec> norm_variants(const std::vector<std::tuple<Flags...>>& flags) {
  std::vector<Spec> out;
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    for (int unroll : {1, 4})
      for (const auto& f : flags)
        std::apply([&](auto... a) { out.emplace_back(dt, a..., unroll); }, f);
  }
  return out;
}

template <>
std::vector<BatchNormSumsKernel> BatchNormSumsKernel::variants() {
  return norm_variants<BatchNormSumsKernel>(std::vector<std::tuple<NormSums>>{
      {NormSums::kShifted}, {NormSums::kGrad}, {NormSums::kSquares}});
}

template <>
std::vector<BatchNormApplyKernel> BatchNormApplyKernel::variants() {
  return norm_variants<BatchNormApplyKernel>(std::vector<std::tuple<bool>>{{false}, {true}});
}

template <>
std::vector<GroupNormApplyKernel> GroupNormApplyKernel::variants() {
  return norm_variants<GroupNormApplyKernel>(std::vector<std::tuple<bool, bool>>{
      {false, false}, {true, false}, {false, true}, {true, true}});
}

template <>
std::vector<GroupNormAffineGradKernel> GroupNormAffineGradKernel::variants() {
  std::vector<GroupNormAffineGradKernel> out;
  for (DType dt : kAllDTypes)
    if (is_float(dt)) out.emplace_back(dt);
  return out;
}

}  // namespace ember::cuda
