// kiln's CUDA benchmark: the workloads of the side-by-side comparison with PyTorch
// (bench/torch_bench.py, bench/compare_cuda.sh), each compiled by the CUDA backend
// (decompose -> fuse -> CUDA C -> NVRTC, matmuls through cuBLASLt) and timed, with
//   - kernels and cuBLASLt calls per workload (the fusion result),
//   - GB/s from the minimum memory traffic (every input read once, every output written once)
//     and that as a fraction of a 1 GiB device-to-device copy measured in the same run
//     (read + write),
//   - cold compile time (empty kernel cache: NVRTC runs) and warm compile time (the CUBINs come
//     from the disk cache),
//   - one check per workload against the reference interpreter, on a smaller shape of the same
//     workload (the interpreter is slow): max abs error and max error relative to max|ref|.
// Inputs are copied to the device once; each timed call is backend::run_on_device on device
// tensors, median of the calls after two warm-up calls, timed two ways: CUDA events (the
// device time from the first step to the end of the last, the row's time, from which GB/s
// and TFLOP/s follow) and the host clock around the call (it synchronizes at its end and
// allocates its outputs from the caching allocator: "sync", the time a caller waits). Where a workload's data
// inputs fit in L2 (the MLP's and the GPT-2 block's batch), the calls cycle through copies of
// them covering twice the L2, so that no call finds its inputs left in L2 by the one before. "run floor" is the
// same for a one-element graph: the per-call overhead (launch, synchronize, error-record check)
// that every row includes.
//
// With no GPU, every workload is still compiled (NVRTC, sm_90) and the compile times printed;
// nothing runs. Prints a table last.
//
// Usage: kiln_bench_cuda [--quick] [--json FILE] [--npy DIR] [--dump DIR] [--profile DIR] [--only ID,ID] [--no-block] [--no-check] [--cpu-check]
//   --quick      fewer repetitions (and no warm-up of the copy measurement beyond one call)
//   --json FILE  the rows as JSON (bench/compare_torch.py reads it)
//   --npy DIR    per workload, DIR/ID: its full-size inputs and kiln's outputs as .npy with a
//                manifest, for bench/torch_bench.py --check-npy (bench/compare_torch.py)
//   --only       run only these workload ids (pointwise, softmax, layer_norm_fwd,
//                layer_norm_bwd, cross_entropy, pointwise_transposed, softmax_bf16,
//                layer_norm_fwd_bf16, softmax_vocab, mlp_train_step, gpt2_block,
//                gpt2_block_train_step, gpt2_block_train_step_bf16, minigpt_train_step, resnet50,
//                resnet50_train_step, vit_b16, vit_b16_train_step, gpt2_small_train_step,
//                llama_1b_train_step_bf16)
//   --dump DIR   every stage of each row's compilation in DIR/ID
//   --profile DIR  each row's steps timed on its device inputs: DIR/ID.txt (the profiler's table,
//                the totals by kind first) and DIR/ID.trace.json (Chrome trace)
//   --no-block   skip the GPT-2 block rows
//   --no-check   no comparison with the reference interpreter (timings only: before/after runs)
//   --cpu-check  with no GPU: run each small-shape check on the CPU backend instead (checks the
//                workloads and the comparison here; needs the LLVM CPU path)
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "backend/cuda_backend.h"
#include "backend/profile.h"
#include "bench/harness.h"
#include "bench/workloads.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "runtime/cpu/jit.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"

namespace {

using namespace kiln;
namespace cu = runtime::cuda;
using bench::Case;
using bench::Clock;
using bench::median;
using bench::ms_since;
using bench::Row;
using bench::Workload;

std::vector<cu::DeviceTensor> to_device(const std::vector<HostTensor>& host) {
  std::vector<cu::DeviceTensor> d;
  for (const HostTensor& h : host) d.push_back(cu::DeviceTensor::from_host(h, 0));
  return d;
}

backend::CompileOptions cuda_options() {
  backend::CompileOptions o;
  o.device = Device::cuda(0);
  o.run.allow_tf32 = false;
  return o;
}

// Device-to-device copy GB/s, counting bytes read plus bytes written, 1 GiB, CUDA events.
double copy_gbps(int reps) {
  const size_t bytes = size_t{1} << 30;
  cu::DeviceBuffer a = cu::device_alloc(bytes), b = cu::device_alloc(bytes);
  cu::Stream stream(0);
  cu::memset_async(a->data(), 1, bytes, stream);
  cu::Event start(0), end(0);
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    start.record(stream);
    cu::copy_device_to_device_async(b->data(), a->data(), bytes, stream);
    end.record(stream);
    double ms = cu::elapsed_ms(start, end);
    if (i > 0) t.push_back(ms);  // the first is a warm-up
  }
  stream.synchronize();
  return 2.0 * static_cast<double>(bytes) / (median(t) * 1e6);
}

