// The bounded inflate loop (core/io_inflate.h).
#include "core/io_inflate.h"

#include <zlib.h>

#include <algorithm>

#include "core/io_internal.h"

namespace nx::io {

Inflated inflate_bounded(const char* api, const std::string& path, const uint8_t* p, uint64_t n,
                         int window_bits, uint64_t first_size,
                         const std::function<uint64_t(const uint8_t*, uint64_t)>& cap,
                         uint64_t chunk) {
  chunk = std::clamp<uint64_t>(chunk, 1, uint64_t{1} << 30);
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) bad(api, path, "zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  Inflated r;
  std::vector<uint8_t>& out = r.bytes;
  out.resize(static_cast<size_t>(std::min(first_size, cap(out.data(), 0))));
  uint64_t in_done = 0, out_done = 0;
  for (;;) {
    if (out_done == out.size()) {
      const uint64_t limit = cap(out.data(), out_done);
      if (out.size() >= limit) {
        r.end = InflateEnd::CapReached;
        break;
      }
      out.resize(
          static_cast<size_t>(std::min<uint64_t>(limit, std::max<uint64_t>(out.size(), 1) * 2)));
    }
    const uInt in_chunk = static_cast<uInt>(std::min(n - in_done, chunk));
    const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out.size() - out_done, chunk));
    zs.next_in = const_cast<Bytef*>(p + in_done);
    zs.avail_in = in_chunk;
    zs.next_out = out.data() + out_done;
    zs.avail_out = out_chunk;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    in_done += in_chunk - zs.avail_in;
    out_done += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) {
      r.end = InflateEnd::StreamEnd;
      break;
    }
    const bool progress = zs.avail_in != in_chunk || zs.avail_out != out_chunk;
    if (rc == Z_OK && progress) continue;
    if ((rc == Z_OK || rc == Z_BUF_ERROR) && in_done == n) {
      r.end = InflateEnd::InputEnded;
      break;
    }
    // Z_DATA_ERROR, Z_NEED_DICT, Z_MEM_ERROR, ... (or no progress with input and room left).
    r.end = InflateEnd::Corrupt;
    r.zlib_message = zs.msg ? zs.msg : "zlib error " + std::to_string(rc);
    break;
  }
  out.resize(static_cast<size_t>(out_done));  // shrinks only
  return r;
}

}  // namespace nx::io
