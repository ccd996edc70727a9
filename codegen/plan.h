// A kernel's plan: how `lower` maps the kernel's fixed order of operations onto a device. A plan
// chooses only what cannot change a bit: which loop runs as vector lanes or unrolled, whether a
// reduction block's 8 lanes run as 8 threads (combined by the same fixed tree, as shuffles),
// how many adjacent outputs the host reduces together, whether 4 outputs move as one vector.
// The reduction blocks, the lanes' elements and the tree that combines them, the left-to-right
// combine of block partials and the k chain of a matrix product are not in the plan: `lower`
// writes them from the kernel's shape alone (docs/numerics.md), so every plan gives the same
// bits (tests/lower/test_plans.cpp runs kernels under several plans and compares).
//
// A plan is data: printable (`str`), parsed back (`parse`), part of the rendered source and so
// of every cache key, and forcible with RUNE_PLAN for tests and experiments.
#pragma once
#include <optional>
#include <string>

#include "codegen/kernel.h"

namespace codegen {

// The precision float32 matrix products may use on a GPU (nx::set_matmul_precision, as
// torch.set_float32_matmul_precision): Highest, the default, is the documented fma chain
// (docs/numerics.md), the host's bits; TF32 and BF16 allow the tensor-core plan (plan part
// mma:tf32 / mma:bf16), whose inputs are rounded to 10 / 7 mantissa bits and whose bits differ
// from the host's. Process-global; read when a kernel is planned, so it is part of every GPU
// program's cache key (codegen/compile.cpp, rune::jit, the eager cache). The host ignores it.
enum class MatmulPrecision { Highest, TF32, BF16 };
MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);
const char* precision_name(MatmulPrecision p);  // "highest", "tf32", "bf16"
std::optional<MatmulPrecision> parse_matmul_precision(const std::string& text);

// What `optimise` knows of a device.
struct DeviceDesc {
  bool gpu = false;            // grid-stride entry points (else host work-item ranges)
  bool lane_exchange = false;  // GPU: 8 consecutive threads can exchange values (shuffles)
  bool lane_bcast = false;     // GPU: ... and broadcast one lane's value to the 8 (row kernels)
  bool vector_types = false;   // GPU: float4-style vector loads and stores
  int lane_unroll = 0;         // GPU: unroll hint for a lane thread's loop (loads in flight)
  bool block_tiles = false;    // GPU: block-shared arrays and a block barrier (tiled products)
  int threads = 1;             // host: the thread pool's size (how many work items are worth it)
  // GPU: warp-level matrix fragments (lir::Stmt::Kind::Mma: mma.sync m16n8k8 tf32 and m16n8k16
  // bf16, CUDA sm_80 and later); false on HIP and on CUDA archs known to be older.
  bool mma = false;
  // GPU: the precision float32 products may use (matmul_precision() when the kernel is planned).
  MatmulPrecision precision = MatmulPrecision::Highest;
  // GPU: asynchronous copies from global to block-shared memory (lir::Stmt::Kind::AsyncCopy,
  // CUDA's cp.async on sm_80 and later; a synchronous copy where the arch is older).
  bool async_copy = false;
};

// The GPU's tiled float32 matrix product (plan part "tiles"): each block of `threads` threads
// computes a bm x bn tile of outputs; the k axis is walked in slices of bk, each slice of A and
// B staged in shared memory by the whole block (coalesced loads), then every thread
// accumulates its tm x tn outputs (rows ty + 16 i, columns tx + 16 j of the tile) in
// registers. Each output keeps one fma chain over k in increasing order from +0, the host's:
// outputs are tiled, k is never split.
struct GemmTile {
  int bm = 128, bn = 128, bk = 16, tm = 8, tn = 8, threads = 256;
};
inline constexpr GemmTile kGemmTile{};

