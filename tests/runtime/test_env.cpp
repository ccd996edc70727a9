// The environment variables of docs/env.md that change what a process does, each in child
// processes (they are read once per process): RUNE_DISK_CACHE=0, DEBUG=1's report of corrupt
// cache entries, concurrent processes sharing one cache directory, RUNE_NUM_THREADS, and the one
// rule for a bad value (it raises std::invalid_argument where it is read, naming the variable,
// the value and what it expected).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#ifndef RUNE_ENV_PROBE
#error "RUNE_ENV_PROBE must name the env_probe executable"
#endif

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
  long compiled = -1, disk = -1;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A started probe: its stdout is a pipe, its stderr a file read when it has finished.
struct Child {
  FILE* pipe = nullptr;
  fs::path err;
};

// RUNE_KERNEL_TIERS=0 unless `env` sets it: every kernel at the full tier at once, one cache
// entry each, written by the probe itself (tiered, a background thread writes them).
// RUNE_PREBUILT_KERNELS=0 likewise: every kernel compiled or read from the test's directory.
Child start(const std::string& env, const std::string& mode, const fs::path& err) {
  std::string cmd =
      "env -u DEBUG -u RUNE_DISK_CACHE -u RUNE_NUM_THREADS -u RUNE_DEFAULT_DEVICE "
      "RUNE_KERNEL_TIERS=0 RUNE_PREBUILT_KERNELS=0 " +
      env + " '" RUNE_ENV_PROBE "' " + mode + " 2>'" + err.string() + "'";
  return {popen(cmd.c_str(), "r"), err};
}

Result finish(Child c) {
  Result r;
  if (!c.pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, c.pipe)) > 0) r.out.append(buf, n);
  int st = pclose(c.pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(c.err);
  std::smatch m;
  if (std::regex_search(r.out, m, std::regex("compiled=(\\d+) disk=(\\d+)\\n$"))) {
    r.compiled = std::stol(m[1]);
    r.disk = std::stol(m[2]);
  }
  return r;
}

class Env : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rune-env-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    cache_ = root_ / "cache";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // The probe with RUNE_CACHE_DIR=cache_ and `env`; checks that it succeeded.
  Result run(const std::string& env, const std::string& mode = "ops") {
    Result r = finish(start("RUNE_CACHE_DIR='" + cache_.string() + "' " + env, mode, next_err()));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    return r;
  }
  fs::path next_err() { return root_ / ("stderr" + std::to_string(serial_++)); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> v;
    if (fs::exists(cache_))
      for (const auto& e : fs::directory_iterator(cache_))
        if (e.is_regular_file()) v.push_back(e.path());
    return v;
  }
  fs::path root_, cache_;
  int serial_ = 0;
};

// What `env_probe ops` prints before its statistics (the same with or without a cache).
std::string results(const Result& r) { return r.out.substr(0, r.out.rfind("compiled=")); }

TEST_F(Env, DiskCacheZeroNeitherWritesNorReads) {
  Result off1 = run("RUNE_DISK_CACHE=0");
  EXPECT_GT(off1.compiled, 0);
  EXPECT_EQ(off1.disk, 0);
  EXPECT_TRUE(entries().empty()) << entries().size() << " files written with RUNE_DISK_CACHE=0";
  Result off2 = run("RUNE_DISK_CACHE=0");
  EXPECT_EQ(off2.compiled, off1.compiled);
  EXPECT_EQ(off2.disk, 0);
  // The same directory with the cache on: filled, then served.
  Result on1 = run("RUNE_DISK_CACHE=1");
  EXPECT_EQ(on1.compiled, off1.compiled);
  EXPECT_FALSE(entries().empty());
  Result on2 = run("");
  EXPECT_EQ(on2.compiled, 0);
  EXPECT_EQ(on2.disk, off1.compiled);
  // Off again: the filled directory is not read either.
  Result off3 = run("RUNE_DISK_CACHE=0");
  EXPECT_EQ(off3.compiled, off1.compiled);
  EXPECT_EQ(off3.disk, 0);
  EXPECT_EQ(results(off1), results(on2));
  EXPECT_EQ(results(off3), results(on2));
}

