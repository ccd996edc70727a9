// Plans cannot change bits (codegen/plan.h): plan_probe computes a fixed set of kernels (row,
// column and whole reductions, several blocks, 16-bit, integer and bool sums, a matrix product as
// a reduction, elementwise kernels) under every plan forced with RUNE_PLAN, on the host and on the
// fake CUDA device, and every result must have the same bits as under the default plans. Each run
// also checks (DEBUG=3 prints every kernel's plan) that the forced plan was used.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#ifndef RUNE_PLAN_PROBE
#error "RUNE_PLAN_PROBE must name the plan_probe executable"
#endif

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

Run probe(const std::string& env) {
  // One file per test process: ctest runs the host and GPU cases at once.
  std::string err_file =
      std::string(::testing::TempDir()) + "plan_probe." + std::to_string(getpid()) + ".err";
  // Row kernels at 1, 7 and 1023 elements under every plan (plan_probe.cpp says why not 65537).
  std::string cmd = "env -u RUNE_PLAN -u DEBUG PLAN_PROBE_ROW_SIZES=1,7,1023 " + env +
                    " DEBUG=3 '" RUNE_PLAN_PROBE "' 2>'" + err_file + "'";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (FILE* e = std::fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf, 1, sizeof buf, e)) > 0) r.err.append(buf, n);
    std::fclose(e);
  }
  return r;
}

void expect_plans_agree(const std::string& device_env, const char* const* plans, size_t n) {
  Run base = probe(device_env);
  ASSERT_EQ(base.status, 0) << base.err.substr(0, 4000);
  ASSERT_NE(base.out.find("sum_blocks "), std::string::npos) << base.out;
  for (size_t i = 0; i < n; ++i) {
    Run r = probe(device_env + " RUNE_PLAN='" + plans[i] + "'");
    ASSERT_EQ(r.status, 0) << plans[i] << "\n" << r.err.substr(0, 4000);
    EXPECT_EQ(r.out, base.out) << "plan " << plans[i] << " changed bits";
    EXPECT_NE(r.err.find(std::string("plan: ") + plans[i]), std::string::npos)
        << "plan " << plans[i] << " was never used";
  }
}

TEST(Plans, HostPlansGiveTheSameBits) {
  // The default interleaves reduction blocks where there are enough (sum_many_blocks: blocks:4
  // on 2 threads); the plans without `blocks` reduce them one by one.
  const char* plans[] = {
      "host lanes:unrolled group:1",        "host lanes:vector group:16",
      "host lanes:unrolled group:16",       "host lanes:vector group:1",
      "host lanes:vector group:1 blocks:2", "host lanes:unrolled group:1 blocks:4",
      "host lanes:vector group:16 blocks:4"};
  expect_plans_agree("", plans, sizeof plans / sizeof *plans);
}

TEST(Plans, GpuPlansGiveTheSameBits) {
  // The fake driver's default is lanes as threads, rows of 16 or more as 8 threads (rows:lanes)
  // and vec4 where possible; each probe run compiles every kernel with the host compiler, so two
  // other plans cover the other choices: one thread per output and per row, and lanes as
  // threads with another unroll for every reduction and row kernel, rows of 1 and 7 included
  // (lanes without elements).
  const char* plans[] = {"gpu lanes:unrolled", "gpu lanes:threads/4 rows:lanes"};
  expect_plans_agree("RUNE_TEST_FAKE_CUDA=1 RUNE_DEFAULT_DEVICE=CUDA:0", plans,
                     sizeof plans / sizeof *plans);
}

}  // namespace
