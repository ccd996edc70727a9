// A fake CUDA driver that runs on the host, so the GPU runtime (contexts, the caching device
// allocator, transfers, runtime::Program slots and scratch, the launch helper, donation, checks
// read at the next wait) runs in CI without a GPU. "Device memory" is host memory; kernels are the
// shared C renderer's output in a host dialect, compiled by the system compiler into a shared
// object whose path is the module image. A launch runs the grid-stride loop on 8 threads (thread
// t takes the work items t, t + 8, ...), which are the 8 lanes of every reduction group: the
// dialect's lane exchange is a barrier-synchronised exchange between them, so the reductions'
// lane-thread path (codegen/gpu/c_renderer.h) runs here exactly as rendered for a GPU. The threads
// are fibers on the launching host thread (fake_fibers.h), switched at each barrier.
// Install it before anything asks for a CUDA device (install_fake_cuda()).
#pragma once
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/compile.h"
#include "codegen/gpu/device_desc.h"
#include "gpu_runtime/fake_fibers.h"
#include "runtime/gpu/driver.h"

namespace fake_gpu {

struct Counters {
  std::atomic<int> mem_alloc{0}, mem_free{0}, launches{0}, htod{0}, dtoh{0}, dtod{0}, syncs{0},
      modules{0};
  std::atomic<int> block_launches{0};  // launches of fixed-block entries (tiled products)
  // Graphs: captures begun, graphs instantiated and alive, graph launches.
  std::atomic<int> captures{0}, graph_execs{0}, graph_launches{0};
};
inline Counters& counters() {
  static Counters c;
  return c;
}

inline int init() { return 0; }
// How many devices the fake has (CUDA:0 .. CUDA:n-1, all host memory); 1 unless a test that
// needs several (the NCCL tests) sets it before the first CUDA request, which reads it once.
inline std::atomic<int>& devices() {
  static std::atomic<int> n{1};
  return n;
}
inline int device_count(int* n) {
  *n = devices().load();
  return 0;
}
inline int device_name(int, char* buf, int len) {
  std::snprintf(buf, len, "Fake GPU (host)");
  return 0;
}
inline int device_arch(int, char* buf, int len) {
  std::snprintf(buf, len, "sm_90");
  return 0;
}
inline int multiprocessors(int, int* n) {
  *n = 2;
  return 0;
}
inline int warp_size(int, int* n) {
  *n = 32;
  return 0;
}
inline int set_current(int dev) { return dev >= 0 && dev < devices().load() ? 0 : 101; }
inline int mem_alloc(runtime::gpu::DevPtr* p, size_t n) {
  ++counters().mem_alloc;
  void* q = std::aligned_alloc(256, (n + 255) / 256 * 256);
  *p = reinterpret_cast<uintptr_t>(q);
  return q ? 0 : 2;
}
inline int mem_free(runtime::gpu::DevPtr p) {
  ++counters().mem_free;
  std::free(reinterpret_cast<void*>(p));
  return 0;
}
inline int host_alloc(void** p, size_t n) {
  *p = std::aligned_alloc(64, (n + 63) / 64 * 64);
  return *p ? 0 : 2;
}
inline int host_free(void* p) {
  std::free(p);
  return 0;
}
inline int memcpy_htod(runtime::gpu::DevPtr d, const void* s, size_t n, void*) {
  ++counters().htod;
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return 0;
}
inline int memcpy_dtoh(void* d, runtime::gpu::DevPtr s, size_t n, void*) {
  ++counters().dtoh;
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return 0;
}
inline int memcpy_dtod(runtime::gpu::DevPtr d, runtime::gpu::DevPtr s, size_t n, void*) {
  ++counters().dtod;
  std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n);
  return 0;
}
// A distinct token per stream (one per device context, never freed), so a test can tell
// which device's stream a library call was queued on.
inline int stream_create(void** s) {
  *s = new int(0);
  return 0;
}
inline int stream_synchronize(void*) {
  ++counters().syncs;
  return 0;
}
inline int event_create(void** e) {
  *e = new int(0);
  return 0;
}
inline int event_record(void*, void*) { return 0; }
inline int event_synchronize(void*) { return 0; }
inline int event_elapsed_ms(float* ms, void*, void*) {
  *ms = 0.001f;
  return 0;
}
inline int event_destroy(void* e) {
  delete static_cast<int*>(e);
  return 0;
}
inline int module_load(void** m, const void* image) {
  ++counters().modules;
  *m = dlopen(static_cast<const char*>(image), RTLD_NOW | RTLD_LOCAL);
  return *m ? 0 : 200;  // CUDA_ERROR_INVALID_IMAGE
}
// The host threads of a launch (= the lanes of a reduction group).
inline constexpr unsigned kThreads = 8;
using Exchange = unsigned long long (*)(unsigned long long, int);
using Bind = void (*)(unsigned long long tid, unsigned long long threads, Exchange);

