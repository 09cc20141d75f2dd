// Shape-and-dtype rules of the collectives (ir/ops.def). Every rank holds a tensor of the same
// shape and dtype (the group checks it when it runs); results are contiguous.
#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

namespace {

int64_t world_size_of(const Attrs& a) {
  const int64_t w = a.get_int("world_size");
  if (w < 1) fail("world_size must be at least 1, got {}", w);
  return w;
}

void check_reduce_op(const Attrs& a, const TensorMeta& t) {
  const std::string& op = a.get_string("op");
  if (op != "sum" && op != "mean") fail("op must be \"sum\" or \"mean\", got \"{}\"", op);
  if (t.dtype == DType::Bool) fail("cannot {}-reduce a bool tensor across ranks", op);
  if (op == "mean" && !is_floating(t.dtype)) fail("a mean across ranks needs a floating tensor, got {}", dtype_name(t.dtype));
}

int64_t rank_of(const Attrs& a, const char* name, int64_t world) {
  const int64_t r = a.get_int(name);
  if (r < 0 || r >= world) fail("{}={} is not a rank of a group of {}", name, r, world);
  return r;
}

// `dim` normalized against the tensor's rank; a 0-d tensor has none to split or join.
size_t dim_of(const Attrs& a, const TensorMeta& t) {
  const int64_t rank = t.rank(), d = a.get_int("dim");
  if (rank == 0) fail("a 0-d tensor has no dim to split or join across ranks");
  if (d < -rank || d >= rank) fail("dim {} is out of range for a tensor of {} dims", d, rank);
  return static_cast<size_t>(d < 0 ? d + rank : d);
}

}  // namespace

Metas meta_all_reduce(In in, const Attrs& a) {
  world_size_of(a);
  check_reduce_op(a, in[0]);
  return {in[0].contiguous()};
}

Metas meta_all_gather(In in, const Attrs& a) {
  const int64_t w = world_size_of(a);
  const size_t d = dim_of(a, in[0]);
  Shape s = in[0].shape;
  if (__builtin_mul_overflow(s[d], w, &s[d])) fail("dim {} of {} times {} ranks overflows", d, shape_str(in[0].shape), w);
  return {TensorMeta(in[0].dtype, s, in[0].device)};
}

Metas meta_reduce_scatter(In in, const Attrs& a) {
  const int64_t w = world_size_of(a);
  check_reduce_op(a, in[0]);
  const size_t d = dim_of(a, in[0]);
  Shape s = in[0].shape;
  if (s[d] % w != 0) fail("dim {} of {} ({}) does not split into {} equal parts, one per rank", d, shape_str(s), s[d], w);
  s[d] /= w;
  return {TensorMeta(in[0].dtype, s, in[0].device)};
}

Metas meta_broadcast(In in, const Attrs& a) {
  rank_of(a, "src", world_size_of(a));
  return {in[0].contiguous()};
}

Metas meta_reduce(In in, const Attrs& a) {
  rank_of(a, "dst", world_size_of(a));
  check_reduce_op(a, in[0]);
  return {in[0].contiguous()};
}

}  // namespace kiln::meta
