// The public header of nx: arrays, eager by default.
#pragma once
#include "core/attention.h"  // issue 41: scaled_dot_product_attention
#include "core/check.h"
#include "core/conv.h"  // issue 40: convolutions
#include "core/donation.h"
#include "core/interop.h"  // from_blob, DLPack
#include "core/io.h"
#include "core/nn.h"    // issue 18, part "math"
#include "core/norm.h"  // issue 40: batch_norm, group_norm
#include "core/ops.h"
#include "core/random.h"
#include "core/resize.h"  // issue 40: nx::resize
#include "core/tensor.h"
#include "core/window.h"  // issue 40: windowed reductions, pooling
