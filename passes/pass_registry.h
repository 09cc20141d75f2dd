#pragma once
// The name -> function table of passes: the rows of passes/passes.def, plus passes
// registered at run time (a test's deliberately broken pass, a user's own rewrite).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// A pass rewrites a graph in place and returns whether it changed anything.
using PassFn = std::function<bool(Graph&)>;

struct PassInfo {
  std::string name;
  PassFn run;
  std::string summary;
};

const PassInfo* find_pass(std::string_view name);  // nullptr if unknown
// The pass named `name`; a kiln::Error listing the known passes if there is none.
const PassInfo& get_pass(std::string_view name);
std::vector<std::string> pass_names();  // built-in first (in passes.def order), then registered
// Adds a pass; a kiln::Error if the name is taken.
void register_pass(std::string name, PassFn run, std::string summary = "");

}  // namespace kiln
