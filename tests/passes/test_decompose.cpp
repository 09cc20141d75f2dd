// The decompose pass: for every composite op (and mean, var), over shapes, dims, dtypes and
// attributes, the decomposed graph (after canonicalize, cse, dce) holds no composite op,
// verifies, prints and parses back, and computes what the original computes on the reference
// interpreter, on random non-zero inputs. Plus the registry, the errors, and MiniGPT.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>

#include "frontend/kiln.h"
#include "frontend/nn/minigpt.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "ir/verifier.h"
#include "passes/decompose.h"
#include "passes/pass_manager.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace testing;  // the shared helpers of tests/support
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const DType kF32 = DType::F32, kF64 = DType::F64;

const std::vector<std::string> kLowering = {"decompose", "canonicalize", "cse", "dce"};

// Per-dtype closeness of a decomposed result to the reference kernel's (which computes in
// double and rounds once; the decomposition rounds after every op).
::testing::AssertionResult close_for_dtype(const HostTensor& got, const HostTensor& want) {
  switch (want.dtype()) {
    case DType::F64: return tensors_close(got, want, 1e-12, 1e-12);
    case DType::F32: return tensors_close(got, want, 1e-6, 1e-5);
    case DType::F16: return tensors_close(got, want, 1e-3, 2e-3);
    case DType::BF16: return tensors_close(got, want, 1e-2, 1e-2);
    default: return tensors_close(got, want, 0, 0);
  }
}

// Runs the lowering on a copy of `g` and checks it: no composite left, verifies, round-trips
// through text, and gives the outputs of `g` on `inputs`. Returns the lowered graph.
Graph expect_lowering_agrees(const Graph& g, const std::vector<HostTensor>& inputs) {
  Graph d = g.clone();
  run_pipeline(d, kLowering);  // verifies after every pass
  EXPECT_NO_THROW(check_primitive(d));
  for (Node* n : d.nodes()) {
    EXPECT_NE(n->category(), OpCategory::Composite) << print_node(*n);
    EXPECT_TRUE(is_primitive(n->op())) << print_node(*n);
  }
  EXPECT_TRUE(verify(d).empty());
  std::string text = print_graph(d);
  Graph back = parse_graph(text, "decomposed");
  EXPECT_EQ(print_graph(back), text);

  std::vector<HostTensor> want = interpret(g, inputs), got = interpret(back, inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    EXPECT_EQ(got[i].shape(), want[i].shape());
    EXPECT_TRUE(close_for_dtype(got[i], want[i])) << "output " << i << " of\n" << print_graph(g) << "lowered to\n" << text;
  }
  return d;
}

// One node of `op` on graph inputs of these types, every result an output.
struct Case {
  Op op;
  std::vector<TensorMeta> inputs;
  Attrs attrs;
  int64_t int_bound = 8;  // integer inputs are drawn from [0, int_bound)
  // Edits the random inputs (ignored rows, nan, -inf rows).
  std::function<void(std::vector<HostTensor>&)> adjust = {};
};

std::string describe(const Case& c) {
  std::string s = std::string(op_name(c.op)) + "(";
  for (const TensorMeta& m : c.inputs) s += m.str() + " ";
  Graph g;
  std::vector<Value> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back(g.add_input(fmt::format("x{}", i), c.inputs[i]));
  return s + ") " + print_attrs(*g.add_node(c.op, ins, c.attrs, "y"));
}

// Checks one case on two seeds of random inputs.
void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  Graph g("one_op");
  std::vector<Value> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back(g.add_input(fmt::format("x{}", i), c.inputs[i]));
  Node* n = g.add_node(c.op, ins, c.attrs, "y");
  std::vector<Value> outs;
  for (int i = 0; i < n->num_results(); ++i) outs.push_back(n->result(i));
  g.set_outputs(outs);
  for (uint64_t seed : {11u, 12u}) {
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i) inputs.push_back(random_tensor(c.inputs[i], seed * 10 + i, c.int_bound));
    if (c.adjust) c.adjust(inputs);
    Graph d = expect_lowering_agrees(g, inputs);
    EXPECT_FALSE(d.find("y").node && d.find("y").node->op() == c.op) << "the node was not replaced";
  }
}

