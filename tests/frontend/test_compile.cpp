// kiln::compile: guards and recompiles, the specialization limit, graph breaks, gradients
// through the compiled backward, the training step as one compiled graph, and the debug folder.
// Every test runs on each device present (the CPU; cuda:0 where the CUDA backend is built and
// a GPU is there), and compares with the same function run eagerly on the CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/guards.h"
#include "frontend/kiln.h"
#include "ir/dot.h"
#include "tests/backend/backend_check.h"
#include "tests/support/support.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/stream.h"
#endif

using namespace kiln;
using kiln::testing::error_of;
using kiln::testing::has;
namespace fs = std::filesystem;

namespace {

class CompileTest : public kiln::testing::DeviceTest {};

Device dev() { return kiln::testing::test_device(); }

void expect_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(kiln::testing::tensors_close(got.host_data(), want.host_data(), tol, tol))
      << "got " << got.str() << " want " << want.str();
}

// Sets an environment variable for one test.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

Tensor randn_on(const Shape& s, uint64_t seed) { return randn(s, seed).to(dev()); }

// Designated initializers would leave -Wmissing-field-initializers warnings on GCC 12.
CompileOptions options_with(void (*set)(CompileOptions&)) {
  CompileOptions o;
  set(o);
  return o;
}

TEST_P(CompileTest, GuardsHitWithoutCallingTheFunctionAndRecompileNamingTheGuard) {
  KILN_REQUIRE_RUN();
  nn::MLP mlp(16, 32, /*seed=*/3);
  mlp.to(dev());
  int traced = 0;
  NoGradGuard no_grad;  // inference: parameters require gradients, a forward-only graph is wanted
  CompiledFunction f = compile([&](const Tensor& x) {
    ++traced;
    return mlp(x);
  });
  Tensor x = randn_on({4, 16}, 1);
  Tensor y = f(x);
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(f.stats().compiles, 1);
  Tensor x2 = randn_on({4, 16}, 2);
  Tensor y2 = f(x2);
  EXPECT_EQ(traced, 1) << "a call that passes the guards runs the compiled code without calling the function";
  EXPECT_EQ(f.stats().cache_hits, 1);
  mlp.to(Device::cpu());
  Tensor want2 = mlp(x2.cpu());  // eager, on the reference kernels
  mlp.to(dev());
  expect_close(y2, want2);

  ScopedEnv logs("KILN_LOGS", "recompiles");
  ::testing::internal::CaptureStderr();
  Tensor y3 = f(randn_on({8, 16}, 3));
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(traced, 2);
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_EQ(y3.shape(), (Shape{8, 16}));
  ASSERT_EQ(f.stats().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.stats().recompile_reasons[0], "input 0: shape [4,16] -> [8,16]");
  EXPECT_TRUE(has(log, "[recompiles]") && has(log, "input 0: shape [4,16] -> [8,16]")) << log;

  // Both specializations stay: the first shape hits again.
  f(randn_on({4, 16}, 4));
  EXPECT_EQ(traced, 2);
  // Strides are guarded too. Only the CPU makes eager views: a CUDA tensor's transpose runs as
  // a compiled op, whose result is contiguous.
  if (dev().kind != Device::Kind::CPU) return;
  Tensor wide = randn_on({16, 4}, 6);
  Tensor transposed = wide.t();  // [4,16] with strides (1,4)
  ASSERT_FALSE(transposed.meta().is_contiguous());
  f(transposed);
  EXPECT_TRUE(has(f.stats().recompile_reasons.back(), "input 0: strides (16,1) -> (1,4)"))
      << f.stats().recompile_reasons.back();
  expect_close(f(transposed), [&] {
    mlp.to(Device::cpu());
    Tensor w = mlp(transposed.cpu().contiguous());
    mlp.to(dev());
    return w;
  }());
}