struct RunTimes {
  double events_ms = 0;  // device time: CUDA events from the first step's launch to the last's end
  double sync_ms = 0;    // host clock around run_on_device, which synchronizes at its end
};

// Medians over `reps` calls after two warm-up calls, cycling through the input sets: the host
// clock in one series, then the device time in another, taken by the profiler's events between
// the steps (backend/profile.h) so that the first series runs without them.
RunTimes time_run(const backend::Executable& exe, const std::vector<std::vector<cu::DeviceTensor>>& sets, int reps) {
  auto set = [&](int i) -> const std::vector<cu::DeviceTensor>& { return sets[static_cast<size_t>(i) % sets.size()]; };
  for (int i = 0; i < 2; ++i) backend::run_on_device(exe, set(i));
  std::vector<double> host, device;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    std::vector<cu::DeviceTensor> out = backend::run_on_device(exe, set(i + 2));
    host.push_back(ms_since(t0));
  }
  backend::StepRecorder rec;
  for (int i = 0; i < reps; ++i) {
    std::vector<cu::DeviceTensor> out = backend::run_on_device(exe, set(i));
    if (!rec.steps.empty()) device.push_back(rec.steps.back().start_ms + rec.steps.back().ms);
  }
  return {device.empty() ? median(host) : median(device), median(host)};
}

// The inputs on the device, and where the rotated ones (all, if the case names none) fit in L2,
// more copies of them (bench::rotation_count) so that each call reads its data from memory.
std::vector<std::vector<cu::DeviceTensor>> input_sets(const Case& c, Row& r) {
  std::vector<HostTensor> host = c.inputs();
  std::vector<size_t> rotated = c.rotated;
  if (rotated.empty())
    for (size_t i = 0; i < host.size(); ++i) rotated.push_back(i);
  int64_t bytes = 0;
  for (size_t i : rotated) bytes += host[i].meta().nbytes();
  r.rotated_copies = bench::rotation_count(bytes, cu::device_info(0).l2_bytes);
  std::vector<std::vector<cu::DeviceTensor>> sets{to_device(host)};
  for (int k = 1; k < r.rotated_copies; ++k) {
    std::vector<cu::DeviceTensor> set = sets[0];
    for (size_t i : rotated) set[i] = cu::DeviceTensor::from_host(host[i], 0);
    sets.push_back(std::move(set));
  }
  if (r.rotated_copies > 1)
    fmt::print("{}: {:.1f} MB of inputs rotated over {} copies (L2 {:.0f} MB)\n", r.id, bytes / 1e6, r.rotated_copies,
               cu::device_info(0).l2_bytes / 1e6);
  return sets;
}

struct Options : bench::CommonOptions {
  bool cpu_check = false;
  std::string dump;
  std::string profile;  // a folder: each row's profile table and Chrome trace
};

// Where a row's device time goes, step by step, on the inputs it was timed on: DIR/ID.txt
// (backend/profile.h's table) and DIR/ID.trace.json; the totals by kind printed.
void write_row_profile(const Workload& w, const backend::Executable& exe, const std::vector<cu::DeviceTensor>& inputs,
                       const std::string& dir, int reps) {
  backend::Profile p = backend::profile_runs(exe, [&] { backend::run_on_device(exe, inputs); }, reps);
  std::filesystem::create_directories(dir);
  for (auto [suffix, text] : {std::pair{".txt", p.table()}, std::pair{".trace.json", p.chrome_trace()}}) {
    std::ofstream f(dir + "/" + w.id + suffix);
    if (!(f << text)) fail("cannot write {}/{}{}", dir, w.id, suffix);
  }
  fmt::print("{}: profile {:.3f} ms in {} steps, {}; the table in {}/{}.txt\n", w.id, p.steps_ms(), p.steps.size(),
             p.totals_by_kind(), dir, w.id);
}

