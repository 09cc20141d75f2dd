#include "ir/einsum.h"

#include <algorithm>
#include <map>

#include "ir/error.h"

namespace kiln {

namespace {

bool is_letter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

// One side's subscripts: letters (by character) and where the ellipsis stands (-1: none).
struct Subscripts {
  std::string letters;
  int ellipsis_at = -1;  // how many letters precede the ellipsis
};

Subscripts parse_side(const std::string& text, const std::string& equation, const std::string& what) {
  Subscripts s;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      if (text.compare(i, 3, "...") != 0) fail("einsum '{}': {} has a '.' that is not part of an ellipsis '...'", equation, what);
      if (s.ellipsis_at >= 0) fail("einsum '{}': {} has more than one ellipsis", equation, what);
      s.ellipsis_at = static_cast<int>(s.letters.size());
      i += 2;
      continue;
    }
    if (!is_letter(ch)) fail("einsum '{}': '{}' in {} is not a subscript (letters a-z and A-Z, and '...')", equation, ch, what);
    s.letters += ch;
  }
  return s;
}

}  // namespace

EinsumSpec parse_einsum(const std::string& equation, const std::vector<int64_t>& ranks) {
  if (ranks.empty()) fail("einsum '{}': no operands", equation);
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<Subscripts> ins;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    ins.push_back(parse_side(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), equation,
                             fmt::format("operand {}", ins.size())));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (ins.size() != ranks.size())
    fail("einsum '{}': the equation has subscripts for {} operand{}, {} given", equation, ins.size(), ins.size() == 1 ? "" : "s",
         ranks.size());
  // How many dims each operand's ellipsis covers, and the most of any (the broadcast dims).
  int64_t ellipsis_dims = 0;
  bool any_ellipsis = false;
  std::vector<int64_t> covered(ins.size(), 0);
  for (size_t i = 0; i < ins.size(); ++i) {
    const int64_t n = static_cast<int64_t>(ins[i].letters.size());
    if (ins[i].ellipsis_at < 0 && n != ranks[i])
      fail("einsum '{}': operand {} has {} subscript{} for its {} dim{}", equation, i, n, n == 1 ? "" : "s", ranks[i], ranks[i] == 1 ? "" : "s");
    if (ins[i].ellipsis_at >= 0) {
      if (n > ranks[i]) fail("einsum '{}': operand {} has {} subscripts besides its ellipsis for its {} dims", equation, i, n, ranks[i]);
      covered[i] = ranks[i] - n;
      ellipsis_dims = std::max(ellipsis_dims, covered[i]);
      any_ellipsis = true;
    }
  }
  EinsumSpec spec;
  std::map<char, int> label_of;
  for (int64_t e = 0; e < ellipsis_dims; ++e) spec.names.push_back(fmt::format("...{}", e));
  auto letter_label = [&](char ch) {
    auto [it, added] = label_of.emplace(ch, spec.num_labels());
    if (added) spec.names.push_back(std::string(1, ch));
    return it->second;
  };
  std::map<char, int> count;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::vector<int> dims;
    const Subscripts& s = ins[i];
    for (int k = 0; k <= static_cast<int>(s.letters.size()); ++k) {
      if (k == s.ellipsis_at)  // this operand's ellipsis dims: the last `covered` of the broadcast labels
        for (int64_t e = ellipsis_dims - covered[i]; e < ellipsis_dims; ++e) dims.push_back(static_cast<int>(e));
      if (k < static_cast<int>(s.letters.size())) {
        dims.push_back(letter_label(s.letters[static_cast<size_t>(k)]));
        ++count[s.letters[static_cast<size_t>(k)]];
      }
    }
    spec.inputs.push_back(std::move(dims));
  }
  if (arrow == std::string::npos) {
    for (int64_t e = 0; e < ellipsis_dims; ++e) spec.output.push_back(static_cast<int>(e));
    for (auto& [ch, n] : count)  // std::map: ASCII order, upper case first
      if (n == 1) spec.output.push_back(label_of.at(ch));
    return spec;
  }
  const Subscripts out = parse_side(equation.substr(arrow + 2), equation, "the output");
  if (out.ellipsis_at >= 0 && !any_ellipsis) fail("einsum '{}': the output has an ellipsis and no operand has one", equation);
  std::string seen;
  for (int k = 0; k <= static_cast<int>(out.letters.size()); ++k) {
    if (k == out.ellipsis_at)
      for (int64_t e = 0; e < ellipsis_dims; ++e) spec.output.push_back(static_cast<int>(e));
    if (k == static_cast<int>(out.letters.size())) break;
    char ch = out.letters[static_cast<size_t>(k)];
    if (!label_of.count(ch)) fail("einsum '{}': the output's subscript '{}' is not one of the operands'", equation, ch);
    if (seen.find(ch) != std::string::npos) fail("einsum '{}': the output repeats subscript '{}'", equation, ch);
    seen += ch;
    spec.output.push_back(label_of.at(ch));
  }
  return spec;
}

std::vector<int64_t> einsum_label_sizes(const EinsumSpec& spec, const std::vector<Shape>& shapes) {
  std::vector<int64_t> size(static_cast<size_t>(spec.num_labels()), -1);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    std::vector<int64_t> own(size.size(), -1);  // within the operand: a diagonal's dims match exactly
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      const auto l = static_cast<size_t>(spec.inputs[i][d]);
      const int64_t n = shapes[i][d];
      if (own[l] >= 0 && own[l] != n)
        fail("einsum: subscript '{}' is repeated in operand {} with sizes {} and {} (a diagonal needs equal sizes)", spec.names[l], i, own[l], n);
      own[l] = n;
      if (size[l] < 0 || size[l] == 1) size[l] = n;
      else if (n != 1 && n != size[l])
        fail("einsum: subscript '{}' has size {} in operand {} and {} before it (sizes must match, or be 1 to broadcast)", spec.names[l], n,
             i, size[l]);
    }
  }
  for (auto& n : size)
    if (n < 0) n = 1;  // (every label appears in some operand)
  return size;
}

}  // namespace kiln