TEST_P(CompileTest, GuardFailuresNameDtypeDeviceAndRequiresGrad) {
  TensorGuard g = guard_of(randn({2, 3}, 1), "input 0");
  EXPECT_EQ(guard_failure(g, randn({2, 3}, 1).to(DType::F64)), "input 0: dtype f32 -> f64");
  EXPECT_EQ(guard_failure(g, randn({3, 2}, 1)), "input 0: shape [2,3] -> [3,2]");
  Tensor r = randn({2, 3}, 1);
  r.requires_grad_();
  EXPECT_EQ(guard_failure(g, r), "input 0: requires_grad false -> true");
  EXPECT_FALSE(guard_failure(g, randn({2, 3}, 7)).has_value());
  // A size-1 dimension's stride does not matter (it is never stepped over).
  TensorGuard row = guard_of(randn({1, 3}, 1), "input 0");
  EXPECT_FALSE(guard_failure(row, randn({3, 1}, 1).t()).has_value());
}

TEST_P(CompileTest, PastTheSpecializationLimitItRunsEagerlyWithOneWarning) {
  KILN_REQUIRE_RUN();
  CompiledFunction f = compile([](const Tensor& x) { return (x * 2.0).exp(); }, options_with([](CompileOptions& o) { o.cache_size_limit = 3; }));
  ::testing::internal::CaptureStderr();
  for (int64_t n = 1; n <= 5; ++n) {
    Tensor x = randn_on({n, 3}, static_cast<uint64_t>(n));
    expect_close(f(x), (x.cpu() * 2.0).exp());
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(f.stats().compiles, 3);
  EXPECT_EQ(f.stats().eager_calls, 2);
  size_t first = err.find("cache_size_limit");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("cache_size_limit", first + 1), std::string::npos) << "one warning only:\n" << err;
  EXPECT_TRUE(has(err, "input 0: shape [3,3] -> [4,3]")) << err;
}

// A function that reads values out of its tensors: an `if` on a comparison and an item().
std::vector<Tensor> branchy(const std::vector<Tensor>& in, int* item_line) {
  Tensor y = in[0] * 2.0 + 1.0;
  Tensor z = (y.sum() > 0) ? y.exp() : y * -1.0;
  *item_line = __LINE__ + 1;
  double m = z.amax().item();
  return {z / m, y};
}

TEST_P(CompileTest, GraphBreaksRunEachGraphAndMatchTheEagerFunction) {
  KILN_REQUIRE_RUN();
  int item_line = 0;
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return branchy(in, &item_line); });
  ScopedEnv logs("KILN_LOGS", "graph_breaks");
  for (double sign : {1.0, -1.0, 1.0}) {
    Tensor x = (abs(randn({3, 5}, 11)) * sign + sign * 0.5).to(dev());
    ::testing::internal::CaptureStderr();
    std::vector<Tensor> got = f(std::vector<Tensor>{x});
    std::string log = ::testing::internal::GetCapturedStderr();
    std::vector<Tensor> want = branchy({x.cpu()}, &item_line);
    ASSERT_EQ(got.size(), 2u);
    expect_close(got[0], want[0]);
    expect_close(got[1], want[1]);
    EXPECT_TRUE(has(log, "[graph_breaks]") && has(log, "bool()")) << log;
    EXPECT_TRUE(has(log, fmt::format("test_compile.cpp:{}", item_line)) && has(log, "item()")) << log;
  }
  EXPECT_EQ(f.stats().graph_breaks, 6);
  // Three graphs per call (before the if, between if and item, after item); the two branches
  // give different second and third graphs, and the third call compiles nothing new.
  EXPECT_EQ(f.stats().compiles, 5);

  CompiledFunction strict = compile([&](const std::vector<Tensor>& in) { return branchy(in, &item_line); },
                                    options_with([](CompileOptions& o) { o.fullgraph = true; }));
  EXPECT_TRUE(has(error_of([&] { strict(std::vector<Tensor>{randn_on({2, 2}, 1)}); }), "fullgraph"));
}

TEST_P(CompileTest, ItemInsideTraceIsAnErrorNamingCompile) {
  EXPECT_TRUE(has(error_of([&] { trace([](const Tensor& x) { return x * x.sum().item(); }, randn({2}, 1)); }), "kiln::compile"));
}