// A kernel: its entry and its module's rune_fake_bind (which sets the thread's id); `block`:
// 0, or the fixed block size its source declares (rune_fake_block_<name>, a tiled product),
// which runs as one block of that many host threads.
struct Function {
  void* entry;
  Bind bind;
  unsigned block = 0;
};

// The running launch's threads (fibers, fake_fibers.h) and their exchange slots; one launch at a
// time (a mutex in launch).
inline Fibers& launch_fibers() {
  static Fibers f;
  return f;
}
inline std::vector<unsigned long long>& exchange_slots() {
  static std::vector<unsigned long long> s;
  return s;
}
// Lane l of each group of 8 consecutive threads gets the value of lane l + k (its own when
// l + k >= 8); every thread of the launch calls it together (a converged warp's shuffle).
// k >= 8: every lane gets the value of lane k - 8 of its group (a broadcast, __shfl_sync).
// k < 0: the block barrier (__syncthreads) of a fixed-block entry.
inline unsigned long long exchange(unsigned long long v, int k) {
  Fibers& f = launch_fibers();
  if (k < 0) {
    f.wait();
    return v;
  }
  const unsigned t = f.current();
  std::vector<unsigned long long>& slot = exchange_slots();
  slot[t] = v;
  f.wait();
  const unsigned lane = t % kThreads;
  const unsigned long long r = k >= static_cast<int>(kThreads)
                                   ? slot[t - lane + static_cast<unsigned>(k) - kThreads]
                               : lane + k < kThreads ? slot[t + k]
                                                     : v;
  f.wait();
  return r;
}

