#include "codegen/plan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "codegen/lower/attention.h"
#include "ir/env.h"

namespace codegen {

using namespace ir;

namespace {

// The innermost reduced axis longer than 1 has stride 0 or +-1 in every load reachable from
// `roots`: 8 neighbouring lanes read neighbouring addresses.
bool innermost_reduced_axis_contiguous(const KernelSpec& k, const std::vector<NodeRef>& roots) {
  size_t nk = k.shape.size(), nr = k.rshape.size(), axis = nr;
  for (size_t a = nr; a-- > 0;)
    if (k.rshape[a] > 1) {
      axis = a;
      break;
    }
  if (axis == nr) return false;
  for (NodeRef n : toposort(roots))
    if (n->op == Op::Load) {
      const View& v = arg_load(n).view;
      if (v.strides.size() != nk + nr) return false;
      if (v.strides[nk + axis] < -1 || v.strides[nk + axis] > 1) return false;
    }
  return true;
}

// A reduction's rbody reads its reduced axis contiguously.
bool reduction_contiguous(const KernelSpec& k) {
  return innermost_reduced_axis_contiguous(k, {k.rbody});
}

// A row kernel's row is contiguous (or broadcast) in every load of its stages and of a
// row-writing body.
bool rows_contiguous(const KernelSpec& k) {
  std::vector<NodeRef> roots;
  for (const RowStage& st : k.stages) roots.push_back(st.rbody);
  if (k.row_out) roots.push_back(k.body);
  return innermost_reduced_axis_contiguous(k, roots);
}

// Every load of an elementwise kernel reads the output's own index (C-contiguous over the
// output's shape, unmasked, from an offset that is a multiple of 4) or one element: 4
// consecutive outputs read 4 consecutive elements of each param.
bool vector4_possible(const KernelSpec& k) {
  if (k.rbody || k.row() || k.contract || k.library || !k.body || numel(k.shape) < 4) return false;
  const View flat = View::contiguous(k.shape);
  for (NodeRef n : toposort({k.body})) {
    if (n->op == Op::Valid || n->op == Op::Index) return false;
    if (n->op != Op::Load) continue;
    const View& v = arg_load(n).view;
    if (!v.mask.empty() || v.strides.size() != k.shape.size()) return false;
    bool scalar = true, same = v.offset % 4 == 0;
    for (size_t a = 0; a < k.shape.size(); ++a) {
      if (v.strides[a] != 0) scalar = false;
      if (k.shape[a] > 1 && v.strides[a] != flat.strides[a]) same = false;
    }
    if (!scalar && !same) return false;
  }
  return true;
}

bool reduction(const KernelSpec& k) { return k.rbody && !k.contract && !k.library; }

// The product's M, N, K (the last two dims of a over [batch..., M, K] and b).
struct Mnk {
  int64_t m = 0, n = 0, k = 0, batch = 1;
};
Mnk mnk(const KernelSpec& k) {
  const auto a = k.contract->a_shape();
  const auto b = k.contract->b_shape();
  const size_t nd = a.size();
  Mnk r{a[nd - 2], b[nd - 1], a[nd - 1], 1};
  for (size_t d = 0; d + 2 < nd; ++d) r.batch *= a[d];
  return r;
}

const char* mma_word(MatmulPrecision p) {
  return p == MatmulPrecision::TF32 ? "mma:tf32" : p == MatmulPrecision::BF16 ? "mma:bf16" : "";
}

// The product's operands are float32 in memory and it computes at float32: what the
// tensor-core plan takes (16-bit operands keep the fma chain, their documented bits).
bool float32_operands(const KernelSpec& k) {
  return k.contract && k.contract->dtype == DType::Float32 &&
         k.contract->a_dtype == DType::Float32 && k.contract->b_dtype == DType::Float32;
}

std::string tiles_name() {
  const GemmTile& t = kGemmTile;
  return "tiles:" + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" + std::to_string(t.bk) +
         "/" + std::to_string(t.tm) + "x" + std::to_string(t.tn);
}

// Arithmetic nodes of an expression (loads, constants and index leaves excluded).
double arith_nodes(NodeRef root) {
  double n = 0;
  if (!root) return 0;
  for (NodeRef x : toposort({root}))
    if (!x->src.empty() && x->op != Op::Load && x->op != Op::Cast) n += 1;
  return n;
}
// Bytes the loads of an expression issue per evaluation.
double load_bytes(NodeRef root) {
  double n = 0;
  if (!root) return 0;
  for (NodeRef x : toposort({root}))
    if (x->op == Op::Load) n += static_cast<double>(itemsize(x->dtype));
  return n;
}

std::atomic<int> g_precision{static_cast<int>(MatmulPrecision::Highest)};

}  // namespace

MatmulPrecision matmul_precision() { return static_cast<MatmulPrecision>(g_precision.load()); }
void set_matmul_precision(MatmulPrecision p) { g_precision.store(static_cast<int>(p)); }
const char* precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::TF32 ? "tf32" : p == MatmulPrecision::BF16 ? "bf16" : "highest";
}
std::optional<MatmulPrecision> parse_matmul_precision(const std::string& text) {
  for (auto p : {MatmulPrecision::Highest, MatmulPrecision::TF32, MatmulPrecision::BF16})
    if (text == precision_name(p)) return p;
  return std::nullopt;
}

