// Fused element-wise groups (backend/fused_group.hpp) as tile programs: the group's
// iteration space is walked row by row (StridedSpace over every input and the outputs),
// each row in tiles of tile_elements() elements (Note [Tile size]); per tile every
// instruction is one call of the same row kernel the op would use unfused
// (elementwise_table), on tile-sized scratch slots that stay in L1, and only the group's
// outputs are written to memory. No code is generated, so this works in every build of the
// Cpu.
//
// Bit for bit (Note [Fused numerics]): each instruction calls the row kernel its IR op
// calls, with the op's parameters; 16-bit floats are widened to f32 for arithmetic and
// narrowed after every instruction, as CpuBackend::execute_widened does; casts convert as
// cast() does; a broadcast (stride-0) operand stays one element, and an instruction of
// one-element operands computes one element, which has the value every element of the
// row would have; a Fill is such an element, its bits read from the instruction (a
// parameter: the program, cached by key, serves every value). Integer division checks its divisor
// tile by tile and raises the unfused op's error.
//
// Note [Random instructions]: a Random instruction (Note [Reserved draws] in
// backend/fused_group.hpp) draws its tile in scratch: element i of the iteration space is
// the draw's element i, at counter draw.first + i, and the generator hashes each counter
// alone, so a tile computes exactly the values the Random kernel would have stored there,
// with the same function (draw_values). The draw is never written unless it is an output.
// A tile's first element is its index in the row-major iteration space: the output's offset
// (outputs are contiguous), or r * n + b in a group along rows.
//
// Note [Tile prefetch]: a tile's instructions run on L1 scratch once its inputs are in, so
// without help a thread alternates between waiting for memory (the first instructions,
// which read the inputs) and computing (the rest, among them Adam's divisions and square
// root), and the two never overlap. Before a tile runs, the next tile of every contiguous
// input is prefetched, so that its lines arrive while this tile computes. Only what is in
// cache changes, never what is computed.
//
// Note [Fused in-place]: an output may take the buffer of an input the group owns alone
// (Note [In-place reuse]): the input has the group's shape and is contiguous, so tile t
// of the output covers exactly tile t of the input. Every instruction of a tile reads its
// operands before the tile's outputs are copied out, so the overwrite never reaches an
// element that is still to be read.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>  // std::lock_guard
#include <optional>
#include <string>
#include <unordered_map>

#include "cpu/gemm/gemm_bf16.hpp"
#include "cpu/isa.hpp"
#include "cpu/kernels/conv.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/matmul.hpp"
#include "cpu/kernels/random.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

#if EMBER_HAS_X86_KERNELS && defined(__SSE2__)
#define EMBER_FUSED_STREAMS 1
#include <emmintrin.h>
#else
#define EMBER_FUSED_STREAMS 0
#endif

namespace ember::cpu {

namespace {

using backend::FusedGroup;
using backend::FusedInstr;

// Note [Tile size]: a tile's values live in L1 while its instructions pass over them, so the
// tile is sized from the core's L1 data cache (cpu::cache_sizes, read once): 1024 elements
// where it holds 48 KiB or more, else 512. An Adam step keeps about ten values of a tile; at
// 1024 elements (40 KiB of f32) on an AMD EPYC of 48 KiB (Zen 5, one thread, alternated runs)
// the step took 7.6-8.2 ms against 9.3-10.1 at 512, `cheap_chain` on cpu+fusion 4.2-4.5
// against 5.0-5.7 and `exp_sum_dim` 8.7-9.0 against 9.8-9.9; 2048 was no better (8.1, 4.0,
// 9.0-9.1). The tile only cuts the iteration space into pieces: no value depends on it.
// EMBER_CPU_FUSED_TILE=n (a multiple of 64, 64 to 16384) sets it, so the tests run both
// sizes on any machine.
std::size_t choose_tile() {
  if (const char* env = std::getenv("EMBER_CPU_FUSED_TILE"); env && *env) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    EMBER_CHECK(*end == '\0' && n >= 64 && n <= 16384 && n % 64 == 0,
                std::string("EMBER_CPU_FUSED_TILE=") + env +
                    ": expected a multiple of 64 from 64 to 16384 (elements of a fused tile)");
    return static_cast<std::size_t>(n);
  }
  return cache_sizes().l1d >= (std::size_t{48} << 10) ? 1024 : 512;
}
std::size_t tile_elements() {
  static const std::size_t n = choose_tile();
  return n;
}
constexpr std::size_t kMaxInputs = 16;
std::size_t slot_bytes() { return tile_elements() * 8; }  // bytes of one value's tile
// Note [Prefetch for large inputs]'s size: twice the core's L2 or an eighth of the L3, the
// larger (4 MiB where CPUID says neither).
std::size_t prefetch_min_bytes() {
  static const std::size_t n = [] {
    const CacheSizes& c = cache_sizes();
    const std::size_t m = std::max(2 * c.l2, c.l3 / 8);
    return m ? m : std::size_t{4} << 20;
  }();
  return n;
}

std::size_t di(DType t) { return static_cast<std::size_t>(t); }

struct Step {
  FusedInstr::Kind kind;
  UnaryRow un = nullptr;
  BinaryRow bin = nullptr;
  SoftmaxRows softmax = nullptr;       // Kind::Softmax, of the compute type
  LayerNormRows layer_norm = nullptr;  // Kind::LayerNorm, of the compute type
  DType in = DType::F32;               // the operands' dtype (a and b of Where)
  DType out = DType::F32;              // the result's dtype
  bool widen = false;                  // 16-bit operands computed in f32
  bool int_div = false;                // integer div / rem: check the divisor
  const char* fn = "";
  std::array<std::int32_t, 3> args{};
};

// Note [Tile registers]: the tile of an instruction's result lives in a scratch region that
// is reused once every reader of the value has run (a linear scan over the program; a
// group output holds its region to the end, when it is copied out), and regions are
// tile_elements() elements of the program's widest dtype, back to back. A program of 15
// values then keeps about five tiles in L1 instead of one 4 KiB region per value, which
// spread over half the cache's sets and missed to L2. Only where results are stored changes, never
// what is computed. A result never shares its operands' region (a Cast to a wider dtype
// read in place would overwrite elements still to be read).
struct Program {
  std::string signature;
  std::vector<Step> steps;
  std::vector<std::uint32_t> region;  // per instruction: its result's scratch region
  std::size_t regions = 0;            // after the inputs' n_in gather regions
  std::size_t region_bytes = 0;       // tile_elements() elements of the widest dtype
};

void assign_regions(const FusedGroup& g, Program& p) {
  const std::size_t n_in = g.inputs.size(), n = g.code.size();
  std::vector<std::size_t> last(g.num_values(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const FusedInstr& in = g.code[i];
    for (std::int32_t a : in.args) {
      if (a >= 0) last[static_cast<std::size_t>(a)] = i;
    }
  }
  for (std::int32_t o : g.outputs) last[static_cast<std::size_t>(o)] = n;  // to the copy-out
  std::size_t widest = 1;
  for (std::size_t v = 0; v < g.num_values(); ++v) {
    widest = std::max(widest, size_of(g.dtype_of(static_cast<std::int32_t>(v))));
  }
  p.region_bytes = tile_elements() * widest;
  std::vector<std::uint32_t> free_regions;
  p.region.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (free_regions.empty()) {
      p.region[i] = static_cast<std::uint32_t>(p.regions++);
    } else {
      p.region[i] = free_regions.back();
      free_regions.pop_back();
    }
    // Operands whose last reader this is give their region back, after the result took its.
    const FusedInstr& in = g.code[i];
    for (std::size_t k = 0; k < in.args.size(); ++k) {
      const std::int32_t a = in.args[k];
      if (a < static_cast<std::int32_t>(n_in) || last[static_cast<std::size_t>(a)] != i) continue;
      bool repeated = false;  // the same operand twice (x * x) frees once
      for (std::size_t j = 0; j < k; ++j) repeated = repeated || in.args[j] == a;
      if (!repeated) free_regions.push_back(p.region[static_cast<std::size_t>(a) - n_in]);
    }
    // A result nobody reads and no output is free at once (a result's readers come after
    // it, so last[] == 0 means none).
    if (last[n_in + i] == 0) free_regions.push_back(p.region[i]);
  }
}

// The program of g, or nullopt when some instruction has no row kernel here.
std::optional<Program> build(const FusedGroup& g) {
  const ElementwiseTable& t = elementwise_table();
  Program p;
  p.signature = g.signature;
  const std::size_t row_at = g.row_at();
  for (const FusedInstr& in : g.code) {
    Step s;
    s.kind = in.kind;
    s.args = in.args;
    const bool source = in.kind == FusedInstr::Kind::Fill || in.kind == FusedInstr::Kind::Random;
    s.in =
        source ? in.out : g.dtype_of(in.kind == FusedInstr::Kind::Where ? in.args[1] : in.args[0]);
    s.out = in.out;
    s.widen = is_half(s.in) && in.kind != FusedInstr::Kind::Cast;
    const DType cd = s.widen ? DType::F32 : s.in;
    // One row instruction (run_rows runs it; Note [Row epilogues] for what follows it).
    if (in.row() && static_cast<std::size_t>(&in - g.code.data()) != row_at) return std::nullopt;
    if (in.kind == FusedInstr::Kind::Matmul || in.kind == FusedInstr::Kind::Conv) {
      // Only first: run_matmul or run_conv runs it.
      if (&in != &g.code.front() || row_at < g.code.size()) return std::nullopt;
      s.fn = in.kind == FusedInstr::Kind::Matmul ? "matmul" : "conv";
    } else if (in.kind == FusedInstr::Kind::Reduce) {
      if (!reduces_rows(in.reduce, s.in)) return std::nullopt;
      s.fn = ir::name(in.reduce);
    } else if (in.kind == FusedInstr::Kind::Softmax) {
      s.softmax = t.softmax[di(cd)];
      if (!s.softmax) return std::nullopt;
      s.fn = in.log ? "log_softmax" : "softmax";
    } else if (in.kind == FusedInstr::Kind::LayerNorm) {
      s.layer_norm = t.layer_norm[di(cd)];
      if (!s.layer_norm) return std::nullopt;
      s.fn = "layer_norm";
    } else if (in.kind == FusedInstr::Kind::Unary) {
      s.un = t.unary[static_cast<std::size_t>(in.unary)][di(cd)];
      if (!s.un) return std::nullopt;
      s.fn = ir::name(in.unary);
    } else if (in.kind == FusedInstr::Kind::Binary) {
      s.bin = t.binary[static_cast<std::size_t>(in.binary)][di(cd)];
      if (!s.bin) return std::nullopt;
      s.fn = ir::name(in.binary);
      s.int_div =
          is_int(s.in) && (in.binary == ir::BinaryFn::Div || in.binary == ir::BinaryFn::Rem);
    }
    p.steps.push_back(s);
  }
  assign_regions(g, p);
  return p;
}

// Programs by group key, built once (Note [Fused numerics] holds for any sizes, so a
// program serves every group of its signature).
class ProgramCache {
 public:
  std::shared_ptr<const Program> get(const FusedGroup& g) {
    {
      std::lock_guard lk(mu_);
      auto it = map_.find(g.key);
      if (it != map_.end()) {
        if (it->second && it->second->signature == g.signature) return it->second;
        if (!it->second) return nullptr;
      }
    }
    auto p = build(g);
    std::shared_ptr<const Program> sp =
        p ? std::make_shared<const Program>(std::move(*p)) : nullptr;
    std::lock_guard lk(mu_);
    map_.emplace(g.key, sp);
    return sp;
  }

