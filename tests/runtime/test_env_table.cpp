// ir/env's table against docs/env.md: every variable the library reads is documented and every
// documented variable is read through the table, so neither can gain a variable alone; no
// library source (ir/, runtime/, codegen/, core/, trace/, distributed/) reads the environment but
// ir/env.cpp. Also the readers' rules (docs/env.md: read once; unset or empty is the default; any
// other value that is not one the variable takes raises, naming it and what it expected).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ir/env.h"

#ifndef RUNE_ENV_DOC
#error "RUNE_ENV_DOC (the path of docs/env.md) must be defined"
#endif

namespace {

using ir::env::Var;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The rows of docs/env.md's table: the first column of each is `NAME=...`; name -> the row.
std::map<std::string, std::string> documented() {
  std::map<std::string, std::string> rows;
  std::istringstream doc(read_file(RUNE_ENV_DOC));
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    size_t eq = line.find('=');
    size_t tick = line.find('`', 3);
    EXPECT_TRUE(eq != std::string::npos && eq < tick) << "docs/env.md: not `NAME=...`: " << line;
    if (eq == std::string::npos || eq > tick) continue;
    std::string name = line.substr(3, eq - 3);
    EXPECT_TRUE(rows.emplace(name, line).second) << "docs/env.md: " << name << " twice";
  }
  return rows;
}

}  // namespace

TEST(EnvTable, DocsListExactlyTheVariablesTheLibraryReads) {
  std::set<std::string> read;
  for (const auto& v : ir::env::table())
    EXPECT_TRUE(read.insert(v.name).second) << "ir/env.def: " << v.name << " twice";
  std::set<std::string> docs;
  for (const auto& [name, row] : documented()) docs.insert(name);
  ASSERT_FALSE(docs.empty()) << "no table found in " << RUNE_ENV_DOC;
  for (const auto& n : read) EXPECT_TRUE(docs.count(n)) << n << " is read but not in docs/env.md";
  for (const auto& n : docs)
    EXPECT_TRUE(read.count(n)) << n << " is in docs/env.md but not in ir/env.def";
}

TEST(EnvTable, EveryRowSaysWhatItMeansAndDocsGiveEachNumericDefault) {
  auto rows = documented();
  for (const auto& v : ir::env::table()) {
    EXPECT_GT(std::string(v.meaning).size(), 10u) << v.name;
    EXPECT_FALSE(std::string(v.default_text).empty()) << v.name;
    EXPECT_EQ(&ir::env::info(v.var), &v) << v.name;
    // Flags (0 or 1 by default) are described by their effect; counts by their default.
    if (v.kind == ir::env::Kind::Int && v.int_default > 1 && rows.count(v.name)) {
      EXPECT_NE(rows[v.name].find("default " + std::to_string(v.int_default)), std::string::npos)
          << "docs/env.md does not give " << v.name << "'s default " << v.int_default;
    }
  }
}

// The readers, on variables nothing in this process reads before: this binary links rune_ir
// only, whose readers no test here calls but these.
TEST(EnvTable, AValueIsReadOnceAtItsFirstUse) {
  ASSERT_EQ(setenv("RUNE_PLAN", "first", 1), 0);
  EXPECT_EQ(ir::env::value(Var::Plan), std::optional<std::string>("first"));
  ASSERT_EQ(setenv("RUNE_PLAN", "second", 1), 0);
  EXPECT_EQ(ir::env::value(Var::Plan), std::optional<std::string>("first"));
}

TEST(EnvTable, AnEmptyValueIsSetAndAnUnsetOneIsNot) {
  ASSERT_EQ(setenv("RUNE_PROFILE", "", 1), 0);
  ASSERT_EQ(unsetenv("RUNE_GEMM_ISA"), 0);
  EXPECT_EQ(ir::env::value(Var::Profile), std::optional<std::string>(""));
  EXPECT_EQ(ir::env::value(Var::GemmIsa), std::nullopt);
}

