// Compiler bugs kiln fuzz found (issue 12), each as a small graph compiled on every test device
// and compared with the reference interpreter. The fuzzer's reproducers replay in
// tests/tools/fuzz_regressions/; these pin each bug down where the fuzzer's tolerance might
// not (a 16-bit accumulation is within the rounding bound of a cancelling sum).
#include <string>

#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

// Every case compiles: skipped on the CPU of a build without the JIT (the GPU machine's).
class BackendFuzzFound : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    KILN_REQUIRE_JIT();
  }
};
KILN_DEVICE_TESTS(BackendFuzzFound);

// A per-row value without keepdim, broadcast into the row space, aligns to the right:
// maximum(x[5,17,5], amin(x, dim=[1,2])[5]) pairs amin[k] with x[i,j,k]. The fused kernel
// used row i's amin.
TEST_P(BackendFuzzFound, AReducedValueBroadcastAgainstOtherDimsThanItsRows) {
  expect_matches_reference(parse_graph(R"(graph g(%x: f32[5,17,5]) {
  %m = amin(%x, dim=[1,2]) : f32[5]
  %y = maximum(%x, %m) : f32[5,17,5]
  %s = sum(%x, dim=[0,1]) : f32[5]
  %z = sub(%x, %s) : f32[5,17,5]
  %e = expand(%m, size=[5,17,5]) : f32[5,17,5]{0,0,1}
  %w = mul(%x, %e) : f32[5,17,5]
  return (%y, %z, %w)
})"));
}

// A gather along dim 0 of a value the softmax's kernel computes: it was recomputed there with
// the current row's max and sum.
TEST_P(BackendFuzzFound, AGatherAcrossTheRowsOfASoftmax) {
  Graph g = parse_graph(R"(graph g(%x: f32[6,7], %i: i64[6,7]) {
  %p = softmax(%x, dim=1) : f32[6,7]
  %e = exp(%p) : f32[6,7]
  %g = gather(%e, %i, dim=0) : f32[6,7]
  return (%g)
})");
  expect_matches_reference(g, inputs_for(g, 3, /*int_bound=*/6));
}

// A cat of 400 parts (a joint graph's gradient of a split into ones): its select chain was 400
// deep and broke clang's nesting limit; NVRTC's too.
TEST_P(BackendFuzzFound, ACatOfFourHundredParts) {
  std::string args, types, names;
  for (int k = 0; k < 400; ++k) {
    names += (k ? ", %p" : "%p") + std::to_string(k);
    types += (k ? ", f32[1]" : "f32[1]");
  }
  Graph g = parse_graph("graph g(%x: f32[400]) {\n  " + names + " = split(%x, split_size=1) : " + types +
                        "\n  %y = cat(" + names + ") : f32[400]\n  %z = exp(%y) : f32[400]\n  return (%z)\n}");
  expect_matches_reference(g);
}

// scatter_add into f16 summed in f16: 4096 ones into one element stopped at 2048, where f16's
// spacing reaches 2. Sums of f16/bf16 accumulate in f32 and round once.
TEST_P(BackendFuzzFound, AnF16ScatterAddAccumulatesInF32) {
  Graph g = parse_graph(R"(graph g(%src: f16[4096]) {
  %self = zeros(size=[1], dtype=f16) : f16[1]
  %i = zeros(size=[4096], dtype=i64) : i64[4096]
  %one = full(size=[], fill_value=1.0, dtype=f16) : f16[]
  %ones = mul(%src, %one) : f16[4096]
  %y = scatter_add(%self, %i, %ones, dim=0) : f16[1]
  return (%y)
})");
  backend::CompiledGraph c = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor ones = HostTensor::from_doubles(DType::F16, {4096}, std::vector<double>(4096, 1.0));
  EXPECT_EQ(c.run(std::vector<HostTensor>{ones})[0].get(0), 4096.0);
}

// A float product that overflows f32 on the way to a zero is 0, not inf * 0 = NaN: products
// accumulate in f64.
TEST_P(BackendFuzzFound, AProductThatOverflowsF32BeforeAZeroIsZero) {
  Graph g = parse_graph(R"(graph g(%x: bf16[64]) {
  %p = prod(%x) : bf16[]
  return (%p)
})");
  backend::CompiledGraph c = compile_for_test(g);
  KILN_REQUIRE_RUN();
  std::vector<double> v(64, 1e4);  // 1e4^63 = 1e252: past f32, within f64
  v[63] = 0;
  EXPECT_EQ(c.run(std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0), 0.0);
  v[63] = 1e-30;  // 1e252 * 1e-30 overflows bf16: inf, as the reference says
  EXPECT_EQ(c.run(std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0),
            interpret(g, std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0));
}

// A matrix times a vector plus a vector: the CUDA backend folded the add into cuBLASLt's bias
// epilogue, which adds along the GEMM's n, but the result's dim is m ([6,3] @ [3] + b[6]).
TEST_P(BackendFuzzFound, AMatrixTimesAVectorPlusAVector) {
  expect_matches_reference(parse_graph(R"(graph g(%a: f32[6,3], %b: f32[6], %v: f32[3]) {
  %m = matmul(%a, %v) : f32[6]
  %y = add(%b, %m) : f32[6]
  return (%y)
})"));
}

// The gradient of minimum(f16, f32) with respect to the broadcast f32 operand: a sum over
// strided f16 loads. On an AVX-512 CPU, clang 14 vectorized it into 512-bit code that gave
// wrong sums; the CPU JIT now asks for vectors of at most 256 bits.
TEST_P(BackendFuzzFound, AReassociatedSumOverStridedF16LoadsOnWideVectors) {
  Graph g = parse_graph(R"(graph g(%a: f32[1,1,3], %s: f16[7,13,3], %t: f32[7,13,3]) {
  %gt = gt(%s, %a) : bool[7,13,3]
  %two = full(size=[], fill_value=2.0, dtype=f32) : f32[]
  %half = div(%t, %two) : f32[7,13,3]
  %eq = eq(%s, %a) : bool[7,13,3]
  %w = where(%eq, %half, %t) : f32[7,13,3]
  %ds = masked_fill(%w, %gt, value=0.0) : f32[7,13,3]
  %lt = lt(%s, %a) : bool[7,13,3]
  %da = masked_fill(%w, %lt, value=0.0) : f32[7,13,3]
  %ga = sum(%da, dim=[0,1], keepdim=true) : f32[1,1,3]
  return (%ga, %ds)
})");
  for (uint64_t seed : {1, 2, 3, 4}) expect_matches_reference(g, seed);
}

}  // namespace
}  // namespace kiln::testing
