// Reference kernels of attention: scaled_dot_product_attention as PyTorch defines it, and the
// FlashAttention primitives it lowers to, written out directly in double (never through the
// other kernels), so they check the decompositions and the tiled kernels.
#include <cmath>
#include <limits>

#include "ir/random.h"
#include "ir/reference/kernels.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;
constexpr double kInf = std::numeric_limits<double>::infinity();

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// One [L, E]-style matrix of a batched tensor: element (r, c) of batch `b` (a logical index
// into the broadcast batch), read through broadcasting.
struct Matrices {
  const HostTensor& t;
  BroadcastIndexer batch;
  int64_t rows, cols;
  Matrices(const HostTensor& t, const Shape& out_batch)
      : t(t), batch(batch_of(t.shape()), out_batch), rows(t.shape()[t.rank() - 2]), cols(t.shape().back()) {}
  double at(int64_t b, int64_t r, int64_t c) const { return t.get((batch(b) * rows + r) * cols + c); }
};

double dot_rows(const Matrices& a, int64_t ra, const Matrices& b, int64_t rb, int64_t bi) {
  double s = 0;
  for (int64_t e = 0; e < a.cols; ++e) s += a.at(bi, ra, e) * b.at(bi, rb, e);
  return s;
}

// The largest of `s`, NaN if any is NaN (so a NaN score poisons its row, as in PyTorch).
double row_max(const std::vector<double>& s) {
  double m = -kInf;
  for (double x : s)
    if (x > m || std::isnan(x)) m = std::isnan(m) ? m : x;
  return m;
}

std::vector<HostTensor> sdpa(Ins in, const Attrs& a, Outs outs) {
  const TensorMeta& om = outs[0];
  Shape batch = batch_of(om.shape);
  int64_t nb = numel(batch);
  Matrices q(in[0], batch), k(in[1], batch), v(in[2], batch);
  const int64_t L = q.rows, S = k.rows, Ev = v.cols;
  const double scale = a.opt_float("scale").value_or(1.0 / std::sqrt(static_cast<double>(q.cols)));
  const bool causal = a.get_bool("is_causal");
  const double p = a.get_float("dropout_p");
  const auto seed = static_cast<uint64_t>(a.get_int("seed"));
  const bool has_mask = in.size() > 3;
  Shape scores_shape = batch;
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  BroadcastIndexer mask_at(has_mask ? in[3].shape() : Shape{}, scores_shape);
  HostTensor out = HostTensor::empty(om);
  std::vector<double> s(static_cast<size_t>(S));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < S; ++j) {
        double x = dot_rows(q, i, k, j, b) * scale;
        int64_t flat = (b * L + i) * S + j;
        if (causal && j > i) x = -kInf;
        if (has_mask) x = in[3].dtype() == DType::Bool ? (in[3].get_int(mask_at(flat)) ? x : -kInf) : x + in[3].get(mask_at(flat));
        s[static_cast<size_t>(j)] = x;
      }
      double m = row_max(s), sum = 0;
      for (double& x : s) sum += (x = m == -kInf ? 0.0 : std::exp(x - m));
      for (int64_t j = 0; j < S; ++j) {
        double w = m == -kInf ? 0.0 : s[static_cast<size_t>(j)] / sum;
        if (p > 0) w *= random_uniform(seed, static_cast<uint64_t>((b * L + i) * S + j)) >= p ? 1.0 / (1.0 - p) : 0.0;
        s[static_cast<size_t>(j)] = w;
      }
      for (int64_t d = 0; d < Ev; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += s[static_cast<size_t>(j)] * v.at(b, j, d);
        out.set((b * L + i) * Ev + d, acc);
      }
    }
  return {out};
}

// The scaled, masked scores of query row i (causal: key j <= i), and their log-sum-exp.
struct ScoreRow {
  std::vector<double> s;
  double lse = -kInf;
};
ScoreRow scores(const Matrices& q, const Matrices& k, int64_t b, int64_t i, double scale, bool causal) {
  ScoreRow r;
  r.s.resize(static_cast<size_t>(k.rows));
  for (int64_t j = 0; j < k.rows; ++j) r.s[static_cast<size_t>(j)] = causal && j > i ? -kInf : dot_rows(q, i, k, j, b) * scale;
  double m = row_max(r.s), sum = 0;
  if (m == -kInf) return r;
  for (double x : r.s) sum += std::exp(x - m);
  r.lse = m + std::log(sum);
  return r;
}

