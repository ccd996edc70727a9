#include "runtime/program.h"

#include <chrono>
#include <cstdio>

#include "ir/debug.h"
#include "runtime/thread_pool.h"

namespace runtime {

std::vector<BufferRef> HostProgram::run(const std::vector<char*>& inputs) const {
  std::vector<BufferRef> owned(slot_bytes.size());
  std::vector<char*> ptr(slot_bytes.size(), nullptr);
  for (int i = 0; i < n_inputs; ++i) ptr[i] = inputs[i];
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    owned[s] = allocate(Device::cpu(), static_cast<size_t>(slot_bytes[s]));
    ptr[s] = static_cast<char*>(owned[s]->data);
  }
  const bool timed = ir::debug_level() >= 2;
  for (const auto& st : steps) {
    char* bufs[32];
    std::vector<char*> big;
    char** b = bufs;
    if (st.slots.size() > 32) {
      big.resize(st.slots.size());
      b = big.data();
    }
    for (size_t p = 0; p < st.slots.size(); ++p) b[p] = ptr[st.slots[p]];
    auto t0 = std::chrono::steady_clock::now();
    parallel_for(st.items, st.cost, [&](int64_t lo, int64_t hi) { st.fn(b, lo, hi); });
    if (timed) {
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "rune: kernel %s on CPU: %lld items, %.1f us, %.2f GB/s\n", st.name.c_str(),
                   static_cast<long long>(st.items), us, us > 0 ? st.bytes / us / 1e3 : 0.0);
    }
  }
  std::vector<BufferRef> out;
  for (int s : output_slots) out.push_back(owned[s]);
  return out;
}

}  // namespace runtime
