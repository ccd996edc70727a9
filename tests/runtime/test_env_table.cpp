// ir/env's table against docs/env.md: every variable the library reads is documented and every
// documented variable is read through the table, so neither can gain a variable alone. Also the
// readers' rules (docs/env.md: read once; an integer's default when it is not a number).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
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

TEST(EnvTable, AnIntegerIsItsDefaultUnlessItIsAWholeNumber) {
  ASSERT_EQ(setenv("RUNE_STREAM_QUEUE_DEPTH", "12x", 1), 0);
  ASSERT_EQ(setenv("RUNE_EAGER_CACHE_SIZE", "", 1), 0);
  ASSERT_EQ(setenv("RUNE_NODE_TABLE_MIN", "-3", 1), 0);
  ASSERT_EQ(unsetenv("RUNE_JIT_CACHE_SIZE"), 0);
  EXPECT_EQ(ir::env::integer(Var::StreamQueueDepth), 64);
  EXPECT_EQ(ir::env::integer(Var::EagerCacheSize), 1024);
  EXPECT_EQ(ir::env::integer(Var::NodeTableMin), -3);  // the caller clamps it (to 1)
  EXPECT_EQ(ir::env::integer(Var::JitCacheSize), 4096);
}

TEST(EnvTable, ATextVariableIsNotAnInteger) {
  try {
    ir::env::integer(Var::CacheDir);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "ir::env::integer: RUNE_CACHE_DIR is not an integer");
  }
}
