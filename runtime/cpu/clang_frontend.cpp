// clang in this process: C++ source -> optimized LLVM IR (clang's own -O pipeline, through
// EmitLLVMOnlyAction) -> an object file in memory (LLVM's code generator). One of the two
// files that include clang's and LLVM's headers.
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticIDs.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/SourceManager.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Driver/Tool.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "ir/error.h"
#include "runtime/cpu/llvm_backend.h"

namespace kiln::runtime::cpu::llvm_backend {
namespace {

// The name the generated source has in diagnostics ("kernel.cpp:12:5: error: ...").
constexpr const char* kSourceName = "kernel.cpp";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void init_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// The driver-level flags. Floating-point contraction is off (-ffp-contract=off): with
// -march=native clang would otherwise fuse a*b+c into one FMA, rounding once where the
// reference interpreter rounds twice, so results would drift from it by an ulp here and
// there. FMA-heavy code pays for this (measured in bench/NOTES.md: no difference on the small
// kernels); an emitter that wants FMA can call __builtin_fmaf explicitly. No -ffast-math:
// it assumes no infinities, and a running max that starts at -inf is then miscompiled.
// Vectors of at most 256 bits (-mprefer-vector-width=256): on an AVX-512 machine, clang 14
// vectorized a reassociated sum over strided f16 loads (converted with F16C) into 512-bit
// code that gave wrong sums (kiln fuzz: the gradient of minimum(f16, f32) over broadcast
// dims, off by 3 of 3.5; right at -O2 without -march, at 256 bits, or without F16C).
std::vector<std::string> driver_flags(const CompileOptions& options) {
  std::vector<std::string> flags = {"-x", "c++", "-std=c++17", fmt::format("-O{}", options.opt_level),
                                    "-fno-exceptions", "-fno-rtti", "-ffp-contract=off",
                                    "-fno-color-diagnostics"};
  if (options.native_cpu) {
    flags.push_back("-march=native");
    flags.push_back("-mprefer-vector-width=256");
  }
  flags.insert(flags.end(), options.extra_args.begin(), options.extra_args.end());
  return flags;
}

// Turns driver flags into cc1 arguments once per flag set: clang's Driver, given the real
// clang++ path (it derives the builtin-header resource dir from it), expands -march=native
// into the host's CPU and feature list.
const std::vector<std::string>& cc1_args(const std::vector<std::string>& flags) {
  static std::map<std::vector<std::string>, std::vector<std::string>> memo;
  auto it = memo.find(flags);
  if (it != memo.end()) return it->second;

  std::vector<const char*> argv = {KILN_CLANG_PATH};
  for (const std::string& f : flags) argv.push_back(f.c_str());
  argv.push_back("-c");
  argv.push_back(kSourceName);

  std::string log;
  llvm::raw_string_ostream log_stream(log);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts(new clang::DiagnosticOptions);
  clang::TextDiagnosticPrinter printer(log_stream, diag_opts.get());
  clang::DiagnosticsEngine diags(new clang::DiagnosticIDs, diag_opts, &printer, /*ShouldOwnClient=*/false);
  clang::driver::Driver driver(KILN_CLANG_PATH, llvm::sys::getDefaultTargetTriple(), diags);
  driver.setCheckInputsExist(false);  // the source exists only in memory
  std::unique_ptr<clang::driver::Compilation> compilation(driver.BuildCompilation(argv));
  log_stream.flush();
  if (!compilation || diags.hasErrorOccurred()) kiln::fail("CPU JIT: clang rejects the compile flags: {}", log);
  const clang::driver::JobList& jobs = compilation->getJobs();
  if (jobs.size() != 1 || jobs.begin()->getCreator().getName() != std::string("clang"))
    kiln::fail("CPU JIT: clang's driver planned {} jobs for one source, expected one cc1 job", jobs.size());

  std::vector<std::string> args;
  for (const char* arg : jobs.begin()->getArguments()) {
    std::string_view a(arg);
    if (a == "-cc1") continue;
    if (a == "-disable-free") continue;  // or every in-process compile leaks its AST
    args.emplace_back(a);
  }
  return memo.emplace(flags, std::move(args)).first->second;
}

// Prints diagnostics as clang would (errors, warnings, with carets), keeps remarks apart as
// "line:col: message [-Rpass...]", and remembers where the first error is.
class KernelDiagnostics : public clang::DiagnosticConsumer {
 public:
  KernelDiagnostics(llvm::raw_ostream& out, clang::DiagnosticOptions* opts) : printer_(out, opts) {}

