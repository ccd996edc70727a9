// The lowered level of the kernel IR: what `lower(kernel, plan)` (codegen/lower.h) produces and
// the renderers print. Every decision about iteration lives here, made once by `lower`: the
// loops and their kinds, index arithmetic, the lanes and fixed tree of a reduction block, the
// combine of block partials, the k chain of a matrix product, vector loads. A renderer walks the
// statements in order and spells each one; it decides nothing, so every backend computes the
// same operations in the same order.
//
// Expressions are interned scalar DAGs (ir::Node) over the core ops of codegen/core_ops.h
// (legalised: every op there has one obvious spelling in LLVM IR and in C) plus the kernel-level
// leaves of ir/ops.def: Var (a loop variable, register or named value), LoadAt, RegAt, and the
// index ops. Statements are a structured tree, so printing needs no scheduling: a value is
// printed where a statement first needs it, and stays visible in that scope only.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/node.h"

namespace codegen::lir {

// Variables: ids, named by the kernel's `vars` table.
using VarId = int;

enum class Loop {
  Serial,    // for (v = lo; v < hi; v += step), in order
  Vector,    // Serial whose iterations are independent lanes: the host vectorises it (LLVM
             // loop metadata, width = trip count); C prints a plain loop
  Unrolled,  // lo, hi, step constants: printed once per iteration with v a constant
  Grid,      // GPU: the launch's threads share [lo, hi) grid-stride (v = first thread item)
  // GPU, entries with a fixed block size (Entry::block): the launch's blocks share [lo, hi)
  // block-stride (v = lo + block index, stepping by the grid's block count). Every thread of a
  // block runs the same iterations, so a Barrier inside is reached by the whole block.
  Blocks,
  // GPU, entries with a fixed block size: the threads of one block share [lo, hi) (v = lo +
  // the thread's index in its block, stepping by the block size). Over [0, block) each thread
  // runs exactly one iteration (v = its index), so a Barrier inside is still uniform.
  Threads,
};

struct Stmt;
using Block = std::vector<Stmt>;

struct Stmt {
  enum class Kind {
    For,      // var over [a, b) by step, kind loop; body
    If,       // a (bool); body
    Let,      // var = a (an immutable value; printing may inline or name it)
    Reg,      // var: a mutable register of dtype, `count` elements, each set to a
    Set,      // var[b] = a (b: int64 index, Const 0 for a scalar register)
    Store,    // param[b] = a (param: int64 in `param`; bool stored as a byte)
    VLoad,    // GPU: var = the `count` elements param[b ..] as one vector (read with RegAt)
    VStore,   // GPU: param[b ..] = values, as one vector
    Shared,   // GPU: var: a block-shared array of dtype, `count` elements (uninitialised); read
              // with RegAt, written with Set, like a Reg, by every thread of the block
    Barrier,  // GPU: every thread of the block waits here until all have arrived; shared
              // writes before it are visible to reads after it
    // GPU, warp-collective (the 32 threads of each warp of a fixed-block entry run it together,
    // converged): D = A B + C on tensor cores, the PTX ISA's mma.sync.aligned.row.col with
    // float32 accumulators var[b], var[b + 1], var[b + 2], var[b + 3] as c0..c3 / d0..d3.
    // count 8, dtype float32: m16n8k8 .tf32, values a0..a3 then b0, b1 (float32 values already
    // rounded to tf32); count 16, dtype bfloat16: m16n8k16 .bf16, values a0..a7 then b0..b3.
    // Which element of A (16 x k), B (k x 8) and D (16 x 8) each value is, by lane (g = lane / 4,
    // q = lane % 4), is the ISA's fragment layout: tf32 a_j at (g + 8 (j & 1), q + 4 (j >> 1)),
    // b_j at (q + 4 j, g); bf16 a_i at (g + 8 ((i >> 1) & 1), 2 q + (i & 1) + 8 (i >> 2)), b_i at
    // (2 q + (i & 1) + 8 (i >> 1), g); d_r at (g + 8 (r >> 1), 2 q + (r & 1)).
    Mma,
    // GPU: shared array var[a .. a + count) = param[b .. b + count) (count elements of dtype,
    // 8 or 16 bytes, both addresses aligned to that size) when values[0] (bool) is true, else
    // zeros; asynchronous: complete only after this thread's next AsyncWait (CUDA: cp.async on
    // sm_80 and later).
    AsyncCopy,
    // GPU: waits until this thread's AsyncCopy statements before it are complete (a Barrier
    // after it then makes them visible to the block).
    AsyncWait,
    // Host: a hint that param[b] (an index that may lie past the param's end) will be read
    // soon, so its cache line is fetched now; it reads nothing a result depends on and never
    // faults. Renderers without such a hint emit nothing.
    Prefetch,
  } kind;
  explicit Stmt(Kind k) : kind(k) {}
  VarId var = -1;
  int param = -1;
  int64_t count = 1;
  int64_t step = 1;
  int unroll = 0;  // For: an unroll hint for the C dialects (0: none)
  Loop loop = Loop::Serial;
  ir::DType dtype = ir::DType::Int64;
  ir::NodeRef a = nullptr, b = nullptr;
  std::vector<ir::NodeRef> values;  // VStore, Mma, AsyncCopy
  Block body;
};

struct VarInfo {
  std::string name;  // printable (letters, digits, _)
  ir::DType dtype;
};

// An entry point: a function over all params. On the host it is called with a work-item range
// [lo, hi) (Vars kLo, kHi); on a GPU it is launched over `threads` threads (its body's Grid loop
// covers its `items`).
struct Entry {
  std::string suffix;   // appended to the kernel's name ("" or "_p1")
  int64_t items = 0;    // host: the range the thread pool splits; GPU: the Grid loop's extent
  int64_t threads = 0;  // GPU: threads launched for the grid-stride loop
  // GPU: 0, any block size (grid-stride loops only); else the entry must be launched with
  // exactly this many threads per block (it uses Blocks / Threads loops, Shared and Barrier),
  // and `threads` is a multiple of it.
  int64_t block = 0;
  // Printed first, before `aligned_body` and `body`: statements both use (the shared arrays of
  // a fixed-block entry, which both bodies stage into).
  Block head;
  Block body;
  // When not empty: run instead of `body` when every param's address is a multiple of 16
  // (vector loads and stores).
  Block aligned_body;
};

struct Param {
  ir::DType dtype;  // element type in memory (bool: a byte)
  bool written = false;
};

struct Kernel {
  std::vector<Param> params;  // param 0 the output; a two-phase reduction's scratch last
  std::vector<VarInfo> vars;
  std::vector<Entry> entries;  // in launch order
};

// Reserved vars of every kernel: the host entry's range.
inline constexpr VarId kLo = 0, kHi = 1;

// The values a renderer has named, by scope: a value printed in an enclosing scope dominates
// the current point; a value that reads a register (RegAt of a var not marked immutable, such as
// a vector a VLoad filled) is valid only in the statement that printed it.
class PrintedValues {
 public:
  void reset() { scopes_.assign(1, {}), reads_.clear(); }
  void open() { scopes_.emplace_back(); }
  void close() { scopes_.pop_back(); }
  void immutable(VarId v) { immutable_.insert(v); }
  const std::string* find(ir::NodeRef n) const;
  void add(ir::NodeRef n, std::string printed);
  // Forgets the register reads of the statement just printed.
  void end_statement();

 private:
  bool reads_register(ir::NodeRef n);
  std::vector<std::unordered_map<ir::NodeRef, std::string>> scopes_{1};
  std::unordered_map<ir::NodeRef, bool> reads_register_;
  std::unordered_set<VarId> immutable_;
  std::vector<ir::NodeRef> reads_;  // printed in this statement, reading a register
};

// Prints the statements as indented text (DEBUG=4, tests).
std::string to_string(const Kernel& k);

}  // namespace codegen::lir