 private:
  Mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<const Program>> map_;
};

ProgramCache& cache() {
  static ProgramCache c;
  return c;
}

// One value of a tile: its elements, or one element standing for all (a broadcast).
struct Slot {
  const std::byte* p = nullptr;
  bool scalar = false;
};

// The scratch of a tile: one slot_bytes() region per input (used when a strided input is
// gathered), then the program's result regions (Note [Tile registers]).
//
// Note [Scratch placement]: tiles of an input are tile_elements() elements, so in a
// page-aligned input (every large tensor) they start at page offsets 0 and 2048 (tiles of
// 2 KiB: 512 4-byte elements, 1024 2-byte ones) or 0 (tiles of whole pages). A result
// region at the same page offset as the input tile it is computed from makes each load of
// the input look, to the core's store buffer, like a read of the result element just
// stored 4 KiB away (4K aliasing), and it waits: on the EPYC this was measured on,
// dropout's group ran in 38-40 or 47-48 ms CPU time by where malloc happened to put the
// scratch. So the scratch starts at page offset 1024, a quarter page from both.
struct Scratch {
  static constexpr std::size_t kPage = 4096, kSkew = 1024;
  std::vector<std::byte> slots;
  std::vector<std::byte> wide;  // three f32 tiles for widened operands and result
  std::byte* base = nullptr;    // slots' first byte at page offset kSkew
  std::size_t n_in = 0, region_bytes = 0;
  std::byte* slot(std::size_t input) { return base + input * slot_bytes(); }
  std::byte* region(std::size_t r) { return base + n_in * slot_bytes() + r * region_bytes; }
  float* w(std::size_t k) { return reinterpret_cast<float*>(wide.data()) + k * tile_elements(); }
  // Sized for a program of n_inputs inputs (grown, never shrunk: the scratch is per thread).
  void prepare(std::size_t n_inputs, const Program& p) {
    n_in = n_inputs;
    region_bytes = p.region_bytes;
    const std::size_t bytes = n_in * slot_bytes() + p.regions * p.region_bytes + kPage;
    if (slots.size() < bytes) slots.resize(bytes);
    const auto at = reinterpret_cast<std::uintptr_t>(slots.data()) % kPage;
    base = slots.data() + (kSkew + kPage - at) % kPage;
    if (wide.size() < 3 * tile_elements() * sizeof(float))
      wide.resize(3 * tile_elements() * sizeof(float));
  }
};

// Each input of g as a view of the group's shape (broadcast strides), from its first element.
struct InView {
  const std::byte* data;
  std::vector<std::int64_t> strides;
  DType dtype;
};
// (A layer norm's weight or bias of another rank than the group's has no such view: it is
// read by the layer norm alone, Note [Fused rows]; nor has an input that `only` leaves out,
// a matmul's operand, Note [Fused matmul epilogues].)
//
// Note [Group state reused]: the views (and the element-wise path's strided space) live in
// per-thread objects that keep their vectors' storage from one group to the next: a group
// of a few small ops (an MLP step's) made about 40 allocations on the Cpu's side alone,
// most of them these vectors, and its fixed cost was three times the unfused ops' time.
// The returned reference is this thread's and valid until its next call from the same
// place (each caller passes its own `into`).
const std::vector<InView>& input_views(const FusedGroup& g, std::vector<InView>& into,
                                       const std::vector<bool>* only = nullptr) {
  into.resize(g.inputs.size());
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const CpuTensor& t = as_cpu(g.inputs[k]);
    InView& v = into[k];
    v.dtype = t.dtype();
    if (t.shape().rank() != g.shape.rank() || (only && !(*only)[k])) {
      v.data = nullptr;
      v.strides.clear();
      continue;
    }
    // expand_view's strides (0 along a broadcast dim), from t's first element.
    v.data = t.data();
    backend::broadcast_strides(t.shape(), t.strides(), g.shape, v.strides);
  }
  return into;
}

// Note [Prefetch for large inputs]: Note [Tile prefetch]'s lines (and Note [Row prefetch]'s
// and Note [Epilogue prefetch]'s) are issued only where the inputs a group reads are large
// (prefetch_min_bytes: twice the core's L2 or an eighth of the L3, the larger). Smaller
// inputs were mostly written or read just before (a gradient, a layer's parameter) and are
// in cache, or are streamed in by the hardware's prefetchers, and a prefetch a line (a loop
// step of its own) cost as much as the arithmetic: one thread, `b - a * 0.01` (AMD Zen 5:
// 1 MiB L2, 32 MiB L3) on [784, 256] (1.6 MB of inputs) took 41-44 us with the prefetches
// and 26-32 without (39 unfused); [64, 256] 4.1-5.0 and 2.9 us (2.2). Larger inputs keep
// them: Adam's [1024, 1024] groups (16 MB of inputs, out of cache by the next step) ran
// 1.5x slower without. Only what is in cache changes, never what is computed.
bool prefetch_inputs(const FusedGroup& g, const std::vector<bool>* read = nullptr) {
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    if (!read || (*read)[k])
      bytes += g.inputs[k]->shape().num_elements() * size_of(g.inputs[k]->dtype());
  }
  return bytes > prefetch_min_bytes();
}

// Note [Streamed outputs]: a group's outputs are written once, tile by tile, from L1
// scratch, and nothing in the group reads them again. When they are too big to stay in the
// last-level cache for whoever reads them next (kStreamBytes in all: half the 32 MiB L3 of
// the EPYC this was measured on), ordinary stores cost a read of each output line before
// it is written (the line is fetched for ownership), traffic that competes with the
// inputs' reads and stalls the tile's computing; non-temporal stores write whole lines
// without reading them. So such outputs are stored streamed, 16 bytes at a time (SSE2, in
// every x86-64 build; elsewhere plain copies), each row piece ending in a store fence so
// that the thread pool's hand-back publishes them. Only where the bytes go changes, never
// what they are (BENCHMARKS.md, Fusion: the chains gain 10-20% in one thread's CPU time).
constexpr std::size_t kStreamBytes = std::size_t(16) << 20;

