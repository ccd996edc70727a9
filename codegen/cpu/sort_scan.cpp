#include "codegen/cpu/sort_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/thread_pool.h"

#if RUNE_HAVE_THRUST_OMP
#include <omp.h>
#include <thrust/sort.h>
#include <thrust/system/omp/execution_policy.h>
#endif

namespace codegen::cpu {

using ir::DType;
using ir::Op;

namespace {

// Rows at least this long, when they are the whole problem, go to Thrust's parallel sort.
constexpr int64_t kParallelRow = 1 << 15;

// The sort order (see sort_scan.h): NaN last, -0 == +0 (IEEE `<` already treats them equal).
template <class T>
struct Less {
  bool operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a < b || (b != b && a == a);
    else
      return a < b;
  }
};

// 16-bit floats (float16, bfloat16: sign-magnitude with the given infinity pattern) compare
// through a monotone integer key: NaN above everything, both zeros one key.
template <uint16_t Inf>
struct Half {
  uint16_t bits;
};
template <uint16_t Inf>
uint32_t half_key(Half<Inf> h) {
  uint32_t mag = h.bits & 0x7fffu;
  if (mag > Inf) return 0x10000u;
  if (mag == 0) return 0x8000u;
  return (h.bits & 0x8000u) ? 0x8000u - mag : 0x8000u + mag;
}
template <uint16_t Inf>
struct Less<Half<Inf>> {
  bool operator()(Half<Inf> a, Half<Inf> b) const { return half_key(a) < half_key(b); }
};
using F16 = Half<0x7c00>;
using BF16 = Half<0x7f80>;

#if RUNE_HAVE_THRUST_OMP
// Monotone integer keys of the sort order (the keys of the GPU kernels,
// codegen/gpu/c_renderer.cpp): Thrust sorts integers under thrust::less with a radix sort, several
// times faster than a comparison sort with Less<float>. Both zeros share a key; NaNs share the top
// key.
uint32_t sort_key(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0xffffffffu;
  if (mag == 0) return 0x80000000u;
  return (u >> 31) ? 0x80000000u - mag : 0x80000000u + mag;
}
uint64_t sort_key(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  uint64_t mag = u & 0x7fffffffffffffffull;
  if (mag > 0x7ff0000000000000ull) return ~0ull;
  if (mag == 0) return 0x8000000000000000ull;
  return (u >> 63) ? 0x8000000000000000ull - mag : 0x8000000000000000ull + mag;
}
template <uint16_t Inf>
uint32_t sort_key(Half<Inf> h) {
  return half_key(h);
}
// Integers as unsigned keys (the sign bit flipped): measured, Thrust 3.0.1's OpenMP stable_sort
// put negative int32 after positive ones under thrust::less, so it only gets unsigned keys.
template <class T>
std::make_unsigned_t<T> int_key(T v) {
  using U = std::make_unsigned_t<T>;
  constexpr U flip = std::is_signed_v<T> ? static_cast<U>(U{1} << (sizeof(U) * 8 - 1)) : U{0};
  return static_cast<U>(static_cast<U>(v) ^ flip);
}
// The value of a key of a float that is neither -0 nor NaN (the only keys shared by two bit
// patterns).
template <class T, class K>
T from_key(K k) {
  constexpr K mid = K{1} << (sizeof(K) * 8 - 1);
  K u = k >= mid ? k - mid : mid | (mid - k);
  T v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// One long row on all threads.
template <class T>
void thrust_sort(const T* x, T* y, int64_t n) {
  omp_set_num_threads(runtime::host_threads());
  if constexpr (std::is_integral_v<T>) {
    std::vector<std::make_unsigned_t<T>> keys(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[i] = int_key(x[i]);
    thrust::stable_sort(thrust::omp::par, keys.data(), keys.data() + n,
                        thrust::less<std::make_unsigned_t<T>>());
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(keys[i] ^ int_key(T{0}));
  } else {
    using K = decltype(sort_key(x[0]));
    std::vector<K> keys(static_cast<size_t>(n));
    bool keys_only = std::is_floating_point_v<T>;  // no -0 and no NaN: keys give the values back
    for (int64_t i = 0; i < n; ++i) {
      keys[i] = sort_key(x[i]);
      if constexpr (std::is_floating_point_v<T>)
        keys_only = keys_only && !(x[i] == 0 && std::signbit(x[i])) && x[i] == x[i];
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (keys_only) {
        thrust::stable_sort(thrust::omp::par, keys.data(), keys.data() + n, thrust::less<K>());
        for (int64_t i = 0; i < n; ++i) y[i] = from_key<T>(keys[i]);
        return;
      }
    }
    std::copy(x, x + n, y);
    thrust::stable_sort_by_key(thrust::omp::par, keys.data(), keys.data() + n, y,
                               thrust::less<K>());
  }
}

template <class T>
void thrust_argsort(const T* x, int64_t* y, int64_t n) {
  omp_set_num_threads(runtime::host_threads());
  for (int64_t i = 0; i < n; ++i) y[i] = i;
  if constexpr (std::is_integral_v<T>) {
    std::vector<std::make_unsigned_t<T>> keys(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[i] = int_key(x[i]);
    thrust::stable_sort_by_key(thrust::omp::par, keys.data(), keys.data() + n, y,
                               thrust::less<std::make_unsigned_t<T>>());
  } else {
    using K = decltype(sort_key(x[0]));
    std::vector<K> keys(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[i] = sort_key(x[i]);
    thrust::stable_sort_by_key(thrust::omp::par, keys.data(), keys.data() + n, y,
                               thrust::less<K>());
  }
}
#endif

template <class T>
void sort_row(const T* x, T* y, int64_t n, bool whole) {
#if RUNE_HAVE_THRUST_OMP
  if (whole && n >= kParallelRow) return thrust_sort(x, y, n);
#endif
  (void)whole;
  std::copy(x, x + n, y);
  std::stable_sort(y, y + n, Less<T>());
}

template <class T>
void argsort_row(const T* x, int64_t* y, int64_t n, bool whole) {
#if RUNE_HAVE_THRUST_OMP
  if (whole && n >= kParallelRow) return thrust_argsort(x, y, n);
#endif
  (void)whole;
  // (value, position) pairs sorted by value: a stable sort keeps equal values in position order.
  std::vector<std::pair<T, int64_t>> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = {x[i], i};
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return Less<T>()(a.first, b.first); });
  for (int64_t i = 0; i < n; ++i) y[i] = v[i].second;
}

// The chain of sort_scan.h; U is the type the addition is done in (unsigned for int64: wraps).
template <class T, class U>
void cumsum_row(const T* x, T* y, int64_t n) {
  if (n == 0) return;
  U acc = static_cast<U>(x[0]);
  y[0] = static_cast<T>(acc);
  for (int64_t i = 1; i < n; ++i) {
    acc = acc + static_cast<U>(x[i]);
    y[i] = static_cast<T>(acc);
  }
}

template <class T>
void run_rows(const SortScanPlan& p, char** bufs, int64_t lo, int64_t hi) {
  const T* x = reinterpret_cast<const T*>(bufs[1]) + p.offset;
  const bool whole = p.rows == 1;
  for (int64_t r = lo; r < hi; ++r) {
    const T* xr = x + r * p.n;
    switch (p.op) {
      case Op::Sort:
        sort_row(xr, reinterpret_cast<T*>(bufs[0]) + r * p.n, p.n, whole);
        break;
      case Op::Argsort:
        argsort_row(xr, reinterpret_cast<int64_t*>(bufs[0]) + r * p.n, p.n, whole);
        break;
      case Op::Cumsum:
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>)
          cumsum_row<T, uint64_t>(xr, reinterpret_cast<T*>(bufs[0]) + r * p.n, p.n);
        else if constexpr (std::is_floating_point_v<T>)
          cumsum_row<T, T>(xr, reinterpret_cast<T*>(bufs[0]) + r * p.n, p.n);
        else
          throw std::logic_error("run_sort_scan: cumsum of an unsupported dtype");
        break;
      default:
        throw std::logic_error("run_sort_scan: not a library op");
    }
  }
}

}  // namespace

int64_t SortScanPlan::cost_per_row() const {
  if (op == Op::Cumsum) return std::max<int64_t>(n, 1);
  int64_t lg = 1;
  while ((int64_t{1} << lg) < n) ++lg;
  return std::max<int64_t>(n * lg, 1);
}

SortScanPlan plan_sort_scan(const KernelSpec& k) {
  if (!k.library) throw std::logic_error("plan_sort_scan: not a library kernel");
  SortScanPlan p;
  p.op = k.library->op;
  p.in = k.library->in_dtype;
  p.out = k.out_dtype;
  p.offset = k.library->offset;
  p.n = k.shape.empty() ? 1 : k.shape.back();
  p.rows = p.n == 0 ? 0 : ir::numel(k.shape) / p.n;
  if (p.op == Op::Cumsum && (p.in != p.out || (p.in != DType::Int64 && p.in != DType::UInt64 &&
                                               p.in != DType::Float32 && p.in != DType::Float64)))
    throw std::logic_error("plan_sort_scan: cumsum needs int64, uint64, float32 or float64");
  return p;
}

void run_sort_scan(const void* plan, char** bufs, int64_t lo, int64_t hi) {
  const auto& p = *static_cast<const SortScanPlan*>(plan);
  switch (p.in) {
    case DType::Bool:
    case DType::UInt8:
      return run_rows<uint8_t>(p, bufs, lo, hi);
    case DType::Int8:
      return run_rows<int8_t>(p, bufs, lo, hi);
    case DType::Int16:
      return run_rows<int16_t>(p, bufs, lo, hi);
    case DType::UInt16:
      return run_rows<uint16_t>(p, bufs, lo, hi);
    case DType::Int32:
      return run_rows<int32_t>(p, bufs, lo, hi);
    case DType::UInt32:
      return run_rows<uint32_t>(p, bufs, lo, hi);
    case DType::Int64:
      return run_rows<int64_t>(p, bufs, lo, hi);
    case DType::UInt64:
      return run_rows<uint64_t>(p, bufs, lo, hi);
    case DType::Float16:
      return run_rows<F16>(p, bufs, lo, hi);
    case DType::BFloat16:
      return run_rows<BF16>(p, bufs, lo, hi);
    case DType::Float32:
      return run_rows<float>(p, bufs, lo, hi);
    case DType::Float64:
      return run_rows<double>(p, bufs, lo, hi);
  }
}

}  // namespace codegen::cpu
