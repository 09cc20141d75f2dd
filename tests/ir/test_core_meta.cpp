// TensorMeta basics, schemas, attributes and lexer details that the op tests build on.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/attr.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/lexer.h"
#include "ir/meta/meta.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "ir/tensor_meta.h"

namespace kiln {
namespace {

TEST(TensorMeta, ContiguityStridesAndText) {
  TensorMeta m(DType::F32, {2, 3, 4});
  EXPECT_EQ(m.strides, (Strides{12, 4, 1}));
  EXPECT_TRUE(m.is_contiguous());
  EXPECT_EQ(m.str(), "f32[2,3,4]");
  TensorMeta t(DType::BF16, {4, 3}, {1, 4}, Device::cuda(1));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.str(), "bf16[4,3]{1,4}@cuda:1");
  EXPECT_EQ(parse_type(t.str()), t);
  EXPECT_TRUE(TensorMeta(DType::F32, {3, 1}, {1, 7}).is_contiguous());  // size-1 dims: any stride
  EXPECT_EQ(TensorMeta(DType::I64, {}).str(), "i64[]");
  EXPECT_EQ(TensorMeta(DType::F32, {0, 5}).numel(), 0);
}

TEST(TensorMeta, BroadcastAndDims) {
  EXPECT_EQ(broadcast_shapes({8, 1, 6, 1}, {7, 1, 5}), (Shape{8, 7, 6, 5}));
  EXPECT_EQ(broadcast_shapes({}, {3}), (Shape{3}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
  try {
    broadcast_shapes({2, 3}, {4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "shapes [2,3] and [4] do not broadcast (dim 1: 3 vs 4)");
  }
  EXPECT_EQ(normalize_dim(-1, 3), 2);
  EXPECT_EQ(normalize_dim(-1, 0), 0);  // 0-d tensors take dim 0 / -1 like PyTorch
  EXPECT_THROW(normalize_dim(3, 3), Error);
}

TEST(ViewStrides, MatchPyTorchComputeStride) {
  // A transposed [3,2] (strides {1,3}) can be flattened only by copying.
  EXPECT_FALSE(meta::view_strides({3, 2}, {1, 3}, {6}).has_value());
  EXPECT_EQ(*meta::view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}), (Strides{4, 1}));
  // Splitting a strided dim keeps its stride.
  EXPECT_EQ(*meta::view_strides({4, 6}, {12, 2}, {2, 2, 3, 2}), (Strides{24, 12, 4, 2}));
  EXPECT_EQ(*meta::view_strides({2, 1, 3}, {3, 99, 1}, {2, 3}), (Strides{3, 1}));
}

TEST(Schema, ParsesTypesOptionalsAndDefaults) {
  const OpInfo* sum = find_op("sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->schema.str(), "Tensor self, int[]? dim=None, bool keepdim=false, dtype? dtype=None");
  const OpInfo* split = find_op("split");
  EXPECT_TRUE(split->schema.variadic_results);
  EXPECT_EQ(find_op("cat")->schema.max_inputs(), -1);
  EXPECT_EQ(find_op("linear")->schema.min_inputs(), 2);
  EXPECT_EQ(find_op("linear")->schema.max_inputs(), 3);
  Attrs a = complete_attrs(*find_op("gelu"), {}, 1);
  EXPECT_EQ(a.get_string("approximate"), "none");
  EXPECT_THROW(parse_schema("Tensor self, blob x"), Error);
}

TEST(Attrs, FloatsRoundTripThroughText) {
  for (double d : {0.1, 1e-5, -2.5, 1e300, 5e-324, 3.0, -0.0}) {
    std::string s = format_double(d);
    AttrValue v = parse_attr_literal(s);
    ASSERT_TRUE(std::holds_alternative<double>(v)) << s;
    EXPECT_EQ(std::get<double>(v), d) << s;
    EXPECT_EQ(std::signbit(std::get<double>(v)), std::signbit(d)) << s;
  }
  EXPECT_EQ(format_double(INFINITY), "inf");
  EXPECT_EQ(format_double(-INFINITY), "-inf");
  EXPECT_EQ(format_double(NAN), "nan");
  EXPECT_EQ(format_double(3.0), "3.0");
  EXPECT_TRUE(attr_equal(AttrValue(NAN), AttrValue(NAN)));
  EXPECT_FALSE(attr_equal(AttrValue(int64_t{1}), AttrValue(1.0)));  // int and float differ (clamp's dtype)
}

TEST(Lexer, LocationsCommentsAndNumbers) {
  auto toks = tokenize("%a = f(%b, x=-1.5e3) # note\n\n  [1,-2]", "t.kir");
  ASSERT_GE(toks.size(), 12u);
  EXPECT_EQ(toks[0].kind, Tok::Value);
  EXPECT_EQ(toks[0].text, "a");
  EXPECT_EQ(toks[8].kind, Tok::Float);
  EXPECT_EQ(toks[8].float_value, -1500.0);
  EXPECT_EQ(toks[10].kind, Tok::Newline);  // comment dropped, blank lines collapsed
  EXPECT_EQ(toks[11].loc.line, 3);
  EXPECT_EQ(toks[11].loc.column, 3);
  try {
    tokenize("x = $", "t.kir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "t.kir:1:5: error: unexpected character '$'");
  }
}

TEST(Arange, LengthFollowsPyTorchPerDtype) {
  auto len = [](Attrs a) { return infer_meta(*find_op("arange"), {}, a)[0].shape[0]; };
  EXPECT_EQ(len({{"end", int64_t{10}}}), 10);
  EXPECT_EQ(len({{"start", int64_t{2}}, {"end", int64_t{11}}, {"step", int64_t{3}}}), 3);
  EXPECT_EQ(len({{"start", int64_t{10}}, {"end", int64_t{0}}, {"step", int64_t{-3}}}), 4);
  int64_t big = int64_t{1} << 53;
  EXPECT_EQ(len({{"start", big}, {"end", big + 3}}), 3);  // exact in int64, not in double
  // An i64 arange truncates the step first: 0, 1, 2, 3, 4.
  EXPECT_EQ(len({{"end", int64_t{5}}, {"step", 1.5}, {"dtype", DType::I64}}), 5);
  EXPECT_EQ(len({{"end", 5.0}, {"step", 1.5}}), 4);  // f32: ceil(5/1.5)
  EXPECT_THROW(len({{"end", int64_t{5}}, {"step", 0.5}, {"dtype", DType::I64}}), Error);
}

TEST(Casts, OutOfRangeFloatToIntGivesTheMinimumLikeX86) {
  HostTensor t = HostTensor::from_doubles(DType::F64, {5}, std::vector<double>{1e10, -1e10, NAN, -2.9, 2.9});
  EXPECT_EQ(t.to(DType::I32).to_ints(), (std::vector<int64_t>{INT32_MIN, INT32_MIN, INT32_MIN, -2, 2}));
  EXPECT_EQ(t.to(DType::I64).to_ints(), (std::vector<int64_t>{10000000000, -10000000000, INT64_MIN, -2, 2}));
}

TEST(Limits, ShapesPastInt64AndTensorsPastMemoryAreErrors) {
  try {
    parse_graph("graph g(%x: f32[4611686018427387904,4]) {\n  return (%x)\n}\n", "big.kir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "big.kir:1:13: error: shape [4611686018427387904,4] has too many elements (more than 2^63)");
  }
  // 2^61 f32 elements fit in int64 as a count but not as bytes.
  EXPECT_THROW(TensorMeta(DType::F32, {int64_t{1} << 61}).nbytes(), Error);
  try {
    HostTensor::empty(TensorMeta(DType::F32, {int64_t{1} << 40}));  // 4 TiB
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than this machine's"), std::string::npos) << e.what();
  }
}

TEST(Lexer, CallsMayBreakAcrossLinesAndAByteOrderMarkIsSkipped) {
  const char* text =
      "\xEF\xBB\xBFgraph g(%x: f32[2,3]) {\n"
      "  %s = sum(%x,\n"
      "           dim=[0,\n"
      "                1],  # both dims\n"
      "           keepdim=true)\n"
      "  return (%s)\n"
      "}\n";
  Graph g = parse_graph(text, "multi.kir");
  EXPECT_EQ(g.find("s").meta().str(), "f32[1,1]");
  // An unclosed call is still reported, at the first token that cannot continue it.
  try {
    parse_graph("graph g(%x: f32[2]) {\n  %a = exp(%x\n  %b = neg(%a)\n  return (%b)\n}\n", "open.kir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "open.kir:3:3: error: expected ',' or ')' between arguments, found '%b'");
  }
}

}  // namespace
}  // namespace kiln
