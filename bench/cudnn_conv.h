// cuDNN's 2-D convolution for bench_gpu's comparison, loaded with dlopen from the toolkit (no
// link-time dependency, no cuDNN header: the few enum values below are cuDNN 9's, from
// cudnn_graph.h and cudnn_ops.h): libcudnn.so.9, then the unversioned name and
// /usr/local/cuda/lib64. Layout NCHW for the input and output and KCRS (O, C, kh, kw) for the
// filter: rune's bench_conv layout (channels first, torch's). Float32 data and float32 compute
// with CUDNN_FMA_MATH (no TF32 tensor cores), cross-correlation (nx::conv's forward), stride 1,
// no dilation, fixed algorithms: forward IMPLICIT_PRECOMP_GEMM, backward data ALGO_1, backward
// filter ALGO_1 (no search: the same kernels each run). The handle runs in the device's primary
// context on rune's stream (as bench/cublas_sgemm.h's), so a wait on the device waits for it too.
// The workspace is the caller's (a rune device allocation of workspace_bytes()).
// Not run on a device yet (none lent): the enum values and each call's argument order were checked
// by compiling the same calls against cuDNN 9.19's cudnn.h, and on a machine without a driver it
// loads libcudnn.so.9, finds every symbol, and reports "cudnnCreate failed (1001,
// CUDNN_STATUS_NOT_INITIALIZED)".
#pragma once
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <string>

