#include "codegen/memory_order.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace codegen {

namespace {

// The host function of a host call's step, else null.
const ir::HostFn* host_fn(const KernelSpec& k) {
  return k.library && k.library->op == ir::Op::HostCall ? k.library->host.fn.get() : nullptr;
}

// The slots kernel k writes: slots[0], and an attention gradient kernel's other outputs.
std::vector<int> written(const KernelSpec& k) {
  std::vector<int> w{k.slots[0]};
  w.insert(w.end(), k.also_writes.begin(), k.also_writes.end());
  return w;
}

// The greedy choice is myopic: when every ready kernel allocates, the tie goes to the
// scheduler's order, which can run a kernel long before its result is read (the recomputed
// first block of a checkpointed gradient, right after the forward pass, holding its values
// through the whole backward pass). So, last to first, a kernel that allocates a temporary at
// least as large as the temporaries it is the last reader of moves down to just before the
// first kernel that waits for it (and never past the last reader of another temporary it
// reads): its result is born later by as many steps as what it frees dies later, so no step
// holds more bytes than before. Last to first, a chain of such kernels moves down together.
// Dependencies are kept, so the bits are too.
void sink_allocations(std::vector<int>& order, const std::vector<std::vector<int>>& after,
                      const std::vector<std::vector<int>>& reads, const std::vector<bool>& temp,
                      const std::vector<int64_t>& bytes, const Schedule& s) {
  const size_t n = order.size();
  std::vector<int> pos(n);
  auto renumber = [&](size_t from, size_t to) {
    for (size_t i = from; i <= to; ++i) pos[order[i]] = static_cast<int>(i);
  };
  renumber(0, n - 1);
  std::vector<std::vector<int>> readers(temp.size()), writers(temp.size());
  for (size_t k = 0; k < n; ++k) {
    for (int r : reads[k]) readers[r].push_back(static_cast<int>(k));
    for (int w : written(s.kernels[k])) writers[w].push_back(static_cast<int>(k));
  }
  for (size_t i = n; i-- > 0;) {
    const int k = order[i];
    const int w = s.kernels[k].slots[0];
    // (A kernel writing several slots stays where it is.)
    if (!temp[w] || after[k].empty() || !s.kernels[k].also_writes.empty()) continue;
    if (const ir::HostFn* h = host_fn(s.kernels[k]);
        h && h->placement() == ir::HostFn::Placement::Early)
      continue;                // placed as early as it can run, on purpose
    bool first_writer = true;  // a slot written twice is allocated by its first writer
    for (int other : writers[w]) first_writer &= pos[other] >= static_cast<int>(i);
    if (!first_writer) continue;
    int to = static_cast<int>(n);
    for (int a : after[k]) to = std::min(to, pos[a] - 1);
    int64_t freed = 0;
    for (int r : reads[k]) {
      if (!temp[r]) continue;
      int last = -1;
      for (int reader : readers[r]) last = std::max(last, pos[reader]);
      if (last == static_cast<int>(i))
        freed += bytes[r];  // k is r's last reader: r lives as long as k waits
      else
        to = std::min(to, last - 1);  // never past r's last reader
    }
    if (freed > bytes[w] || to <= static_cast<int>(i)) continue;
    order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
    order.insert(order.begin() + to, k);
    renumber(i, static_cast<size_t>(to));
  }
}

}  // namespace

