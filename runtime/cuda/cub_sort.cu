// librune_cub.so: stable row sorts on a CUDA device through CUB's radix sorts, built with nvcc
// at build time (CMake option RUNE_CUB_MODULE) and loaded with dlopen at run time
// (runtime/cuda/cub_sort.h). The interface is runtime/cuda/cub_sort_api.h; why a module and not
// NVRTC block primitives is in docs/sort.md.
//
// Every call is: keys (and, where needed, row positions) made by one small kernel; CUB's radix
// sort of each row (cub::DeviceRadixSort on a whole row, cub::DeviceSegmentedRadixSort on
// batches of short rows), stable, over only the bits the keys use; then one small kernel writes
// the result (integers: the keys turned back into values; floats: the input gathered through
// the sorted positions, so -0 and NaN payloads keep their bits; argsort: the positions).
//
// Keys are those of codegen/cpu/sort_scan.cpp and codegen/gpu/c_renderer.cpp: unsigned integers
// whose `<` is the sort order. Integers flip their sign bit (injective: the key gives the value
// back); floats map sign-magnitude bits to a monotone key with both zeros on one key and every
// NaN on the top key; 16-bit floats and bytes widen to 32-bit keys. The only keys two distinct
// values share are those of +-0 and of NaNs, which is why float sorts go through positions.
//
// Instantiations are kept few (build time): keys of 32 and 64 bits, keys alone or with int64
// positions, whole-row or segmented: 8 CUB sorts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cub/version.cuh>
#include <string>

#include "runtime/cuda/cub_sort_api.h"

#ifndef RUNE_CUB_ARCHS
#define RUNE_CUB_ARCHS "unknown archs"
#endif

