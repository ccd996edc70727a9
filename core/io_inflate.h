// One bounded inflate loop for the readers of compressed files (core/io_idx.cpp: gzip IDX files;
// core/io_zip.cpp: deflated .npz members). Internal; not part of the public API.
//
// Invariants: the output buffer grows only as zlib produces bytes (doubling), never to a size a
// file merely claims, and never past the cap the caller allows; input and output are handed to
// zlib in chunks of at most `chunk` bytes (zlib counts in 32-bit uInt), so streams longer than
// 4 GiB inflate whole instead of reading as truncated.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nx::io {

enum class InflateEnd {
  StreamEnd,   // the stream's end marker was reached
  CapReached,  // the output reached the cap and zlib had more to give
  InputEnded,  // every input byte was consumed before the stream's end (truncated)
  Corrupt,     // zlib refused the stream (zlib_message says why)
};

struct Inflated {
  std::vector<uint8_t> bytes;  // what zlib produced, at most the cap
  InflateEnd end = InflateEnd::StreamEnd;
  std::string zlib_message;  // for Corrupt
};

// Inflates p[0, n). `window_bits` is zlib's: 16 + MAX_WBITS for a gzip stream, -MAX_WBITS for raw
// deflate. `cap(out, produced)` returns the most output bytes allowed, given the bytes produced so
// far (a reader may raise the cap once a header among them is known); `first_size` is the
// buffer's first size. Raises "<api>: '<path>': zlib inflateInit2 failed" only when zlib cannot
// start; every other outcome is returned for the caller to word.
Inflated inflate_bounded(const char* api, const std::string& path, const uint8_t* p, uint64_t n,
                         int window_bits, uint64_t first_size,
                         const std::function<uint64_t(const uint8_t*, uint64_t)>& cap,
                         uint64_t chunk = uint64_t{1} << 30);

}  // namespace nx::io
