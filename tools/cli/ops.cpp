// kiln ops [NAME]: the op table. Without NAME, one line per op: its name, category, schema and
// whether it has a derivative rule and a decomposition. With NAME, the op in full: inputs,
// attributes with their types and defaults, how autograd treats it, and how it is compiled.
// Custom ops loaded with --load are listed with the built-in ones.
#include <fmt/format.h>

#include <algorithm>

#include "backend/opaque_kernels.h"
#include "codegen/pointwise_exprs.h"
#include "codegen/scalar_expr.h"
#include "frontend/onnx/onnx.h"
#include "ir/error.h"
#include "ir/op_registry.h"
#include "passes/autograd/vjp.h"
#include "passes/decompose.h"
#include "tools/cli/commands.h"

namespace kiln::cli {

namespace {

std::string derivative(Op op) {
  if (!autograd::is_differentiable(op)) return "none (not differentiable)";
  auto first = autograd::decomposed_before_differentiation();
  if (std::find(first.begin(), first.end(), op) != first.end()) return "its parts' (decomposed before differentiation)";
  return autograd::find_vjp(op) ? "yes" : "missing (differentiating it is an error)";
}

// How the backends compile the op.
std::string compiled_as(const OpInfo& info) {
  if (const std::string* e = codegen::find_scalar_expr_text(info.op)) return fmt::format("inline, the scalar expression \"{}\"", *e);
  if (info.category == OpCategory::Opaque) {
    std::string k;
    if (backend::find_cpu_opaque_kernel(info.op)) k += "a CPU kernel";
    if (backend::find_cuda_opaque_kernel(info.op)) k += k.empty() ? "a CUDA kernel" : " and a CUDA kernel";
    return fmt::format("a call of its own kernels ({})", k.empty() ? "none" : k);
  }
  if (find_decomposition(info.op)) return "decomposed into other ops first";
  switch (info.category) {
    case OpCategory::Pointwise: return codegen::find_pointwise_expr(info.name) ? "inline, a row of codegen/pointwise_exprs.def" : "inline";
    case OpCategory::Matmul: return "BLAS (CPU) or cuBLASLt (CUDA), or an integer kernel";
    case OpCategory::Reduction: return "a reduction loop, fused with its producers and consumers";
    case OpCategory::View: return "indexing: a view needs no kernel of its own unless it copies";
    case OpCategory::Composite: return "no decomposition: it cannot be compiled";
    case OpCategory::Collective: return "not compiled yet (no NCCL or Gloo engine); the reference interpreter runs it for a simulated group";
    case OpCategory::Attention: return "FlashAttention's tiled kernels (codegen/attention.h): CPU tiles, CUDA FFMA or tensor-core tiles";
    case OpCategory::Sort: return "a sort kernel (codegen/sort.h): CPU heaps, a CUDA bitonic network per row";
    default: return std::string(category_name(info.category));
  }
}

}  // namespace

void add_ops_command(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("ops", "The op table: every op's schema and category, or one op in full");
  cmd->add_option("name", *name, "an op (\"softmax\", \"mylib::f\" with --load)");
  auto onnx_ops = std::make_shared<bool>(false);
  cmd->add_flag("--onnx", *onnx_ops, "the ONNX operators `kiln import` and every command reading an .onnx file take");
  cmd->callback([name, onnx_ops] {
    if (*onnx_ops) {
      std::string why;
      if (!onnx::available(&why)) fail("{}", why);
      std::vector<std::string> ops = onnx::supported_operators();
      fmt::print("{} ONNX operators (default domain, opsets 1 to {}):\n{}\n", ops.size(), onnx::kMaxOpset, fmt::join(ops, " "));
      return;
    }
    if (name->empty()) {
      fmt::print("{:<22} {:<12} {:<5} {:<7} {}\n", "op", "category", "grad", "decomp", "schema");
      for (size_t i = 0; i < num_ops(); ++i) {
        const OpInfo& info = op_info(static_cast<Op>(i));
        if (info.category == OpCategory::Placeholder) continue;
        const char* grad = !autograd::is_differentiable(info.op) ? "-" : autograd::find_vjp(info.op) ? "yes" : "no";
        fmt::print("{:<22} {:<12} {:<5} {:<7} ({})\n", info.name, category_name(info.category), grad,
                   find_decomposition(info.op) ? "yes" : "-", info.schema.str());
      }
      fmt::print("{} ops; `kiln ops NAME` shows one in full\n", num_ops());
      return;
    }
    const OpInfo* info = find_op(*name);
    if (!info) fail("no op named '{}' (`kiln ops` lists them; a custom op needs its library: --load LIB.so)", *name);
    fmt::print("{}({})\n", info->name, info->schema.str());
    fmt::print("  category:   {}\n", category_name(info->category));
    for (const ArgSpec& a : info->schema.tensors)
      fmt::print("  input       {} {}{}\n", arg_type_name(a.type), a.name, a.optional ? " (optional)" : "");
    for (const ArgSpec& a : info->schema.attrs)
      fmt::print("  attribute   {}{} {}{}\n", arg_type_name(a.type), a.optional ? "?" : "", a.name,
                 a.has_default ? " = " + (a.default_value ? attr_str(*a.default_value) : std::string("None")) : " (required)");
    fmt::print("  results:    {}\n", info->schema.variadic_results ? "a list (Tensor[])" : "as the shape rule gives");
    fmt::print("  derivative: {}\n", derivative(info->op));
    fmt::print("  decomposed: {}\n", find_decomposition(info->op) ? "yes" : "no");
    fmt::print("  compiled:   {}\n", compiled_as(*info));
    fmt::print("  reference:  {}\n", info->reference ? "yes (the interpreter runs it)" : "none");
  });
}

}  // namespace kiln::cli
