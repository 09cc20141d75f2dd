// The CPU JIT: source -> callable, the kernel ABI, diagnostics, vectorizer remarks, threads.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/kernel_abi.h"
#include "tests/runtime/jit_test_env.h"

namespace kiln::runtime::cpu::testing {
namespace {

using Kernel = void (*)(void* const*, const int64_t*);

// A saxpy as the emitter writes kernels: no headers, the ABI declared in a prelude, the loop
// split by kiln_parallel_for. `scale` makes sources that differ.
std::string saxpy_source(float scale = 2.5f) {
  return R"(typedef long int64_t;
extern "C" {
typedef void (*kiln_loop_body)(void* ctx, int64_t begin, int64_t end);
void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx);
}
struct Ctx { const float* x; float* y; float a; };
static void body(void* p, int64_t begin, int64_t end) {
  Ctx* c = (Ctx*)p;
  for (int64_t i = begin; i < end; ++i) c->y[i] = c->a * c->x[i] + c->y[i];
}
extern "C" void saxpy(void* const* buffers, const int64_t* scalars) {
  Ctx c{(const float*)buffers[0], (float*)buffers[1], )" +
         std::to_string(scale) + R"(f};
  kiln_parallel_for(scalars[0], 1024, body, &c);
}
)";
}

// Runs the saxpy kernel of `module` on random data and checks each element exactly: with
// -ffp-contract=off the kernel rounds a*x and then +y, as this (non-FMA) test code does.
void check_saxpy(const CompiledModule& module, float scale = 2.5f) {
  const int64_t n = 100003;
  std::vector<float> x(n), y(n), expected(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
    y[i] = std::cos(0.11f * static_cast<float>(i)) + 0.25f;
    volatile float product = scale * x[i];
    expected[i] = product + y[i];
  }
  auto kernel = reinterpret_cast<Kernel>(module.symbol("saxpy"));
  void* buffers[] = {x.data(), y.data()};
  int64_t scalars[] = {n};
  kernel(buffers, scalars);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], expected[i]) << "at " << i;
}

TEST_F(JitTest, SaxpyThroughParallelFor) {
  auto module = compile(saxpy_source());
  check_saxpy(*module);
  EXPECT_FALSE(module->stats().cache_hit);
  EXPECT_GT(module->stats().frontend_ms, 0.0);
  EXPECT_GT(module->stats().codegen_ms, 0.0);
  EXPECT_GT(module->stats().link_ms, 0.0);
  EXPECT_EQ(module->stats().cache_key.size(), 32u);
}

TEST_F(JitTest, CallsIntoLibmAndLibc) {
  // expf from libm, and a zeroing loop that -O3 turns into a memset call.
  auto module = compile(R"(typedef long int64_t;
extern "C" float expf(float);
extern "C" void k(void* const* buffers, const int64_t* scalars) {
  const float* x = (const float*)buffers[0];
  float* y = (float*)buffers[1];
  float* z = (float*)buffers[2];
  for (int64_t i = 0; i < scalars[0]; ++i) y[i] = expf(x[i]);
  for (int64_t i = 0; i < scalars[0]; ++i) z[i] = 0.0f;
}
)");
  const int64_t n = 1000;
  std::vector<float> x(n), y(n), z(n, 7.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = -5.0f + 0.01f * static_cast<float>(i);
  void* buffers[] = {x.data(), y.data(), z.data()};
  int64_t scalars[] = {n};
  reinterpret_cast<Kernel>(module->symbol("k"))(buffers, scalars);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], std::exp(x[i])) << "at " << i;
    ASSERT_EQ(z[i], 0.0f) << "at " << i;
  }
}

