// The reference interpreter: multi-node graphs parsed from .kir text with hand-checked
// results, input checks, multi-result nodes, strided inputs and errors that name the node.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::ints;
using testing::make;
using testing::tensors_close;

// The message of the kiln::Error that interpreting `g` on `ins` throws ("" if none).
std::string error_of(const Graph& g, std::vector<HostTensor> ins) {
  return testing::error_of([&] { interpret(g, ins); });
}

const char* kMlp = R"(graph mlp(%x: f32[2,3], %w: f32[3]) {
  %a = mul(%x, %w) : f32[2,3]
  %b = sum(%a, dim=[1]) : f32[2]
  %c = relu(%b) : f32[2]
  return (%c, %a, %x)
}
)";

TEST(Interpreter, MultiNodeGraph) {
  Graph g = parse_graph(R"(graph mlp(%x: f32[2,3], %w: f32[3]) {
  %a = mul(%x, %w) : f32[2,3]
  %b = sum(%a, dim=[1]) : f32[2]
  %c = relu(%b) : f32[2]
  %s = unsqueeze(%c, dim=1) : f32[2,1]
  %d = sub(%a, %s) : f32[2,3]
  return (%c, %d, %x)
}
)");
  HostTensor x = make(DType::F32, {2, 3}, {1, 2, 3, -4, 5, -6}), w = make(DType::F32, {3}, {1, -1, 2});
  auto outs = interpret(g, {{x, w}});
  ASSERT_EQ(outs.size(), 3u);
  // a = [[1,-2,6],[-4,-5,-12]], b = [5,-21], c = [5,0], d = a - c[:,None].
  EXPECT_TRUE(tensors_close(outs[0], make(DType::F32, {2}, {5, 0})));
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F32, {2, 3}, {-4, -7, 1, -4, -5, -12})));
  EXPECT_TRUE(tensors_close(outs[2], x));  // a graph input returned as is
}

TEST(Interpreter, CreationOpsAndPromotion) {
  Graph g = parse_graph(R"(graph g(%n: i32[4]) {
  %r = arange(end=4) : i64[4]
  %p = add(%n, %r) : i64[4]
  %h = full(size=[], fill_value=0.5) : f32[]
  %q = mul(%p, %h) : f32[4]
  %m = gt(%q, %h) : bool[4]
  %o = where(%m, %q, %h) : f32[4]
  return (%p, %o)
}
)");
  auto outs = interpret(g, {{ints(DType::I32, {4}, {-3, 0, 1, 2})}});
  EXPECT_EQ(outs[0].dtype(), DType::I64);
  EXPECT_EQ(outs[0].to_ints(), (std::vector<int64_t>{-3, 1, 3, 5}));
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F32, {4}, {0.5, 0.5, 1.5, 2.5})));
}

TEST(Interpreter, InputChecks) {
  Graph g = parse_graph(kMlp);
  HostTensor w = make(DType::F32, {3}, {1, 1, 1});
  EXPECT_EQ(error_of(g, {HostTensor::empty(DType::F32, {2, 4}), w}), "input %x: expected f32[2,3], got f32[2,4]");
  EXPECT_EQ(error_of(g, {HostTensor::empty(DType::F64, {2, 3}), w}), "input %x: expected f32[2,3], got f64[2,3]");
  EXPECT_EQ(error_of(g, {HostTensor::empty(DType::F32, {2, 3}), HostTensor::empty(DType::F32, {})}),
            "input %w: expected f32[3], got f32[]");
  EXPECT_EQ(error_of(g, {w}), "graph 'mlp' takes 2 inputs, got 1");
  EXPECT_EQ(error_of(g, {HostTensor(), w}), "input %x: expected f32[2,3], got an undefined tensor");
}

TEST(Interpreter, NonContiguousAndStridedInputs) {
  Graph g = parse_graph(kMlp);
  // A transposed view holding [[1,2,3],[4,5,6]] is accepted like a contiguous tensor.
  HostTensor tx = make(DType::F32, {3, 2}, {1, 4, 2, 5, 3, 6}).view(TensorMeta(DType::F32, {2, 3}, {1, 2}), 0);
  auto outs = interpret(g, {{tx, make(DType::F32, {3}, {1, 0, -1})}});
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F32, {2, 3}, {1, 0, -3, 4, 0, -6})));
  // An input declared with strides gets laid out with them, so views of it are right.
  Graph t = parse_graph(R"(graph t(%x: f32[3,2]{1,3}) {
  %y = transpose(%x, dim0=0, dim1=1) : f32[2,3]
  %z = neg(%y) : f32[2,3]
  return (%y, %z)
}
)");
  auto r = interpret(t, {{make(DType::F32, {3, 2}, {1, 4, 2, 5, 3, 6})}});
  EXPECT_TRUE(tensors_close(r[0], make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})));
  EXPECT_TRUE(tensors_close(r[1], make(DType::F32, {2, 3}, {-1, -2, -3, -4, -5, -6})));
}

TEST(Interpreter, SplitGivesSeveralValues) {
  Graph g = parse_graph(R"(graph s(%x: f32[2,5]) {
  %p, %q, %r = split(%x, split_size=2, dim=1) : f32[2,2]{5,1}, f32[2,2]{5,1}, f32[2,1]{5,1}
  %s = sum(%q, dim=[1]) : f32[2]
  %t = mul(%r, %p) : f32[2,2]
  return (%t, %s, %r)
}
)");
  auto outs = interpret(g, {{make(DType::F32, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(tensors_close(outs[0], make(DType::F32, {2, 2}, {0, 4, 45, 54})));
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F32, {2}, {5, 15})));
  EXPECT_TRUE(tensors_close(outs[2], make(DType::F32, {2, 1}, {4, 9})));
}

TEST(Interpreter, KernelErrorsNameTheNode) {
  Graph g = parse_graph(R"(graph p(%w: f32[3,2], %i: i64[2]) {
  %y = embedding(%w, %i) : f32[2,2]
  return (%y)
}
)");
  HostTensor w = make(DType::F32, {3, 2}, {0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(tensors_close(interpret(g, {{w, ints(DType::I64, {2}, {2, 0})}})[0], make(DType::F32, {2, 2}, {4, 5, 0, 1})));
  EXPECT_EQ(error_of(g, {w, ints(DType::I64, {2}, {1, 3})}),
            "%y = embedding: index 3 is out of range for an embedding of 3 rows (expected in [0, 3))");
}

}  // namespace
}  // namespace kiln
