// The collectives of distributed/collectives.h over detail::exchange (point-to-point messages
// with a deadline). Every collective is: a header exchange (what each rank passed), then its
// data messages. Tags: kHeaderTag for headers, kDataTag for data; MPI keeps messages of one
// (peer, tag) in order, and every rank makes the same calls in the same order.
#include "distributed/collectives.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/io_internal.h"
#include "core/ops.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace rune::distributed {

namespace {
constexpr int kHeaderTag = 7101, kDataTag = 7102;
constexpr int kMaxDims = 16;

using ir::DType;
using nx::Tensor;

enum class Collective : int64_t { AllReduce, AllGather, ReduceScatter, Broadcast, Bucket };

// What one rank passed to a collective, in a fixed-size record every rank sends to every other.
struct Header {
  int64_t collective, op, root, dtype, ndim;
  int64_t dims[kMaxDims];
};

const char* op_name(int64_t op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

std::string describe(const Header& h) {
  std::string s = std::string(ir::name(static_cast<DType>(h.dtype))) + " " +
                  ir::to_string(ir::Shape(h.dims, h.dims + h.ndim));
  if (h.collective == static_cast<int64_t>(Collective::Broadcast))
    s += " (root " + std::to_string(h.root) + ")";
  else if (h.collective != static_cast<int64_t>(Collective::AllGather))
    s += " (op " + std::string(op_name(h.op)) + ")";
  return s;
}

Header make_header(const char* api, Collective c, DType t, const nx::Shape& shape, int64_t op,
                   int64_t root) {
  if (shape.size() > static_cast<size_t>(kMaxDims))
    throw distributed_error(std::string(api) + ": " + std::to_string(shape.size()) +
                            " dimensions (at most " + std::to_string(kMaxDims) + ")");
  Header h{};
  h.collective = static_cast<int64_t>(c);
  h.op = op;
  h.root = root;
  h.dtype = static_cast<int64_t>(t);
  h.ndim = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) h.dims[i] = shape[i];
  return h;
}

// Exchanges headers with every rank; raises on every rank (they all see every header) naming
// the first rank whose call differs from rank 0's, and breaks the communicator.
void check_headers(const Communicator& comm, const char* api, const Header& mine) {
  const int w = comm.size(), me = comm.rank();
  std::vector<Header> all(static_cast<size_t>(w));
  all[static_cast<size_t>(me)] = mine;
  std::vector<detail::Message> sends, recvs;
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    sends.push_back({q, const_cast<Header*>(&mine), sizeof(Header)});
    recvs.push_back({q, &all[static_cast<size_t>(q)], sizeof(Header)});
  }
  detail::exchange(comm, api, kHeaderTag, sends, recvs);
  for (int q = 1; q < w; ++q) {
    if (std::memcmp(&all[static_cast<size_t>(q)], &all[0], sizeof(Header)) == 0) continue;
    std::string what = std::string(api) + ": the ranks disagree: rank " + std::to_string(q) +
                       " passed " + describe(all[static_cast<size_t>(q)]) + " but rank 0 passed " +
                       describe(all[0]) + " (seen on rank " + std::to_string(me) + ")";
    detail::mark_broken(comm, what);
    throw distributed_error(what);
  }
}

void check_concrete(const char* api, const Tensor& x) {
  if (!x.defined()) throw distributed_error(std::string(api) + ": the tensor is undefined");
  if (x.is_traced())
    throw distributed_error(std::string(api) + ": " + x.describe() +
                            " is a traced value: collectives run on concrete tensors, outside "
                            "rune::jit (call them between compiled steps)");
}

void check_op(const char* api, DType t, ReduceOp op) {
  if (op != ReduceOp::Sum && op != ReduceOp::Mean && op != ReduceOp::Max)
    throw distributed_error(std::string(api) + ": unknown ReduceOp " +
                            std::to_string(static_cast<int>(op)));
  if (ir::is_half(t))
    throw distributed_error(std::string(api) + ": " + std::string(ir::name(t)) +
                            " reductions are not supported yet (cast to float32)");
  if (op == ReduceOp::Mean && !ir::is_float(t))
    throw distributed_error(std::string(api) + ": mean of " + std::string(ir::name(t)) +
                            " (mean needs a float dtype)");
  if (op == ReduceOp::Sum && t == DType::Bool)
    throw distributed_error(std::string(api) + ": sum of bool (cast to an integer dtype)");
}