struct Plan {
  bool gpu = false;
  // Host: the lanes of a reduction block step as one vector loop (else unrolled).
  bool vector_lanes = true;
  // Host: adjacent outputs along the last axis reduced together (1 or 16), each with its own
  // lanes and tree: the loads of 16 outputs form vectors.
  int group = 1;
  // Host: reduction blocks of one output that one work item reduces together (1, 2 or 4). Each
  // block keeps its own lanes, tree and partial; their chains interleave, so the adds of
  // different blocks overlap instead of waiting on one chain's latency.
  int blocks = 1;
  // GPU: a reduction block's 8 lanes run as 8 threads; its unroll hint.
  bool lane_threads = false;
  int lane_unroll = 0;
  // GPU: elementwise kernels move 4 outputs per thread as vectors when aligned.
  bool vector4 = false;
  // GPU: a float32 matrix product runs as kGemmTile (else one thread per output).
  bool tiles = false;
  // GPU, with lane_threads: a row kernel's row is 8 consecutive threads, one per lane (so 4 rows
  // per warp of 32, 8 per wavefront of 64). Each stage's lane chain runs in its lane's thread, the
  // fixed tree combines the 8 with shuffles and its result is broadcast to the 8 (ShuffleIdx); a
  // row-writing body writes element r in lane r % 8's thread (the elements that thread's chains
  // read). Else one thread runs a row's 8 lanes. Never more than 8 threads per row: the 8 lanes
  // are the documented association order (docs/numerics.md).
  bool row_lanes = false;
  // GPU, with tiles: the tile's products run on tensor cores (warp-level mma.sync fragments,
  // float32 accumulation) with inputs rounded to tf32 or bf16: the opt-in precision of
  // nx::set_matmul_precision (Highest: none, the fma chain).
  MatmulPrecision mma = MatmulPrecision::Highest;
  // GPU, with tiles and no mma: an operand staged with vectors (its stride-1 axis is A's k or
  // B's n, the entry's aligned body) is copied asynchronously (cp.async) straight into shared
  // memory, A's slice then m-major; a transposed or unaligned operand goes through registers
  // as before. The same values are staged: the same bits.
  bool async_copy = false;

  // e.g. "host lanes:vector group:16", "host lanes:vector group:1 blocks:4",
  // "gpu lanes:threads/32 vec4", "gpu lanes:threads/32 rows:lanes",
  // "gpu lanes:unrolled tiles:128x128x16/8x8 cp.async",
  // "gpu lanes:unrolled tiles:128x128x16/8x8 mma:tf32" (blocks is printed only when it is not 1)
  std::string str() const;
  bool operator==(const Plan&) const = default;
};

// Parses str()'s syntax; nullopt (and *error) for anything else.
std::optional<Plan> parse_plan(const std::string& text, std::string* error = nullptr);

// Why `plan` cannot run kernel `k` (empty: it can). lower() calls it first.
std::string validate(const KernelSpec& k, const Plan& plan);

// A kernel's arithmetic and the global memory traffic its plan issues (every load a thread
// issues to global memory counts, as if no cache served it; shared-memory reads do not): what
// the plan report (codegen/cuda/kernel_report.h) prints as FLOP per global byte.
struct Traffic {
  double flops = 0;         // floating-point and integer ops of the kernel's expressions
  double global_bytes = 0;  // bytes loaded from and stored to params
};
Traffic traffic(const KernelSpec& k, const Plan& plan);

// `plan` with the parts that do not apply to kernel `k` reset to one canonical value, so that
// two plans lowering `k` the same way print (and key caches) the same: RUNE_PLAN forced on a
// whole program changes the text, and so the compiled code's cache key, of only the kernels it
// changes (an elementwise host kernel has no lanes, a contraction no group).
Plan applicable(const KernelSpec& k, Plan plan);

// The default plan of a kernel on a device; RUNE_PLAN (when set and valid for the kernel)
// replaces it. Either way the result names only the parts that apply (`applicable`).
Plan optimise(const KernelSpec& k, const DeviceDesc& device);

}  // namespace codegen
