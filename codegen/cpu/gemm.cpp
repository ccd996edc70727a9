#include "codegen/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "codegen/grouped_view.h"
#include "ir/env.h"
#include "runtime/thread_pool.h"

namespace codegen::cpu {

namespace {

// Blocking (BLIS's loop order): a KC x NR panel of b stays in L1 while the micro-kernel walks
// down an MC x KC block of a held in L2; the packed KC x NC block of b lives in L3.
// Measured on this project's 2-core AVX-512 machine (bench/bench_matmul.cpp): KC 512 took a
// 1024^3 product in 10.7-10.9 ms against 11.0-11.2 at 256 and 12.2 at 128 (fewer passes over
// each C tile; the chains and so the bits do not depend on KC); NC 2048 keeps the packed block
// of b at 4 MiB a thread.
// A micro-tile is MR rows by two vectors of columns: 12 x 2 zmm (AVX-512, 32 registers) or
// 6 x 2 ymm (AVX2, 16 registers); the portable kernel uses the AVX2 shape.
constexpr int64_t kKC = 512;
constexpr int64_t kMC = 144;  // a multiple of every MR
constexpr int64_t kNC = 2048;

// One micro-tile: c[i][j] (row stride ldc) continues its chain with kc steps of packed a
// (kc x kMR, row index fastest) and b (kc rows of kNR contiguous columns, row stride ldb: kNR
// when packed, b's own row stride when read in place); `fresh` starts the chain from +0 instead
// of reading c.
template <class T>
using MicroFn = void (*)(int64_t kc, const T* ap, const T* bp, int64_t ldb, T* c, int64_t ldc,
                         bool fresh);

// Each micro-kernel is a template over its tile's rows MR: the default (12 on AVX-512, 6
// elsewhere) fills the registers; a product with fewer rows (or, transposed, fewer columns: see
// GemmPlan::transposed) uses a smaller one rather than computing zero rows.
template <class T, int NR>
struct MicroPortable {
  template <int MR>
  static void run(int64_t kc, const T* ap, const T* bp, int64_t ldb, T* c, int64_t ldc,
                  bool fresh) {
    T acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = fresh ? T(0) : c[i * ldc + j];
    for (int64_t p = 0; p < kc; ++p, ap += MR, bp += ldb)
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = std::fma(ap[i], bp[j], acc[i][j]);
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
  }
};

// The AVX2 micro-kernel, one template for both types: V is the 256-bit vector type.
template <class T>
struct Avx2;
template <>
struct Avx2<float> {
  using V = __m256;
  static constexpr int L = 8;
  __attribute__((target("avx2,fma"))) static V zero() { return _mm256_setzero_ps(); }
  __attribute__((target("avx2,fma"))) static V load(const float* p) { return _mm256_loadu_ps(p); }
  __attribute__((target("avx2,fma"))) static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  __attribute__((target("avx2,fma"))) static V bcast(const float* p) {
    return _mm256_broadcast_ss(p);
  }
  __attribute__((target("avx2,fma"))) static V fma(V a, V b, V c) {
    return _mm256_fmadd_ps(a, b, c);
  }
};
template <>
struct Avx2<double> {
  using V = __m256d;
  static constexpr int L = 4;
  __attribute__((target("avx2,fma"))) static V zero() { return _mm256_setzero_pd(); }
  __attribute__((target("avx2,fma"))) static V load(const double* p) { return _mm256_loadu_pd(p); }
  __attribute__((target("avx2,fma"))) static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  __attribute__((target("avx2,fma"))) static V bcast(const double* p) {
    return _mm256_broadcast_sd(p);
  }
  __attribute__((target("avx2,fma"))) static V fma(V a, V b, V c) {
    return _mm256_fmadd_pd(a, b, c);
  }
};

constexpr int kMR2 = 6;  // AVX2 tile rows

template <class T>
struct MicroAvx2 {
  template <int kMR>
  __attribute__((target("avx2,fma"))) static void run(int64_t kc, const T* ap, const T* bp,
                                                      int64_t ldb, T* c, int64_t ldc, bool fresh);
};

template <class T>
template <int kMR>
__attribute__((target("avx2,fma"))) void MicroAvx2<T>::run(int64_t kc, const T* ap, const T* bp,
                                                           int64_t ldb, T* c, int64_t ldc,
                                                           bool fresh) {
  using A = Avx2<T>;
  typename A::V c0[kMR], c1[kMR];
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    c0[i] = fresh ? A::zero() : A::load(c + i * ldc);
    c1[i] = fresh ? A::zero() : A::load(c + i * ldc + A::L);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, ap += kMR, bp += ldb) {
    typename A::V b0 = A::load(bp), b1 = A::load(bp + A::L);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      typename A::V a = A::bcast(ap + i);
      c0[i] = A::fma(a, b0, c0[i]);
      c1[i] = A::fma(a, b1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    A::store(c + i * ldc, c0[i]);
    A::store(c + i * ldc + A::L, c1[i]);
  }
}

constexpr int kMR512 = 12;  // AVX-512 tile rows

// The AVX-512 micro-kernel, one template for both types, like the AVX2 one.
template <class T>
struct Avx512;
template <>
struct Avx512<float> {
  using V = __m512;
  static constexpr int L = 16;
  __attribute__((target("avx512f"))) static V zero() { return _mm512_setzero_ps(); }
  __attribute__((target("avx512f"))) static V load(const float* p) { return _mm512_loadu_ps(p); }
  __attribute__((target("avx512f"))) static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  __attribute__((target("avx512f"))) static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  __attribute__((target("avx512f"))) static V fma(V a, V b, V c) {
    return _mm512_fmadd_ps(a, b, c);
  }
};
template <>
struct Avx512<double> {
  using V = __m512d;
  static constexpr int L = 8;
  __attribute__((target("avx512f"))) static V zero() { return _mm512_setzero_pd(); }
  __attribute__((target("avx512f"))) static V load(const double* p) { return _mm512_loadu_pd(p); }
  __attribute__((target("avx512f"))) static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  __attribute__((target("avx512f"))) static V bcast(const double* p) { return _mm512_set1_pd(*p); }
  __attribute__((target("avx512f"))) static V fma(V a, V b, V c) {
    return _mm512_fmadd_pd(a, b, c);
  }
};

template <class T>
struct MicroAvx512 {
  template <int kMR>
  __attribute__((target("avx512f"))) static void run(int64_t kc, const T* ap, const T* bp,
                                                     int64_t ldb, T* c, int64_t ldc, bool fresh);
};

// (b is loaded unaligned: packed panels are 64-byte aligned, b read in place need not be.)
template <class T>
template <int kMR>
__attribute__((target("avx512f"))) void MicroAvx512<T>::run(int64_t kc, const T* ap, const T* bp,
                                                            int64_t ldb, T* c, int64_t ldc,
                                                            bool fresh) {
  using A = Avx512<T>;
  typename A::V c0[kMR], c1[kMR];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    c0[i] = fresh ? A::zero() : A::load(c + i * ldc);
    c1[i] = fresh ? A::zero() : A::load(c + i * ldc + A::L);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, ap += kMR, bp += ldb) {
    typename A::V b0 = A::load(bp), b1 = A::load(bp + A::L);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      typename A::V a = A::bcast(ap + i);
      c0[i] = A::fma(a, b0, c0[i]);
      c1[i] = A::fma(a, b1, c1[i]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    A::store(c + i * ldc, c0[i]);
    A::store(c + i * ldc + A::L, c1[i]);
  }
}

enum class Isa { Portable, Avx2, Avx512 };

// The widest micro-kernel this CPU runs. RUNE_GEMM_ISA=portable|avx2 caps it (the tests run
// every kernel and hold each to the same bits).
Isa host_isa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    Isa best = __builtin_cpu_supports("avx512f")                                 ? Isa::Avx512
               : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::Avx2
                                                                                 : Isa::Portable;
    // Read at the first matrix product's plan (plan_gemm), on the compiling thread: a bad value
    // raises there, before any kernel runs on the pool.
    const std::optional<std::string>& cap = ir::env::value(ir::env::Var::GemmIsa);
    if (!cap || cap->empty()) return best;
    if (*cap == "portable") return Isa::Portable;
    if (*cap == "avx2") return best == Isa::Avx512 ? Isa::Avx2 : best;
    throw std::invalid_argument(ir::env::bad_value(
        ir::env::Var::GemmIsa, *cap, "is not a micro-kernel cap", "portable or avx2"));
  }();
  return isa;
}

