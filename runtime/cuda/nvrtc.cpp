// NVRTC compiles, their errors, the disk cache and the parallel driver.
#include "runtime/cuda/nvrtc.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "ir/error.h"
#include "ir/log.h"
#include "runtime/cuda/driver.h"
#include "runtime/kernel_cache.h"

namespace kiln::runtime::cuda {
namespace {

void check_nvrtc(nvrtcResult r, const std::string& what) {
  if (r != NVRTC_SUCCESS) kiln::fail("{}: {}", what, nvrtcGetErrorString(r));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "<name>.cu(12): error: ..." lines of the log, each followed by source line 12 quoted.
std::string quote_error_lines(const std::string& log, const std::string& source) {
  static const std::regex error_line(R"(^.*\((\d+)\): (catastrophic )?error)");
  std::vector<std::string> src = split_lines(source);
  std::set<int> quoted;
  std::string out;
  for (const std::string& line : split_lines(log)) {
    std::smatch m;
    if (!std::regex_search(line, m, error_line)) continue;
    int n = std::stoi(m[1].str());
    if (quoted.size() >= 10 || !quoted.insert(n).second) continue;
    out += fmt::format("\n  {}\n", line);
    if (n >= 1 && n <= static_cast<int>(src.size())) out += fmt::format("  {:>5} | {}", n, src[n - 1]);
  }
  return out.empty() ? out : "\nthe offending line" + std::string(quoted.size() > 1 ? "s:" : ":") + out;
}

std::string program_log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  log.resize(size - 1);  // the terminating NUL
  while (!log.empty() && (log.back() == '\n' || log.back() == '\0')) log.pop_back();
  return log;
}

// NVRTC's version as major * 100 + minor (1108, 1300).
int nvrtc_version_number() {
  static const int v = [] {
    int major = 0, minor = 0;
    check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return major * 100 + minor;
  }();
  return v;
}

std::vector<std::string> nvrtc_args(const NvrtcOptions& options) {
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch, "-default-device", "--std=c++17"};
  if (options.lineinfo) args.push_back("-lineinfo");
  if (options.minimal && nvrtc_version_number() >= 1204) args.push_back("-minimal");
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  return args;
}

// One NVRTC compile, no cache.
NvrtcOutput run_nvrtc(const std::string& source, const std::string& program_name, const NvrtcOptions& options) {
  auto start = std::chrono::steady_clock::now();
  std::string file_name = program_name + ".cu";
  nvrtcProgram program = nullptr;
  check_nvrtc(nvrtcCreateProgram(&program, source.c_str(), file_name.c_str(), 0, nullptr, nullptr),
              fmt::format("nvrtcCreateProgram({})", program_name));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&program};

