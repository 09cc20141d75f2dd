#include "frontend/onnx/op_table.h"

#include "frontend/onnx/onnx.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::onnx {

namespace {

const std::unordered_map<std::string, OpEntry>& table() {
  static const auto* t = [] {
    std::vector<OpEntry> rows;
    add_pointwise_ops(rows);
    add_shape_ops(rows);
    add_nn_ops(rows);
    add_conv_ops(rows);
    add_resize_ops(rows);
    add_scatter_ops(rows);
    auto* m = new std::unordered_map<std::string, OpEntry>;
    for (OpEntry& e : rows) m->emplace(e.op_type, std::move(e));
    return m;
  }();
  return *t;
}

}  // namespace

const OpEntry* find_op(const std::string& op_type) {
  auto it = table().find(op_type);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> out;
  for (const auto& [name, e] : table()) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kiln::onnx