Attrs A(std::initializer_list<std::pair<const std::string, AttrValue>> kv) {
  Attrs a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

// ---- linear algebra

TEST(Decompose, Linear) {
  for (DType dt : {kF32, kF64}) {
    for (Shape x : {Shape{7}, Shape{1, 33}, Shape{7, 33}, Shape{2, 3, 33}}) {
      for (int64_t out : {1, 7}) {
        Shape w{out, x.back()};
        Shape y(x.begin(), x.end() - 1);
        y.push_back(out);
        check({Op::Linear, {T(dt, x), T(dt, w)}, {}});
        check({Op::Linear, {T(dt, x), T(dt, w), T(dt, {out})}, {}});
        check({Op::Linear, {T(dt, x), T(dt, w), T(dt, {})}, {}});  // a 0-d bias broadcasts
      }
      check({Op::Linear, {T(dt, x), T(dt, {x.back()})}, {}});  // a 1-d weight: a dot product per row
    }
  }
}

TEST(Decompose, Addmm) {
  auto with_nan_self = [](std::vector<HostTensor>& in) { in[0].set(0, kNan); };
  for (DType dt : {kF32, kF64}) {
    for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 33, 1}, {1, 7, 33}, {7, 7, 7}, {33, 7, 7}}) {
      for (Shape self : {Shape{m, n}, Shape{n}, Shape{1, n}, Shape{}}) {
        std::vector<TensorMeta> ins{T(dt, self), T(dt, {m, k}), T(dt, {k, n})};
        check({Op::Addmm, ins, {}});
        check({Op::Addmm, ins, A({{"beta", 0.5}, {"alpha", 2.0}})});
        check({Op::Addmm, ins, A({{"beta", int64_t(1)}, {"alpha", -0.5}})});
        // beta == 0 ignores self entirely: a nan in it must not reach the result.
        check({Op::Addmm, ins, A({{"beta", 0.0}, {"alpha", 1.5}}), 8, with_nan_self});
      }
    }
  }
  // Integer addmm: a float scale truncates (1.5 acts as 1, 0.5 as 0).
  std::vector<TensorMeta> ints{T(DType::I64, {7}), T(DType::I64, {3, 7}), T(DType::I64, {7, 7})};
  check({Op::Addmm, ints, A({{"beta", int64_t(2)}, {"alpha", int64_t(3)}})});
  check({Op::Addmm, ints, A({{"beta", 1.5}, {"alpha", 2.5}})});
  check({Op::Addmm, ints, A({{"beta", 0.5}, {"alpha", int64_t(1)}})});
}

TEST(Decompose, ConvolutionOfEveryGeometry) {
  // 1, 2 and 3 spatial dims; stride, padding, dilation, groups, bias; transposed with
  // output_padding; f64 (exact up to summation order) and f32.
  auto conv = [](Shape x, Shape w, bool bias, IntList stride, IntList padding, IntList dilation, int64_t groups,
                 bool transposed = false, IntList output_padding = {0}, DType dt = kF64) {
    Shape b{transposed ? w[1] * groups : w[0]};
    std::vector<TensorMeta> in{TensorMeta(dt, x), TensorMeta(dt, w)};
    if (bias) in.push_back(TensorMeta(dt, b));
    return Case{Op::Convolution, in,
                A({{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}, {"transposed", transposed},
                   {"output_padding", output_padding}})};
  };
  for (const Case& c : {conv({2, 3, 9}, {4, 3, 3}, true, {1}, {0}, {1}, 1), conv({2, 4, 10}, {6, 2, 3}, false, {2}, {1}, {2}, 2),
                        conv({1, 3, 7, 6}, {5, 3, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}, 1),
                        conv({2, 6, 5, 5}, {6, 1, 3, 3}, true, {1}, {1}, {1}, 6),  // depthwise
                        conv({1, 2, 4, 5, 3}, {4, 2, 2, 3, 1}, false, {1, 2, 1}, {1}, {1}, 1),
                        conv({2, 4, 5, 5}, {4, 2, 1, 1}, true, {1}, {0}, {1}, 2),  // 1x1, grouped
                        conv({2, 3, 4}, {3, 2, 3}, true, {2}, {1}, {1}, 1, true, {1}),
                        conv({1, 4, 3, 5}, {4, 3, 2, 3}, false, {2, 3}, {0, 1}, {2, 1}, 2, true, {1, 2}),
                        conv({1, 2, 3, 2, 2}, {2, 1, 2, 2, 2}, true, {2}, {1}, {1}, 2, true),
                        conv({2, 3, 8, 8}, {4, 3, 3, 3}, true, {2}, {1}, {1}, 1, false, {0}, kF32)})
    check(c);
}

