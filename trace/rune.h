// The public header of rune: nx plus the transformations (jit; grad in trace/autodiff.h).
#pragma once
#include "core/nx.h"
#include "trace/jit.h"
