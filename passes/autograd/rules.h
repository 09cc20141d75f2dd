#pragma once
// The installers of the derivative rules, one per file (passes/autograd/rules_<category>.cpp).
// vjp.cpp calls each once, on first use of the registry.
namespace kiln::autograd {

void install_pointwise_vjps();   // rules_pointwise.cpp
void install_reduction_vjps();   // rules_reduction.cpp
void install_view_vjps();        // rules_view.cpp
void install_linalg_vjps();      // rules_linalg.cpp: matmul, bmm, linear, addmm, gather, scatter_add, scatter_fold
void install_composite_vjps();   // rules_composite.cpp: softmax, layer_norm, losses, embedding, dropout, tril/triu
void install_collective_vjps();  // rules_collective.cpp: all_reduce, all_gather, reduce_scatter, broadcast, reduce
void install_attention_vjps();   // rules_attention.cpp: scaled_dot_product_attention, flash_attention
void install_activation_vjps();  // rules_activations.cpp: hardsigmoid, hardswish, leaky_relu, elu, selu, softplus, mish, nan_to_num

}  // namespace kiln::autograd
