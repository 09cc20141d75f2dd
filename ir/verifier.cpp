#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "ir/error.h"

namespace kiln {

std::vector<std::string> verify(const Graph& g) {
  std::vector<std::string> problems;
  std::unordered_set<const Node*> defined;
  std::unordered_set<std::string> names;
  auto check_name = [&](const Node* n, int i) {
    const std::string& nm = n->result_info(i).name;
    if (nm.empty()) problems.push_back(fmt::format("a result of {} has no name", n->info().name));
    else if (!names.insert(nm).second) problems.push_back(fmt::format("'%{}' is defined more than once", nm));
    if (g.find(nm) != Value{const_cast<Node*>(n), i}) problems.push_back(fmt::format("'%{}' is missing from the name table", nm));
  };
  auto check_uses = [&](const Node* n) {
    for (int r = 0; r < n->num_results(); ++r)
      for (const Use& u : n->result_info(r).uses)
        if (u.input_index >= static_cast<int>(u.user->inputs().size()) || u.user->input(u.input_index) != Value{const_cast<Node*>(n), r})
          problems.push_back(fmt::format("use list of '%{}' names a stale use", n->result_info(r).name));
  };
  for (const Node* in : g.inputs()) {
    check_name(in, 0);
    check_uses(in);
    defined.insert(in);
  }
  for (const Node* n : g.nodes()) {
    std::string where = fmt::format("%{} = {}", n->name(), n->info().name);
    if (n->is_input()) problems.push_back(where + ": 'input' nodes belong in the signature");
    for (int i = 0; i < n->num_results(); ++i) check_name(n, i);
    check_uses(n);
    bool inputs_ok = true;
    std::vector<TensorMeta> in_metas;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      Value v = n->inputs()[i];
      if (!v.node || v.node->graph() != &g) {
        problems.push_back(fmt::format("{}: input {} is not a value of this graph", where, i));
        inputs_ok = false;
        continue;
      }
      if (!defined.count(v.node)) {
        problems.push_back(fmt::format("{}: '%{}' is used before it is defined", where, v.name()));
        inputs_ok = false;
      }
      const auto& uses = v.node->result_info(v.index).uses;
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(n), static_cast<int>(i)}) == uses.end())
        problems.push_back(fmt::format("{}: the use of '%{}' is missing from its use list", where, v.name()));
      in_metas.push_back(v.meta());
    }
    defined.insert(n);
    if (!inputs_ok) continue;
    try {
      Attrs completed = complete_attrs(n->info(), n->attrs(), in_metas.size());
      if (!(completed == n->attrs())) problems.push_back(where + ": attributes are not in completed form");
      auto metas = n->info().meta(in_metas, completed);
      if (static_cast<int>(metas.size()) != n->num_results()) {
        problems.push_back(fmt::format("{}: has {} results but its rule gives {}", where, n->num_results(), metas.size()));
        continue;
      }
      for (int i = 0; i < n->num_results(); ++i)
        if (!(metas[i] == n->meta(i)))
          problems.push_back(fmt::format("{}: '%{}' has type {} but its rule infers {}", where, n->result_info(i).name,
                                         n->meta(i).str(), metas[i].str()));
    } catch (const Error& e) {
      problems.push_back(fmt::format("{}: {}", where, e.what()));
    }
  }
  for (auto& o : g.outputs())
    if (!o.node || !defined.count(o.node)) problems.push_back("the graph returns a value that is not defined in it");
  return problems;
}

void verify_or_throw(const Graph& g, const std::string& context) {
  auto problems = verify(g);
  if (problems.empty()) return;
  std::string msg = fmt::format("graph '{}' is invalid{}:", g.name(), context.empty() ? "" : " " + context);
  for (auto& p : problems) msg += "\n  " + p;
  throw Error(msg);
}

}  // namespace kiln
