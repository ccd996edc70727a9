// The collectives on host bytes, over detail::exchange (point-to-point messages with a
// deadline): what the HostCall steps of rune::distributed's collectives run (eagerly and inside
// rune::jit programs alike) and what the bucketed reductions of data_parallel use. Every
// collective is a header exchange (what each rank passed) and then its data messages.
#pragma once
#include <cstdint>

#include "distributed/collectives.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace rune::distributed::detail {

enum class Collective : int64_t { AllReduce, AllGather, ReduceScatter, Broadcast, Bucket };

// What a rank asks for: the collective, its reduction (AllReduce, ReduceScatter, Bucket) and
// root (Broadcast).
struct CollectiveCall {
  Collective kind;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
};

// The reduction's name in messages: "sum", "mean", "max".
const char* op_name(ReduceOp op);

// Raises naming api unless op reduces dtype t (mean: float dtypes; sum: not bool).
void check_reduce_op(const char* api, ir::DType t, ReduceOp op);

// Exchanges a header (call, dtype, shape) with every rank; raises on every rank naming the
// first rank whose call differs from rank 0's, and breaks the communicator.
void check_headers(const Communicator& comm, const char* api, const CollectiveCall& call,
                   ir::DType t, const ir::Shape& shape);

// Reduces `n` elements at `data` over the ranks: rank r's chunk r of `out` (elements
// [r n / w, (r + 1) n / w)) gets the rank-order fold of every rank's chunk r; with `gather`,
// every rank's `out` then holds every reduced chunk.
void reduce_chunks(const Communicator& comm, const char* api, ir::DType t, ReduceOp op,
                   const uint8_t* data, size_t n, uint8_t* out, bool gather);

// The whole collective on contiguous host memory: headers, then data. `in` is the operand
// (dtype t, in_shape), `out` the result (all_reduce, broadcast: in_shape; all_gather:
// [size, in_shape...]; reduce_scatter: in_shape with the leading axis divided by the size).
void run_collective(const Communicator& comm, const char* api, const CollectiveCall& call,
                    ir::DType t, const ir::Shape& in_shape, const void* in, void* out);

}  // namespace rune::distributed::detail
