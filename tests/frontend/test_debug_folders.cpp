// KILN_DEBUG_DIR gives every compiled graph a folder, whoever asked for the compile
// (backend/debug_dump.h): kiln::compile (with and without gradients), a compiled training step,
// compiled_executor, the Trainer, the eager CUDA ops (and `kiln compile`: tests/tools). Each
// folder holds the graph as .kir and .dot, the compile driver's dump and report.json naming who
// asked; no SVG unless asked for.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/autograd.h"
#include "frontend/compile.h"
#include "frontend/nn/mlp.h"
#include "frontend/ops.h"
#include "frontend/optim.h"
#include "frontend/trainer.h"
#include "ir/parser.h"
#include "runtime/cpu/jit.h"
#include "tests/backend/backend_check.h"
#include "tests/support/support.h"
#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#endif

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// KILN_DEBUG_DIR pointing at a fresh folder for one test; the previous value restored after.
class DebugRoot {
 public:
  DebugRoot() {
    std::random_device rd;
    root_ = fs::temp_directory_path() / ("kiln_debug_root_" + std::to_string(rd()) + std::to_string(rd()));
    if (const char* old = std::getenv("KILN_DEBUG_DIR")) saved_ = old;
    ::setenv("KILN_DEBUG_DIR", root_.c_str(), 1);
  }
  ~DebugRoot() {
    if (saved_) ::setenv("KILN_DEBUG_DIR", saved_->c_str(), 1);
    else ::unsetenv("KILN_DEBUG_DIR");
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  DebugRoot(const DebugRoot&) = delete;
  DebugRoot& operator=(const DebugRoot&) = delete;

  // The numbered folders, in order.
  std::vector<fs::path> folders() const {
    std::vector<fs::path> out;
    if (fs::exists(root_))
      for (const auto& e : fs::directory_iterator(root_)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path root_;
  std::optional<std::string> saved_;
};

nlohmann::json report_of(const fs::path& folder) {
  std::ifstream in(folder / "report.json");
  return nlohmann::json::parse(in);
}

// A folder of a direct compile: the graph as given, the driver's dump, and who asked.
void expect_direct_compile_folder(const fs::path& folder, const std::string& origin, const std::string& source_file) {
  EXPECT_TRUE(fs::exists(folder / "00_graph.kir")) << folder;
  EXPECT_TRUE(fs::exists(folder / "00_graph.dot")) << folder;
  EXPECT_FALSE(fs::exists(folder / "00_graph.svg")) << "SVGs only on request";
  for (const char* file : {"decomposed.kir", "fused.kir", "fused.dot", "kernels.txt", "report.txt"})
    EXPECT_TRUE(fs::exists(folder / "01_compile_graph" / file)) << folder << " " << file;
  EXPECT_TRUE(fs::exists(folder / "01_compile_graph" / source_file)) << folder;
  EXPECT_TRUE(fs::is_directory(folder / "01_compile_graph" / "passes")) << folder;
  nlohmann::json r = report_of(folder);
  EXPECT_EQ(r["origin"], origin);
  EXPECT_GE(r["compiled"]["graph"]["kernels"].get<int>() + r["compiled"]["graph"]["blas_calls"].get<int>(), 1);
}

CompileOptions options_named(const std::string& name) {
  CompileOptions o;
  o.name = name;
  return o;
}

class DebugFolders : public DeviceTest {};

Device dev() { return test_device(); }
std::string source_file() { return on_cuda() ? "kernels.cu" : "kernels.cpp"; }

TEST_P(DebugFolders, CompiledExecutorGivesEachGraphOneFolder) {
  if (on_cuda()) GTEST_SKIP() << "compiled_executor runs host tensors; its device is tested on the CPU";
  KILN_REQUIRE_RUN();
  DebugRoot root;
  Graph g = parse_graph(R"(
graph scaled(%x: f32[4,8]) {
  %y = exp(%x) : f32[4,8]
  %s = sum(%y, dim=[1]) : f32[4]
  return (%s)
})");
  Executor run = compiled_executor();
  std::vector<HostTensor> in{random_tensor(g.inputs()[0]->meta(), 1)};
  run(g, in);
  run(g, in);  // compiled once: no second folder
  std::vector<fs::path> folders = root.folders();
  ASSERT_EQ(folders.size(), 1u);
  EXPECT_EQ(folders[0].filename(), "000_scaled");
  expect_direct_compile_folder(folders[0], "compiled_executor", source_file());
}

// On the CPU the Trainer's step goes through its executor (compiled_executor here); on a GPU the
// Trainer's step is compiled as kiln::compile(module, ...) compiles one.
TEST_P(DebugFolders, TheTrainersStepGetsAFolder) {
  KILN_REQUIRE_RUN();
  DebugRoot root;
  nn::MLP mlp(8, 16, 4);
  mlp.to(dev());
  Tensor x = randn({4, 8}, 5).to(dev()), y = randn({4, 8}, 6).to(dev());
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); };
  Trainer trainer(mlp, loss_fn, {x, y}, AdamWConfig{.lr = 1e-2}, on_cuda() ? Executor{} : compiled_executor());
  trainer.step({x, y});
  trainer.step({x, y});
  std::vector<fs::path> folders = root.folders();
  ASSERT_EQ(folders.size(), 1u);
  fs::path step_kir = folders[0] / "00_graph.kir";
  if (on_cuda()) {
    EXPECT_EQ(folders[0].filename(), "000_Trainer");
    for (const char* file : {"00_traced.kir", "01_train_step.kir", "01_train_step.dot"})
      EXPECT_TRUE(fs::exists(folders[0] / file)) << file;
    EXPECT_TRUE(fs::exists(folders[0] / "02_compile_train_step" / source_file()));
    EXPECT_EQ(report_of(folders[0])["graph"], "Trainer");
    step_kir = folders[0] / "01_train_step.kir";
  } else {
    expect_direct_compile_folder(folders[0], "compiled_executor", source_file());
  }
  std::ifstream kir(step_kir);
  std::string text((std::istreambuf_iterator<char>(kir)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "exp_avg_sq")) << "the folder holds the training step (AdamW's state)";
}

// kiln::compile without gradients (NoGradGuard), and a compiled training step: the stages the
// frontend records, then the driver's dump.
TEST_P(DebugFolders, CompileUnderNoGradAndATrainingStep) {
  KILN_REQUIRE_RUN();
  DebugRoot root;
  auto model = std::make_shared<nn::MLP>(8, 16, 4);
  model->to(dev());
  {
    NoGradGuard no_grad;
    CompiledFunction f = compile([&](const Tensor& t) { return (*model)(t); }, options_named("infer"));
    f(randn({2, 8}, 1).to(dev()));
  }
  CompiledTrainStep step = compile(
      *model, [&](const std::vector<Tensor>& b) { return mean(square((*model)(b[0]) - b[1])); }, AdamWConfig{},
      options_named("step"));
  step({randn({4, 8}, 2).to(dev()), randn({4, 8}, 3).to(dev())});
  std::vector<fs::path> folders = root.folders();
  ASSERT_EQ(folders.size(), 2u);
  EXPECT_EQ(folders[0].filename(), "000_infer");
  EXPECT_TRUE(fs::exists(folders[0] / "00_traced.kir"));
  EXPECT_TRUE(fs::exists(folders[0] / "01_compile_graph" / source_file()));
  EXPECT_FALSE(fs::exists(folders[0] / "01_joint.kir")) << "no gradients: no joint graph";
  EXPECT_EQ(folders[1].filename(), "001_step");
  for (const char* file : {"00_traced.kir", "01_train_step.kir", "01_train_step.dot"})
    EXPECT_TRUE(fs::exists(folders[1] / file)) << file;
  EXPECT_TRUE(fs::exists(folders[1] / "02_compile_train_step" / source_file()));
  EXPECT_EQ(report_of(folders[1])["graph"], "step");
}

KILN_DEVICE_TESTS(DebugFolders);

// The eager CUDA dispatch compiles each op signature once: each gets a folder.
TEST(DebugFoldersOnAGpu, EagerCudaOpsGetAFolderEach) {
#if KILN_HAVE_CUDA
  std::string why;
  if (!backend::cuda_device_present(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  DebugRoot root;
  Tensor x = randn({3, 5}, 1).to(Device::cuda(0));
  Tensor e = x.exp();
  Tensor e2 = (x * 1.0).exp();  // a mul, and the same exp signature again: no folder for it
  (void)e;
  (void)e2;
  std::vector<fs::path> folders = root.folders();
  ASSERT_GE(folders.size(), 2u);
  bool saw_exp = false;
  for (const fs::path& f : folders) {
    expect_direct_compile_folder(f, "eager cuda op", "kernels.cu");
    saw_exp |= f.filename().string().ends_with("_exp");
  }
  EXPECT_TRUE(saw_exp);
#else
  GTEST_SKIP() << "no CUDA backend in this build";
#endif
}

}  // namespace
}  // namespace kiln::testing