// integer(v)'s message, or "" when it returned; checks that the error is std::invalid_argument.
std::string integer_error(Var v) {
  try {
    ir::env::integer(v);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(EnvTable, AnIntegerIsItsDefaultWhenUnsetOrEmptyAndRaisesUnlessItIsInRange) {
  ASSERT_EQ(setenv("RUNE_EAGER_CACHE_SIZE", "", 1), 0);
  ASSERT_EQ(unsetenv("RUNE_JIT_CACHE_SIZE"), 0);
  ASSERT_EQ(setenv("RUNE_ROW_KERNELS", "0", 1), 0);
  EXPECT_EQ(ir::env::integer(Var::EagerCacheSize), 1024);
  EXPECT_EQ(ir::env::integer(Var::JitCacheSize), 4096);
  EXPECT_EQ(ir::env::integer(Var::RowKernels), 0);
  // Not a whole number: it was silently the default ("two" threads meant every core).
  ASSERT_EQ(setenv("RUNE_STREAM_QUEUE_DEPTH", "12x", 1), 0);
  ASSERT_EQ(setenv("RUNE_NUM_THREADS", "two", 1), 0);
  ASSERT_EQ(setenv("RUNE_GPU_GRAPHS", "yes", 1), 0);
  EXPECT_EQ(integer_error(Var::StreamQueueDepth),
            "RUNE_STREAM_QUEUE_DEPTH=\"12x\" is not a whole number (expected a positive integer; "
            "unset means 64)");
  EXPECT_EQ(integer_error(Var::NumThreads),
            "RUNE_NUM_THREADS=\"two\" is not a whole number (expected an integer in [1, 4096]; "
            "unset means every core)");
  EXPECT_EQ(integer_error(Var::GpuGraphs),
            "RUNE_GPU_GRAPHS=\"yes\" is not a whole number (expected 0 or 1; unset means 1)");
  // Out of the row's range, overflow included (it was clamped by the callers, or wrapped).
  ASSERT_EQ(setenv("RUNE_NODE_TABLE_MIN", "-3", 1), 0);
  ASSERT_EQ(setenv("DEBUG", "99999999999999999999", 1), 0);
  ASSERT_EQ(setenv("RUNE_NCCL_NATIVE", "2", 1), 0);
  EXPECT_EQ(integer_error(Var::NodeTableMin),
            "RUNE_NODE_TABLE_MIN=\"-3\" is out of range (expected a positive integer; unset means "
            "262144)");
  EXPECT_EQ(integer_error(Var::Debug),
            "DEBUG=\"99999999999999999999\" is out of range (expected an integer in [0, 5]; unset "
            "means 0)");
  EXPECT_EQ(integer_error(Var::NcclNative),
            "RUNE_NCCL_NATIVE=\"2\" is out of range (expected 0 or 1; unset means 0)");
  // Read once, raised at every call.
  ASSERT_EQ(setenv("RUNE_NUM_THREADS", "2", 1), 0);
  EXPECT_NE(integer_error(Var::NumThreads), "");
}

TEST(EnvTable, ValueNowReadsAtEachCall) {
  ASSERT_EQ(setenv("RUNE_MASTER_ADDR", "first:1", 1), 0);
  EXPECT_EQ(ir::env::value_now(Var::MasterAddr), std::optional<std::string>("first:1"));
  ASSERT_EQ(setenv("RUNE_MASTER_ADDR", "second:2", 1), 0);
  EXPECT_EQ(ir::env::value_now(Var::MasterAddr), std::optional<std::string>("second:2"));
  ASSERT_EQ(unsetenv("RUNE_MASTER_ADDR"), 0);
  EXPECT_EQ(ir::env::value_now(Var::MasterAddr), std::nullopt);
}

TEST(EnvTable, ABadValueNamesTheVariableTheValueAndWhatItExpected) {
  EXPECT_EQ(
      ir::env::bad_value(Var::GemmIsa, "avx9", "is not a micro-kernel cap", "portable or avx2"),
      "RUNE_GEMM_ISA=\"avx9\" is not a micro-kernel cap (expected portable or avx2; unset "
      "means the CPU's widest)");
}

TEST(EnvTable, EveryIntegerRowHasARange) {
  for (const auto& v : ir::env::table()) {
    if (v.kind != ir::env::Kind::Int) continue;
    EXPECT_LE(v.int_min, v.int_max) << v.name;
    EXPECT_GE(v.int_min, 0) << v.name;
  }
}

// The library reads the environment through ir/env.h only: no getenv (or environ) in its
// sources but ir/env.cpp's, so a variable cannot be read without a row (and docs/env.md's line).
// samples/, bench/ and tests/ are programs, which may read their own.
TEST(EnvTable, NoLibrarySourceReadsTheEnvironmentButIrEnv) {
  namespace fs = std::filesystem;
  const std::string doc = RUNE_ENV_DOC;
  const fs::path root = fs::path(doc).parent_path().parent_path();
  const std::regex reads(R"(getenv\s*\(|\benviron\b|getenv_s|__environ)");
  const std::set<std::string> exts = {".cpp", ".cc", ".h", ".hpp", ".cu", ".inc", ".def"};
  size_t scanned = 0;
  for (const char* dir : {"ir", "runtime", "codegen", "core", "trace", "distributed"}) {
    ASSERT_TRUE(fs::is_directory(root / dir)) << root / dir;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || !exts.count(e.path().extension().string())) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel == "ir/env.cpp" || rel == "ir/env.h") continue;  // the reader, and its comment
      ++scanned;
      std::istringstream in(read_file(e.path().string()));
      int n = 0;
      for (std::string line; std::getline(in, line);)
        if (++n, std::regex_search(line, reads))
          ADD_FAILURE() << rel << ":" << n << " reads the environment other than through "
                        << "ir/env.h (add a row to ir/env.def): " << line;
    }
  }
  EXPECT_GT(scanned, 100u);
}

TEST(EnvTable, ATextVariableIsNotAnInteger) {
  try {
    ir::env::integer(Var::CacheDir);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "ir::env::integer: RUNE_CACHE_DIR is not an integer");
  }
}