TEST_F(Env, DebugOneReportsACorruptEntryAndItIsRebuilt) {
  Result fill = run("");
  auto objs = entries();
  ASSERT_FALSE(objs.empty());
  // One entry's last payload byte flipped: its checksum no longer matches.
  const fs::path victim = objs[objs.size() / 2];
  std::string bytes = slurp(victim);
  ASSERT_FALSE(bytes.empty());
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
  Result quiet = run("DEBUG=0");  // no report without DEBUG, and the entry is rebuilt
  EXPECT_EQ(quiet.err.find("corrupt"), std::string::npos) << quiet.err;
  EXPECT_EQ(quiet.compiled, 1);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
  Result loud = run("DEBUG=1");
  const std::string line = "rune: cache entry " + victim.string() + " is corrupt; rebuilding\n";
  EXPECT_NE(loud.err.find(line), std::string::npos) << loud.err;
  EXPECT_EQ(loud.err.find("corrupt"), loud.err.rfind("corrupt")) << "one report only:\n"
                                                                 << loud.err;
  EXPECT_EQ(loud.compiled, 1);
  EXPECT_EQ(loud.disk, fill.compiled - 1);
  EXPECT_EQ(results(loud), results(fill));
  // Rebuilt: the next process reads every entry, and reports nothing.
  Result healed = run("DEBUG=1");
  EXPECT_EQ(healed.err.find("corrupt"), std::string::npos) << healed.err;
  EXPECT_EQ(healed.compiled, 0);
  EXPECT_EQ(healed.disk, fill.compiled);
}

TEST_F(Env, ConcurrentProcessesNeverSeeATornEntry) {
  // Rounds of processes started together on an empty directory: they compile the same kernels,
  // write the same entries and read each other's as they appear. A torn entry would fail its
  // checksum, which DEBUG=1 reports.
  Result reference = run("RUNE_DISK_CACHE=0");
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    fs::remove_all(cache_);
    std::vector<Child> children;
    for (int i = 0; i < 8; ++i)
      children.push_back(
          start("DEBUG=1 RUNE_CACHE_DIR='" + cache_.string() + "'", "ops", next_err()));
    long from_disk = 0;
    for (auto& c : children) {
      Result r = finish(c);
      EXPECT_EQ(r.status, 0) << r.out << r.err;
      EXPECT_EQ(results(r), results(reference));
      EXPECT_EQ(r.err.find("corrupt"), std::string::npos) << r.err;
      EXPECT_EQ(r.compiled + r.disk, reference.compiled);
      from_disk += r.disk;
    }
    RecordProperty("from_disk_round_" + std::to_string(round), std::to_string(from_disk));
    // Nothing half-written is left, and every entry is whole.
    // (.target: the host's target id, codegen/cpu/host_target.h.)
    for (const auto& p : entries())
      EXPECT_TRUE(p.extension() == ".obj" || p.extension() == ".target") << "left behind: " << p;
    Result after = run("DEBUG=1");
    EXPECT_EQ(after.err.find("corrupt"), std::string::npos) << after.err;
    EXPECT_EQ(after.compiled, 0);
  }
}

