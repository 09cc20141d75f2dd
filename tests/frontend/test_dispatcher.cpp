// The dispatcher: key sets, kernel choice, the dispatch trace and error messages.
#include <gtest/gtest.h>

#include "frontend/cpu_kernel.h"
#include "frontend/kiln.h"
#include "tests/frontend/trace_lines.h"
#include "ir/error.h"

using namespace kiln;

using kiln::testing::TraceLines;

TEST(DispatchKeySet, PriorityAndText) {
  DispatchKeySet s = DispatchKey::CPU;
  EXPECT_EQ(s.highest(), DispatchKey::CPU);
  EXPECT_EQ(s.str(), "{CPU}");
  s |= DispatchKey::Tracing;
  EXPECT_EQ(s.highest(), DispatchKey::Tracing);
  EXPECT_EQ(s.str(), "{Tracing,CPU}");
  EXPECT_TRUE(s.has(DispatchKey::CPU));
  EXPECT_TRUE(DispatchKeySet().empty());
}

TEST(Dispatcher, KeySetsFollowInputsAndTracingState) {
  Tensor a = ones({2});
  EXPECT_EQ(a.key_set(), DispatchKeySet(DispatchKey::CPU));
  std::vector<Tensor> none;
  EXPECT_EQ(compute_key_set(none), DispatchKeySet(DispatchKey::CPU));
  std::vector<Tensor> ins{a};
  EXPECT_EQ(compute_key_set(ins), DispatchKeySet(DispatchKey::CPU));
  trace(
      [&](const Tensor& x) {
        EXPECT_EQ(x.key_set(), DispatchKeySet(DispatchKey::Tracing) | DispatchKey::CPU);
        // While tracing even calls on concrete tensors only, or on none, go to the tracer.
        EXPECT_EQ(compute_key_set(ins), DispatchKeySet(DispatchKey::Tracing) | DispatchKey::CPU);
        EXPECT_EQ(compute_key_set(none), DispatchKeySet(DispatchKey::Tracing) | DispatchKey::CPU);
        return x;
      },
      a);
}

TEST(Dispatcher, TraceLinesForEagerAndTracedCalls) {
  TraceLines t;
  Tensor e = exp(ones({2}));
  ASSERT_EQ(t.lines.size(), 2u);
  EXPECT_EQ(t.lines[0], "[dispatch] ones keys={CPU} -> cpu kernel (reference, or compiled when large)");
  EXPECT_EQ(t.lines[1], "[dispatch] exp keys={CPU} -> cpu kernel (reference, or compiled when large)");
  t.lines.clear();
  trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; },
        {zeros({8, 64}), zeros({8, 64})});
  std::vector<std::string> expected{"[dispatch] zeros keys={CPU} -> cpu kernel (reference, or compiled when large)",
                                    "[dispatch] zeros keys={CPU} -> cpu kernel (reference, or compiled when large)",
                                    "[dispatch] add keys={Tracing,CPU} -> tracing kernel (%add : f32[8,64])"};
  EXPECT_EQ(t.lines, expected);
}

TEST(Dispatcher, TraceLinesNameEveryResultOfSplit) {
  TraceLines t;
  trace([](const Tensor& x) { return split(x, 2, 1)[1]; }, zeros({2, 3}));
  ASSERT_FALSE(t.lines.empty());
  EXPECT_EQ(t.lines.back(),
            "[dispatch] split keys={Tracing,CPU} -> tracing kernel (%split : f32[2,2]{3,1}, %split_1 : f32[2,1]{3,1})");
}

TEST(Dispatcher, TraceGoesToStderrWithoutASink) {
  set_dispatch_trace(true);
  ::testing::internal::CaptureStderr();
  Tensor r = neg(ones({1}));
  std::string err = ::testing::internal::GetCapturedStderr();
  set_dispatch_trace(false);
  EXPECT_NE(err.find("[dispatch] neg keys={CPU} -> cpu kernel (reference, or compiled when large)\n"), std::string::npos) << err;
}

TEST(Dispatcher, NoTraceLinesWhenOff) {
  set_dispatch_trace(false);
  ::testing::internal::CaptureStderr();
  Tensor r = neg(ones({1}));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Dispatcher, RegisteredKernelReplacesTheKeysKernel) {
  int calls = 0;
  register_kernel(
      DispatchKey::CPU,
      [&](Op op, std::span<const Tensor> in, const Attrs& a) {
        ++calls;
        return cpu_kernel(op, in, a);
      },
      "counting kernel");
  Tensor r = ones({2}) + 1.0;
  register_kernel(DispatchKey::CPU, cpu_kernel, "cpu kernel (reference, or compiled when large)");
  EXPECT_EQ(calls, 3);  // ones, full, add
  EXPECT_EQ(r.to_doubles(), (std::vector<double>{2, 2}));
}

TEST(Dispatcher, TracedShapeErrorNamesOpNodeAndShapes) {
  try {
    trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; },
          {zeros({2, 3}), zeros({4})});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("add(f32[2,3], f32[4]) at node %add: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("broadcast"), std::string::npos) << msg;
  }
  EXPECT_FALSE(is_tracing());
}

TEST(Dispatcher, TracedAttributeErrorNamesTheNode) {
  try {
    trace([](const Tensor& x) { return x.sum(0).sum(5); }, zeros({2, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("sum(f32[3]) at node %sum_1"), std::string::npos) << msg;
  }
}

TEST(Dispatcher, UndefinedInputIsAnError) { EXPECT_THROW(exp(Tensor()), Error); }
