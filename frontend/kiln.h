#pragma once
// The frontend in one include: Tensor, the ops, tracing, the nn modules, gradients and optimizers.
#include "frontend/autograd.h"
#include "frontend/compile.h"
#include "frontend/custom_op.h"
#include "frontend/device.h"
#include "frontend/dispatcher.h"
#include "frontend/nn/nn.h"
#include "frontend/ops.h"
#include "frontend/optim.h"
#include "frontend/tensor.h"
#include "frontend/trace.h"
