// Custom ops with kernels of their own (opaque: frontend/custom_op.h, backend/opaque_kernels.h):
// a cumulative sum over the last dim and its reverse (each the other's VJP), with a CPU kernel
// and a CUDA kernel; fusion leaves them calls of their own; compiled results, views as inputs
// and the joint graph against the reference kernels, on every device.
#include <gtest/gtest.h>

#include "backend/compile.h"
#include "frontend/custom_op.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"

namespace kiln {
namespace {

using testing::DeviceTest;

// Along the last dim of a contiguous [rows, cols] view of `in`: y[j] = sum of x[..j] (forward)
// or of x[j..] (reverse). get/set: any floating dtype.
void scan_rows(const HostTensor& in, HostTensor& out, bool reverse) {
  const int64_t cols = in.shape().empty() ? 1 : in.shape().back();
  const int64_t rows = cols == 0 ? 0 : in.numel() / cols;
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t k = 0; k < cols; ++k) {
      int64_t j = r * cols + (reverse ? cols - 1 - k : k);
      acc += in.get(j);
      out.set(j, acc);
    }
  }
}

const char* kScanSource = R"(
extern "C" __global__ void kiln_test_scan(const float* x, float* y, long long n, long long cols, long long reverse) {
  long long rows = cols == 0 ? 0 : n / cols;
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    float acc = 0.f;
    for (long long k = 0; k < cols; ++k) {
      long long j = r * cols + (reverse ? cols - 1 - k : k);
      acc += x[j];
      y[j] = acc;
    }
  }
}
)";

CustomOp scan_op(const std::string& name, bool reverse) {
  CustomOp d;
  d.schema = "mytest::" + name + "(Tensor x) -> Tensor";
  d.meta = [](std::span<const TensorMeta> in, const Attrs&) {
    if (!is_floating(in[0].dtype)) fail("takes a floating tensor, got {}", dtype_name(in[0].dtype));
    return std::vector<TensorMeta>{TensorMeta(in[0].dtype, in[0].shape)};
  };
  d.reference = [reverse](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> out) {
    HostTensor y = HostTensor::empty(out[0]);
    scan_rows(in[0], y, reverse);
    return std::vector<HostTensor>{std::move(y)};
  };
  d.cpu_kernel = [reverse](std::span<const HostTensor> in, std::span<HostTensor> out, const Attrs&) { scan_rows(in[0], out[0], reverse); };
  d.cuda_kernel.source = kScanSource;
  d.cuda_kernel.entry = "kiln_test_scan";
  d.cuda_kernel.launch = [reverse](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
    if (in[0].dtype != DType::F32) fail("the CUDA kernel takes f32, got {}", dtype_name(in[0].dtype));
    backend::CudaLaunch l;
    const int64_t cols = in[0].shape.empty() ? 1 : in[0].shape.back();
    const int64_t rows = cols == 0 ? 0 : in[0].numel() / cols;
    l.block = 128;
    l.grid = std::max<int64_t>(1, (rows + 127) / 128);
    l.args = {cols, reverse ? 1 : 0};
    return l;
  };
  return d;
}

// cumsum and its reverse, each the other's VJP: d/dx cumsum(x) . g = revcumsum(g).
void register_scans() {
  static bool done = [] {
    CustomOp fwd = scan_op("cumsum", false), rev = scan_op("revcumsum", true);
    fwd.vjp = [](autograd::VjpContext& c) -> std::vector<Value> { return {c.b.op("mytest::revcumsum", {c.grad()}).v}; };
    rev.vjp = [](autograd::VjpContext& c) -> std::vector<Value> { return {c.b.op("mytest::cumsum", {c.grad()}).v}; };
    register_custom_op(fwd);
    register_custom_op(rev);
    return true;
  }();
  (void)done;
}

