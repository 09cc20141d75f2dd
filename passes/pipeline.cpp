#include "passes/pipeline.h"

#include "ir/error.h"
#include "passes/pass_registry.h"

namespace kiln {

const std::vector<std::string>& default_pipeline() {
  // Canonicalize first (it exposes constants: x*1 of a full), fold, canonicalize what
  // folding exposed (x + a folded zero), then merge duplicates and sweep the dead.
  static const std::vector<std::string> p{"canonicalize", "constant_fold", "canonicalize", "cse", "dce"};
  return p;
}

std::vector<std::string> compile_pipeline(bool decompose, bool optimize) {
  std::vector<std::string> p;
  // Attention written out becomes the op before decomposition splits its softmax apart, and
  // linears that read one input become one while they are still linears.
  if (optimize && decompose) {
    p.push_back("fuse_attention");
    p.push_back("merge_linears");
  }
  if (decompose) p.push_back("decompose");
  p.push_back("collectives_dim0");  // what the engines can run, whatever the other options
  if (optimize) p.insert(p.end(), default_pipeline().begin(), default_pipeline().end());
  return p;
}

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::vector<std::string> parse_pipeline(std::string_view text) {
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (item.empty()) fail("empty pass name in pipeline \"{}\"", text);
    if (item == "default") {
      out.insert(out.end(), default_pipeline().begin(), default_pipeline().end());
    } else {
      get_pass(item);  // throws, listing the known passes
      out.emplace_back(item);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace kiln
