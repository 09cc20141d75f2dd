#pragma once
// The frontend in one include: Tensor, the ops, tracing and the nn modules.
#include "frontend/dispatcher.h"
#include "frontend/nn/nn.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "frontend/trace.h"