inline int module_function(void** f, void* m, const char* name) {
  void* entry = dlsym(m, name);
  void* bind = dlsym(m, "rune_fake_bind");
  if (!entry || !bind) return 500;  // CUDA_ERROR_NOT_FOUND
  const void* block = dlsym(m, (std::string("rune_fake_block_") + name).c_str());
  *f = new Function{entry, reinterpret_cast<Bind>(bind),  // lives as long as the module
                    block ? static_cast<unsigned>(*static_cast<const int*>(block)) : 0u};
  return 0;
}
// Every param is 8 bytes (pointers and n); the x86-64 calling convention lets a call pass
// more integer arguments than the callee reads. Up to 64: a fused training step's kernels read
// many buffers (a GPT's AdamW update: dozens).
inline constexpr unsigned kMaxParams = 64;
// Graphs: a launch on a capturing stream is recorded (its params copied by value, as a driver
// does), not run; a graph launch runs the recorded launches in order.
struct RecordedLaunch {
  void* f;
  unsigned grid, block, n;
  std::vector<uint64_t> params;
};
using Graph = std::vector<RecordedLaunch>;
inline std::mutex& capture_mu() {
  static std::mutex m;
  return m;
}
inline std::map<void*, Graph>& capturing() {  // stream -> what it has recorded so far
  static std::map<void*, Graph> m;
  return m;
}
inline int run_launch(void* f, unsigned grid, unsigned block, void** params, unsigned n);
inline int launch(void* f, unsigned grid, unsigned block, void* stream, void** params, unsigned n) {
  {
    std::lock_guard lock(capture_mu());
    auto it = capturing().find(stream);
    if (it != capturing().end()) {
      if (n > kMaxParams) return 1;
      RecordedLaunch r{f, grid, block, n, std::vector<uint64_t>(n)};
      for (unsigned i = 0; i < n; ++i) std::memcpy(&r.params[i], params[i], 8);
      it->second.push_back(std::move(r));
      return 0;
    }
  }
  return run_launch(f, grid, block, params, n);
}
inline int begin_capture(void* stream) {
  std::lock_guard lock(capture_mu());
  if (!capturing().emplace(stream, Graph{}).second) return 900;  // already capturing
  ++counters().captures;
  return 0;
}
inline int end_capture(void* stream, void** graph) {
  std::lock_guard lock(capture_mu());
  auto it = capturing().find(stream);
  if (it == capturing().end()) return 901;  // not capturing
  *graph = new Graph(std::move(it->second));
  capturing().erase(it);
  return 0;
}
inline int graph_instantiate(void** exec, void* graph) {
  *exec = new Graph(*static_cast<Graph*>(graph));
  ++counters().graph_execs;
  return 0;
}
inline int graph_launch(void* exec, void*) {
  ++counters().graph_launches;
  for (const RecordedLaunch& r : *static_cast<Graph*>(exec)) {
    std::vector<void*> ptrs(r.n);
    std::vector<uint64_t> values = r.params;
    for (unsigned i = 0; i < r.n; ++i) ptrs[i] = &values[i];
    if (int rc = run_launch(r.f, r.grid, r.block, ptrs.data(), r.n)) return rc;
  }
  return 0;
}
inline int graph_exec_destroy(void* exec) {
  delete static_cast<Graph*>(exec);
  --counters().graph_execs;
  return 0;
}
inline int graph_destroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return 0;
}
inline int run_launch(void* f, unsigned grid, unsigned block, void** params, unsigned n) {
  ++counters().launches;
  if (grid == 0 || block == 0 || n > kMaxParams) return 1;
  static std::mutex one_launch;
  std::lock_guard lock(one_launch);
  uint64_t a[kMaxParams] = {};
  for (unsigned i = 0; i < n; ++i) std::memcpy(&a[i], params[i], 8);
  using Fn =
      void (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
               uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
  const Function& fn = *static_cast<const Function*>(f);
  // A fixed-block entry must be launched with exactly its block size (as on a GPU, where a
  // different one would compute wrong tiles); it runs as one block, its loops covering the grid.
  if (fn.block && block != fn.block) return 1;
  const unsigned n_threads = fn.block ? fn.block : kThreads;
  if (fn.block) ++counters().block_launches;
  exchange_slots().assign(n_threads, 0);
  auto body = [&](unsigned) {
    reinterpret_cast<Fn>(fn.entry)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
        a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26],
        a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39],
        a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52],
        a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63]);
  };
  // The kernel's thread id lives in its module's thread-local storage, which the fibers share:
  // bound again each time a fiber resumes.
  auto resume = [&](unsigned t) { fn.bind(t, n_threads, exchange); };
  launch_fibers().run(n_threads, body, resume);
  return 0;
}
inline const char* error_string(int code) {
  switch (code) {
    case 2:
      return "out of memory";
    case 101:
      return "invalid device ordinal";
    case 200:
      return "device kernel image is invalid";
    case 500:
      return "named symbol not found";
  }
  return "fake error";
}

inline const runtime::gpu::DriverTable& table() {
  static const runtime::gpu::DriverTable t = [] {
    runtime::gpu::DriverTable t;
    t.api = "CUDA";
    t.library = "fake (host)";
    // Every entry, the graphs' included, is the function of its name above: the rows of
    // runtime/gpu/driver_table.def, as the CUDA and HIP loaders fill theirs.
#define RUNE_DRIVER_ENTRY(field, need, ...) t.field = fake_gpu::field;
#include "runtime/gpu/driver_table.def"
#undef RUNE_DRIVER_ENTRY
    // The fake "GPU" reports sm_90 and has its capabilities (the host dialect emulates lane
    // exchanges, tensor-core steps and cp.async), but its threads are host threads: no unroll
    // hint for a lane thread's loop.
    t.adjust_info = [](runtime::gpu::DeviceInfo& info) { info.lane_unroll = 0; };
    return t;
  }();
  return t;
}

// The planning description of the fake device (what the backend derives from its driver).
inline codegen::DeviceDesc fake_device_desc() {
  runtime::gpu::DeviceInfo info = runtime::gpu::describe(runtime::DeviceKind::CUDA, "sm_90");
  table().adjust_info(info);
  return codegen::gpu_device_desc(info);
}