// Copies a tile's result to its output, with non-temporal stores when `stream`.
void store_tile(std::byte* dst, const std::byte* src, std::size_t bytes, bool stream) {
#if EMBER_FUSED_STREAMS
  if (stream) {
    const auto mis = reinterpret_cast<std::uintptr_t>(dst) & 15;
    const std::size_t head = std::min(bytes, mis ? 16 - mis : std::size_t(0));
    std::memcpy(dst, src, head);
    std::size_t i = head;
    for (; i + 16 <= bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    }
    std::memcpy(dst + i, src + i, bytes - i);
    return;
  }
#endif
  (void)stream;
  std::memcpy(dst, src, bytes);
}
void end_streams(bool stream) {
#if EMBER_FUSED_STREAMS
  if (stream) _mm_sfence();
#endif
  (void)stream;
}

void gather(const std::byte* src, std::int64_t stride, std::size_t n, std::size_t elem,
            std::byte* dst) {
  visit_bytes(elem, [&](auto tag) {
    using T = decltype(tag);
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = s[static_cast<std::int64_t>(i) * stride];
  });
}

// Operand x of a widened instruction as f32 (cnt elements) in w.
const void* widened(const Slot& x, DType dt, std::size_t n, float* w) {
  convert_row(x.p, dt, w, DType::F32, x.scalar ? 1 : n);
  return w;
}

void check_divisor(const Slot& b, DType dt, std::size_t n, const char* fn) {
  const std::size_t cnt = b.scalar ? 1 : n;
  visit_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* v = reinterpret_cast<const T*>(b.p);
    for (std::size_t i = 0; i < cnt; ++i) {
      EMBER_CHECK(v[i] != T(0), std::string(fn) + ": integer division by zero");
    }
  });
}

// The cache lines of the next tile's inputs, prefetched a few at a time between a tile's
// instructions (Note [Tile prefetch]).
class Prefetch {
 public:
  void add(const std::byte* p, std::size_t bytes) {
    if (n_ < kMaxInputs && bytes > 0) range_[n_++] = {p, p + bytes};
  }
  bool empty() const { return k_ == n_; }
  // Issues up to `lines` prefetches.
  void issue(std::size_t lines) {
    for (; lines > 0 && k_ < n_; --lines) {
      __builtin_prefetch(range_[k_].p, 0, 3);
      range_[k_].p += 64;
      if (range_[k_].p >= range_[k_].end) ++k_;
    }
  }
  std::size_t lines() const {
    std::size_t c = 0;
    for (std::size_t k = k_; k < n_; ++k) c += std::size_t(range_[k].end - range_[k].p + 63) / 64;
    return c;
  }

 private:
  struct Range {
    const std::byte* p;
    const std::byte* end;
  };
  // Only [0, n_) is ever read: left unset, since one is made per tile and zeroing its 256
  // bytes was 16% of a convolution epilogue's own time (MobileNetV2's 7x7 and 14x14 layers
  // have a tile per channel row).
  std::array<Range, kMaxInputs> range_;
  std::size_t n_ = 0, k_ = 0;
};

// Runs the element-wise instructions [from, to) of p on one tile of n elements, the
// iteration space's elements first .. first + n - 1 (row-major). With `last`, instruction
// to - 1 writes its n elements (one, when its operands are all broadcast) there instead of
// in scratch (Note [Epilogue in place]); with `kept`, each instruction i whose kept[i] is
// set writes there (Note [Outputs in place]).
void run_steps(const Program& p, const FusedGroup& g, Scratch& s, std::vector<Slot>& slot,
               std::size_t n, std::uint64_t first, Prefetch& ahead, std::byte* last,
               std::size_t from, std::size_t to, std::byte* const* kept = nullptr) {
  const std::size_t n_in = g.inputs.size();
  const std::size_t steps = to - from;
  const std::size_t per_step = steps == 0 ? 0 : (ahead.lines() + steps - 1) / steps;
  for (std::size_t i = from; i < to; ++i) {
    ahead.issue(per_step);
    const Step& st = p.steps[i];
    const FusedInstr& in = g.code[i];
    const std::size_t v = n_in + i;
    if (st.kind == FusedInstr::Kind::Fill) {  // its element, in place (little-endian bits)
      slot[v] = {reinterpret_cast<const std::byte*>(&in.bits), true};
      continue;
    }
    std::byte* y = last && i + 1 == to ? last : kept && kept[i] ? kept[i] : s.region(p.region[i]);
    if (st.kind == FusedInstr::Kind::Random) {
      // Note [Random instructions]: the tile's elements of the draw, as the Random kernel
      // draws them (draw_values, in f32 and rounded for a 16-bit dtype).
      const Distribution dist{in.dist, in.p0, in.p1};
      const std::uint64_t at = in.draw.first + first;
      if (is_half(st.out)) {
        draw_values(in.draw.seed, at, dist, DType::F32, s.w(2), n);
        convert_row(s.w(2), DType::F32, y, st.out, n);
      } else {
        draw_values(in.draw.seed, at, dist, st.out, y, n);
      }
      slot[v] = {y, false};
      continue;
    }
    const Slot& a = slot[static_cast<std::size_t>(st.args[0])];
    switch (st.kind) {
      case FusedInstr::Kind::Fill:
      case FusedInstr::Kind::Random:
      case FusedInstr::Kind::Reduce:
      case FusedInstr::Kind::Softmax:
      case FusedInstr::Kind::LayerNorm:
      case FusedInstr::Kind::Matmul:  // its slot is the product's block (run_matmul)
      case FusedInstr::Kind::Conv:    // (run_conv)
        break;
      case FusedInstr::Kind::Unary: {
        const std::size_t cnt = a.scalar ? 1 : n;
        if (st.widen) {
          const void* x = widened(a, st.in, n, s.w(0));
          if (is_half(st.out)) {
            st.un(x, s.w(2), cnt, in.p0, in.p1);
            convert_row(s.w(2), DType::F32, y, st.out, cnt);
          } else {
            st.un(x, y, cnt, in.p0, in.p1);
          }
        } else {
          st.un(a.p, y, cnt, in.p0, in.p1);
        }
        slot[v] = {y, a.scalar};
        break;
      }
      case FusedInstr::Kind::Binary: {
        const Slot& b = slot[static_cast<std::size_t>(st.args[1])];
        if (st.int_div) check_divisor(b, st.in, n, st.fn);
        const bool both = a.scalar && b.scalar;
        const std::size_t cnt = both ? 1 : n;
        const bool as = a.scalar && !both, bs = b.scalar && !both;
        if (st.widen) {
          const void* xa = widened(a, st.in, n, s.w(0));
          const void* xb = widened(b, st.in, n, s.w(1));
          if (is_half(st.out)) {
            st.bin(xa, xb, s.w(2), cnt, as, bs);
            convert_row(s.w(2), DType::F32, y, st.out, cnt);
          } else {
            st.bin(xa, xb, y, cnt, as, bs);
          }
        } else {
          st.bin(a.p, b.p, y, cnt, as, bs);
        }
        slot[v] = {y, both};
        break;
      }
      case FusedInstr::Kind::Where: {
        const Slot& x = slot[static_cast<std::size_t>(st.args[1])];
        const Slot& z = slot[static_cast<std::size_t>(st.args[2])];
        const bool all = a.scalar && x.scalar && z.scalar;
        const std::size_t cnt = all ? 1 : n;
        const auto* c = reinterpret_cast<const unsigned char*>(a.p);
        const std::int64_t cs = a.scalar ? 0 : 1, xs = x.scalar ? 0 : 1, zs = z.scalar ? 0 : 1;
        if (st.widen) {  // as unfused: the operands widened, selected (by their bits), narrowed
          const void* xa = widened(x, st.in, n, s.w(0));
          const void* xb = widened(z, st.in, n, s.w(1));
          select_row(c, cs, static_cast<const std::byte*>(xa), xs,
                     static_cast<const std::byte*>(xb), zs, reinterpret_cast<std::byte*>(s.w(2)),
                     cnt, sizeof(float));
          convert_row(s.w(2), DType::F32, y, st.out, cnt);
        } else {
          select_row(c, cs, x.p, xs, z.p, zs, y, cnt, size_of(st.in));
        }
        slot[v] = {y, all};
        break;
      }
      case FusedInstr::Kind::Cast: {
        const std::size_t cnt = a.scalar ? 1 : n;
        convert_row(a.p, st.in, y, st.out, cnt);
        slot[v] = {y, a.scalar};
        break;
      }
    }
  }
}

