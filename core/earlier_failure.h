// Errors in program order on an asynchronous device (docs/semantics.md §4, §6). A queued check that
// failed happened, in program order, before any error an op raises later at dispatch (a dead
// operand, a bad shape): the host raises at the check itself and never reaches the later op.
// So just before an op throws, the failure its device's stream recorded since the last wait is
// raised instead (the wait that raises it clears it, as every wait does), and the op's own error
// only when there is none. Only error paths wait; an op that succeeds never does.
#pragma once
#include "core/tensor.h"

namespace nx::detail {

// Waits on d's stream when d is asynchronous, raising the failure recorded since the last wait.
void raise_earlier_failure(Device d);
// The same for the device of the public op being applied on this thread (OpScope), if any.
void raise_earlier_failure_of_current_op();

}  // namespace nx::detail