Row measure(const Workload& w, const Options& opt, const std::string& cache, bool device, double copy, int reps) {
  return bench::measure_row(w, [&](Row& r, const Case& full) {
    backend::CompileOptions co = cuda_options();
    if (!opt.dump.empty()) co.dump_dir = opt.dump + "/" + w.id;
    backend::CompiledGraph warm = bench::compile_cold_warm(r, full.graph, co, cache);
    co.dump_dir.clear();
    if (device) {
      std::vector<std::vector<cu::DeviceTensor>> sets = input_sets(full, r);
      RunTimes t = time_run(warm.executable, sets, reps);
      r.sync_ms = t.sync_ms;
      bench::set_run_figures(r, t.events_ms, copy);
      if (!opt.profile.empty()) write_row_profile(w, warm.executable, sets[0], opt.profile, reps);
      sets.clear();
      cu::empty_cache();
      auto run_cuda = [&](const Graph& g, const std::vector<HostTensor>& ins) {
        std::vector<HostTensor> got;
        for (const cu::DeviceTensor& t : backend::run_on_device(backend::compile(g, co).executable, to_device(ins)))
          got.push_back(t.to_host());
        return got;
      };
      if (opt.check) bench::check_row(r, w, "cuda", run_cuda);
      if (!opt.npy.empty()) bench::write_exchange(opt.npy + "/" + w.id, full, run_cuda);
      cu::empty_cache();
    } else if (opt.cpu_check && opt.check) {
      bench::check_row(r, w, "the CPU backend", bench::run_on_cpu_backend);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (bench::parse_common_option(opt, i, argc, argv)) continue;
    if (a == "--cpu-check") opt.cpu_check = true;
    else if (a == "--dump" && i + 1 < argc) opt.dump = argv[++i];
    else if (a == "--profile" && i + 1 < argc) opt.profile = argv[++i];
    else {
      fmt::print(stderr, "usage: kiln_bench_cuda [--quick] [--json FILE] [--npy DIR] [--dump DIR] [--profile DIR] [--only ID,ID] [--no-block] [--no-check] [--cpu-check]\n");
      return 2;
    }
  }
  const int reps = opt.quick ? 5 : 30;
  // An empty kernel cache of our own, so that the first compile of each graph runs NVRTC.
  std::string cache = (std::filesystem::temp_directory_path() / fmt::format("kiln-cuda-bench-cache-{}", ::getpid())).string();
  std::filesystem::remove_all(cache);
  std::filesystem::create_directories(cache);
  setenv("KILN_CACHE_DIR", cache.c_str(), 1);

  std::string why;
  const bool device = backend::cuda_device_present(&why);
  if (!device && why.rfind("no CUDA device: ", 0) == 0) why = why.substr(16);
  if (opt.cpu_check && !runtime::cpu::jit_available()) {
    fmt::print("--cpu-check: kiln was built without the LLVM CPU path; no checks\n");
    opt.cpu_check = false;
  }
  if (device) opt.cpu_check = false;
  std::string device_name;
  std::optional<double> copy, floor_ms;
  std::vector<Row> rows;
  int status = 0;
  try {
    if (device) {
      const cu::DeviceInfo& info = cu::device_info(0);
      device_name = info.name;
      copy = copy_gbps(opt.quick ? 5 : 20);
      fmt::print("device: {} ({}, {} SMs, {:.1f} GiB), driver {}; device-to-device copy {:.0f} GB/s (read + write, 1 GiB)\n",
                 info.name, cu::arch_name(info), info.num_sms, info.total_memory / double(1 << 30), cu::driver_version_string(), *copy);
    } else {
      fmt::print("no CUDA device: {}\ncompiling every workload for sm_90 (NVRTC) only: compile times, no runs\n", why);
    }
    // The per-call floor (and the first NVRTC compile of the process, kept out of the rows).
    {
      Graph tiny = parse_graph("graph tiny(%x: f32[1]) {\n  %y = add(%x, %x) : f32[1]\n  return (%y)\n}");
      auto t0 = Clock::now();
      backend::CompiledGraph c = backend::compile(tiny, cuda_options());
      fmt::print("first compile of the process (1-element graph, NVRTC start): {:.1f} ms\n", ms_since(t0));
      if (device) {
        std::vector<std::vector<cu::DeviceTensor>> ins{to_device({random_tensor(tiny.inputs()[0]->meta(), 1)})};
        floor_ms = time_run(c.executable, ins, std::max(reps, 20)).sync_ms;
        fmt::print("run floor (run_on_device of a 1-element graph, host clock): {:.4f} ms\n", *floor_ms);
      }
    }
    std::fflush(stdout);
    for (const Workload& w : bench::comparison_workloads(1)) {
      if (!bench::selected(opt, w)) continue;
      rows.push_back(measure(w, opt, cache, device, copy.value_or(0), reps));
      if (rows.back().check == "error" || rows.back().check == "FAIL") status = 1;
    }
    if (!opt.json.empty()) {
      auto num = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
      bench::write_json(opt.json,
                        {{"tool", "kiln_bench_cuda"},
                         {"device", device_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(device_name)},
                         {"no_device", device ? nlohmann::json(nullptr) : nlohmann::json(why)},
                         {"copy_gbps", num(copy)},
                         {"run_floor_ms", num(floor_ms)},
                         {"quick", opt.quick}},
                        rows);
    }
  } catch (const std::exception& e) {
    std::filesystem::remove_all(cache);
    fmt::print(stderr, "kiln_bench_cuda: {}\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(cache);

  fmt::print("\n");
  if (device)
    fmt::print("machine: {}; device-to-device copy {:.0f} GB/s (read + write); run floor {:.4f} ms; {} timed runs, median\n",
               device_name, *copy, *floor_ms, reps);
  else
    fmt::print("machine: no CUDA device ({}); compile only\n", why);
  bench::print_table(rows);
  return device ? status : 0;
}
