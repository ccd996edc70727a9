// Checks a trace recorded (nx::check calls met while tracing f), replayed after the graph that
// computes them ran through the current interpreter. Every transformation that replays a traced
// graph replays its checks with it, so a check keeps its forward meaning under rune::grad,
// value_and_grad, vjp, jvp and vmap: eagerly it raises (or, on an asynchronous device, is queued
// and raised at the next wait); inside rune::jit it becomes a check of the enclosing program.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"
#include "trace/tracer.h"

namespace rune::detail {

// Appends the nodes replay_checks reads to `roots`: each check's first false index, then its data.
void append_check_roots(const std::vector<Tracer::Check>& checks, std::vector<ir::NodeRef>& roots);

// Replays `checks` from their values, which start at vals[at] in append_check_roots' order: a
// check whose first false index is k becomes nx::check of (flat index != k), which fails at the
// same index with the same data and message. Checks run in trace order.
void replay_checks(const std::vector<Tracer::Check>& checks, const std::vector<nx::Tensor>& vals,
                   size_t at, nx::Device device);

// The batched form for rune::vmap, from the values of append_check_roots' nodes batched (the
// batch axis at 0: each check's first false index per example, int64 [B], then its data,
// [B] ++ the per-example shape), which start at vals[at]. The check fails when any example
// fails; its message is the first failing example's own (in example order), with
// " (<api>: example b of B fails)" appended.
void replay_batched_checks(const char* api, const std::vector<Tracer::Check>& checks,
                           const std::vector<nx::Tensor>& vals, size_t at, int64_t batch,
                           nx::Device device);

}  // namespace rune::detail
