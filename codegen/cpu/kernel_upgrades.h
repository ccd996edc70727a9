// Tiered host kernels (issue 42). A kernel the disk cache lacks is compiled at the quick tier
// (cpu::Tier::Quick, about a tenth of the full tier's compile time) and runs at once; its
// full-tier build is queued here and compiled by one background thread at the lowest CPU
// priority, from 250 ms after it was queued (a process over by then compiles none), written
// to the disk cache (later processes load the full tier), and swapped in:
// every program step running the kernel reads its entry point through the TieredKernel
// (runtime::Step::live_entry), so the launch after the swap runs the full tier. Both tiers give
// the same bits (cpu::Tier), so a swap, even between a two-phase reduction's two steps, changes
// speed only. RUNE_KERNEL_TIERS=0 compiles every kernel at the full tier at once (no thread),
// 2 at the quick tier only (never upgraded: tests, comparisons).
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace codegen::cpu {

// A kernel's entry points, the quick tier's until its upgrade is installed. Owned by the
// program steps using it (through their `keep`); the loaded objects live as long as it does.
struct TieredKernel {
  std::atomic<void*> main{nullptr}, phase1{nullptr};
  std::mutex mu;  // guards full_code
  std::shared_ptr<void> quick_code, full_code;
};

struct Upgrade {
  std::weak_ptr<TieredKernel> kernel;  // dropped when no program uses the kernel any more
  std::string ir;                      // the full tier's IR, its entry named `name`
  std::string name;
  std::string disk_key;  // where the full-tier object goes in the disk cache
  bool two_phase = false;
  // The quick tier's object and key when it was compiled now: the thread writes it to the disk
  // cache (off the caller's path: an entry's write and fsync cost about as much as its quick
  // compile) before its next full-tier compile.
  std::string quick_key, quick_object;
};

// 0 full tier only, 1 quick then full in the background (the default), 2 quick only
// (RUNE_KERNEL_TIERS, read once).
int kernel_tiers();
// Queues `u` (the background thread starts on first use; a process exiting cancels the compile
// in progress, skipping its passes left, and drops the queue).
void queue_upgrade(Upgrade u);
// Blocks until every upgrade queued so far is installed or dropped.
void wait_for_upgrades();
// Upgrades installed so far.
size_t upgrades_installed();
// Whether the thread has been stopped (at exit): later upgrades are dropped.
bool upgrades_stopped();

}  // namespace codegen::cpu