TEST(Decompose, MaxAndAvgPools) {
  auto pool = [](Op op, Shape x, IntList k, IntList stride, IntList padding, bool ceil, std::optional<bool> include_pad = {},
                 IntList dilation = {1}) {
    Attrs a = A({{"kernel_size", k}, {"stride", stride}, {"padding", padding}, {"ceil_mode", ceil}});
    if (op == Op::MaxPool) a.set("dilation", dilation);
    if (include_pad) a.set("count_include_pad", *include_pad);
    return Case{op, {TensorMeta(kF64, x)}, a};
  };
  for (Op op : {Op::MaxPool, Op::AvgPool}) {
    check(pool(op, {2, 3, 9}, {3}, {2}, {1}, false));
    check(pool(op, {2, 3, 9}, {3}, {2}, {1}, true));
    check(pool(op, {1, 2, 7, 6}, {3, 2}, {}, {1, 0}, true));
    check(pool(op, {3, 5, 5}, {2, 2}, {1}, {1}, false));  // unbatched [C, H, W]
    check(pool(op, {1, 2, 4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {0, 1, 1}, true));
  }
  check(pool(Op::MaxPool, {1, 2, 9, 8}, {3, 2}, {2}, {1}, true, {}, {2, 3}));
  check(pool(Op::AvgPool, {1, 2, 7, 6}, {3, 3}, {2}, {1}, true, false));
  check(pool(Op::AvgPool, {2, 3, 9}, {3}, {2}, {1}, true, false));
  // ceil_mode's overhang in two dims with padding in both: the corner windows' divisors.
  check(pool(Op::AvgPool, {2, 4, 12, 10}, {3, 3}, {2}, {1}, true));
}

TEST(Decompose, RmsNormAndGroupNorm) {
  for (DType dt : {kF64, kF32, DType::BF16}) {
    check({Op::RmsNorm, {TensorMeta(dt, {3, 5, 8})}, A({{"normalized_shape", IntList{8}}})});  // eps: the dtype's
    check({Op::RmsNorm, {TensorMeta(dt, {3, 5, 8}), TensorMeta(dt, {5, 8})}, A({{"normalized_shape", IntList{5, 8}}, {"eps", 1e-3}})});
    check({Op::GroupNorm, {TensorMeta(dt, {2, 6, 4, 3}), TensorMeta(dt, {6}), TensorMeta(dt, {6})}, A({{"num_groups", int64_t{3}}})});
    check({Op::GroupNorm, {TensorMeta(dt, {3, 4})}, A({{"num_groups", int64_t{2}}, {"eps", 0.1}})});
  }
}

TEST(Decompose, Embedding) {
  for (DType dt : {kF32, kF64})
    for (Shape w : {Shape{7, 5}, Shape{33, 1}, Shape{1, 3}})
      for (Shape idx : {Shape{}, Shape{1}, Shape{7}, Shape{2, 3}, Shape{0}})
        for (DType it : {DType::I64, DType::I32})
          for (int64_t padding : {int64_t(-1), int64_t(0)})
            check({Op::Embedding, {T(dt, w), T(it, idx)}, A({{"padding_idx", padding}}), w[0]});
}

// ---- scatter_reduce: into scatter_add, scatter_fold, scatter and where (passes/decompose/scatter.cpp)

TEST(Decompose, ScatterReduce) {
  for (DType dt : {kF64, kF32, DType::BF16, DType::I64, DType::I32, DType::Bool})
    for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
      for (bool include_self : {true, false}) {
        const std::string r = reduce;
        if ((r == "mean" && !is_floating(dt)) || (dt == DType::Bool && r != "amax" && r != "amin")) continue;  // refused
        // Along dim 0 of [5, 4] (an index of 7 rows: repeats, rows reached by nothing) and along
        // the last dim of [3, 5] from a wider src.
        check({Op::ScatterReduce, {T(dt, {5, 4}), T(DType::I64, {7, 4}), T(dt, {7, 4})},
               A({{"dim", int64_t{0}}, {"reduce", r}, {"include_self", include_self}}), 5});
        check({Op::ScatterReduce, {T(dt, {3, 5}), T(DType::I64, {2, 3}), T(dt, {3, 6})},
               A({{"dim", int64_t{-1}}, {"reduce", r}, {"include_self", include_self}}), 5});
      }
}

// ---- tril / triu

TEST(Decompose, TrilTriu) {
  for (Op op : {Op::Tril, Op::Triu}) {
    for (int64_t diagonal : {-1, 0, 2}) {
      for (DType dt : {kF32, kF64, DType::I64, DType::Bool})
        for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{33, 7}, Shape{2, 3, 7, 7}, Shape{7, 7}})
          check({op, {T(dt, s)}, A({{"diagonal", diagonal}})});
      for (Shape size : {Shape{7, 7}, Shape{3, 5}, Shape{2, 4, 4}, Shape{1, 1}}) {
        check({op, {}, A({{"diagonal", diagonal}, {"size", IntList(size)}})});
        for (DType dt : {kF64, DType::Bool, DType::I64})
          check({op, {}, A({{"diagonal", diagonal}, {"size", IntList(size)}, {"dtype", dt}})});
      }
    }
  }
}

