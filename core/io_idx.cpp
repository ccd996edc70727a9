// nx::load_idx (core/io.h): IDX files, plain or gzip-compressed. The format: two zero bytes, a
// dtype code, the number of dimensions n, then n big-endian 32-bit extents, then the elements in
// C order, big-endian. The whole file is read first (io::FileBytes); a gzip stream is inflated
// into a buffer that grows only as inflated bytes arrive and never past the size the header
// claims plus one byte (to detect data beyond it), so a hostile header cannot make the reader
// allocate more than the file holds.
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "core/io.h"
#include "core/io_inflate.h"
#include "core/io_internal.h"

namespace nx {
namespace {

constexpr const char* kApi = "nx::load_idx";

std::optional<DType> idx_dtype(uint8_t code) {
  switch (code) {
    case 0x08:
      return DType::UInt8;
    case 0x09:
      return DType::Int8;
    case 0x0B:
      return DType::Int16;
    case 0x0C:
      return DType::Int32;
    case 0x0D:
      return DType::Float32;
    case 0x0E:
      return DType::Float64;
    default:
      return std::nullopt;
  }
}

std::string hex(uint8_t b) {
  const char* d = "0123456789abcdef";
  return std::string("0x") + d[b >> 4] + d[b & 15];
}

// The dtype, shape and header length of the IDX image `p` of `n` bytes (n may be a prefix of the
// image: only the header is read), or nullopt when fewer than the header's bytes are there.
struct Header {
  DType t;
  Shape shape;
  size_t bytes;
  uint64_t data;  // the elements' bytes
};
std::optional<Header> parse_header(const std::string& path, const uint8_t* p, size_t n) {
  if (n < 4) return std::nullopt;
  if (p[0] != 0 || p[1] != 0)
    io::bad(kApi, path,
            "not an IDX file: the magic starts with " + hex(p[0]) + " " + hex(p[1]) +
                ", not 0x00 0x00");
  auto t = idx_dtype(p[2]);
  if (!t)
    io::bad(kApi, path,
            "IDX dtype code " + hex(p[2]) +
                " is not one of 0x08 (uint8), 0x09 (int8), 0x0b (int16), 0x0c (int32), 0x0d "
                "(float32), 0x0e (float64)");
  const size_t nd = p[3];
  const size_t bytes = 4 + 4 * nd;
  if (n < bytes) return std::nullopt;
  Shape shape;
  for (size_t i = 0; i < nd; ++i) {
    const uint8_t* q = p + 4 + 4 * i;
    const uint32_t e =
        (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3];
    if (e > 0x7fffffffu)
      io::bad(kApi, path,
              "extent " + std::to_string(i) + " is " + std::to_string(e) +
                  ", above 2^31 - 1 (the format's signed 32-bit extents)");
    shape.push_back(e);
  }
  const uint64_t data = io::checked_bytes(kApi, path, "the IDX tensor", *t, shape);
  return Header{*t, shape, bytes, data};
}

// exact: `have` is the file's length (a gzip stream's inflated length stops one byte past).
void check_length(const std::string& path, const Header& h, uint64_t have, bool exact) {
  const uint64_t want = h.bytes + h.data;
  if (have != want)
    io::bad(kApi, path,
            std::string(have < want ? "truncated: " : "longer than its header says: ") +
                "the header's " + std::string(ir::name(h.t)) + " " + ir::to_string(h.shape) +
                " needs " + std::to_string(want) + " bytes with the header, the file holds " +
                (exact || have < want ? std::to_string(have) : "more"));
}

// The inflated image of the gzip stream p[0, n): first the header, then at most the bytes it
// claims plus one (room to see a stream that goes on past its claim; check_length words that).
std::vector<uint8_t> inflate_gzip(const std::string& path, const uint8_t* p, size_t n) {
  constexpr uint64_t kLargestHeader = 4 + 4 * 255;
  io::Inflated z =
      io::inflate_bounded(kApi, path, p, n, 16 + MAX_WBITS, kLargestHeader,
                          [&](const uint8_t* out, uint64_t produced) -> uint64_t {
                            if (auto h = parse_header(path, out, static_cast<size_t>(produced)))
                              return h->bytes + h->data + 1;
                            return kLargestHeader;  // until the header is known: its largest size
                          });
  if (z.end == io::InflateEnd::InputEnded)
    io::bad(kApi, path,
            "truncated gzip stream (after " + std::to_string(z.bytes.size()) + " bytes)");
  if (z.end == io::InflateEnd::Corrupt)
    io::bad(kApi, path, "corrupt gzip stream: " + z.zlib_message);
  return std::move(z.bytes);
}

}  // namespace

Tensor load_idx(const std::string& path, std::optional<Device> device) {
  io::FileBytes file(kApi, path);
  const uint8_t* p = file.data();
  size_t n = file.size();
  std::vector<uint8_t> inflated;
  bool exact = true;
  if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
    inflated = inflate_gzip(path, p, n);
    p = inflated.data();
    n = inflated.size();
    exact = false;
  }
  auto h = parse_header(path, p, n);
  if (!h)
    io::bad(kApi, path, "truncated: " + std::to_string(n) + " bytes hold no complete IDX header");
  check_length(path, *h, n, exact);
  const bool swap = std::endian::native == std::endian::little;
  return io::make_tensor(kApi, path, "the IDX tensor", h->t, h->shape, p + h->bytes, swap, false,
                         device);
}

}  // namespace nx
