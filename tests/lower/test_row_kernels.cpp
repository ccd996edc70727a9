// Row kernels cannot change bits (codegen/kernel.h): each stage of a row kernel keeps the
// association order of the reduction kernel it replaces. plan_probe computes softmax,
// log_softmax, logsumexp, layernorm and cross-entropy (and its gradient) under rune::jit over
// rows of 1, 7, 33, 1023 and 65537 elements (and 13 rows of 40), with and without row kernels
// (RUNE_ROW_KERNELS=0), on the host and on the fake CUDA device: every result must have the same
// bits. Each run also checks (DEBUG=3 prints the schedule and each kernel's plan) that row
// kernels were made, or not, and that the fake device ran rows of 16 or more as 8 threads each
// (plan rows:lanes), the host never.
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

Run probe(const std::string& env, const std::string& tag) {
  std::string err_file = std::string(::testing::TempDir()) + "row_probe." +
                         std::to_string(getpid()) + "." + tag + ".err";
  std::string cmd = "env -u RUNE_PLAN -u DEBUG -u RUNE_ROW_KERNELS " + env + " DEBUG=3 '" +
                    RUNE_PLAN_PROBE + "' 2>'" + err_file + "'";
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
  std::remove(err_file.c_str());
  return r;
}

void expect_same_bits_without_rows(const std::string& device_env, bool gpu) {
  Run rows = probe(device_env, "rows");
  ASSERT_EQ(rows.status, 0) << rows.err.substr(0, 4000);
  ASSERT_NE(rows.out.find("row_cross_entropy_grad_65537 "), std::string::npos) << rows.out;
  ASSERT_NE(rows.out.find("row_layer_norm_13x40 "), std::string::npos) << rows.out;
  EXPECT_NE(rows.err.find("by ReduceMax then ReduceSum, writes rows"), std::string::npos)
      << "no softmax row kernel was made";
  EXPECT_NE(rows.err.find("rune: plan: "), std::string::npos);
  // The GPU's row plan (codegen/plan.h rows:lanes) for the rows of 16 or more: printed as
  // "rune: plan: gpu lanes:threads/<unroll> rows:lanes for row [5, 1] on ...".
  const bool lanes = rows.err.find(" rows:lanes for row [5, 1] ") != std::string::npos &&
                     rows.err.find(" rows:lanes for row [13, 1] ") != std::string::npos;
  EXPECT_EQ(lanes, gpu) << "row kernels " << (gpu ? "did not run" : "ran")
                        << " as 8 threads per row";
  Run apart = probe(device_env + " RUNE_ROW_KERNELS=0", "apart");
  ASSERT_EQ(apart.status, 0) << apart.err.substr(0, 4000);
  EXPECT_EQ(apart.err.find("schedule: kernel 0 of 1: row "), std::string::npos)
      << "RUNE_ROW_KERNELS=0 made a row kernel";
  EXPECT_EQ(apart.err.find(" then "), std::string::npos) << "RUNE_ROW_KERNELS=0 made a row kernel";
  EXPECT_EQ(apart.err.find("rows:lanes"), std::string::npos);
  // Line by line, so a mismatch names the result.
  size_t a = 0, b = 0;
  while (a < rows.out.size() && b < apart.out.size()) {
    size_t ea = rows.out.find('\n', a), eb = apart.out.find('\n', b);
    EXPECT_EQ(rows.out.substr(a, ea - a), apart.out.substr(b, eb - b));
    a = ea + 1, b = eb + 1;
  }
  EXPECT_EQ(rows.out, apart.out);
  // A donated input (written over in place where the kernels allow) gives the same bits.
  auto hash_of = [&](const std::string& name) {
    size_t at = rows.out.find("\n" + name + " ");
    return at == std::string::npos ? std::string("missing " + name)
                                   : rows.out.substr(at + name.size() + 2, 16);
  };
  for (const char* n : {"1", "7", "33", "1023", "65537"})
    for (const char* op : {"row_softmax", "row_layer_norm"}) {
      std::string plain = std::string(op) + "_" + n;
      std::string donated = std::string(op) + "_donated_" + n;
      EXPECT_EQ(hash_of(plain), hash_of(donated)) << donated;
    }
}

TEST(RowKernels, HostRowKernelsGiveTheBitsOfSeparateReductions) {
  expect_same_bits_without_rows("", false);
}

TEST(RowKernels, GpuRowKernelsGiveTheBitsOfSeparateReductions) {
  expect_same_bits_without_rows("RUNE_TEST_FAKE_CUDA=1 RUNE_DEFAULT_DEVICE=CUDA:0", true);
}

}  // namespace