TEST_P(CompileTest, GradientsThroughTheCompiledBackwardMatchValueAndGrad) {
  KILN_REQUIRE_RUN();
  nn::MLP mlp(8, 16, /*seed=*/5);
  Tensor x = randn({4, 8}, 1), target = randn({4, 8}, 2);
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); };
  ModuleGrads want = value_and_grad(mlp, loss_fn, {x, target});  // the reference interpreter

  mlp.to(dev());
  Tensor xd = x.to(dev());
  xd.requires_grad_();
  CompiledFunction f = compile(loss_fn);  // tensors to one loss, as the README writes it
  Tensor loss = f({xd, target.to(dev())})[0];
  EXPECT_NEAR(loss.item(), want.loss.item(), 1e-5);
  loss.backward();
  for (const auto& [path, p] : mlp.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << path;
    expect_close(p.grad(), want[path]);
  }
  ASSERT_TRUE(xd.grad().defined());
  EXPECT_EQ(xd.grad().shape(), x.shape());
  EXPECT_TRUE(has(error_of([&] { loss.backward(); }), "a second time"));
  // A second call accumulates, as PyTorch's .grad does.
  f({xd, target.to(dev())})[0].backward();
  for (const auto& [path, p] : mlp.named_parameters()) expect_close(p.grad(), want[path] * 2.0);
  mlp.zero_grad();
  EXPECT_FALSE(mlp.fc->weight.grad().defined());
  // Under NoGradGuard the same function compiles a forward-only graph (a guard on grad mode).
  {
    NoGradGuard no_grad;
    Tensor l2 = f({xd, target.to(dev())})[0];
    EXPECT_TRUE(has(error_of([&] { l2.backward(); }), "no eager autograd"));
  }
  EXPECT_TRUE(has(f.stats().recompile_reasons.back(), "grad mode on -> off"));
}

// Training steps under autocast follow the f32 steps within the dtype's precision: the MLP, a
// transformer block and a MiniGPT, in bf16 and f16, AdamW on f32 master weights. The loss
// curves (10 steps) agree within 2% (bf16) and 0.5% (f16) of the f32 loss, and the weights
// stay f32.
TEST_P(CompileTest, TrainingStepsUnderAutocastFollowTheF32Steps) {
  KILN_REQUIRE_RUN();
  AdamWConfig adamw{.lr = 3e-3};
  enum Model { Mlp, TransformerBlock, Gpt };
  auto curve = [&](std::optional<DType> cast, Model which) {
    std::vector<double> losses;
    if (which == TransformerBlock) {
      nn::Block block(32, 4, 16, 11);
      Tensor x = randn({4, 16, 32}, 12), y = randn({4, 16, 32}, 13);
      CompiledTrainStep step = compile(block, [&](const std::vector<Tensor>& b) { return mean(square(block(b[0]) - b[1])); },
                                       adamw, options_with([](CompileOptions& o) { o.device = dev(); }));
      Autocast scope(cast);
      for (int i = 0; i < 10; ++i) losses.push_back(step({x.to(dev()), y.to(dev())}));
      EXPECT_EQ(block.ln1->weight.dtype(), DType::F32);
    } else if (which == Gpt) {
      nn::MiniGPT model(nn::MiniGPTConfig{.vocab_size = 40, .d_model = 32, .n_heads = 4, .n_layers = 2, .context = 16}, 4);
      Tensor tokens = randint(0, 40, {4, 16}, 5), targets = randint(0, 40, {4, 16}, 6);
      CompiledTrainStep step = compile(model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); }, adamw,
                                       options_with([](CompileOptions& o) { o.device = dev(); }));
      Autocast scope(cast);
      for (int i = 0; i < 10; ++i) losses.push_back(step({tokens.to(dev()), targets.to(dev())}));
      EXPECT_EQ(model.named_parameters().front().second.dtype(), DType::F32) << "master weights stay f32";
    } else {
      nn::MLP mlp(16, 64, 7);
      Tensor x = randn({32, 16}, 8), y = randn({32, 16}, 9);
      CompiledTrainStep step = compile(mlp, [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); }, adamw,
                                       options_with([](CompileOptions& o) { o.device = dev(); }));
      Autocast scope(cast);
      for (int i = 0; i < 10; ++i) losses.push_back(step({x.to(dev()), y.to(dev())}));
      EXPECT_EQ(mlp.fc->weight.dtype(), DType::F32);
    }
    return losses;
  };
  for (Model which : {Mlp, TransformerBlock, Gpt}) {
    const char* name = which == Mlp ? "MLP" : which == TransformerBlock ? "block" : "MiniGPT";
    std::vector<double> f32 = curve(std::nullopt, which);
    for (DType dt : {DType::BF16, DType::F16}) {
      std::vector<double> low = curve(dt, which);
      double tol = dt == DType::BF16 ? 0.02 : 0.005, worst = 0;
      for (size_t i = 0; i < f32.size(); ++i) {
        EXPECT_NEAR(low[i], f32[i], tol * f32[i]) << name << " " << dtype_name(dt) << " step " << i;
        worst = std::max(worst, std::abs(low[i] - f32[i]));
      }
      EXPECT_GT(worst, 0.0) << "the " << dtype_name(dt) << " steps ran in " << dtype_name(dt);
      EXPECT_LT(low.back(), low.front()) << "it trains";
    }
  }
  // The step guards on the scope: a step traced in f32 recompiles inside one.
  nn::MLP mlp(16, 64, 7);
  Tensor x = randn({32, 16}, 8).to(dev()), y = randn({32, 16}, 9).to(dev());
  CompiledTrainStep step = compile(mlp, [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); }, adamw,
                                   options_with([](CompileOptions& o) { o.device = dev(); }));
  step({x, y});
  {
    Autocast scope(DType::BF16);
    step({x, y});
  }
  EXPECT_EQ(step.stats().compiles, 2);
  ASSERT_FALSE(step.stats().recompile_reasons.empty());
  EXPECT_EQ(step.stats().recompile_reasons.back(), "autocast off -> bf16");
}

