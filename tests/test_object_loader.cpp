// rune's own object loader (codegen/cpu/object_loader.h, issue 42) against ORC: a kernel that
// exercises every relocation kind LLVM emits for rune's kernels (constant pools, a table of
// pointers, writable and zeroed data, a jump table, a call into the process, a GOT load of a
// process function's address) computes the same bits loaded either way, at both tiers; every
// x86-64 object in the shared kernel cache loads; corrupt objects are refused, never a crash.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/object_loader.h"
#include "codegen/cpu/orc_compiler.h"
#include "core/nx.h"

namespace {

using codegen::cpu::Tier;

// out[i] = f(in[i]) for i in [lo, hi) (bufs: out, in, scratch). The scratch gets n bytes of 7
// (a memset call) and then the address of memcpy (a GOT load); `scale` (.data) grows by one per
// call; `counts` (.bss) counts the items per i % 16.
const char* kIr = R"(
@table = internal constant [8 x float] [float 1.5, float -2.25, float 0.125, float 3.0, float -0.5, float 7.75, float 0.0625, float 2.5], align 16
@tables = internal constant [2 x ptr] [ptr @table, ptr @table], align 16
@scale = internal global float 3.0, align 4
@counts = internal global [16 x i32] zeroinitializer, align 16
declare ptr @memcpy(ptr, ptr, i64)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare float @llvm.fabs.f32(float)

define void @K(ptr %bufs, i64 %lo, i64 %hi) {
entry:
  %out = load ptr, ptr %bufs
  %inp = getelementptr ptr, ptr %bufs, i64 1
  %in = load ptr, ptr %inp
  %scrp = getelementptr ptr, ptr %bufs, i64 2
  %scr = load ptr, ptr %scrp
  %n = sub i64 %hi, %lo
  call void @llvm.memset.p0.i64(ptr %scr, i8 7, i64 %n, i1 false)
  %addr = ptrtoint ptr @memcpy to i64
  %addrp = getelementptr i8, ptr %scr, i64 %n
  store i64 %addr, ptr %addrp, align 1
  %s0 = load float, ptr @scale
  %s1 = fadd float %s0, 1.0
  store float %s1, ptr @scale
  %tp = getelementptr [2 x ptr], ptr @tables, i64 0, i64 1
  %t = load ptr, ptr %tp
  br label %loop
loop:
  %i = phi i64 [ %lo, %entry ], [ %next, %join ]
  %done = icmp sge i64 %i, %hi
  br i1 %done, label %exit, label %body
body:
  %k = and i64 %i, 7
  %tk = getelementptr float, ptr %t, i64 %k
  %tv = load float, ptr %tk
  %xp = getelementptr float, ptr %in, i64 %i
  %x = load float, ptr %xp
  %m = fmul float %x, %tv
  %a = fadd float %m, %s1
  %c = urem i64 %i, 6
  switch i64 %c, label %join [ i64 0, label %c0
                               i64 1, label %c1
                               i64 2, label %c2
                               i64 3, label %c3
                               i64 4, label %c4 ]
c0:
  %r0 = fadd float %a, 0.25
  br label %join
c1:
  %r1 = fmul float %a, 2.0
  br label %join
c2:
  %r2 = fsub float %a, 1.0
  br label %join
c3:
  %r3 = fdiv float %a, 3.0
  br label %join
c4:
  %r4 = call float @llvm.fabs.f32(float %a)
  br label %join
join:
  %r = phi float [ %a, %body ], [ %r0, %c0 ], [ %r1, %c1 ], [ %r2, %c2 ], [ %r3, %c3 ], [ %r4, %c4 ]
  %j = and i64 %i, 15
  %cp = getelementptr [16 x i32], ptr @counts, i64 0, i64 %j
  %cnt0 = load i32, ptr %cp
  %cnt = add i32 %cnt0, 1
  store i32 %cnt, ptr %cp
  %cf = sitofp i32 %cnt to float
  %y = fadd float %r, %cf
  %yp = getelementptr float, ptr %out, i64 %i
  store float %y, ptr %yp
  %next = add i64 %i, 1
  br label %loop
exit:
  ret void
}
)";

constexpr int64_t kN = 100;
using KernelFn = void (*)(char**, int64_t, int64_t);

struct Outputs {
  std::vector<float> out;
  std::vector<unsigned char> scratch;
};

// Two calls over [0, kN): the second sees the first's .data and .bss.
Outputs run(void* entry) {
  std::vector<float> in(kN), out(kN, -1.0f);
  for (int64_t i = 0; i < kN; ++i) in[i] = static_cast<float>(i - 37) * 0.37f;
  std::vector<unsigned char> scratch(kN + 8, 0);
  char* bufs[3] = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(in.data()),
                   reinterpret_cast<char*>(scratch.data())};
  Outputs r;
  for (int call = 0; call < 2; ++call) {
    reinterpret_cast<KernelFn>(entry)(bufs, 0, kN);
    r.out.insert(r.out.end(), out.begin(), out.end());
    r.scratch.insert(r.scratch.end(), scratch.begin(), scratch.end());
  }
  return r;
}