TEST(CustomOpOpaqueRegistration, ErrorsNameTheProblem) {
  register_scans();
  auto error_of = [](CustomOp d) -> std::string {
    try {
      register_custom_op(d);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  CustomOp d = scan_op("bad", false);
  d.cuda_kernel.entry = "nope";
  EXPECT_NE(error_of(d).find("no entry point named 'nope'"), std::string::npos);
  d = scan_op("bad", false);
  d.scalar_expr = "x";
  EXPECT_NE(error_of(d).find("not both"), std::string::npos);
  d = scan_op("bad", false);
  d.meta = nullptr;
  EXPECT_NE(error_of(d).find("shape-and-dtype rule"), std::string::npos);
  EXPECT_EQ(find_op("mytest::bad"), nullptr);
}

TEST(CustomOpOpaqueIr, PassesTheFloat64GradientCheck) {
  register_scans();
  Graph g = parse_graph(
      "graph f(%x: f64[3,5], %w: f64[5]) {\n"
      "  %a = mul(%x, %w) : f64[3,5]\n"
      "  %y = mytest::cumsum(%a) : f64[3,5]\n"
      "  %z = mul(%y, %y) : f64[3,5]\n"
      "  return (%z)\n"
      "}\n");
  std::vector<HostTensor> in{random_tensor(g.inputs()[0]->meta(), 1), random_tensor(g.inputs()[1]->meta(), 2)};
  autograd::GradcheckResult r = autograd::gradcheck(g, in);
  EXPECT_TRUE(r.ok) << autograd::format_gradcheck(r);
}

class CustomOpOpaque : public DeviceTest {};

TEST_P(CustomOpOpaque, IsACallOfItsOwnBetweenFusedKernels) {
  KILN_REQUIRE_JIT();
  register_scans();
  Graph g = parse_graph(
      "graph f(%x: f32[37,129], %b: f32[129]) {\n"
      "  %a = add(%x, %b) : f32[37,129]\n"
      "  %e = exp(%a) : f32[37,129]\n"
      "  %y = mytest::cumsum(%e) : f32[37,129]\n"
      "  %l = log(%y) : f32[37,129]\n"
      "  %z = mul(%l, %x) : f32[37,129]\n"
      "  return (%z)\n"
      "}\n");
  backend::CompiledGraph c = testing::compile_for_test(g);
  EXPECT_EQ(c.report.kernels, 2) << c.report.str();  // add+exp, then log+mul: the call splits them
  EXPECT_EQ(c.report.opaque_calls, 1) << c.report.str();
  testing::expect_matches_reference(g, testing::inputs_for(g, 4), 4);
}

TEST_P(CustomOpOpaque, AViewInputIsMadeContiguousFirst) {
  KILN_REQUIRE_JIT();
  register_scans();
  Graph g = parse_graph(
      "graph f(%x: f32[65,33]) {\n"
      "  %t = transpose(%x, dim0=0, dim1=1) : f32[33,65]{1,33}\n"
      "  %y = mytest::revcumsum(%t) : f32[33,65]\n"
      "  return (%y)\n"
      "}\n");
  testing::expect_matches_reference(g, testing::inputs_for(g, 6), 4);
}

TEST_P(CustomOpOpaque, TheJointGraphRunsBothKernels) {
  KILN_REQUIRE_JIT();
  register_scans();
  Graph g = parse_graph(
      "graph f(%x: f32[16,48]) {\n"
      "  %s = sigmoid(%x) : f32[16,48]\n"
      "  %y = mytest::cumsum(%s) : f32[16,48]\n"
      "  %q = mul(%y, %y) : f32[16,48]\n"
      "  %l = sum(%q) : f32[]\n"
      "  return (%l)\n"
      "}\n");
  Graph joint = autograd::build_joint(g).graph;
  backend::CompiledGraph c = testing::compile_for_test(joint);
  EXPECT_EQ(c.report.opaque_calls, 2) << c.report.str();  // cumsum forward, revcumsum backward
  testing::expect_matches_reference(joint, testing::inputs_for(joint, 8), 8);
}

TEST_P(CustomOpOpaque, AKernelThatDoesNotCompileNamesTheOp) {
  if (!testing::on_cuda()) GTEST_SKIP() << "the CUDA source is compiled for CUDA only";
  static Op broken = [] {
    CustomOp d = scan_op("broken", false);
    d.cuda_kernel.source = "extern \"C\" __global__ void broken_entry(const float* x, float* y, long long n) { y[0] = x[0] +; }";
    d.cuda_kernel.entry = "broken_entry";
    return register_custom_op(d);
  }();
  (void)broken;
  Graph g = parse_graph("graph f(%x: f32[4,4]) {\n  %y = mytest::broken(%x) : f32[4,4]\n  return (%y)\n}\n");
  try {
    testing::compile_for_test(g);
    FAIL() << "no error";
  } catch (const Error& e) {
    // The op and the node it computes first, then NVRTC's own message with the offending line.
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("graph f: the CUDA kernel of mytest::broken (%y = mytest::broken(%x)) failed to compile: NVRTC could not "
                        "compile CUDA program 'f_broken_0'",
                        0),
              0u)
        << msg;
    EXPECT_NE(msg.find("error: expected an expression"), std::string::npos) << msg;
    EXPECT_NE(msg.find("    1 | extern \"C\" __global__ void broken_entry("), std::string::npos) << msg;
  }
}

KILN_DEVICE_TESTS(CustomOpOpaque);

}  // namespace
}  // namespace kiln
