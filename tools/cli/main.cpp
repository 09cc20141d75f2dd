// The kiln program: one subcommand per file in tools/cli/ (see commands.h).
// Every user error (missing file, parse error, bad .npy, shape mismatch) is one message on
// stderr and exit code 1; a bug inside kiln is reported as such with exit code 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "ir/error.h"
#include "tools/cli/commands.h"
#include "tools/cli/plugins.h"

int main(int argc, char** argv) {
  // Line by line even into a pipe (ctest, a log): a run cut short still shows how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"kiln: a graph compiler for tensor programs. Reads and writes the .kir text form."};
  app.name("kiln");
  app.require_subcommand(1);
  kiln::cli::add_print_command(app);
  kiln::cli::add_check_command(app);
  kiln::cli::add_dot_command(app);
  kiln::cli::add_passes_command(app);
  kiln::cli::add_run_command(app);
  kiln::cli::add_demo_command(app);
  kiln::cli::add_compile_command(app);
  kiln::cli::add_export_command(app);
  kiln::cli::add_grad_command(app);
  kiln::cli::add_profile_command(app);
  kiln::cli::add_explain_command(app);
  kiln::cli::add_ops_command(app);
  kiln::cli::add_fuzz_command(app);
  kiln::cli::add_launch_command(app);
  kiln::cli::add_import_command(app);
  kiln::cli::add_onnx_test_command(app);
  app.footer("Any command takes --load LIB.so (repeatable): a library of custom ops to load first.");
  try {
    kiln::cli::load_plugins(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::Error& e) {
    // Located errors already read "file:line:column: error: ..." like a compiler's.
    if (e.loc().valid()) fmt::print(stderr, "{}\n", e.what());
    else fmt::print(stderr, "kiln: error: {}\n", e.what());
    return 1;
  } catch (const kiln::InternalError& e) {
    fmt::print(stderr, "kiln: {} (this is a bug in kiln)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln: unexpected error: {} (this is a bug in kiln)\n", e.what());
    return 2;
  }
  return 0;
}