  std::vector<std::string> args = nvrtc_args(options);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  nvrtcResult r = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  NvrtcOutput out;
  out.log = program_log(program);
  if (r != NVRTC_SUCCESS) {
    throw NvrtcError(fmt::format("NVRTC could not compile CUDA program '{}' for {} ({}):\n{}{}", program_name, options.arch,
                                 nvrtcGetErrorString(r), out.log.empty() ? "(no log)" : out.log,
                                 quote_error_lines(out.log, source)),
                     program_name);
  }
  size_t size = 0;
  check_nvrtc(nvrtcGetCUBINSize(program, &size), fmt::format("nvrtcGetCUBINSize({})", program_name));
  if (size == 0)
    kiln::fail("NVRTC gave no CUBIN for '{}': --gpu-architecture={} must be a real architecture (sm_XX)", program_name,
               options.arch);
  out.cubin.resize(size);
  check_nvrtc(nvrtcGetCUBIN(program, out.cubin.data()), fmt::format("nvrtcGetCUBIN({})", program_name));
  if (nvrtcGetPTXSize(program, &size) == NVRTC_SUCCESS && size > 1) {
    out.ptx.resize(size);
    if (nvrtcGetPTX(program, out.ptx.data()) == NVRTC_SUCCESS) out.ptx.resize(size - 1);  // drop the NUL
    else out.ptx.clear();
  }
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace

std::string nvrtc_version() {
  int v = nvrtc_version_number();
  return fmt::format("{}.{}", v / 100, v % 100);
}

namespace {

// The key covers everything the CUBIN depends on. The driver's version is in it because the
// driver is what loads the CUBIN (a new driver may want it rebuilt); "nodriver" where none.
std::string cache_key(const std::string& source, const NvrtcOptions& options) {
  std::string format = fmt::format("kiln cuda kernel cache v{}", kKernelCacheFormatVersion);
  std::string args;
  for (const std::string& a : nvrtc_args(options)) args += a + '\n';
  return content_key({format, source, options.arch, args, nvrtc_version(), driver_version_string()});
}

std::optional<KernelCache> open_cache(const NvrtcOptions& options) {
  std::optional<KernelCache> disk;
  if (options.use_cache) {
    if (auto dir = KernelCache::default_dir()) disk.emplace(*dir);
  }
  return disk;
}

// The program stored under `key`, or nullopt. The same fault handling as the CPU's objects
// (runtime/kernel_cache.h): a CUBIN loads only with its .cu and .ptx present and intact, and is
// checked before the driver ever sees it.
std::optional<NvrtcOutput> load_program(const KernelCache& disk, const std::string& key) {
  std::map<std::string, std::string> texts;
  std::optional<std::string> cubin = disk.load(key, "cubin", &texts);
  if (!cubin) return std::nullopt;
  // Intact bytes that are no ELF image would only fail later, in cuModuleLoadData on a GPU:
  // as corrupt as torn ones (the CPU's loader refuses a non-object the same way).
  if (cubin->compare(0, 4, "\x7f" "ELF") != 0) {
    if (log_enabled("cache")) log_line("cache", fmt::format("entry {} holds no ELF image: recompiling", key));
    return std::nullopt;
  }
  NvrtcOutput out;
  out.cubin = std::move(*cubin);
  if (auto ptx = texts.find("ptx"); ptx != texts.end()) out.ptx = std::move(ptx->second);
  out.cache_hit = true;
  out.key = key;
  return out;
}

void store_program(const KernelCache& disk, const std::string& source, const NvrtcOutput& out) {
  std::vector<CacheFile> files = {{"cu", source, true}, {"cubin", out.cubin}};
  if (!out.ptx.empty()) files.push_back({"ptx", out.ptx, true});
  disk.store(out.key, files);
}

void log_compile(const std::string& program_name, const NvrtcOptions& options, const NvrtcOutput& out) {
  if (log_enabled("cache"))
    log_line("cache", fmt::format("nvrtc {} compiled {} ({}{}) for {}: {:.1f} ms, {} bytes of CUBIN", nvrtc_version(),
                                  program_name, out.key, out.kernels > 1 ? fmt::format(", {} kernels", out.kernels) : "",
                                  options.arch, out.compile_ms, out.cubin.size()));
}

// Runs work(i) for i in [0, n) on at most `threads` threads (this one included); the first
// exception, in index order, is raised after all have finished.
template <class Work>
void run_parallel(size_t n, int threads, Work work) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto loop = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        work(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  size_t count = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < count; ++t) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

int compile_threads() {
  if (const char* env = std::getenv("KILN_COMPILE_THREADS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096) kiln::fail("KILN_COMPILE_THREADS={}: expected a number of threads from 1 to 4096", env);
    return static_cast<int>(n);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

NvrtcOutput compile_cuda(const std::string& source, const std::string& program_name, const NvrtcOptions& options) {
  std::string key = cache_key(source, options);
  std::optional<KernelCache> disk = open_cache(options);
  if (disk) {
    if (std::optional<NvrtcOutput> hit = load_program(*disk, key)) return std::move(*hit);
  }
  NvrtcOutput out = run_nvrtc(source, program_name, options);
  out.key = key;
  if (disk) store_program(*disk, source, out);
  log_compile(program_name, options, out);
  return out;
}

CompiledKernels compile_cuda_kernels(const std::string& prelude, const std::vector<CudaKernelSource>& kernels,
                                     const NvrtcOptions& options) {
  const size_t n = kernels.size();
  CompiledKernels result;
  result.program_of.assign(n, -1);
  std::optional<KernelCache> disk = open_cache(options);
  auto alone = [&](size_t i) { return prelude + "\n" + kernels[i].code; };

  // Hits: a kernel's own entry, or the entry of the program its entry names. Kernels found in
  // one program share it.
  std::vector<std::string> keys(n);
  std::map<std::string, int> program_index;  // program key -> result.programs index
  std::vector<size_t> misses;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = cache_key(alone(i), options);
    std::optional<NvrtcOutput> hit;
    std::string program_key = keys[i];
    if (disk) {
      hit = load_program(*disk, program_key);
      if (!hit) {
        if (std::optional<std::string> named = disk->load(keys[i], "program"); named && named->size() == keys[i].size()) {
          program_key = *named;
          if (auto found = program_index.find(program_key); found != program_index.end()) {
            result.program_of[i] = found->second;
            continue;
          }
          hit = load_program(*disk, program_key);
        }
      }
    }
    if (!hit) {
      misses.push_back(i);
      continue;
    }
    auto [at, fresh] = program_index.emplace(program_key, static_cast<int>(result.programs.size()));
    if (fresh) result.programs.push_back(std::move(*hit));
    result.program_of[i] = at->second;
  }
  if (misses.empty()) return result;

  // The misses, dealt into programs: the longest kernel first, each to the program with the
  // least code so far; in each program the kernels keep their order. As many programs as
  // threads where NVRTC compiles programs in parallel: 11.8 does (2 threads, 2 cores: 18 one-
  // kernel programs/s against 9), 13.0 barely (16 threads, 16 cores: 42/s against 36), while a
  // kernel more in a program costs it ~1.4 ms (one kernel 28 ms, sixteen 48 ms). So one program.
  const size_t parallel = nvrtc_version_number() < 1300 ? static_cast<size_t>(compile_threads()) : 1;
  const size_t count = std::min(misses.size(), parallel);
  std::vector<std::vector<size_t>> groups(count);
  std::vector<size_t> load(count, 0);
  std::vector<size_t> by_size = misses;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return kernels[a].code.size() > kernels[b].code.size(); });
  for (size_t i : by_size) {
    size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    groups[g].push_back(i);
    load[g] += kernels[i].code.size();
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());

  // A program NVRTC rejects is compiled again kernel by kernel, and the error raised is that
  // of the first kernel (in the order given) that fails, however the kernels were dealt.
  std::vector<NvrtcOutput> compiled(count);
  std::vector<std::exception_ptr> kernel_errors(n);
  run_parallel(count, static_cast<int>(count), [&](size_t g) {
    const std::vector<size_t>& members = groups[g];
    std::string source = prelude;
    for (size_t i : members) source += "\n" + kernels[i].code;
    std::string name = kernels[members.front()].name;
    if (members.size() > 1) name += fmt::format("_and_{}_more", members.size() - 1);
    NvrtcOutput out;
    try {
      out = run_nvrtc(source, name, options);
    } catch (const NvrtcError&) {
      if (members.size() == 1) {
        kernel_errors[members.front()] = std::current_exception();
        return;
      }
      bool named = false;
      for (size_t i : members) {
        try {
          run_nvrtc(alone(i), kernels[i].name, options);
        } catch (const NvrtcError&) {
          kernel_errors[i] = std::current_exception();
          named = true;
        }
      }
      if (!named) throw;  // each compiles alone, not together: the program's own error
      return;
    }
    out.kernels = static_cast<int>(members.size());
    out.key = members.size() == 1 ? keys[members.front()] : cache_key(source, options);
    if (disk) {
      store_program(*disk, source, out);
      if (members.size() > 1)
        for (size_t i : members) disk->store(keys[i], {{"program", out.key}});
    }
    log_compile(name, options, out);
    compiled[g] = std::move(out);
  });
  for (std::exception_ptr& e : kernel_errors)
    if (e) std::rethrow_exception(e);
  for (size_t g = 0; g < count; ++g) {
    for (size_t i : groups[g]) result.program_of[i] = static_cast<int>(result.programs.size());
    result.programs.push_back(std::move(compiled[g]));
  }
  return result;
}

std::vector<NvrtcOutput> compile_cuda_parallel(const std::vector<std::pair<std::string, std::string>>& name_and_source,
                                               const NvrtcOptions& options) {
  std::vector<NvrtcOutput> outputs(name_and_source.size());
  run_parallel(outputs.size(), compile_threads(), [&](size_t i) {
    outputs[i] = compile_cuda(name_and_source[i].second, name_and_source[i].first, options);
  });
  return outputs;
}

}  // namespace kiln::runtime::cuda
