#pragma once
// The subscripts of an einsum equation ("bij,bjk->bik", "...ij,...jk", "ii->i", "ij"), numbered:
// each distinct letter one label, an ellipsis expanded into labels of its own for the dims it
// covers (aligned from the right across the operands, as numpy and PyTorch align broadcast
// dims). Shared by einsum's shape rule, its reference kernel and its decomposition.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor_meta.h"

namespace kiln {

struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // per operand, per dim: its label (repeated: a diagonal)
  std::vector<int> output;               // per dim of the result: its label, each at most once
  std::vector<std::string> names;        // per label: its letter, or "...0", "...1" for ellipsis dims
  int num_labels() const { return static_cast<int>(names.size()); }
};

// Parses `equation` for operands of ranks `ranks`. Without "->", the result is the ellipsis dims
// then the letters that appear once, in alphabetical order (upper case first), as PyTorch's.
// kiln::Error saying what is wrong: a character that is not a letter, a rank that does not match
// its subscripts, an output letter no operand has or that repeats, an ellipsis in the output
// that no operand has.
EinsumSpec parse_einsum(const std::string& equation, const std::vector<int64_t>& ranks);

// Each label's size from the operands' shapes: where two differ, a 1 broadcasts to the other
// (a repeated label within one operand must match exactly). kiln::Error naming the subscript.
std::vector<int64_t> einsum_label_sizes(const EinsumSpec& spec, const std::vector<Shape>& shapes);

}  // namespace kiln
