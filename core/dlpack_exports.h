// How many DLPack capsules exported over a buffer are still held by their consumers
// (core/interop.cpp keeps the count). An exported capsule holds a live value of its buffer, so
// nx::other_observers counts it and no donation writes into memory a consumer may be reading
// (docs/interop.md "Exported memory and donation"); this count lets a donation report say why.
#pragma once

namespace runtime {
struct Buffer;
}

namespace nx {

// Capsules from nx::to_dlpack / nx::to_dlpack_versioned viewing `b` whose deleter has not run.
int live_dlpack_exports(const runtime::Buffer* b);

}  // namespace nx