std::vector<HostTensor> flash_attention(Ins in, const Attrs& a, Outs outs) {
  Shape batch = batch_of(in[0].shape());
  Matrices q(in[0], batch), k(in[1], batch), v(in[2], batch);
  const double scale = a.get_float("scale");
  const bool causal = a.get_bool("is_causal");
  HostTensor out = HostTensor::empty(outs[0]), lse = HostTensor::empty(outs[1]);
  for (int64_t b = 0; b < numel(batch); ++b)
    for (int64_t i = 0; i < q.rows; ++i) {
      ScoreRow r = scores(q, k, b, i, scale, causal);
      lse.set(b * q.rows + i, r.lse);
      for (int64_t d = 0; d < v.cols; ++d) {
        double acc = 0;
        if (r.lse != -kInf)
          for (int64_t j = 0; j < k.rows; ++j) acc += std::exp(r.s[static_cast<size_t>(j)] - r.lse) * v.at(b, j, d);
        out.set((b * q.rows + i) * v.cols + d, acc);
      }
    }
  return {out, lse};
}

// P = exp(scores - lse) (the forward's weights, from its saved log-sum-exp), dV = Pᵀ dO,
// dS = P * (dO Vᵀ - delta), dQ = dS K * scale, dK = dSᵀ Q * scale.
std::vector<HostTensor> flash_attention_backward(Ins in, const Attrs& a, Outs outs) {
  Shape batch = batch_of(in[1].shape());
  Matrices dout(in[0], batch), q(in[1], batch), k(in[2], batch), v(in[3], batch);
  const HostTensor &lse = in[4], &delta = in[5];
  const double scale = a.get_float("scale");
  const bool causal = a.get_bool("is_causal");
  const int64_t L = q.rows, S = k.rows, E = q.cols, Ev = v.cols;
  std::vector<double> dq(static_cast<size_t>(L * E)), dk(static_cast<size_t>(S * E)), dv(static_cast<size_t>(S * Ev));
  HostTensor gq = HostTensor::empty(outs[0]), gk = HostTensor::empty(outs[1]), gv = HostTensor::empty(outs[2]);
  for (int64_t b = 0; b < numel(batch); ++b) {
    std::fill(dq.begin(), dq.end(), 0.0);
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    for (int64_t i = 0; i < L; ++i) {
      const double l = lse.get(b * L + i), di = delta.get(b * L + i);
      for (int64_t j = 0; j < S; ++j) {
        if ((causal && j > i) || l == -kInf) continue;
        double pij = std::exp(dot_rows(q, i, k, j, b) * scale - l);
        double dp = 0;
        for (int64_t d = 0; d < Ev; ++d) {
          dv[static_cast<size_t>(j * Ev + d)] += pij * dout.at(b, i, d);
          dp += dout.at(b, i, d) * v.at(b, j, d);
        }
        double ds = pij * (dp - di) * scale;
        for (int64_t e = 0; e < E; ++e) {
          dq[static_cast<size_t>(i * E + e)] += ds * k.at(b, j, e);
          dk[static_cast<size_t>(j * E + e)] += ds * q.at(b, i, e);
        }
      }
    }
    for (int64_t x = 0; x < L * E; ++x) gq.set(b * L * E + x, dq[static_cast<size_t>(x)]);
    for (int64_t x = 0; x < S * E; ++x) gk.set(b * S * E + x, dk[static_cast<size_t>(x)]);
    for (int64_t x = 0; x < S * Ev; ++x) gv.set(b * S * Ev + x, dv[static_cast<size_t>(x)]);
  }
  return {gq, gk, gv};
}

}  // namespace

void install_attention(const Setter& set) {
  set(Op::ScaledDotProductAttention, sdpa);
  set(Op::FlashAttention, flash_attention);
  set(Op::FlashAttentionBackward, flash_attention_backward);
}

}  // namespace kiln::reference