// The same computation in C++ (each operation rounded as the IR says: no contraction).
std::vector<float> reference() {
  const float table[8] = {1.5f, -2.25f, 0.125f, 3.0f, -0.5f, 7.75f, 0.0625f, 2.5f};
  int counts[16] = {};
  std::vector<float> all;
  float scale = 3.0f;
  for (int call = 0; call < 2; ++call) {
    scale = scale + 1.0f;
    for (int64_t i = 0; i < kN; ++i) {
      volatile float x = static_cast<float>(i - 37) * 0.37f;
      volatile float m = x * table[i & 7];
      volatile float a = m + scale;
      float r = a;
      switch (i % 6) {
        case 0:
          r = a + 0.25f;
          break;
        case 1:
          r = a * 2.0f;
          break;
        case 2:
          r = a - 1.0f;
          break;
        case 3:
          r = a / 3.0f;
          break;
        case 4:
          r = std::fabs(a);
          break;
        default:
          break;
      }
      const int c = ++counts[i & 15];
      all.push_back(r + static_cast<float>(c));
    }
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ObjectLoader : public ::testing::TestWithParam<Tier> {};

TEST_P(ObjectLoader, SameBitsAsOrcAndTheReference) {
  const std::string obj = codegen::cpu::compile_to_object(kIr, "loader_test", GetParam());
  std::string why;
  auto own = codegen::cpu::load_elf_object(obj, {"K"}, &why);
  ASSERT_TRUE(own.has_value()) << "declined: " << why;
  auto orc = codegen::cpu::load_object_with_orc(obj, {"K"});
  Outputs a = run(own->addresses[0]);
  Outputs b = run(orc.addresses[0]);
  EXPECT_TRUE(same_bits(a.out, b.out));
  EXPECT_TRUE(same_bits(a.out, reference()));
  EXPECT_EQ(a.scratch, b.scratch);
  // The scratch: n sevens, then memcpy's address as the process resolves it.
  const uint64_t memcpy_address = reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, "memcpy"));
  uint64_t stored = 0;
  std::memcpy(&stored, a.scratch.data() + kN, 8);
  EXPECT_EQ(stored, memcpy_address);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(a.scratch[i], 7) << i;
}

INSTANTIATE_TEST_SUITE_P(Tiers, ObjectLoader, ::testing::Values(Tier::Quick, Tier::Full),
                         [](const auto& info) {
                           return info.param == Tier::Quick ? "Quick" : "Full";
                         });

TEST(ObjectLoaderRefuses, MissingSymbolsAndOtherMachines) {
  const std::string obj = codegen::cpu::compile_to_object(kIr, "loader_test", Tier::Quick);
  std::string why;
  EXPECT_FALSE(codegen::cpu::load_elf_object(obj, {"K", "nope"}, &why).has_value());
  EXPECT_EQ(why, "no symbol nope");
  std::string other = obj;
  other[offsetof(Elf64_Ehdr, e_machine)] = static_cast<char>(EM_AARCH64);
  EXPECT_FALSE(codegen::cpu::load_elf_object(other, {"K"}, &why).has_value());
  EXPECT_EQ(why, "not an x86-64 relocatable object");
  EXPECT_FALSE(codegen::cpu::load_elf_object("", {"K"}, &why).has_value());
  EXPECT_FALSE(codegen::cpu::load_elf_object(obj.substr(0, 200), {"K"}, &why).has_value());
  // load_object falls back to ORC, which raises as before for a symbol the object lacks.
  EXPECT_THROW(codegen::cpu::load_object(obj, {"K", "nope"}), std::runtime_error);
}

// Random corruptions of a valid object: each is loaded (and released) or refused; nothing may
// read or write outside the file and the mapping (the ASan build checks).
TEST(ObjectLoaderRefuses, CorruptObjectsNeverCrash) {
  const std::string obj = codegen::cpu::compile_to_object(kIr, "loader_test", Tier::Full);
  std::mt19937 rng(42);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = obj;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bad.size();
      bad[at] = static_cast<char>(rng() % 3 == 0 ? 0xff : rng());
    }
    std::string why;
    auto l = codegen::cpu::load_elf_object(bad, {"K"}, &why);
    refused += !l;
  }
  EXPECT_GT(refused, 0);
}

// Every x86-64 object in the shared kernel cache (the suite's real kernels, both tiers) is one
// the loader handles: ORC is a fallback, not the path of any kernel rune compiles. Some nx ops
// run first so the cache is not empty.
TEST(ObjectLoaderCache, EveryCachedKernelLoads) {
  nx::Tensor x = nx::arange(nx::float32, 0, 24) * 0.5;
  nx::Tensor y = nx::sum(nx::exp(nx::reshape(x, {4, 6})), {1});
  ASSERT_EQ(y.shape()[0], 4);
  const char* dir = std::getenv("RUNE_CACHE_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "no RUNE_CACHE_DIR";
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".obj" || loaded >= 3000) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::string s(std::istreambuf_iterator<char>(f), {});
    if (s.size() < 32 + sizeof(Elf64_Ehdr)) continue;
    const std::string obj = s.substr(32);  // the cache's header (codegen/disk_cache.cpp)
    Elf64_Ehdr eh;
    std::memcpy(&eh, obj.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_machine != EM_X86_64) continue;
    std::string why;
    EXPECT_TRUE(codegen::cpu::load_elf_object(obj, {}, &why).has_value())
        << e.path() << ": " << why;
    ++loaded;
  }
  EXPECT_GT(loaded, 0);
  RecordProperty("objects_loaded", loaded);
}

}  // namespace
