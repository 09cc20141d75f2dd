// Convolution and pooling compiled on every test device against the reference interpreter: a
// small CNN (conv, bias, relu, max_pool, a transposed conv back up, avg_pool) forward and with
// its gradients, in f32 and bf16; 1-d and 3-d geometries with groups and dilation; rms_norm and
// group_norm.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendConv : public DeviceTest {};
KILN_DEVICE_TESTS(BackendConv);

Graph small_cnn(const char* dt) {
  return parse_graph(fmt::format(R"(
graph cnn(%x: {0}[2,3,12,10], %w1: {0}[8,3,3,3], %b1: {0}[8], %w2: {0}[8,4,2,2], %b2: {0}[4]) {{
  %c1 = convolution(%x, %w1, %b1, stride=[1], padding=[1]) : {0}[2,8,12,10]
  %r1 = relu(%c1) : {0}[2,8,12,10]
  %p1 = max_pool(%r1, kernel_size=[2,2]) : {0}[2,8,6,5]
  %u = convolution(%p1, %w2, %b2, stride=[2], transposed=true) : {0}[2,4,12,10]
  %a = avg_pool(%u, kernel_size=[3,3], stride=[2], padding=[1], ceil_mode=true) : {0}[2,4,7,6]
  return (%a)
}})", dt));
}

TEST_P(BackendConv, ASmallCnnForwardAndBackward) {
  KILN_REQUIRE_JIT();
  Graph g = small_cnn("f32");
  expect_matches_reference(g, 1);
  autograd::JointGraph j = autograd::build_joint(g);
  expect_matches_reference(j.graph, 2);
}

TEST_P(BackendConv, ASmallCnnInBf16) {
  KILN_REQUIRE_JIT();
  expect_matches_reference(small_cnn("bf16"), 3);
}

TEST_P(BackendConv, OneAndThreeSpatialDimsWithGroupsAndDilation) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(R"(
graph shapes(%x: f32[3,4,17], %w: f32[6,2,3], %v: f32[1,2,5,6,7], %k: f32[4,2,2,3,2]) {
  %c = convolution(%x, %w, stride=[2], padding=[2], dilation=[2], groups=2) : f32[3,6,9]
  %m = max_pool(%c, kernel_size=[3], stride=[2], ceil_mode=true) : f32[3,6,4]
  %d = convolution(%v, %k, stride=[1,2,1], padding=[1,0,1]) : f32[1,4,6,2,8]
  %a = avg_pool(%d, kernel_size=[2,2,2], count_include_pad=false, padding=[1,1,0]) : f32[1,4,4,2,4]
  return (%m, %a)
})");
  expect_matches_reference(g, 4);
  expect_matches_reference(autograd::build_joint(g).graph, 5);
}

TEST_P(BackendConv, RmsNormAndGroupNormForwardAndBackward) {
  KILN_REQUIRE_JIT();
  for (const char* dt : {"f32", "bf16"}) {
    Graph g = parse_graph(fmt::format(R"(
graph norms(%x: {0}[4,6,33], %w: {0}[33], %img: {0}[2,6,5,7], %gw: {0}[6], %gb: {0}[6]) {{
  %r = rms_norm(%x, %w, normalized_shape=[33]) : {0}[4,6,33]
  %g = group_norm(%img, %gw, %gb, num_groups=3) : {0}[2,6,5,7]
  return (%r, %g)
}})", dt));
    expect_matches_reference(g, 6);
    if (std::string(dt) == "f32") expect_matches_reference(autograd::build_joint(g).graph, 7);
  }
}

}  // namespace
}  // namespace kiln::testing
