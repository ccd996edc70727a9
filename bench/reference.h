// Hand-written reference kernels the benchmarks compare rune against. They live in their own
// translation unit, compiled -O3 -march=native (no fast-math), so only they get those flags.
#pragma once
#include <cstdint>

namespace bench {

// Threads the references use: RUNE_NUM_THREADS if set, else every core, as rune's pool does.
int reference_threads();

// STREAM-like copy: y[i] = x[i], split over `threads` threads.
void copy_kernel(const float* x, float* y, int64_t n, int threads);

// The chain (x*2+1)*tanh(x) - exp(-x*x) fused into one loop with std::tanh / std::exp.
void chain_kernel(const float* x, float* y, int64_t n, int threads);

// y = x * 2 + 1, float32 and float64: the elementwise workload's hand-written loop.
void affine_kernel(const float* x, float* y, int64_t n, int threads);
void affine_kernel(const double* x, double* y, int64_t n, int threads);

// STREAM triad a[i] = b[i] + s * c[i]: with copy, the machine's bandwidth limit.
void triad_kernel(const float* b, const float* c, float* a, float s, int64_t n, int threads);

// Peak float32 FMA throughput in GFLOP/s (2 flops per lane per FMA) on `threads` threads, for
// about `ms` milliseconds: independent FMA chains in vector registers, AVX-512 or AVX2 chosen at
// run time (never assumed), so no memory or dependency stalls.
double fma_peak_gflops(int threads, double ms);

// sum of x, float32 accumulators (as rune's float32 sum), 2-level: 64 partial sums per thread
// (vectorisable without fast-math, since each lane is its own sum), then the threads' totals.
float sum_kernel(const float* x, int64_t n, int threads);

// Row-wise softmax and layernorm of a rows x cols matrix, rows split over threads.
// softmax: y = exp(x - max) / sum(exp(x - max)); layernorm: (x - mean) / sqrt(var + eps) * g + b,
// with var the mean of (x - mean)^2 (two passes over the row, as a careful loop would).
void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t cols, int threads);
void layernorm_rows_kernel(const float* x, const float* g, const float* b, float* y, int64_t rows,
                           int64_t cols, float eps, int threads);

// The least a small out-of-place op must do: allocate the result and add (caller delete[]s).
float* add_alloc(const float* a, const float* b, int64_t n);

}  // namespace bench
