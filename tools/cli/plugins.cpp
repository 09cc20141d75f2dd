#include "tools/cli/plugins.h"

#include <dlfcn.h>

#include <string>

#include "ir/error.h"

namespace kiln::cli {

void load_plugins(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], path;
    // `kiln launch ... PROGRAM ARGS`: what follows is the ranks' command line, theirs to keep.
    if (a == "launch") {
      while (i < argc) argv[out++] = argv[i++];
      break;
    }
    if (a == "--load") {
      if (i + 1 >= argc) fail("--load needs the path of a shared library");
      path = argv[++i];
    } else if (a.rfind("--load=", 0) == 0) {
      path = a.substr(7);
    } else {
      argv[out++] = argv[i];
      continue;
    }
    // RTLD_GLOBAL: a second library may use the first one's symbols.
    if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) fail("--load {}: {}", path, dlerror());
  }
  argc = out;
  argv[argc] = nullptr;
}

}  // namespace kiln::cli
