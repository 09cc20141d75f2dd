// Every op of ir/ops.def (except `input`) has a builder-API wrapper: tracing one call of each
// must record every op of the table. A new row without a wrapper fails here.
#include <gtest/gtest.h>

#include <set>

#include "frontend/kiln.h"

using namespace kiln;

TEST(OpCoverage, EveryOpHasAWrapper) {
  TracedGraph g = trace(
      [](const std::vector<Tensor>& in) {
        const Tensor &x = in[0], &m = in[1], &idx = in[2];  // f32[4,4], bool[4,4], i64[4]
        std::vector<Tensor> out{neg(x), abs(x), exp(x), log(x), log1p(x), sqrt(x), rsqrt(x), reciprocal(x), sin(x),
                                cos(x), tanh(x), sigmoid(x), relu(x), gelu(x, "tanh"), silu(x), square(x), erf(x),
                                sign(x), logical_not(m), to(x, DType::F16), floor(x), ceil(x), round(x), trunc(x),
                                log2(x), exp2(x), erfinv(x), bitwise_not(idx), bitwise_and(idx, idx), bitwise_or(m, m),
                                bitwise_xor(idx, idx)};
        for (auto* fn : {&add, &sub, &mul, &div, &pow, &maximum, &minimum, &eq, &ne, &lt, &le, &gt, &ge, &logical_and,
                         &logical_or, &fmod, &remainder, &atan2})
          out.push_back(fn(x, x));
        out.push_back(where(m, x, 0.0));
        out.push_back(clamp(x, -1.0, 1.0));
        out.push_back(masked_fill(x, m, 0.0));
        out.push_back(sum(x, {0}));
        out.push_back(mean(x));
        out.push_back(amax(x, 1));
        out.push_back(amin(x));
        out.push_back(argmax(x, 0));
        out.push_back(var(x, {1}));
        out.push_back(prod(x, 0));
        out.push_back(reshape(x, {16}));
        out.push_back(permute(x, {1, 0}));
        out.push_back(transpose(x, 0, 1));
        out.push_back(expand(x.unsqueeze(0), {2, 4, 4}));
        out.push_back(squeeze(x.unsqueeze(0)));
        out.push_back(slice(x, 1, 1, 3));
        out.push_back(cat({x, x}, 1));
        out.push_back(split(x, 2)[0]);
        out.push_back(contiguous(x));
        out.push_back(full({2}, 1.5));
        out.push_back(zeros({2}));
        out.push_back(ones({2}));
        out.push_back(arange(0, 4, 2));
        out.push_back(constant({2}, DType::F32, {1, 2}));
        out.push_back(rand({2}, 5));
        out.push_back(matmul(x, x));
        out.push_back(bmm(x.unsqueeze(0), x.unsqueeze(0)));
        out.push_back(linear(x, x, idx.to(DType::F32)));
        out.push_back(addmm(x, x, x, 0.5, 2));
        out.push_back(tril(x, 1));
        out.push_back(triu({3, 3}));
        out.push_back(softmax(x, 1));
        out.push_back(log_softmax(x, 0));
        out.push_back(layer_norm(x, {4}));
        out.push_back(embedding(idx, x));
        out.push_back(gather(x, 1, idx.unsqueeze(1)));
        out.push_back(scatter_add(x, 1, idx.unsqueeze(1), x));
        out.push_back(scatter(x, 1, idx.unsqueeze(1), x));
        out.push_back(scatter_reduce(x, 1, idx.unsqueeze(1), x, "amax", false));
        out.push_back(scatter_fold(x, 1, idx.unsqueeze(1), x, "prod"));
        out.push_back(einsum("ij,jk->ki", {x, x}));
        ValuesIndices sorted = sort(x, 0, true);
        ValuesIndices top = topk(x, 2);
        out.insert(out.end(), {sorted.values, sorted.indices, top.values, top.indices});
        out.push_back(cross_entropy(x, idx));
        out.push_back(nll_loss(x, idx, 0, "sum"));
        out.push_back(dropout(x, 0.1, true, 3));
        for (Tensor a : {hardsigmoid(x), hardswish(x), leaky_relu(x, 0.2), elu(x, 0.5), selu(x), softplus(x, 2.0, 10.0), mish(x)})
          out.push_back(a);
        out.push_back(logsumexp(x, {1}));
        Tensor img = x.reshape({1, 1, 4, 4});
        out.push_back(conv(img, slice(slice(img, 2, 0, 2), 3, 0, 2), std::nullopt, {1}, {1}));
        out.push_back(conv_transpose(img, slice(slice(img, 2, 0, 3), 3, 0, 3), std::nullopt, {2}));
        out.push_back(max_pool(img, {2, 2}));
        out.push_back(rms_norm(x, {4}, ones({4})));
        out.push_back(group_norm(img, 1, ones({1}), zeros({1})));
        out.push_back(avg_pool(img, {3, 3}, {1}, {1}, false, false));
        out.push_back(isnan(x));
        out.push_back(isinf(x));
        out.push_back(nan_to_num(x, 0.0, 1.0));
        Tensor q = x.unsqueeze(0);
        out.push_back(scaled_dot_product_attention(q, q, q, std::nullopt, 0.0, true));
        std::vector<Tensor> fa = flash_attention(q, q, q, false, 0.5);
        std::vector<Tensor> fb = flash_attention_backward(fa[0], q, q, q, fa[1], fa[1], false, 0.5);
        out.insert(out.end(), fb.begin(), fb.end());
        // A group of one: the collectives record their ops and pass the tensor through.
        out.push_back(all_reduce(x, 1));
        out.push_back(all_gather(x, 1, 1));
        out.push_back(reduce_scatter(x, 1, 0, "mean"));
        out.push_back(broadcast(x, 1));
        out.push_back(reduce(x, 1));
        return out;
      },
      {zeros({4, 4}), zeros({4, 4}, DType::Bool), zeros({4}, DType::I64)});
  std::set<std::string> seen;
  for (Node* n : g.graph.nodes()) seen.insert(n->info().name);
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    if (info.op == Op::Input) continue;
    EXPECT_TRUE(seen.count(info.name)) << "no wrapper call recorded op '" << info.name << "'";
  }
}