// ---- softmax / log_softmax

TEST(Decompose, SoftmaxAndLogSoftmax) {
  struct ShapeDims {
    Shape shape;
    std::vector<int64_t> dims;
  };
  std::vector<ShapeDims> cases{{{}, {0, -1}}, {{1}, {0}}, {{7}, {0, -1}}, {{7, 33}, {0, 1, -1, -2}},
                               {{2, 3, 7}, {0, 1, 2, -1}}, {{33, 1}, {1, 0}}};
  for (Op op : {Op::Softmax, Op::LogSoftmax})
    for (auto& [shape, dims] : cases)
      for (int64_t dim : dims) {
        check({op, {T(kF32, shape)}, A({{"dim", dim}})});
        check({op, {T(kF64, shape)}, A({{"dim", dim}})});
        check({op, {T(kF32, shape)}, A({{"dim", dim}, {"dtype", kF64}})});  // cast first
        check({op, {T(DType::F16, shape)}, A({{"dim", dim}})});
      }
}

TEST(Decompose, SoftmaxOfInfinities) {
  // Row 0 all -inf (nan, as the reference and PyTorch), row 1 with some -inf (exact zeros),
  // row 2 with a +inf (nan), row 3 with a nan (all nan).
  auto specials = [](std::vector<HostTensor>& in) {
    for (int64_t j = 0; j < 7; ++j) in[0].set(j, -kInf);
    in[0].set(7, -kInf);
    in[0].set(9, -kInf);
    in[0].set(15, kInf);
    in[0].set(22, kNan);
  };
  for (Op op : {Op::Softmax, Op::LogSoftmax})
    for (DType dt : {kF32, kF64}) check({op, {T(dt, {5, 7})}, A({{"dim", int64_t(-1)}}), 8, specials});
}

// ---- layer_norm

TEST(Decompose, LayerNorm) {
  struct Norm {
    Shape x;
    IntList normalized;
  };
  for (DType dt : {kF32, kF64, DType::F16})
    for (auto& [x, ns] : std::vector<Norm>{{{7}, {7}}, {{2, 7}, {7}}, {{3, 5, 7}, {5, 7}}, {{33, 1}, {1}}, {{2, 33}, {2, 33}}})
      for (double eps : {1e-5, 0.1}) {
        Shape w(ns.begin(), ns.end());
        Attrs a = A({{"normalized_shape", ns}, {"eps", eps}});
        check({Op::LayerNorm, {T(dt, x)}, a});
        check({Op::LayerNorm, {T(dt, x), T(dt, w)}, a});
        check({Op::LayerNorm, {T(dt, x), T(dt, w), T(dt, w)}, a});
      }
}

