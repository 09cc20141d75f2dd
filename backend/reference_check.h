#pragma once
// How a compiled result is judged against the reference interpreter (the definition of every
// op), wherever it is judged: `kiln run --check`, the benchmarks' checks and `kiln fuzz`.
//
// A compiled kernel does not compute what the interpreter computes: the interpreter computes each
// op in double and rounds once; compiled code computes in the dtype (f32 for f16/bf16), sums in its
// own order (a 256-term f32 dot product in cuBLAS's order lands 1e-5 from the interpreter's),
// contracts into FMAs and uses approximations a few ulps off. So a fixed tolerance either fails
// correct kernels (a linear 256->600 in f32: max abs error 6e-5) or passes wrong ones. Each element
// is judged against what a correct compiler may do to it:
// - dtype and shape equal the reference's; integers and bools exactly equal; NaN where the
//   reference has NaN, +-inf where it has the same infinity;
// - other floats within `atol + rtol*|want|` (PyTorch's assert_close defaults: f64 1e-7 and 1e-7,
//   f16 1e-5 and 1e-3, bf16 1e-5 and 1.6e-2; f32 1e-5 and 1e-5, kiln's own rather than 1.3e-6: a
//   gradient through a division differs by 10-20 ulps in a correct order), widened by
//   - the running bound of a correct kernel's rounding carried through the decomposed graph
//     (ir/reference/error_bounds.h: u*sqrt(n)*sum|terms| for an n-term sum or matmul, ...), and
//   - four times the graph's own conditioning: the distance between the reference, the decomposed
//     graph's reference and the same graph in float64.
// An element whose bound is not finite, or where the references disagree on NaN, infinity, an
// integer or a bool (a comparison of near-equal values, an overflow in the narrow dtype), is
// ill-conditioned and not judged. A wrong kernel (an element off by one in a row) is off by far
// more than any of these.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::backend {

// What a graph's compiled outputs are compared with, for one set of inputs.
struct ReferenceOutputs {
  std::vector<HostTensor> want;  // the interpreter on the graph as it is
  // The graph widened to f64; the decomposed graph (each primitive rounded to its dtype, as
  // compiled code computes); the decomposed graph's running rounding bound. Each may be missing
  // (a graph the widened or decomposed form cannot run).
  std::optional<std::vector<HostTensor>> wide, primitive, bound;
};
// Runs the interpreter on `g` (kiln::Error when it rejects the inputs), on its f64 widening and
// on its decomposition (those two skipped where they fail).
ReferenceOutputs reference_outputs(const Graph& g, const std::vector<HostTensor>& inputs);

// `g` with every floating dtype widened to f64 (inputs and dtype attributes); nothing when some
// op's rule rejects the widened call.
std::optional<Graph> widened_to_f64(const Graph& g);

// The judgement of one output, every element scanned.
struct OutputCheck {
  enum class Kind { Pass, Mismatch, NanMismatch, TypeMismatch };
  Kind kind = Kind::Pass;
  std::string name;            // "%y"
  std::string type_detail;     // TypeMismatch: "f32[3] where the reference has f32[4]"
  int64_t numel = 0;
  int64_t failed = 0;          // elements beyond their bound
  int64_t not_judged = 0;      // ill-conditioned elements
  double max_abs = 0, max_rel = 0;  // over the finite elements judged
  // The worst element: the failing one furthest beyond its bound (a NaN or infinity mismatch
  // first); when none fails, the one closest to its bound.
  int64_t worst = -1;
  Shape shape;                 // to print the worst element's index
  double got = 0, want = 0, wide = 0, primitive = 0;
  double allowed = 0;          // what the worst element was allowed to differ by
  double tolerance = 0;        // of which atol + rtol*|want|
  double rounding = 0;         // of which the rounding bound
  double conditioning = 0;     // of which four times the references' spread
  bool ok() const { return kind == Kind::Pass; }
  // One line: "PASS  max abs err 6.1e-05, ..." or "FAIL  12 of 4800 elements ...; worst at [3,17]: ...".
  std::string str() const;
  // The worst element as "[3,17]".
  std::string worst_index() const;
};

// The dtype whose tolerance applies to value `v`: the loosest among it and everything it is
// computed from (an f32 sum cast to f64 carries f32's rounding).
std::optional<DType> tolerance_dtype(Value v);

// Judges one output. `wide`, `primitive` and `bound` may be null; `tolerance_of` defaults to the
// output's dtype.
OutputCheck check_output(const HostTensor& got, const HostTensor& want, const std::string& name,
                         const HostTensor* wide = nullptr, const HostTensor* primitive = nullptr,
                         std::optional<DType> tolerance_of = std::nullopt, const HostTensor* bound = nullptr);

// Judges every output of `g` run compiled on `inputs` (`got`) against `ref`.
std::vector<OutputCheck> check_outputs(const Graph& g, const std::vector<HostTensor>& got, const ReferenceOutputs& ref);
// The same, computing the references first.
std::vector<OutputCheck> check_against_reference(const Graph& g, const std::vector<HostTensor>& inputs,
                                                 const std::vector<HostTensor>& got);

}  // namespace kiln::backend
