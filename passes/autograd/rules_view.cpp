// placeholder until the view/linalg/composite rules land
#include "passes/autograd/rules.h"

namespace kiln::autograd {

void install_view_vjps() {}

}  // namespace kiln::autograd
