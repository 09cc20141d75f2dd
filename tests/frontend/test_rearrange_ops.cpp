// pad, flip, roll, repeat / tile, index_select, one_hot, cumsum and cumprod (frontend/
// ops_rearrange.cpp) against PyTorch 1.13: the input by the formula of tests/support/
// formula_tensors.h, the expected values from tools/torch_check/rearrange_expected.py (float64).
// Each is also traced and compiled (the kernels against the interpreter), differentiated (float64
// finite differences), and its errors name what is wrong.
#include <gtest/gtest.h>

#include "backend/cuda_backend.h"
#include "frontend/compile.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "ir/error.h"
#include "runtime/cpu/jit.h"
#include "tests/support/formula_tensors.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

void expect_close(const Tensor& got, const Shape& shape, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.shape(), shape) << what;
  testing::expect_values_near(got, want, what, 1e-6);
}

TEST(RearrangeOps, MatchPyTorch) {
  Tensor x = testing::formula_input({2, 3, 4}, DType::F64);
  expect_close(pad(x, {1, 2, 0, 1}, "constant", 0.25), {2,4,7}, std::vector<double>{0.25, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.25, 0.25, 0.25, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, 0.25, 0.25, 0.25, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.25, 0.25, 0.25, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.25, 0.25, 0.25, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}, "pad constant (1,2, 0,1) value 0.25");
  expect_close(pad(x, {-1, 1}), {2,3,4}, std::vector<double>{0.4661636728, 0.3692342794, 0.2223307584, 0, -0.1377951234, -0.3022761355, -0.4258454907, 0, -0.4911518882, -0.4240500159, -0.2995549632, 0, 0.04872804429, 0.2253775279, 0.3715232205, 0, 0.49998839, 0.464920709, 0.3669281911, 0, 0.04194147478, -0.1410672961, -0.3049832702, 0}, "pad constant crop (-1,1)");
  expect_close(pad(x, {2, 1}, "reflect"), {2,3,7}, std::vector<double>{0.3692342794, 0.4661636728, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.3692342794, -0.3022761355, -0.1377951234, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.3022761355, -0.4240500159, -0.4911518882, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4240500159, 0.2253775279, 0.04872804429, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.2253775279, 0.464920709, 0.49998839, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.464920709, -0.1410672961, 0.04194147478, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, -0.1410672961}, "pad reflect (2,1)");
  expect_close(pad(x, {1, 2, 2, 1}, "reflect"), {2,6,7}, std::vector<double>{-0.4911518882, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4240500159, -0.4911518882, -0.1377951234, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.3022761355, -0.1377951234, 0.4661636728, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.3692342794, 0.4661636728, -0.1377951234, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.3022761355, -0.1377951234, -0.4911518882, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4240500159, -0.4911518882, -0.1377951234, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.3022761355, -0.1377951234, 0.04194147478, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, -0.1410672961, 0.04194147478, 0.49998839, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.464920709, 0.49998839, 0.04872804429, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.2253775279, 0.04872804429, 0.49998839, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.464920709, 0.49998839, 0.04194147478, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, -0.1410672961, 0.04194147478, 0.49998839, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.464920709, 0.49998839}, "pad reflect 2d (1,2,2,1)");
  expect_close(pad(x, {3, 1}, "replicate"), {2,3,8}, std::vector<double>{0.5, 0.5, 0.5, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.2223307584, 0.04533581223, 0.04533581223, 0.04533581223, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4258454907, -0.4917786565, -0.4917786565, -0.4917786565, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.2995549632, -0.1345165516, -0.1345165516, -0.1345165516, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.3715232205, 0.467384988, 0.467384988, 0.467384988, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.3669281911, 0.2192736638, 0.2192736638, 0.2192736638, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, -0.3049832702}, "pad replicate (3,1)");
  expect_close(pad(x, {2, 3}, "circular"), {2,3,9}, std::vector<double>{0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.3692342794, -0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.3022761355, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, -0.4240500159, 0.2253775279, 0.3715232205, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, -0.1345165516, 0.04872804429, 0.2253775279, 0.464920709, 0.3669281911, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.467384988, 0.49998839, 0.464920709, -0.1410672961, -0.3049832702, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, 0.2192736638, 0.04194147478, -0.1410672961}, "pad circular (2,3)");
  expect_close(flip(x, {0, 2}), {2,3,4}, std::vector<double>{0.3715232205, 0.2253775279, 0.04872804429, -0.1345165516, 0.3669281911, 0.464920709, 0.49998839, 0.467384988, -0.3049832702, -0.1410672961, 0.04194147478, 0.2192736638, 0.2223307584, 0.3692342794, 0.4661636728, 0.5, -0.4258454907, -0.3022761355, -0.1377951234, 0.04533581223, -0.2995549632, -0.4240500159, -0.4911518882, -0.4917786565}, "flip [0,2]");
  expect_close(roll(x, {2, -1}, {2, 1}), {2,3,4}, std::vector<double>{-0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, 0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.464920709, 0.3669281911, 0.467384988, 0.49998839, -0.1410672961, -0.3049832702, 0.2192736638, 0.04194147478, 0.2253775279, 0.3715232205, -0.1345165516, 0.04872804429}, "roll 2 dim 2, -1 dim 1");
  expect_close(roll(x, {5}), {2,3,4}, std::vector<double>{0.3669281911, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.467384988, 0.49998839, 0.464920709}, "roll 5 flattened");
  expect_close(repeat(slice(x, 0, 0, 1).reshape({3, 4}), {2, 1, 1, 2}), {2,1,3,8}, std::vector<double>{0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632}, "repeat (2,1,1,2)");
  expect_close(tile(x, {2}), {2,3,8}, std::vector<double>{0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.467384988, 0.49998839, 0.464920709, 0.3669281911, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702}, "tile (2,)");
  expect_close(index_select(x, 1, tensor_of_ints({2, 0, 2}, {3})), {2,3,4}, std::vector<double>{-0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, 0.5, 0.4661636728, 0.3692342794, 0.2223307584, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, 0.2192736638, 0.04194147478, -0.1410672961, -0.3049832702}, "index_select dim 1 [2,0,2]");
  expect_close(one_hot(tensor_of_ints({3, 0, 1, 4}, {2, 2}), 5), {2,2,5}, std::vector<double>{0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, "one_hot [[3,0],[1,4]] 5");
  expect_close(cumsum(x, 2), {2,3,4}, std::vector<double>{0.5, 0.9661636728, 1.335397952, 1.557728711, 0.04533581223, -0.09245931118, -0.3947354467, -0.8205809375, -0.4917786565, -0.9829305447, -1.406980561, -1.706535524, -0.1345165516, -0.08578850726, 0.1395890207, 0.5111122412, 0.467384988, 0.9673733781, 1.432294087, 1.799222278, 0.2192736638, 0.2612151386, 0.1201478425, -0.1848354277}, "cumsum dim 2");
  expect_close(cumsum(x, 0), {2,3,4}, std::vector<double>{0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.04533581223, -0.1377951234, -0.3022761355, -0.4258454907, -0.4917786565, -0.4911518882, -0.4240500159, -0.2995549632, 0.3654834484, 0.5148917171, 0.5946118073, 0.5938539789, 0.5127208003, 0.3621932666, 0.1626445735, -0.05891729968, -0.2725049927, -0.4492104134, -0.5651173119, -0.6045382334}, "cumsum dim 0");
  expect_close(cumprod(x, 1), {2,3,4}, std::vector<double>{0.5, 0.4661636728, 0.3692342794, 0.2223307584, 0.02266790612, -0.06423508082, -0.1116107111, -0.09467855091, -0.01114759242, 0.03154918123, 0.0473285238, 0.02836142983, -0.1345165516, 0.04872804429, 0.2253775279, 0.3715232205, -0.06287101684, 0.02436345642, 0.1047826801, 0.1363223432, -0.01378595821, 0.001021839293, -0.01478140936, -0.04157603404}, "cumprod dim 1");
  expect_close(cumsum(tensor_of_ints({3, -1, 4, 1, -5, 9, 2, -6}, {8}), 0), {8}, std::vector<double>{3, 2, 6, 7, 2, 11, 13, 7}, "cumsum of ints");
  EXPECT_EQ(cumsum(tensor_of_ints({1, 2}, {2}, DType::I32), 0).dtype(), DType::I64);  // PyTorch's promotion
  EXPECT_EQ(one_hot(tensor_of_ints({1}, {1}), 3).dtype(), DType::I64);
}

// Edge cases: empty dims, a dim of one, shifts past the size, a scan of one element.
TEST(RearrangeOps, EdgeCases) {
  Tensor e = zeros({2, 0, 3});
  EXPECT_EQ(pad(e, {1, 1}).shape(), (Shape{2, 0, 5}));
  EXPECT_EQ(flip(e, {1}).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(roll(e, {3}, {1}).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(cumsum(e, 1).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(repeat(e, {2, 3, 1}).shape(), (Shape{4, 0, 3}));
  Tensor v = tensor({1, 2, 3}, {3});
  testing::expect_values_near(roll(v, {7}), {3, 1, 2}, "a shift past the size wraps");
  testing::expect_values_near(roll(v, {-4}), {2, 3, 1}, "a negative shift");
  testing::expect_values_near(cumprod(tensor({5}, {1}), 0), {5}, "one element");
  testing::expect_values_near(pad(v, {0, 0}), {1, 2, 3}, "no padding");
  testing::expect_values_near(pad(v, {-1, -1}), {2}, "cropped from both sides");
  testing::expect_values_near(flip(tensor({4}, {1}), {0}), {4}, "a dim of one");
  EXPECT_EQ(cumsum(tensor({2.5}, {}), 0).shape(), Shape{});  // a scalar: dim 0 or -1, as PyTorch
}

TEST(RearrangeOps, ErrorsNameWhatIsWrong) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(testing::has(testing::error_of([&] { pad(x, {1}); }), "pairs"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { pad(x, {1, 1, 1, 1, 1, 1}); }), "rank 2"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { pad(x, {3, 0}, "reflect"); }), "below the size"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { pad(x, {1, 1}, "wrap"); }), "mode 'wrap'"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { pad(x, {-2, -2}); }), "cropping"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { flip(x, {0, -2}); }), "more than once"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { roll(x, {1, 2}, {0}); }), "2 shifts for 1 dims"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { repeat(x, {2}); }), "at least one per dim"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { index_select(x, 2, tensor_of_ints({0}, {1})); }), "out of range"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { index_select(x, 0, tensor({0}, {1})); }), "i64 or i32"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { one_hot(tensor_of_ints({0}, {1}), 0); }), "num_classes"));
  EXPECT_TRUE(testing::has(testing::error_of([&] { cumsum(x, 2); }), "out of range"));
}

