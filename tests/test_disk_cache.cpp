// The on-disk kernel cache, across processes: a fresh directory is filled by the first run and
// serves the second; corrupt, truncated or misplaced entries are misses that get rebuilt; an entry
// that is not a regular file (a FIFO) is a miss that cannot block; a write that fails (a file size
// limit) installs nothing; a warm process does not load LLVM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#ifndef RUNE_CACHE_PROBE
#error "RUNE_CACHE_PROBE must name the cache_probe executable"
#endif

namespace {

namespace fs = std::filesystem;

// What the probe prints before its statistics line.
const char* kExpectedOutput =
    "float32 [2, 3] [[3, 5, 7],\n"
    "                [9, 11, 13]]\n"
    "float32 [3] [5, 7, 9]\n"
    "int32 [3] [4, 5, 6]\n"
    "float32 [2, 3] [[-1, -2, -3],\n"
    "                [4, 5, 6]]\n";

struct ProbeRun {
  int status = -1;
  std::string output;
  long compiled = -1, disk = -1;
};

void parse_stats(ProbeRun& r) {
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("compiled=(\\d+) disk=(\\d+)\\n$"))) {
    r.compiled = std::stol(m[1]);
    r.disk = std::stol(m[2]);
  }
}

// Runs the probe against `dir`. `timeout 120`: a probe that blocks (as one did on a FIFO entry)
// fails the test instead of hanging it.
ProbeRun probe(const fs::path& dir, const std::string& args = "", const std::string& prebuilt = "0",
               const std::string& more_env = "") {
  // RUNE_KERNEL_TIERS=0: every kernel at the full tier at once, one entry each, so the counts
  // below are exact (tiered, a background thread writes the entries: tests/test_kernel_tiers).
  // RUNE_PREBUILT_KERNELS=0 unless asked: every kernel compiled or read from `dir`.
  std::string cmd =
      "timeout 120 env DEBUG=0 RUNE_KERNEL_TIERS=0 RUNE_PREBUILT_KERNELS=" + prebuilt +
      " RUNE_CACHE_DIR='" + dir.string() + "' RUNE_DISK_CACHE=1 " + more_env + " '" +
      RUNE_CACHE_PROBE + "' " + args + " 2>&1";
  ProbeRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  parse_stats(r);
  return r;
}

// The probe in a child whose files may not grow past `limit` bytes (RLIMIT_FSIZE, SIGXFSZ
// ignored so a write past it fails with EFBIG instead of killing the process): every cache write
// fails part-way, as on a full disk.
ProbeRun probe_with_file_size_limit(const fs::path& dir, rlim_t limit) {
  ProbeRun r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    struct rlimit rl = {limit, limit};
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(97);
    setenv("DEBUG", "0", 1);
    setenv("RUNE_CACHE_DIR", dir.c_str(), 1);
    setenv("RUNE_DISK_CACHE", "1", 1);
    setenv("RUNE_KERNEL_TIERS", "0", 1);
    setenv("RUNE_PREBUILT_KERNELS", "0", 1);
    alarm(120);  // a hang fails the test
    execl(RUNE_CACHE_PROBE, RUNE_CACHE_PROBE, static_cast<char*>(nullptr));
    _exit(98);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  parse_stats(r);
  return r;
}

// Every directory entry, whatever its kind.
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path());
  return v;
}

std::vector<fs::path> objects(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".obj") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

class DiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rune-cache-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Runs the probe and checks that it succeeded with the right results.
  ProbeRun run_ok() {
    ProbeRun r = probe(dir_);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.rfind(kExpectedOutput, 0), 0u) << r.output;
    EXPECT_GE(r.compiled, 0) << "no statistics line in:\n" << r.output;
    return r;
  }
  fs::path dir_;
};

