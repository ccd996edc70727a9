// Tags: kHeaderTag for headers, kDataTag for data; MPI keeps messages of one (peer, tag) in
// order, and every rank makes the same calls in the same order.
//
// Determinism: reductions never use MPI's (whose order over ranks is unspecified). The element
// range is cut into one chunk per rank; rank c receives chunk c from every rank and folds it in
// rank order, ((x_0 op x_1) op x_2) ..., so the result has the same bits on every rank and the
// same bits as one process computing x_0 + x_1 + ... left to right.
//
// float16 and bfloat16 are folded in float32 and rounded once (to nearest even) at the end:
// round16(((f32(x_0) + f32(x_1)) + f32(x_2)) ...), Mean divided by the world size in float32
// before that one rounding. That is nx's own rule for 16-bit floats (computed at float32,
// rounded once per primitive), and float32's 24 bits make a 2-rank sum the correctly rounded
// 16-bit sum (double rounding is harmless at 24 >= 2 * 11 + 2 bits).
#include "distributed/host/collective_kernels.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace rune::distributed::detail {

namespace {
constexpr int kHeaderTag = 7101, kDataTag = 7102;
constexpr int kMaxDims = 16;

using ir::DType;

// What one rank passed to a collective, in a fixed-size record every rank sends to every other.
struct Header {
  int64_t collective, op, root, dtype, ndim;
  int64_t dims[kMaxDims];
};

std::string describe(const Header& h) {
  std::string s = std::string(ir::name(static_cast<DType>(h.dtype))) + " " +
                  ir::to_string(ir::Shape(h.dims, h.dims + h.ndim));
  if (h.collective == static_cast<int64_t>(Collective::Broadcast))
    s += " (root " + std::to_string(h.root) + ")";
  else if (h.collective != static_cast<int64_t>(Collective::AllGather))
    s += " (op " + std::string(op_name(static_cast<ReduceOp>(h.op))) + ")";
  return s;
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

// The 16-bit floats: stored as bit patterns, reduced in float32 (above).
struct Float16 {
  static float widen(uint16_t h) { return ir::f16_bits_to_f32(h); }
  static uint16_t narrow(float f) { return ir::f32_to_f16_bits(f); }
};
struct BFloat16 {
  static float widen(uint16_t h) { return ir::bf16_bits_to_f32(h); }
  static uint16_t narrow(float f) { return ir::f32_to_bf16_bits(f); }
};
template <class T>
constexpr bool is_float16_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Every reducible dtype, the one place that maps a DType to its element type (or 16-bit tag).
template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Float16:
      return f(Float16{});
    case DType::BFloat16:
      return f(BFloat16{});
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
}  // namespace

namespace {
std::atomic<uint64_t> g_started{0};
}  // namespace

uint64_t collectives_started() { return g_started.load(); }

void check_headers(const Communicator& comm, const char* api, const CollectiveCall& call, DType t,
                   const ir::Shape& shape) {
  ++g_started;
  if (shape.size() > static_cast<size_t>(kMaxDims))
    throw distributed_error(std::string(api) + ": " + std::to_string(shape.size()) +
                            " dimensions (at most " + std::to_string(kMaxDims) + ")");
  Header mine{};
  mine.collective = static_cast<int64_t>(call.kind);
  mine.op = call.kind == Collective::AllGather || call.kind == Collective::Broadcast
                ? 0
                : static_cast<int64_t>(call.op);
  mine.root = call.kind == Collective::Broadcast ? call.root : 0;
  mine.dtype = static_cast<int64_t>(t);
  mine.ndim = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) mine.dims[i] = shape[i];
  const int w = comm.size(), me = comm.rank();
  std::vector<Header> all(static_cast<size_t>(w));
  all[static_cast<size_t>(me)] = mine;
  std::vector<Message> sends, recvs;
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    sends.push_back({q, &mine, sizeof(Header)});
    recvs.push_back({q, &all[static_cast<size_t>(q)], sizeof(Header)});
  }
  exchange(comm, api, kHeaderTag, sends, recvs);
  for (int q = 1; q < w; ++q) {
    if (std::memcmp(&all[static_cast<size_t>(q)], &all[0], sizeof(Header)) == 0) continue;
    std::string what = std::string(api) + ": the ranks disagree: rank " + std::to_string(q) +
                       " passed " + describe(all[static_cast<size_t>(q)]) + " but rank 0 passed " +
                       describe(all[0]) + " (seen on rank " + std::to_string(me) + ")";
    mark_broken(comm, what);
    throw distributed_error(what);
  }
}