// ---- mean / var

TEST(Decompose, Mean) {
  struct ShapeDims {
    Shape shape;
    std::vector<IntList> dims;
  };
  std::vector<ShapeDims> cases{{{}, {{}, {0}}}, {{1}, {{}, {0}}}, {{7}, {{}, {-1}}},
                               {{7, 33}, {{}, {0}, {1}, {-1}, {0, 1}}}, {{2, 3, 5}, {{}, {0, 2}, {-2}, {-1, 0}}},
                               {{0, 3}, {{0}, {1}}}};
  for (auto& [shape, dim_lists] : cases)
    for (const IntList& dims : dim_lists)
      for (bool keepdim : {false, true}) {
        Attrs a = A({{"keepdim", keepdim}});
        if (!dims.empty()) a.set("dim", dims);
        for (DType dt : {kF32, kF64, DType::F16, DType::BF16}) check({Op::Mean, {T(dt, shape)}, a});
        Attrs to_f64 = a, to_f16 = a;
        to_f64.set("dtype", kF64);
        to_f16.set("dtype", DType::F16);
        check({Op::Mean, {T(kF32, shape)}, to_f64});
        check({Op::Mean, {T(kF32, shape)}, to_f16});  // the elements round to f16 first
      }
}

TEST(Decompose, Var) {
  struct ShapeDims {
    Shape shape;
    std::vector<IntList> dims;
  };
  std::vector<ShapeDims> cases{{{}, {{}}}, {{1}, {{}, {0}}}, {{7}, {{}, {-1}}}, {{7, 33}, {{}, {0}, {-1}, {0, 1}}},
                               {{2, 3, 5}, {{0, 2}, {-2}}}};
  for (auto& [shape, dim_lists] : cases)
    for (const IntList& dims : dim_lists)
      for (bool keepdim : {false, true})
        for (AttrValue correction : {AttrValue(int64_t(1)), AttrValue(int64_t(0)), AttrValue(int64_t(2)),
                                     AttrValue(1.5), AttrValue(int64_t(7)), AttrValue(int64_t(40))})
          for (DType dt : {kF32, kF64, DType::F16}) {
            Attrs a = A({{"keepdim", keepdim}, {"correction", correction}});
            if (!dims.empty()) a.set("dim", dims);
            check({Op::Var, {T(dt, shape)}, a});  // N - correction <= 0 gives inf or nan
          }
}

// ---- nll_loss / cross_entropy

// Sets every third target (from the first) to `ignore`, or all of them.
std::function<void(std::vector<HostTensor>&)> ignore_rows(int64_t ignore, bool all = false) {
  return [=](std::vector<HostTensor>& in) {
    for (int64_t i = 0; i < in[1].numel(); ++i)
      if (all || i % 3 == 0) in[1].set_int(i, ignore);
  };
}

void check_class_losses(Op op, const Attrs& extra) {
  struct Shapes {
    Shape x, target;
  };
  for (DType dt : {kF32, kF64})
    for (auto& [x, t] : std::vector<Shapes>{{{7}, {}}, {{1, 7}, {1}}, {{7, 33}, {7}}, {{33, 7}, {33}}, {{7, 1}, {7}}})
      for (const char* reduction : {"none", "sum", "mean"})
        for (DType it : {DType::I64, DType::I32}) {
          int64_t classes = x.back();
          Attrs a = extra;
          a.set("reduction", std::string(reduction));
          std::vector<TensorMeta> ins{T(dt, x), T(it, t)};
          check({op, ins, a, classes});
          check({op, ins, a, classes, ignore_rows(-100)});  // the default ignore_index present
          Attrs in_range = a;
          in_range.set("ignore_index", int64_t(0));  // a class that exists
          check({op, ins, in_range, classes});
          check({op, ins, in_range, classes, ignore_rows(0, /*all=*/true)});  // mean: 0/0 = nan
          Attrs negative = a;
          negative.set("ignore_index", int64_t(-1));
          check({op, ins, negative, classes, ignore_rows(-1)});
        }
}