void order_for_memory(Schedule& s) {
  const size_t n = s.kernels.size();
  if (n < 3) return;
  const size_t n_slots = s.slots.size();
  std::vector<bool> temp(n_slots, true);
  for (int i = 0; i < s.n_inputs; ++i) temp[i] = false;
  for (int o : s.output_slots) temp[o] = false;
  std::vector<int64_t> bytes(n_slots, 0);
  for (size_t i = 0; i < n_slots; ++i)
    if (temp[i]) bytes[i] = std::max<int64_t>(s.slots[i].numel, 1) * itemsize(s.slots[i].dtype);
  // Per kernel: the distinct slots it reads (slots[1...], less its own outputs).
  std::vector<std::vector<int>> reads(n);
  for (size_t k = 0; k < n; ++k) {
    const auto& sl = s.kernels[k].slots;
    const std::vector<int> out = written(s.kernels[k]);
    for (size_t p = 1; p < sl.size(); ++p)
      if (std::find(out.begin(), out.end(), sl[p]) == out.end() &&
          std::find(reads[k].begin(), reads[k].end(), sl[p]) == reads[k].end())
        reads[k].push_back(sl[p]);
  }
  // Dependencies from the scheduler's order: per slot, its last writer and its readers since.
  std::vector<std::vector<int>> after(n);  // kernels that must wait for k
  std::vector<int> waiting(n, 0);
  std::vector<int> priority(n, 0);  // higher runs first among the ready, before memory gain
  {
    std::vector<int> last_writer(n_slots, -1);
    std::vector<std::vector<int>> readers_since(n_slots);
    std::vector<std::vector<int>> deps(n);
    int last_host = -1;
    for (size_t k = 0; k < n; ++k) {
      for (int r : reads[k]) {
        if (last_writer[r] >= 0) deps[k].push_back(last_writer[r]);
        readers_since[r].push_back(static_cast<int>(k));
      }
      // Host calls (ir/host_fn.h) keep the scheduler's order among themselves (those that
      // move messages: HostFn::ordered).
      if (const ir::HostFn* h = host_fn(s.kernels[k]); h && h->ordered()) {
        if (last_host >= 0) deps[k].push_back(last_host);
        last_host = static_cast<int>(k);
      }
      for (int w : written(s.kernels[k])) {
        if (last_writer[w] >= 0) deps[k].push_back(last_writer[w]);
        for (int r : readers_since[w])
          if (r != static_cast<int>(k)) deps[k].push_back(r);
        readers_since[w].clear();
        last_writer[w] = static_cast<int>(k);
      }
      std::sort(deps[k].begin(), deps[k].end());
      deps[k].erase(std::unique(deps[k].begin(), deps[k].end()), deps[k].end());
      waiting[k] = static_cast<int>(deps[k].size());
      for (int d : deps[k]) after[d].push_back(static_cast<int>(k));
    }
    // Placement (HostFn::placement): an Early call and the kernels it waits for go first when
    // ready, a Late call last.
    for (size_t k = 0; k < n; ++k) {
      const ir::HostFn* h = host_fn(s.kernels[k]);
      if (!h) continue;
      if (h->placement() == ir::HostFn::Placement::Early) {
        priority[k] = 2;
        for (int d : deps[k]) priority[d] = std::max(priority[d], 1);
      } else if (h->placement() == ir::HostFn::Placement::Late) {
        priority[k] = -1;
      }
    }
  }
  // Readers still to run per slot; whether a temporary holds memory yet.
  std::vector<int> unread(n_slots, 0);
  for (size_t k = 0; k < n; ++k)
    for (int r : reads[k]) ++unread[r];
  std::vector<bool> live(n_slots, false);
  auto gain = [&](size_t k) {  // bytes freed minus bytes allocated by running k now
    int64_t g = 0;
    for (int w : written(s.kernels[k]))
      if (temp[w] && !live[w]) g -= bytes[w];
    for (int r : reads[k])
      if (temp[r] && unread[r] == 1) g += bytes[r];
    return g;
  };
  std::vector<int> ready;
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) ready.push_back(static_cast<int>(k));
  std::vector<int> order;  // kernels by their index in the scheduler's order
  order.reserve(n);
  while (!ready.empty()) {
    size_t best = 0;
    int64_t best_gain = gain(ready[0]);
    for (size_t i = 1; i < ready.size(); ++i) {
      int64_t g = gain(ready[i]);
      const int p = priority[ready[i]], best_p = priority[ready[best]];
      if (p > best_p ||
          (p == best_p && (g > best_gain || (g == best_gain && ready[i] < ready[best])))) {
        best = i;
        best_gain = g;
      }
    }
    int k = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    for (int w : written(s.kernels[k])) live[w] = true;
    for (int r : reads[k]) --unread[r];
    for (int a : after[k])
      if (--waiting[a] == 0) ready.push_back(a);
    order.push_back(k);
  }
  sink_allocations(order, after, reads, temp, bytes, s);
  std::vector<KernelSpec> ordered;
  ordered.reserve(n);
  for (int k : order) ordered.push_back(std::move(s.kernels[k]));
  s.kernels = std::move(ordered);
}

}  // namespace codegen
