// ORC LLJIT: object file -> callable code in this process. One of the two files that include
// LLVM's headers.
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectFileInterface.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "ir/error.h"
#include "ir/log.h"
#include "runtime/cpu/kernel_abi.h"
#include "runtime/cpu/llvm_backend.h"

namespace kiln::runtime::cpu::llvm_backend {
namespace {

std::string message_of(llvm::Error error) { return llvm::toString(std::move(error)); }

// The process-wide LLJIT and the JITDylib every kernel module links against: the kernel ABI
// as absolute symbols (so nothing depends on what the executable exports) and a generator
// that finds libm (expf, ...) and libc (memset, memcpy, which -O3 emits) in the process.
// Created once and never destroyed: modules may be released during static destruction.
struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  llvm::orc::JITDylib* runtime = nullptr;
  std::atomic<uint64_t> next_module{0};

  llvm::orc::ExecutionSession& session() { return lljit->getExecutionSession(); }
};

Jit& jit() {
  static Jit* instance = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto built = llvm::orc::LLJITBuilder().create();
    if (!built) kiln::fail("CPU JIT: cannot start LLVM's ORC JIT: {}", message_of(built.takeError()));
    auto* j = new Jit;
    j->lljit = std::move(*built);
    llvm::orc::JITDylib& runtime = j->session().createBareJITDylib("kiln_runtime");
    llvm::JITSymbolFlags flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
    llvm::orc::SymbolMap abi;
    abi[j->lljit->mangleAndIntern("kiln_parallel_for")] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&kiln_parallel_for), flags);
    abi[j->lljit->mangleAndIntern("kiln_report_index_error")] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&kiln_report_index_error), flags);
    abi[j->lljit->mangleAndIntern("kiln_report_index_error_at")] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&kiln_report_index_error_at), flags);
    if (llvm::Error e = runtime.define(llvm::orc::absoluteSymbols(std::move(abi))))
      kiln::fail("CPU JIT: cannot bind the kernel ABI: {}", message_of(std::move(e)));
    auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        j->lljit->getDataLayout().getGlobalPrefix());
    if (!process) kiln::fail("CPU JIT: cannot search this process's symbols: {}", message_of(process.takeError()));
    runtime.addGenerator(std::move(*process));
    j->runtime = &runtime;
    return j;
  }();
  return *instance;
}

// A linked object: its own JITDylib, removed (code freed) with the module.
class OrcModule final : public CompiledModule {
 public:
  OrcModule(llvm::orc::JITDylib& dylib, std::unordered_map<std::string, void*> symbols, const CompileStats& stats)
      : dylib_(dylib), symbols_(std::move(symbols)) {
    stats_ = stats;
  }
  ~OrcModule() override {
    if (llvm::Error e = jit().session().removeJITDylib(dylib_))
      log_line("cache", "CPU JIT: removing a kernel module failed: " + message_of(std::move(e)));
  }

  void* symbol(const std::string& name) const override {
    auto it = symbols_.find(name);
    if (it != symbols_.end()) return it->second;
    std::string defined;
    for (const auto& [n, address] : symbols_) defined += (defined.empty() ? "" : ", ") + n;
    kiln::fail("CPU JIT: the kernel module defines no symbol '{}' (it defines: {})", name, defined);
  }

 private:
  llvm::orc::JITDylib& dylib_;
  std::unordered_map<std::string, void*> symbols_;
};

}  // namespace

std::shared_ptr<CompiledModule> load_object(const std::string& object, const CompileStats& stats) {
  auto start = std::chrono::steady_clock::now();
  Jit& j = jit();
  llvm::orc::ExecutionSession& session = j.session();
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, "kiln_kernel.o");

  // The object's exported symbols, read before linking: a garbage object fails here, cleanly.
  auto interface = llvm::orc::getObjectFileInterface(session, buffer->getMemBufferRef());
  if (!interface) kiln::fail("CPU JIT: not a loadable object file: {}", message_of(interface.takeError()));
  llvm::orc::SymbolLookupSet wanted;
  for (const auto& [name, flags] : interface->SymbolFlags) {
    if (flags.isExported() && flags.isCallable()) wanted.add(name);
  }

  llvm::orc::JITDylib& dylib = session.createBareJITDylib(fmt::format("kiln_kernel_{}", j.next_module++));
  dylib.setLinkOrder({{j.runtime, llvm::orc::JITDylibLookupFlags::MatchAllSymbols}});
  auto fail_and_remove = [&](const std::string& what, llvm::Error e) {
    std::string message = message_of(std::move(e));
    llvm::consumeError(session.removeJITDylib(dylib));
    kiln::fail("CPU JIT: {}: {}", what, message);
  };
  if (llvm::Error e = j.lljit->addObjectFile(dylib, std::move(buffer))) fail_and_remove("cannot add the object", std::move(e));

  // Link now (ORC links at first lookup), so that link time and link errors belong here.
  std::unordered_map<std::string, void*> symbols;
  if (!wanted.empty()) {
    auto found = session.lookup({{&dylib, llvm::orc::JITDylibLookupFlags::MatchAllSymbols}}, wanted);
    if (!found) fail_and_remove("cannot link the kernel module", found.takeError());
    for (const auto& [name, symbol] : *found)
      symbols.emplace((*name).str(), llvm::jitTargetAddressToPointer<void*>(symbol.getAddress()));
  }
  CompileStats with_link = stats;
  with_link.link_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return std::make_shared<OrcModule>(dylib, std::move(symbols), with_link);
}

}  // namespace kiln::runtime::cpu::llvm_backend
