// The C interface of librune_cub.so (runtime/cuda/cub_sort.cu), the CUB sort module built with
// nvcc when the CUDA toolkit is there at build time and loaded with dlopen at run time
// (runtime/cuda/cub_sort.h, docs/sort.md). Shared by the module and its loader; plain C types
// only, no CUDA header.
//
// The module sorts rows of keys stably: `rows` rows of `len` contiguous elements (row-major) of
// one rune dtype, each row on its own, ascending in the order of docs/sort.md (NaN last, -0 ==
// +0, equal keys keep their input order). Sort writes the sorted values (the input's bits, so
// -0 and NaN payloads travel with their element); argsort writes int64 positions within the
// row. Work is queued on `stream` (a CUstream of the primary context, usable as a cudaStream_t:
// the runtime API and the driver API share that context); nothing synchronises.
//
// Every entry returns a cudaError_t (0: success) or one of the RUNE_CUB_ERROR_* codes below;
// error_string names either.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever RuneCubApi or the meaning of an entry changes.
#define RUNE_CUB_API_VERSION 2  // 2: the integer formats I8 ... U64

// Element formats of the input (the output of a sort has the same format).
enum RuneCubDType {
  RUNE_CUB_U8 = 0,  // bool (one byte, 0 or 1) and uint8
  RUNE_CUB_I32 = 1,
  RUNE_CUB_I64 = 2,
  RUNE_CUB_F16 = 3,   // IEEE binary16 bits
  RUNE_CUB_BF16 = 4,  // bfloat16 bits
  RUNE_CUB_F32 = 5,
  RUNE_CUB_F64 = 6,
  RUNE_CUB_I8 = 7,  // version 2: the other integer dtypes
  RUNE_CUB_I16 = 8,
  RUNE_CUB_U16 = 9,
  RUNE_CUB_U32 = 10,
  RUNE_CUB_U64 = 11,
  RUNE_CUB_LAST = RUNE_CUB_U64,
};

// Codes of the module's own (argument) errors, above every cudaError_t.
#define RUNE_CUB_ERROR_BAD_DTYPE 100001
#define RUNE_CUB_ERROR_BAD_SHAPE 100002
#define RUNE_CUB_ERROR_SCRATCH_TOO_SMALL 100003
#define RUNE_CUB_ERROR_NO_DRIVER 100004  // no CUDA driver (libcuda.so.1) on this machine

typedef struct RuneCubApi {
  int version;        // RUNE_CUB_API_VERSION
  const char* build;  // e.g. "CUDA 13.0, CUB 3.0.1, sm_80 sm_90 compute_90"
  // Bytes of device scratch a call of `sort` with these arguments needs (keys, indices and
  // CUB's temporary storage). Asks the current device (CUB's tuning depends on it).
  int (*scratch_bytes)(int dtype, int argsort, long long rows, long long len, size_t* bytes);
  // Queues the sort of `in` into `out` (distinct buffers) on `stream`; `scratch` holds at
  // least scratch_bytes(...) bytes, aligned to 256.
  int (*sort)(int dtype, int argsort, const void* in, void* out, long long rows, long long len,
              void* scratch, size_t scratch_bytes, void* stream);
  // "<name>: <description>" of a code returned above.
  const char* (*error_string)(int code);
} RuneCubApi;

// The module's table when it implements `version`, else NULL.
const RuneCubApi* rune_cub_api(int version);
typedef const RuneCubApi* (*RuneCubApiFn)(int version);

#ifdef __cplusplus
}
#endif