TEST_F(JitTest, IndexErrorsReachTheRuntime) {
  auto module = compile(R"(typedef long int64_t;
extern "C" void kiln_report_index_error(int64_t index, int64_t size);
extern "C" void gather(void* const* buffers, const int64_t* scalars) {
  const int64_t* index = (const int64_t*)buffers[0];
  float* out = (float*)buffers[1];
  for (int64_t i = 0; i < scalars[0]; ++i) {
    if (index[i] < 0 || index[i] >= scalars[1]) { kiln_report_index_error(index[i], scalars[1]); return; }
    out[i] = (float)index[i];
  }
}
)");
  ASSERT_FALSE(take_kernel_error().has_value());
  std::vector<int64_t> index = {1, 4, 9, 2};
  std::vector<float> out(4);
  void* buffers[] = {index.data(), out.data()};
  int64_t scalars[] = {4, 5};
  reinterpret_cast<Kernel>(module->symbol("gather"))(buffers, scalars);
  std::optional<std::string> error = take_kernel_error();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("index 9"), std::string::npos) << *error;
  EXPECT_NE(error->find("size 5"), std::string::npos) << *error;
  EXPECT_FALSE(take_kernel_error().has_value()) << "taking the error clears it";
  EXPECT_EQ(out[1], 4.0f);
}

TEST_F(JitTest, CompileErrorNamesLineAndShowsSource) {
  std::string source = "typedef long int64_t;\n"
                       "extern \"C\" void k(void* const* buffers, const int64_t* scalars) {\n"
                       "  float* y = (float*)buffers[0];\n"
                       "  y[0] = undeclared_thing + 1.0f;\n"
                       "}\n";
  try {
    compile(source);
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("kernel.cpp:4:10: error"), std::string::npos) << message;
    EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;
    EXPECT_NE(message.find(">    4 |   y[0] = undeclared_thing + 1.0f;"), std::string::npos) << message;
    EXPECT_NE(message.find("     2 | extern"), std::string::npos) << message;
  }
  // Nothing broken was cached: a fixed source compiles.
  EXPECT_NO_THROW(compile(saxpy_source()));
}

TEST_F(JitTest, MissingSymbolIsAnError) {
  auto module = compile(saxpy_source());
  try {
    module->symbol("no_such_kernel");
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("no_such_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find("saxpy"), std::string::npos) << message;
  }
}

TEST_F(JitTest, VectorizerRemarksForASimpleLoop) {
  CompileOptions options;
  options.vectorizer_remarks = true;
  auto module = compile(R"(typedef long int64_t;
extern "C" void scale(void* const* buffers, const int64_t* scalars) {
  const float* __restrict x = (const float*)buffers[0];
  float* __restrict y = (float*)buffers[1];
  for (int64_t i = 0; i < scalars[0]; ++i) y[i] = 3.0f * x[i] + 1.0f;
}
)",
                        options);
  const std::vector<std::string>& remarks = module->stats().remarks;
  ASSERT_FALSE(remarks.empty());
  bool vectorized = false;
  for (const std::string& r : remarks) vectorized |= r.find("vectorized loop") != std::string::npos;
  EXPECT_TRUE(vectorized) << remarks.front();
  EXPECT_EQ(remarks.front().rfind("5:", 0), 0u) << "remarks carry line:col: " << remarks.front();
}

TEST_F(JitTest, CompilesFromTwoThreads) {
  std::shared_ptr<CompiledModule> modules[4];
  std::string errors[4];
  std::vector<std::thread> threads;
  // Two different sources, each compiled by two threads at once.
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        modules[t] = compile(saxpy_source(t % 2 ? 1.5f : 0.5f));
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(errors[t].empty()) << errors[t];
    check_saxpy(*modules[t], t % 2 ? 1.5f : 0.5f);
  }
}

TEST_F(JitTest, ModulesOutliveEachOther) {
  // Dropping one module frees its code and leaves others (and recompiles) working.
  auto first = compile(saxpy_source(1.25f));
  auto second = compile(saxpy_source(3.5f));
  first.reset();
  clear_in_memory_cache();
  check_saxpy(*second, 3.5f);
  auto again = compile(saxpy_source(1.25f));
  check_saxpy(*again, 1.25f);
}

}  // namespace
}  // namespace kiln::runtime::cpu::testing

namespace kiln::runtime::cpu::testing {
namespace {

TEST(JitUnavailable, CompileSaysHowToGetIt) {
  if (jit_available()) GTEST_SKIP() << "this build has the LLVM CPU path";
  try {
    compile("extern \"C\" void k() {}");
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("install llvm-14-dev libclang-14-dev"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::runtime::cpu::testing