namespace bench {

class CudnnConv {
 public:
  // Loads cuDNN, makes a handle bound to `stream` (a CUstream) and the descriptors of a
  // convolution of x [n, c, h, w] by a filter [o, c, kh, kw] with zero padding (pad_h, pad_w),
  // into y [n, o, h + 2 pad_h - kh + 1, w + 2 pad_w - kw + 1]; ok() says whether it did, error()
  // why not.
  CudnnConv(void* stream, int n, int c, int h, int w, int o, int kh, int kw, int pad_h, int pad_w) {
    const char* names[] = {"libcudnn.so.9", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so"};
    for (const char* nm : names)
      if ((lib_ = dlopen(nm, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) {
      error_ = "libcudnn cannot be loaded";
      return;
    }
    error_string_ = reinterpret_cast<ErrorString>(dlsym(lib_, "cudnnGetErrorString"));  // optional
    if (!load_symbols()) return;
    if (!check(create_(&handle_), "cudnnCreate")) {
      handle_ = nullptr;
      return;
    }
    if (!check(set_stream_(handle_, stream), "cudnnSetStream")) return;
    if (!check(create_tensor_(&x_), "cudnnCreateTensorDescriptor") ||
        !check(create_tensor_(&y_), "cudnnCreateTensorDescriptor") ||
        !check(create_filter_(&k_), "cudnnCreateFilterDescriptor") ||
        !check(create_conv_(&conv_), "cudnnCreateConvolutionDescriptor"))
      return;
    const int oh = h + 2 * pad_h - kh + 1, ow = w + 2 * pad_w - kw + 1;
    if (!check(set_tensor_(x_, kNchw, kFloat, n, c, h, w), "cudnnSetTensor4dDescriptor (x)") ||
        !check(set_tensor_(y_, kNchw, kFloat, n, o, oh, ow), "cudnnSetTensor4dDescriptor (y)") ||
        !check(set_filter_(k_, kFloat, kNchw, o, c, kh, kw), "cudnnSetFilter4dDescriptor") ||
        !check(set_conv_(conv_, pad_h, pad_w, 1, 1, 1, 1, kCrossCorrelation, kFloat),
               "cudnnSetConvolution2dDescriptor") ||
        !check(set_math_(conv_, kFmaMath), "cudnnSetConvolutionMathType"))
      return;
    size_t f = 0, d = 0, g = 0;
    if (!check(fwd_ws_(handle_, x_, k_, conv_, y_, kFwdAlgo, &f),
               "cudnnGetConvolutionForwardWorkspaceSize") ||
        !check(bwd_data_ws_(handle_, k_, y_, conv_, x_, kBwdDataAlgo, &d),
               "cudnnGetConvolutionBackwardDataWorkspaceSize") ||
        !check(bwd_filter_ws_(handle_, x_, y_, conv_, k_, kBwdFilterAlgo, &g),
               "cudnnGetConvolutionBackwardFilterWorkspaceSize"))
      return;
    workspace_bytes_ = std::max({f, d, g});
  }
  ~CudnnConv() {
    if (conv_) destroy_conv_(conv_);
    if (k_) destroy_filter_(k_);
    if (y_) destroy_tensor_(y_);
    if (x_) destroy_tensor_(x_);
    if (handle_) destroy_(handle_);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  bool ok() const { return handle_ && error_.empty(); }
  const std::string& error() const { return error_; }
  // The bytes of workspace the three algorithms need (the largest of the three).
  size_t workspace_bytes() const { return workspace_bytes_; }

  // y = conv(x, k) (device pointers; ws: workspace_bytes() of device memory). Returns cuDNN's
  // status (0: success).
  int forward(const float* x, const float* k, float* y, void* ws) const {
    const float one = 1.0f, zero = 0.0f;
    return fwd_(handle_, &one, x_, x, k_, k, conv_, kFwdAlgo, ws, workspace_bytes_, &zero, y_, y);
  }
  // dx = the gradient of sum(conv(x, k) * dy) in x (the transposed convolution of dy).
  int backward_data(const float* k, const float* dy, float* dx, void* ws) const {
    const float one = 1.0f, zero = 0.0f;
    return bwd_data_(handle_, &one, k_, k, y_, dy, conv_, kBwdDataAlgo, ws, workspace_bytes_, &zero,
                     x_, dx);
  }
  // dk = the gradient of sum(conv(x, k) * dy) in k.
  int backward_filter(const float* x, const float* dy, float* dk, void* ws) const {
    const float one = 1.0f, zero = 0.0f;
    return bwd_filter_(handle_, &one, x_, x, y_, dy, conv_, kBwdFilterAlgo, ws, workspace_bytes_,
                       &zero, k_, dk);
  }

 private:
  // cuDNN 9's enum values (cudnn_graph.h, cudnn_ops.h).
  static constexpr int kNchw = 0;              // CUDNN_TENSOR_NCHW
  static constexpr int kFloat = 0;             // CUDNN_DATA_FLOAT
  static constexpr int kCrossCorrelation = 1;  // CUDNN_CROSS_CORRELATION
  static constexpr int kFmaMath = 3;           // CUDNN_FMA_MATH: float32 FMA, no tensor cores
  static constexpr int kFwdAlgo = 1;           // CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
  static constexpr int kBwdDataAlgo = 1;       // CUDNN_CONVOLUTION_BWD_DATA_ALGO_1
  static constexpr int kBwdFilterAlgo = 1;     // CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1

  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  using SetStream = int (*)(void*, void*);
  using SetTensor = int (*)(void*, int, int, int, int, int, int);
  using SetFilter = int (*)(void*, int, int, int, int, int, int);
  using SetConv = int (*)(void*, int, int, int, int, int, int, int, int);
  using SetMath = int (*)(void*, int);
  using WorkspaceSize = int (*)(void*, void*, void*, void*, void*, int, size_t*);
  using ErrorString = const char* (*)(int);
  using Run = int (*)(void*, const void*, void*, const void*, void*, const void*, void*, int, void*,
                      size_t, const void*, void*, void*);

  template <class F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib_, name));
    if (!f && error_.empty()) error_ = std::string("libcudnn lacks ") + name;
    return f != nullptr;
  }
  bool load_symbols() {
    bool all = sym(create_, "cudnnCreate") & sym(destroy_, "cudnnDestroy") &
               sym(set_stream_, "cudnnSetStream") &
               sym(create_tensor_, "cudnnCreateTensorDescriptor") &
               sym(set_tensor_, "cudnnSetTensor4dDescriptor") &
               sym(destroy_tensor_, "cudnnDestroyTensorDescriptor") &
               sym(create_filter_, "cudnnCreateFilterDescriptor") &
               sym(set_filter_, "cudnnSetFilter4dDescriptor") &
               sym(destroy_filter_, "cudnnDestroyFilterDescriptor") &
               sym(create_conv_, "cudnnCreateConvolutionDescriptor") &
               sym(set_conv_, "cudnnSetConvolution2dDescriptor") &
               sym(set_math_, "cudnnSetConvolutionMathType") &
               sym(destroy_conv_, "cudnnDestroyConvolutionDescriptor") &
               sym(fwd_ws_, "cudnnGetConvolutionForwardWorkspaceSize") &
               sym(fwd_, "cudnnConvolutionForward") &
               sym(bwd_data_ws_, "cudnnGetConvolutionBackwardDataWorkspaceSize") &
               sym(bwd_data_, "cudnnConvolutionBackwardData") &
               sym(bwd_filter_ws_, "cudnnGetConvolutionBackwardFilterWorkspaceSize") &
               sym(bwd_filter_, "cudnnConvolutionBackwardFilter");
    return all;
  }
  bool check(int rc, const char* what) {
    if (rc != 0 && error_.empty())
      error_ = std::string(what) + " failed (" + std::to_string(rc) +
               (error_string_ ? std::string(", ") + error_string_(rc) : std::string()) + ")";
    return rc == 0;
  }

  void* lib_ = nullptr;
  void* handle_ = nullptr;
  void *x_ = nullptr, *y_ = nullptr, *k_ = nullptr, *conv_ = nullptr;
  size_t workspace_bytes_ = 0;
  Create create_ = nullptr, create_tensor_ = nullptr, create_filter_ = nullptr,
         create_conv_ = nullptr;
  Destroy destroy_ = nullptr, destroy_tensor_ = nullptr, destroy_filter_ = nullptr,
          destroy_conv_ = nullptr;
  SetStream set_stream_ = nullptr;
  SetTensor set_tensor_ = nullptr;
  SetFilter set_filter_ = nullptr;
  SetConv set_conv_ = nullptr;
  SetMath set_math_ = nullptr;
  WorkspaceSize fwd_ws_ = nullptr, bwd_data_ws_ = nullptr, bwd_filter_ws_ = nullptr;
  ErrorString error_string_ = nullptr;
  Run fwd_ = nullptr, bwd_data_ = nullptr, bwd_filter_ = nullptr;
  std::string error_;
};

}  // namespace bench