std::string Plan::str() const {
  std::ostringstream s;
  if (!gpu) {
    s << "host lanes:" << (vector_lanes ? "vector" : "unrolled") << " group:" << group;
    if (blocks != 1) s << " blocks:" << blocks;
  } else {
    s << "gpu lanes:" << (lane_threads ? "threads/" + std::to_string(lane_unroll) : "unrolled");
    if (vector4) s << " vec4";
    if (tiles) s << " " << tiles_name();
    if (row_lanes) s << " rows:lanes";
    if (mma != MatmulPrecision::Highest) s << " " << mma_word(mma);
    if (async_copy) s << " cp.async";
  }
  return s.str();
}

std::optional<Plan> parse_plan(const std::string& text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Plan> {
    if (error) *error = "plan \"" + text + "\": " + why;
    return std::nullopt;
  };
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || (word != "host" && word != "gpu")) return fail("starts with host or gpu");
  Plan p;
  p.gpu = word == "gpu";
  p.vector_lanes = !p.gpu;
  while (in >> word) {
    if (!p.gpu && word == "lanes:vector") {
      p.vector_lanes = true;
    } else if (word == "lanes:unrolled") {
      p.vector_lanes = false, p.lane_threads = false;
    } else if (!p.gpu && word.rfind("group:", 0) == 0) {
      p.group = std::atoi(word.c_str() + 6);
      if (p.group != 1 && p.group != 16) return fail("group is 1 or 16");
    } else if (!p.gpu && word.rfind("blocks:", 0) == 0) {
      p.blocks = std::atoi(word.c_str() + 7);
      if (p.blocks != 1 && p.blocks != 2 && p.blocks != 4) return fail("blocks is 1, 2 or 4");
    } else if (p.gpu && word.rfind("lanes:threads/", 0) == 0) {
      p.lane_threads = true;
      p.lane_unroll = std::atoi(word.c_str() + 14);
      if (p.lane_unroll < 0 || p.lane_unroll > 64) return fail("unroll is 0 to 64");
    } else if (p.gpu && word == "vec4") {
      p.vector4 = true;
    } else if (p.gpu && word == "rows:lanes") {
      p.row_lanes = true;
    } else if (p.gpu && word.rfind("tiles:", 0) == 0) {
      if (word != tiles_name()) return fail("the one tiled product is " + tiles_name());
      p.tiles = true;
    } else if (p.gpu && (word == "mma:tf32" || word == "mma:bf16")) {
      p.mma = word == "mma:tf32" ? MatmulPrecision::TF32 : MatmulPrecision::BF16;
    } else if (p.gpu && word == "cp.async") {
      p.async_copy = true;
    } else {
      return fail("unknown part \"" + word + "\"");
    }
  }
  return p;
}

