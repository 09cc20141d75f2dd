// Derivative rules of the collectives, for the loss summed over the ranks (each rank's
// gradient of its own loss, as DDP and FSDP take them): a collective's gradient is its adjoint
// collective. all_reduce <-> all_reduce, all_gather <-> reduce_scatter, broadcast <-> reduce.
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

Attrs group(const VjpContext& c) { return {{"world_size", c.attrs().get_int("world_size")}}; }

Var collective(VjpContext& c, Op op, const Attrs& a) { return c.b.op(op, {c.grad().v}, a); }

// A mean over the ranks scales each rank's contribution by 1 / world_size.
Var scaled_for_mean(VjpContext& c, Var g) {
  if (c.attrs().get_string("op") != "mean") return g;
  return c.b.mul(g, c.b.scalar(1.0 / static_cast<double>(c.attrs().get_int("world_size")), g.dtype()));
}

std::vector<Value> all_reduce_backward(VjpContext& c) {
  Attrs a = group(c);
  a.set("op", c.attrs().get_string("op"));
  return {collective(c, Op::AllReduce, a).v};
}

std::vector<Value> all_gather_backward(VjpContext& c) {
  Attrs a = group(c);
  a.set("dim", c.attrs().get_int("dim"));
  a.set("op", std::string("sum"));
  return {collective(c, Op::ReduceScatter, a).v};
}

std::vector<Value> reduce_scatter_backward(VjpContext& c) {
  Attrs a = group(c);
  a.set("dim", c.attrs().get_int("dim"));
  return {scaled_for_mean(c, collective(c, Op::AllGather, a)).v};
}

std::vector<Value> broadcast_backward(VjpContext& c) {
  Attrs a = group(c);
  a.set("dst", c.attrs().get_int("src"));
  a.set("op", std::string("sum"));
  return {collective(c, Op::Reduce, a).v};
}

std::vector<Value> reduce_backward(VjpContext& c) {
  Attrs a = group(c);
  a.set("src", c.attrs().get_int("dst"));
  return {scaled_for_mean(c, collective(c, Op::Broadcast, a)).v};
}

}  // namespace

void install_collective_vjps() {
  register_vjp(Op::AllReduce, all_reduce_backward);
  register_vjp(Op::AllGather, all_gather_backward);
  register_vjp(Op::ReduceScatter, reduce_scatter_backward);
  register_vjp(Op::Broadcast, broadcast_backward);
  register_vjp(Op::Reduce, reduce_backward);
}

}  // namespace kiln::autograd
