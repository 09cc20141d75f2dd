#pragma once
// Lowering: each fusion group (passes/fusion/fusion.h) becomes a loop kernel of the kernel
// IR, or for a Matmul group an extern BLAS call in the schedule. Views never copy: they are
// index transforms of the loads that read through them (cat is a select between loads);
// broadcasting zeroes the index of size-1 dims; creation ops are computed where they are
// read; a gather is a load through a checked index. Reductions compute one row (one point
// of the reduced space) per parallel iteration, with as many inner loops as the chain of
// dependent reductions needs (softmax: max, then sum of exp, then the output). A scatter_add
// is two kernels: a copy of `self`, then a loop parallel over every dim but the scattered
// one and ordered along it, so no two threads ever add into one element. A matmul group whose
// GEMM fusion gave an epilogue (passes/fusion/matmul_epilogue.h) is one matmul step that also
// writes the folded group's result.
//
// Buffers: graph inputs keep the layout of their TensorMeta (strides, offset 0); every
// buffer a group writes is contiguous in the logical order of its value's shape. Graph
// outputs that are graph inputs or views (Alias groups) get a copy kernel, so every output
// is a contiguous buffer of its own.
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/target.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "passes/fusion/fusion.h"

namespace kiln::codegen {

// A buffer of the compiled graph: a graph input (bound at run time), or a region of the
// arena that the memory plan places.
struct GraphBuffer {
  enum class Kind : uint8_t { Input, Arena };
  Kind kind = Kind::Arena;
  int input_index = -1;  // Input: which graph input
  TensorMeta meta;       // Input: the graph's meta; Arena: contiguous
  int64_t numel = 0;     // elements addressed (an Input's storage extent under its strides)
  std::string what;      // the value it holds, "%name"
  int first_step = 0, last_step = 0;  // lifetime in schedule steps (inclusive)
  int64_t offset = -1;   // Arena: byte offset, set by the memory plan
  // Checked: shapes are user input, and a product past int64 must be an error, not a small
  // arena that kernels write past.
  int64_t nbytes() const {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(numel, dtype_size(meta.dtype), &bytes))
      fail("buffer {} ({}) holds {} elements of {} bytes: more than 2^63 bytes", what, meta.str(), numel, dtype_size(meta.dtype));
    return bytes;
  }
};

// What a GEMM applies to its result before storing it (cuBLASLt's epilogues): a bias vector
// over the output's columns, then an activation (GELU is the tanh approximation, the one
// cuBLASLt implements); fusion's decision (passes/fusion/matmul_epilogue.h).
using fusion::MatmulEpilogue;
using fusion::matmul_epilogue_name;

// C = epilogue(op(A) @ op(B)) per batch, row-major, all buffers of one dtype.
struct MatmulCall {
  int a = -1, b = -1, out = -1;  // graph buffers
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  int bias = -1;                 // graph buffer of the bias (n elements) when there is one
  DType dtype = DType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // the buffer holds A^T ([k, m]) / B^T ([n, k])
  int64_t a_batch_stride = 0, b_batch_stride = 0;  // elements; 0 = the same matrix every batch
  std::string label;
};

// A custom op's own kernel (frontend/custom_op.h, backend/opaque_kernels.h), called on
// contiguous buffers: its inputs (copied to contiguous buffers where they are not) and results.
struct OpaqueCall {
  Op op{};
  Attrs attrs;
  std::vector<int> inputs, outputs;  // graph buffers
  std::vector<TensorMeta> input_metas, output_metas;  // contiguous
  std::string label;                 // "%y = mylib::f(%x)"
};

struct Step {
  // Collective: a call of the process group's engine (runtime/dist), described by `opaque`.
  enum class Kind : uint8_t { Kernel, Matmul, Opaque, Collective };
  Kind kind = Kind::Kernel;
  int kernel = -1;        // Kernel: index into LoweredGraph::kernels
  std::vector<int> args;  // Kernel: the graph buffer bound to each kernel buffer, in order
  MatmulCall matmul;
  OpaqueCall opaque;       // Opaque and Collective
  int group = -1;         // the fusion group (-1: a copy the lowering added)
};

struct LoweredGraph {
  std::vector<GraphBuffer> buffers;
  std::vector<Kernel> kernels;
  std::vector<Step> steps;   // in execution order
  std::vector<int> outputs;  // the graph buffer of each graph output
  // What each index check of the kernels checks (gather, scatter_add), by the site id its
  // check_index call passes: "%loss = cross_entropy (its gather %loss_gather)". A kernel's
  // out-of-range report carries the id, so the error names the op the user wrote.
  std::vector<std::string> index_checks;
  // Per index check: the kernel holding it (kernels that share a module share its error record).
  std::vector<int> index_check_kernel;
};

// Lowers every group of `plan` (groups of `g`, in order) for `target`: loops say what they
// are (parallel, reduction, ordered) and stay unmapped until the schedule step
// (codegen/schedule.h). Every kernel passes verify(Kernel). Throws kiln::Error for an op the
// code generators have no lowering for, naming the node.
LoweredGraph lower(const Graph& g, const fusion::FusionPlan& plan, const Target& target = cpu_target());

// The schedule as text: one line per step with its buffers, then every kernel's IR.
std::string print_schedule(const LoweredGraph& lg);

}  // namespace kiln::codegen