// pack_a for a grouped operand: a[i, p] at a[rows[i] + cols[p]]. A panel whose rows are
// neighbours in memory (a run of output positions of a convolution) is read as one run.
template <class T, int kMR>
void pack_a_table(const T* a, const int64_t* rows, const int64_t* cols, int64_t n_rows, int64_t kc,
                  T* out) {
  for (int64_t i0 = 0; i0 < n_rows; i0 += kMR) {
    int r = static_cast<int>(std::min<int64_t>(kMR, n_rows - i0));
    const int64_t* ro = rows + i0;
    bool run = true;
    for (int i = 1; i < r && run; ++i) run = ro[i] == ro[0] + i;
    for (int64_t p = 0; p < kc; ++p, out += kMR) {
      const T* src = a + cols[p];
      if (run) {
        for (int i = 0; i < r; ++i) out[i] = src[ro[0] + i];
      } else {
        for (int i = 0; i < r; ++i) out[i] = src[ro[i]];
      }
      for (int i = r; i < kMR; ++i) out[i] = T(0);
    }
  }
}

// pack_b for a grouped operand: b[p, j] at b[rows[p] + cols[j]]; a panel whose columns are
// neighbours in memory is copied as one run.
template <class T, int NR>
void pack_b_table(const T* b, const int64_t* rows, const int64_t* cols, int64_t kc, int64_t n_cols,
                  T* out) {
  for (int64_t j0 = 0; j0 < n_cols; j0 += NR) {
    int w = static_cast<int>(std::min<int64_t>(NR, n_cols - j0));
    const int64_t* co = cols + j0;
    bool run = true;
    for (int j = 1; j < w && run; ++j) run = co[j] == co[0] + j;
    for (int64_t p = 0; p < kc; ++p, out += NR) {
      const T* src = b + rows[p];
      if (run) {
        std::memcpy(out, src + co[0], sizeof(T) * static_cast<size_t>(w));
      } else {
        for (int j = 0; j < w; ++j) out[j] = src[co[j]];
      }
      for (int j = w; j < NR; ++j) out[j] = T(0);
    }
  }
}

