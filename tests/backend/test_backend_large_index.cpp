// Tensors past 2^31 elements on the GPU (issue 12): the CUDA schedule indexes in 32 bits when
// every buffer, loop and grid-stride step fits (codegen/schedule.cpp) and in 64 bits past that.
// One graph takes an f16 tensor of 2^31 + 1000 elements (4.3 GB) through a pointwise kernel,
// reductions (sum, amax, argmax), a gather at indices on both sides of 2^31, and a view that
// starts past 2^31, with the interesting values placed past 2^31. The expected results are
// written out, as the reference interpreter would take minutes over 2^31 elements.
//
// On the CPU it is skipped: the CPU kernels index in 64 bits always (codegen/cpp_emitter.h),
// and the 13 GB of host memory it needs is more than CI machines have.
#include <cstring>

#include "ir/half.h"
#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendLargeIndex : public DeviceTest {};
KILN_DEVICE_TESTS(BackendLargeIndex);

constexpr int64_t k2to31 = int64_t{1} << 31;
constexpr int64_t kN = k2to31 + 1000;
constexpr int64_t kArgmax = k2to31 + 777;  // the single largest element
constexpr int64_t kSliceStart = k2to31 + 100;

TEST_P(BackendLargeIndex, PastTwoToThe31ElementsOnTheGpu) {
  if (!on_cuda()) GTEST_SKIP() << "GPU only: CPU kernels always index in 64 bits, and this needs 13 GB of host memory";
  const std::string n = std::to_string(kN), k = std::to_string(kN - kSliceStart);
  Graph g = parse_graph(fmt::format(R"(graph big(%x: f16[{0}], %idx: i64[6]) {{
  %two = full(size=[], fill_value=2.0, dtype=f16) : f16[]
  %y = mul(%x, %two) : f16[{0}]
  %wide = to(%x, dtype=f32) : f32[{0}]
  %s = sum(%wide) : f32[]
  %top = amax(%x) : f16[]
  %at = argmax(%x) : i64[]
  %picked = gather(%x, %idx, dim=0) : f16[6]
  %tail = slice(%x, dim=0, start={2}, end={0}) : f16[{1}]
  %tail2 = add(%tail, %tail) : f16[{1}]
  return (%y, %s, %top, %at, %picked, %tail2)
}})", n, k, kSliceStart));
  backend::CompiledGraph c = compile_for_test(g);
  KILN_REQUIRE_RUN();

  // x: 0.5 everywhere but at four places on both sides of 2^31.
  HostTensor x = HostTensor::empty(DType::F16, {kN});
  auto* xs = static_cast<uint16_t*>(x.data());
  const uint16_t half_of_one = float_to_half_bits(0.5f);
  for (int64_t i = 0; i < kN; ++i) xs[i] = half_of_one;
  const std::vector<std::pair<int64_t, double>> special{{k2to31 - 1, 1.5}, {k2to31, -0.25}, {kArgmax, 3.0}, {kN - 1, -1.0}};
  double sum = 0.5 * static_cast<double>(kN - static_cast<int64_t>(special.size()));
  for (auto [i, v] : special) {
    x.set(i, v);
    sum += v;
  }
  const std::vector<int64_t> idx{0, k2to31 - 1, k2to31, kArgmax, kN - 1, kSliceStart};
  std::vector<HostTensor> out = c.run(std::vector<HostTensor>{x, HostTensor::from_ints(DType::I64, {6}, idx)});
  ASSERT_EQ(out.size(), 6u);

  // y = 2x, checked everywhere (memcmp-like, on the bits).
  ASSERT_EQ(out[0].numel(), kN);
  const auto* ys = static_cast<const uint16_t*>(out[0].data());
  const uint16_t one = float_to_half_bits(1.0f);
  std::vector<int64_t> not_one;  // where 2x is not 1: exactly the special places
  for (int64_t i = 0; i < kN; ++i)
    if (ys[i] != one && not_one.size() < 16) not_one.push_back(i);
  ASSERT_EQ(not_one.size(), special.size()) << "elements of 2x wrong, the first at " << not_one.front();
  for (size_t j = 0; j < special.size(); ++j) {
    EXPECT_EQ(not_one[j], special[j].first);
    EXPECT_EQ(out[0].get(special[j].first), 2 * special[j].second) << "2x at " << special[j].first;
  }
  EXPECT_NEAR(out[1].get(0), sum, 1e-5 * sum) << "sum over 2^31 + 1000 elements";
  EXPECT_EQ(out[2].get(0), 3.0) << "amax";
  EXPECT_EQ(out[3].get_int(0), kArgmax) << "argmax past 2^31";
  const std::vector<double> picked{0.5, 1.5, -0.25, 3.0, -1.0, 0.5};
  for (size_t i = 0; i < picked.size(); ++i) EXPECT_EQ(out[4].get(static_cast<int64_t>(i)), picked[i]) << "gather at " << idx[i];
  ASSERT_EQ(out[5].numel(), kN - kSliceStart);
  EXPECT_EQ(out[5].get(0), 1.0);
  EXPECT_EQ(out[5].get(kArgmax - kSliceStart), 6.0) << "a view starting past 2^31";
  EXPECT_EQ(out[5].get(kN - 1 - kSliceStart), -2.0);
}

}  // namespace
}  // namespace kiln::testing
