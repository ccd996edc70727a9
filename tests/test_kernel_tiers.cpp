// Host kernel tiers (codegen/cpu/kernel_upgrades.h, docs/env.md RUNE_KERNEL_TIERS): the quick
// tier (a few cleanup passes, the fast instruction selector) and the full tier (O3) compile the
// same IR, whose operation order the lowering fixed, so every result has the same bits in both,
// and a kernel swapped from one to the other while its programs run keeps them. Each run is a
// child process (kernel_tiers_probe) without a disk cache, so every kernel is compiled in it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#ifndef RUNE_KERNEL_TIERS_PROBE
#error "RUNE_KERNEL_TIERS_PROBE must name the kernel_tiers_probe executable"
#endif

namespace {

struct ProbeRun {
  int status = -1;
  std::string hashes, output;
  long compiled = -1, upgraded = -1;
};

ProbeRun probe(const std::string& tiers, const std::string& arg = "", const std::string& env = "") {
  std::string cmd = "timeout 300 env DEBUG=0 RUNE_DISK_CACHE=0 RUNE_KERNEL_TIERS=" + tiers + " " +
                    env + " '" + RUNE_KERNEL_TIERS_PROBE + "' " + arg + " 2>&1";
  ProbeRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.status = pclose(p);
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("compiled=(\\d+) upgraded=(\\d+)\\n$"))) {
    r.compiled = std::stol(m[1]);
    r.upgraded = std::stol(m[2]);
    r.hashes = m.prefix();
  }
  return r;
}

TEST(KernelTiers, QuickAndFullTiersGiveTheSameBits) {
  ProbeRun full = probe("0"), quick = probe("2");
  ASSERT_EQ(full.status, 0) << full.output;
  ASSERT_EQ(quick.status, 0) << quick.output;
  ASSERT_GT(full.compiled, 20) << full.output;
  EXPECT_EQ(quick.compiled, full.compiled);
  EXPECT_EQ(full.upgraded, 0);
  EXPECT_EQ(quick.upgraded, 0);  // quick only: never upgraded
  EXPECT_EQ(quick.hashes, full.hashes) << "full tier:\n"
                                       << full.output << "quick tier:\n"
                                       << quick.output;
}

TEST(KernelTiers, UpgradesSwapInTheFullTierWithTheSameBits) {
  ProbeRun full = probe("0");
  ProbeRun tiered = probe("1", "swap");
  ASSERT_EQ(tiered.status, 0) << tiered.output;
  auto cut = tiered.hashes.find("--\n");
  ASSERT_NE(cut, std::string::npos) << tiered.output;
  // Before the swap (quick tier, or some kernels already upgraded) and after it: the same bits
  // as the full tier compiled at once.
  EXPECT_EQ(tiered.hashes.substr(0, cut), full.hashes);
  EXPECT_EQ(tiered.hashes.substr(cut + 3), full.hashes);
  // Every kernel compiled at the quick tier was upgraded (gemm epilogues start at the full tier).
  EXPECT_GT(tiered.upgraded, 20) << tiered.output;
  EXPECT_LE(tiered.upgraded, tiered.compiled);
}

// A short process leaves its quick tiers in the disk cache: the next run of it compiles nothing
// (the entries were dropped at exit when the background thread had not written them yet, so
// every run of a short program compiled all its kernels again).
TEST(KernelTiers, AShortProcessLeavesItsKernelsInTheDiskCache) {
  char tmpl[] = "/tmp/rune-tiers-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string env =
      std::string("RUNE_DISK_CACHE=1 RUNE_PREBUILT_KERNELS=0 RUNE_CACHE_DIR=") + tmpl;
  ProbeRun first = probe("1", "", env), second = probe("1", "", env);
  std::filesystem::remove_all(tmpl);
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_GT(first.compiled, 20) << first.output;
  EXPECT_EQ(second.compiled, 0) << second.output;
  EXPECT_EQ(second.hashes, first.hashes);
}

// A program's kernels compiled on several threads (HostBackend::precompile) are the kernels a
// serial compile makes: the same count and the same bits.
TEST(KernelTiers, ParallelAndSerialCompilesGiveTheSameKernels) {
  ProbeRun serial = probe("0", "", "RUNE_COMPILE_THREADS=1");
  ProbeRun parallel = probe("0", "", "RUNE_COMPILE_THREADS=3");
  ASSERT_EQ(serial.status, 0) << serial.output;
  ASSERT_EQ(parallel.status, 0) << parallel.output;
  EXPECT_EQ(parallel.compiled, serial.compiled);
  EXPECT_EQ(parallel.hashes, serial.hashes);
}

// The upgrade thread must stop before exit destroys any static object it may use (LLVM's), also
// when the first upgrade was queued by a thread other than the main one: a fresh-clone CI run
// crashed at exit this way (the first kernels came from CPU:1's stream thread).
TEST(KernelTiers, AProcessWhoseUpgradesCameFromAnotherThreadStopsThemFirstAtExit) {
  ProbeRun r = probe("1", "exit-from-thread");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_GT(r.compiled, 0) << r.output;
}

}  // namespace
