// Random numbers as values (jax.random): a key is a uint32 [2] tensor, traced like any other
// argument, so a new key each step neither retraces a compiled function nor becomes a constant
// of it. The generator is Threefry-2x32 (20 rounds, Salmon et al. 2011, as JAX), counter based:
// element i of a draw is a function of the key and i only, so the same key gives the same bits
// eagerly and compiled, on every device, and the same bits as JAX 0.10 (partitionable threefry,
// its default): tests/test_random_keys.cpp compares with values jax.random printed.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace nx::random {

// jax.random.key(seed) / PRNGKey: [seed >> 32, seed & 0xFFFFFFFF], on the default device.
Tensor key(uint64_t seed);
// n new keys, a uint32 [n, 2] (row i: threefry(key, (0, i))); split(k)[0] and [1] as JAX's.
Tensor split(const Tensor& key, int64_t n = 2);
// A key for `data` derived from `key` (jax.random.fold_in): data a host integer or a traced
// integer scalar (a step counter inside rune::jit).
Tensor fold_in(const Tensor& key, uint32_t data);
Tensor fold_in(const Tensor& key, const Tensor& data);
// 32 random bits per element (jax.random.bits): uint32 of `shape`.
Tensor bits(const Tensor& key, const Shape& shape);
// Uniform in [minval, maxval) (jax.random.uniform): the top mantissa bits of a draw as a float in
// [1, 2), minus 1, scaled; any float dtype.
Tensor uniform(const Tensor& key, const Shape& shape, DType t = DType::Float32, double minval = 0,
               double maxval = 1);
// Standard normal (jax.random.normal): sqrt(2) erfinv(u) of JAX's uniform u in (-1, 1); erfinv is
// computed at float64 (docs/random.md): float64 within 2.2 ulps of the exact value, float32 the
// exact value correctly rounded. JAX's own values are up to ~80 ulps off in the tails.
Tensor normal(const Tensor& key, const Shape& shape, DType t = DType::Float32);
// true with probability p (jax.random.bernoulli): uniform float32 < p.
Tensor bernoulli(const Tensor& key, double p, const Shape& shape);
Tensor bernoulli(const Tensor& key, const Tensor& p);  // p: float probabilities, its shape
// Integers in [minval, maxval) (jax.random.randint, the same algorithm): int32 or int64.
Tensor randint(const Tensor& key, const Shape& shape, int64_t minval, int64_t maxval,
               DType t = DType::Int32);
// A random permutation of 0..n-1, int64 (jax.random.permutation(key, n): sorts by random bits,
// ceil(3 ln n / ln(2^32 - 1)) rounds).
Tensor permutation(const Tensor& key, int64_t n);
// x with each element zeroed with probability `rate` and the rest divided by 1 - rate
// (flax.linen.Dropout): rate in [0, 1); rate 0 returns x.
Tensor dropout(const Tensor& key, const Tensor& x, double rate);

}  // namespace nx::random
