// The shared C-like renderer: a decomposed kernel as CUDA C or HIP C source. Backends
// differ only by a CDialect; op semantics mirror codegen/cpu/render_llvm.cpp exactly (the
// reference renderer), and reductions follow docs/numerics.md "Reduction order".
//
// Entry points of the rendered source (all `extern "C"`, named after `name`):
//   elementwise:            name(P0* p0, const P1* p1, ..., long long n)
//       grid-stride over n = numel(shape) outputs (C order); p0[w] = body(w). With vector loads
//       (c_vector_loads) and every pointer 16-byte aligned (checked in the kernel), a thread
//       takes 4 consecutive outputs at a time, reading each param as one vector (two for 8-byte
//       types) and storing one; the last n % 4 outputs and unaligned calls run one by one.
//   reduction, 1 block:     name(p0, p1, ..., long long n)
//       one thread per output (n = numel(shape)); the whole reduction in the documented order.
//       With lane threads (c_lane_threads): n = numel(shape) * 8, the 8 lanes of output o are
//       the 8 consecutive work items 8o .. 8o+7 (one thread each), combined by the fixed tree
//       through lane shuffles; the item of lane 0 writes p0[o].
//   reduction, B > 1 blocks (KernelSpec::blocks()): a scratch buffer `ps` of B partials per
//   output (dtype of rbody, bool as a byte) is the last pointer param of both entries:
//       name_p1(p0, p1, ..., ps, long long n)  n = numel(shape) * B: one thread per
//           (output o, block b) pair w = o * B + b writes ps[w]; with lane threads
//           n = numel(shape) * B * 8 and the 8 lanes of pair w are the items 8w .. 8w+7;
//       name(p0, p1, ..., ps, long long n)     n = numel(shape): combines ps[o*B .. o*B+B-1]
//           left to right, applies body, writes p0[o].
//   contraction (KernelSpec::contract):  name(p0, p1, p2, ..., long long n)
//       grid-stride over n = numel(shape) outputs; each is the fma chain over k in increasing
//       order from +0 of the contraction's params (a, b) read through its views, then the
//       fused epilogue (body, reading other params at the output's index) when there is one.
//   library (KernelSpec::library):  name(p0, p1, long long n)    n = numel(shape)
//       Sort / Argsort: grid-stride over the n elements (a stable rank sort, one thread each;
//       on CUDA, CUB's radix sorts replace it where librune_cub.so loads, docs/sort.md);
//       Cumsum: grid-stride over the n / L rows of L = shape.back() elements (one chain each).
// p0 is the output (param 0); pk is kernel param k (KernelSpec::slots[k]). Params never loaded
// are typed as float. Bool is stored as one byte (0 or 1); float16 and bfloat16 travel as their
// 16-bit patterns (`unsigned short`) and convert to float32 by bit manipulation.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace codegen {

// What differs between C-like GPU dialects. Everything else (types, op semantics, the
// reduction order) is shared.
struct CDialect {
  std::string name;                // "cuda": for messages
  std::string prelude;             // first lines of every source (includes, pragmas)
  std::string kernel_qualifier;    // before `void` on entry points, e.g. extern "C" __global__
  std::string device_fn;           // before device helpers, e.g. static __device__ __forceinline__
  std::string restrict_kw;         // pointer qualifier, e.g. __restrict__
  std::string thread_id;           // first global work item of this thread (unsigned long long)
  std::string thread_stride;       // total threads of the launch (unsigned long long)
  std::string sqrt_f32, sqrt_f64;  // correctly rounded sqrt
  std::string f32_as_u32, u32_as_f32;  // bit casts: float <-> unsigned
  std::string f64_as_u64, u64_as_f64;  // double <-> long long
  // Fused multiply-add with one rounding (IEEE fma), for contraction kernels (ir::Op::Dot).
  std::string fma_f32 = "__builtin_fmaf", fma_f64 = "__builtin_fma";
  // Lane exchange inside a group of 8 consecutive, 8-aligned threads: fn(v, k) returns v of the
  // group's lane l + k (its own v when l + k >= 8), for unsigned (32-bit) and unsigned long long.
  // Every lane of a group calls it together. Empty: the dialect has no exchange, and a
  // reduction's 8 lanes run in one thread.
  std::string lane_shfl_u32, lane_shfl_u64;
  std::string unroll;  // a loop pragma for the lanes' loops (e.g. "#pragma unroll 4"), or empty
  // The dialect has CUDA's vector types (uchar4, ushort4, int4, float4, longlong2, double2 with
  // members x, y, z, w) for elementwise kernels' vector loads (c_vector_loads).
  bool vector_loads = false;
};

const CDialect& cuda_dialect();
// HIP C for hiprtc (codegen/hip/hip_dialect.cpp).
const CDialect& hip_dialect();

// Whether a reduction kernel runs its 8 lanes as 8 threads (see the entry points above): the
// dialect has a lane exchange, each output reduces at least 16 elements, and the reduced
// elements are contiguous in memory (a reduction over a strided axis, such as the column sums
// of a row-major matrix, keeps one thread per output so neighbouring threads read neighbouring
// addresses).
bool c_lane_threads(const KernelSpec& k, const CDialect& d);

// Whether an elementwise kernel moves 4 outputs per work item as vectors ("vector loads" above):
// every load reads the output's own index from an offset that is a multiple of 4, or a single
// element, and the kernel has at least 4 outputs.
bool c_vector_loads(const KernelSpec& k, const CDialect& d);

// The param dtypes of the rendered entry points in order (scratch last when two-phase).
std::vector<ir::DType> c_param_dtypes(const KernelSpec& k);

// Renders a decomposed kernel (codegen/decompose.h) as a source with the entry points above:
// render_c_prelude(d) + render_c_kernel(k, name, d).
std::string render_c(const KernelSpec& k, const std::string& name, const CDialect& d);
// The parts: the shared helpers, once per source; and one kernel's functions (all named after
// `name`), so kernels with distinct names can share a source (one NVRTC program).
std::string render_c_prelude(const CDialect& d);
std::string render_c_kernel(const KernelSpec& k, const std::string& name, const CDialect& d);

}  // namespace codegen
