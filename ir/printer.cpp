#include "ir/printer.h"

#include <fmt/format.h>

namespace kiln {

std::string print_attrs(const Node& n) {
  std::string out;
  for (const ArgSpec& spec : n.info().schema.attrs) {
    const AttrValue* v = n.attrs().find(spec.name);
    if (!v) continue;
    if (spec.default_value && attr_equal(*v, *spec.default_value)) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", spec.name, attr_str(*v));
  }
  return out;
}

std::string print_node(const Node& n) {
  std::string lhs, types, args;
  for (int i = 0; i < n.num_results(); ++i) {
    lhs += fmt::format("{}%{}", i ? ", " : "", n.result_info(i).name);
    types += fmt::format("{}{}", i ? ", " : "", n.meta(i).str());
  }
  for (auto& v : n.inputs()) args += fmt::format("{}%{}", args.empty() ? "" : ", ", v.name());
  std::string attrs = print_attrs(n);
  if (!attrs.empty()) args += (args.empty() ? "" : ", ") + attrs;
  return fmt::format("{} = {}({}) : {}", lhs, n.info().name, args, types);
}

std::string print_graph(const Graph& g) {
  std::string out = fmt::format("graph {}(", g.name());
  bool first = true;
  for (Node* in : g.inputs()) {
    out += fmt::format("{}%{}: {}", first ? "" : ", ", in->name(), in->meta().str());
    first = false;
  }
  out += ") {\n";
  for (Node* n : g.nodes()) out += "  " + print_node(*n) + "\n";
  out += "  return (";
  first = true;
  for (auto& v : g.outputs()) {
    out += fmt::format("{}%{}", first ? "" : ", ", v.name());
    first = false;
  }
  out += ")\n}\n";
  return out;
}

}  // namespace kiln