TEST_F(DiskCache, FillsThenServesThenRebuildsCorruptEntries) {
  // 1. A fresh directory: everything compiles, and the entries are written.
  ProbeRun first = run_ok();
  EXPECT_GT(first.compiled, 0);
  EXPECT_EQ(first.disk, 0);
  auto objs = objects(dir_);
  ASSERT_EQ(static_cast<long>(objs.size()), first.compiled) << "one entry per compiled kernel";
  ASSERT_GE(objs.size(), 2u);

  // 2. Second process: everything comes from disk.
  ProbeRun second = run_ok();
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.disk, first.compiled);

  // 3. Two entries swapped: each is intact but belongs to another key, so both are misses.
  std::string a = slurp(objs[0]), b = slurp(objs[1]);
  write(objs[0], b);
  write(objs[1], a);
  ProbeRun swapped = run_ok();
  EXPECT_EQ(swapped.compiled, 2);
  EXPECT_EQ(swapped.disk, first.compiled - 2);

  // 4. Every entry overwritten with garbage (one keeps a valid-looking header with a bad
  //    checksum; one is truncated to 3 bytes): all are rebuilt.
  objs = objects(dir_);
  ASSERT_EQ(static_cast<long>(objs.size()), first.compiled);
  for (size_t i = 0; i < objs.size(); ++i) {
    std::string junk = slurp(objs[i]);
    for (char& c : junk) c = static_cast<char>(c ^ 0x5a);
    if (i == 0) junk = "abc";
    if (i == 1) junk.replace(0, 8, "RUNEOBJ1");
    write(objs[i], junk);
  }
  EXPECT_EQ(fs::file_size(objs[0]), 3u);
  ProbeRun corrupt = run_ok();
  EXPECT_EQ(corrupt.compiled, first.compiled);
  EXPECT_EQ(corrupt.disk, 0);

  // 5. The rebuilt entries are good again.
  ProbeRun healed = run_ok();
  EXPECT_EQ(healed.compiled, 0);
  EXPECT_EQ(healed.disk, first.compiled);
}

TEST_F(DiskCache, NonRegularEntriesAreMissesThatNeverBlock) {
  ProbeRun first = run_ok();
  auto objs = objects(dir_);
  ASSERT_EQ(static_cast<long>(objs.size()), first.compiled);
  ASSERT_GE(objs.size(), 2u);
  // Every entry replaced by a FIFO without a writer (opening one for reading without O_NONBLOCK
  // waits for a writer forever), one by a directory.
  for (size_t i = 0; i < objs.size(); ++i) {
    fs::remove(objs[i]);
    if (i == 0)
      fs::create_directory(objs[i]);
    else
      ASSERT_EQ(mkfifo(objs[i].c_str(), 0644), 0) << objs[i];
  }
  ProbeRun fifo = run_ok();
  EXPECT_EQ(fifo.compiled, first.compiled);
  EXPECT_EQ(fifo.disk, 0);
  // The rebuilt entries were renamed over the FIFOs (a rename cannot replace the directory,
  // which stays a miss), so the next run reads them.
  for (size_t i = 1; i < objs.size(); ++i) EXPECT_TRUE(fs::is_regular_file(objs[i])) << objs[i];
  EXPECT_TRUE(fs::is_directory(objs[0]));
  ProbeRun healed = run_ok();
  EXPECT_EQ(healed.compiled, 1);
  EXPECT_EQ(healed.disk, first.compiled - 1);
}

TEST_F(DiskCache, FailedWritesInstallNothing) {
  // Files may not grow past 40 bytes: the 32-byte header fits, no entry's payload does.
  ProbeRun limited = probe_with_file_size_limit(dir_, 40);
  EXPECT_EQ(limited.status, 0) << limited.output;
  EXPECT_EQ(limited.output.rfind(kExpectedOutput, 0), 0u) << limited.output;
  EXPECT_GT(limited.compiled, 0) << limited.output;
  EXPECT_EQ(limited.disk, 0);
  // Neither a truncated entry nor a leftover temporary file.
  for (const auto& e : entries(dir_)) ADD_FAILURE() << "left behind: " << e;
  // Without the limit the same run fills the cache in full, and the next is served from it.
  ProbeRun first = run_ok();
  EXPECT_EQ(first.compiled, limited.compiled);
  EXPECT_EQ(static_cast<long>(objects(dir_).size()), first.compiled);
  ProbeRun second = run_ok();
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.disk, first.compiled);
}

