// The NCCL / RCCL calls of each collective and the rank-order fold kernel
// (distributed/gpu/gpu_collective_queue.h).
#include "distributed/gpu/gpu_collective_queue.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "codegen/compile.h"
#include "ir/full.h"
#include "ir/node.h"
#include "runtime/gpu/context.h"

namespace rune::distributed::detail {

namespace {

using ir::DType;
using ir::NodeRef;
using ir::Op;

// NCCL's ncclDataType_t and ncclRedOp_t (nccl.h; RCCL's are the same numbers).
constexpr int kNcclUint8 = 1, kNcclSum = 0, kNcclMax = 2;
int nccl_type(DType t) {
  switch (t) {
    case DType::Int8:
      return 0;
    case DType::UInt8:
      return 1;
    case DType::Int32:
      return 2;
    case DType::UInt32:
      return 3;
    case DType::Int64:
      return 4;
    case DType::UInt64:
      return 5;
    case DType::Float16:
      return 6;
    case DType::Float32:
      return 7;
    case DType::Float64:
      return 8;
    case DType::BFloat16:
      return 9;
    default:
      return -1;
  }
}

// The program of the fold: param 0 holds `rows` rows of `width` elements (dtype t); the result is
// elements [lo, lo + len) of every row folded in row order with `op` (the host path's
// arithmetic, header comment), `len` elements. With native, param 0 is one row already summed
// by NCCL and the program only divides it by `rows` (native mean).
struct FoldKey {
  std::string device;
  DType t;
  ReduceOp op;
  int64_t rows, width, lo, len;
  bool native;
  bool operator<(const FoldKey& o) const {
    return std::tie(device, t, op, rows, width, lo, len, native) <
           std::tie(o.device, o.t, o.op, o.rows, o.width, o.lo, o.len, o.native);
  }
};

std::shared_ptr<const runtime::Program> fold_program(const FoldKey& k, nx::Device device) {
  static std::mutex mu;
  static std::map<FoldKey, std::shared_ptr<const runtime::Program>> cache;
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(k); it != cache.end()) return it->second;
  }
  ir::NodeUse use;  // the nodes below stay interned until compile has taken them
  const DType wide = ir::is_half(k.t) ? DType::Float32 : k.t;
  const ir::Shape shape{k.len};
  auto widen = [&](NodeRef x) { return wide == k.t ? x : ir::make(Op::Cast, wide, shape, {x}); };
  NodeRef acc = nullptr;
  if (k.native) {
    acc = widen(ir::contiguous_param(0, k.t, shape));
  } else {
    NodeRef p = ir::contiguous_param(0, k.t, {k.rows, k.width});
    for (int64_t q = 0; q < k.rows; ++q) {
      NodeRef row =
          ir::make(Op::Shrink, k.t, {1, k.len}, {p}, ir::Pairs{{q, q + 1}, {k.lo, k.lo + k.len}});
      NodeRef x = widen(ir::make(Op::Reshape, k.t, shape, {row}));
      acc = q == 0 ? x : ir::make(k.op == ReduceOp::Max ? Op::Max : Op::Add, wide, shape, {acc, x});
    }
  }
  if (k.op == ReduceOp::Mean)
    acc = ir::make(Op::Div, wide, shape, {acc, ir::full(wide, static_cast<double>(k.rows), shape)});
  if (wide != k.t) acc = ir::make(Op::Cast, k.t, shape, {acc});
  auto prog = codegen::compile({acc}, 1, device);
  std::lock_guard lock(mu);
  return cache.emplace(k, prog).first->second;
}

// Runs `prog` on `in`, writing its one output into `out` (borrowed: rune does not own it), on
// c's stream.
void run_into(const runtime::Program& prog, runtime::gpu::Context& c, const void* in, void* out,
              size_t out_bytes) {
  char* inputs[1] = {static_cast<char*>(const_cast<void*>(in))};
  runtime::BufferRef dst =
      std::make_shared<runtime::Buffer>(c.device(), out, out_bytes, std::function<void()>{});
  prog.run(inputs, 1, &dst);
}

void check(const GpuCommunicator::Impl& g, const char* api, const char* call, int rc) {
  if (rc != 0)
    throw distributed_error(gpu_collective_error(*g.lib, api, call, rc, g.comm, g.device));
}

}  // namespace