void reduce_chunks(const Communicator& comm, const char* api, DType t, ReduceOp op,
                   const uint8_t* data, size_t n, uint8_t* out, bool gather) {
  const int w = comm.size(), me = comm.rank();
  const size_t isz = static_cast<size_t>(ir::itemsize(t));
  auto begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(w); };
  const size_t mine_begin = begin(me), mine_n = begin(me + 1) - mine_begin;
  // Every rank's copy of my chunk, in rank order (my own read in place).
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(w));
  std::vector<Message> sends, recvs;
  for (int q = 0; q < w; ++q) {
    if (q == me) continue;
    parts[static_cast<size_t>(q)].resize(mine_n * isz);
    recvs.push_back({q, parts[static_cast<size_t>(q)].data(), mine_n * isz});
    sends.push_back(
        {q, const_cast<uint8_t*>(data) + begin(q) * isz, (begin(q + 1) - begin(q)) * isz});
  }
  exchange(comm, api, kDataTag, sends, recvs);
  uint8_t* acc = out + mine_begin * isz;
  auto part = [&](int q) {
    return q == me ? data + mine_begin * isz : parts[static_cast<size_t>(q)].data();
  };
  if (mine_n) std::memcpy(acc, part(0), mine_n * isz);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float16_v<T>) {
      // In float32, in rank order, rounded once.
      auto* acc16 = reinterpret_cast<uint16_t*>(acc);
      std::vector<float> wide(mine_n), next(mine_n);
      for (size_t i = 0; i < mine_n; ++i) wide[i] = T::widen(acc16[i]);
      for (int q = 1; q < w; ++q) {
        const auto* x = reinterpret_cast<const uint16_t*>(part(q));
        for (size_t i = 0; i < mine_n; ++i) next[i] = T::widen(x[i]);
        fold<float>(op, wide.data(), next.data(), mine_n);
      }
      if (op == ReduceOp::Mean) divide<float>(wide.data(), mine_n, w);
      for (size_t i = 0; i < mine_n; ++i) acc16[i] = T::narrow(wide[i]);
    } else if constexpr (!std::is_same_v<T, bool>) {
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
  exchange(comm, api, kDataTag, sends, recvs);
}

void run_collective(const Communicator& comm, const char* api, const CollectiveCall& call, DType t,
                    const ir::Shape& in_shape, const void* in, void* out) {
  check_headers(comm, api, call, t, in_shape);
  const int w = comm.size(), me = comm.rank();
  const size_t n = static_cast<size_t>(ir::numel(in_shape));
  const size_t bytes = n * static_cast<size_t>(ir::itemsize(t));
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  switch (call.kind) {
    case Collective::AllReduce:
    case Collective::Bucket:
      reduce_chunks(comm, api, t, call.op, src, n, dst, true);
      return;
    case Collective::ReduceScatter: {
      // The leading axis divides by w, so the chunks are its equal blocks: mine is the result.
      std::vector<uint8_t> full(bytes);
      reduce_chunks(comm, api, t, call.op, src, n, full.data(), false);
      const size_t block = bytes / static_cast<size_t>(w);
      if (block) std::memcpy(dst, full.data() + block * static_cast<size_t>(me), block);
      return;
    }
    case Collective::AllGather: {
      if (bytes) std::memcpy(dst + bytes * static_cast<size_t>(me), src, bytes);
      std::vector<Message> sends, recvs;
      for (int q = 0; q < w; ++q) {
        if (q == me) continue;
        sends.push_back({q, const_cast<uint8_t*>(src), bytes});
        recvs.push_back({q, dst + bytes * static_cast<size_t>(q), bytes});
      }
      exchange(comm, api, kDataTag, sends, recvs);
      return;
    }
    case Collective::Broadcast: {
      std::vector<Message> sends, recvs;
      if (me == call.root) {
        if (bytes) std::memcpy(dst, src, bytes);
        for (int q = 0; q < w; ++q)
          if (q != me) sends.push_back({q, const_cast<uint8_t*>(src), bytes});
      } else {
        recvs.push_back({call.root, dst, bytes});
      }
      exchange(comm, api, kDataTag, sends, recvs);
      return;
    }
  }
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

}  // namespace rune::distributed::detail
