#pragma once
// What kiln's two benchmarks (cpu_bench.cpp, cuda_bench.cpp) share: the workload list of the
// side-by-side comparison with PyTorch (issue 9's rows), the row they report per workload, the
// check of compiled outputs against the reference interpreter, the JSON that bench/compare.py
// reads, and the table printed last.
#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/compile.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::bench {

// Compiles a graph for the benchmark's device and runs it on host inputs: host outputs.
using RunCompiled = std::function<std::vector<HostTensor>(const Graph&, const std::vector<HostTensor>&)>;

// The .npy exchange with PyTorch (bench/compare_torch.py): a workload's inputs and the outputs
// kiln computed from them, each named by its role so that bench/torch_bench.py --check-npy can
// compute the same thing in PyTorch eager (roles: input, output; the train steps' param,
// exp_avg, exp_avg_sq, batch, step, loss; const for lifted constants PyTorch rebuilds itself).
struct NpyTensor {
  std::string name, role, path;  // path: the module path of a parameter or its optimizer state
  HostTensor value;
};
struct NpyExchange {
  nlohmann::json config = nlohmann::json::object();  // what PyTorch needs beyond the shapes (heads)
  std::vector<NpyTensor> inputs, outputs;
};

// A workload at one size: its graph and, made only when it will run, its inputs.
struct Case {
  Graph graph;
  std::function<std::vector<HostTensor>()> inputs;
  // The inputs a timed GPU run rotates between calls where they fit in L2 (the data, not the
  // parameters a training step reads back every step); empty: all of them.
  std::vector<size_t> rotated;
  // Runs the case on `inputs()` through `run` and names what PyTorch gets.
  std::function<NpyExchange(const RunCompiled& run)> exchange;
};

struct Workload {
  Workload(std::string id_, std::string name_, bool bandwidth_, double slack_, std::function<Case(bool small)> build_,
           std::string no_interpreter_check_ = "")
      : id(std::move(id_)),
        name(std::move(name_)),
        bandwidth(bandwidth_),
        slack(slack_),
        build(std::move(build_)),
        no_interpreter_check(std::move(no_interpreter_check_)) {}
  std::string id, name;   // id: as bench/torch_bench.py names it; name: with the shapes
  bool bandwidth = true;  // false: matmul-bound, no GB/s
  double slack = 10;      // the check's tolerance: slack * (atol + rtol*|ref|) of the dtype
  std::function<Case(bool small)> build;  // small: a smaller shape of it, for the interpreter check
  // Why the interpreter does not check this workload ("" : it does): a model whose graph is too
  // large for the interpreter's error bounds (minutes even at a small shape); PyTorch's .npy
  // check (bench/npy_check.py) judges it.
  std::string no_interpreter_check;
};

// The comparison's workloads with their first dimension divided by `divisor` (the GPU: 1, the
// CPU: 8; the GPT-2 block's batch: 8 / divisor):
//   pointwise gelu(x*w+b)*sigmoid(x) [16384,4096], softmax [65536,1024], layer_norm fwd and
//   bwd [16384,4096], cross_entropy fwd+bwd [4096,32000], MLP 64-256-600 train step with AdamW
//   at batch 65536, GPT-2 block inference at batch 8, seq 1024, the same block's training step
//   (mean(block(x)^2), AdamW), MiniGPT's training step at batch 64.
std::vector<Workload> comparison_workloads(int64_t divisor);

// One workload's figures.
struct Row {
  std::string id, name;
  bool bandwidth = true;
  int kernels = 0, blas = 0;
  int64_t traffic = 0;  // bytes: every input read once, every output written once
  std::optional<double> run_ms, gbps, copy_frac;
  std::optional<double> sync_ms;  // the GPU: host clock around a synchronizing call (run_ms: events)
  int64_t matmul_flops = 0;     // 2*m*n*k per GEMM of the schedule, summed
  std::optional<double> tflops;  // matmul_flops / run time (the matmul-bound rows)
  double cold_ms = 0, warm_ms = 0;
  std::string compiler;  // the report's device-compiler line of the cold compile
  std::optional<double> max_abs, max_rel;
  std::string check = "skipped";  // pass, FAIL, skipped, error
  std::string error;
  int rotated_copies = 1;  // input sets a timed GPU run cycles through (rotation_count)
};

// A row for `w`: its full case built and its traffic counted, then `body` (compile, time,
// check); an exception becomes the row's error (check "error"), printed.
Row measure_row(const Workload& w, const std::function<void(Row&, const Case&)>& body);
// A CPU backend run, for check_row.
std::vector<HostTensor> run_on_cpu_backend(const Graph& g, const std::vector<HostTensor>& inputs);

// Compiles `g` twice for options.device and fills the row's compile figures: cold (`cache_dir`,
// the process's kernel cache, emptied first, and the in-memory cache cleared: the device compiler
// runs for every kernel; options.dump_dir applies to it) and warm (in-memory cache cleared again:
// everything from the disk cache). Returns the warm compile. Prints one line.
backend::CompiledGraph compile_cold_warm(Row& r, const Graph& g, backend::CompileOptions options,
                                         const std::string& cache_dir);
// Fills GB/s, the fraction of `copy_gbps` and TFLOP/s from the row's run time. Prints one line.
void set_run_figures(Row& r, double run_ms, double copy_gbps);
// The check: the workload's small case compiled and run by `run_compiled`, against the
// interpreter, within the workload's slack. Fills the row's errors and verdict; prints one line
// naming `where` it ran.
void check_row(Row& r, const Workload& w, const std::string& where, const RunCompiled& run_compiled);

// Writes the full case's exchange to `dir` (replaced): manifest.json (config; inputs and outputs
// with name, role, path, file, dtype, shape) and one .npy per tensor. Prints one line.
void write_exchange(const std::string& dir, const Case& full, const RunCompiled& run);

// How many copies of the rotated inputs a timed GPU run cycles through: enough to cover twice
// an L2 of `l2_bytes` where the rotated bytes would fit in it, 1 where they would not (or where
// the copies would exceed 64: a working set that small stays in L2 whatever is rotated).
int rotation_count(int64_t rotated_bytes, int64_t l2_bytes);

// The options both benchmarks take: --quick, --json FILE, --only ID,ID, --no-block, --npy DIR.
struct CommonOptions {
  bool quick = false, no_block = false;
  bool check = true;  // --no-check: no comparison with the reference interpreter (timings only)
  std::string json, npy;
  std::vector<std::string> only;
};
// Consumes argv[i] (and the value after it) when it is one of them.
bool parse_common_option(CommonOptions& o, int& i, int argc, char** argv);
// Whether --only and --no-block keep this workload.
bool selected(const CommonOptions& o, const Workload& w);

// Writes `header` (an object: "tool", the machine, the baseline) with "rows": one object per row
// with the keys bench/compare.py reads (id, name, kiln_ms, gbps, copy_pct, kernels, blas_calls,
// cold_compile_ms, warm_compile_ms, max_rel_err, check, error, ...).
void write_json(const std::string& path, nlohmann::json header, const std::vector<Row>& rows);


// The table printed last: workload, kiln ms, GB/s, % of copy, TFLOP/s (matmul-bound rows),
// kernels+BLAS, cold and warm compile ms, max rel err and check.
void print_table(const std::vector<Row>& rows);

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0);
double median(std::vector<double> t);
std::vector<std::string> split_commas(const std::string& s);

}  // namespace kiln::bench