// Traced and compiled: the kernels of every composite against the reference interpreter, and
// the gradients of the differentiable ones against float64 finite differences.
TEST(RearrangeOps, CompileAndDifferentiate) {
  Tensor x = testing::formula_input({3, 5}, DType::F64);
  auto all = [](const std::vector<Tensor>& in) {
    const Tensor& a = in[0];
    // An eager index goes where the data is (as in PyTorch); traced, the graph is device-neutral.
    Tensor idx = tensor_of_ints({4, 0, 4}, {3});
    if (!a.is_traced()) idx = idx.to(a.device());
    return std::vector<Tensor>{pad(a, {2, 1}, "reflect"), pad(a, {1, 2, 1, 0}, "constant", -1.0), pad(a, {2, 2}, "replicate"),
                               pad(a, {1, 3}, "circular"),  flip(a, {0, 1}), roll(a, {-2, 1}, {1, 0}), tile(a, {2, 1, 2}),
                               index_select(a, 1, idx), cumsum(a, 1), cumprod(a, 0)};
  };
  TracedGraph tg = trace(all, {x}, "rearrange");
  EXPECT_TRUE(testing::gradcheck_graph(tg.graph, tg.graph_inputs({x.data()})));
  // kiln::compile(fn) runs where its inputs are: the GPU where there is one, else the CPU's JIT.
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  if (device == Device::cpu() && !runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build and no GPU";
  CompiledFunction f = compile(all);
  Tensor x32 = to(x, DType::F32).to(device);
  std::vector<Tensor> got = f({x32}), want = all({x32});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) testing::expect_values_near(got[i], want[i].to_doubles(), "compiled output", 1e-6);
}

