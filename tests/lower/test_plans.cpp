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
#include <vector>

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

// A forced plan and what DEBUG=3 must print for some kernel under it: a plan is printed with
// only the parts that apply to the kernel (codegen::applicable), so a plan combining parts of
// different kernel kinds shows as several lines.
struct Forced {
  const char* plan;
  std::vector<const char*> printed;
};

void expect_plans_agree(const std::string& device_env, const std::vector<Forced>& plans) {
  Run base = probe(device_env);
  ASSERT_EQ(base.status, 0) << base.err.substr(0, 4000);
  ASSERT_NE(base.out.find("sum_blocks "), std::string::npos) << base.out;
  for (const Forced& f : plans) {
    Run r = probe(device_env + " RUNE_PLAN='" + f.plan + "'");
    ASSERT_EQ(r.status, 0) << f.plan << "\n" << r.err.substr(0, 4000);
    EXPECT_EQ(r.out, base.out) << "plan " << f.plan << " changed bits";
    for (const char* line : f.printed)
      EXPECT_NE(r.err.find(std::string("plan: ") + line), std::string::npos)
          << "plan " << f.plan << " was never used as \"" << line << "\"";
  }
}

TEST(Plans, HostPlansGiveTheSameBits) {
  // The default interleaves reduction blocks where there are enough (sum_many_blocks: blocks:4
  // on 2 threads) and groups 16 outputs of a row sum ([1, 301]) and of a column sum over two
  // blocks ([1, 16]); the plans below force the other choices. Elementwise kernels have no host
  // plan parts: they print the default.
  expect_plans_agree(
      "", {{"host lanes:unrolled group:1",
            {"host lanes:unrolled group:1 for ReduceSum [1, 301]",
             "host lanes:unrolled group:1 for ReduceSum [1, 16]",
             "host lanes:unrolled group:1 for row", "host lanes:vector group:1 for elementwise"}},
           {"host lanes:vector group:16", {"host lanes:vector group:16 for ReduceSum [37]"}},
           {"host lanes:unrolled group:16",
            {"host lanes:unrolled group:16 for ReduceSum",
             "host lanes:unrolled group:16 for ReduceSum [1, 16]"}},
           {"host lanes:vector group:1", {"host lanes:vector group:1 for ReduceSum [1, 301]"}},
           {"host lanes:vector group:1 blocks:2", {"host lanes:vector group:1 blocks:2 for"}},
           {"host lanes:unrolled group:1 blocks:4",
            {"host lanes:unrolled group:1 blocks:4 for", "host lanes:unrolled group:1 for row"}},
           {"host lanes:vector group:16 blocks:4",
            {"host lanes:vector group:16 for", "host lanes:vector group:1 blocks:4 for"}}});
}

TEST(Plans, GpuPlansGiveTheSameBits) {
  // The fake driver's default is lanes as threads, rows of 16 or more as 8 threads (rows:lanes)
  // and vec4 where possible; each probe run compiles every kernel with the host compiler, so two
  // other plans cover the other choices: one thread per output and per row, and lanes as
  // threads with another unroll for every reduction and row kernel, rows of 1 and 7 included
  // (lanes without elements).
  expect_plans_agree(
      "RUNE_TEST_FAKE_CUDA=1 RUNE_DEFAULT_DEVICE=CUDA:0",
      {{"gpu lanes:unrolled",
        {"gpu lanes:unrolled for Reduce", "gpu lanes:unrolled for row [5, 1]"}},
       {"gpu lanes:threads/4 rows:lanes",
        {"gpu lanes:threads/4 for Reduce", "gpu lanes:threads/4 rows:lanes for row"}}});
}

}  // namespace
