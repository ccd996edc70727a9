// .npz: a zip archive of .npy members named "<key>.npy". Written with stored (uncompressed)
// members, as np.savez does, with zip64 records past 4 GiB or 65534 members; read with stored and
// deflated (np.savez_compressed) members through zlib, and zip64 records, as numpy writes them.
// Every offset, size and count of the archive is checked against the file before it is used; each
// member's CRC-32 is checked.
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/io_inflate.h"
#include "core/io_internal.h"

namespace nx::io {

namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}
uint32_t get16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t get32(const uint8_t* p) { return get16(p) | (get16(p + 2) << 16); }
uint64_t get64(const uint8_t* p) { return get32(p) | (uint64_t{get32(p + 4)} << 32); }

// Deflate expands at most 1032:1: a larger claimed size is a lie, refused before allocating.
constexpr uint64_t kMaxRatio = 1032;

}  // namespace

void save_npz(const char* api, const std::string& path, const TensorMap& tensors,
              uint64_t zip64_from) {
  // Headers first: a bfloat16 tensor raises before anything is written.
  std::vector<std::string> headers;
  for (const auto& [name, t] : tensors)
    headers.push_back(npy_header(api, path, "tensor '" + name + "'", t.dtype(), t.shape()));
  // A size or offset at or past zip64_from goes in a zip64 extra field (its 32-bit field holds
  // 0xffffffff), as Python's zipfile (numpy's writer) does past 4 GiB; so does the directory's.
  auto big = [zip64_from](uint64_t v) { return v >= zip64_from || v >= 0xffffffffu; };
  auto field32 = [&](uint64_t v) { return big(v) ? 0xffffffffu : static_cast<uint32_t>(v); };
  AtomicFile f(api, path);
  std::string central;
  size_t i = 0;
  for (const auto& [name, t] : tensors) {
    const std::string member = name + ".npy";
    if (member.size() > 0xffff) bad(api, path, "tensor name longer than 65530 bytes");
    std::vector<uint8_t> bytes = read_bytes(t, api);
    const std::string& h = headers[i++];
    const uint64_t size = h.size() + bytes.size();
    const uint64_t offset = f.written();
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(h.data()), static_cast<uInt>(h.size()));
    for (uint64_t k = 0; k < bytes.size(); k += 1u << 30)  // uInt counts: chunks under 4 GiB
      crc = crc32(crc, bytes.data() + k,
                  static_cast<uInt>(std::min<uint64_t>(bytes.size() - k, 1u << 30)));
    const uint32_t version = big(size) || big(offset) ? 45 : 20;  // 4.5: zip64
    std::string local;
    put32(local, 0x04034b50);
    put16(local, version);  // version needed
    put16(local, 0);        // flags
    put16(local, 0);        // stored
    put16(local, 0);        // time
    put16(local, 0x21);     // date: 1980-01-01
    put32(local, static_cast<uint32_t>(crc));
    put32(local, field32(size));
    put32(local, field32(size));
    put16(local, static_cast<uint32_t>(member.size()));
    put16(local, big(size) ? 20 : 0);
    local += member;
    if (big(size)) {  // the local header's zip64 field holds both sizes
      put16(local, 0x0001);
      put16(local, 16);
      put64(local, size);
      put64(local, size);
    }
    f.write(local.data(), local.size());
    f.write(h.data(), h.size());
    f.write(bytes.data(), bytes.size());
    // The central entry's zip64 field holds only what did not fit, in this order.
    std::string extra;
    if (big(size)) {
      put64(extra, size);
      put64(extra, size);
    }
    if (big(offset)) put64(extra, offset);
    put32(central, 0x02014b50);
    put16(central, version);  // made by
    put16(central, version);  // needed
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, static_cast<uint32_t>(crc));
    put32(central, field32(size));
    put32(central, field32(size));
    put16(central, static_cast<uint32_t>(member.size()));
    put16(central, extra.empty() ? 0 : static_cast<uint32_t>(4 + extra.size()));
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, field32(offset));
    central += member;
    if (!extra.empty()) {
      put16(central, 0x0001);
      put16(central, static_cast<uint32_t>(extra.size()));
      central += extra;
    }
  }
  const uint64_t cd_offset = f.written(), cd_size = central.size(), count = tensors.size();
  std::string end;
  if (count >= 0xffff || big(cd_offset) || big(cd_size)) {
    // The zip64 end of central directory record, then its locator, then the classic record
    // with its fields saturated.
    const uint64_t record = cd_offset + cd_size;
    put32(end, 0x06064b50);
    put64(end, 44);  // the record's size after this field
    put16(end, 45);
    put16(end, 45);
    put32(end, 0);  // this disk
    put32(end, 0);  // the directory's disk
    put64(end, count);
    put64(end, count);
    put64(end, cd_size);
    put64(end, cd_offset);
    put32(end, 0x07064b50);
    put32(end, 0);
    put64(end, record);
    put32(end, 1);  // disks
  }
  put32(end, 0x06054b50);
  put16(end, 0);
  put16(end, 0);
  const uint32_t count16 = count >= 0xffff ? 0xffff : static_cast<uint32_t>(count);
  put16(end, count16);
  put16(end, count16);
  put32(end, big(cd_offset) || big(cd_size) || count >= 0xffff ? 0xffffffffu
                                                               : static_cast<uint32_t>(cd_size));
  put32(end, big(cd_offset) || big(cd_size) || count >= 0xffff ? 0xffffffffu
                                                               : static_cast<uint32_t>(cd_offset));
  put16(end, 0);
  f.write(central.data(), central.size());
  f.write(end.data(), end.size());
  f.commit();
}

