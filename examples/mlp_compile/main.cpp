// A two-layer MLP learns the XOR of two coordinates' signs, trained with kiln::compile.
//
//   kiln::compile(model, loss_fn, AdamWConfig{...})  -> one compiled graph per training step:
//                                                      forward, loss, backward and AdamW, with
//                                                      the parameters updated in place
//   kiln::compile(fn)                                -> a compiled inference function, guarded
//                                                      on its inputs' shapes (a new batch size
//                                                      recompiles; KILN_LOGS=recompiles says why)
//
// Run it with KILN_DEBUG_DIR=dbg to get every compiled graph's stages in dbg/NNN_<name>/, or
// KILN_LOGS=recompiles,perf to watch the compiler. Exits 1 if the model did not learn.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/cuda_backend.h"
#include "frontend/kiln.h"

using namespace kiln;

// Linear(2, 32) -> GELU -> Linear(32, 2): two layers, a hidden width of 32.
class TwoLayerMLP : public nn::Module {
 public:
  explicit TwoLayerMLP(uint64_t seed) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 32, true, nn::derive_seed(seed, "fc1")));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 2, true, nn::derive_seed(seed, "fc2")));
  }
  Tensor operator()(const Tensor& x) const { return (*fc2)(gelu((*fc1)(x))); }

  std::shared_ptr<nn::Linear> fc1, fc2;
};

// n points uniform in [-1, 1]^2 (rand is an op: made once here, eagerly), labelled 1 where the
// two coordinates' signs differ.
struct Data {
  Tensor x, y;
};
Data make_data(int64_t n, uint64_t seed, Device device) {
  Tensor x = rand({n, 2}, static_cast<int64_t>(seed)) * 2.0 - 1.0;
  std::vector<double> xs = x.to_doubles();
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back((xs[2 * i] > 0) != (xs[2 * i + 1] > 0));
  return {x.to(device), tensor_of_ints(labels, {n}).to(device)};
}

int main() {
  // Line by line even into a pipe (ctest, a log): a run cut short still shows how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The GPU when there is one: the model moves once; the data goes there too.
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  TwoLayerMLP model(/*seed=*/0);
  model.to(device);
  Data train = make_data(256, 1, device), test = make_data(1000, 2, device);

  CompiledTrainStep step = compile(
      model, [&](const std::vector<Tensor>& b) { return cross_entropy(model(b[0]), b[1]); }, AdamWConfig{.lr = 3e-2});
  // Inference: no gradients wanted, so the parameters' requires_grad is left out of the graph.
  CompiledFunction predict = compile([&](const Tensor& x) { return argmax(model(x), 1); });
  auto accuracy = [&](const Data& d) {
    NoGradGuard no_grad;
    std::vector<int64_t> got = predict(d.x).to_ints(), want = d.y.to_ints();
    int64_t right = 0;
    for (size_t i = 0; i < got.size(); ++i) right += got[i] == want[i];
    return static_cast<double>(right) / static_cast<double>(got.size());
  };

  double first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    last = step({train.x, train.y});
    if (i == 0) first = last;
    if (i % 50 == 0 || i == 299) fmt::print("step {:3}  loss {:.4f}\n", i, last);
  }
  double train_acc = accuracy(train), test_acc = accuracy(test);  // 256 then 1000 points: two compiles
  fmt::print("on {}: accuracy: {:.1f}% on the training points, {:.1f}% on {} new points\n", device.str(), 100 * train_acc, 100 * test_acc,
             test.x.size(0));
  fmt::print("training step: {} compile, {} cached calls; predict: {} compiles (recompiled because {})\n",
             step.stats().compiles, step.stats().cache_hits, predict.stats().compiles,
             predict.stats().recompile_reasons.empty() ? "-" : predict.stats().recompile_reasons[0]);
  if (!(last < 0.5 * first && test_acc > 0.9)) {
    fmt::print(stderr, "the model did not learn: loss {:.4f} -> {:.4f}, test accuracy {:.1f}%\n", first, last,
               100 * test_acc);
    return 1;
  }
  return 0;
}
