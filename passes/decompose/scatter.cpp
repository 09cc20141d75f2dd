// scatter_reduce into scatter_add, scatter_fold, scatter and where: the sums (and mean's counts)
// are scatter_adds; prod, amax and amin fold into self's elements (scatter_fold). Without
// include_self, an element reached by src takes the reduction of what reached it alone and one
// reached by nothing keeps self's: the fold starts from its identity (1, -inf, inf) and the sums
// from 0, then a where on the count; integer amax and amin start from one of the elements that
// reach (a scatter of src: folding it in twice changes neither).
#include <cmath>
#include <string>

#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

// How many of src's elements index sends to each element of self (i64, exact).
Var arrivals(Builder& b, Var self, Var index, int64_t dim) {
  return b.scatter_add(b.zeros(self.shape(), DType::I64), index, b.full(index.shape(), 1, DType::I64), dim);
}

Var fold(Builder& b, Var self, Var index, Var src, int64_t dim, const std::string& reduce) {
  return b.op(Op::ScatterFold, {self, index, src}, Attrs{{"dim", dim}, {"reduce", reduce}});
}

Values scatter_reduce(DecompositionContext& c) {
  Builder& b = c.b;
  Var self = c.input(0), index = c.input(1), src = c.input(2);
  const int64_t dim = c.attrs().get_int("dim");
  const std::string& reduce = c.attrs().get_string("reduce");
  const bool include_self = c.attrs().get_bool("include_self");
  const DType dt = self.dtype();
  const bool extremum = reduce == "amax" || reduce == "amin";
  if (include_self && (extremum || reduce == "prod")) return {fold(b, self, index, src, dim, reduce)};
  // Integers and bools: amax and amin from an element that reaches (no identity to start from:
  // i64's largest is not a double).
  if (extremum && !is_floating(dt)) return {fold(b, b.scatter(self, index, src, dim), index, src, dim, reduce)};
  if (include_self && reduce == "sum") return {b.scatter_add(self, index, src, dim)};
  Var count = arrivals(b, self, index, dim);
  Var reached = b.gt(count, b.scalar(0, DType::I64));
  // Floats: from the identity (1, -inf or inf), so that ties share the gradient as PyTorch's.
  if (reduce == "prod" || extremum) {
    const double identity = reduce == "prod" ? 1.0 : reduce == "amax" ? -INFINITY : INFINITY;
    return {b.where(reached, fold(b, b.full(self.shape(), identity, dt), index, src, dim, reduce), self)};
  }
  if (reduce == "sum") return {b.where(reached, b.scatter_add(b.zeros(self.shape(), dt), index, src, dim), self)};
  // mean (floats): the sum in f32 at least (f16/bf16 rounded once, at the end), over the count.
  const DType ct = compute_dtype(dt);
  Var sum = b.scatter_add(include_self ? b.to(self, ct) : b.zeros(self.shape(), ct), index, b.to(src, ct), dim);
  Var n = b.to(include_self ? count + 1.0 : count, ct);
  Var mean = b.to(sum / n, dt);
  return {include_self ? mean : b.where(reached, mean, self)};
}

}  // namespace

void install_scatter() { register_decomposition(Op::ScatterReduce, scatter_reduce); }

}  // namespace kiln::decompositions