TensorMap load_npz(const char* api, const std::string& path, std::optional<Device> device) {
  FileBytes m(api, path);
  const uint8_t* p = m.data();
  const uint64_t size = m.size();
  // The end of central directory record: 22 bytes and a comment of up to 65535 bytes.
  if (size < 22)
    bad(api, path, "has " + std::to_string(size) + " bytes, too few for a zip archive");
  uint64_t eocd = UINT64_MAX;
  for (uint64_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 0xffff;) {
    if (get32(p + at) == 0x06054b50 && at + 22 + get16(p + at + 20) == size) {
      eocd = at;
      break;
    }
  }
  if (eocd == UINT64_MAX)
    bad(api, path, "is not a zip archive (no end of central directory record)");
  uint64_t count = get16(p + eocd + 10);
  uint64_t cd_size = get32(p + eocd + 12);
  uint64_t cd_offset = get32(p + eocd + 16);
  if (get16(p + eocd + 4) != 0 || get16(p + eocd + 6) != 0)
    bad(api, path, "is a multi-disk zip archive");
  if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    // zip64: the locator just before the record points at the zip64 end record.
    if (eocd < 20 || get32(p + eocd - 20) != 0x07064b50)
      bad(api, path, "zip64 archive without a zip64 end of central directory locator");
    uint64_t z = get64(p + eocd - 20 + 8);
    if (z > eocd - 20 || eocd - 20 - z < 56 || get32(p + z) != 0x06064b50)
      bad(api, path,
          "zip64 end of central directory record at " + size_text(z) +
              " is outside the archive or malformed");
    count = get64(p + z + 32);
    cd_size = get64(p + z + 40);
    cd_offset = get64(p + z + 48);
  }
  if (cd_offset > eocd || cd_size > eocd - cd_offset)
    bad(api, path,
        "central directory [" + size_text(cd_offset) + ", +" + size_text(cd_size) +
            ") is outside the archive (" + std::to_string(size) + " bytes)");
  if (count > cd_size / 46)
    bad(api, path,
        "central directory claims " + size_text(count) + " entries in " + std::to_string(cd_size) +
            " bytes");
  // Every member is found and checked first, so a directory whose entries share bytes is refused
  // before anything is inflated or allocated for it.
  struct Member {
    std::string name;
    uint32_t method, crc;
    uint64_t csize, usize, local, start;
  };
  std::vector<Member> members;
  uint64_t at = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t e = 0; e < count; ++e) {
    if (cd_end - at < 46 || get32(p + at) != 0x02014b50)
      bad(api, path,
          "central directory entry " + std::to_string(e) + " at byte " + std::to_string(at) +
              " is malformed");
    const uint8_t* c = p + at;
    uint32_t flags = get16(c + 8), method = get16(c + 10), crc = get32(c + 16);
    uint64_t csize = get32(c + 20), usize = get32(c + 24), local = get32(c + 42);
    uint64_t nlen = get16(c + 28), xlen = get16(c + 30), klen = get16(c + 32);
    if (cd_end - at - 46 < nlen + xlen + klen)
      bad(api, path, "central directory entry " + std::to_string(e) + " runs past the directory");
    std::string name(reinterpret_cast<const char*>(c + 46), nlen);
    const std::string what = "member '" + name + "'";
    // zip64 extra field: the sizes and offset that did not fit, in this order.
    for (uint64_t x = 0; x + 4 <= xlen;) {
      const uint8_t* f = c + 46 + nlen + x;
      uint32_t id = get16(f), len = get16(f + 2);
      if (x + 4 + len > xlen) bad(api, path, what + " has a malformed extra field");
      if (id == 0x0001) {
        uint32_t k = 0;
        auto next = [&](uint64_t& v) {
          if (v != 0xffffffffu) return;
          if (k + 8 > len) bad(api, path, what + " has a short zip64 extra field");
          v = get64(f + 4 + k);
          k += 8;
        };
        next(usize);
        next(csize);
        next(local);
      }
      x += 4 + len;
    }
    at += 46 + nlen + xlen + klen;
    if (flags & 1) bad(api, path, what + " is encrypted");
    if (method != 0 && method != 8)
      bad(api, path,
          what + " uses compression method " + std::to_string(method) +
              " (rune reads stored and deflated members)");
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      bad(api, path, what + " is not a .npy file");
    if (local > size || size - local < 30 || get32(p + local) != 0x04034b50)
      bad(api, path,
          what + " has its local header at " + size_text(local) +
              ", outside the archive or malformed");
    uint64_t start = local + 30 + get16(p + local + 26) + get16(p + local + 28);
    if (start > size || csize > size - start)
      bad(api, path,
          what + " claims " + size_text(csize) + " bytes at " + std::to_string(start) +
              ", file has " + std::to_string(size));
    if (method == 0 && usize != csize)
      bad(api, path,
          what + " is stored but claims " + size_text(usize) + " bytes uncompressed and " +
              size_text(csize) + " stored");
    if (method == 8 && usize > csize * kMaxRatio + 1024)
      bad(api, path,
          what + " claims " + size_text(usize) + " bytes inflated from " + std::to_string(csize) +
              ", more than deflate can produce");
    members.push_back({name, method, crc, csize, usize, local, start});
  }
  // Each member's bytes (local header to the end of its data) are its own and lie before the
  // central directory, as Python's zipfile requires: entries that share bytes would let a small
  // file load as many times its size (1,500 entries naming one 1 MiB member: 1.5 GB from 1.1 MB).
  // So what the archive makes rune allocate is bounded by what it holds: stored members by the
  // file's size, deflated ones by their inflated sizes, each checked against what zlib produces.
  std::vector<const Member*> by_offset;
  for (const auto& mb : members) by_offset.push_back(&mb);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const Member* x, const Member* y) { return x->local < y->local; });
  const Member* prev = nullptr;
  for (const Member* mb : by_offset) {
    const uint64_t end = mb->start + mb->csize;
    if (prev && mb->local < prev->start + prev->csize)
      bad(api, path,
          "member '" + mb->name + "' at bytes [" + std::to_string(mb->local) + ", " +
              std::to_string(end) + ") overlaps member '" + prev->name + "' at bytes [" +
              std::to_string(prev->local) + ", " + std::to_string(prev->start + prev->csize) +
              ") (each member's bytes must be its own)");
    if (end > cd_offset)
      bad(api, path,
          "member '" + mb->name + "' at bytes [" + std::to_string(mb->local) + ", " +
              std::to_string(end) + ") runs into the central directory at byte " +
              std::to_string(cd_offset));
    prev = mb;
  }
  TensorMap out;
  for (const Member& mb : members) {
    const std::string& name = mb.name;
    const std::string what = "member '" + name + "'";
    const uint32_t method = mb.method, crc = mb.crc;
    const uint64_t csize = mb.csize, usize = mb.usize;
    const uint8_t* data = p + mb.start;
    std::vector<uint8_t> inflated;
    if (method == 8) {
      // The buffer grows with what zlib actually produces, never to the claim up front; one
      // byte more than claimed is room to see a stream that goes on past its claim.
      const uint64_t cap = usize + 1;
      io::Inflated z = io::inflate_bounded(api, path, data, csize, -MAX_WBITS,
                                           std::min<uint64_t>(cap, csize * 4 + 4096),
                                           [cap](const uint8_t*, uint64_t) { return cap; });
      const uint64_t got = z.bytes.size();
      if (z.end != io::InflateEnd::StreamEnd || got != usize) {
        std::string why =
            z.end == io::InflateEnd::StreamEnd    ? "stream ended at " + std::to_string(got)
            : z.end == io::InflateEnd::CapReached ? "more than " + std::to_string(usize) + " bytes"
            : z.end == io::InflateEnd::InputEnded
                ? "truncated after " + std::to_string(got) + " bytes"
                : z.zlib_message;
        bad(api, path,
            what + " does not inflate to its claimed " + std::to_string(usize) +
                " bytes (zlib: " + why + ")");
      }
      inflated = std::move(z.bytes);
      data = inflated.data();
    }
    uLong got = crc32(0L, Z_NULL, 0);
    for (uint64_t k = 0; k < usize; k += 1u << 30)
      got = crc32(got, data + k, static_cast<uInt>(std::min<uint64_t>(usize - k, 1u << 30)));
    if (got != crc) bad(api, path, what + " fails its CRC-32 check (the archive is corrupt)");
    std::string key = name.substr(0, name.size() - 4);
    if (out.count(key)) bad(api, path, "holds two members named '" + name + "'");
    out.emplace(key, npy_parse(api, path, what, data, usize, device));
  }
  return out;
}

}  // namespace nx::io