std::string validate(const KernelSpec& k, const Plan& plan) {
  // Parts that do not apply to a kernel's kind are ignored by lower (a plan can be forced on a
  // whole program); what remains must be possible.
  if (plan.group != 1 && plan.gpu) return "group:" + std::to_string(plan.group) + " is a host plan";
  if (plan.blocks != 1 && plan.gpu)
    return "blocks:" + std::to_string(plan.blocks) + " is a host plan";
  if (plan.lane_threads && !plan.gpu) return "lanes:threads is a GPU plan";
  if (plan.vector4 && !plan.gpu) return "vec4 is a GPU plan";
  if (plan.vector4 && !k.rbody && !k.row() && !k.contract && !k.library && !vector4_possible(k))
    return "vec4 needs every load to read the output's own index (from an offset that is a "
           "multiple of 4) or one element";
  if (plan.tiles && !plan.gpu) return "tiles is a GPU plan";
  if (plan.row_lanes && !plan.gpu) return "rows:lanes is a GPU plan";
  if (plan.row_lanes && !plan.lane_threads)
    return "rows:lanes runs a row's lanes as threads: it needs lanes:threads";
  if (plan.tiles && k.contract && k.contract->dtype != DType::Float32)
    return "tiles needs a float32 product, not " + std::string(name(k.contract->dtype));
  if (plan.mma != MatmulPrecision::Highest && k.contract && !plan.tiles)
    return std::string(mma_word(plan.mma)) + " needs tiles";
  if (plan.mma != MatmulPrecision::Highest && k.contract && !float32_operands(k))
    return std::string(mma_word(plan.mma)) + " needs float32 operands";
  if (plan.async_copy && k.contract && !plan.tiles) return "cp.async needs tiles";
  if (plan.async_copy && plan.mma != MatmulPrecision::Highest)
    return "cp.async stages the SIMT plan's slices (the tensor-core plan rounds what it stages)";
  return "";
}

Traffic traffic(const KernelSpec& k, const Plan& plan) {
  Traffic t;
  const double outs = static_cast<double>(numel(k.shape));
  const double out_bytes = outs * static_cast<double>(itemsize(k.out_dtype));
  if (k.fused_attention()) {
    // The GPU attention kernel (codegen/lower/attention.cpp): per task (a batch element's block
    // of R query rows) it reads the R rows of q once, each element of k once per group of rows
    // of the scores' phase and each element of v once per group of the values' phase (the
    // block-shared memory serves q, the scores and the weights); the row kernel's other loads
    // (a mask) count once per element for each stage and for the body.
    const KernelSpec &s = k.attention[0], &w = k.attention[1], &o = k.attention[2];
    const Mnk sd = mnk(s), od = mnk(o);
    const int64_t rows = gpu_attention_rows(sd.m, sd.n, sd.k, static_cast<int64_t>(w.stages.size()),
                                            itemsize(k.out_dtype));
    const double tasks =
        static_cast<double>(sd.batch) * static_cast<double>(rows ? (sd.m + rows - 1) / rows : 0);
    const double Tk = static_cast<double>(sd.n), D = static_cast<double>(sd.k),
                 Dv = static_cast<double>(od.n), R = static_cast<double>(rows);
    const double ia = static_cast<double>(itemsize(s.contract->a_dtype)),
                 ib = static_cast<double>(itemsize(s.contract->b_dtype)),
                 iv = static_cast<double>(itemsize(o.contract->b_dtype));
    const double elems = static_cast<double>(numel(w.shape)) * Tk;
    auto other_loads = [&](NodeRef root) {
      double n = 0;
      for (NodeRef x : toposort({root}))
        if (x->op == Op::Load && w.slots[static_cast<size_t>(arg_load(x).param)] != s.slots[0])
          n += static_cast<double>(itemsize(x->dtype));
      return n;
    };
    t.flops =
        2 * static_cast<double>(sd.batch * sd.m) * Tk * (D + Dv) + elems * arith_nodes(w.body);
    t.global_bytes = out_bytes + tasks * R * D * ia +
                     tasks * static_cast<double>(gpu_attention_groups(sd.n, rows)) * Tk * D * ib +
                     tasks * static_cast<double>(gpu_attention_groups(od.n, rows)) * Dv * Tk * iv +
                     elems * other_loads(w.body);
    for (const RowStage& st : w.stages) {
      t.flops += elems * (arith_nodes(st.rbody) + 1);
      t.global_bytes += elems * other_loads(st.rbody);
    }
    return t;
  }
  if (k.contract) {
    const Mnk d = mnk(k);
    const double ia = static_cast<double>(itemsize(k.contract->a_dtype)),
                 ib = static_cast<double>(itemsize(k.contract->b_dtype));
    const double M = static_cast<double>(d.m), N = static_cast<double>(d.n),
                 K = static_cast<double>(d.k), B = static_cast<double>(d.batch);
    t.flops = 2 * B * M * N * K + outs * arith_nodes(k.body);
    // The epilogue's own loads, once per output.
    t.global_bytes = out_bytes + outs * load_bytes(k.body);
    if (plan.gpu && plan.tiles) {
      // Each tile stages bm x K of A and K x bn of B once (partial tiles load what is inside).
      const GemmTile& g = kGemmTile;
      const double tm = std::ceil(M / g.bm), tn = std::ceil(N / g.bn);
      t.global_bytes += B * K * (tn * M * ia + tm * N * ib);
    } else {
      // One thread per output reads its row of A and column of B.
      t.global_bytes += B * M * N * K * (ia + ib);
    }
    return t;
  }
  if (k.library) {
    t.global_bytes = 2 * out_bytes;
    return t;
  }
  const double R = k.rbody || k.row() ? static_cast<double>(k.reduce_size()) : 0;
  if (k.row()) {
    // Every stage walks the row (its loads issued again: the row is served from cache, which
    // this count ignores, as it ignores it everywhere); the body runs per row element when it
    // writes rows.
    const double per = k.row_out ? R : 1;
    t.flops = outs * per * arith_nodes(k.body);
    t.global_bytes = out_bytes * per + outs * per * load_bytes(k.body);
    for (const RowStage& st : k.stages) {
      t.flops += outs * R * (arith_nodes(st.rbody) + 1);
      t.global_bytes += outs * R * load_bytes(st.rbody);
    }
    return t;
  }
  t.flops = outs * (arith_nodes(k.body) + R * (arith_nodes(k.rbody) + 1));
  t.global_bytes = out_bytes + outs * (load_bytes(k.body) + R * load_bytes(k.rbody));
  return t;
}