// Transposes one panel of b whose k index is contiguous (b[p, j] at src[p + j * cs], w <= NR
// columns): row p of the panel (out + p * NR) gets b[p, 0..w). 8 x 8 floats or 4 x 4 doubles
// at a time: B rows of b's storage (B consecutive k each) are loaded as vectors and transposed
// with AVX2 shuffles; the edges (w or kc not a multiple of B) element by element. Only moves:
// the panel holds the same values in the same places as the element-by-element loop.
template <class T, int NR>
__attribute__((target("avx2"))) void pack_b_transposed_panel(const T* src, int64_t cs, int64_t kc,
                                                             int w, T* out) {
  constexpr int B = std::is_same_v<T, float> ? 8 : 4;
  const int wb = w / B * B;
  int64_t p = 0;
  for (; p + B <= kc; p += B) {
    for (int j = 0; j < wb; j += B) {
      const T* s = src + p + j * cs;
      T* o = out + p * NR + j;
      if constexpr (std::is_same_v<T, float>) {
        __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + cs),
               r2 = _mm256_loadu_ps(s + 2 * cs), r3 = _mm256_loadu_ps(s + 3 * cs),
               r4 = _mm256_loadu_ps(s + 4 * cs), r5 = _mm256_loadu_ps(s + 5 * cs),
               r6 = _mm256_loadu_ps(s + 6 * cs), r7 = _mm256_loadu_ps(s + 7 * cs);
        // t: pairs of rows interleaved; u: groups of four rows per 128-bit half.
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
        _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(o + NR, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(o + 2 * NR, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(o + 3 * NR, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(o + 4 * NR, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(o + 5 * NR, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(o + 6 * NR, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(o + 7 * NR, _mm256_permute2f128_ps(u3, u7, 0x31));
      } else {
        __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + cs),
                r2 = _mm256_loadu_pd(s + 2 * cs), r3 = _mm256_loadu_pd(s + 3 * cs);
        __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1),
                t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
        _mm256_storeu_pd(o, _mm256_permute2f128_pd(t0, t2, 0x20));
        _mm256_storeu_pd(o + NR, _mm256_permute2f128_pd(t1, t3, 0x20));
        _mm256_storeu_pd(o + 2 * NR, _mm256_permute2f128_pd(t0, t2, 0x31));
        _mm256_storeu_pd(o + 3 * NR, _mm256_permute2f128_pd(t1, t3, 0x31));
      }
    }
    for (int j = wb; j < w; ++j)
      for (int q = 0; q < B; ++q) out[(p + q) * NR + j] = src[p + q + j * cs];
  }
  for (; p < kc; ++p)
    for (int j = 0; j < w; ++j) out[p * NR + j] = src[p + j * cs];
  for (p = 0; p < kc; ++p)
    for (int j = w; j < NR; ++j) out[p * NR + j] = T(0);
}

// Packs kc x cols of b (strides rs, cs) as panels of NR columns; columns past the edge are 0.
// A b whose k index is contiguous (rs == 1: the transposed operand of a product with few
// columns, GemmPlan::transposed) is transposed with vector shuffles where the CPU has AVX2 and
// the kernel in use is not the portable one (RUNE_GEMM_ISA=portable keeps the plain loop).
template <class T, int NR>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t cols, T* out) {
  const bool shuffle = rs == 1 && cs != 1 && host_isa() != Isa::Portable;
  for (int64_t j0 = 0; j0 < cols; j0 += NR) {
    int w = static_cast<int>(std::min<int64_t>(NR, cols - j0));
    const T* base = b + j0 * cs;
    if (shuffle) {
      pack_b_transposed_panel<T, NR>(base, cs, kc, w, out);
      out += kc * NR;
      continue;
    }
    for (int64_t p = 0; p < kc; ++p, out += NR) {
      const T* src = base + p * rs;
      if (cs == 1 && w == NR) {
        std::memcpy(out, src, sizeof(T) * NR);  // a fixed size: vector moves, not rep movs
        continue;
      }
      if (cs == 1) {
        std::memcpy(out, src, sizeof(T) * w);
      } else {
        for (int j = 0; j < w; ++j) out[j] = src[j * cs];
      }
      for (int j = w; j < NR; ++j) out[j] = T(0);
    }
  }
}

// Packs rows x kc of a (strides rs, cs) as panels of kMR rows; rows past the edge are zero.
// That is pack_b of a's transpose (kc x rows, strides cs and rs) with panels kMR wide: a
// row-major a (cs == 1) goes through pack_b_transposed_panel's vector shuffles (an 8 x 8 float
// block at a time, 12 rows: 8 by shuffles, 4 by elements), a column-major one through its
// row copies. Only moves: the same values in the same places.
template <class T, int kMR>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t rows, int64_t kc, T* out) {
  pack_b<T, kMR>(a, cs, rs, kc, rows, out);
}

// A 64-byte aligned scratch buffer per thread, grown on demand and kept.
template <class T>
T* scratch(int which, int64_t count) {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<void, Free> bufs[2];
  thread_local int64_t sizes[2] = {0, 0};
  int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  if (sizes[which] < bytes) {
    int64_t rounded = (bytes + 4095) / 4096 * 4096;
    bufs[which].reset(std::aligned_alloc(64, static_cast<size_t>(rounded)));
    if (!bufs[which]) throw std::bad_alloc();
    sizes[which] = rounded;
  }
  return static_cast<T*>(bufs[which].get());
}

// [lo, hi) of part `idx` of `parts` when `total` is cut in multiples of `unit`.
std::pair<int64_t, int64_t> part_range(int64_t total, int64_t parts, int64_t idx, int64_t unit) {
  int64_t units = (total + unit - 1) / unit;
  int64_t lo = units * idx / parts * unit, hi = units * (idx + 1) / parts * unit;
  return {std::min(lo, total), std::min(hi, total)};
}

template <class T, int kMR, int NR>
void gemm_task(const GemmPlan& g, char** bufs, int64_t task, MicroFn<T> micro) {
  const int64_t per_batch = g.m_parts * g.n_parts;
  int64_t bi = task / per_batch, rem = task % per_batch;
  auto [m_lo, m_hi] = part_range(g.m, g.m_parts, rem / g.n_parts, kMR);
  auto [n_lo, n_hi] = part_range(g.n, g.n_parts, rem % g.n_parts, NR);
  if (m_lo >= m_hi || n_lo >= n_hi) return;
  int64_t a_off = g.a_off, b_off = g.b_off;
  for (int64_t d = static_cast<int64_t>(g.batch.size()) - 1, r = bi; d >= 0; --d) {
    int64_t i = r % g.batch[d];
    r /= g.batch[d];
    a_off += i * g.a_batch[d];
    b_off += i * g.b_batch[d];
  }
  // The product's element (i, j) of this batch element lives at c[i * c_rs + j * c_cs]: the
  // output's own row-major layout, or its transpose (GemmPlan::transposed).
  const int64_t c_rs = g.transposed ? 1 : g.n, c_cs = g.transposed ? g.m : 1;
  T* c = reinterpret_cast<T*>(bufs[0]) + bi * g.m * g.n;
  const T* a = reinterpret_cast<const T*>(bufs[g.a_param]) + a_off;
  const T* b = reinterpret_cast<const T*>(bufs[g.b_param]) + b_off;
  // The epilogue of the finished columns [j0, j1) of this task's rows: over the output's flat
  // indices, row by row of the output (a row of the output is a column of a transposed product).
  auto finish = [&](int64_t j0, int64_t j1) {
    if (!g.epilogue) return;
    // Where the finished outputs are whole rows of the output they are one flat range: one call
    // (the epilogue is elementwise, so how its range is cut changes no bit).
    if (!g.transposed && j0 == 0 && j1 == g.n) {
      g.epilogue(bufs, (bi * g.m + m_lo) * g.n, (bi * g.m + m_hi) * g.n);
      return;
    }
    if (g.transposed && m_lo == 0 && m_hi == g.m) {
      g.epilogue(bufs, (bi * g.n + j0) * g.m, (bi * g.n + j1) * g.m);
      return;
    }
    if (!g.transposed) {
      for (int64_t i = m_lo; i < m_hi; ++i) {
        int64_t row = (bi * g.m + i) * g.n;
        g.epilogue(bufs, row + j0, row + j1);
      }
    } else {
      for (int64_t j = j0; j < j1; ++j) {
        int64_t row = (bi * g.n + j) * g.m;
        g.epilogue(bufs, row + m_lo, row + m_hi);
      }
    }
  };
  if (g.k == 0) {  // the empty chain: +0 (or the partial result, unchanged)
    if (!g.accumulate)
      for (int64_t i = m_lo; i < m_hi; ++i)
        for (int64_t j = n_lo; j < n_hi; ++j) c[i * c_rs + j * c_cs] = T(0);
    finish(n_lo, n_hi);
    return;
  }
  // With one tile of rows, each element of b is read once: packing it would only copy it. Its
  // full panels are then read in place when its columns are contiguous (a weight gradient's
  // x^T dh: 100 KiB of dh copied per step for 2 rows); a partial panel is still packed (its
  // zero columns). The same values meet in the same chains: the same bits.
  const bool b_in_place = g.b_rows.empty() && g.b_cs == 1 && m_hi - m_lo <= kMR;
  // The epilogue is elementwise, so where it is cut changes no bit: by blocks of whole rows
  // as they complete (below) where this task's columns are the output's whole rows.
  const bool rows_early = g.epilogue && !g.transposed && n_lo == 0 && n_hi == g.n && g.n <= kNC;
  const int64_t kc_max = std::min(kKC, g.k);
  T* ap = scratch<T>(0, kMC * kc_max);
  T* bp = scratch<T>(1, (std::min(kNC, n_hi - n_lo) + NR - 1) / NR * NR * kc_max);
  alignas(64) T tile[kMR * NR];
  for (int64_t jc = n_lo; jc < n_hi; jc += kNC) {
    int64_t nc = std::min(kNC, n_hi - jc);
    for (int64_t pc = 0; pc < g.k; pc += kKC) {
      int64_t kc = std::min(kKC, g.k - pc);
      bool fresh = pc == 0 && !g.accumulate;
      const T* b_block = b + pc * g.b_rs + jc * g.b_cs;
      const int64_t packed_from = b_in_place ? nc / NR * NR : 0;
      if (!g.b_rows.empty())
        pack_b_table<T, NR>(b, g.b_rows.data() + pc, g.b_cols.data() + jc, kc, nc, bp);
      else if (packed_from < nc)
        pack_b<T, NR>(b_block + packed_from * g.b_cs, g.b_rs, g.b_cs, kc, nc - packed_from,
                      bp + packed_from * kc);
      for (int64_t ic = m_lo; ic < m_hi; ic += kMC) {
        int64_t mc = std::min(kMC, m_hi - ic);
        if (!g.a_rows.empty())
          pack_a_table<T, kMR>(a, g.a_rows.data() + ic, g.a_cols.data() + pc, mc, kc, ap);
        else
          pack_a<T, kMR>(a + ic * g.a_rs + pc * g.a_cs, g.a_rs, g.a_cs, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int64_t cols = std::min<int64_t>(NR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            int64_t rows = std::min<int64_t>(kMR, mc - ir);
            T* ct = c + (ic + ir) * c_rs + (jc + jr) * c_cs;
            const T* at = ap + ir * kc;
            const bool direct = jr < packed_from;
            const T* bt = direct ? b_block + jr : bp + jr * kc;
            const int64_t ldb = direct ? g.b_rs : NR;
            if (rows == kMR && cols == NR && c_cs == 1) {
              micro(kc, at, bt, ldb, ct, c_rs, fresh);
              continue;
            }
            // An edge tile, or a transposed product's: work on a full tile in `tile`, keep
            // only its valid part.
            if (!fresh)
              for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) tile[i * NR + j] = ct[i * c_rs + j * c_cs];
            micro(kc, at, bt, ldb, tile, NR, fresh);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j) ct[i * c_rs + j * c_cs] = tile[i * NR + j];
          }
        }
        // Whole rows of the output, their chains complete: the epilogue runs on this block of
        // rows now, while it is in cache (after the whole product, a 400 x 64 output with its
        // 3-operation epilogue took 10 us against 2.4 us for the product alone).
        if (rows_early && pc + kc == g.k)
          g.epilogue(bufs, (bi * g.m + ic) * g.n, (bi * g.m + ic + mc) * g.n);
      }
    }
    if (!rows_early) finish(jc, jc + nc);
  }
}

