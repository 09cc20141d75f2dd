// kiln's custom ops, end to end: registers a fusable op and an opaque one, uses both in a small
// model, trains it, and prints the generated kernel in which the fusable op was fused with its
// neighbours.
//
//   mylib::scaled_swish(x, beta) = x * sigmoid(beta * x)  a scalar expression: pointwise, fused
//                                                          into its neighbours' kernel, with a VJP
//   mylib::cumsum(x), mylib::revcumsum(x)                  running sums along the last dim: kernels
//                                                          of their own (C++ for the CPU, CUDA C for
//                                                          the GPU), each the other's VJP
//
// The model: Linear(16, 64) -> scaled_swish(beta=1.5) -> cumsum / 64 -> Linear(64, 4), trained
// with cross-entropy and AdamW on a fixed batch whose class is the largest of its first four
// features. It trains on the CPU (the compiled step) and, where there is one, on the GPU.
//
// Usage: kiln_example_custom_op [--steps N]
// Exits 1 if the loss does not fall to half, if a compiled forward disagrees with the reference
// interpreter, or if the fusable op was not fused; 77 when no backend can run here.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "backend/compile.h"
#include "backend/cuda_backend.h"
#include "backend/explain.h"
#include "codegen/cpp_emitter.h"
#include "codegen/cuda_emitter.h"
#include "frontend/kiln.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "runtime/cpu/jit.h"

using namespace kiln;

namespace {

// ---- the fusable op -----------------------------------------------------------------------

void register_scaled_swish() {
  register_custom_op({
      .schema = "mylib::scaled_swish(Tensor x, float beta=1.0) -> Tensor",
      .reference =
          [](std::span<const HostTensor> in, const Attrs& a, std::span<const TensorMeta> out) {
            const double beta = a.get_float("beta");
            HostTensor y = HostTensor::empty(out[0]);
            for (int64_t i = 0; i < y.numel(); ++i) {
              const double x = in[0].get(i);
              y.set(i, x / (1 + std::exp(-beta * x)));
            }
            return std::vector<HostTensor>{std::move(y)};
          },
      // d/dx x s(bx) = s(bx) (1 + b x (1 - s(bx)))
      .vjp = [](autograd::VjpContext& c) -> std::vector<Value> {
        const double beta = c.attrs().get_float("beta");
        Var x = c.input(0), s = c.b.sigmoid(x * beta);
        return {c.grad() * s * (1.0 + x * beta * (1.0 - s))};
      },
      .scalar_expr = "x * sigmoid(beta * x)",
  });
}

// ---- the opaque ops -----------------------------------------------------------------------

void scan_rows(const HostTensor& in, HostTensor& out, bool reverse) {
  const int64_t cols = in.shape().back(), rows = cols ? in.numel() / cols : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t j = r * cols + (reverse ? cols - 1 - k : k);
      acc += in.get(j);
      out.set(j, acc);
    }
  }
}