// x[i0, i1, ...] and x[i0, i1, ...] = v (index, index_put), as PyTorch computes them: values by
// hand on x = arange(12) as [3, 4]; broadcast indices, negatives, duplicates (the later write
// stays; accumulate sums them), errors; gradients in float64 through a trace and compiled.
TEST(RearrangeOps, AdvancedIndexing) {
  Tensor x = reshape(arange(12, DType::F32), {3, 4});
  auto ints = [](std::vector<int64_t> v, Shape s) { return tensor_of_ints(v, s); };
  expect_close(index(x, {ints({2, 0, -1}, {3})}), {3, 4}, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}, "rows 2, 0, -1");
  expect_close(index(x, {ints({0, 2}, {2}), ints({1, 3}, {2})}), {2}, {1, 11}, "x[[0,2],[1,3]]");
  expect_close(index(x, {ints({0, 2}, {2, 1}), ints({1, 3}, {2})}), {2, 2}, {1, 3, 9, 11}, "broadcast indices");
  Tensor rows = reshape(arange(8, DType::F32), {2, 4}) + 10.0;  // [[10..13], [14..17]]
  expect_close(index_put(x, {ints({1, 1}, {2})}, rows), {3, 4}, {0, 1, 2, 3, 14, 15, 16, 17, 8, 9, 10, 11}, "duplicates: the later write stays");
  expect_close(index_put(x, {ints({1, 1}, {2})}, rows, true), {3, 4}, {0, 1, 2, 3, 28, 31, 34, 37, 8, 9, 10, 11}, "accumulate sums duplicates");
  expect_close(index_put(x, {ints({0, -1}, {2}), ints({0, 0}, {2})}, full({}, 7.0, DType::F32)), {3, 4},
               {7, 1, 2, 3, 4, 5, 6, 7, 7, 9, 10, 11}, "a scalar broadcast to x[[0,-1],[0,0]]");
  EXPECT_EQ(index(x, {ints({}, {0})}).shape(), (Shape{0, 4}));
  // Errors: an index past its dim when run, a bool mask, more indices than dims, values that do
  // not broadcast or of another dtype.
  EXPECT_THROW(index(x, {ints({3}, {1})}).to_doubles(), Error);
  EXPECT_THROW(index(x, {ints({0}, {1}), ints({-5}, {1})}).to_doubles(), Error);
  try {
    index(x, {gt(x, 5.0)});
    ADD_FAILURE() << "a bool mask index";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use where("), std::string::npos) << e.what();
  }
  EXPECT_THROW(index(x, {ints({0}, {1}), ints({0}, {1}), ints({0}, {1})}), Error);
  EXPECT_THROW(index_put(x, {ints({0, 1}, {2})}, full({3}, 1.0, DType::F32)), Error);
  EXPECT_THROW(index_put(x, {ints({0, 1}, {2})}, full({4}, 1.0, DType::F64)), Error);
  // Gradients (unique indices: a write another overwrites has PyTorch's gradient, not zero).
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &v = in[1];
    Tensor i0 = tensor_of_ints({2, 0}, {2}), i1 = tensor_of_ints({1, 3}, {2});
    if (!a.is_traced()) i0 = i0.to(a.device()), i1 = i1.to(a.device());
    return std::vector<Tensor>{index(a, {i0}), index(a, {i0, i1}), index_put(a, {i0, i1}, v), index_put(a, {i0, i1}, v, true)};
  };
  Tensor a = testing::formula_input({3, 4}, DType::F64), v = testing::formula_input({2}, DType::F64) + 1.0;
  TracedGraph tg = trace(fn, {a, v}, "advanced_indexing");
  EXPECT_TRUE(testing::gradcheck_graph(tg.graph, tg.graph_inputs({a.data(), v.data()})));
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  if (device == Device::cpu() && !runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build and no GPU";
  CompiledFunction f = compile(fn);
  std::vector<Tensor> ins = {to(a, DType::F32).to(device), to(v, DType::F32).to(device)};
  std::vector<Tensor> got = f(ins), want = fn(ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) testing::expect_values_near(got[i], want[i].to_doubles(), "compiled output", 1e-6);
}

}  // namespace
}  // namespace kiln