// Loss scaling in f16 (a GradScaler inside the compiled step). The loss is scaled down by 2^-20
// (and the learning rate up by 2^20, so that f32 trains as usual): its gradients flush to zero
// in f16, and an f16 step without scaling does not train. With a scaler of 2^16 the f16 steps
// follow the f32 ones; one of 2^40 overflows f16 first, skips those steps (the weights
// unchanged), backs off, and trains from there.
TEST_P(CompileTest, AGradScalerTrainsAnF16StepThatUnderflowsWithoutIt) {
  KILN_REQUIRE_RUN();
  const double tiny = std::ldexp(1.0, -20);
  SGDConfig sgd{.lr = 0.3 / tiny};
  Tensor x = randn({64, 16}, 21), y = randn({64, 16}, 22);
  struct Run {
    std::vector<double> losses;
    int64_t skipped = 0;
    double scale = 0;
  };
  auto run = [&](std::optional<DType> cast, std::optional<GradScalerConfig> scaler) {
    nn::MLP mlp(16, 32, 23);
    CompileOptions o = options_with([](CompileOptions& c) { c.device = dev(); });
    o.grad_scaler = scaler;
    CompiledTrainStep step = compile(mlp, [&](const std::vector<Tensor>& b) { return mul(mean(square(mlp(b[0]) - b[1])), tiny); }, sgd, o);
    Autocast scope(cast);
    Run r;
    for (int i = 0; i < 12; ++i) r.losses.push_back(step({x.to(dev()), y.to(dev())}) / tiny);
    if (auto g = step.grad_scaler()) r.skipped = g->skipped_steps, r.scale = g->scale;
    EXPECT_EQ(mlp.fc->weight.dtype(), DType::F32);
    return r;
  };
  Run f32 = run(std::nullopt, std::nullopt);
  EXPECT_LT(f32.losses.back(), 0.95 * f32.losses.front()) << "f32 trains";
  Run bare = run(DType::F16, std::nullopt);
  EXPECT_GT(bare.losses.back(), 0.99 * bare.losses.front()) << "f16 without scaling: the gradients flush to zero";
  Run scaled = run(DType::F16, GradScalerConfig{.init_scale = 65536.0});
  EXPECT_EQ(scaled.skipped, 0);
  EXPECT_EQ(scaled.scale, 65536.0);
  for (size_t i = 0; i < f32.losses.size(); ++i) EXPECT_NEAR(scaled.losses[i], f32.losses[i], 0.01 * f32.losses[i]) << "step " << i;
  Run high = run(DType::F16, GradScalerConfig{.init_scale = std::ldexp(1.0, 44), .growth_interval = 1000});
  EXPECT_GE(high.skipped, 1) << "2^44 overflows f16";
  EXPECT_LT(high.skipped, 12);
  EXPECT_EQ(high.scale, std::ldexp(1.0, 44 - static_cast<int>(high.skipped))) << "halved once per skipped step";
  for (int64_t i = 1; i <= high.skipped; ++i)
    EXPECT_EQ(high.losses[static_cast<size_t>(i)], high.losses[0]) << "skipped step " << i << " left the weights alone";
  EXPECT_LT(high.losses.back(), 0.98 * high.losses.front()) << "it recovers and trains";
  // The growth: a scale that grows every 2 good steps, from 2^10, reaches 2^15 after 10.
  Run growing = run(DType::F16, GradScalerConfig{.init_scale = 1024.0, .growth_interval = 2});
  EXPECT_EQ(growing.skipped, 0);
  EXPECT_EQ(growing.scale, 1024.0 * 64) << "12 good steps, doubled every 2";
}

