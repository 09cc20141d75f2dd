// NVRTC compiles, their errors, the disk cache and the parallel driver.
#include "runtime/cuda/nvrtc.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

std::vector<std::string> nvrtc_args(const NvrtcOptions& options) {
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch, "-default-device", "--std=c++17"};
  if (options.lineinfo) args.push_back("-lineinfo");
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
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

NvrtcOutput compile_cuda(const std::string& source, const std::string& program_name, const NvrtcOptions& options) {
  // The key covers everything the CUBIN depends on. The driver's version is in it because the
  // driver is what loads the CUBIN (a new driver may want it rebuilt); "nodriver" where none.
  std::string format = fmt::format("kiln cuda kernel cache v{}", kKernelCacheFormatVersion);
  std::string args;
  for (const std::string& a : nvrtc_args(options)) args += a + '\n';
  std::string nvrtc = nvrtc_version();
  std::string driver = driver_version_string();
  std::string key = content_key({format, source, options.arch, args, nvrtc, driver});

  std::optional<KernelCache> disk;
  if (options.use_cache) {
    if (auto dir = KernelCache::default_dir()) disk.emplace(*dir);
  }
  if (disk) {
    // The same fault handling as the CPU's objects (runtime/kernel_cache.h): a CUBIN loads only
    // with its .cu and .ptx present and intact, and is checked before the driver ever sees it.
    std::map<std::string, std::string> texts;
    std::optional<std::string> cubin = disk->load(key, "cubin", &texts);
    // Intact bytes that are no ELF image would only fail later, in cuModuleLoadData on a GPU:
    // as corrupt as torn ones (the CPU's loader refuses a non-object the same way).
    if (cubin && cubin->compare(0, 4, "\x7f" "ELF") != 0) {
      if (log_enabled("cache")) log_line("cache", fmt::format("entry {} holds no ELF image: recompiling", key));
      cubin.reset();
    }
    if (cubin) {
      NvrtcOutput out;
      out.cubin = std::move(*cubin);
      if (auto ptx = texts.find("ptx"); ptx != texts.end()) out.ptx = std::move(ptx->second);
      out.cache_hit = true;
      out.key = key;
      return out;
    }
  }
  NvrtcOutput out = run_nvrtc(source, program_name, options);
  out.key = key;
  if (disk) {
    std::vector<CacheFile> files = {{"cu", source, true}, {"cubin", out.cubin}};
    if (!out.ptx.empty()) files.push_back({"ptx", out.ptx, true});
    disk->store(key, files);
  }
  if (log_enabled("cache"))
    log_line("cache", fmt::format("nvrtc {} compiled {} ({}) for {}: {:.1f} ms, {} bytes of CUBIN", nvrtc,
                                  program_name, key, options.arch, out.compile_ms, out.cubin.size()));
  return out;
}

std::vector<NvrtcOutput> compile_cuda_parallel(const std::vector<std::pair<std::string, std::string>>& name_and_source,
                                               const NvrtcOptions& options) {
  size_t n = name_and_source.size();
  std::vector<NvrtcOutput> outputs(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        outputs[i] = compile_cuda(name_and_source[i].second, name_and_source[i].first, options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();  // this thread works too
  for (std::thread& t : pool) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return outputs;
}

}  // namespace kiln::runtime::cuda
