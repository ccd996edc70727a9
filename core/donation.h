// Donation (SEMANTICS.md §3): nx::donate(x) gives x up to the next operation that reads it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace nx {

// Marks x as donated and returns it (the same value, usable until its consumer runs).
Tensor donate(const Tensor& x);
// Raises std::invalid_argument "<api>: <dtype> <shape> was donated to <consumer>" if t is dead.
void check_alive(const Tensor& t, const char* api);
// Called by every consumer before it runs: checks that no operand is dead and that no donation
// is read twice, then kills the donated operands (recording `consumer`). Returns, per operand,
// whether it was donated (empty when none was). Nothing is consumed when it raises.
std::vector<bool> consume_donations(const std::vector<Tensor>& srcs, std::string_view consumer,
                                    std::string_view consumer_suffix = {});
bool is_dead(const Tensor& t);

}  // namespace nx
