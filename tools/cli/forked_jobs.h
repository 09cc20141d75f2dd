#pragma once
// Work shared by forked processes (`kiln fuzz --jobs`, `kiln onnx-test --jobs`): processes, not
// threads, because the CPU JIT compiles one module at a time per process and because a crash in
// one job (a compiler or driver segfault) must not take the others down.
#include <functional>
#include <string>
#include <vector>

#include "ir/tensor_meta.h"

namespace kiln::cli {

// Runs body(j) for j in [0, jobs) in forked processes and waits for all. Before forking, each
// job's NVRTC compiles get cores/jobs threads (KILN_COMPILE_THREADS, unless the user set it).
// A job that throws prints "COMMAND: job J: message" and exits 3; a crash prints its signal and
// stack. Returns, per job, "" when it ended with exit 0, else how it ended ("signal 11", "exit 3").
std::vector<std::string> run_forked_jobs(const std::string& command, int jobs, const std::function<void(int job)>& body);

// require_runnable (device.h), asked in a child process: the jobs are forked, and a CUDA driver
// that the parent has initialized cannot be used in a forked child (cuInit state does not
// survive fork: every call there fails with CUDA_ERROR_NOT_INITIALIZED). So the parent never
// touches it.
void require_runnable_in_a_child(const Device& device, const std::string& command);

// One line of a tab-separated results file: tabs and newlines in `s` become spaces.
std::string escape_line(std::string s);

}  // namespace kiln::cli
