#pragma once
// What a training step computes for one parameter, as its graph is assembled (make_train_step,
// frontend/optim.cpp): the parameter, its gradient, its optimizer state in and out, and its
// new value. The update rules, DDP's gradient averaging and the grad scaler each rewrite these.
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct ParamUpdate {
  Value param, grad;
  std::vector<Value> state;  // this parameter's state inputs
  std::vector<Value> new_state;
  Value new_param;
};

}  // namespace kiln
