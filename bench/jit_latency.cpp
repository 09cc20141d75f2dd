// CPU JIT latencies: cold compile (clang + codegen + link), warm hit in this process's memory,
// warm hit from the disk cache (object -> callable, no clang), and the run time of an FMA-heavy
// kernel with contraction off (kiln's policy) and fast. Medians of 10 (20 for run times).
// Usage: kiln_bench_jit_latency   (uses a temp KILN_CACHE_DIR of its own; prints a table last)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/cpu/jit.h"

using namespace kiln::runtime::cpu;

namespace {

using Kernel = void (*)(void* const*, const int64_t*);

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// A fused bias + tanh-free GELU-like + relu row kernel, as the emitter writes them; `variant`
// changes a constant so that each cold compile really runs clang.
std::string small_kernel(int variant) {
  return fmt::format(R"(typedef long int64_t;
extern "C" {{
typedef void (*kiln_loop_body)(void* ctx, int64_t begin, int64_t end);
void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx);
}}
struct Args {{ const float* x; const float* b; float* y; int64_t cols; }};
static void body(void* p, int64_t r0, int64_t r1) {{
  Args* a = (Args*)p;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < a->cols; ++c) {{
      float v = a->x[r * a->cols + c] + a->b[c];
      float t = v * 0.5f * (1.0f + v * (0.7978845608f + 0.0356774081f * v * v)) + {}.0f;
      a->y[r * a->cols + c] = t > 0.0f ? t : 0.0f;
    }}
}}
extern "C" void fused(void* const* buffers, const int64_t* scalars) {{
  Args a{{(const float*)buffers[0], (const float*)buffers[1], (float*)buffers[2], scalars[1]}};
  kiln_parallel_for(scalars[0], 4, body, &a);
}}
)",
                     variant);
}

// Degree-8 Horner polynomial per element: 8 multiply-adds, which contraction fuses into FMAs.
const char* kPolynomial = R"(typedef long int64_t;
extern "C" void poly(void* const* buffers, const int64_t* scalars) {
  const float* __restrict x = (const float*)buffers[0];
  float* __restrict y = (float*)buffers[1];
  for (int64_t i = 0; i < scalars[0]; ++i) {
    float v = x[i], r = 0.1f;
    r = r * v + 0.2f; r = r * v + 0.3f; r = r * v + 0.4f; r = r * v + 0.5f;
    r = r * v + 0.6f; r = r * v + 0.7f; r = r * v + 0.8f; r = r * v + 0.9f;
    y[i] = r;
  }
}
)";

double kernel_run_ms(const CompiledModule& module) {
  const int64_t n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 1e-3f;
  auto kernel = reinterpret_cast<Kernel>(module.symbol("poly"));
  void* buffers[] = {x.data(), y.data()};
  int64_t scalars[] = {n};
  std::vector<double> times;
  for (int rep = 0; rep < 20; ++rep) {
    double t0 = now_ms();
    kernel(buffers, scalars);
    times.push_back(now_ms() - t0);
  }
  return median(times);
}

}  // namespace

int main() {
  if (!jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path\n");
    return 1;
  }
  auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln_jit_latency_{}", ::getpid());
  ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string what, std::string value) { rows.emplace_back(std::move(what), std::move(value)); };

  // The first compile in a process also builds the cc1 arguments and starts the LLJIT.
  double t0 = now_ms();
  compile(small_kernel(-1));
  row("first compile in the process (driver + LLJIT start + cold compile)", fmt::format("{:.1f} ms", now_ms() - t0));

  std::vector<double> cold, frontend, codegen, link, memory_hit, disk_hit, disk_link;
  for (int i = 0; i < 10; ++i) {
    t0 = now_ms();
    auto module = compile(small_kernel(i));
    cold.push_back(now_ms() - t0);
    frontend.push_back(module->stats().frontend_ms);
    codegen.push_back(module->stats().codegen_ms);
    link.push_back(module->stats().link_ms);

    t0 = now_ms();
    auto again = compile(small_kernel(i));
    memory_hit.push_back(now_ms() - t0);

    clear_in_memory_cache();
    t0 = now_ms();
    auto from_disk = compile(small_kernel(i));
    disk_hit.push_back(now_ms() - t0);
    disk_link.push_back(from_disk->stats().link_ms);
    if (!from_disk->stats().cache_hit || !again->stats().memory_hit) fmt::print("unexpected cache miss\n");
  }
  row("cold compile, source -> callable (total)", fmt::format("{:.1f} ms", median(cold)));
  row("  clang front end + -O3 pipeline", fmt::format("{:.1f} ms", median(frontend)));
  row("  codegen (LLVM IR -> object)", fmt::format("{:.1f} ms", median(codegen)));
  row("  ORC link (object -> callable)", fmt::format("{:.3f} ms", median(link)));
  row("warm, in-process hit", fmt::format("{:.4f} ms", median(memory_hit)));
  row("warm, from-disk hit (key + read + link)", fmt::format("{:.3f} ms", median(disk_hit)));
  row("  of which ORC link", fmt::format("{:.3f} ms", median(disk_link)));

  CompileOptions off, fast;
  fast.extra_args = {"-ffp-contract=fast"};
  auto poly_off = compile(kPolynomial, off);
  auto poly_fast = compile(kPolynomial, fast);
  row("poly8 over 2^20 f32, -ffp-contract=off (kiln), 1 thread", fmt::format("{:.3f} ms", kernel_run_ms(*poly_off)));
  row("poly8 over 2^20 f32, -ffp-contract=fast (FMA), 1 thread", fmt::format("{:.3f} ms", kernel_run_ms(*poly_fast)));

  std::filesystem::remove_all(dir);
  size_t width = 0;
  for (const auto& [what, value] : rows) width = std::max(width, what.size());
  fmt::print("| {:<{}} | {:>10} |\n|{:-<{}}|{:-<12}|\n", "CPU JIT (median of 10)", width, "", "", width + 2, "");
  for (const auto& [what, value] : rows) fmt::print("| {:<{}} | {:>10} |\n", what, width, value);
  return 0;
}