namespace {

// ---- keys: one trait per element format --------------------------------------------------

template <int DT>
struct Fmt;
template <>
struct Fmt<RUNE_CUB_U8> {
  using T = unsigned char;
  using K = unsigned;
  static constexpr int kBits = 8;
  static constexpr bool kInjective = true;
  __device__ static K key(T v) { return v; }
  __device__ static T value(K k) { return static_cast<T>(k); }
};
template <>
struct Fmt<RUNE_CUB_I32> {
  using T = int;
  using K = unsigned;
  static constexpr int kBits = 32;
  static constexpr bool kInjective = true;
  __device__ static K key(T v) { return static_cast<K>(v) ^ 0x80000000u; }
  __device__ static T value(K k) { return static_cast<T>(k ^ 0x80000000u); }
};
template <>
struct Fmt<RUNE_CUB_I64> {
  using T = long long;
  using K = unsigned long long;
  static constexpr int kBits = 64;
  static constexpr bool kInjective = true;
  __device__ static K key(T v) { return static_cast<K>(v) ^ 0x8000000000000000ull; }
  __device__ static T value(K k) { return static_cast<T>(k ^ 0x8000000000000000ull); }
};
// The other integers (API version 2): narrow ones widen to 32-bit keys, signed ones flip the
// sign bit of the widened value's range; the key gives the value back.
template <class TT, class KK, unsigned long long Flip, int Bits>
struct IntFmt {
  using T = TT;
  using K = KK;
  static constexpr int kBits = Bits;
  static constexpr bool kInjective = true;
  __device__ static K key(T v) {
    K k = static_cast<K>(v);
    if constexpr (Bits < 64) k &= static_cast<K>((1ull << Bits) - 1);  // drop the sign extension
    return k ^ static_cast<K>(Flip);
  }
  __device__ static T value(K k) { return static_cast<T>(k ^ static_cast<K>(Flip)); }
};
template <>
struct Fmt<RUNE_CUB_I8> : IntFmt<signed char, unsigned, 0x80ull, 8> {};
template <>
struct Fmt<RUNE_CUB_I16> : IntFmt<short, unsigned, 0x8000ull, 16> {};
template <>
struct Fmt<RUNE_CUB_U16> : IntFmt<unsigned short, unsigned, 0ull, 16> {};
template <>
struct Fmt<RUNE_CUB_U32> : IntFmt<unsigned, unsigned, 0ull, 32> {};
template <>
struct Fmt<RUNE_CUB_U64> : IntFmt<unsigned long long, unsigned long long, 0ull, 64> {};
// 16-bit floats: NaN (magnitude above the infinity pattern) on 0x10000, both zeros on 0x8000.
template <unsigned Inf>
struct Half {
  using T = unsigned short;
  using K = unsigned;
  static constexpr int kBits = 17;
  static constexpr bool kInjective = false;
  __device__ static K key(T v) {
    const unsigned u = v, mag = u & 0x7fffu;
    if (mag > Inf) return 0x10000u;
    if (mag == 0u) return 0x8000u;
    return (u & 0x8000u) ? 0x8000u - mag : 0x8000u + mag;
  }
};
template <>
struct Fmt<RUNE_CUB_F16> : Half<0x7c00u> {};
template <>
struct Fmt<RUNE_CUB_BF16> : Half<0x7f80u> {};
template <>
struct Fmt<RUNE_CUB_F32> {
  using T = unsigned;  // the bits
  using K = unsigned;
  static constexpr int kBits = 32;
  static constexpr bool kInjective = false;
  __device__ static K key(T u) {
    const unsigned mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return 0xffffffffu;
    if (mag == 0u) return 0x80000000u;
    return (u >> 31) ? 0x80000000u - mag : 0x80000000u + mag;
  }
};
template <>
struct Fmt<RUNE_CUB_F64> {
  using T = unsigned long long;  // the bits
  using K = unsigned long long;
  static constexpr int kBits = 64;
  static constexpr bool kInjective = false;
  __device__ static K key(T u) {
    const unsigned long long mag = u & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return ~0ull;
    if (mag == 0ull) return 0x8000000000000000ull;
    return (u >> 63) ? 0x8000000000000000ull - mag : 0x8000000000000000ull + mag;
  }
};

// ---- small kernels (grid-stride) ------------------------------------------------------------

constexpr int kThreads = 256;
unsigned blocks_for(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}
#define RUNE_GRID_STRIDE(i, n)                                                               \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// keys[i] = key(in[i]); pos[i] = i's position in its row (when pos is given).
template <int DT>
__global__ void make_keys(const typename Fmt<DT>::T* in, typename Fmt<DT>::K* keys, long long* pos,
                          long long n, long long len) {
  RUNE_GRID_STRIDE(i, n) {
    keys[i] = Fmt<DT>::key(in[i]);
    if (pos) pos[i] = i % len;
  }
}
// Integers: values back from the sorted keys.
template <int DT>
__global__ void values_of_keys(const typename Fmt<DT>::K* keys, typename Fmt<DT>::T* out,
                               long long n) {
  RUNE_GRID_STRIDE(i, n) { out[i] = Fmt<DT>::value(keys[i]); }
}
// Floats: out[i] = the element of i's row at the sorted position pos[i].
template <class T>
__global__ void gather_rows(const T* in, const long long* pos, T* out, long long n, long long len) {
  RUNE_GRID_STRIDE(i, n) { out[i] = in[i - i % len + pos[i]]; }
}
// Segment offsets 0, len, 2 len, ... (count + 1 of them).
__global__ void row_offsets(int* off, long long count, long long len) {
  RUNE_GRID_STRIDE(i, count + 1) { off[i] = static_cast<int>(i * len); }
}

// ---- the CUB sorts (the only instantiations: K in {unsigned, unsigned long long}) -----------

template <class K>
cudaError_t sort_row(void* temp, size_t& temp_bytes, cub::DoubleBuffer<K>& keys,
                     cub::DoubleBuffer<long long>* pos, long long n, int bits, cudaStream_t s) {
  if (pos) return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, *pos, n, 0, bits, s);
  return cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys, n, 0, bits, s);
}
template <class K>
cudaError_t sort_segments(void* temp, size_t& temp_bytes, cub::DoubleBuffer<K>& keys,
                          cub::DoubleBuffer<long long>* pos, int n, int segments, const int* off,
                          int bits, cudaStream_t s) {
  if (pos)
    return cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, keys, *pos, n, segments, off,
                                                    off + 1, 0, bits, s);
  return cub::DeviceSegmentedRadixSort::SortKeys(temp, temp_bytes, keys, n, segments, off, off + 1,
                                                 0, bits, s);
}

// ---- the plan of one call -----------------------------------------------------------------

// Rows at least this long, when there are few of them, are sorted one at a time by
// DeviceRadixSort (the whole device on each row); shorter or more numerous rows go to
// DeviceSegmentedRadixSort (a thread block per row) in batches of fewer than 2^31 elements.
constexpr long long kWholeRow = 1 << 16;
constexpr long long kFewRows = 256;
constexpr long long kMaxSegmentedItems = 0x7fffffffll;

size_t align(size_t b) { return (b + 255) / 256 * 256; }

template <int DT>
struct Plan {
  using T = typename Fmt<DT>::T;
  using K = typename Fmt<DT>::K;
  bool argsort = false;
  long long rows = 0, len = 0, n = 0;
  bool positions = false;  // sort (key, position) pairs
  bool per_row = false;    // DeviceRadixSort row by row, else segmented batches
  long long batch_rows = 0;
  // Scratch layout (offsets from the scratch pointer).
  size_t keys0 = 0, keys1 = 0, pos0 = 0, pos1 = 0, offsets = 0, temp = 0, temp_bytes = 0, total = 0;

