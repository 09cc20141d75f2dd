#pragma once
// The kiln program's subcommands: each file tools/cli/<command>.cpp defines one add_*
// function that registers its subcommand (options and callback) on the top-level app.
// Callbacks report user errors by throwing kiln::Error; main.cpp prints them and exits 1.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_print_command(CLI::App& app);   // print.cpp
void add_check_command(CLI::App& app);   // check.cpp
void add_dot_command(CLI::App& app);     // dot.cpp
void add_passes_command(CLI::App& app);  // passes.cpp
void add_run_command(CLI::App& app);     // run.cpp
void add_demo_command(CLI::App& app);    // demo.cpp
void add_compile_command(CLI::App& app); // compile.cpp
void add_export_command(CLI::App& app);  // export.cpp
void add_grad_command(CLI::App& app);    // grad.cpp
void add_profile_command(CLI::App& app); // profile.cpp
void add_explain_command(CLI::App& app); // explain.cpp
void add_ops_command(CLI::App& app);     // ops.cpp
void add_fuzz_command(CLI::App& app);    // fuzz.cpp
void add_launch_command(CLI::App& app);  // launch.cpp
void add_import_command(CLI::App& app);  // import.cpp
void add_onnx_test_command(CLI::App& app);  // onnx_test.cpp

}  // namespace kiln::cli
