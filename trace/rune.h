// The public header of rune: nx plus the transformations (jit, grad, value_and_grad, vjp, jvp,
// vmap, jacfwd, jacrev, hessian, checkpoint), control flow (scan, fori_loop, while_loop, cond,
// switch_), the tree utilities and the optimizers (rune::optim).
#pragma once
#include "core/nx.h"
#include "trace/autodiff.h"
#include "trace/checkpoint.h"
#include "trace/control_flow.h"
#include "trace/jit.h"
#include "trace/loss_scale.h"
#include "trace/optim.h"
#include "trace/summary_writer.h"
#include "trace/tree_util.h"
#include "trace/vmap.h"
