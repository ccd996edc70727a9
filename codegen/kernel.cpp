#include "codegen/kernel.h"

namespace codegen {

int64_t KernelSpec::reduce_size() const { return rbody ? ir::numel(rshape) : 0; }
int64_t KernelSpec::blocks() const {
  int64_t r = reduce_size();
  return r <= kReduceBlock ? 1 : (r + kReduceBlock - 1) / kReduceBlock;
}

}  // namespace codegen
