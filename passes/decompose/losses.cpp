// Decompositions of nll_loss and cross_entropy: a gather of each row's target column,
// masked where the target is ignore_index, then reduced.
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

struct RowLosses {
  Var loss;     // per row, the target's shape; 0 where the row is ignored
  Var counted;  // bool, the target's shape: the rows not ignored
};

// -logp[r, target[r]] for log-probabilities [N, C] (or [C] with a 0-d target).
RowLosses nll_rows(Builder& b, Var logp, Var target, int64_t ignore_index) {
  DType it = target.dtype();
  Var counted = b.ne(target, b.scalar(static_cast<double>(ignore_index), it));
  // An ignored row's target (often -100) is no class: it reads class 0 instead, so the gather
  // stays in range, and its loss is replaced by 0 below.
  Var column = b.where(counted, target, b.scalar(0, it));
  Var scores = logp.rank() == 1 ? b.unsqueeze(logp, 0) : logp;
  int64_t rows = scores.shape()[0];
  Var picked = b.reshape(b.gather(scores, b.reshape(column, {rows, 1}), 1), target.shape());
  return {b.where(counted, -picked, b.scalar(0, logp.dtype())), counted};
}

// "none": the rows; "sum": their total; "mean": the total over the rows not ignored (all
// ignored is 0 / 0 = nan, as in PyTorch).
Value reduce_rows(Builder& b, const RowLosses& r, const std::string& reduction) {
  if (reduction == "none") return r.loss;
  Var total = b.sum(r.loss);
  if (reduction == "sum") return total;
  return total / b.sum(r.counted, {}, false, r.loss.dtype());
}

Values nll_loss(DecompositionContext& c) {
  RowLosses r = nll_rows(c.b, c.input(0), c.input(1), c.attrs().get_int("ignore_index"));
  return {reduce_rows(c.b, r, c.attrs().get_string("reduction"))};
}

// log_softmax over the classes, then nll_loss. With label smoothing eps each row's loss is
// (1-eps)*nll + eps*(-sum_c logp_c)/C (ignored rows 0), and "mean" divides both terms by the
// rows not ignored (the reference's formula, PyTorch's).
Values cross_entropy(DecompositionContext& c) {
  Builder& b = c.b;
  const Attrs& a = c.attrs();
  Var logp = b.op(Op::LogSoftmax, {c.input(0)}, Attrs{{"dim", int64_t(-1)}});
  double eps = a.get_float("label_smoothing");
  if (eps == 0)
    return {b.op(Op::NllLoss, {logp, c.input(1)},
                 Attrs{{"ignore_index", a.get_int("ignore_index")}, {"reduction", a.get_string("reduction")}})};
  RowLosses r = nll_rows(b, logp, c.input(1), a.get_int("ignore_index"));
  auto classes = static_cast<double>(logp.shape().back());
  Var smooth = -b.sum(logp, {-1}) / classes;
  r.loss = (1 - eps) * r.loss + eps * b.where(r.counted, smooth, b.scalar(0, logp.dtype()));
  return {reduce_rows(b, r, a.get_string("reduction"))};
}

}  // namespace

void install_losses() {
  register_decomposition(Op::NllLoss, nll_loss);
  register_decomposition(Op::CrossEntropy, cross_entropy);
}

}  // namespace kiln::decompositions