// The element-wise instructions before the row instruction (all of them where there is
// none), as run_steps.
void run_tile(const Program& p, const FusedGroup& g, Scratch& s, std::vector<Slot>& slot,
              std::size_t n, std::uint64_t first, Prefetch& ahead, std::byte* last = nullptr,
              std::byte* const* kept = nullptr) {
  run_steps(p, g, s, slot, n, first, ahead, last, 0, g.row_at(), kept);
}

// Points slot k at input k's n elements from p (stride `stride` elements): in place when
// contiguous, one element when broadcast, else gathered into the value's scratch.
void load_input(const std::byte* p, std::int64_t stride, std::size_t n, std::size_t elem,
                Scratch& s, std::size_t k, Slot& slot) {
  if (stride == 1) {
    slot = {p, false};
  } else if (stride == 0) {
    slot = {p, true};
  } else {
    gather(p, stride, n, elem, s.slot(k));
    slot = {s.slot(k), false};
  }
}

// Note [Fused reductions]: a group ending in a row instruction (Note [Fused rows]) along a
// dim d whose later extents are 1 walks the iteration space row by row (n = shape[d]
// elements each): each row's prologue runs tile by tile, as an element-wise group's, into a
// row buffer of the row instruction's compute type (f32 for 16-bit values, widened as
// CpuBackend::execute_widened widens the unfused op's operand), and the row code of the
// unfused op finishes it — so the result has the unfused op's bits:
//  - a Reduce: reduce_row reduces the buffer with the Reduce kernel's own code for a row
//    of that length, so the sum adds in the kernel's order;
//  - a Softmax or LayerNorm: the same row kernel the op calls (elementwise_table's
//    softmax / layer_norm, one row per call — the kernels treat rows independently), its
//    f32 result narrowed for a 16-bit dtype as the widened op narrows it. A layer norm's
//    weight and bias are made contiguous and widened once per group, as the unfused op
//    does per call.
// Prologue values the group must keep are stored as they pass. The operand of the row
// instruction is never written to memory. An input the row instruction reads (a weight)
// never gives its buffer to an output: it is read again by every row.
std::optional<Outputs> run_rows(CpuContext& ctx, FusedGroup& g, const Program& prog) {
  const std::size_t at = g.row_at();
  const FusedInstr& last = g.code[at];  // the row instruction
  const Step& last_step = prog.steps[at];
  const Shape& shape = g.shape;
  const std::size_t d = last.dim;
  for (std::size_t k = d + 1; k < shape.rank(); ++k) {
    if (shape[k] != 1) return std::nullopt;  // not along rows
  }
  const bool reduce = last.kind == FusedInstr::Kind::Reduce;
  // A reduction's long rows run in chunks (Note [Chunked fused rows]).
  const std::size_t chunk = reduce ? reduce_row_chunk(last.reduce, shape[d]) : 0;
  // Empty, or rows too long for a row buffer: op by op, as unfused.
  if (shape.num_elements() == 0 || (chunk == 0 && shape[d] > (std::size_t(1) << 22))) {
    return std::nullopt;
  }
  const std::size_t n_in = g.inputs.size();
  const std::size_t n = shape[d], rows = shape.num_elements() / n;
  const auto row_id = static_cast<std::int32_t>(n_in + at);
  const bool epilogue = at + 1 < g.code.size();  // (Note [Row epilogues])
  const std::vector<bool> row_value = backend::row_values(g);
  const DType vt = g.dtype_of(last.args[0]);
  const DType ct = is_half(vt) ? DType::F32 : vt;  // the row instruction's compute type
  const DType rt = last.out;                       // its result's dtype (what unfused stores)
  // A Reduce's result as reduce_row and reduce_chunks give it: ct's (i64 for arg reductions).
  const DType rct = reduce ? ir::reduce_dtype(last.reduce, ct) : ct;
  std::vector<std::size_t> rdims = shape.dims();
  rdims[d] = 1;
  const Shape rshape(rdims);
  // Inputs the prologue reads, those the epilogue reads, and those the row instruction
  // reads (a weight, a bias).
  std::vector<bool> read(n_in, false), read_epi(n_in, false), used(n_in, false);
  std::vector<bool> taken(n_in, false);
  for (std::size_t i = 0; i < g.code.size(); ++i) {
    for (std::int32_t a : g.code[i].args) {
      if (a < 0 || static_cast<std::size_t>(a) >= n_in) continue;
      const auto k = static_cast<std::size_t>(a);
      (i < at ? read : i > at ? read_epi : taken)[k] = true;
    }
  }
  // A row operand that is an input (Note [Rows of an input]: no prologue) is read as the
  // prologue's inputs are, into the row buffer; like a weight, it gives its buffer to no output.
  if (last.args[0] < static_cast<std::int32_t>(n_in))
    read[static_cast<std::size_t>(last.args[0])] = true;
  for (std::size_t k = 0; k < n_in; ++k) used[k] = read[k] || read_epi[k];
  const bool prefetch = prefetch_inputs(g, &read);  // (Note [Prefetch for large inputs])
  std::vector<std::shared_ptr<CpuTensor>> outs;
  std::int32_t row_out = -1;  // the row instruction's result among the outputs, or -1
  for (std::int32_t o : g.outputs) {
    const DType dt = g.dtype_of(o);
    std::shared_ptr<CpuTensor> t;
    if (o == row_id) row_out = static_cast<std::int32_t>(outs.size());
    if (row_value[static_cast<std::size_t>(o)]) {
      t = ctx.empty(rshape, dt);
    } else {
      // An input the epilogue reads gives its buffer only to an epilogue value: the prologue
      // and the row instruction write a whole row before the epilogue reads it.
      const bool epi = o > row_id;
      for (std::size_t k = 0; k < n_in && !t; ++k) {
        if (!taken[k] && (epi || !read_epi[k]) && reusable(g.inputs[k], shape, dt)) {
          taken[k] = true;
          t = output_for(ctx, g.inputs[k], shape, dt);
        }
      }
      if (!t) t = ctx.empty(shape, dt);
    }
    outs.push_back(std::move(t));
  }
  // A layer norm's weight and bias, contiguous in the compute type.
  std::array<std::shared_ptr<const CpuTensor>, 2> params;
  for (std::size_t k = 0; k < 2; ++k) {
    const std::int32_t a = last.kind == FusedInstr::Kind::LayerNorm ? last.args[k + 1] : -1;
    if (a < 0) continue;
    params[k] = contiguous(ctx, g.inputs[static_cast<std::size_t>(a)]);
    if (params[k]->dtype() != ct) {
      auto wide = ctx.empty(params[k]->shape(), ct);
      convert_row(params[k]->data(), params[k]->dtype(), wide->data(), ct, n);
      params[k] = std::move(wide);
    }
  }
  const std::byte* wp = params[0] ? params[0]->data() : nullptr;
  const std::byte* bp = params[1] ? params[1]->data() : nullptr;
  static EMBER_THREAD_LOCAL std::vector<InView> views_of_rows;
  const std::vector<InView>& views = input_views(g, views_of_rows);
  const std::size_t n_values = g.num_values();
  const std::size_t celem = size_of(ct), relem = size_of(rt);
  const std::size_t grain = std::max<std::size_t>(1, 32768 / n);
  const std::size_t tile = tile_elements();
  // Whether the row instruction's operand is the last prologue instruction's value, of the
  // compute type: then, over ranges longer than a tile, that instruction writes the row
  // buffer itself (Note [Epilogue in place]).
  const bool operand_last =
      vt == ct && at > 0 && last.args[0] == static_cast<std::int32_t>(n_in + at - 1);
  // Row r's first element in each input: r is the index over dims [0, d).
  const auto row_base = [&](std::size_t r, std::array<std::int64_t, kMaxInputs>& at_row) {
    std::size_t rem = r;
    at_row.fill(0);
    for (std::size_t dd = d; dd-- > 0;) {
      const auto id = static_cast<std::int64_t>(rem % shape[dd]);
      rem /= shape[dd];
      for (std::size_t k = 0; k < n_in; ++k) {
        if (used[k]) at_row[k] += id * views[k].strides[dd];
      }
    }
  };
  // A slot per value, the Fill sources' set (an epilogue may read one the prologue reads).
  const auto new_slots = [&] {
    std::vector<Slot> slot(n_values);
    for (std::size_t i = 0; i < g.code.size(); ++i) {
      if (g.code[i].kind == FusedInstr::Kind::Fill)
        slot[n_in + i] = {reinterpret_cast<const std::byte*>(&g.code[i].bits), true};
    }
    return slot;
  };
  // The values among [lo_id, hi_id) the group keeps, of the tile of cnt elements at row r's
  // element b (a row value once a row, at b = 0).
  const auto store_kept = [&](const std::vector<Slot>& slot, std::size_t r, std::size_t b,
                              std::size_t cnt, std::int32_t lo_id, std::int32_t hi_id) {
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::int32_t o = g.outputs[j];
      if (o < lo_id || o >= hi_id) continue;
      const Slot& v = slot[static_cast<std::size_t>(o)];
      const std::size_t elem = size_of(outs[j]->dtype());
      if (row_value[static_cast<std::size_t>(o)]) {
        if (b == 0) std::memcpy(outs[j]->data() + r * elem, v.p, elem);
        continue;
      }
      std::byte* dst = outs[j]->data() + (r * n + b) * elem;
      if (v.scalar) {
        for (std::size_t i = 0; i < cnt; ++i) std::memcpy(dst + i * elem, v.p, elem);
      } else {
        std::memcpy(dst, v.p, cnt * elem);
      }
    }
  };
  // The row instruction's operand for the tile, in the compute type at dst (where the last
  // prologue instruction did not write it there itself).
  const auto to_row_buffer = [&](const Slot& a, std::byte* dst, std::size_t cnt) {
    if (a.scalar) {
      if (a.p != dst) convert_row(a.p, vt, dst, ct, 1);
      for (std::size_t i = 1; i < cnt; ++i) std::memcpy(dst + i * celem, dst, celem);
    } else if (a.p != dst) {
      convert_row(a.p, vt, dst, ct, cnt);
    }
  };
  // Input k's tile of cnt elements at row r's element b into slot k (base: the row's first
  // element in each input).
  const auto load_row_input = [&](Scratch& s, std::vector<Slot>& slot, std::size_t k,
                                  const std::array<std::int64_t, kMaxInputs>& base, std::size_t b,
                                  std::size_t cnt) {
    const std::int64_t st = views[k].strides[d];
    const std::size_t elem = size_of(views[k].dtype);
    const std::byte* p =
        views[k].data + (base[k] + static_cast<std::int64_t>(b) * st) * std::int64_t(elem);
    load_input(p, st, cnt, elem, s, k, slot[k]);
  };
  // The prologue over elements [lo, hi) of row r, tile by tile (base: the row's first element
  // in each input; next: the next row's, whose first tile is prefetched at the last one, or
  // null): the kept values stored and the row instruction's operand written to buf (row
  // element lo at buf) — or, for a range of one tile already in the compute type, left where
  // the tile put it. Returns the operand's first element.
  const auto run_prologue = [&](Scratch& s, std::vector<Slot>& slot, std::size_t r,
                                const std::array<std::int64_t, kMaxInputs>& base,
                                const std::array<std::int64_t, kMaxInputs>* next, std::size_t lo,
                                std::size_t hi, std::byte* buf) -> const std::byte* {
    const bool direct = operand_last && hi - lo > tile;
    const std::byte* operand = buf;
    for (std::size_t b = lo; b < hi; b += tile) {
      const std::size_t cnt = std::min(tile, hi - b);
      // Note [Row prefetch]: the next tile of each input contiguous along the row (the next
      // row's first, after the last), as Note [Tile prefetch]: without it, exp + sum along
      // rows of [8192, 4096] spent a quarter of its exp waiting on its loads and ran 1.2-1.3x
      // slower fused than unfused.
      Prefetch ahead;
      const bool last_tile = b + tile >= hi;
      const std::size_t next_cnt = last_tile ? std::min(tile, n) : std::min(tile, hi - b - tile);
      for (std::size_t k = 0; k < n_in; ++k) {
        if (!read[k]) continue;
        load_row_input(s, slot, k, base, b, cnt);
        if (!prefetch || views[k].strides[d] != 1 || (last_tile && !next)) continue;
        const auto elem = static_cast<std::int64_t>(size_of(views[k].dtype));
        const std::int64_t nx =
            last_tile ? (*next)[k] : base[k] + static_cast<std::int64_t>(b + tile);
        ahead.add(views[k].data + nx * elem, next_cnt * size_of(views[k].dtype));
      }
      std::byte* const dst = buf + (b - lo) * celem;
      run_tile(prog, g, s, slot, cnt, r * n + b, ahead, direct ? dst : nullptr);
      store_kept(slot, r, b, cnt, 0, row_id);
      const Slot& a = slot[static_cast<std::size_t>(last.args[0])];
      if (hi - lo <= tile && !a.scalar && vt == ct) {
        operand = a.p;  // the range is one tile: read in scratch
      } else {
        to_row_buffer(a, dst, cnt);
      }
    }
    return operand;
  };
  // Note [Row epilogues]: the epilogue over elements [lo, hi) of row r, tile by tile, the
  // row instruction's result read from res (rt values: the row's n, or one for a Reduce),
  // its kept values stored.
  const auto run_epilogue = [&](Scratch& s, std::vector<Slot>& slot, std::size_t r,
                                const std::array<std::int64_t, kMaxInputs>& base, std::size_t lo,
                                std::size_t hi, const std::byte* res) {
    for (std::size_t b = lo; b < hi; b += tile) {
      const std::size_t cnt = std::min(tile, hi - b);
      for (std::size_t k = 0; k < n_in; ++k) {
        if (read_epi[k]) load_row_input(s, slot, k, base, b, cnt);
      }
      slot[static_cast<std::size_t>(row_id)] =
          reduce ? Slot{res, true} : Slot{res + b * relem, false};
      Prefetch none;
      run_steps(prog, g, s, slot, cnt, r * n + b, none, nullptr, at + 1, g.code.size());
      store_kept(slot, r, b, cnt, row_id + 1, static_cast<std::int32_t>(n_values));
    }
  };
  if (chunk > 0) {
    // Note [Chunked fused rows]: a reduction of rows the Reduce kernel reduces in chunks
    // (Note [Chunked rows] in reduce.cpp: a full sum of [8192, 4096], one row of 2^25) runs
    // chunk by chunk, the chunks of every row over the threads: each chunk's prologue into
    // a chunk-long buffer, reduced to its part as the kernel reduces that chunk, and each
    // row's parts combined in order — the kernel's bits, where one thread walking the whole
    // row (or the op by op run the row buffer's size once forced) left the rest idle. An
    // epilogue then runs over the same chunks, each row's result in hand.
    const std::size_t chunks = (n + chunk - 1) / chunk;
    const std::size_t pelem = reduce_part_bytes(last.reduce, ct);
    std::vector<std::byte> parts(rows * chunks * pelem);
    parallel_for(0, rows * chunks, 1, [&](std::size_t i0, std::size_t i1) {
      static EMBER_THREAD_LOCAL Scratch s;
      static EMBER_THREAD_LOCAL std::vector<std::byte> row_buf;
      s.prepare(n_in, prog);
      if (row_buf.size() < chunk * celem) row_buf.resize(chunk * celem);
      std::vector<Slot> slot = new_slots();
      std::array<std::int64_t, kMaxInputs> base{};
      for (std::size_t i = i0; i < i1; ++i) {
        const std::size_t r = i / chunks, lo = (i % chunks) * chunk, hi = std::min(n, lo + chunk);
        row_base(r, base);
        run_prologue(s, slot, r, base, nullptr, lo, hi, row_buf.data());
        reduce_chunk(last.reduce, ct, row_buf.data(), hi - lo, parts.data() + i * pelem);
      }
    });
    if (row_out < 0 && !epilogue) return Outputs(outs.begin(), outs.end());
    std::vector<std::uint64_t> results(rows);  // each row's, narrowed to rt as unfused
    for (std::size_t r = 0; r < rows; ++r) {
      std::uint64_t res = 0;
      reduce_chunks(last.reduce, ct, parts.data() + r * chunks * pelem, chunks, n, &res);
      convert_row(&res, rct, &results[r], rt, 1);
      if (row_out >= 0)
        std::memcpy(outs[std::size_t(row_out)]->data() + r * relem, &results[r], relem);
    }
    if (epilogue) {
      parallel_for(0, rows * chunks, 1, [&](std::size_t i0, std::size_t i1) {
        static EMBER_THREAD_LOCAL Scratch s;
        s.prepare(n_in, prog);
        std::vector<Slot> slot = new_slots();
        std::array<std::int64_t, kMaxInputs> base{};
        for (std::size_t i = i0; i < i1; ++i) {
          const std::size_t r = i / chunks, lo = (i % chunks) * chunk, hi = std::min(n, lo + chunk);
          row_base(r, base);
          run_epilogue(s, slot, r, base, lo, hi, reinterpret_cast<const std::byte*>(&results[r]));
        }
      });
    }
    return Outputs(outs.begin(), outs.end());
  }
  parallel_for(0, rows, grain, [&](std::size_t r0, std::size_t r1) {
    static EMBER_THREAD_LOCAL Scratch s;
    static EMBER_THREAD_LOCAL std::vector<std::byte> row_buf;
    s.prepare(n_in, prog);
    // The row buffer, then (a 16-bit softmax or layer norm) its f32 result, then (a softmax
    // or layer norm with an epilogue, not kept) the result in rt.
    const std::size_t res_bytes = !reduce && epilogue && row_out < 0 ? n * relem : 0;
    const std::size_t wide_bytes = !reduce && ct != vt ? n * celem : 0;
    if (row_buf.size() < n * celem + wide_bytes + res_bytes)
      row_buf.resize(n * celem + wide_bytes + res_bytes);
    std::byte* const wide_out = row_buf.data() + n * celem;
    std::byte* const res_buf = wide_out + wide_bytes;
    std::vector<Slot> slot = new_slots();
    std::array<std::int64_t, kMaxInputs> base{};
    std::array<std::int64_t, kMaxInputs> next_base{};
    if (r0 < r1) row_base(r0, next_base);
    for (std::size_t r = r0; r < r1; ++r) {
      base = next_base;
      if (r + 1 < r1) row_base(r + 1, next_base);
      // The row instruction's operand, n values of ct.
      const std::byte* row =
          run_prologue(s, slot, r, base, r + 1 < r1 ? &next_base : nullptr, 0, n, row_buf.data());
      if (row_out < 0 && !epilogue) continue;  // (only prologue values are kept)
      std::uint64_t result = 0;                // a Reduce's, in rt
      const std::byte* res = reinterpret_cast<const std::byte*>(&result);
      if (reduce) {
        std::uint64_t res_ct = 0;
        reduce_row(last.reduce, ct, row, n, &res_ct);
        convert_row(&res_ct, rct, &result, rt, 1);  // the compute type's result, narrowed
        if (row_out >= 0)
          std::memcpy(outs[std::size_t(row_out)]->data() + r * relem, &result, relem);
      } else {
        std::byte* y = row_out >= 0 ? outs[std::size_t(row_out)]->data() + r * n * relem : res_buf;
        void* yc = rt == ct ? static_cast<void*>(y) : static_cast<void*>(wide_out);
        if (last_step.softmax) {
          last_step.softmax(row, yc, n, 1, last.log);
        } else {
          last_step.layer_norm(row, wp, bp, yc, n, 1, last.p0);
        }
        if (rt != ct) convert_row(wide_out, ct, y, rt, n);  // narrowed as unfused
        res = y;
      }
      if (epilogue) run_epilogue(s, slot, r, base, 0, n, res);
    }
  });
  return Outputs(outs.begin(), outs.end());
}