  cudaError_t make(bool arg, long long r, long long l) {
    argsort = arg, rows = r, len = l, n = r * l;
    positions = argsort || !Fmt<DT>::kInjective;
    per_row = rows == 1 || len > kMaxSegmentedItems || (len >= kWholeRow && rows <= kFewRows);
    batch_rows = per_row ? 1 : std::min<long long>(rows, kMaxSegmentedItems / len);
    size_t at = 0;
    auto take = [&](size_t bytes) {
      size_t p = at;
      at += align(bytes);
      return p;
    };
    const size_t nb = static_cast<size_t>(n);
    keys0 = take(nb * sizeof(K));
    keys1 = take(nb * sizeof(K));
    if (positions) {
      pos0 = take(nb * 8);
      pos1 = argsort ? 0 : take(nb * 8);  // argsort's second buffer is the output
    }
    if (!per_row) offsets = take(static_cast<size_t>(batch_rows + 1) * sizeof(int));
    // CUB's temporary storage for the largest call (every call of a plan has the same size).
    cub::DoubleBuffer<K> kb(nullptr, nullptr);
    cub::DoubleBuffer<long long> pb(nullptr, nullptr);
    cudaError_t e;
    if (per_row)
      e = sort_row<K>(nullptr, temp_bytes, kb, positions ? &pb : nullptr, len, Fmt<DT>::kBits, 0);
    else {
      static const int no_offsets[2] = {0, 0};  // not read by the size query
      e = sort_segments<K>(nullptr, temp_bytes, kb, positions ? &pb : nullptr,
                           static_cast<int>(batch_rows * len), static_cast<int>(batch_rows),
                           no_offsets, Fmt<DT>::kBits, 0);
    }
    if (e != cudaSuccess) return e;
    temp = take(temp_bytes);
    total = at;
    return cudaSuccess;
  }

  // Writes the result of rows [r0, r0 + count) from the buffers the sort left them in.
  cudaError_t finish(const T* in, void* out, const K* keys, const long long* pos, long long r0,
                     long long count, cudaStream_t s) const {
    const long long start = r0 * len, m = count * len;
    if (argsort) {
      long long* o = static_cast<long long*>(out) + start;
      if (pos != o)
        return cudaMemcpyAsync(o, pos, static_cast<size_t>(m) * 8, cudaMemcpyDefault, s);
      return cudaSuccess;
    }
    if constexpr (Fmt<DT>::kInjective) {
      values_of_keys<DT><<<blocks_for(m), kThreads, 0, s>>>(keys, static_cast<T*>(out) + start, m);
    } else {
      gather_rows<T><<<blocks_for(m), kThreads, 0, s>>>(in + start, pos,
                                                        static_cast<T*>(out) + start, m, len);
    }
    return cudaGetLastError();
  }