// acc = acc op x elementwise, n elements of type T. Integer sums wrap (done unsigned).
template <class T>
void fold(ReduceOp op, T* acc, const T* x, size_t n) {
  if (op == ReduceOp::Max) {
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(acc[i])) continue;
        if (std::isnan(x[i]) || x[i] > acc[i] || (x[i] == 0 && acc[i] == 0 && std::signbit(acc[i])))
          acc[i] = x[i];
      } else if (x[i] > acc[i]) {
        acc[i] = x[i];
      }
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
  } else {
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < n; ++i)
      acc[i] = static_cast<T>(static_cast<U>(static_cast<U>(acc[i]) + static_cast<U>(x[i])));
  }
}
template <class T>
void divide(T* acc, size_t n, int w) {
  if constexpr (std::is_floating_point_v<T>)
    for (size_t i = 0; i < n; ++i) acc[i] = acc[i] / static_cast<T>(w);
}

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(bool{});
    case DType::UInt8:
      return f(uint8_t{});
    case DType::Int8:
      return f(int8_t{});
    case DType::Int16:
      return f(int16_t{});
    case DType::UInt16:
      return f(uint16_t{});
    case DType::Int32:
      return f(int32_t{});
    case DType::UInt32:
      return f(uint32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::UInt64:
      return f(uint64_t{});
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    default:
      throw std::logic_error("rune::distributed: no reduction for this dtype");
  }
}

// Reduces `n` elements at `data` over the ranks; on return, rank r's [chunk r] of `out` holds
// the rank-order fold of every rank's chunk r. Chunk c is elements [c n / w, (c + 1) n / w).
// With gather, every rank's `out` holds every reduced chunk.
void reduce_chunks(const Communicator& comm, const char* api, DType t, ReduceOp op,
                   const uint8_t* data, size_t n, uint8_t* out, bool gather) {
  const int w = comm.size(), me = comm.rank();
  const size_t isz = static_cast<size_t>(ir::itemsize(t));
  auto begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(w); };
  const size_t mine_begin = begin(me), mine_n = begin(me + 1) - mine_begin;
  // Every rank's copy of my chunk, in rank order (my own read in place).
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(w));
  std::vector<detail::Message> sends, recvs;
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    parts[static_cast<size_t>(q)].resize(mine_n * isz);
    recvs.push_back({q, parts[static_cast<size_t>(q)].data(), mine_n * isz});
    sends.push_back(
        {q, const_cast<uint8_t*>(data) + begin(q) * isz, (begin(q + 1) - begin(q)) * isz});
  }
  detail::exchange(comm, api, kDataTag, sends, recvs);
  uint8_t* acc = out + mine_begin * isz;
  auto part = [&](int q) {
    return q == me ? data + mine_begin * isz : parts[static_cast<size_t>(q)].data();
  };
  std::memcpy(acc, part(0), mine_n * isz);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      for (int q = 1; q < w; ++q)
        fold<T>(op, reinterpret_cast<T*>(acc), reinterpret_cast<const T*>(part(q)), mine_n);
      if (op == ReduceOp::Mean) divide<T>(reinterpret_cast<T*>(acc), mine_n, w);
    } else {
      for (int q = 1; q < w; ++q) {  // bool max: any
        const uint8_t* x = part(q);
        for (size_t i = 0; i < mine_n; ++i) acc[i] = acc[i] | x[i];
      }
    }
  });
  if (!gather) return;
  sends.clear();
  recvs.clear();
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    sends.push_back({q, acc, mine_n * isz});
    recvs.push_back({q, out + begin(q) * isz, (begin(q + 1) - begin(q)) * isz});
  }
  detail::exchange(comm, api, kDataTag, sends, recvs);
}

// The result tensor on x's device.
Tensor result(DType t, const nx::Shape& shape, const std::vector<uint8_t>& bytes,
              nx::Device device) {
  Tensor r = nx::host_from_bytes(t, shape, bytes.data());
  return device.kind == runtime::DeviceKind::CPU ? r : nx::place(r, device);
}
}  // namespace

Tensor all_reduce(const Communicator& comm, const Tensor& x, ReduceOp op) {
  const char* api = "rune::distributed::all_reduce";
  check_concrete(api, x);
  check_op(api, x.dtype(), op);
  check_headers(
      comm, api,
      make_header(api, Collective::AllReduce, x.dtype(), x.shape(), static_cast<int64_t>(op), 0));
  std::vector<uint8_t> in = nx::io::read_bytes(x, api), out(in.size());
  reduce_chunks(comm, api, x.dtype(), op, in.data(), static_cast<size_t>(x.size()), out.data(),
                true);
  return result(x.dtype(), x.shape(), out, x.device());
}

Tensor reduce_scatter(const Communicator& comm, const Tensor& x, ReduceOp op) {
  const char* api = "rune::distributed::reduce_scatter";
  check_concrete(api, x);
  check_op(api, x.dtype(), op);
  const int w = comm.size();
  if (x.ndim() == 0 || x.shape()[0] % w != 0)
    throw distributed_error(std::string(api) + ": " + x.describe() +
                            ": the leading axis must be a multiple of the world size " +
                            std::to_string(w));
  check_headers(comm, api,
                make_header(api, Collective::ReduceScatter, x.dtype(), x.shape(),
                            static_cast<int64_t>(op), 0));
  std::vector<uint8_t> in = nx::io::read_bytes(x, api), out(in.size());
  // Chunks by element equal blocks of the leading axis, since it divides by w.
  reduce_chunks(comm, api, x.dtype(), op, in.data(), static_cast<size_t>(x.size()), out.data(),
                false);
  nx::Shape shape = x.shape();
  shape[0] /= w;
  const size_t block = in.size() / static_cast<size_t>(w);
  std::vector<uint8_t> mine(out.begin() + static_cast<ptrdiff_t>(block * comm.rank()),
                            out.begin() + static_cast<ptrdiff_t>(block * (comm.rank() + 1)));
  return result(x.dtype(), shape, mine, x.device());
}