// The host dialect of the C renderer (as tests/gpu/test_c_renderer_host.cpp): one thread.
inline const codegen::CDialect& host_dialect() {
  static const codegen::CDialect d = [] {
    codegen::CDialect c;
    c.name = "host-c (fake gpu)";
    c.prelude =
        // Declarations, not <math.h> / <string.h>: in C++ mode those headers cost ~0.23 s of
        // the ~0.27 s each kernel's compile takes, and the fake device compiles every kernel the
        // suite runs. These are the only library functions the C renderer prints; g++ knows
        // each as a builtin, so the generated code is the same.
        "extern \"C\" {\n"
        "float sqrtf(float); double sqrt(double); float floorf(float); double floor(double);\n"
        "float ceilf(float); double ceil(double); float rintf(float); double rint(double);\n"
        "float fmodf(float, float); double fmod(double, double);\n"
        "float fmaf(float, float, float); double fma(double, double, double);\n"
        "void* memcpy(void*, const void*, unsigned long);\n"
        "}\n"
        "static inline unsigned h_f32_u32(float x) { unsigned u; memcpy(&u, &x, 4); return u; }\n"
        "static inline float h_u32_f32(unsigned u) { float x; memcpy(&x, &u, 4); return x; }\n"
        "static inline long long h_f64_i64(double x) { long long u; memcpy(&u, &x, 8); return u; "
        "}\n"
        "static inline double h_i64_f64(long long u) { double x; memcpy(&x, &u, 8); return x; }\n"
        // The launching thread's id and the exchange (fake_gpu::launch binds them per thread).
        "static thread_local unsigned long long rune_fake_tid = 0, rune_fake_threads = 1;\n"
        "static thread_local unsigned long long (*rune_fake_exchange)(unsigned long long, int);\n"
        "extern \"C\" void rune_fake_bind(unsigned long long t, unsigned long long n,\n"
        "    unsigned long long (*x)(unsigned long long, int)) {\n"
        "  rune_fake_tid = t; rune_fake_threads = n; rune_fake_exchange = x;\n}\n"
        "static inline unsigned rune_shfl_u32(unsigned v, int k) {\n"
        "  return (unsigned)rune_fake_exchange(v, k);\n}\n"
        "static inline unsigned long long rune_shfl_u64(unsigned long long v, int k) {\n"
        "  return rune_fake_exchange(v, k);\n}\n"
        "static inline unsigned rune_shfl_idx_u32(unsigned v, int k) {\n"
        "  return (unsigned)rune_fake_exchange(v, 8 + k);\n}\n"
        "static inline unsigned long long rune_shfl_idx_u64(unsigned long long v, int k) {\n"
        "  return rune_fake_exchange(v, 8 + k);\n}\n";
    c.kernel_qualifier = "extern \"C\"";
    c.device_fn = "static inline";
    c.restrict_kw = "__restrict__";
    c.thread_id = "rune_fake_tid";
    c.thread_stride = "rune_fake_threads";
    c.lane_shfl_u32 = "rune_shfl_u32";
    c.lane_shfl_u64 = "rune_shfl_u64";
    c.lane_idx_u32 = "rune_shfl_idx_u32";
    c.lane_idx_u64 = "rune_shfl_idx_u64";
    // Tiled products: the launch's host threads are one block sharing `static` arrays.
    c.shared_kw = "static";
    c.block_sync = "rune_fake_exchange(0ull, -1)";
    c.block_size_symbol = "rune_fake_block_";
    // CUDA's vector types, with CUDA's alignment (the kernels check 16-byte alignment).
    c.prelude +=
        "struct alignas(4) uchar4 { unsigned char x, y, z, w; };\n"
        "struct alignas(8) ushort4 { unsigned short x, y, z, w; };\n"
        "struct alignas(16) int4 { int x, y, z, w; };\n"
        "struct alignas(16) float4 { float x, y, z, w; };\n"
        "struct alignas(16) longlong2 { long long x, y; };\n"
        "struct alignas(16) double2 { double x, y; };\n";
    c.vector_loads = true;
    // Tensor-core steps (lir::Stmt::Kind::Mma) emulated with the PTX ISA's fragment layout: every
    // thread of the block calls the step together (the 8 warps of a tile, converged), so each
    // writes its registers to a block-shared scratch, all meet at the barrier, each computes its
    // own four outputs from its warp's 32 threads' registers (d_r at row g + 8 (r >> 1), column
    // 2 q + (r & 1); g = lane / 4, q = lane % 4) and all meet again before the scratch is reused.
    // Each output is c + the k products in increasing k, one fma each (the products of tf32 or
    // bfloat16 values are exact in float32); a tensor core's own order and rounding inside a
    // step are unspecified, so these are not a device's bits, only the same layout.
    c.prelude +=
        "static unsigned rune_fake_frag[1024][6];\n"
        "static inline float rune_fake_bf16(unsigned r, int hi) {\n"
        "  return h_u32_f32(((r >> (hi ? 16 : 0)) & 0xffffu) << 16);\n}\n"
        "static inline void rune_fake_mma(int bf16, float* d, const unsigned* ab) {\n"
        "  const unsigned t = (unsigned)rune_fake_tid, lane = t % 32u, w = t - lane;\n"
        "  for (int i = 0; i < 6; ++i) rune_fake_frag[t][i] = ab[i];\n"
        "  rune_fake_exchange(0ull, -1);\n"
        "  const unsigned g = lane / 4u, q = lane % 4u;\n"
        "  float r[4];\n"
        "  for (unsigned x = 0; x < 4; ++x) {\n"
        "    const unsigned row = g + 8u * (x >> 1), col = 2u * q + (x & 1u);\n"
        "    float acc = d[x];\n"
        "    for (unsigned k = 0; k < (bf16 ? 16u : 8u); ++k) {\n"
        "      float a, b;\n"
        "      if (bf16) {\n"
        "        const unsigned* fa = rune_fake_frag[w + (row % 8u) * 4u + (k % 8u) / 2u];\n"
        "        const unsigned* fb = rune_fake_frag[w + col * 4u + (k % 8u) / 2u];\n"
        "        a = rune_fake_bf16(fa[(row >= 8u ? 1 : 0) + (k >= 8u ? 2 : 0)], (int)(k & 1u));\n"
        "        b = rune_fake_bf16(fb[4 + (k >= 8u ? 1 : 0)], (int)(k & 1u));\n"
        "      } else {\n"
        "        const unsigned* fa = rune_fake_frag[w + (row % 8u) * 4u + k % 4u];\n"
        "        const unsigned* fb = rune_fake_frag[w + col * 4u + k % 4u];\n"
        "        a = h_u32_f32(fa[(row >= 8u ? 1 : 0) + (k >= 4u ? 2 : 0)]);\n"
        "        b = h_u32_f32(fb[4 + (k >= 4u ? 1 : 0)]);\n"
        "      }\n"
        "      acc = fmaf(a, b, acc);\n"
        "    }\n"
        "    r[x] = acc;\n"
        "  }\n"
        "  rune_fake_exchange(0ull, -1);\n"
        "  for (int x = 0; x < 4; ++x) d[x] = r[x];\n}\n"
        "static inline void rune_mma_tf32(float& d0, float& d1, float& d2, float& d3,\n"
        "    unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {\n"
        "  float d[4] = {d0, d1, d2, d3}; const unsigned ab[6] = {a0, a1, a2, a3, b0, b1};\n"
        "  rune_fake_mma(0, d, ab); d0 = d[0]; d1 = d[1]; d2 = d[2]; d3 = d[3];\n}\n"
        "static inline void rune_mma_bf16(float& d0, float& d1, float& d2, float& d3,\n"
        "    unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {\n"
        "  float d[4] = {d0, d1, d2, d3}; const unsigned ab[6] = {a0, a1, a2, a3, b0, b1};\n"
        "  rune_fake_mma(1, d, ab); d0 = d[0]; d1 = d[1]; d2 = d[2]; d3 = d[3];\n}\n";
    c.mma_tf32 = "rune_mma_tf32";
    c.mma_bf16 = "rune_mma_bf16";
    // Asynchronous copies (lir::Stmt::Kind::AsyncCopy): queued per thread and carried out only
    // at the thread's wait, so a kernel that read a slice before waiting for it would read
    // stale shared memory here and fail the bit-for-bit tests (on a device it would race).
    c.prelude +=
        "struct rune_fake_copy { unsigned char* dst; const unsigned char* src; int n; };\n"
        "static thread_local rune_fake_copy rune_fake_pending[1024][16];\n"
        "static thread_local int rune_fake_npending[1024];\n"
        "template <int N> static inline void rune_fake_cp_async(void* dst, const void* src, "
        "bool ok) {\n"
        "  int& n = rune_fake_npending[rune_fake_tid];\n"
        "  if (n == 16) __builtin_trap();\n"
        "  rune_fake_pending[rune_fake_tid][n++] = {(unsigned char*)dst, ok ? (const unsigned "
        "char*)src : 0, N};\n}\n"
        "static inline void rune_fake_cp_async_wait() {\n"
        "  int& n = rune_fake_npending[rune_fake_tid];\n"
        "  for (int i = 0; i < n; ++i) {\n"
        "    const rune_fake_copy& c = rune_fake_pending[rune_fake_tid][i];\n"
        "    for (int b = 0; b < c.n; ++b) c.dst[b] = c.src ? c.src[b] : (unsigned char)0;\n"
        "  }\n"
        "  n = 0;\n}\n";
    c.async_copy = "rune_fake_cp_async";
    c.async_wait = "rune_fake_cp_async_wait";
    c.sqrt_f32 = "sqrtf";
    c.sqrt_f64 = "sqrt";
    c.f32_as_u32 = "h_f32_u32";
    c.u32_as_f32 = "h_u32_f32";
    c.f64_as_u64 = "h_f64_i64";
    c.u64_as_f64 = "h_i64_f64";
    return c;
  }();
  return d;
}