  cudaError_t run(const void* in_v, void* out, char* scratch, cudaStream_t s) const {
    const T* in = static_cast<const T*>(in_v);
    K* k0 = reinterpret_cast<K*>(scratch + keys0);
    K* k1 = reinterpret_cast<K*>(scratch + keys1);
    long long* p0 = positions ? reinterpret_cast<long long*>(scratch + pos0) : nullptr;
    long long* p1 = !positions ? nullptr
                    : argsort  ? static_cast<long long*>(out)
                               : reinterpret_cast<long long*>(scratch + pos1);
    make_keys<DT><<<blocks_for(n), kThreads, 0, s>>>(in, k0, p0, n, len);
    if (cudaError_t e = cudaGetLastError()) return e;
    int* off = per_row ? nullptr : reinterpret_cast<int*>(scratch + offsets);
    if (off) {
      row_offsets<<<blocks_for(batch_rows + 1), kThreads, 0, s>>>(off, batch_rows, len);
      if (cudaError_t e = cudaGetLastError()) return e;
    }
    for (long long r0 = 0; r0 < rows; r0 += batch_rows) {
      const long long count = std::min(batch_rows, rows - r0), start = r0 * len;
      cub::DoubleBuffer<K> kb(k0 + start, k1 + start);
      cub::DoubleBuffer<long long> pb(p0 ? p0 + start : nullptr, p1 ? p1 + start : nullptr);
      size_t tb = temp_bytes;
      cudaError_t e = per_row ? sort_row<K>(scratch + temp, tb, kb, positions ? &pb : nullptr, len,
                                            Fmt<DT>::kBits, s)
                              : sort_segments<K>(scratch + temp, tb, kb, positions ? &pb : nullptr,
                                                 static_cast<int>(count * len),
                                                 static_cast<int>(count), off, Fmt<DT>::kBits, s);
      if (e != cudaSuccess) return e;
      e = finish(in, out, kb.Current(), positions ? pb.Current() : nullptr, r0, count, s);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
};

template <class F>
int with_format(int dtype, F&& f) {
  switch (dtype) {
    case RUNE_CUB_U8:
      return f(Plan<RUNE_CUB_U8>{});
    case RUNE_CUB_I32:
      return f(Plan<RUNE_CUB_I32>{});
    case RUNE_CUB_I64:
      return f(Plan<RUNE_CUB_I64>{});
    case RUNE_CUB_F16:
      return f(Plan<RUNE_CUB_F16>{});
    case RUNE_CUB_BF16:
      return f(Plan<RUNE_CUB_BF16>{});
    case RUNE_CUB_F32:
      return f(Plan<RUNE_CUB_F32>{});
    case RUNE_CUB_F64:
      return f(Plan<RUNE_CUB_F64>{});
    case RUNE_CUB_I8:
      return f(Plan<RUNE_CUB_I8>{});
    case RUNE_CUB_I16:
      return f(Plan<RUNE_CUB_I16>{});
    case RUNE_CUB_U16:
      return f(Plan<RUNE_CUB_U16>{});
    case RUNE_CUB_U32:
      return f(Plan<RUNE_CUB_U32>{});
    case RUNE_CUB_U64:
      return f(Plan<RUNE_CUB_U64>{});
  }
  return RUNE_CUB_ERROR_BAD_DTYPE;
}

// The static runtime reports a missing driver as "invalid device ordinal"; say what it is.
bool have_driver() {
  static const bool yes = [] {
    int v = 0;
    return cudaDriverGetVersion(&v) == cudaSuccess && v > 0;
  }();
  return yes;
}

// Argument errors first (they need no device), then the driver.
int check_call(int dtype, long long rows, long long len) {
  if (dtype < RUNE_CUB_U8 || dtype > RUNE_CUB_LAST) return RUNE_CUB_ERROR_BAD_DTYPE;
  if (rows < 0 || len < 0) return RUNE_CUB_ERROR_BAD_SHAPE;
  if (!have_driver()) return RUNE_CUB_ERROR_NO_DRIVER;
  return cudaSuccess;
}

int scratch_bytes(int dtype, int argsort, long long rows, long long len, size_t* bytes) {
  if (int e = check_call(dtype, rows, len)) return e;
  *bytes = 0;
  return with_format(dtype, [&](auto plan) -> int {
    if (rows == 0 || len == 0) return cudaSuccess;
    if (cudaError_t e = plan.make(argsort != 0, rows, len)) return e;
    *bytes = plan.total;
    return cudaSuccess;
  });
}

int sort(int dtype, int argsort, const void* in, void* out, long long rows, long long len,
         void* scratch, size_t scratch_bytes, void* stream) {
  if (int e = check_call(dtype, rows, len)) return e;
  return with_format(dtype, [&](auto plan) -> int {
    if (rows == 0 || len == 0) return cudaSuccess;
    if (cudaError_t e = plan.make(argsort != 0, rows, len)) return e;
    if (scratch_bytes < plan.total || !scratch) return RUNE_CUB_ERROR_SCRATCH_TOO_SMALL;
    return plan.run(in, out, static_cast<char*>(scratch), static_cast<cudaStream_t>(stream));
  });
}

const char* error_string(int code) {
  thread_local std::string s;
  switch (code) {
    case RUNE_CUB_ERROR_BAD_DTYPE:
      return "rune_cub: unknown element format";
    case RUNE_CUB_ERROR_BAD_SHAPE:
      return "rune_cub: negative row count or length";
    case RUNE_CUB_ERROR_SCRATCH_TOO_SMALL:
      return "rune_cub: scratch buffer smaller than scratch_bytes()";
    case RUNE_CUB_ERROR_NO_DRIVER:
      return "rune_cub: no CUDA driver on this machine (libcuda.so.1 is not installed)";
  }
  auto e = static_cast<cudaError_t>(code);
  s = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  return s.c_str();
}

std::string build_string() {
  char b[128];
  std::snprintf(b, sizeof b, "CUDA %d.%d, CUB %d.%d.%d, %s", CUDART_VERSION / 1000,
                CUDART_VERSION % 1000 / 10, CUB_MAJOR_VERSION, CUB_MINOR_VERSION,
                CUB_SUBMINOR_VERSION, RUNE_CUB_ARCHS);
  return b;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const RuneCubApi* rune_cub_api(int version) {
  static const std::string build = build_string();
  static const RuneCubApi api = {RUNE_CUB_API_VERSION, build.c_str(), scratch_bytes, sort,
                                 error_string};
  return version == RUNE_CUB_API_VERSION ? &api : nullptr;
}