// Note [Fused matmul epilogues]: a group starting with a Matmul (Note [Matmul groups] in
// backend/fused_group.hpp) runs as the product through matmul_into — the Matmul kernel's own
// code, so the same GEMM calls, blocking and threads and the same bits — with a GEMM
// epilogue (Note [GEMM epilogue] in cpu/gemm/gemm.hpp) that runs the group's other
// instructions on each finished block of the product while it is in cache: row by row of
// the block, in tiles, exactly as an element-wise group's tile program (run_tile, the same
// row kernels), the product's tile read where the GEMM left it (a 16-bit product is first
// rounded to its dtype, as the widened op's Cast rounds it) and the outputs written at the
// block's elements. So the epilogue sees the f32 / f64 values the unfused matmul stores.
// The GEMM's C is an output of the product's compute type when there is one — the product
// itself when it is kept, else an epilogue result, computed in place (every instruction of
// a tile reads its operands before the outputs are copied out, as Note [Fused in-place]) —
// else a scratch tensor. 16-bit operands are widened to f32 first, as
// CpuBackend::execute_widened widens them. Outputs are fresh: no input gives its buffer,
// since the GEMM writes C before the epilogue reads the inputs.
// How many rows ahead an epilogue prefetches its inputs (Note [Epilogue prefetch]).
constexpr std::size_t kEpilogueAhead = 2;