TEST_P(CompileTest, TrainingStepMatchesTheUncompiledReferenceStepForStep) {
  KILN_REQUIRE_RUN();
  auto make = [] { return std::make_unique<nn::MLP>(8, 16, /*seed=*/9); };
  Tensor x = randn({6, 8}, 1), y = randn({6, 8}, 2);
  AdamWConfig adamw{.lr = 1e-2};

  auto ref_model = make();
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square((*ref_model)(b[0]) - b[1]))}; },
                           {x, y}, "loss");
  TrainStep ts = make_train_step(loss, adamw);
  TrainState ref = ts.init(loss.parameters);
  std::vector<double> want = train(ts, ref, {x.data(), y.data()}, 5);  // the reference interpreter

  auto model = make();
  CompiledTrainStep step = compile(*model, [&](const std::vector<Tensor>& b) { return mean(square((*model)(b[0]) - b[1])); },
                                   adamw, options_with([](CompileOptions& o) { o.device = dev(); }));
  EXPECT_EQ(model->fc->weight.device(), dev()) << "the device option moves the module there";
  Tensor xd = x.to(dev()), yd = y.to(dev());
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(step({xd, yd}), want[static_cast<size_t>(i)], 1e-5) << "step " << i;
  EXPECT_EQ(step.stats().compiles, 1);
  EXPECT_EQ(step.stats().cache_hits, 4);
#if KILN_HAVE_CUDA
  if (dev().kind == Device::Kind::CUDA) {
    // Parameters and AdamW's moments stay on the device between steps: a step sends its step
    // number and brings back its loss (and the kernels' error records), nothing the size of a weight.
    auto before = runtime::cuda::transfer_stats();
    step({xd, yd});
    auto after = runtime::cuda::transfer_stats();
    EXPECT_LT(after.host_to_device_bytes - before.host_to_device_bytes, 256);
    EXPECT_LT(after.device_to_host_bytes - before.device_to_host_bytes, 256);
    std::vector<double> more = train(ts, ref, {x.data(), y.data()}, 1);
    want.push_back(more[0]);
  }
#endif
  TrainState got = step.state();
  ASSERT_EQ(got.params.size(), ref.params.size());
  for (size_t i = 0; i < got.params.size(); ++i)
    EXPECT_TRUE(kiln::testing::tensors_close(got.params[i], ref.params[i], 1e-5, 1e-5)) << ts.param_names[i];
  EXPECT_TRUE(kiln::testing::tensors_close(model->fc->weight.host_data(), ref.params[0], 1e-5, 1e-5))
      << "the module's own tensors are updated in place";
  // A new batch shape recompiles the step and keeps the optimizer state.
  double l = step({randn({3, 8}, 3).to(dev()), randn({3, 8}, 4).to(dev())});
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_EQ(step.stats().compiles, 2);
  EXPECT_EQ(step.stats().recompile_reasons.back(), "batch 0: shape [6,8] -> [3,8]");
  EXPECT_EQ(step.steps(), dev().kind == Device::Kind::CUDA ? 7 : 6);
}