TEST(Decompose, NllLoss) { check_class_losses(Op::NllLoss, {}); }

TEST(Decompose, CrossEntropy) {
  for (double smoothing : {0.0, 0.1, 1.0}) check_class_losses(Op::CrossEntropy, A({{"label_smoothing", smoothing}}));
}

// ---- activations: every float type, odd shapes, NaN and both infinities, attributes away
// from their defaults.

TEST(Decompose, Activations) {
  auto specials = [](std::vector<HostTensor>& in) {
    if (in[0].numel() < 3) return;
    in[0].set(0, kNan);
    in[0].set(1, std::numeric_limits<double>::infinity());
    in[0].set(2, -std::numeric_limits<double>::infinity());
  };
  const std::vector<std::pair<Op, Attrs>> calls = {
      {Op::Hardsigmoid, {}}, {Op::Hardswish, {}}, {Op::LeakyRelu, A({{"negative_slope", 0.2}})},
      {Op::Elu, {}},         {Op::Elu, A({{"alpha", 0.5}, {"scale", 1.5}, {"input_scale", 2.0}})},
      {Op::Selu, {}},        {Op::Softplus, {}}, {Op::Softplus, A({{"beta", 2.0}, {"threshold", 1.0}})},
      {Op::Mish, {}}};
  for (auto& [op, attrs] : calls)
    for (DType dt : {kF32, kF64, DType::F16, DType::BF16})
      for (Shape s : {Shape{}, Shape{7, 33}, Shape{2, 3, 5}}) check({op, {T(dt, s)}, attrs, 8, specials});
}

TEST(Decompose, LogsumexpAndNonFinite) {
  auto specials = [](std::vector<HostTensor>& in) {
    if (in[0].numel() < 4) return;
    in[0].set(0, kNan);
    in[0].set(1, std::numeric_limits<double>::infinity());
    in[0].set(2, -std::numeric_limits<double>::infinity());
    in[0].set(3, 1e4);  // exp overflows unless the max is taken out
  };
  for (DType dt : {kF32, kF64, DType::F16, DType::BF16}) {
    for (auto [shape, attrs] : std::vector<std::pair<Shape, Attrs>>{{{7, 33}, A({{"dim", IntList{1}}})},
                                                                     {{7, 33}, A({{"dim", IntList{0}}, {"keepdim", true}})},
                                                                     {{2, 3, 5}, A({{"dim", IntList{0, 2}}})},
                                                                     {{2, 3, 5}, {}},
                                                                     {{4, 0}, A({{"dim", IntList{1}}})}})
      check({Op::Logsumexp, {T(dt, shape)}, attrs, 8, dt == DType::F16 ? std::function<void(std::vector<HostTensor>&)>{} : specials});
    for (Op op : {Op::Isnan, Op::Isinf, Op::NanToNum}) check({op, {T(dt, {7, 33})}, {}, 8, specials});
    check({Op::NanToNum, {T(dt, {7, 33})}, A({{"nan", 1.0}, {"posinf", 2.0}, {"neginf", -3.0}}), 8, specials});
  }
  for (Op op : {Op::Isnan, Op::Isinf, Op::NanToNum}) check({op, {T(DType::I64, {5})}, {}});
}

// ---- dropout

TEST(Decompose, Dropout) {
  auto with_nan = [](std::vector<HostTensor>& in) { in[0].set(0, kNan); };
  for (DType dt : {kF32, kF64})
    for (Shape s : {Shape{}, Shape{7}, Shape{7, 33}, Shape{2, 3, 5}, Shape{1}})
      for (double p : {0.0, 0.5, 1.0, 0.1, 0.9, 1.0 / 3})
        for (bool train : {true, false})
          for (int64_t seed : {0, 3}) check({Op::Dropout, {T(dt, s)}, A({{"p", p}, {"train", train}, {"seed", seed}}), 8, with_nan});
}

