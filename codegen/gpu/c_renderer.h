// The C-like renderer for GPUs: a lowered kernel (codegen/lowered.h) printed as CUDA C or HIP C.
// Backends differ only by a CDialect; the plan (codegen/plan.h) comes from the dialect's device
// description, and lower (codegen/lower.h) fixes every loop, so CUDA, HIP and the host print the
// same operations in the same order.
//
// Entry points (all `extern "C"`, named after the kernel, one per lowered entry in launch order,
// "_p1" first for a two-phase reduction):  name<suffix>(P0* p0, const P1* p1, ..., long long n)
// Params are the lowered kernel's (c_param_dtypes: output first, a two-phase reduction's scratch
// last); n is the entry's work-item count, for the launch (the loops' extents are constants).
// Every entry is a grid-stride loop: any grid is correct; except a fixed-block entry (the tiled
// product, CLaunch::block), which needs exactly that many threads per block and any grid. With lane
// threads (c_lane_threads) the 8 lanes of a reduction block are 8 consecutive work items (and with
// plan part rows:lanes, the 8 lanes of a row kernel's row, each stage's result broadcast); with
// vector loads (c_vector_loads) a thread moves 4 outputs when every pointer is 16-byte aligned.
// Bool is stored as one byte; float16 and bfloat16 travel as their 16-bit patterns.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/lowered.h"
#include "codegen/plan.h"

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
  // Broadcast inside the same group: fn(v, k) returns v of the group's lane k (0 <= k < 8) to
  // every lane, which all call it together. Empty: no broadcast, and a row kernel's 8 lanes run
  // in one thread.
  std::string lane_idx_u32, lane_idx_u64;
  int lane_unroll = 0;  // unroll hint for a lane thread's loop and the partials' combine
  // The dialect has CUDA's vector types (uchar4, ushort4, int4, float4, longlong2, double2 with
  // members x, y, z, w) for elementwise kernels' vector loads (c_vector_loads).
  bool vector_loads = false;
  // Block-level work (the tiled matrix product, plan part tiles): the qualifier of a
  // block-shared array ("__shared__"; the fake driver's "static", whose host threads share one
  // block) and the block barrier statement ("__syncthreads()"). Empty block_sync: no tiles.
  std::string shared_kw, block_sync;
  // Entries with a fixed block size print __launch_bounds__(block) (CUDA and HIP).
  bool launch_bounds = false;
  // Warp-level tensor-core steps (lir::Stmt::Kind::Mma, the plan part mma of the opt-in
  // nx::set_matmul_precision): helpers the prelude defines,
  //   fn(float& d0, float& d1, float& d2, float& d3, unsigned a0, unsigned a1, unsigned a2,
  //      unsigned a3, unsigned b0, unsigned b1)
  // D += A B with the PTX ISA's fragment layout: mma_tf32 m16n8k8 (each register a tf32 value's
  // float32 bits), mma_bf16 m16n8k16 (each register two bfloat16, the lower-numbered element in
  // the low half). Empty: no tensor cores (HIP; CUDA before sm_80).
  std::string mma_tf32, mma_bf16;
  // Asynchronous copies to block-shared memory (lir::Stmt::Kind::AsyncCopy / AsyncWait, the
  // plan part cp.async): a helper template the prelude defines,
  //   async_copy<bytes>(void* shared_dst, const void* global_src, bool ok)
  // (copy `bytes` when ok, else zero them; complete at this thread's next async_wait()), and
  // async_wait(). Empty: none (HIP; CUDA before sm_80), slices are staged through registers.
  std::string async_copy, async_wait;
  // When not empty, each entry with a fixed block size is followed by
  //   extern "C" const int <block_size_symbol><entry name> = <block>;
  // (the fake driver reads it to run that many host threads as one block).
  std::string block_size_symbol;
};

const CDialect& cuda_dialect();
// HIP C for hiprtc (codegen/hip/hip_dialect.cpp).
const CDialect& hip_dialect();

// The plan of kernel `k` on a GPU described by `device` (codegen/gpu/device_desc.h: the
// runtime's description of the device, never the dialect's strings). The dialect only spells
// the lowered kernel; printing raises std::logic_error where it cannot (a lane exchange, a
// tensor-core step or an asynchronous copy the dialect has no spelling for).
Plan c_plan(const KernelSpec& k, const DeviceDesc& device);

// Whether a reduction kernel runs its 8 lanes as 8 threads (see the entry points above): the
// device has a lane exchange, each output reduces at least 16 elements, and the reduced
// elements are contiguous in memory (a reduction over a strided axis, such as the column sums
// of a row-major matrix, keeps one thread per output so neighbouring threads read neighbouring
// addresses).
bool c_lane_threads(const KernelSpec& k, const DeviceDesc& device);

// Whether an elementwise kernel moves 4 outputs per work item as vectors ("vector loads" above):
// every load reads the output's own index from an offset that is a multiple of 4, or a single
// element, and the kernel has at least 4 outputs.
bool c_vector_loads(const KernelSpec& k, const DeviceDesc& device);

// The param dtypes of the rendered entry points in order (scratch last when two-phase), from
// the kernel alone (no lowering: every plan gives the same params).
std::vector<ir::DType> c_param_dtypes(const KernelSpec& k);

// One entry point of a printed kernel as lower() made it: the name suffix, the extent of its
// grid loop (the step's work items) and the threads to launch for it.
struct CLaunch {
  std::string suffix;
  int64_t items = 0, threads = 0;
  int64_t block = 0;  // 0: any block size; else exactly this many threads per block
};
// A kernel printed for launching: its text and its entries in launch order.
struct CKernel {
  std::string text;
  std::vector<CLaunch> launches;
};
// render_c_kernel, with the entries the launch geometry reads (lowered once).
CKernel render_c_kernel_for_launch(const KernelSpec& k, const std::string& name, const CDialect& d,
                                   const DeviceDesc& device);

// Prints a lowered kernel's entry points (names: `name` + each entry's suffix).
std::string print_c(const lir::Kernel& k, const std::string& name, const CDialect& d);

// Renders a decomposed kernel (codegen/decompose.h) as a source with the entry points above:
// render_c_prelude(d) + render_c_kernel(k, name, d, device).
std::string render_c(const KernelSpec& k, const std::string& name, const CDialect& d,
                     const DeviceDesc& device);
// The parts: the shared helpers, once per source; and one kernel's functions (all named after
// `name`), so kernels with distinct names can share a source (one NVRTC program).
std::string render_c_prelude(const CDialect& d);
std::string render_c_kernel(const KernelSpec& k, const std::string& name, const CDialect& d,
                            const DeviceDesc& device);

}  // namespace codegen
