#include "codegen/cpu/host_target.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace codegen::cpu {

std::string host_fingerprint() {
#if defined(__x86_64__)
  std::string out = "rune-host-fingerprint-1";
  auto word = [&](uint32_t v) {
    char b[10];
    std::snprintf(b, sizeof b, " %08x", v);
    out += b;
  };
  unsigned a, b, c, d;
  auto leaf = [&](unsigned l, unsigned sub) {
    a = b = c = d = 0;
    __cpuid_count(l, sub, a, b, c, d);
  };
  leaf(0, 0);
  const unsigned max_leaf = a;
  word(a), word(b), word(c), word(d);
  leaf(1, 0);
  // ebx bits 31..24 are the initial APIC id of the core this runs on: masked, so every core
  // gives the same fingerprint (the rest of ebx: brand index, CLFLUSH size, logical count).
  word(a), word(b & 0x00ffffffu), word(c), word(d);
  const bool osxsave = (c >> 27) & 1;
  for (auto [l, sub] : {std::pair{7u, 0u}, std::pair{7u, 1u}, std::pair{0xdu, 1u},
                        std::pair{0x14u, 0u}, std::pair{0x19u, 0u}}) {
    if (l > max_leaf) {
      word(0), word(0), word(0), word(0);
      continue;
    }
    leaf(l, sub);
    // Leaf 0xd subleaf 1: eax holds the XSAVE features; ebx is a size that depends on what the
    // OS enabled (XCR0, hashed below) and on IA32_XSS.
    if (l == 0xd) b = 0;
    word(a), word(b), word(c), word(d);
  }
  leaf(0x80000000u, 0);
  const unsigned max_ext = a;
  word(a);
  for (unsigned l = 0x80000001u; l <= 0x80000008u; ++l) {
    if (l > max_ext || l == 0x80000005u || l == 0x80000006u || l == 0x80000007u) continue;
    leaf(l, 0);
    word(a), word(b), word(c), word(d);
  }
  if (osxsave) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    word(lo), word(hi);
  }
  out += " llvm " RUNE_LLVM_VERSION_STRING;
#ifdef RUNE_LLVM_LIBRARY_FILE
  struct stat st;
  if (::stat(RUNE_LLVM_LIBRARY_FILE, &st) == 0) {
    char s[96];
    std::snprintf(s, sizeof s, " %lld %lld %llu", static_cast<long long>(st.st_size),
                  static_cast<long long>(st.st_mtime), static_cast<unsigned long long>(st.st_ino));
    out += s;
  }
#endif
  return out;
#else
  return "";
#endif
}

}  // namespace codegen::cpu
