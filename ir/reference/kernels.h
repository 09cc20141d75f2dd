#pragma once
// Installers of the reference kernels, one per op category (one file each).
#include <functional>

#include "ir/host_tensor.h"
#include "ir/op_registry.h"

namespace kiln::reference {

using Setter = std::function<void(Op, ReferenceFn)>;
void install_pointwise(const Setter& set);   // pointwise.cpp
void install_reductions(const Setter& set);  // reductions.cpp
void install_views(const Setter& set);       // views.cpp
void install_creation(const Setter& set);    // creation.cpp
void install_linalg(const Setter& set);      // linalg.cpp
void install_composites(const Setter& set);  // composites.cpp
void install_collectives(const Setter& set); // collectives.cpp (group semantics: group.h)
void install_attention(const Setter& set);    // attention.cpp
void install_conv(const Setter& set);         // conv.cpp (convolution, max_pool, avg_pool)
void install_sort(const Setter& set);         // sort.cpp (sort, topk)
void install_norms(const Setter& set);        // norms.cpp (rms_norm, group_norm)

}  // namespace kiln::reference
