#pragma once
// `--load LIB.so` on any kiln command: loads a shared library before the command runs, so that
// the custom ops it registers from a static initializer (frontend/custom_op.h) are known to
// the parser, the compiler and every command: `kiln explain my.kir --load ./libmyops.so`.
// The library is built against kiln's headers and linked against nothing of kiln's: its calls
// resolve to the kiln program's own (which exports them), so there is one op table.
#include <vector>

namespace kiln::cli {

// Loads every `--load PATH` / `--load=PATH` of argv and removes them from it (argc updated).
// kiln::Error naming the library and the loader's message when one does not load.
void load_plugins(int& argc, char** argv);

}  // namespace kiln::cli
