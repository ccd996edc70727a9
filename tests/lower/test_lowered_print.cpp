// DEBUG=4 prints each new kernel's lowered IR (codegen::lir::to_string). A decomposed function
// reads its parts many times, so its expression is a DAG whose paths grow exponentially with
// its depth: printed as a tree, one tanh's kernel took minutes and gigabytes. Shared values are
// printed once, named `$n`.
#include <gtest/gtest.h>

#include <string>

#include "codegen/lowered.h"
#include "ir/builder.h"
#include "ir/node.h"

namespace {

using namespace ir;
namespace lir = codegen::lir;

// p0[i] = x_depth, x_0 = p1[i], x_{n+1} = x_n * x_n + x_n: 2^depth paths, 2 depth + 1 nodes.
lir::Kernel chain_kernel(int depth) {
  lir::Kernel k;
  k.params = {{DType::Float32, true}, {DType::Float32, false}};
  k.vars = {{"lo", DType::Int64}, {"hi", DType::Int64}, {"i", DType::Int64}};
  NodeRef i = make(Op::Var, DType::Int64, {}, {}, int64_t{2});
  NodeRef x = make(Op::LoadAt, DType::Float32, {}, {i}, int64_t{1});
  for (int d = 0; d < depth; ++d) x = b::add(b::mul(x, x), x);
  lir::Stmt store(lir::Stmt::Kind::Store);
  store.param = 0;
  store.a = x;
  store.b = i;
  lir::Stmt loop(lir::Stmt::Kind::For);
  loop.var = 2;
  loop.a = make(Op::Var, DType::Int64, {}, {}, int64_t{lir::kLo});
  loop.b = make(Op::Var, DType::Int64, {}, {}, int64_t{lir::kHi});
  loop.body.push_back(store);
  lir::Entry e;
  e.items = 16;
  e.threads = 16;
  e.body.push_back(loop);
  k.entries.push_back(e);
  return k;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(LoweredPrint, SharedValuesArePrintedOnceNotOncePerPath) {
  // 2^60 paths: a tree printer would never finish.
  std::string s = lir::to_string(chain_kernel(60));
  // params, entry, for, one line per shared value (the load and x_1 .. x_59), the store.
  EXPECT_EQ(lines(s), 3 + 60 + 1) << s;
  EXPECT_NE(s.find("    $0 = p1[i]\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    $1 = Add.float32(Mul.float32($0, $0), $0)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    p0[i] = Add.float32(Mul.float32($59, $59), $59)\n"), std::string::npos)
      << s;
}

TEST(LoweredPrint, AValueReadOnceStaysInline) {
  std::string s = lir::to_string(chain_kernel(0));
  EXPECT_EQ(s,
            "params: float32* float32\n"
            "entry items 16 threads 16:\n"
            "  for i in [lo, hi) step 1 serial:\n"
            "    p0[i] = p1[i]\n");
}

}  // namespace
