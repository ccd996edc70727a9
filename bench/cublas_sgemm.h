// cuBLAS's sgemm for bench_gpu's comparison, loaded with dlopen from the toolkit (no link-time
// CUDA dependency): libcublas.so.13, .12, then the unversioned name and /usr/local/cuda/lib64.
// cuBLAS runs in the device's primary context (the one rune's driver table uses) on rune's
// stream, so a wait on the device (nx::wait) waits for it too. Default math mode: float32 SIMT,
// no TF32 (NVIDIA_TF32_OVERRIDE unset). run_fast: cublasGemmEx on float32 buffers with a
// tensor-core compute type (CUBLAS_COMPUTE_32F_FAST_TF32 or _FAST_16BF), for the tf32 / bf16
// matmul precisions (compile-checked only: no device has run it yet).
#pragma once
#include <dlfcn.h>

#include <string>

namespace bench {

class CublasSgemm {
 public:
  // Loads cuBLAS and makes a handle bound to `stream` (a CUstream); ok() says whether it did,
  // error() why not.
  explicit CublasSgemm(void* stream) {
    const char* names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                           "/usr/local/cuda/lib64/libcublas.so"};
    for (const char* n : names)
      if ((lib_ = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) {
      error_ = "libcublas cannot be loaded";
      return;
    }
    create_ = reinterpret_cast<Create>(dlsym(lib_, "cublasCreate_v2"));
    destroy_ = reinterpret_cast<Destroy>(dlsym(lib_, "cublasDestroy_v2"));
    set_stream_ = reinterpret_cast<SetStream>(dlsym(lib_, "cublasSetStream_v2"));
    sgemm_ = reinterpret_cast<Sgemm>(dlsym(lib_, "cublasSgemm_v2"));
    gemm_ex_ = reinterpret_cast<GemmEx>(dlsym(lib_, "cublasGemmEx"));  // optional
    if (!create_ || !destroy_ || !set_stream_ || !sgemm_) {
      error_ = "libcublas lacks cublasCreate_v2 / cublasSetStream_v2 / cublasSgemm_v2";
      return;
    }
    if (int rc = create_(&handle_); rc != 0) {
      error_ = "cublasCreate_v2 failed (" + std::to_string(rc) + ")";
      handle_ = nullptr;
      return;
    }
    if (int rc = set_stream_(handle_, stream); rc != 0)
      error_ = "cublasSetStream_v2 failed (" + std::to_string(rc) + ")";
  }
  ~CublasSgemm() {
    if (handle_) destroy_(handle_);
  }
  CublasSgemm(const CublasSgemm&) = delete;
  CublasSgemm& operator=(const CublasSgemm&) = delete;

  bool ok() const { return handle_ && error_.empty(); }
  const std::string& error() const { return error_; }

  // Row-major C[m, n] = A[m, k] B[k, n] (device pointers): cuBLAS's column-major C^T = B^T A^T.
  int run(int m, int n, int k, const float* a, const float* b, float* c) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kNoTranspose = 0;  // CUBLAS_OP_N
    return sgemm_(handle_, kNoTranspose, kNoTranspose, n, m, k, &one, b, n, a, k, &zero, c, n);
  }

  // The tensor-core compute types of cublasComputeType_t (cublas_api.h).
  static constexpr int kComputeFastTf32 = 77;  // CUBLAS_COMPUTE_32F_FAST_TF32
  static constexpr int kComputeFastBf16 = 75;  // CUBLAS_COMPUTE_32F_FAST_16BF
  bool has_gemm_ex() const { return ok() && gemm_ex_; }
  // As run, through cublasGemmEx with float32 A, B, C (CUDA_R_32F) and `compute`.
  int run_fast(int m, int n, int k, const float* a, const float* b, float* c, int compute) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kNoTranspose = 0, kR32F = 0, kGemmDefault = -1;  // CUBLAS_OP_N, CUDA_R_32F
    return gemm_ex_(handle_, kNoTranspose, kNoTranspose, n, m, k, &one, b, kR32F, n, a, kR32F, k,
                    &zero, c, kR32F, n, compute, kGemmDefault);
  }

 private:
  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  using SetStream = int (*)(void*, void*);
  using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int,
                        const float*, int, const float*, float*, int);
  void* lib_ = nullptr;
  void* handle_ = nullptr;
  Create create_ = nullptr;
  Destroy destroy_ = nullptr;
  SetStream set_stream_ = nullptr;
  Sgemm sgemm_ = nullptr;
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int,
                         const void*, int, int, const void*, void*, int, int, int, int);
  GemmEx gemm_ex_ = nullptr;
  std::string error_;
};

}  // namespace bench