TEST_P(CompileTest, DebugFolderHoldsEveryStageInOrderAndAReport) {
  KILN_REQUIRE_RUN();
  fs::path root = fs::temp_directory_path() / fmt::format("kiln_debug_{}_{}", getpid(), dev().str());
  fs::remove_all(root);
  nn::MLP mlp(8, 16, 1);
  mlp.to(dev());
  CompiledFunction f = compile([&](const Tensor& x) { return mlp(x).sum(); }, [&] {
    CompileOptions o;
    o.debug_dir = root.string();
    o.name = "mlp";
    return o;
  }());
  f(randn_on({2, 8}, 1));
  ASSERT_EQ(f.stats().debug_folders.size(), 1u);
  fs::path d = f.stats().debug_folders[0];
  EXPECT_EQ(d.filename(), "000_mlp");
  // .kir and .dot per stage; SVGs only when asked for (debug_svg below).
  for (std::string stage : {"00_traced", "01_joint", "02_forward", "03_backward"}) {
    EXPECT_TRUE(fs::exists(d / (stage + ".kir"))) << stage;
    EXPECT_TRUE(fs::exists(d / (stage + ".dot"))) << stage;
    EXPECT_FALSE(fs::exists(d / (stage + ".svg"))) << stage;
  }
  const std::string src = dev().kind == Device::Kind::CPU ? "kernels.cpp" : "kernels.cu";
  for (std::string graph : {"04_compile_forward", "05_compile_backward"}) {
    for (std::string file : {"decomposed.kir", "fused.kir", "kernels.txt", src.c_str()})
      EXPECT_TRUE(fs::exists(d / graph / file)) << graph << "/" << file;
    EXPECT_TRUE(fs::exists(d / graph / "passes"));
    EXPECT_TRUE(fs::exists(d / graph / "fused.dot"));
    EXPECT_FALSE(fs::exists(d / graph / "fused.svg"));
  }
  std::ifstream in(d / "report.json");
  nlohmann::json r = nlohmann::json::parse(in);
  EXPECT_EQ(r["graph"], "mlp");
  EXPECT_GT(r["compiled"]["forward"]["kernels"].get<int>(), 0);
  EXPECT_GT(r["compiled"]["backward"]["planned_bytes"].get<int64_t>(), 0);
  EXPECT_GT(r["frontend_ms"]["trace"].get<double>(), 0);
  EXPECT_EQ(r["stages"][1]["file"], "01_joint.kir");
  // A second compile takes the next number.
  f(randn_on({3, 8}, 2));
  EXPECT_EQ(fs::path(f.stats().debug_folders.at(1)).filename(), "001_mlp");
  // With debug_svg, Graphviz draws every stage and the fusion groups (where it is installed).
  if (find_dot_program()) {
    CompiledFunction drawn = compile([&](const Tensor& x) { return mlp(x).sum(); }, [&] {
      CompileOptions o;
      o.debug_dir = root.string();
      o.debug_svg = true;
      o.name = "drawn";
      return o;
    }());
    drawn(randn_on({2, 8}, 1));
    fs::path dd = drawn.stats().debug_folders.at(0);
    EXPECT_TRUE(fs::exists(dd / "00_traced.svg"));
    EXPECT_TRUE(fs::exists(dd / "04_compile_forward" / "fused.svg"));
  }
  fs::remove_all(root);
}

