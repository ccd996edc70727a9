// Checks a trace recorded (nx::check calls met while tracing f: Tracer::Check equations),
// replayed from the values of their nodes through the current interpreter. Every transformation
// that replays a traced graph replays its checks with it, so a check keeps its forward meaning
// under rune::grad, value_and_grad, vjp, jvp and vmap: eagerly it raises (or, on an asynchronous
// device, is queued and raised at the next wait); inside rune::jit it becomes a check of the
// enclosing program.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"
#include "trace/tracer.h"

namespace rune::detail {

// The nodes a check's replay reads: its first false index, then its data.
std::vector<ir::NodeRef> check_nodes(const Tracer::Check& c);

// Replays `c` from the values of check_nodes(c): a check whose first false index is k becomes
// nx::check of (flat index != k), which fails at the same index with the same data and message.
void replay_check(const Tracer::Check& c, const std::vector<nx::Tensor>& vals, nx::Device device);

// The batched form for rune::vmap, from the values of check_nodes(c) batched (the batch axis at
// 0: the first false index per example, int64 [B], then the data, [B] ++ the per-example
// shape). The check fails when any example fails; its message is the first failing example's
// own (in example order), with " (<api>: example b of B fails)" appended.
void replay_batched_check(const char* api, const Tracer::Check& c,
                          const std::vector<nx::Tensor>& vals, int64_t batch, nx::Device device);

}  // namespace rune::detail