// One thread per row (the rows are short); the launch rule passes the row length and direction.
constexpr const char* kScanCuda = R"(
extern "C" __global__ void mylib_scan(const float* x, float* y, long long n, long long cols, long long reverse) {
  long long rows = cols ? n / cols : 0;
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

CustomOp scan_op(const char* name, bool reverse) {
  CustomOp d;
  d.schema = fmt::format("mylib::{}(Tensor x) -> Tensor", name);
  d.meta = [](std::span<const TensorMeta> in, const Attrs&) {
    if (in[0].dtype != DType::F32 && in[0].dtype != DType::F64) fail("takes f32 or f64, got {}", dtype_name(in[0].dtype));
    if (in[0].shape.empty()) fail("takes a tensor of at least one dimension");
    return std::vector<TensorMeta>{TensorMeta(in[0].dtype, in[0].shape)};
  };
  d.reference = [reverse](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> out) {
    HostTensor y = HostTensor::empty(out[0]);
    scan_rows(in[0], y, reverse);
    return std::vector<HostTensor>{std::move(y)};
  };
  d.cpu_kernel = [reverse](std::span<const HostTensor> in, std::span<HostTensor> out, const Attrs&) { scan_rows(in[0], out[0], reverse); };
  d.cuda_kernel = {.source = kScanCuda, .entry = "mylib_scan", .launch = [reverse](auto in, auto, const Attrs&) {
                     if (in[0].dtype != DType::F32) fail("the CUDA kernel takes f32, got {}", dtype_name(in[0].dtype));
                     const int64_t cols = in[0].shape.back(), rows = cols ? in[0].numel() / cols : 0;
                     return backend::CudaLaunch{.grid = std::max<int64_t>(1, (rows + 127) / 128), .block = 128, .args = {cols, reverse}};
                   }};
  return d;
}

void register_scans() {
  CustomOp fwd = scan_op("cumsum", false), rev = scan_op("revcumsum", true);
  fwd.vjp = [](autograd::VjpContext& c) -> std::vector<Value> { return {c.b.op("mylib::revcumsum", {c.grad()})}; };
  rev.vjp = [](autograd::VjpContext& c) -> std::vector<Value> { return {c.b.op("mylib::cumsum", {c.grad()})}; };
  register_custom_op(fwd);
  register_custom_op(rev);
}

// ---- the model ----------------------------------------------------------------------------

class Net : public nn::Module {
 public:
  Net() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(16, 64, true, 1));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 4, true, 2));
  }
  Tensor operator()(const Tensor& x) const {
    Tensor h = call_op("mylib::scaled_swish", std::vector<Tensor>{(*fc1)(x)}, {{"beta", 1.5}})[0];
    Tensor c = call_op("mylib::cumsum", std::vector<Tensor>{h})[0] * (1.0 / 64);
    return (*fc2)(c);
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// A batch of 256 whose class is the largest of its first four features.
std::pair<HostTensor, HostTensor> make_batch() {
  HostTensor x = random_tensor(TensorMeta(DType::F32, {256, 16}), 42);
  HostTensor t = HostTensor::empty(DType::I64, {256});
  for (int64_t r = 0; r < 256; ++r) {
    int64_t best = 0;
    for (int64_t k = 1; k < 4; ++k)
      if (x.get(r * 16 + k) > x.get(r * 16 + best)) best = k;
    t.set_int(r, best);
  }
  return {x, t};
}

// Trains a fresh model for `steps`; returns the first and the last loss.
std::pair<double, double> train(const Device& device, int steps) {
  Net net;
  auto [xh, th] = make_batch();
  Tensor x(xh, "x"), t(th, "targets");
  Executor executor;
  if (device.kind == Device::Kind::CUDA) {
    net.to(device);
    x = x.to(device);
    t = t.to(device);
  } else {
    executor = compiled_executor();  // the training step compiled once, for the CPU
  }
  Trainer trainer(net, [&](const std::vector<Tensor>& b) { return cross_entropy(net(b[0]), b[1]); }, {x, t},
                  AdamWConfig{.lr = 3e-2, .weight_decay = 0}, executor);
  double first = 0, last = 0;
  for (int i = 0; i < steps; ++i) {
    last = trainer.step({x, t});
    if (i == 0) first = last;
    if (i % 10 == 0 || i == steps - 1) fmt::print("  step {:3}: loss {:.4f}\n", i, last);
  }
  return {first, last};
}

// Compiles the model's forward for `device`, checks it against the interpreter, and prints the
// kernel that computes scaled_swish. Returns whether it was fused with a neighbour.
bool show_fused_kernel(const Device& device) {
  Net net;
  auto [xh, th] = make_batch();
  TracedGraph fwd = trace([&](const Tensor& x) { return net(x); }, Tensor(xh, "x"), "net");
  fmt::print("\nthe traced forward graph:\n{}\n", print_graph(fwd.graph));
  backend::CompileOptions options;
  options.device = device;
  // What the compiler made of it (`kiln explain` for a graph in a program): both custom ops by name.
  fmt::print("{}\n", backend::explain(fwd.graph, options).text);
  backend::CompiledGraph c = backend::compile(fwd.graph, options);
  fmt::print("compiled for {}: {} kernels + {} BLAS calls + {} custom-op kernels\n", c.report.device, c.report.kernels,
             c.report.blas_calls, c.report.opaque_calls);
  bool fused = false;
  for (const codegen::Kernel& k : c.executable.lowered().kernels) {
    if (k.comment.find("mylib::scaled_swish") == std::string::npos) continue;
    // "group 2 pointwise [add, mylib::scaled_swish]: ...": the ops the kernel computes.
    const size_t open = k.comment.find('['), close = k.comment.find(']');
    fused = open != std::string::npos && close != std::string::npos && k.comment.substr(open, close - open).find(',') != std::string::npos;
    fmt::print("\nkernel {} computes: {}\n{}\n", k.name, k.comment,
               device.kind == Device::Kind::CUDA ? codegen::emit_cuda_kernel(k) : codegen::emit_cpp_kernel(k));
  }
  std::string why;
  if (device.kind == Device::Kind::CPU || backend::cuda_device_present(&why)) {
    std::vector<HostTensor> in = fwd.graph_inputs({xh});
    HostTensor got = c.run(in)[0], want = interpret(fwd.graph, in)[0];
    double worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(got.get(i) - want.get(i)));
    fmt::print("compiled forward against the reference interpreter: max abs error {:.2e}\n", worst);
    if (!(worst < 1e-4)) return false;
  }
  return fused;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line even into a pipe (ctest, a log): a run cut short still shows how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int steps = 60;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
  register_scaled_swish();
  register_scans();

  std::string why;
  const bool gpu = backend::cuda_device_present(&why);
  const bool cpu = runtime::cpu::jit_available();
  if (!gpu && !cpu) {
    fmt::print("no backend can run here: no CPU JIT in this build and no GPU ({})\n", why);
    return 77;
  }
  bool ok = true;
  for (const Device& d : {Device::cpu(), Device::cuda(0)}) {
    if ((d.kind == Device::Kind::CPU && !cpu) || (d.kind == Device::Kind::CUDA && !gpu)) continue;
    fmt::print("== {}: training Linear -> mylib::scaled_swish -> mylib::cumsum -> Linear, AdamW, {} steps\n", d.str(), steps);
    auto [first, last] = train(d, steps);
    fmt::print("  loss {:.4f} -> {:.4f}\n", first, last);
    if (!(last < first / 2)) {
      fmt::print("FAIL: the loss did not fall to half\n");
      ok = false;
    }
    if (!show_fused_kernel(d)) {
      fmt::print("FAIL: scaled_swish was not fused, or the compiled forward disagrees with the interpreter\n");
      ok = false;
    }
  }
  if (!gpu) fmt::print("(no GPU here: {})\n", why);
  return ok ? 0 : 1;
}