TEST_F(Env, NumThreadsSetsTheHostPool) {
  std::regex line("threads=(\\d+) used=(\\d+) sum=([0-9a-f]{8})\\n");
  auto probe = [&](const std::string& env) {
    Result r = run(env, "threads");
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, line)) << r.out;
    if (m.empty()) return std::make_tuple(-1, -1, std::string());
    return std::make_tuple(std::stoi(m[1]), std::stoi(m[2]), std::string(m[3]));
  };
  auto [t1, u1, s1] = probe("RUNE_NUM_THREADS=1");
  EXPECT_EQ(t1, 1);
  EXPECT_EQ(u1, 1);
  auto [t3, u3, s3] = probe("RUNE_NUM_THREADS=3");
  EXPECT_EQ(t3, 3);
  EXPECT_GE(u3, 2);  // the caller and at least one worker took chunks
  EXPECT_LE(u3, 3);
  // Unset: every core.
  auto [td, ud, sd] = probe("");
  EXPECT_EQ(td, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_LE(ud, td);
  // The reduction order depends on the shape alone (docs/numerics.md): the same bits.
  EXPECT_EQ(s1, s3);
  EXPECT_EQ(s1, sd);
  // Empty is unset.
  auto [te, ue, se] = probe("RUNE_NUM_THREADS=");
  EXPECT_EQ(te, td);
  EXPECT_EQ(se, s1);
}

// Each variable a probe reads at start-up, set to a value it does not take: the probe fails with
// std::invalid_argument's message naming the variable, the value and what it expected. Before,
// RUNE_NUM_THREADS=two meant every core, an unparsable RUNE_PLAN was ignored, RUNE_GEMM_ISA=avx9
// was the CPU's widest, DEBUG=loud was 0 and RUNE_JIT_CACHE_SIZE=0 was 1.
TEST_F(Env, ABadValueRaisesNamingTheVariableAndWhatItExpected) {
  struct Case {
    std::string env, mode, message;
  };
  const std::vector<Case> cases = {
      {"RUNE_NUM_THREADS=two", "threads",
       "RUNE_NUM_THREADS=\"two\" is not a whole number (expected an integer in [1, 4096]; unset "
       "means every core)"},
      {"RUNE_NUM_THREADS=100000", "threads",
       "RUNE_NUM_THREADS=\"100000\" is out of range (expected an integer in [1, 4096]; unset "
       "means every core)"},
      {"DEBUG=loud", "ops",
       "DEBUG=\"loud\" is not a whole number (expected an integer in [0, 5]; unset means 0)"},
      {"RUNE_DISK_CACHE=no", "ops",
       "RUNE_DISK_CACHE=\"no\" is not a whole number (expected 0 or 1; unset means 1)"},
      {"RUNE_JIT_CACHE_SIZE=0", "ops",
       "RUNE_JIT_CACHE_SIZE=\"0\" is out of range (expected a positive integer; unset means "
       "4096)"},
      {"RUNE_EAGER_CACHE_SIZE=many", "ops",
       "RUNE_EAGER_CACHE_SIZE=\"many\" is not a whole number (expected a positive integer; unset "
       "means 1024)"},
      {"RUNE_ROW_KERNELS=off", "ops",
       "RUNE_ROW_KERNELS=\"off\" is not a whole number (expected 0 or 1; unset means 1)"},
      {"RUNE_PLAN='host lanes:sideways'", "ops",
       "RUNE_PLAN=\"host lanes:sideways\" is not a plan: "},
      {"RUNE_GEMM_ISA=avx9", "matmul",
       "RUNE_GEMM_ISA=\"avx9\" is not a micro-kernel cap (expected portable or avx2; unset means "
       "the CPU's widest)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.env);
    Result r = finish(start("RUNE_DISK_CACHE=0 " + c.env, c.mode, next_err()));
    EXPECT_EQ(r.status, 3) << r.out << r.err;
    EXPECT_NE(r.err.find("env_probe: invalid_argument: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  // The same probes with those variables empty (unset) or set to values they take succeed.
  run("RUNE_NUM_THREADS= DEBUG= RUNE_JIT_CACHE_SIZE=1 RUNE_ROW_KERNELS=0 RUNE_PLAN=", "ops");
  run("RUNE_GEMM_ISA=portable", "matmul");
  run("RUNE_GEMM_ISA=", "matmul");
}

}  // namespace
