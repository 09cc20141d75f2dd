#pragma once
// Differential testing of the compilers: a graph is compiled under several option sets (fusion
// and the optimization passes on and off), on a device, and its joint graph too; every result is
// compared with the reference interpreter.
//
// Each output is judged as everywhere else (backend/reference_check.h): exact for integers and
// bools, NaN and infinities where the reference has them, other floats within PyTorch's
// assert_close tolerances widened by the rounding a correct kernel may make and by the graph's
// own conditioning; ill-conditioned elements are not judged.
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
// fused (the defaults), unfused (fuse off), unoptimized (canonicalize/cse/dce off; the GPU's
// fusion choices on every device, and CUDA kernels under non-default schedule knobs).
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

// Several cases as one graph (their disjoint union, values renamed per case), so that one
// compile checks many: the compiler's cost is per program, and a fuzzer's graphs are small.
FuzzCase merge_cases(const std::vector<FuzzCase>& cases);

}  // namespace kiln::fuzz
