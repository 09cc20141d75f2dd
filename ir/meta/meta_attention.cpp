// Shape-and-dtype rules of attention: scaled_dot_product_attention and the FlashAttention
// primitives it lowers to.
#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

namespace {

Shape batch_of(const TensorMeta& t) { return Shape(t.shape.begin(), t.shape.end() - 2); }

// q [..., L, E], k [..., S, E], v [..., S, Ev] of one floating dtype; the batch dims broadcast
// (`equal_batch`: must be equal, as the primitives need). Returns the broadcast batch.
Shape check_qkv(In in, bool equal_batch) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  for (const TensorMeta* t : {&q, &k, &v})
    if (t->rank() < 2) fail("query, key and value need at least 2 dims ([..., length, features]), got {}", shape_str(t->shape));
  if (!is_floating(q.dtype)) fail("attention needs floating-point query, key and value, got {}", dtype_name(q.dtype));
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    fail("query, key and value must have one dtype, got {}, {} and {}", dtype_name(q.dtype), dtype_name(k.dtype), dtype_name(v.dtype));
  if (q.shape.back() != k.shape.back())
    fail("query's features ({}) and key's ({}) differ: q kᵀ needs them equal", q.shape.back(), k.shape.back());
  if (k.shape[k.rank() - 2] != v.shape[v.rank() - 2])
    fail("key has {} positions and value {}: they must be equal", k.shape[k.rank() - 2], v.shape[v.rank() - 2]);
  if (equal_batch) {
    if (batch_of(k) != batch_of(q) || batch_of(v) != batch_of(q))
      fail("query, key and value need equal batch dims here, got {}, {} and {}", shape_str(batch_of(q)), shape_str(batch_of(k)),
           shape_str(batch_of(v)));
    return batch_of(q);
  }
  return broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k)), batch_of(v));
}

// The log-sum-exp and delta per query: f64 for f64 attention, else f32.
DType statistics_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

Shape with(Shape s, std::initializer_list<int64_t> dims) {
  s.insert(s.end(), dims);
  return s;
}

}  // namespace

Metas meta_sdpa(In in, const Attrs& a) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  Shape batch = check_qkv(in, false);
  int64_t L = q.shape[q.rank() - 2], S = k.shape[k.rank() - 2];
  if (in.size() > 3) {
    const TensorMeta& m = in[3];
    if (a.get_bool("is_causal")) fail("give attn_mask or is_causal, not both (PyTorch's rule)");
    if (m.dtype != DType::Bool && m.dtype != q.dtype)
      fail("attn_mask must be bool (true = attend) or of the query's dtype {} (added to the scores), got {}", dtype_name(q.dtype),
           dtype_name(m.dtype));
    Shape scores = with(batch, {L, S});
    if (broadcast_shapes(scores, m.shape) != scores)
      fail("attn_mask {} does not broadcast to the scores {}", shape_str(m.shape), shape_str(scores));
  }
  double p = a.get_float("dropout_p");
  if (!(p >= 0 && p <= 1)) fail("dropout_p must be in [0, 1], got {}", p);
  return {TensorMeta(q.dtype, with(batch, {L, v.shape.back()}), q.device)};
}

Metas meta_flash_attention(In in, const Attrs&) {
  const TensorMeta &q = in[0], &v = in[2];
  Shape batch = check_qkv(in, true);
  int64_t L = q.shape[q.rank() - 2];
  return {TensorMeta(q.dtype, with(batch, {L, v.shape.back()}), q.device), TensorMeta(statistics_dtype(q.dtype), with(batch, {L}), q.device)};
}

Metas meta_flash_attention_backward(In in, const Attrs&) {
  const TensorMeta &dout = in[0], &q = in[1], &k = in[2], &v = in[3], &lse = in[4], &delta = in[5];
  Shape batch = check_qkv(in.subspan(1, 3), true);
  int64_t L = q.shape[q.rank() - 2];
  Shape out = with(batch, {L, v.shape.back()}), rows = with(batch, {L});
  if (dout.dtype != q.dtype || dout.shape != out)
    fail("grad_out must be {} {} (the forward's output), got {}", dtype_name(q.dtype), shape_str(out), dout.str());
  const DType st = statistics_dtype(q.dtype);
  for (const TensorMeta* t : {&lse, &delta})
    if (t->dtype != st || t->shape != rows)
      fail("logsumexp and delta must be {} {} (one per query), got {}", dtype_name(st), shape_str(rows), t->str());
  return {TensorMeta(q.dtype, q.shape, q.device), TensorMeta(k.dtype, k.shape, k.device), TensorMeta(v.dtype, v.shape, v.device)};
}

}  // namespace kiln::meta