//
// Note [Fused conv epilogues]: a group starting with a Conv (Note [Conv groups] in
// backend/fused_group.hpp) runs the same way (run_conv): the convolution through
// conv_forward_into — the Conv kernel's own code, so the same GEMMs or direct plane kernels,
// the same threads and bits — whose epilogue hook hands over each finished block of an
// image's [O, L] output (a GEMM block of an (image, group) product, or a whole plane of the
// depthwise path) to the same ProductEpilogue as a matmul's, with the iteration space
// [N, O, *out] seen as rows [N, O] of L positions (each input's spatial dims collapsed to
// one: a bias [1, O, 1, 1] and a contiguous residual always collapse; an input whose spatial
// strides do not leaves the group to the default, the conv then its epilogue).
template <class T>
struct ProductEpilogue {
  const Program& prog;
  const FusedGroup& g;
  const Shape& space;                // the iteration space as the product's rows: [..., m, n]
  const std::vector<InView>& views;  // over space
  const std::vector<bool>& read;     // per input: read by the epilogue
  const std::vector<std::shared_ptr<CpuTensor>>& outs;
  std::size_t m, n;
  bool large;  // the inputs it reads are (Note [Prefetch for large inputs])

  static void apply(const void* ctx, std::size_t batch, std::size_t i0, std::size_t j0, T* c,
                    std::ptrdiff_t c_rs, std::size_t rows, std::size_t cols) {
    static_cast<const ProductEpilogue*>(ctx)->run(batch, i0, j0, c, c_rs, rows, cols);
  }

  void run(std::size_t batch, std::size_t i0, std::size_t j0, T* c, std::ptrdiff_t c_rs,
           std::size_t rows, std::size_t cols) const {
    static EMBER_THREAD_LOCAL Scratch s;
    static EMBER_THREAD_LOCAL std::vector<Slot> slot;
    const std::size_t n_in = g.inputs.size(), rank = space.rank();
    s.prepare(n_in, prog);
    slot.assign(g.num_values(), Slot{});
    const DType pt = g.code.front().out;  // the product's dtype (T, or 16-bit)
    const auto product = static_cast<std::size_t>(n_in);
    // The inputs the epilogue reads, and per such input its view's innermost stride and
    // element size (a [C] bias seen as [N, C, L] has stride 0 there: one element a row).
    std::array<std::size_t, kMaxInputs> rd{};
    std::array<std::int64_t, kMaxInputs> inner{}, elem{};
    std::size_t n_rd = 0;
    for (std::size_t k = 0; k < n_in; ++k) {
      if (!read[k]) continue;
      rd[n_rd] = k;
      inner[n_rd] = views[k].strides[rank - 1];
      elem[n_rd++] = static_cast<std::int64_t>(size_of(views[k].dtype));
    }
    // Note [Epilogue in place]: a group of one output that is its last instruction's value
    // (not the product's) has that instruction write each tile straight into the output
    // (run_tile's `last`) — the block of C itself where the output is C — instead of into
    // scratch and then copied. At C the instruction writes element e where it read the
    // product's element e, as the plain in-place Add does, so every value is unchanged.
    const auto last_value = static_cast<std::int32_t>(n_in + g.code.size() - 1);
    const bool direct = outs.size() == 1 && g.code.size() > 1 && g.outputs[0] == last_value;
    // Row r's first element (column j0) in each input the epilogue reads.
    const auto row_base = [&](std::size_t r, std::array<std::int64_t, kMaxInputs>& base) {
      std::size_t rem = r;
      for (std::size_t q = 0; q < n_rd; ++q) base[q] = static_cast<std::int64_t>(j0) * inner[q];
      for (std::size_t d = rank - 1; d-- > 0;) {
        const auto id = static_cast<std::int64_t>(rem % space[d]);
        rem /= space[d];
        for (std::size_t q = 0; q < n_rd; ++q) base[q] += id * views[rd[q]].strides[d];
      }
    };
    // Rows of a block follow each other, so row r + 1 starts a row stride after row r but
    // where r + 1 starts a new [m, n] matrix (a conv's next image): only then is it
    // recomputed (a block's rows are a few hundred, each of 49 positions on a late conv
    // layer, so the per-row walk is most of the setup).
    const std::size_t m_rows = space[rank - 2];
    const auto next_row = [&](std::size_t r, std::array<std::int64_t, kMaxInputs>& base) {
      if ((r + 1) % m_rows == 0) {
        row_base(r + 1, base);
      } else {
        for (std::size_t q = 0; q < n_rd; ++q) base[q] += views[rd[q]].strides[rank - 2];
      }
    };
    // Only a contiguous input that moves from row to row (a residual) is prefetched ahead
    // (Note [Epilogue prefetch]); a per-channel bias is one element a row.
    bool prefetch = false;
    for (std::size_t q = 0; q < n_rd && large; ++q) {
      prefetch = prefetch || (inner[q] == 1 && views[rd[q]].strides[rank - 2] != 0);
    }
    std::array<std::int64_t, kMaxInputs> base{}, ahead_base{};
    const std::size_t row0 = batch * m + i0;  // the product's row: the group's too
    const std::size_t tile = tile_elements();
    row_base(row0, base);
    if (prefetch && kEpilogueAhead < rows) row_base(row0 + kEpilogueAhead, ahead_base);
    for (std::size_t i = 0; i < rows; ++i) {
      const std::size_t row = row0 + i;
      if (i > 0) next_row(row - 1, base);
      // Note [Epilogue prefetch]: a block's rows of an [m, n] input (a residual) are pieces
      // of ~1 KB a row apart, too short for the hardware's stream prefetch to follow; so the
      // same piece kEpilogueAhead rows down is prefetched while this row computes (Note
      // [Tile prefetch]). Only what is in cache changes.
      const bool ahead_row = prefetch && i + kEpilogueAhead < rows;
      if (ahead_row && i > 0) next_row(row + kEpilogueAhead - 1, ahead_base);
      const T* crow = c + static_cast<std::ptrdiff_t>(i) * c_rs;
      for (std::size_t b = 0; b < cols; b += tile) {
        const std::size_t cnt = std::min(tile, cols - b);
        Prefetch ahead;
        for (std::size_t q = 0; q < n_rd; ++q) {
          const std::size_t k = rd[q];
          const std::int64_t at = static_cast<std::int64_t>(b) * inner[q];
          load_input(views[k].data + (base[q] + at) * elem[q], inner[q], cnt, std::size_t(elem[q]),
                     s, k, slot[k]);
          if (ahead_row && inner[q] == 1 && ahead_base[q] != base[q]) {
            ahead.add(views[k].data + (ahead_base[q] + at) * elem[q], cnt * std::size_t(elem[q]));
          }
        }
        const auto* pc = reinterpret_cast<const std::byte*>(crow + b);
        if (is_half(pt)) {  // rounded as the widened op's Cast rounds the f32 product
          std::byte* y = s.region(prog.region[0]);
          convert_row(pc, DType::F32, y, pt, cnt);
          slot[product] = {y, false};
        } else {
          slot[product] = {pc, false};
        }
        const std::size_t at = row * n + j0 + b;  // the tile's first element (row-major)
        std::byte* const last = direct ? outs[0]->data() + at * size_of(outs[0]->dtype()) : nullptr;
        run_tile(prog, g, s, slot, cnt, at, ahead, last);
        for (std::size_t j = 0; j < outs.size(); ++j) {
          const Slot& v = slot[static_cast<std::size_t>(g.outputs[j])];
          const std::size_t el = size_of(outs[j]->dtype());
          std::byte* dst = outs[j]->data() + at * el;
          if (v.scalar) {  // (in place, its first element is already there)
            for (std::size_t e = v.p == dst ? 1 : 0; e < cnt; ++e) {
              std::memcpy(dst + e * el, v.p, el);
            }
          } else if (dst != v.p) {  // (the product kept where the GEMM wrote it; in place)
            std::memcpy(dst, v.p, cnt * el);
          }
        }
      }
    }
  }
};