void check_gpu_headers(const GpuCommunicator::Impl& g, const char* api, const CollectiveCall& call,
                       DType t, const ir::Shape& in_shape) {
  if (g.local) {
    std::string what = std::string(ir::name(t)) + " " + ir::to_string(in_shape);
    if (call.kind == Collective::Broadcast)
      what += " (root " + std::to_string(call.root) + ")";
    else if (call.kind != Collective::AllGather)
      what += " (op " + std::string(op_name(call.op)) + ")";
    g.local->check(api, g.rank, api, what);
  } else {
    check_headers(g.host, api, call, t, in_shape);
  }
}

void queue_nccl(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                const CollectiveCall& call, DType t, const ir::Shape& in_shape, const void* in,
                void* out, GpuCollectiveWork& work) {
  const size_t n = static_cast<size_t>(ir::numel(in_shape));
  const size_t bytes = n * static_cast<size_t>(ir::itemsize(t));
  if (n == 0) return;
  const auto& lib = *g.lib;
  void* stream = c.handle();
  const bool reduces = call.kind == Collective::AllReduce || call.kind == Collective::ReduceScatter;
  if (reduces && g.native) {
    const int type = nccl_type(t);
    if (type < 0)
      throw distributed_error(std::string(api) + ": " + std::string(ir::name(t)) +
                              " has no NCCL data type (native reductions, RUNE_NCCL_NATIVE=1, "
                              "take int8, uint8, int32, uint32, int64, uint64 and float types)");
    const int op = call.op == ReduceOp::Max ? kNcclMax : kNcclSum;
    if (call.kind == Collective::AllReduce)
      check(g, api, "ncclAllReduce", lib.all_reduce(in, out, n, type, op, g.comm, stream));
    else
      check(g, api, "ncclReduceScatter",
            lib.reduce_scatter(in, out, n / static_cast<size_t>(g.size), type, op, g.comm, stream));
    return;
  }
  switch (call.kind) {
    case Collective::AllReduce:
    case Collective::ReduceScatter:
    case Collective::Bucket:
      // Every rank's whole operand, as rows in rank order, for the fold.
      work.rows = runtime::allocate(c.device(), bytes * static_cast<size_t>(g.size));
      check(g, api, "ncclAllGather",
            lib.all_gather(in, work.rows->data, bytes, kNcclUint8, g.comm, stream));
      return;
    case Collective::AllGather:
      check(g, api, "ncclAllGather", lib.all_gather(in, out, bytes, kNcclUint8, g.comm, stream));
      return;
    case Collective::Broadcast:
      check(g, api, "ncclBroadcast",
            lib.broadcast(in, out, bytes, kNcclUint8, call.root, g.comm, stream));
      return;
  }
}

void queue_fold(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                const CollectiveCall& call, DType t, const ir::Shape& in_shape, void* out,
                GpuCollectiveWork& work) {
  (void)api;
  const int64_t n = ir::numel(in_shape);
  if (n == 0) return;
  const bool reduces = call.kind == Collective::AllReduce ||
                       call.kind == Collective::ReduceScatter || call.kind == Collective::Bucket;
  if (!reduces) return;
  const int64_t len = call.kind == Collective::ReduceScatter ? n / g.size : n;
  const size_t out_bytes = static_cast<size_t>(len * ir::itemsize(t));
  if (g.native) {  // NCCL's sum is in `out`; mean divides it there (elementwise: in place is safe)
    if (call.op != ReduceOp::Mean) return;
    FoldKey k{g.device.name(), t, call.op, g.size, len, 0, len, true};
    run_into(*fold_program(k, g.device), c, out, out, out_bytes);
    return;
  }
  const int64_t lo = call.kind == Collective::ReduceScatter ? g.rank * len : 0;
  FoldKey k{g.device.name(), t, call.op, g.size, n, lo, len, false};
  run_into(*fold_program(k, g.device), c, work.rows->data, out, out_bytes);
  // The rows go back to the cache now: only work queued later on this stream can reuse them.
  work.rows.reset();
}

void queue_gpu_collective(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                          const CollectiveCall& call, DType t, const ir::Shape& in_shape,
                          const void* in, void* out) {
  check_gpu_headers(g, api, call, t, in_shape);
  GpuCollectiveWork work;
  c.make_current();
  queue_nccl(g, c, api, call, t, in_shape, in, out, work);
  queue_fold(g, c, api, call, t, in_shape, out, work);
}

}  // namespace rune::distributed::detail
