// The order a program's kernels run in, chosen for memory: the scheduler emits kernels in the
// order its walk from the roots finds them, which can leave a value alive long after it could
// have been consumed (a gradient's weight products all at the end, holding every layer's
// activations). Temporaries are placed by their lifetimes (runtime/temp_placement.h), so a
// shorter lifetime is memory given back.
#pragma once
#include "codegen/kernel.h"

namespace codegen {

// Reorders s.kernels by greedy list scheduling, as XLA's ListMemoryScheduler does: among the
// kernels whose dependencies have run, the one that frees the most temporary bytes net of what
// it allocates runs next (ties: the earlier kernel of the scheduler's order). A kernel depends
// on every earlier kernel that shares a slot with it where either writes that slot (reads
// after writes, writes after reads and after writes keep their order), so every kernel reads
// what it read before and the bits are the same. Host calls (ir::Op::HostCall) also keep their
// order among themselves (those whose HostFn::ordered() is true). A host call's placement comes
// before the memory gain: an Early call (and the kernels it waits for) runs as soon as it is
// ready and is never sunk, a Late one only when nothing else is ready. Inputs and outputs weigh
// nothing: they are held for the whole run anyway.
void order_for_memory(Schedule& s);

}  // namespace codegen