// The tile heights each ISA's micro-kernel is built for: the default (the registers' worth)
// and the smaller ones a product with few rows uses.
constexpr int kRowsAvx512[] = {1, 2, 4, 8, kMR512};
constexpr int kRowsOther[] = {1, 2, 4, kMR2};

// The micro-tile height for a product with `m` rows: the smallest built one that holds them
// all, else the default.
int tile_rows(Isa isa, int64_t m) {
  const int* rows = isa == Isa::Avx512 ? kRowsAvx512 : kRowsOther;
  const size_t n = isa == Isa::Avx512 ? std::size(kRowsAvx512) : std::size(kRowsOther);
  for (size_t i = 0; i < n; ++i)
    if (m <= rows[i]) return rows[i];
  return rows[n - 1];
}

// Columns of a micro-tile: two vectors.
int64_t tile_cols(Isa isa, ir::DType t) {
  return (isa == Isa::Avx512 ? 128 : 64) / static_cast<int64_t>(ir::itemsize(t));
}

// Multiply-adds the micro-kernels issue for an m x n product (zero rows and columns of the
// edge tiles included), per k step.
int64_t padded_work(Isa isa, ir::DType t, int64_t m, int64_t n) {
  int64_t mr = tile_rows(isa, m), nr = tile_cols(isa, t);
  return (m + mr - 1) / mr * mr * ((n + nr - 1) / nr * nr);
}

