#include "codegen/cpu/attention_tiles.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

namespace codegen::cpu {

char* attention_tile(size_t which, int64_t bytes) {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::vector<std::unique_ptr<void, Free>> bufs;
  thread_local std::vector<int64_t> sizes;
  if (bufs.size() <= which) {
    bufs.resize(which + 1);
    sizes.resize(which + 1, 0);
  }
  if (sizes[which] < bytes) {
    const int64_t rounded = (std::max<int64_t>(bytes, 1) + 4095) / 4096 * 4096;
    bufs[which].reset(std::aligned_alloc(64, static_cast<size_t>(rounded)));
    if (!bufs[which]) throw std::bad_alloc();
    sizes[which] = rounded;
  }
  return static_cast<char*>(bufs[which].get());
}

int64_t batch_offset(const ir::Shape& batch, const std::vector<int64_t>& strides, int64_t bi) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    off += bi % batch[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
    bi /= batch[static_cast<size_t>(d)];
  }
  return off;
}

char* rebased(char* tile, int64_t before) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(tile) -
                                 static_cast<uintptr_t>(before));
}

}  // namespace codegen::cpu
