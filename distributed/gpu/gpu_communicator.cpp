// GPU communicators: creation (ncclCommInitRank over a host communicator's unique id,
// ncclCommInitAll for devices of this process), their errors, and the in-process header check.
#include <chrono>
#include <cstdlib>
#include <string>

#include "distributed/gpu/gpu_communicator_impl.h"
#include "distributed/host/transport.h"
#include "ir/env.h"
#include "runtime/gpu/context.h"

namespace rune::distributed {

namespace {

const char* label(GpuCollectives which) { return which == GpuCollectives::Nccl ? "NCCL" : "RCCL"; }

// The library of a GPU device's kind; raises naming the device where it is not a GPU or the
// library is absent.
GpuCollectives library_for(const char* api, const nx::Device& d) {
  if (d.kind == runtime::DeviceKind::CUDA) return GpuCollectives::Nccl;
  if (d.kind == runtime::DeviceKind::HIP) return GpuCollectives::Rccl;
  throw distributed_error(std::string(api) + ": " + d.name() +
                          " is not a GPU device (NCCL serves CUDA:n, RCCL HIP:n)");
}

const GpuCollectiveLibrary& loaded(const char* api, GpuCollectives which, const nx::Device& d) {
  const GpuCollectiveLibrary& lib = gpu_collective_library(which);
  if (!lib.error.empty())
    throw distributed_error(std::string(api) + ": collectives on " + d.name() + " need " +
                            label(which) + ": " + lib.error);
  return lib;
}

using detail::timeout_from_env;  // RUNE_DISTRIBUTED_TIMEOUT, as init() reads it

}  // namespace

bool native_gpu_reductions() {
  // Read once (ir::env caches it); a value other than 0, 1 or empty raises at every call.
  return ir::env::integer(ir::env::Var::NcclNative) == 1;
}

namespace detail {

std::string gpu_collective_error(const GpuCollectiveLibrary& lib, const std::string& api,
                                 const char* call, int rc, void* comm, const nx::Device& device) {
  const char* detail = lib.get_last_error ? lib.get_last_error(comm) : nullptr;
  return api + ": " + call + " failed on " + device.name() + " (" + lib.name +
         "): " + lib.get_error_string(rc) + " (" + std::to_string(rc) + ")" +
         (detail && *detail ? std::string(": ") + detail : "");
}

void LocalHeaders::check(const char* api, int rank, const std::string& call,
                         const std::string& mine) {
  std::unique_lock lock(mu_);
  if (!broken_.empty())
    throw distributed_error(std::string(api) +
                            ": the GPU communicator is broken by an earlier "
                            "failure: " +
                            broken_);
  const uint64_t k = next_[static_cast<size_t>(rank)]++;
  Round& r = rounds_[k];
  if (r.what.empty()) {
    r.call.resize(static_cast<size_t>(n_));
    r.what.resize(static_cast<size_t>(n_));
    r.posted.resize(static_cast<size_t>(n_));
  }
  r.call[static_cast<size_t>(rank)] = call;
  r.what[static_cast<size_t>(rank)] = mine;
  r.posted[static_cast<size_t>(rank)] = true;
  cv_.notify_all();
  auto all_posted = [&] {
    for (bool p : r.posted)
      if (!p) return false;
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
  if (!cv_.wait_until(lock, deadline, all_posted)) {
    std::string missing;
    for (int q = 0; q < n_; ++q)
      if (!r.posted[static_cast<size_t>(q)]) missing += " " + std::to_string(q);
    broken_ = std::string(api) + ": rank " + std::to_string(rank) + " timed out after " +
              std::to_string(static_cast<int>(timeout_)) + " s waiting for rank(s)" + missing +
              " of its GPU communicator to make the same call";
    cv_.notify_all();
    throw distributed_error(broken_);
  }
  std::string error;
  for (int q = 1; q < n_ && error.empty(); ++q) {
    const size_t i = static_cast<size_t>(q);
    if (r.call[i] != r.call[0])
      error = std::string(api) + ": the ranks disagree: rank " + std::to_string(q) + " called " +
              r.call[i] + " with " + r.what[i] + " but rank 0 called " + r.call[0] + " with " +
              r.what[0] + " (seen on rank " + std::to_string(rank) + ")";
    else if (r.what[i] != r.what[0])
      error = std::string(api) + ": the ranks disagree: rank " + std::to_string(q) + " passed " +
              r.what[i] + " but rank 0 passed " + r.what[0] + " (seen on rank " +
              std::to_string(rank) + ")";
  }
  if (++r.compared == n_) rounds_.erase(k);
  if (!error.empty()) {
    if (broken_.empty()) broken_ = error;
    throw distributed_error(error);
  }
}

}  // namespace detail

GpuCommunicator::Impl::~Impl() {
  if (comm && lib) lib->comm_destroy(comm);
}

GpuCommunicator::Impl& GpuCommunicator::impl(const char* api) const {
  if (!impl_)
    throw distributed_error(std::string(api) +
                            ": the GPU communicator is undefined (make one "
                            "with gpu_communicator or gpu_communicators)");
  return *impl_;
}
int GpuCommunicator::rank() const { return impl("rune::distributed::GpuCommunicator").rank; }
int GpuCommunicator::size() const { return impl("rune::distributed::GpuCommunicator").size; }
nx::Device GpuCommunicator::device() const {
  return impl("rune::distributed::GpuCommunicator").device;
}
bool GpuCommunicator::native_reductions() const {
  return impl("rune::distributed::GpuCommunicator").native;
}

GpuCommunicator gpu_communicator(const Communicator& comm, nx::Device device,
                                 bool native_reductions) {
  const char* api = "rune::distributed::gpu_communicator";
  const GpuCollectives which = library_for(api, device);
  const GpuCollectiveLibrary& lib = loaded(api, which, device);
  runtime::gpu::Context& ctx = runtime::gpu::context(device, api);
  // Every rank takes rank 0's id (a broadcast over the host communicator), then joins.
  const GpuUniqueId id = gpu_collective_unique_id(comm, which);
  NcclUniqueId nid;
  std::copy(id.begin(), id.end(), reinterpret_cast<uint8_t*>(nid.internal));
  auto impl = std::make_shared<GpuCommunicator::Impl>();
  impl->which = which;
  impl->lib = &lib;
  impl->rank = comm.rank();
  impl->size = comm.size();
  impl->device = device;
  impl->native = native_reductions;
  impl->host = comm;
  ctx.make_current();  // NCCL binds the communicator to the calling thread's current device
  void* c = nullptr;
  if (int rc = lib.comm_init_rank(&c, comm.size(), nid, comm.rank()); rc != 0)
    throw distributed_error(
        detail::gpu_collective_error(lib, api,
                                     ("ncclCommInitRank(rank " + std::to_string(comm.rank()) +
                                      " of " + std::to_string(comm.size()) + ")")
                                         .c_str(),
                                     rc, nullptr, device));
  impl->comm = c;
  return GpuCommunicator(std::move(impl));
}

std::vector<GpuCommunicator> gpu_communicators(const std::vector<nx::Device>& devices,
                                               bool native_reductions) {
  const char* api = "rune::distributed::gpu_communicators";
  if (devices.empty()) throw distributed_error(std::string(api) + ": no devices given");
  const GpuCollectives which = library_for(api, devices[0]);
  const GpuCollectiveLibrary& lib = loaded(api, which, devices[0]);
  timeout_from_env(api);  // a bad value raises before the communicator is made
  std::vector<int> ordinals;
  for (size_t i = 0; i < devices.size(); ++i) {
    const nx::Device& d = devices[i];
    if (d.kind != devices[0].kind)
      throw distributed_error(std::string(api) + ": " + d.name() + " and " + devices[0].name() +
                              " are of two kinds (one communicator holds one GPU kind)");
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == d)
        throw distributed_error(std::string(api) + ": device " + d.name() +
                                " is listed twice (at " + std::to_string(j) + " and " +
                                std::to_string(i) + ")");
    runtime::gpu::context(d, api);  // raises naming the device where it is unavailable
    ordinals.push_back(d.index);
  }
  std::vector<void*> comms(devices.size());
  if (int rc = lib.comm_init_all(comms.data(), static_cast<int>(devices.size()), ordinals.data());
      rc != 0)
    throw distributed_error(detail::gpu_collective_error(
        lib, api, ("ncclCommInitAll(" + std::to_string(devices.size()) + " devices)").c_str(), rc,
        nullptr, devices[0]));
  auto local = std::make_shared<detail::LocalHeaders>(static_cast<int>(devices.size()),
                                                      timeout_from_env(api));
  std::vector<GpuCommunicator> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto impl = std::make_shared<GpuCommunicator::Impl>();
    impl->which = which;
    impl->lib = &lib;
    impl->comm = comms[i];
    impl->rank = static_cast<int>(i);
    impl->size = static_cast<int>(devices.size());
    impl->device = devices[i];
    impl->native = native_reductions;
    impl->local = local;
    out.emplace_back(std::move(impl));
  }
  return out;
}

namespace detail {

const GpuCommunicator* gpu_communicator_of(const Communicator& comm, nx::Device device,
                                           const char* api) {
  const GpuCollectives which = library_for(api, device);
  if (!gpu_collective_library(which).error.empty()) return nullptr;
  // Never destroyed: NCCL communicators are not torn down during static destruction, after the
  // driver may be gone. The Communicator copy keeps the key's Impl alive (never reused).
  static std::mutex mu;
  static auto* cache =
      new std::map<std::pair<const void*, std::string>, std::pair<Communicator, GpuCommunicator>>;
  std::lock_guard lock(mu);
  const auto key = std::make_pair(static_cast<const void*>(&comm.impl(api)), device.name());
  auto it = cache->find(key);
  if (it == cache->end())
    it = cache->emplace(key, std::make_pair(comm, gpu_communicator(comm, device))).first;
  return &it->second.second;
}

}  // namespace detail

}  // namespace rune::distributed