template <class T, int NR, class Micro, int MR>
void run_tasks(const GemmPlan& g, char** bufs, int64_t lo, int64_t hi) {
  for (int64_t t = lo; t < hi; ++t) gemm_task<T, MR, NR>(g, bufs, t, &Micro::template run<MR>);
}

// Runs tasks [lo, hi) with the micro-kernel family `Micro` at the plan's tile height (the
// heights tile_rows gives that family: 8 and 12 for AVX-512 only, 6 for the others).
template <class T, int NR, class Micro>
void run_family(const GemmPlan& g, char** bufs, int64_t lo, int64_t hi) {
  constexpr bool avx512 = std::is_same_v<Micro, MicroAvx512<T>>;
  switch (g.mr) {
    case 1:
      return run_tasks<T, NR, Micro, 1>(g, bufs, lo, hi);
    case 2:
      return run_tasks<T, NR, Micro, 2>(g, bufs, lo, hi);
    case 4:
      return run_tasks<T, NR, Micro, 4>(g, bufs, lo, hi);
    default:
      break;
  }
  if constexpr (avx512) {
    if (g.mr == 8) return run_tasks<T, NR, Micro, 8>(g, bufs, lo, hi);
    return run_tasks<T, NR, Micro, kMR512>(g, bufs, lo, hi);
  } else {
    return run_tasks<T, NR, Micro, kMR2>(g, bufs, lo, hi);
  }
}

}  // namespace

