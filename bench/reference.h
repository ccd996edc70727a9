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

// The least a small out-of-place op must do: allocate the result and add (caller delete[]s).
float* add_alloc(const float* a, const float* b, int64_t n);

}  // namespace bench