TEST_F(DiskCache, DisabledByEmptyDirectory) {
  std::string cmd = std::string("env DEBUG=0 RUNE_CACHE_DIR= '") + RUNE_CACHE_PROBE + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out.rfind(kExpectedOutput, 0), 0u) << out;
  EXPECT_NE(out.find(" disk=0\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("compiled=0 "), std::string::npos) << out;
}

// Issue 42: a process whose kernels all come from the disk cache loads them with rune's own
// object loader and never loads LLVM (the module librune_llvm.so, and so libLLVM, stays
// unmapped); the first process, which compiles, maps it. Same printed results.
TEST_F(DiskCache, AWarmProcessDoesNotLoadLLVM) {
  ProbeRun first = probe(dir_, "llvm-maps");
  ProbeRun second = probe(dir_, "llvm-maps");
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_GT(first.compiled, 0) << first.output;
  EXPECT_NE(first.output.find("libLLVM mapped: yes\n"), std::string::npos) << first.output;
  EXPECT_EQ(second.compiled, 0) << second.output;
  EXPECT_EQ(second.disk, first.compiled) << second.output;
  EXPECT_NE(second.output.find("libLLVM mapped: no\n"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.rfind(kExpectedOutput, 0), 0u) << second.output;
  auto values = [](const std::string& out) { return out.substr(0, out.rfind("libLLVM")); };
  EXPECT_EQ(values(second.output), values(first.output));
}

// The LLVM module is needed only to compile: with RUNE_LLVM_MODULE naming no file, a process
// that must compile fails with an error naming the module's path and dlopen's reason, and a
// process whose kernels are all in the disk cache runs as before.
TEST_F(DiskCache, AnUnloadableLLVMModuleFailsOnlyACompile) {
  auto run = [&](const fs::path& dir) {
    return probe(dir, "", "0", "RUNE_LLVM_MODULE=/nonexistent/librune_llvm.so");
  };
  ProbeRun cold = run(dir_ / "cold");
  EXPECT_NE(cold.status, 0) << cold.output;
  EXPECT_NE(cold.output.find("rune: the LLVM module /nonexistent/librune_llvm.so"),
            std::string::npos)
      << cold.output;
  EXPECT_NE(cold.output.find("dlopen"), std::string::npos) << cold.output;
  ProbeRun filled = probe(dir_ / "warm");  // the module found: compiles and fills the cache
  ASSERT_EQ(filled.status, 0) << filled.output;
  ProbeRun warm = run(dir_ / "warm");
  EXPECT_EQ(warm.status, 0) << warm.output;
  EXPECT_EQ(warm.output.rfind(kExpectedOutput, 0), 0u) << warm.output;
  EXPECT_EQ(warm.compiled, 0) << warm.output;
}

// The kernels built with rune (docs/packaging.md "Prebuilt kernels"): a fresh process with an
// empty cache runs a model's set-up of common eager ops without compiling any kernel, with the
// same printed results as when it compiles them all (RUNE_PREBUILT_KERNELS=0).
TEST_F(DiskCache, AFreshProcessRunsCommonEagerOpsWithoutCompiling) {
#ifndef RUNE_HAVE_PREBUILT_KERNELS
  GTEST_SKIP() << "built with -DRUNE_PREBUILT_KERNELS=OFF";
#else
  fs::path compiled_dir = dir_ / "compiled", prebuilt_dir = dir_ / "prebuilt";
  ProbeRun compiled = probe(compiled_dir, "common-eager", "0");
  ProbeRun prebuilt = probe(prebuilt_dir, "common-eager", "1");
  ASSERT_EQ(compiled.status, 0) << compiled.output;
  ASSERT_EQ(prebuilt.status, 0) << prebuilt.output;
  EXPECT_GT(compiled.compiled, 5) << compiled.output;
  EXPECT_EQ(prebuilt.compiled, 0) << prebuilt.output;
  EXPECT_EQ(prebuilt.disk, compiled.compiled) << prebuilt.output;
  auto values = [](const std::string& out) { return out.substr(0, out.rfind("compiled=")); };
  EXPECT_EQ(values(prebuilt.output), values(compiled.output));
  EXPECT_TRUE(objects(prebuilt_dir).empty()) << "prebuilt kernels are not copied to the cache";
#endif
}

}  // namespace
