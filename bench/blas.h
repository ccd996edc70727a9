// The BLAS libraries users could call instead, loaded with dlopen so the benchmarks build
// without them: OpenBLAS and BLIS (cblas_sgemm) and oneDNN (dnnl_sgemm), as Debian ships them.
// OpenBLAS misdetects this project's CPUs unless OPENBLAS_CORETYPE is set before it loads, so
// it is set (SkylakeX with AVX-512, Haswell with AVX2) when the user has not set it.
#pragma once
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

struct Sgemm {
  std::string name;
  // Row-major C[m, n] = A[m, k] B[k, n] (+ C when accumulate), all contiguous.
  void (*run)(const Sgemm&, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
              float* c) = nullptr;
  void* fn = nullptr;
};

namespace blas_detail {
enum { kRowMajor = 101, kNoTrans = 111 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

inline void cblas(const Sgemm& s, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                  float* c) {
  reinterpret_cast<CblasSgemm>(s.fn)(
      kRowMajor, kNoTrans, kNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
      1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}
inline void dnnl(const Sgemm& s, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                 float* c) {
  reinterpret_cast<DnnlSgemm>(s.fn)('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
}  // namespace blas_detail

// Every library that loads, set to use `threads` threads. Missing ones are listed in `missing`.
inline std::vector<Sgemm> load_sgemms(int threads, std::vector<std::string>* missing) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  else if (__builtin_cpu_supports("avx2"))
    setenv("OPENBLAS_CORETYPE", "Haswell", 0);
  std::string n = std::to_string(threads);
  setenv("OPENBLAS_NUM_THREADS", n.c_str(), 0);
  setenv("BLIS_NUM_THREADS", n.c_str(), 0);
  setenv("OMP_NUM_THREADS", n.c_str(), 0);
  std::vector<Sgemm> out;
  struct Lib {
    const char* name;
    const char* path;
    const char* sym;
  };
  for (Lib l : {Lib{"openblas", "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                    "cblas_sgemm"},
                Lib{"blis", "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4", "cblas_sgemm"},
                Lib{"onednn", "libdnnl.so.2", "dnnl_sgemm"}}) {
    void* h = dlopen(l.path, RTLD_NOW | RTLD_LOCAL);
    void* f = h ? dlsym(h, l.sym) : nullptr;
    if (!f) {
      if (missing) missing->push_back(std::string(l.name) + " (" + (h ? l.sym : l.path) + ")");
      continue;
    }
    Sgemm s;
    s.name = l.name;
    s.fn = f;
    s.run = std::string(l.sym) == "dnnl_sgemm" ? blas_detail::dnnl : blas_detail::cblas;
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads")))
      set(threads);
    out.push_back(s);
  }
  return out;
}

}  // namespace bench
