// The math both preludes share (codegen/prelude_math.cpp): one list of function names that the
// C++ and the CUDA prelude each define, every helper the pointwise table names on that list,
// every row of the table compiled against both preludes (clang through the JIT; NVRTC where the
// CUDA path is built), and the CPU's inline f32 math against libm: JIT-compiled like a kernel
// (clang -O3 -march=native, no fast-math), evaluated over wide ranges and the IEEE special
// values, compared in ulps.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <regex>
#include <vector>

#include "codegen/c_family.h"
#include "codegen/cpp_emitter.h"
#include "codegen/cuda_emitter.h"
#include "codegen/pointwise_exprs.h"
#include "codegen/prelude_math.h"
#include "runtime/cpu/jit.h"
#include "tests/support/support.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/nvrtc.h"
#endif

namespace kiln::codegen {
namespace {

// ---- one list, both preludes

// Whether `text` defines or declares function `name` (a return type, then the name and "(").
bool defines(const std::string& text, std::string_view name) {
  std::regex def("\\b(void|bool|float|double|int64_t|uint16_t|T) " + std::string(name) + "\\(");
  return std::regex_search(text, def);
}

TEST(PreludeMath, OneListIsDefinedByBothPreludes) {
  const std::string cpu(cpp_prelude()), gpu(cuda_prelude());
  for (std::string_view f : kPreludeMathFunctions) {
    EXPECT_TRUE(defines(cpu, f)) << f << " is missing from the C++ prelude";
    EXPECT_TRUE(defines(gpu, f)) << f << " is missing from the CUDA prelude";
  }
  // The shared text is in both, once.
  EXPECT_NE(cpu.find(prelude_math()), std::string::npos);
  EXPECT_NE(gpu.find(prelude_math()), std::string::npos);
  EXPECT_FALSE(defines(std::string(prelude_math()), "kiln_parallel")) << "the thread pool is the CPU's ABI";
}

TEST(PreludeMath, EveryHelperThePointwiseTableCallsIsOnTheList) {
  std::regex helper("kiln_[a-z0-9_]+");
  for (const PointwiseExpr& row : pointwise_exprs())
    for (std::string_view t : {row.float_expr, row.int_expr}) {
      std::string text(t);
      for (std::sregex_iterator it(text.begin(), text.end(), helper), end; it != end; ++it)
        EXPECT_NE(std::find(kPreludeMathFunctions.begin(), kPreludeMathFunctions.end(), it->str()), kPreludeMathFunctions.end())
            << row.name << " calls " << it->str() << ", which is not in kPreludeMathFunctions";
    }
}

// Every row of the pointwise table, each form at each width it serves (float: f32 and f64;
// integer: i64), as statements of one function body over operands in[0..2].
std::string every_row() {
  std::string out;
  int n = 0;
  for (const PointwiseExpr& row : pointwise_exprs()) {
    auto use = [&](std::string_view tmpl, const char* type) {
      if (tmpl.empty()) return;
      std::vector<std::string> args;
      for (int i = 0; i < 3; ++i) args.push_back(fmt::format("({})in[{}]", type, i));
      out += fmt::format("  out[{}] = (double)({});  // {}\n", n++, format_template(tmpl, args), row.name);
    };
    use(row.float_expr, "float");
    use(row.float_expr, "double");
    use(row.int_expr, "int64_t");
  }
  return out;
}

TEST(PreludeMath, EveryPointwiseRowCompilesForTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "built without the LLVM CPU path";
  runtime::cpu::CompileOptions o;
  o.use_cache = false;
  std::string src = std::string(cpp_prelude()) + "extern \"C\" void every_row(const double* in, double* out) {\n" + every_row() + "}\n";
  EXPECT_NO_THROW(runtime::cpu::compile(src, o)) << src;
}

#if KILN_HAVE_CUDA
TEST(PreludeMath, EveryPointwiseRowCompilesWithNvrtc) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  std::string src = std::string(cuda_prelude()) + "extern \"C\" __global__ void every_row(const double* in, double* out) {\n" + every_row() + "}\n";
  runtime::cuda::NvrtcOutput r;
  ASSERT_NO_THROW(r = runtime::cuda::compile_cuda(src, "every_row", o));
  EXPECT_FALSE(kiln::testing::has(r.log, "warning")) << r.log;
}
#endif

// ---- the CPU's inline f32 math against libm

using MathFn = void (*)(const float* in, float* out, int64_t n);

// One loop per function, written as a kernel's inner loop, so the vectorized code is tested.
std::shared_ptr<runtime::cpu::CompiledModule> math_module() {
  std::string src(cpp_prelude());
  for (const char* f : {"exp", "log", "log1p", "tanh", "erf"})
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
// erf: a rational approximation (6 ulps near +-1), traded for vector code (exact GELU).
TEST(PreludeMath, ErfMatchesLibm) { expect_close("erf", [](double x) { return std::erf(x); }, 6); }

}  // namespace
}  // namespace kiln::codegen