  void BeginSourceFile(const clang::LangOptions& lang, const clang::Preprocessor* pp) override {
    printer_.BeginSourceFile(lang, pp);
  }
  void EndSourceFile() override { printer_.EndSourceFile(); }

  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    unsigned line = 0, column = 0;
    if (info.getLocation().isValid() && info.hasSourceManager()) {
      clang::PresumedLoc where = info.getSourceManager().getPresumedLoc(info.getLocation());
      if (where.isValid()) line = where.getLine(), column = where.getColumn();
    }
    if (level == clang::DiagnosticsEngine::Remark) {
      llvm::SmallString<256> message;
      info.FormatDiagnostic(message);
      llvm::StringRef flag = clang::DiagnosticIDs::getWarningOptionForDiag(info.getID());
      std::string text = line > 0 ? fmt::format("{}:{}: ", line, column) : "";
      text += std::string(message.str());
      if (!flag.empty()) text += fmt::format(" [-R{}]", flag.str());
      remarks.push_back(std::move(text));
      return;
    }
    if (level >= clang::DiagnosticsEngine::Error && first_error_line == 0 && line > 0)
      first_error_line = static_cast<int>(line);
    printer_.HandleDiagnostic(level, info);
  }

  std::vector<std::string> remarks;
  int first_error_line = 0;

 private:
  clang::TextDiagnosticPrinter printer_;
};

// The source lines around `line`, numbered, the line itself marked.
std::string excerpt(const std::string& source, int line) {
  std::istringstream in(source);
  std::string text, out;
  int first = std::max(1, line - 3), last = line + 2;
  for (int n = 1; std::getline(in, text) && n <= last; ++n) {
    if (n >= first) out += fmt::format("{} {:>4} | {}\n", n == line ? '>' : ' ', n, text);
  }
  return out;
}

// The code generator for the module clang made, configured from the same invocation (target
// triple, CPU, features, FP contraction) so that the object is what `clang -c` would make.
std::unique_ptr<llvm::TargetMachine> target_machine(const clang::CompilerInvocation& invocation,
                                                    const llvm::Module& module, int opt_level) {
  const std::string& triple = module.getTargetTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) kiln::fail("CPU JIT: no LLVM target for {}: {}", triple, error);
  const clang::TargetOptions& target_opts = invocation.getTargetOpts();
  std::string features;
  for (const std::string& f : target_opts.Features) features += (features.empty() ? "" : ",") + f;
  llvm::TargetOptions options;
  switch (invocation.getLangOpts()->getDefaultFPContractMode()) {
    case clang::LangOptions::FPM_Off: options.AllowFPOpFusion = llvm::FPOpFusion::Strict; break;
    case clang::LangOptions::FPM_Fast: options.AllowFPOpFusion = llvm::FPOpFusion::Fast; break;
    default: options.AllowFPOpFusion = llvm::FPOpFusion::Standard; break;
  }
  llvm::CodeGenOpt::Level level = opt_level <= 0   ? llvm::CodeGenOpt::None
                                  : opt_level == 1 ? llvm::CodeGenOpt::Less
                                  : opt_level == 2 ? llvm::CodeGenOpt::Default
                                                   : llvm::CodeGenOpt::Aggressive;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, target_opts.CPU, features, options, llvm::Reloc::PIC_, llvm::None, level));
  if (!machine) kiln::fail("CPU JIT: LLVM cannot make a code generator for {} ({})", triple, target_opts.CPU);
  return machine;
}

}  // namespace