// Grouping adjacent outputs pays when the reduced expression reads memory contiguous along the
// output's last axis, and stays small enough to compile quickly.
static bool groups_well(const KernelSpec& k) {
  auto nodes = toposort({k.rbody});
  bool contiguous_out = false;
  for (NodeRef n : nodes)
    if (n->op == Op::Load && arg_load(n).view.strides[k.shape.size() - 1] == 1)
      contiguous_out = true;
  return contiguous_out && nodes.size() <= 48;
}

Plan applicable(const KernelSpec& k, Plan p) {
  const bool one_block_rows = k.rbody && k.blocks() == 1 && !k.shape.empty();
  const bool lowered_reduction = (k.rbody || k.row()) && !k.contract && !k.library;
  // A row kernel's lanes run as threads only with rows:lanes (else one thread per row).
  if (!k.row() || !p.gpu || !p.lane_threads || k.contract || k.library) p.row_lanes = false;
  if (!(k.rbody || p.row_lanes) || k.contract || k.library) {
    p.lane_threads = false;
    p.lane_unroll = 0;
  }
  if (k.rbody || k.row() || k.contract || k.library) p.vector4 = false;
  // Several blocks: grouped only where every output is in a whole group (Reduction's
  // grouped_blocks_host) and the blocks are not interleaved.
  const bool grouped_blocks =
      k.rbody && k.blocks() > 1 && !k.shape.empty() && k.shape.back() % 16 == 0 && p.blocks == 1;
  if (!(one_block_rows || grouped_blocks) || k.contract || k.library) p.group = 1;
  if (!k.rbody || k.contract || k.library || p.gpu || k.blocks() < 2) p.blocks = 1;
  if (!k.contract || !p.gpu) p.tiles = false;
  if (!p.tiles) p.mma = MatmulPrecision::Highest;
  if (!p.tiles || p.mma != MatmulPrecision::Highest) p.async_copy = false;
  // Host lanes step as a vector or unrolled only in a reduction's (or row kernel's) lane loop;
  // the GPU never uses the host's choice.
  if (p.gpu)
    p.vector_lanes = false;
  else if (!lowered_reduction)
    p.vector_lanes = true;
  return p;
}