// Compiles a source to a shared object; the image is its path (null-terminated).
inline std::string compile_host(const std::string& source, const std::string&) {
  static std::atomic<int> serial{0};
  const char* tmp = std::getenv("TMPDIR");
  std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/rune_fake_gpu_" +
                     std::to_string(getpid()) + "_" + std::to_string(serial++);
  std::ofstream(base + ".cpp") << source;
  const char* cxx = std::getenv("CXX");
  // -nodefaultlibs -lgcc: the kernels call only the few libm functions the prelude declares,
  // which dlopen resolves from the test process (which has libm); linking against libstdc++,
  // libm and libc took 45 of a kernel's ~100 ms here, and the suite compiles thousands.
  // libgcc (static) stays for any helper g++ emits a call to; the crt files keep __dso_handle.
  std::string cmd =
      std::string(cxx && *cxx ? cxx : "c++") +
      " -std=c++17 -O1 -fno-strict-aliasing -ffp-contract=off -fno-fast-math -fPIC -shared -w -o " +
      base + ".so " + base + ".cpp -nodefaultlibs -lgcc > " + base + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("fake gpu: host compile failed; see " + base + ".cpp");
  std::remove((base + ".cpp").c_str());
  std::remove((base + ".log").c_str());
  // The shared object is the module image until it is loaded; removed when the process exits.
  struct Scratch {
    std::mutex mu;
    std::vector<std::string> files;
    ~Scratch() {
      for (const auto& f : files) std::remove(f.c_str());
    }
  };
  static Scratch scratch;
  std::lock_guard lock(scratch.mu);
  scratch.files.push_back(base + ".so");
  return base + ".so";
}

inline void install_fake_cuda() {
  runtime::gpu::set_driver_for_testing(runtime::DeviceKind::CUDA, &table());
  codegen::set_gpu_target_for_testing(runtime::DeviceKind::CUDA, {&host_dialect(), compile_host});
}

// Installs the fake driver unless tests/fake_cuda_hook.cpp already did (RUNE_TEST_FAKE_CUDA=1,
// with the kernel cache ctest's processes share), for binaries that test CUDA:0 however they
// are run. Returns true, for initialising a namespace-scope constant.
inline bool install_fake_cuda_unless_hooked() {
  const char* v = std::getenv("RUNE_TEST_FAKE_CUDA");
  if (!v || std::string(v) != "1") install_fake_cuda();
  return true;
}

}  // namespace fake_gpu
