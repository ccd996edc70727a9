// The public header of rune: nx plus the transformations (jit, grad, value_and_grad, vjp, jvp).
#pragma once
#include "core/nx.h"
#include "trace/autodiff.h"
#include "trace/jit.h"