Plan optimise(const KernelSpec& k, const DeviceDesc& device) {
  Plan p;
  p.gpu = device.gpu;
  p.vector_lanes = !device.gpu;
  // A sized kernel (codegen/lower/sized.cpp) has placeholder sizes: only a reduction's lanes
  // are planned, as vectors (a row's adjacent elements, or a group's adjacent outputs).
  if (k.runtime_sizes()) {
    p.vector_lanes = !device.gpu && k.sizes != RuntimeSizes::Strided;
    return p;
  }
  if (!device.gpu && reduction(k) && k.blocks() == 1 && !k.shape.empty() && k.shape.back() >= 16) {
    // (a matmul's right operand, reduced along its rows)
    if (groups_well(k)) p.group = 16;
  }
  if (!device.gpu && reduction(k) && k.blocks() > 1) {
    // A block's 8 lanes are one chain of vector adds, so a core waits on the add's latency
    // between steps (measured on the bench machine, one thread, 1 MiB in L2: 45 GB/s one block
    // at a time, 60-66 GB/s with 2 or 4 interleaved; from memory the single chain also falls
    // behind more after each stall). Several full blocks per work item interleave their chains;
    // a group is taken only where each output has that many full blocks, and only while there
    // are still as many items as threads.
    const int64_t outs = numel(k.shape), nb = k.blocks(), full = k.reduce_size() / kReduceBlock;
    for (int g : {4, 2})
      if (g <= full && outs * ((nb + g - 1) / g) >= int64_t{std::max(device.threads, 1)}) {
        p.blocks = g;
        break;
      }
  }
  if (!device.gpu && reduction(k) && k.blocks() > 1 && p.blocks == 1 && !k.shape.empty() &&
      k.shape.back() % 16 == 0) {
    // Blocks that do not interleave (fewer than two full ones per output) can group adjacent
    // outputs instead, where the reduced expression reads along the output's last axis: the
    // per-channel sums of a channels-last tensor (a convolution's bias gradient, batch norm's
    // statistics), which one output at a time read a cache line apart.
    if (groups_well(k)) p.group = 16;
  }
  if (device.gpu && device.lane_exchange && reduction(k) && numel(k.rshape) >= 2 * kReduceLanes &&
      reduction_contiguous(k)) {
    p.lane_threads = true;
    p.lane_unroll = device.lane_unroll;
  }
  if (device.gpu && device.lane_bcast && k.row() && numel(k.rshape) >= 2 * kReduceLanes &&
      rows_contiguous(k)) {
    // A row of 8 threads: as for a reduction, rows of at least 16 elements read along memory.
    p.lane_threads = true;
    p.lane_unroll = device.lane_unroll;
    p.row_lanes = true;
  }
  if (device.gpu && device.vector_types && vector4_possible(k)) p.vector4 = true;
  if (device.gpu && device.block_tiles && k.contract && k.contract->dtype == DType::Float32) {
    // Tiles pay once a block's tile is at least half used along both axes.
    const Mnk d = mnk(k);
    if (d.m >= kGemmTile.bm / 2 && d.n >= kGemmTile.bn / 2 && d.k >= 1) p.tiles = true;
    // The opt-in precision: float32 operands on a device with matrix fragments.
    if (p.tiles && device.mma && float32_operands(k)) p.mma = device.precision;
    if (p.tiles && device.async_copy && p.mma == MatmulPrecision::Highest) p.async_copy = true;
  }
  // RUNE_PLAN, read once: where valid for this kernel on this kind of device, it replaces the
  // default (the bits cannot change; tests/lower/test_plans.cpp checks that they do not). A
  // value that does not parse raises at every kernel's plan (the static is never initialised).
  static const std::optional<Plan> forced = []() -> std::optional<Plan> {
    const auto& text = ir::env::value(ir::env::Var::Plan);
    if (!text || text->empty()) return std::nullopt;
    std::string error;
    std::optional<Plan> plan = parse_plan(*text, &error);
    // parse_plan's error names the plan; the message names it once, as RUNE_PLAN's value.
    const std::string named = "plan \"" + *text + "\": ";
    if (error.rfind(named, 0) == 0) error.erase(0, named.size());
    if (!plan)
      throw std::invalid_argument(
          ir::env::bad_value(ir::env::Var::Plan, *text, "is not a plan: " + error,
                             "the syntax DEBUG=3 prints, e.g. \"host lanes:unrolled group:16\""));
    return plan;
  }();
  if (forced && forced->gpu == device.gpu && validate(k, *forced).empty() &&
      (forced->mma == MatmulPrecision::Highest || device.mma) &&
      (!forced->async_copy || device.async_copy))
    return applicable(k, *forced);
  return applicable(k, p);
}

}  // namespace codegen
