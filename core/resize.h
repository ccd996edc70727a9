// Resizing images and volumes (issue 40; docs/norm.md "nx::resize"): nearest-neighbour and
// linear interpolation of the spatial dimensions, as torch.nn.functional.interpolate with an
// output size (align_corners=False, antialias=False). A composition of nx ops (per resized axis
// one nx::take of precomputed indices, two and a weighted sum for linear), so it runs eagerly
// and under rune::jit on every device and differentiates and batches through its parts.
#pragma once
#include <string>

#include "core/ops.h"

namespace nx {

// x [N, C, spatial...] (layout "" or "NC...": "NCW", "NCHW", "NCDHW") or [N, spatial..., C]
// ("N...C": "NWC", "NHWC", "NDHWC") resized to `size`, one extent >= 1 per spatial dimension,
// each resized axis separably from the last spatial axis to the first. An axis whose extent
// stays is left as it is. For an axis of extent `in` resized to `out`, output index d reads:
//   "nearest"        torch's "nearest": min(floor(d * s), in - 1) with s = in / out, computed
//                    in float32 as torch does (d >> 1 when out == 2 in). Not
//                    jax.image.resize's "nearest", which is "nearest-exact".
//   "nearest-exact"  torch's "nearest-exact", jax.image.resize's "nearest", Pillow's:
//                    min(floor((d + 0.5) * s), in - 1), in float32.
//   "linear"         half-pixel centres (torch's align_corners=False, JAX's): the source
//                    position p = max(s (d + 0.5) - 0.5, 0), i0 = min(floor(p), in - 1),
//                    i1 = min(i0 + 1, in - 1), l1 = p - i0 clamped to [0, 1], all at the
//                    compute dtype (float64 for float64 x, else float32):
//                    x[i0] (1 - l1) + x[i1] l1. No antialiasing when shrinking (torch's default
//                    antialias=False; JAX's default antialias=True widens the kernel there).
//                    "bilinear" (2 spatial dimensions) and "trilinear" (3) name it too.
// Nearest keeps any dtype; linear needs a float x (16-bit floats compute at float32 and round
// once).
Tensor resize(const Tensor& x, const Shape& size, const std::string& method = "nearest",
              const std::string& layout = "");

}  // namespace nx
