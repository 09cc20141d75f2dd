#pragma once
// kiln::compile: a C++ function over Tensors in, a compiled callable out -- what
// torch.compile does for Python (Dynamo's capture and guards, AOTAutograd, Inductor).
//
//   nn::MLP mlp(16);
//   auto f = kiln::compile([&](const Tensor& x) { return mlp(x); });
//   Tensor y = f(x);          // first call: trace, compile (and run)
//   y = f(x2);                // same shapes: the compiled code runs, the function is not called
//   y = f(x3);                // another shape: recompiled (KILN_LOGS=recompiles says why)
//
// - **Guards.** A compiled graph is kept under guards on what its trace depended on: each
//   input's and each captured tensor's (parameter's) dtype, shape, strides, device and whether
//   it requires a gradient, and whether gradients are on (NoGradGuard). A call that passes a
//   cache entry's guards runs it without calling the function: the function must be pure over
//   its inputs and the tensors it captures (whose current values are read at every call).
// - **Recompiles.** A call that fails every entry's guards traces and compiles again;
//   KILN_LOGS=recompiles names the first failing guard of the newest entry
//   ("input 0: shape [64,64] -> [128,64]"). After `cache_size_limit` compiles the function
//   runs eagerly from then on, with one warning on stderr (torch._dynamo's cache_size_limit).
// - **Graph breaks.** Where the function reads a value out of a traced tensor (item(), or
//   bool() in an `if`), the trace ends there: the graph so far is compiled and run, the value is
//   read, and tracing goes on in a new graph. KILN_LOGS=graph_breaks names each break with its
//   C++ source location. C++ cannot resume a function in the middle, as Dynamo resumes Python
//   bytecode: a function that breaks is called again at every call, its ops recorded (not run)
//   and each graph between breaks looked up among those compiled before by its content, so only
//   a graph never seen before compiles. `fullgraph` makes a break a kiln::Error instead.
// - **Gradients.** When a floating input or captured tensor requires a gradient
//   (Tensor::requires_grad_(); nn::Module parameters do) and gradients are on, the first call
//   also builds the joint graph and partitions it (AOTAutograd): the compiled forward returns
//   the results and the tensors the backward needs, and `result.backward()` runs the compiled
//   backward and adds into each leaf's .grad(). Not through a graph break (a kiln::Error).
// - **Debug dumps.** With `debug_dir` (or KILN_DEBUG_DIR) set, each compiled graph gets a
//   numbered folder of its own (backend/debug_dump.h): .kir and .dot per stage, SVGs with
//   `debug_svg` (or KILN_DEBUG_SVG=1).
// - **Devices.** The compiled code runs on `device`, or where the inputs are when it is empty.
//   Inputs and captured tensors elsewhere are copied there at every call (move a model with
//   module.to(device) to avoid it), and results come back to the first input's device.
//
// A training step -- forward, loss, backward and the optimizer's update as one compiled graph,
// parameters and optimizer state updated in place -- is compile(module, loss_fn, optimizer).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/optim.h"
#include "frontend/tensor.h"
#include "frontend/trace.h"