Tensor all_gather(const Communicator& comm, const Tensor& x) {
  const char* api = "rune::distributed::all_gather";
  check_concrete(api, x);
  check_headers(comm, api, make_header(api, Collective::AllGather, x.dtype(), x.shape(), 0, 0));
  const int w = comm.size(), me = comm.rank();
  std::vector<uint8_t> in = nx::io::read_bytes(x, api);
  const size_t b = in.size();
  std::vector<uint8_t> out(b * static_cast<size_t>(w));
  if (b) std::memcpy(out.data() + b * static_cast<size_t>(me), in.data(), b);
  std::vector<detail::Message> sends, recvs;
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    sends.push_back({q, in.data(), b});
    recvs.push_back({q, out.data() + b * static_cast<size_t>(q), b});
  }
  detail::exchange(comm, api, kDataTag, sends, recvs);
  nx::Shape shape = x.shape();
  shape.insert(shape.begin(), w);
  return result(x.dtype(), shape, out, x.device());
}

Tensor broadcast(const Communicator& comm, const Tensor& x, int root) {
  const char* api = "rune::distributed::broadcast";
  check_concrete(api, x);
  return detail::broadcast_leaves(comm, api, {x}, root)[0];
}

namespace detail {

std::vector<Tensor> broadcast_leaves(const Communicator& comm, const char* api,
                                     const std::vector<Tensor>& leaves, int root) {
  const int w = comm.size(), me = comm.rank();
  if (root < 0 || root >= w)
    throw distributed_error(std::string(api) + ": root " + std::to_string(root) +
                            " is not a rank of a world of " + std::to_string(w));
  std::vector<Tensor> out;
  for (const Tensor& x : leaves) {
    check_concrete(api, x);
    check_headers(comm, api,
                  make_header(api, Collective::Broadcast, x.dtype(), x.shape(), 0, root));
    std::vector<uint8_t> bytes = nx::io::read_bytes(x, api);
    std::vector<Message> sends, recvs;
    if (me == root) {
      for (int q = 0; q < w; ++q)
        if (q != me) sends.push_back({q, bytes.data(), bytes.size()});
    } else {
      recvs.push_back({root, bytes.data(), bytes.size()});
    }
    exchange(comm, api, kDataTag, sends, recvs);
    out.push_back(me == root ? x : result(x.dtype(), x.shape(), bytes, x.device()));
  }
  return out;
}

std::vector<Tensor> all_reduce_leaves(const Communicator& comm, const char* api,
                                      const std::vector<Tensor>& leaves, ReduceOp op) {
  for (const Tensor& x : leaves) {
    check_concrete(api, x);
    check_op(api, x.dtype(), op);
  }
  std::vector<Tensor> out(leaves.size());
  std::vector<bool> done(leaves.size(), false);
  for (size_t first = 0; first < leaves.size(); ++first) {
    if (done[first]) continue;
    // One bucket: every leaf of this dtype, concatenated in leaf order.
    const DType t = leaves[first].dtype();
    std::vector<size_t> members;
    std::vector<uint8_t> bucket;
    for (size_t i = first; i < leaves.size(); ++i) {
      if (leaves[i].dtype() != t) continue;
      members.push_back(i);
      std::vector<uint8_t> b = nx::io::read_bytes(leaves[i], api);
      bucket.insert(bucket.end(), b.begin(), b.end());
    }
    const size_t n = bucket.size() / static_cast<size_t>(ir::itemsize(t));
    check_headers(comm, api,
                  make_header(api, Collective::Bucket, t,
                              {static_cast<int64_t>(members.size()), static_cast<int64_t>(n)},
                              static_cast<int64_t>(op), 0));
    std::vector<uint8_t> reduced(bucket.size());
    reduce_chunks(comm, api, t, op, bucket.data(), n, reduced.data(), true);
    size_t at = 0;
    for (size_t i : members) {
      const size_t b = static_cast<size_t>(leaves[i].size() * ir::itemsize(t));
      std::vector<uint8_t> part(reduced.begin() + static_cast<ptrdiff_t>(at),
                                reduced.begin() + static_cast<ptrdiff_t>(at + b));
      out[i] = result(t, leaves[i].shape(), part, leaves[i].device());
      done[i] = true;
      at += b;
    }
  }
  return out;
}

}  // namespace detail

}  // namespace rune::distributed
