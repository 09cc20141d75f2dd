// Convolution and pooling: shape rules (and their errors) and reference kernels on small cases
// worked out by hand, and the transposed convolution as the adjoint of the convolution
// (<conv(x, w), y> = <x, conv_transpose(y, w)> for every geometry).
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

HostTensor run1(Op op, std::vector<HostTensor> in, const Attrs& a) {
  Graph g;
  std::vector<Value> vs;
  for (size_t i = 0; i < in.size(); ++i) vs.push_back(g.add_input(fmt::format("x{}", i), in[i].meta()));
  g.set_outputs({g.add(op, vs, a)});
  return interpret(g, in)[0];
}

HostTensor T(Shape s, std::vector<double> v) { return HostTensor::from_doubles(DType::F64, s, v); }

Attrs conv_attrs(IntList stride, IntList padding, IntList dilation, int64_t groups, bool transposed = false, IntList output_padding = {0}) {
  return Attrs{{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}, {"transposed", transposed},
               {"output_padding", output_padding}};
}

TEST(ConvOps, A2dConvolutionWorkedOutByHand) {
  // x 1x1x3x3 = 1..9, w = [[1, 0], [0, -1]] (x[i][j] - x[i+1][j+1] = -4 everywhere), bias 0.5.
  HostTensor x = T({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), w = T({1, 1, 2, 2}, {1, 0, 0, -1}), b = T({1}, {0.5});
  EXPECT_EQ(run1(Op::Convolution, {x, w, b}, conv_attrs({1}, {0}, {1}, 1)).to_doubles(), (std::vector<double>{-3.5, -3.5, -3.5, -3.5}));
  // padding 1, stride 2: outputs at the padded input's (0,0), (0,2), (2,0), (2,2):
  // x[-1][-1] - x[0][0] = -1, x[-1][1] - x[0][2] = -3, x[1][-1] - x[2][0] = -7, x[1][1] - x[2][2] = 5 - 9.
  EXPECT_EQ(run1(Op::Convolution, {x, w}, conv_attrs({2}, {1}, {1}, 1)).to_doubles(), (std::vector<double>{-1, -3, -7, -4}));
  // dilation 2 on the 3x3: one output, x[0][0] - x[2][2].
  EXPECT_EQ(run1(Op::Convolution, {x, w}, conv_attrs({1}, {0}, {2}, 1)).to_doubles(), (std::vector<double>{-8}));
}

TEST(ConvOps, GroupsConvolveTheirOwnChannels) {
  // Depthwise: 2 channels, 2 groups, 1x1 kernels 2 and 3.
  HostTensor x = T({1, 2, 1, 2}, {1, 2, 10, 20}), w = T({2, 1, 1, 1}, {2, 3});
  EXPECT_EQ(run1(Op::Convolution, {x, w}, conv_attrs({1}, {0}, {1}, 2)).to_doubles(), (std::vector<double>{2, 4, 30, 60}));
}

TEST(ConvOps, ATransposedConvolutionIsTheAdjointOfTheConvolution) {
  struct G {
    Shape x, w;
    IntList stride, padding, dilation;
    int64_t groups;
  };
  for (const G& g : {G{{2, 3, 7}, {4, 3, 3}, {2}, {1}, {1}, 1}, G{{1, 4, 6, 5}, {6, 2, 3, 2}, {1, 2}, {1, 0}, {2, 1}, 2},
                     G{{1, 2, 4, 5, 3}, {2, 1, 2, 3, 1}, {2, 1, 1}, {0, 1, 0}, {1}, 2}}) {
    HostTensor x = random_tensor(TensorMeta(DType::F64, g.x), 1), w = random_tensor(TensorMeta(DType::F64, g.w), 2);
    HostTensor y = run1(Op::Convolution, {x, w}, conv_attrs(g.stride, g.padding, g.dilation, g.groups));
    HostTensor u = random_tensor(y.meta(), 3);
    // conv_transpose's weight is [C_in of it = the conv's OC, OC/groups = the conv's C/groups, K...]: the same tensor.
    HostTensor back = run1(Op::Convolution, {u, w}, conv_attrs(g.stride, g.padding, g.dilation, g.groups, true));
    // The transposed output may be shorter than x where the stride skipped the end: compare the overlap.
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.numel(); ++i) lhs += y.get(i) * u.get(i);
    ASSERT_EQ(back.rank(), x.rank());
    std::vector<int64_t> xs = x.shape(), bs = back.shape();
    for (int64_t i = 0; i < back.numel(); ++i) {
      int64_t rest = i, xi = 0, mul = 1;
      for (int64_t d = back.rank(); d-- > 0;) {
        int64_t c = rest % bs[d];
        rest /= bs[d];
        xi += c * mul;
        mul *= xs[d];
      }
      rhs += back.get(i) * x.get(xi);
    }
    EXPECT_NEAR(lhs, rhs, 1e-9 * (std::abs(lhs) + 1)) << shape_str(g.x) << " * " << shape_str(g.w);
  }
}

TEST(ConvOps, TransposedConvolutionSizesAndOutputPadding) {
  // [1,1,3] with kernel 3, stride 2, padding 1, output_padding 1: (3-1)*2 - 2 + 3 + 1 = 6.
  HostTensor x = T({1, 1, 3}, {1, 2, 3}), w = T({1, 1, 3}, {1, 1, 1});
  HostTensor y = run1(Op::Convolution, {x, w}, conv_attrs({2}, {1}, {1}, 1, true, {1}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 6}));
  // full output (no padding) [1, 1, 3, 2, 5, 3, 3]; padding 1 crops one each side, output_padding
  // adds one at the end: [1, 3, 2, 5, 3, 3].
  EXPECT_EQ(y.to_doubles(), (std::vector<double>{1, 3, 2, 5, 3, 3}));
}