const std::string& toolchain_identity() {
  static const std::string identity = [] {
    llvm::StringMap<bool> host_features;
    llvm::sys::getHostCPUFeatures(host_features);
    std::vector<std::string> features;
    for (const auto& f : host_features) features.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(features.begin(), features.end());
    std::string text = fmt::format("llvm {}; clang {}; triple {}; cpu {}; features", KILN_LLVM_VERSION,
                                   KILN_CLANG_PATH, llvm::sys::getDefaultTargetTriple(),
                                   llvm::sys::getHostCPUName().str());
    for (const std::string& f : features) text += " " + f;
    return text;
  }();
  return identity;
}

std::string flags_identity(const CompileOptions& options) {
  std::string text;
  for (const std::string& f : driver_flags(options)) text += f + " ";
  return text;
}

ObjectCode compile_to_object(const std::string& source, const CompileOptions& options) {
  init_llvm_targets();
  std::vector<std::string> flags = driver_flags(options);
  if (options.vectorizer_remarks) {
    for (const char* r : {"-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize", "-Rpass-analysis=loop-vectorize"})
      flags.emplace_back(r);
  }
  const std::vector<std::string>& args = cc1_args(flags);
  ObjectCode result;
  auto start = std::chrono::steady_clock::now();

  std::string log;
  llvm::raw_string_ostream log_stream(log);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts(new clang::DiagnosticOptions);
  KernelDiagnostics consumer(log_stream, diag_opts.get());

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  {
    clang::DiagnosticsEngine arg_diags(new clang::DiagnosticIDs, diag_opts, &consumer, /*ShouldOwnClient=*/false);
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    if (!clang::CompilerInvocation::CreateFromArgs(*invocation, argv, arg_diags)) {
      log_stream.flush();
      kiln::fail("CPU JIT: clang rejects its cc1 arguments: {}", log);
    }
  }
  // The source is served from memory under kSourceName; the compiler instance frees the buffer.
  invocation->getPreprocessorOpts().addRemappedFile(
      kSourceName, llvm::MemoryBuffer::getMemBufferCopy(source, kSourceName).release());
  invocation->getPreprocessorOpts().RetainRemappedFileBuffers = false;
  invocation->getFrontendOpts().DisableFree = false;
  // With carets on, ExecuteAction prints "N errors generated." to stderr itself; the printer
  // above keeps its own options (carets on), so the message we raise still has them.
  invocation->getDiagnosticOpts().ShowCarets = false;

  clang::CompilerInstance compiler;
  compiler.setInvocation(invocation);
  compiler.createDiagnostics(&consumer, /*ShouldOwnClient=*/false);
  llvm::LLVMContext context;
  clang::EmitLLVMOnlyAction action(&context);
  bool ok = compiler.ExecuteAction(action);
  log_stream.flush();
  result.remarks = std::move(consumer.remarks);
  if (!ok || consumer.getNumErrors() > 0) {
    std::string message = fmt::format("CPU JIT: the generated kernel does not compile:\n{}", log);
    if (consumer.first_error_line > 0)
      message += fmt::format("source around {}:{}:\n{}", kSourceName, consumer.first_error_line,
                             excerpt(source, consumer.first_error_line));
    throw SourceError(message, consumer.first_error_line);
  }
  std::unique_ptr<llvm::Module> module = action.takeModule();
  KILN_INTERNAL_ASSERT(module != nullptr, "a successful EmitLLVMOnlyAction yields a module");
  result.frontend_ms = ms_since(start);

  start = std::chrono::steady_clock::now();
  std::unique_ptr<llvm::TargetMachine> machine = target_machine(*invocation, *module, options.opt_level);
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream object_stream(object);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, object_stream, nullptr, llvm::CGFT_ObjectFile))
    kiln::fail("CPU JIT: LLVM cannot emit object files for {}", module->getTargetTriple());
  passes.run(*module);
  result.object.assign(object.begin(), object.end());
  result.codegen_ms = ms_since(start);
  return result;
}

}  // namespace kiln::runtime::cpu::llvm_backend
