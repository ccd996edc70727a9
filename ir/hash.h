// The library's one non-cryptographic hash: 64-bit FNV-1a, over bytes (the disk cache's entry
// names and checksums: the same in every process and build) and over integers, one 64-bit word
// per step (in-memory keys: views, eager programs, rune::jit calls).
#pragma once
#include <cstdint>
#include <string_view>

namespace ir {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;  // the FNV-1a 64 offset basis
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a over `bytes`, starting from `seed` (another seed gives a second, independent hash).
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t seed = kFnvOffset) {
  uint64_t h = seed;
  for (unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

// Mixes one integer into h: an FNV-1a step over the whole 64-bit word (not its bytes).
constexpr uint64_t hash_combine(uint64_t h, int64_t v) {
  return (h ^ static_cast<uint64_t>(v)) * kFnvPrime;
}

// hash_combine over every integer of a range, in order, from `seed`.
template <class Range>
constexpr uint64_t hash_words(const Range& words, uint64_t seed = kFnvOffset) {
  uint64_t h = seed;
  for (auto w : words) h = hash_combine(h, static_cast<int64_t>(w));
  return h;
}

}  // namespace ir