// What a user tries first: empty and 0-d inputs, an input handed back, a captured tensor
// returned, integer inputs, several results.
TEST_P(CompileTest, EdgeCasesMatchTheEagerFunction) {
  KILN_REQUIRE_RUN();
  CompiledFunction pw = compile([](const Tensor& x) { return (x * 2.0).exp(); });
  Tensor empty = randn_on({0, 5}, 1);
  Tensor e = pw(empty);
  EXPECT_EQ(e.shape(), (Shape{0, 5}));
  Tensor scalar = randn_on({}, 2);
  expect_close(pw(scalar), (scalar.cpu() * 2.0).exp());
  EXPECT_EQ(pw.stats().recompile_reasons.back(), "input 0: shape [0,5] -> []");

  Tensor w = randn({3}, 3).to(dev());
  CompiledFunction passthrough = compile([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], w, in[1] + 1, argmax(in[0], 0)};
  });
  Tensor a = randn_on({3}, 4), ids = tensor_of_ints({1, 2, 3}, {3}).to(dev());
  for (int call = 0; call < 2; ++call) {  // traced, then cached
    std::vector<Tensor> out = passthrough({a, ids});
    ASSERT_EQ(out.size(), 4u);
    expect_close(out[0], a);
    expect_close(out[1], w);
    EXPECT_EQ(out[2].to_ints(), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(out[2].dtype(), DType::I64);
    EXPECT_EQ(out[3].to_ints(), argmax(a.cpu(), 0).to_ints());
  }
  EXPECT_EQ(passthrough.stats().cache_hits, 1);
  // Another number of inputs is a guard failure too.
  CompiledFunction sum_all = compile([](const std::vector<Tensor>& in) {
    Tensor s = in[0];
    for (size_t i = 1; i < in.size(); ++i) s = s + in[i];
    return std::vector<Tensor>{s};
  });
  expect_close(sum_all({a, a})[0], a.cpu() * 2.0);
  expect_close(sum_all(std::vector<Tensor>{a})[0], a.cpu());
  EXPECT_EQ(sum_all.stats().recompile_reasons.back(), "the number of inputs: 2 -> 1");
}

// Each named log stream speaks during one compile with gradients.
TEST_P(CompileTest, LogStreamsEachSayTheirPart) {
  KILN_REQUIRE_RUN();
  nn::MLP mlp(8, 16, 2);
  mlp.to(dev());
  ScopedEnv cache_dir("KILN_CACHE_DIR", (fs::temp_directory_path() / fmt::format("kiln_logs_cache_{}", getpid())).c_str());
  ScopedEnv logs("KILN_LOGS", "graph,aot,fusion,output_code,perf,cache");
  ::testing::internal::CaptureStderr();
  CompiledFunction f = compile([&](const Tensor& x) { return mlp(x).sum(); });
  f(randn_on({2, 8}, 1)).backward();
  std::string err = ::testing::internal::GetCapturedStderr();
  fs::remove_all(fs::temp_directory_path() / fmt::format("kiln_logs_cache_{}", getpid()));
  EXPECT_TRUE(has(err, "[graph] fn (compile 1):\ngraph fn(")) << err;
  EXPECT_TRUE(has(err, "[aot] fn: joint graph of")) << err;
  EXPECT_TRUE(has(err, "[fusion] ")) << err;
  EXPECT_TRUE(has(err, "[output_code] fn 'fn_forward' for ")) << err;
  EXPECT_TRUE(has(err, "[perf] fn: ")) << err;
  EXPECT_TRUE(has(err, "[cache] ")) << err;  // a miss, or a hit of a kernel an earlier test compiled
}

// The options reach the backend: CUDA graphs replay the same launches with the same results.
TEST_P(CompileTest, CudaGraphsOptionReplaysTheSameResults) {
  if (dev().kind != Device::Kind::CUDA) GTEST_SKIP() << "a CUDA option";
  KILN_REQUIRE_RUN();
  CompileOptions o;
  o.run.cuda_graphs = true;
  CompiledFunction f = compile([](const Tensor& x) { return softmax(x * 3.0, -1); }, o);
  Tensor x = randn_on({4, 33}, 1);
  Tensor first = f(x), second = f(x);
  expect_close(first, softmax(x.cpu() * 3.0, -1));
  expect_close(second, first, 0);
  EXPECT_EQ(f.stats().cache_hits, 1);
}

TEST_P(CompileTest, BackwardOfAnUncompiledTensorSaysHowToGetOne) {
  EXPECT_TRUE(has(error_of([&] { randn({1}, 1).backward(); }), "requires_grad_()"));
  EXPECT_TRUE(has(error_of([&] { tensor_of_ints({1}, {1}).requires_grad_(); }), "floating-point"));
}

KILN_DEVICE_TESTS(CompileTest);

}  // namespace