TEST(Decompose, DropoutMaskIsRandsStream) {
  // The lowered graph draws its mask from `rand` with the node's seed and keeps exactly the
  // reference's elements (checked elementwise above): here the rand node itself.
  Graph g;
  Value x = g.add_input("x", F({4, 5}));
  g.set_outputs({g.add(Op::Dropout, {x}, A({{"p", 0.25}, {"seed", int64_t(9)}}), "y")});
  run_pipeline(g, kLowering);
  std::string text = print_graph(g);
  EXPECT_TRUE(has(text, "rand(size=[4,5], seed=9)")) << text;
  EXPECT_TRUE(has(text, "fill_value=0.25")) << text;      // 0.25 is a multiple of 2^-24
  EXPECT_TRUE(has(text, "fill_value=1.3333333")) << text;  // 1 / (1 - p)
}

TEST(Decompose, EvalDropoutOfAViewReinfersStrides) {
  // dropout(train=false) is replaced by its (strided) input; the reshape after it must then
  // read a transposed view, and still give the same values.
  Graph g;
  Value x = g.add_input("x", F({3, 7}));
  Value t = g.add(Op::Transpose, {x}, A({{"dim0", int64_t(0)}, {"dim1", int64_t(1)}}), "t");
  Value d = g.add(Op::Dropout, {t}, A({{"train", false}}), "d");
  Value r = g.add(Op::Reshape, {d}, A({{"shape", IntList{21}}}), "r");
  g.set_outputs({r, d});
  Graph lowered = expect_lowering_agrees(g, {random_tensor(F({3, 7}), 1)});
  EXPECT_EQ(lowered.num_nodes(), 2u);  // transpose, reshape
  EXPECT_EQ(lowered.outputs()[1].name(), "t");
}

// ---- the pass itself

TEST(Decompose, NodesOfTheExpansionAreNamedAfterTheNode) {
  Graph g;
  Value x = g.add_input("x", F({2, 3}));
  g.set_outputs({g.add(Op::Softmax, {x}, A({{"dim", int64_t(1)}}), "probs")});
  EXPECT_TRUE(run_decompose(g));
  EXPECT_EQ(g.outputs()[0].name(), "probs");
  EXPECT_EQ(g.outputs()[0].node->op(), Op::Div);
  EXPECT_TRUE(g.find("probs_amax")) << print_graph(g);
  EXPECT_FALSE(run_decompose(g));  // nothing left: no change
}

TEST(Decompose, NestedCompositesAreDecomposedToo) {
  // cross_entropy -> log_softmax + nll_loss -> primitives; layer_norm -> mean -> sum.
  Graph g;
  Value x = g.add_input("x", F({4, 6})), t = g.add_input("t", I({4}));
  Value n = g.add(Op::LayerNorm, {x}, A({{"normalized_shape", IntList{6}}}), "n");
  g.set_outputs({g.add(Op::CrossEntropy, {n, t}, {}, "loss")});
  EXPECT_TRUE(run_decompose(g));
  EXPECT_NO_THROW(check_primitive(g));
  for (Node* node : g.nodes()) EXPECT_TRUE(is_primitive(node->op())) << print_node(*node);
}

TEST(Decompose, Registry) {
  for (Op op : {Op::Linear, Op::Addmm, Op::Tril, Op::Triu, Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::Embedding,
                Op::CrossEntropy, Op::NllLoss, Op::Dropout, Op::Mean, Op::Var}) {
    EXPECT_NE(find_decomposition(op), nullptr) << op_name(op);
    EXPECT_FALSE(is_primitive(op)) << op_name(op);
  }
  for (Op op : {Op::Sum, Op::Prod, Op::Amax, Op::Argmax, Op::Matmul, Op::Gather, Op::ScatterAdd, Op::Rand, Op::Contiguous,
                Op::Where, Op::Full}) {
    EXPECT_EQ(find_decomposition(op), nullptr) << op_name(op);
    EXPECT_TRUE(is_primitive(op)) << op_name(op);
  }
  // Every composite of the table has a decomposition.
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    auto op = static_cast<Op>(i);
    if (op_info(op).category == OpCategory::Composite) {
      EXPECT_NE(find_decomposition(op), nullptr) << op_name(op);
    }
  }
  EXPECT_TRUE(has(error_of([] { register_decomposition(Op::Softmax, [](DecompositionContext&) { return std::vector<Value>{}; }); }),
                  "op 'softmax' already has a decomposition"));
}

