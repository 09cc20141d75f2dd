#pragma once
// Helpers shared by the subcommands: loading a .kir file, choosing one of its graphs,
// summarizing a tensor in one line, writing files.
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::cli {

// The graph named `name` in `path`; with an empty name, the file's only graph (a file with
// several graphs needs --graph). Parse and verification errors carry file:line:column.
Graph load_graph(const std::string& path, const std::string& name);

// "f32[2,3] [0.12, -0.5, 0.33, ...] min=-0.5 max=0.9 mean=0.1" (first `head` values).
std::string summarize(const HostTensor& t, int head = 6);

// Writes text to a file (replacing it); a kiln::Error names the file if that fails.
void write_text(const std::string& path, const std::string& text);

// Creates a directory (and its parents) for outputs; a kiln::Error if that is impossible.
void make_dirs(const std::string& dir);

// A file name made from a value name: characters other than [A-Za-z0-9_.-] become '_'.
std::string file_stem(const std::string& value_name);

}  // namespace kiln::cli
