#pragma once
// Differential testing of the compilers: a graph is compiled under several option sets (fusion
// and the optimization passes on and off), on a device, and its joint graph too; every result is
// compared with the reference interpreter.
//
// The comparison, per output element:
// - dtype and shape equal the reference's;
// - integers and bools exactly equal;
// - NaN where the reference has NaN, +-inf where it has the same infinity;
// - other floats within PyTorch's assert_close defaults (f64 rtol 1e-7 atol 1e-7, f16 1e-3 and
//   1e-5, bf16 1.6e-2 and 1e-5; f32 atol 1e-5 but rtol 1e-5, kiln's own, rather than 1.3e-6:
//   see differential.cpp), widened by the graph's own conditioning: four times the distance between
//   the reference (or the reference of its decomposed form) and the same graph in float64, plus
//   a running bound of the rounding a correct compiled kernel may make, carried through the
//   decomposed graph (tools/fuzz/error_bounds.h). An element whose bound is not finite is not
//   judged.
//   An element where the two references disagree on NaN, infinity, an integer or a bool is
//   ill-conditioned (a comparison of near-equal values, an overflow in the narrow dtype) and
//   not held against the compiler.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "tools/fuzz/random_graph.h"

namespace kiln::fuzz {

// What went wrong, for counting and for keeping a shrunk reproducer to the same failure.
enum class Verdict { Pass, Mismatch, NanMismatch, TypeMismatch, CompileError, RunError, InternalError };
std::string_view verdict_name(Verdict v);

struct CompileConfig {
  std::string name;  // "fused", "unfused", "unoptimized"
  backend::CompileOptions options;
};
// fused (the defaults), unfused (fuse off), unoptimized (canonicalize/cse/dce off).
std::vector<CompileConfig> default_configs();

struct Finding {
  Verdict verdict = Verdict::Pass;
  std::string config;  // "fused", "joint/fused", ...
  std::string detail;  // the first bad element, or the error
};

struct CheckOptions {
  Device device = Device::cpu();
  std::vector<CompileConfig> configs = default_configs();
  bool joint = true;  // also the joint graph (floating inputs and outputs), under the first config
};

struct CaseReport {
  std::vector<Finding> findings;  // empty: every comparison passed
  bool reference_failed = false;  // the interpreter rejected the case (a generator bug, not counted)
  bool joint_checked = false;
  std::string joint_skipped;      // why the joint graph was not checked ("" when it was)
  bool passed() const { return findings.empty() && !reference_failed; }
};

CaseReport check_case(const FuzzCase& c, const CheckOptions& options);

// The comparison above, of one output: `wide` is the float64 reference, `primitive` the
// decomposed graph's and `bound` the decomposed graph's running error bound
// (tools/fuzz/error_bounds.h); any may be null.
// `tolerance_of` the dtype whose tolerance applies (default: the output's; check_case passes the
// loosest float dtype the output is computed from, since an f32 sum cast to f64 carries f32's
// rounding). Nothing when `got` passes; else the first bad element.
std::optional<Finding> compare_tensor(const HostTensor& got, const HostTensor& want, const HostTensor* wide,
                                      const std::string& what, const HostTensor* primitive = nullptr,
                                      std::optional<DType> tolerance_of = std::nullopt,
                                      const HostTensor* bound = nullptr);

// The compared form of `g` with every floating dtype widened to f64 (inputs and dtype
// attributes); nothing when some op's rule rejects the widened call.
std::optional<Graph> widened_to_f64(const Graph& g);

// Several cases as one graph (their disjoint union, values renamed per case), so that one
// compile checks many: the compiler's cost is per program, and a fuzzer's graphs are small.
FuzzCase merge_cases(const std::vector<FuzzCase>& cases);

}  // namespace kiln::fuzz
