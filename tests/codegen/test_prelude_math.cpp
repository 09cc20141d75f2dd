// The prelude's inline f32 math (codegen/cpp_prelude.cpp) against libm: JIT-compiled like a
// kernel (clang -O3 -march=native, no fast-math), evaluated over wide ranges and the IEEE
// special values, compared in ulps.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "codegen/cpp_emitter.h"
#include "runtime/cpu/jit.h"

namespace kiln::codegen {
namespace {

using MathFn = void (*)(const float* in, float* out, int64_t n);

// One loop per function, written as a kernel's inner loop, so the vectorized code is tested.
std::shared_ptr<runtime::cpu::CompiledModule> math_module() {
  std::string src(cpp_prelude());
  for (const char* f : {"exp", "log", "log1p", "tanh"})
    src += fmt::format(
        "extern \"C\" void test_{0}(const float* __restrict in, float* __restrict out, int64_t n) {{\n"
        "  for (int64_t i = 0; i < n; ++i) out[i] = kiln_{0}(in[i]);\n}}\n",
        f);
  runtime::cpu::CompileOptions o;
  o.use_cache = false;
  return runtime::cpu::compile(src, o);
}

// Distance in representable floats (0 when both are the same NaN-ness or value).
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  if (std::isinf(a) || std::isinf(b)) return INT64_MAX;
  auto ordered = [](float x) {
    int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

std::vector<float> inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f,
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 88.72f, 88.73f,
                          -87.33f, -103.9f, -104.0f, -110.0f, 0.625f, -0.625f, 0.62499994f, 9.0f, -1e-8f, 1e-8f};
  for (double m = 1e-45; m < 3e38; m *= 1.0137) {
    v.push_back(static_cast<float>(m));
    v.push_back(-static_cast<float>(m));
  }
  for (int i = -200000; i <= 200000; ++i) v.push_back(static_cast<float>(i) * 1e-4f);  // [-20, 20]
  for (int i = 0; i <= 100000; ++i) v.push_back(1.0f + static_cast<float>(i - 50000) * 1e-6f);  // around 1
  return v;
}

void expect_close(const std::string& name, const std::function<double(double)>& ref, int64_t max_ulps) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "built without the LLVM CPU path";
  static auto mod = math_module();
  auto fn = reinterpret_cast<MathFn>(mod->symbol("test_" + name));
  std::vector<float> in = inputs(), out(in.size());
  fn(in.data(), out.data(), static_cast<int64_t>(in.size()));
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    float want = static_cast<float>(ref(static_cast<double>(in[i])));
    int64_t d = ulps(out[i], want);
    if (d > worst) {
      worst = d;
      worst_x = in[i];
    }
    // Signs of zero matter too (tanh(-0) = -0, exp never gives -0).
    if (want == 0 && out[i] == 0) {
      EXPECT_EQ(std::signbit(want), std::signbit(out[i])) << name << "(" << in[i] << ")";
    }
  }
  EXPECT_LE(worst, max_ulps) << name << " is " << worst << " ulps off at x = " << fmt::format("{:.9g}", worst_x)
                             ;
}

TEST(PreludeMath, ExpMatchesLibm) { expect_close("exp", [](double x) { return std::exp(x); }, 2); }
TEST(PreludeMath, LogMatchesLibm) { expect_close("log", [](double x) { return std::log(x); }, 2); }
TEST(PreludeMath, Log1pMatchesLibm) { expect_close("log1p", [](double x) { return std::log1p(x); }, 3); }
TEST(PreludeMath, TanhMatchesLibm) { expect_close("tanh", [](double x) { return std::tanh(x); }, 3); }

}  // namespace
}  // namespace kiln::codegen
