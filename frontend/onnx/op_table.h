#pragma once
// The one table from ONNX operators (default domain) to kiln builder calls.
#include <string>

#include "frontend/onnx/node_context.h"

namespace kiln::onnx {

struct OpEntry {
  const char* op_type;
  Converter convert;
  // Operators that must not run at import even when every input is known (none today; Random*
  // would be, if kiln imported them).
  bool foldable = true;
};

// The entry for `op_type`, nullptr when kiln does not import it.
const OpEntry* find_op(const std::string& op_type);

// The converters, by area (ops_pointwise.cpp, ops_shape.cpp, ops_nn.cpp, ops_conv.cpp,
// ops_resize.cpp, ops_scatter.cpp): each
// adds its rows.
void add_pointwise_ops(std::vector<OpEntry>& table);
void add_shape_ops(std::vector<OpEntry>& table);
void add_nn_ops(std::vector<OpEntry>& table);
void add_conv_ops(std::vector<OpEntry>& table);  // ops_conv.cpp
void add_resize_ops(std::vector<OpEntry>& table);  // ops_resize.cpp
void add_scatter_ops(std::vector<OpEntry>& table);  // ops_scatter.cpp

}  // namespace kiln::onnx