namespace kiln {

struct CompileOptions {
  std::optional<Device> device;         // where the compiled code runs; empty: where the inputs are
  std::string partitioner = "mincut";   // "mincut" | "default": the forward/backward split (AOTAutograd's)
  backend::RunOptions run;              // CUDA graphs, TF32 (backend/compile.h)
  bool autotune = false;                // time candidate schedules on the device, keep the fastest (backend/autotune.h; KILN_AUTOTUNE=1)
  std::string debug_dir;                // a numbered folder per compiled graph; empty: $KILN_DEBUG_DIR, if set
  bool debug_svg = false;               // the debug folder also draws each graph as an SVG (KILN_DEBUG_SVG=1)
  int cache_size_limit = 8;             // compiles per function before it runs eagerly
  bool fullgraph = false;               // a graph break is a kiln::Error
  std::string name = "fn";              // names the graphs, the logs and the debug folders
  // compile(module, loss, optimizer): loss scaling inside the step (f16 training; optim.h).
  std::optional<GradScalerConfig> grad_scaler;
  // compile(module, loss, optimizer): DDP inside the step, in a process group
  // (frontend/distributed.h): rank 0's parameters are broadcast into every rank's module before
  // the first step, and the gradients averaged in buckets. FSDP (shard_parameters) changes the
  // parameters' shapes, which a module keeps: it goes through make_train_step.
  std::optional<DataParallelConfig> data_parallel;
};

// What a compiled function did so far (tests and tools read it; the logs say the same).
struct CompileStats {
  int calls = 0;
  int compiles = 0;        // graphs compiled: the first, recompiles and graphs after breaks
  int recompiles = 0;      // calls whose inputs failed the guards of every entry
  int cache_hits = 0;      // calls that ran a cached entry without calling the function
  int graph_breaks = 0;    // breaks met, over all calls
  int eager_calls = 0;     // calls run eagerly after the cache size limit
  std::vector<std::string> recompile_reasons;  // the failing guard of each recompile
  std::vector<std::string> debug_folders;      // folders written (with a debug dir)
};

struct CompiledFunctionState;

class CompiledFunction {
 public:
  explicit CompiledFunction(std::shared_ptr<CompiledFunctionState> s) : s_(std::move(s)) {}
  // Every result. f({x}) is this form too (a braced list is a list, however long): it returns
  // every result, as f({x, y}) does.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> operator()(std::initializer_list<Tensor> inputs) const;
  // f(x): one input, one result (for functions compiled from a TraceFn1); a kiln::Error naming
  // the list form when the function returns several.
  Tensor operator()(const Tensor& input) const;
  const CompileStats& stats() const;

 private:
  std::shared_ptr<CompiledFunctionState> s_;
};

CompiledFunction compile(TraceFn fn, CompileOptions options = {});
CompiledFunction compile(TraceFn1 fn, CompileOptions options = {});
// Tensors to one tensor (a loss): called with a vector, it returns the one result in a vector.
CompiledFunction compile(ScalarFn fn, CompileOptions options = {});

// ---- a training step compiled as one unit
// compile(module, loss_fn, optimizer): each call takes a batch, runs forward, loss, backward
// and the optimizer's update as one compiled graph, and updates the module's parameters and
// the optimizer's state in place (on a GPU they stay in device memory between steps). It is
// guarded as kiln::compile is: a batch of new shapes or dtypes recompiles the step, keeping the
// optimizer's state. The loss function must not break the graph.
struct CompiledTrainStepState;
struct GradScalerState {
  double scale = 0;
  int64_t skipped_steps = 0;
};

class CompiledTrainStep {
 public:
  explicit CompiledTrainStep(std::shared_ptr<CompiledTrainStepState> s) : s_(std::move(s)) {}
  // One step on `batch`; returns the loss before the update (one 4-byte copy from a GPU).
  double operator()(const std::vector<Tensor>& batch) const;
  const CompileStats& stats() const;
  int64_t steps() const;          // steps taken
  TrainState state() const;       // parameters, optimizer state and steps (host copies)
  // With CompileOptions::grad_scaler: the scale and the steps skipped so far (read from the
  // device when asked: the steps themselves never wait for the host).
  std::optional<GradScalerState> grad_scaler() const;
  // The step graph of the newest entry (the batch shapes seen last); kiln::Error before the
  // first step.
  const TrainStep& train_step() const;
  const Device& device() const;  // where the parameters are and the step runs

 private:
  std::shared_ptr<CompiledTrainStepState> s_;
};

CompiledTrainStep compile(nn::Module& module, ScalarFn loss_fn, OptimizerConfig optimizer, CompileOptions options = {});

// The Trainer's form (frontend/trainer.h): the step traced now, on `example_batch`; on the CPU
// each step graph runs through `host_executor` (the reference interpreter when empty) instead
// of being compiled here.
CompiledTrainStep compile_trainer_step(nn::Module& module, ScalarFn loss_fn, OptimizerConfig optimizer, CompileOptions options,
                                       const std::vector<Tensor>& example_batch, Executor host_executor);

}  // namespace kiln