std::vector<TensorMeta> same_meta(std::span<const TensorMeta> in, const Attrs&) { return {in[0].contiguous()}; }
std::vector<HostTensor> copy_kernel(std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta>) {
  return {in[0].contiguous()};
}

TEST(Decompose, CompositeWithoutDecompositionIsAnError) {
  static Op op = register_op("test_undecomposed", OpCategory::Composite, "Tensor self", same_meta, copy_kernel);
  Graph g;
  Value x = g.add_input("x", F({2}));
  g.set_outputs({g.add(Op::Exp, {g.add(op, {x}, {}, "mystery")})});
  Value before = g.add(Op::Softmax, {x}, A({{"dim", int64_t(0)}}), "before");
  g.set_outputs({g.outputs()[0], before});
  std::string text = print_graph(g);
  std::string msg = error_of([&] { run_decompose(g); });
  EXPECT_TRUE(has(msg, "%mystery = test_undecomposed(...) is a composite op with no decomposition")) << msg;
  EXPECT_EQ(print_graph(g), text);  // it fails before rewriting anything
  EXPECT_TRUE(has(error_of([&] { check_primitive(g); }), "%mystery = test_undecomposed(...) is not a primitive op")) << msg;
  EXPECT_TRUE(has(error_of([&] { run_pipeline(g, kLowering); }), "decompose")) << msg;
}

TEST(Decompose, ADecompositionOfTheWrongTypeIsAnError) {
  static Op op = register_op("test_bad_decomposition", OpCategory::Composite, "Tensor self", same_meta, copy_kernel);
  register_decomposition(op, [](DecompositionContext& c) { return std::vector<Value>{c.b.sum(c.input(0))}; });
  Graph g;
  Value x = g.add_input("x", F({2, 3}));
  g.set_outputs({g.add(op, {x}, {}, "bad")});
  std::string msg = error_of([&] { run_decompose(g); });
  EXPECT_TRUE(has(msg, "the decomposition of %bad (test_bad_decomposition) gives f32[] where the op gives f32[2,3]")) << msg;
}

TEST(Decompose, PrimitiveGraphIsUnchanged) {
  Graph g;
  Value x = g.add_input("x", F({2, 3}));
  g.set_outputs({g.add(Op::Exp, {g.add(Op::Sum, {x}, A({{"dim", IntList{1}}}))})});
  std::string before = print_graph(g);
  EXPECT_FALSE(run_decompose(g));
  EXPECT_EQ(print_graph(g), before);
}

// ---- MiniGPT

Tensor tokens_of(int64_t B, int64_t T, int64_t vocab, int64_t salt) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < B * T; ++i) ids.push_back((i * 7919 + salt * 31) % vocab);
  return tensor_of_ints(ids, {B, T});
}

TEST(Decompose, MiniGPTForwardAndLoss) {
  nn::MiniGPTConfig cfg{.vocab_size = 50, .d_model = 16, .n_heads = 2, .context = 8};
  nn::MiniGPT model(cfg, 5);
  Tensor tokens = tokens_of(2, 7, 50, 1), targets = tokens_of(2, 7, 50, 2);

  TracedGraph fwd = trace([&](const Tensor& t) { return model.forward(t); }, tokens, "forward");
  Graph lowered = expect_lowering_agrees(fwd.graph, fwd.graph_inputs({tokens.data()}));
  size_t composites = 0;
  for (Node* n : fwd.graph.nodes()) composites += !is_primitive(n->op());
  EXPECT_GT(composites, 5u);  // embeddings, layer norms, linears, softmax, the causal mask

  TracedGraph loss = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; }, {tokens, targets},
      "loss");
  expect_lowering_agrees(loss.graph, loss.graph_inputs({tokens.data(), targets.data()}));
}

}  // namespace
}  // namespace kiln