// The inputs a product group's epilogue reads (not the product's operands alone).
std::vector<bool> epilogue_reads(const FusedGroup& g) {
  std::vector<bool> read(g.inputs.size(), false);
  for (std::size_t i = 1; i < g.code.size(); ++i) {
    for (std::int32_t a : g.code[i].args) {
      if (a >= 0 && static_cast<std::size_t>(a) < g.inputs.size())
        read[static_cast<std::size_t>(a)] = true;
    }
  }
  return read;
}

// A product group's outputs (fresh, contiguous, of the group's shape) and the product's C,
// of the compute type ct (Note [Fused matmul epilogues]).
struct ProductOutputs {
  std::vector<std::shared_ptr<CpuTensor>> outs;
  std::shared_ptr<CpuTensor> c;
};
ProductOutputs product_outputs(CpuContext& ctx, const FusedGroup& g, DType ct) {
  const auto product = static_cast<std::int32_t>(g.inputs.size());
  const DType pt = g.code.front().out;
  ProductOutputs r;
  for (std::int32_t o : g.outputs) {
    r.outs.push_back(ctx.empty(g.shape, g.dtype_of(o)));
    if (o == product && pt == ct) r.c = r.outs.back();
  }
  for (std::size_t j = 0; j < r.outs.size() && !r.c; ++j) {
    if (r.outs[j]->dtype() == ct) r.c = r.outs[j];
  }
  if (!r.c) r.c = ctx.empty(g.shape, ct);
  return r;
}

// The product's two operands, widened to f32 when 16-bit (as CpuBackend::execute_widened
// does).
std::array<ir::Handle, 2> product_operands(CpuContext& ctx, const FusedGroup& g) {
  std::array<ir::Handle, 2> operand;
  for (std::size_t i = 0; i < 2; ++i) {
    operand[i] = g.inputs[static_cast<std::size_t>(g.code.front().args[i])];
    if (is_half(operand[i]->dtype())) {
      ir::Cast cast{operand[i], DType::F32};
      operand[i] = run(ctx, cast);
    }
  }
  return operand;
}

std::optional<Outputs> run_matmul(CpuContext& ctx, FusedGroup& g, const Program& prog) {
  const Shape& shape = g.shape;
  const std::size_t rank = shape.rank();
  const DType pt = g.code.front().out;
  const DType ct = is_half(pt) ? DType::F32 : pt;  // the GEMM's dtype
  if (rank < 2 || (ct != DType::F32 && ct != DType::F64)) return std::nullopt;
  // A bf16 product where the bf16 GEMM runs (cpu/gemm/gemm_bf16.hpp) is not the widened f32
  // product: the group runs apart, its product by the Matmul kernel as unfused.
  if (pt == DType::BF16 && gemm_bf16_native()) return std::nullopt;
  const std::vector<bool> read = epilogue_reads(g);
  // The product [..., m, n]: the group's shape is it or a refinement of it ending in n
  // (Note [Matmul groups]), so its row r is elements [r * n, r * n + n) of the group's.
  const Shape ps = backend::matmul_shape(g);
  const std::size_t m = ps[ps.rank() - 2], n = ps[ps.rank() - 1];
  if (shape[rank - 1] != n || ps.num_elements() != shape.num_elements()) return std::nullopt;
  const ProductOutputs po = product_outputs(ctx, g, ct);
  Outputs result(po.outs.begin(), po.outs.end());
  if (shape.num_elements() == 0) return result;
  const std::array<ir::Handle, 2> operand = product_operands(ctx, g);
  static EMBER_THREAD_LOCAL std::vector<InView> views_of_matmul;
  const std::vector<InView>& views = input_views(g, views_of_matmul, &read);
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    const ProductEpilogue<T> epi{
        prog, g, shape, views, read, po.outs, m, n, prefetch_inputs(g, &read)};
    const GemmEpilogue<T> ep{&ProductEpilogue<T>::apply, &epi};
    matmul_into<T>(ctx, as_cpu(operand[0]), as_cpu(operand[1]), ps, po.c->data_as<T>(), &ep);
  };
  if (ct == DType::F64) {
    go(double{});
  } else {
    go(float{});
  }
  return result;
}

// The stride of dims [d0, rank) of an iteration space taken together as one dim, for a view
// with strides st over it, or nullopt where they do not collapse (Note [Fused conv
// epilogues]).
std::optional<std::int64_t> collapsed_stride(const Shape& shape,
                                             const std::vector<std::int64_t>& st, std::size_t d0) {
  std::int64_t inner = 0, span = 0;  // the innermost stride, the elements covered so far
  for (std::size_t d = shape.rank(); d-- > d0;) {
    if (shape[d] == 1) continue;
    if (span == 0) {
      inner = st[d];
      span = static_cast<std::int64_t>(shape[d]);
      continue;
    }
    if (st[d] != inner * span) return std::nullopt;
    span *= static_cast<std::int64_t>(shape[d]);
  }
  return inner;
}

