// The lowering passes (codegen/lower/, one per kernel kind): lower() hands each kernel kind to
// its pass, and each pass writes the structure its file describes. The corpus is the GPU source
// tests' (tests/gpu/gpu_corpus.h). tests/lower/lower_dump prints every corpus kernel's lowered
// IR, to diff before and after a change to the passes.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpu/render_llvm.h"
#include "codegen/lower.h"
#include "gpu/gpu_corpus.h"

namespace {

using namespace gpu_test;
using codegen::KernelSpec;
using codegen::Plan;
namespace lir = codegen::lir;

const std::vector<Labelled>& corpus() {
  static const std::vector<Labelled> all = [] {
    std::vector<Labelled> ks;
    for (auto part : {corpus_elementwise, corpus_reductions, corpus_movement})
      for (auto& l : part()) ks.push_back(std::move(l));
    return ks;
  }();
  return all;
}

Plan plan(const std::string& text) {
  auto p = codegen::parse_plan(text);
  EXPECT_TRUE(p.has_value()) << text;
  return p.value_or(Plan{});
}
const Plan kHost = plan("host lanes:vector group:1");
const Plan kGpu = plan("gpu lanes:threads/8");
const Plan kTiles = plan("gpu lanes:unrolled tiles:128x128x16/8x8");

// The first corpus kernel with `property`.
const KernelSpec& first(const std::function<bool(const KernelSpec&)>& property) {
  for (const Labelled& l : corpus())
    if (property(l.k)) return l.k;
  throw std::runtime_error("no corpus kernel has the property");
}

// Statements of kind `kind` anywhere in the entries (heads, bodies, aligned bodies).
int count(const lir::Block& b, lir::Stmt::Kind kind) {
  int n = 0;
  for (const lir::Stmt& s : b) n += (s.kind == kind) + count(s.body, kind);
  return n;
}
int count(const lir::Kernel& k, lir::Stmt::Kind kind) {
  int n = 0;
  for (const lir::Entry& e : k.entries)
    n += count(e.head, kind) + count(e.body, kind) + count(e.aligned_body, kind);
  return n;
}

bool is_elementwise(const KernelSpec& k) {
  return !k.contract && !k.library && !k.row() && !k.rbody;
}
bool is_reduction(const KernelSpec& k) { return !k.contract && !k.library && !k.row() && k.rbody; }

TEST(LoweringPasses, EachKindHasItsPassAndEveryPassIsUsed) {
  std::set<std::string> used;
  for (const Labelled& l : corpus()) {
    const KernelSpec& k = l.k;
    for (const Plan& p : {kHost, kGpu, kTiles}) {
      if (!codegen::validate(k, p).empty()) continue;
      const std::string pass = codegen::lowering_pass(k, p);
      used.insert(pass);
      const char* want = k.contract  ? (p.tiles ? "tiled_contraction" : "contraction")
                         : k.library ? "library"
                         : k.row()   ? "rows"
                         : k.rbody   ? "reduction"
                                     : "elementwise";
      EXPECT_EQ(pass, want) << l.label << " under " << p.str();
    }
  }
  EXPECT_EQ(used, (std::set<std::string>{"contraction", "elementwise", "library", "reduction",
                                         "rows", "tiled_contraction"}));
}

TEST(LoweringPasses, ElementwiseHostRowsAndGpuVectors) {
  const KernelSpec& k = first([](const KernelSpec& k) {
    return is_elementwise(k) && k.shape.size() == 2 && k.shape[1] > 8;
  });
  lir::Kernel host = codegen::lower(k, kHost);
  ASSERT_EQ(host.entries.size(), 1u);
  EXPECT_EQ(host.entries[0].items, ir::numel(k.shape));
  EXPECT_EQ(count(host, lir::Stmt::Kind::Store), 1);
  lir::Kernel gpu = codegen::lower(k, plan("gpu lanes:threads/32 vec4"));
  ASSERT_EQ(gpu.entries.size(), 1u);
  EXPECT_FALSE(gpu.entries[0].aligned_body.empty());
  EXPECT_EQ(count(gpu, lir::Stmt::Kind::VStore), 1);
}

TEST(LoweringPasses, ReductionBlocksAndPhases) {
  const KernelSpec& one =
      first([](const KernelSpec& k) { return is_reduction(k) && k.blocks() == 1; });
  lir::Kernel host = codegen::lower(one, kHost);
  ASSERT_EQ(host.entries.size(), 1u);
  EXPECT_GE(count(host, lir::Stmt::Kind::Reg), 1);  // a block's 8 lanes
  const KernelSpec& many =
      first([](const KernelSpec& k) { return is_reduction(k) && k.blocks() > 1; });
  lir::Kernel two = codegen::lower(many, kHost);
  ASSERT_EQ(two.entries.size(), 2u);  // the partials, then each output's partials in order
  EXPECT_EQ(two.entries[0].suffix, "_p1");
  EXPECT_EQ(two.params.size(), many.slots.size() + 1);  // the partials' scratch param
  lir::Kernel gpu = codegen::lower(many, kGpu);
  EXPECT_EQ(gpu.entries[0].items, ir::numel(many.shape) * many.blocks() * 8);
}

TEST(LoweringPasses, RowsOnTheHostAndAsGpuLanes) {
  const KernelSpec& k = first([](const KernelSpec& k) { return k.row() && k.row_out; });
  lir::Kernel host = codegen::lower(k, kHost);
  ASSERT_EQ(host.entries.size(), 1u);
  EXPECT_EQ(host.entries[0].items, ir::numel(k.shape));
  lir::Kernel lanes = codegen::lower(k, plan("gpu lanes:threads/4 rows:lanes"));
  EXPECT_EQ(lanes.entries[0].items, ir::numel(k.shape) * codegen::kReduceLanes);
}

// A host row kernel whose last stage is costly (softmax's exps) computes it 16 values a step and
// prefetches the next rows' first stage reads from that stage's loop; with a cheap last stage
// (layer norm's variance) the rows' bodies prefetch instead; the GPU never does. The host renders
// its lanes loops as parallel (each access in the loop's access group), so LLVM vectorises them
// without a run-time overlap check (codegen/cpu/render_llvm.cpp).
TEST(LoweringPasses, HostRowKernelsPrefetchTheNextRowsBehindACostlyStage) {
  auto row_of = [](const std::string& prefix) -> const KernelSpec& {
    for (const Labelled& l : corpus())
      if (l.label.rfind(prefix, 0) == 0 && l.k.row()) return l.k;
    throw std::runtime_error("no row kernel labelled " + prefix);
  };
  const KernelSpec& softmax = row_of("softmax float32");
  const KernelSpec& norm = row_of("layer_norm float32");
  // The costly stage takes two steps of 8 lanes at a time (33 elements: two double steps,
  // then the last element alone), each step prefetching each next row's elements, one prefetch
  // per 64-byte line (16 float32s: one a double step, one a single step): for the pair of rows
  // 2 in the double steps and 2 in the single-step loop (which runs no step here); for the
  // range's odd last row 1 + 1.
  const lir::Kernel host = codegen::lower(softmax, kHost);
  EXPECT_EQ(count(host, lir::Stmt::Kind::Prefetch), 6);
  EXPECT_NE(lir::to_string(host).find(" in [0, 16) step 1 vector:"), std::string::npos)
      << "no 16-element values loop in the costly stage";
  EXPECT_EQ(count(codegen::lower(softmax, plan("gpu lanes:threads/4 rows:lanes")),
                  lir::Stmt::Kind::Prefetch),
            0);
  // Layer norm: each row's body loop prefetches its next row, one line (16 float32s) a step: 2
  // in the pair of rows' bodies, 1 in the odd last row's; no stage prefetches.
  EXPECT_EQ(count(codegen::lower(norm, kHost), lir::Stmt::Kind::Prefetch), 3);
  const std::string ir = codegen::cpu::render_llvm(softmax, "k").ir;
  EXPECT_NE(ir.find("call void @llvm.prefetch"), std::string::npos);
  EXPECT_NE(ir.find("!\"llvm.loop.parallel_accesses\", !"), std::string::npos);
  EXPECT_NE(ir.find(", !llvm.access.group !"), std::string::npos);
}

TEST(LoweringPasses, ContractionOneThreadPerOutput) {
  const KernelSpec& k = first([](const KernelSpec& k) { return k.contract.has_value(); });
  lir::Kernel gpu = codegen::lower(k, kGpu);
  ASSERT_EQ(gpu.entries.size(), 1u);
  EXPECT_EQ(gpu.entries[0].items, ir::numel(k.shape));
  EXPECT_EQ(gpu.entries[0].block, 0);
  EXPECT_EQ(count(gpu, lir::Stmt::Kind::Shared), 0);
}

TEST(LoweringPasses, TiledContractionStagesSlicesInSharedMemory) {
  const KernelSpec& k = first([](const KernelSpec& k) {
    return k.contract && k.contract->dtype == ir::DType::Float32 && ir::numel(k.shape) >= 64 * 64;
  });
  lir::Kernel simt = codegen::lower(k, kTiles);
  ASSERT_EQ(simt.entries.size(), 1u);
  EXPECT_EQ(simt.entries[0].block, codegen::kGemmTile.threads);
  EXPECT_EQ(count(simt.entries[0].head, lir::Stmt::Kind::Shared), 2);  // A's and B's slices
  EXPECT_GE(count(simt, lir::Stmt::Kind::Barrier), 2);
  EXPECT_EQ(count(simt, lir::Stmt::Kind::Mma), 0);
  lir::Kernel mma = codegen::lower(k, plan("gpu lanes:unrolled tiles:128x128x16/8x8 mma:tf32"));
  EXPECT_GT(count(mma, lir::Stmt::Kind::Mma), 0);
}

TEST(LoweringPasses, LibraryCallsOnTheGpu) {
  const KernelSpec& k = first([](const KernelSpec& k) { return k.library.has_value(); });
  lir::Kernel gpu = codegen::lower(k, kGpu);
  ASSERT_EQ(gpu.entries.size(), 1u);
  EXPECT_GE(count(gpu, lir::Stmt::Kind::Store), 1);
}

}  // namespace