TEST(ConvOps, PoolsWorkedOutByHand) {
  HostTensor x = T({1, 1, 3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Attrs m{{"kernel_size", IntList{2, 2}}};
  EXPECT_EQ(run1(Op::MaxPool, {x}, m).to_doubles(), (std::vector<double>{6, 8}));
  Attrs mc{{"kernel_size", IntList{2, 2}}, {"ceil_mode", true}};
  EXPECT_EQ(run1(Op::MaxPool, {x}, mc).to_doubles(), (std::vector<double>{6, 8, 10, 12}));
  // avg 3x3, stride 1, padding 1: corner (0,0) sums 1+2+5+6 = 14 over 9 with count_include_pad, over 4 without.
  Attrs a{{"kernel_size", IntList{3, 3}}, {"stride", IntList{1}}, {"padding", IntList{1}}};
  EXPECT_DOUBLE_EQ(run1(Op::AvgPool, {x}, a).get(0), 14.0 / 9);
  a.set("count_include_pad", false);
  EXPECT_DOUBLE_EQ(run1(Op::AvgPool, {x}, a).get(0), 14.0 / 4);
  // NaN in a window comes out; -inf padding never wins.
  HostTensor n = T({1, 1, 4}, {-5, std::nan(""), -7, -8});
  Attrs p{{"kernel_size", IntList{2}}, {"stride", IntList{2}}, {"padding", IntList{1}}};
  std::vector<double> r = run1(Op::MaxPool, {n}, p).to_doubles();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], -5);
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], -8);
}

TEST(NormOps, RmsNormAndGroupNormWorkedOutByHand) {
  // rms of [3, 4] is sqrt(12.5); eps 0.
  HostTensor x = T({1, 2}, {3, 4});
  std::vector<double> r = run1(Op::RmsNorm, {x}, Attrs{{"normalized_shape", IntList{2}}, {"eps", 0.0}}).to_doubles();
  EXPECT_NEAR(r[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(r[1], 4 / std::sqrt(12.5), 1e-15);
  // eps left out is f64's machine epsilon: rms_norm of zeros is 0, not NaN.
  EXPECT_EQ(run1(Op::RmsNorm, {T({2}, {0, 0})}, Attrs{{"normalized_shape", IntList{2}}}).to_doubles(), (std::vector<double>{0, 0}));
  // group_norm of [N=1, C=2, 2] in 2 groups: each channel [a, b] becomes [-1, 1] (eps 0), then
  // weight and bias per channel.
  HostTensor g = T({1, 2, 2}, {1, 3, 10, 30});
  std::vector<double> y = run1(Op::GroupNorm, {g, T({2}, {2, 3}), T({2}, {0.5, -1})}, Attrs{{"num_groups", int64_t{2}}, {"eps", 0.0}}).to_doubles();
  EXPECT_EQ(y, (std::vector<double>{-1.5, 2.5, -4, 2}));
}

TEST(ConvOps, ShapeRulesSayWhatIsWrong) {
  Graph g;
  Value x = g.add_input("x", TensorMeta(DType::F32, {2, 6, 8, 8}));
  Value w = g.add_input("w", TensorMeta(DType::F32, {4, 4, 3, 3}));
  Value wi = g.add_input("wi", TensorMeta(DType::I64, {4, 6, 3, 3}));
  auto msg = [&](Op op, std::vector<Value> in, const Attrs& a) {
    try {
      g.add(op, in, a);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(Op::Convolution, {x, w}, Attrs{}).find("expects 4 input channels (4 per group), the input has 6"), std::string::npos);
  EXPECT_NE(msg(Op::Convolution, {x, w}, Attrs{{"groups", int64_t{4}}}).find("6 input channels do not split into 4 groups"),
            std::string::npos);
  EXPECT_NE(msg(Op::Convolution, {x, wi}, Attrs{}).find("input is f32 but weight is i64"), std::string::npos);
  Value w9 = g.add_input("w9", TensorMeta(DType::F32, {4, 6, 9, 9}));
  EXPECT_NE(msg(Op::Convolution, {x, w9}, Attrs{}).find("the kernel reaches 9 elements"), std::string::npos);
  EXPECT_NE(msg(Op::MaxPool, {x}, Attrs{{"kernel_size", IntList{2, 2}}, {"padding", IntList{2}}}).find("at most half the kernel"),
            std::string::npos);
  EXPECT_NE(msg(Op::Convolution, {x, g.add_input("w5", TensorMeta(DType::F32, {4, 6, 1, 1, 1, 1}))}, Attrs{}).find("must have 3, 4 or 5 dims"),
            std::string::npos);
  // Shapes: 8x8, kernel 3, stride 2, padding 1 -> 4x4; max_pool of [C, L...] keeps its rank.
  EXPECT_EQ(g.add(Op::Convolution, {x, g.add_input("w6", TensorMeta(DType::F32, {5, 6, 3, 3}))}, Attrs{{"stride", IntList{2}}, {"padding", IntList{1}}})
                .meta().shape,
            (Shape{2, 5, 4, 4}));
  EXPECT_EQ(g.add(Op::MaxPool, {g.add_input("c", TensorMeta(DType::F32, {3, 9}))}, Attrs{{"kernel_size", IntList{2}}, {"ceil_mode", true}}).meta().shape,
            (Shape{3, 5}));
}

}  // namespace
}  // namespace kiln