std::optional<Outputs> run_conv(CpuContext& ctx, FusedGroup& g, const Program& prog) {
  const FusedInstr& cv = g.code.front();
  const Shape& shape = g.shape;
  const std::size_t rank = shape.rank();
  const DType pt = cv.out;
  const DType ct = is_half(pt) ? DType::F32 : pt;  // the convolution's dtype
  if (rank < 3 || (ct != DType::F32 && ct != DType::F64)) return std::nullopt;
  const std::vector<bool> read = epilogue_reads(g);
  // The epilogue's rows: [N, O] of L positions.
  std::size_t positions = 1;
  for (std::size_t d = 2; d < rank; ++d) positions *= shape[d];
  const Shape space{shape[0], shape[1], positions};
  static EMBER_THREAD_LOCAL std::vector<InView> views_of_conv;
  std::vector<InView>& views = views_of_conv;
  input_views(g, views, &read);
  for (std::size_t k = 0; k < views.size(); ++k) {
    if (!read[k]) continue;
    const auto inner = collapsed_stride(shape, views[k].strides, 2);
    if (!inner) return std::nullopt;
    views[k].strides = {views[k].strides[0], views[k].strides[1], *inner};
  }
  const ProductOutputs po = product_outputs(ctx, g, ct);
  Outputs result(po.outs.begin(), po.outs.end());
  if (shape.num_elements() == 0) return result;
  const std::array<ir::Handle, 2> operand = product_operands(ctx, g);
  const ir::Conv op{operand[0], operand[1], g.conv_window, g.conv_groups, ir::ConvPass::Forward,
                    {}};
  EMBER_ASSERT(ir::out_shape(op) == shape);  // (Note [Conv groups])
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    const ProductEpilogue<T> epi{
        prog, g, space, views, read, po.outs, shape[1], positions, prefetch_inputs(g, &read)};
    const GemmEpilogue<T> ep{&ProductEpilogue<T>::apply, &epi};
    conv_forward_into<T>(ctx, op, po.c->data_as<T>(), &ep);
  };
  if (ct == DType::F64) {
    go(double{});
  } else {
    go(float{});
  }
  return result;
}

}  // namespace

std::optional<Outputs> run_fused(CpuContext& ctx, FusedGroup& g) {
  if (g.inputs.size() > kMaxInputs) return std::nullopt;
  const auto prog = cache().get(g);
  if (!prog) return std::nullopt;
  if (g.starts_with_matmul()) return run_matmul(ctx, g, *prog);
  if (g.starts_with_conv()) return run_conv(ctx, g, *prog);
  if (g.has_row()) return run_rows(ctx, g, *prog);
  const Shape& shape = g.shape;
  const std::size_t n_in = g.inputs.size();
  // Outputs: a sole-owned input of the same shape and dtype, or a fresh tensor.
  std::vector<std::shared_ptr<CpuTensor>> outs;
  std::vector<bool> taken(n_in, false);
  std::vector<std::int32_t> source;  // per output: the input whose buffer it took, or -1
  for (std::int32_t o : g.outputs) {
    const DType dt = g.dtype_of(o);
    std::shared_ptr<CpuTensor> t;
    source.push_back(-1);
    for (std::size_t k = 0; k < n_in && !t; ++k) {
      if (!taken[k] && reusable(g.inputs[k], shape, dt)) {
        taken[k] = true;
        t = output_for(ctx, g.inputs[k], shape, dt);
        source.back() = static_cast<std::int32_t>(k);
      }
    }
    outs.push_back(t ? std::move(t) : ctx.empty(shape, dt));
  }
  Outputs result(outs.begin(), outs.end());
  if (shape.num_elements() == 0) return result;

  // (Note [Group state reused].)
  static EMBER_THREAD_LOCAL std::vector<InView> views_of_group;
  static EMBER_THREAD_LOCAL StridedSpace<kMaxInputs + 1> sp;
  const std::vector<InView>& views = input_views(g, views_of_group);
  sp.shape.assign(shape.begin(), shape.end());
  for (std::size_t k = 0; k < kMaxInputs; ++k) {
    if (k < n_in) {
      sp.strides[k].assign(views[k].strides.begin(), views[k].strides.end());
    } else {
      sp.strides[k].assign(shape.rank(), 0);
    }
  }
  backend::contiguous_strides(shape, sp.strides[kMaxInputs]);  // the contiguous output's
  sp.collapse();
  std::array<std::int64_t, kMaxInputs + 1> inner{};
  for (std::size_t k = 0; k <= kMaxInputs; ++k) inner[k] = sp.strides[k].back();
  const std::size_t n_values = g.num_values();
  std::size_t out_bytes = 0;
  for (const auto& o : outs) out_bytes += o->shape().num_elements() * size_of(o->dtype());
  // (Rows shorter than a tile would stream little and fence often.)
  const std::size_t tile = tile_elements();
  const bool stream = out_bytes >= kStreamBytes && sp.row_length() >= tile;
  // Note [Outputs in place]: a group's values were computed into scratch and the outputs
  // copied out per tile. Where stores are not streamed, an output's instruction writes each
  // tile straight into it, and later instructions read the value there — where the output is
  // a fresh tensor, or the buffer of an input no later instruction reads (the instruction
  // itself may: it writes element e where it read element e, as the plain in-place op does).
  // So the last instruction's value always goes straight out, and so do the values a group
  // keeps beside it: an autodiff graph's saved operands (an LSTM cell's group keeps 7 of its
  // 9), an Adam step's p, m and v. Only where results are stored changes.
  std::vector<std::size_t> last_read(n_in, 0);  // per input: the last instruction reading it
  for (std::size_t i = 0; i < g.code.size(); ++i) {
    for (std::int32_t a : g.code[i].args) {
      if (a >= 0 && static_cast<std::size_t>(a) < n_in) last_read[static_cast<std::size_t>(a)] = i;
    }
  }
  std::vector<bool> written(g.code.size(), false);
  std::vector<std::pair<std::size_t, std::size_t>> in_place;  // (instruction, output)
  for (std::size_t j = 0; j < outs.size() && !stream; ++j) {
    const std::int32_t o = g.outputs[j];
    if (o < static_cast<std::int32_t>(n_in)) continue;
    const auto i = static_cast<std::size_t>(o) - n_in;
    if (source[j] >= 0 && last_read[static_cast<std::size_t>(source[j])] > i) continue;
    const FusedInstr::Kind kind = g.code[i].kind;
    const bool elementwise = kind == FusedInstr::Kind::Unary || kind == FusedInstr::Kind::Binary ||
                             kind == FusedInstr::Kind::Where || kind == FusedInstr::Kind::Cast ||
                             kind == FusedInstr::Kind::Random;
    if (elementwise && !written[i]) {
      written[i] = true;
      in_place.emplace_back(i, j);
    }
  }
  const bool prefetch = prefetch_inputs(g);  // (Note [Prefetch for large inputs])
  sp.for_each_row([&](const std::array<std::int64_t, kMaxInputs + 1>& off, std::size_t len) {
    static EMBER_THREAD_LOCAL Scratch s;
    static EMBER_THREAD_LOCAL std::vector<Slot> slot;
    static EMBER_THREAD_LOCAL std::vector<std::byte*> dst;  // per instruction, or null
    s.prepare(n_in, *prog);
    slot.assign(n_values, Slot{});
    dst.assign(g.code.size(), nullptr);
    for (std::size_t b = 0; b < len; b += tile) {
      const std::size_t n = std::min(tile, len - b);
      const auto bo = static_cast<std::int64_t>(b);
      for (std::size_t k = 0; k < n_in; ++k) {
        const std::size_t elem = size_of(views[k].dtype);
        const std::byte* p =
            views[k].data + (off[k] + bo * inner[k]) * static_cast<std::int64_t>(elem);
        if (inner[k] == 1) {
          slot[k] = {p, false};
        } else if (inner[k] == 0) {
          slot[k] = {p, true};
        } else {
          gather(p, inner[k], n, elem, s.slot(k));
          slot[k] = {s.slot(k), false};
        }
      }
      // The next tile's contiguous inputs are fetched while this one computes (Note
      // [Tile prefetch]).
      Prefetch ahead;
      if (prefetch && b + tile < len) {
        const std::size_t next = std::min(tile, len - b - tile);
        for (std::size_t k = 0; k < n_in; ++k) {
          if (inner[k] != 1) continue;
          const std::size_t elem = size_of(views[k].dtype);
          ahead.add(views[k].data + (off[k] + bo + std::int64_t(tile)) * std::int64_t(elem),
                    next * elem);
        }
      }
      for (const auto& [i, j] : in_place) {
        dst[i] = outs[j]->data() +
                 (off[kMaxInputs] + bo) * static_cast<std::int64_t>(size_of(outs[j]->dtype()));
      }
      run_tile(*prog, g, s, slot, n, static_cast<std::uint64_t>(off[kMaxInputs] + bo), ahead,
               nullptr, dst.data());
      for (std::size_t j = 0; j < outs.size(); ++j) {
        const Slot& v = slot[static_cast<std::size_t>(g.outputs[j])];
        const std::size_t elem = size_of(outs[j]->dtype());
        std::byte* dst = outs[j]->data() + (off[kMaxInputs] + bo) * static_cast<std::int64_t>(elem);
        if (v.scalar) {  // (in place, its first element is already there)
          for (std::size_t i = v.p == dst ? 1 : 0; i < n; ++i)
            std::memcpy(dst + i * elem, v.p, elem);
        } else if (dst != v.p) {  // (in place: already there)
          store_tile(dst, v.p, n * elem, stream);
        }
      }
    }
    end_streams(stream);
  });
  return result;
}

}  // namespace ember::cpu
