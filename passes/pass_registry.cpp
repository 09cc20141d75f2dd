#include "passes/pass_registry.h"

#include <fmt/ranges.h>

#include <deque>
#include <mutex>

#include "ir/error.h"

namespace kiln {

// Declarations of the built-in passes, straight from the table.
#define KILN_PASS(name, fn, summary) bool fn(Graph&);
#include "passes/passes.def"
#undef KILN_PASS

namespace {

struct Registry {
  std::mutex mu;
  // A deque: registering a pass must not move the ones whose addresses find_pass handed out.
  std::deque<PassInfo> passes{
#define KILN_PASS(name, fn, summary) PassInfo{#name, fn, summary},
#include "passes/passes.def"
#undef KILN_PASS
  };
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const PassInfo* find_pass(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const PassInfo& p : r.passes)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> pass_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> names;
  for (const PassInfo& p : r.passes) names.push_back(p.name);
  return names;
}

const PassInfo& get_pass(std::string_view name) {
  if (const PassInfo* p = find_pass(name)) return *p;
  fail("unknown pass '{}'; known passes: {}", name, fmt::join(pass_names(), ", "));
}

void register_pass(std::string name, PassFn run, std::string summary) {
  KILN_CHECK(!name.empty(), "a pass needs a name");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const PassInfo& p : r.passes) KILN_CHECK(p.name != name, "a pass named '{}' exists already", name);
  r.passes.push_back(PassInfo{std::move(name), std::move(run), std::move(summary)});
}

}  // namespace kiln