int64_t GemmPlan::batch_count() const {
  int64_t n = 1;
  for (auto d : batch) n *= d;
  return n;
}

int64_t GemmPlan::flops_per_task() const {
  int64_t t = std::max<int64_t>(tasks(), 1);
  const int64_t outputs = batch_count() * m * n;
  return std::max<int64_t>((2 * outputs * std::max<int64_t>(k, 1) + outputs * epilogue_ops) / t, 1);
}

GemmPlan plan_gemm(const KernelSpec& ks, int threads, int64_t epilogue_ops, bool may_transpose) {
  if (!ks.contract) throw std::logic_error("plan_gemm: not a contraction kernel");
  const Contraction& ct = *ks.contract;
  const ir::View& va = ct.a;
  const ir::View& vb = ct.b;
  const ir::Shape sa = ct.a_shape(), sb = ct.b_shape();
  size_t nd = sa.size();
  if (nd < 2 || sb.size() != nd) throw std::logic_error("plan_gemm: bad operand views");
  GemmPlan g;
  g.dtype = ks.out_dtype;
  // Batch axes are one view axis each, first, in grouped operands too.
  g.batch.assign(sa.begin(), sa.end() - 2);
  g.a_batch.assign(va.strides.begin(), va.strides.begin() + static_cast<int64_t>(nd) - 2);
  g.b_batch.assign(vb.strides.begin(), vb.strides.begin() + static_cast<int64_t>(nd) - 2);
  g.m = sa[nd - 2];
  g.k = sa[nd - 1];
  g.n = sb[nd - 1];
  g.a_off = va.offset;
  g.b_off = vb.offset;
  if (ct.a_groups.empty()) {
    g.a_rs = va.strides[nd - 2];
    g.a_cs = va.strides[nd - 1];
  } else {
    const GroupedView gv{va, ct.a_groups};
    g.a_rows = gv.offsets(static_cast<int>(nd) - 2);
    g.a_cols = gv.offsets(static_cast<int>(nd) - 1);
  }
  if (ct.b_groups.empty()) {
    g.b_rs = vb.strides[nd - 2];
    g.b_cs = vb.strides[nd - 1];
  } else {
    const GroupedView gv{vb, ct.b_groups};
    g.b_rows = gv.offsets(static_cast<int>(nd) - 2);
    g.b_cols = gv.offsets(static_cast<int>(nd) - 1);
  }
  g.a_param = ct.a_param;
  g.b_param = ct.b_param;
  // A product with few columns (a layer's 2 or 10 outputs, a weight gradient's narrow side)
  // runs transposed when that wastes fewer multiply-adds on the zero columns of edge tiles:
  // C^T = B^T A^T, each output the same fma chain over k (a * b and b * a are the same bits).
  // Only when clearly better (the transposed tiles scatter their stores).
  const Isa isa = host_isa();
  if (may_transpose &&
      2 * padded_work(isa, g.dtype, g.n, g.m) < padded_work(isa, g.dtype, g.m, g.n)) {
    g.transposed = true;
    std::swap(g.m, g.n);
    std::swap(g.a_batch, g.b_batch);
    std::swap(g.a_off, g.b_off);
    std::swap(g.a_param, g.b_param);
    int64_t a_rs = g.a_rs, a_cs = g.a_cs;
    g.a_rs = g.b_cs;
    g.a_cs = g.b_rs;
    g.b_rs = a_cs;
    g.b_cs = a_rs;
    std::swap(g.a_rows, g.b_cols);
    std::swap(g.a_cols, g.b_rows);
  }
  g.mr = tile_rows(isa, g.m);
  // Split each product across the threads when there are fewer batch elements than threads
  // and the work is worth it. Cutting n re-packs a in every part, cutting m re-packs b: cut
  // the side whose other operand is the smaller.
  int64_t batch = g.batch_count();
  g.epilogue_ops = epilogue_ops;
  // (The launcher runs a step on the pool from runtime::kParallelWork operations: 2 per
  // multiply-add, and the epilogue's per output.)
  const int64_t outputs = batch * g.m * g.n;
  const int64_t total = 2 * outputs * std::max<int64_t>(g.k, 1) + outputs * epilogue_ops;
  if (threads > 1 && batch < threads && total >= runtime::kParallelWork) {
    int64_t want = (threads + batch - 1) / batch;
    int64_t nr = tile_cols(isa, g.dtype);
    int64_t m_units = (g.m + g.mr - 1) / g.mr, n_units = (g.n + nr - 1) / nr;
    bool cut_n = g.m * g.k <= g.k * g.n ? n_units >= want : m_units < want;
    if (cut_n)
      g.n_parts = std::min(want, n_units);
    else
      g.m_parts = std::min(want, m_units);
  }
  return g;
}

void run_gemm(const void* plan, char** bufs, int64_t lo, int64_t hi) {
  const auto& g = *static_cast<const GemmPlan*>(plan);
  const Isa isa = host_isa();
  if (g.dtype == ir::DType::Float32) {
    if (isa == Isa::Avx512) return run_family<float, 32, MicroAvx512<float>>(g, bufs, lo, hi);
    if (isa == Isa::Avx2) return run_family<float, 16, MicroAvx2<float>>(g, bufs, lo, hi);
    return run_family<float, 16, MicroPortable<float, 16>>(g, bufs, lo, hi);
  }
  if (isa == Isa::Avx512) return run_family<double, 16, MicroAvx512<double>>(g, bufs, lo, hi);
  if (isa == Isa::Avx2) return run_family<double, 8, MicroAvx2<double>>(g, bufs, lo, hi);
  return run_family<double, 8, MicroPortable<double, 8>>(g, bufs, lo, hi);
}

const char* gemm_kernel_name() {
  switch (host_isa()) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "portable";
  }
}

}  // namespace codegen::cpu
