#include "runtime/program.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "ir/debug.h"
#include "runtime/launcher.h"
#include "runtime/temp_placement.h"

namespace runtime {

void Program::finalize() {
  launcher_ = &launcher_for(device, "rune::compile");
  const int64_t align = launcher_->temp_alignment();
  temp_offset.assign(slot_bytes.size(), -1);
  temp_bytes = 0;
  std::vector<bool> is_output(slot_bytes.size(), false);
  for (int s : output_slots) is_output[s] = true;
  // Each slot's first and last step. A temporary no step names is kept alive for the whole run
  // (never shared), so nothing relies on a step list that names every buffer it touches twice.
  const int last_step = std::max<int>(static_cast<int>(steps.size()) - 1, 0);
  std::vector<int> first(slot_bytes.size(), -1), last(slot_bytes.size(), -1);
  for (size_t i = 0; i < steps.size(); ++i)
    for (int s : steps[i].slots) {
      if (first[s] < 0) first[s] = static_cast<int>(i);
      last[s] = static_cast<int>(i);
    }
  std::vector<int> temps;
  std::vector<TempInterval> intervals;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (is_output[s]) continue;
    temps.push_back(static_cast<int>(s));
    if (first[s] < 0)
      intervals.push_back({slot_bytes[s], 0, last_step});
    else
      intervals.push_back({slot_bytes[s], first[s], last[s]});
  }
  TempPlacement placed = place_temporaries(intervals, align);
  for (size_t t = 0; t < temps.size(); ++t) temp_offset[temps[t]] = placed.offset[t];
  temp_bytes = placed.bytes;
  launcher_state = launcher_->prepare(*this);
  if (ir::debug_level() >= 3 && !temps.empty()) print_temp_lifetimes(intervals, temp_bytes);
}

// DEBUG=3: the temporaries' block against the most bytes alive at one step (a lower bound of
// any placement), and that step: where a program's memory goes.
void Program::print_temp_lifetimes(const std::vector<TempInterval>& intervals,
                                   int64_t block) const {
  std::vector<int64_t> live(std::max<size_t>(steps.size(), 1), 0);
  std::vector<int> count(live.size(), 0);
  for (const auto& t : intervals)
    for (int i = t.first; i <= t.last; ++i) {
      live[i] += t.bytes;
      ++count[i];
    }
  const size_t at = static_cast<size_t>(std::max_element(live.begin(), live.end()) - live.begin());
  std::fprintf(stderr,
               "rune: memory: %zu temporaries in a block of %lld bytes; at most %lld bytes alive "
               "(%d temporaries, at step %zu of %zu)\n",
               intervals.size(), static_cast<long long>(block), static_cast<long long>(live[at]),
               count[at], at, steps.size());
}

std::vector<BufferRef> Program::run(char* const* inputs, size_t n, const BufferRef* reuse) const {
  if (n != static_cast<size_t>(n_inputs))
    throw std::logic_error("runtime: program bound to the wrong number of inputs");
  if (!launcher_) throw std::logic_error("runtime: program run before Program::finalize");
  const Launcher& launcher = *launcher_;
  const Device memory = launcher.memory();
  // Small programs (the eager case) keep their slot tables on the stack.
  constexpr size_t kSmall = 8;
  BufferRef owned_small[kSmall];
  char* ptr_small[kSmall];
  std::vector<BufferRef> owned_big;
  std::vector<char*> ptr_big;
  BufferRef* owned = owned_small;
  char** ptr = ptr_small;
  if (slot_bytes.size() > kSmall) {
    owned_big.resize(slot_bytes.size());
    ptr_big.resize(slot_bytes.size());
    owned = owned_big.data();
    ptr = ptr_big.data();
  }
  for (int i = 0; i < n_inputs; ++i) ptr[i] = inputs[i];
  if (reuse)
    for (size_t o = 0; o < output_slots.size(); ++o)
      if (reuse[o]) owned[output_slots[o]] = reuse[o];
  // One block holds every temporary; it lives until the run returns (on a GPU the block goes
  // back to the cache while its kernels are queued: later work is queued after them).
  BufferRef temps = temp_bytes > 0 ? allocate(memory, static_cast<size_t>(temp_bytes)) : nullptr;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (temp_offset[s] >= 0) {
      ptr[s] = static_cast<char*>(temps->data) + temp_offset[s];
      continue;
    }
    if (!owned[s]) owned[s] = allocate(memory, static_cast<size_t>(slot_bytes[s]));
    ptr[s] = static_cast<char*>(owned[s]->data);
  }
  launch_steps(ptr);
  std::vector<BufferRef> out;
  out.reserve(output_slots.size());
  for (int s : output_slots) out.push_back(std::move(owned[s]));
  return out;
}

void Program::launch_steps(char* const* slot_ptrs) const {
  launcher_->launch_steps(*this, slot_ptrs);
}

}  // namespace runtime
