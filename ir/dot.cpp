#include "ir/dot.h"

#include <fmt/format.h>
#include <spawn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"

extern char** environ;

namespace kiln {

namespace fs = std::filesystem;

std::string dot_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': break;
      default: out += c;
    }
  }
  return out;
}

namespace {

std::string shorten(std::string s, size_t max_chars) {
  if (s.size() <= max_chars) return s;
  s.resize(max_chars > 3 ? max_chars - 3 : 0);
  return s + "...";
}

// The node's attributes as they print in .kir (defaults left out), one per line, each cut
// short: a constant's value list can hold thousands of numbers.
std::string attr_lines(const Node& n, size_t max_chars) {
  std::string out;
  for (const ArgSpec& spec : n.info().schema.attrs) {
    const AttrValue* v = n.attrs().find(spec.name);
    if (!v || (spec.default_value && attr_equal(*v, *spec.default_value))) continue;
    out += "\n" + shorten(fmt::format("{}={}", spec.name, attr_str(*v)), max_chars);
  }
  return out;
}

}  // namespace

std::string to_dot(const Graph& g, const DotOptions& options) {
  std::unordered_map<const Node*, std::string> ids;
  std::string out = fmt::format("digraph \"{}\" {{\n", dot_escape(g.name()));
  out += "  rankdir=TB;\n";
  out += "  node [fontname=\"monospace\", fontsize=10, shape=box];\n";
  out += "  edge [fontname=\"monospace\", fontsize=9];\n";
  out += fmt::format("  label=\"graph {}\"; labelloc=t;\n", dot_escape(g.name()));

  for (const Node* in : g.inputs()) {
    std::string id = fmt::format("in{}", ids.size());
    ids[in] = id;
    out += fmt::format("  {} [label=\"%{}\\n{}\", style=\"rounded,filled\", fillcolor=\"#cfe2ff\"];\n", id,
                       dot_escape(in->name()), dot_escape(in->meta().str()));
  }
  auto edge = [&](Value v, const std::string& to, const std::string& extra) {
    std::string label;
    if (v.node->num_results() > 1) label = "%" + v.name();
    if (options.edge_types) label += (label.empty() ? "" : ": ") + v.meta().str();
    if (!extra.empty()) label = extra + (label.empty() ? "" : " " + label);
    out += fmt::format("  {} -> {}", ids.at(v.node), to);
    if (!label.empty()) out += fmt::format(" [label=\"{}\"]", dot_escape(label));
    out += ";\n";
  };

  // Clustered nodes are declared inside their cluster's block and their edges drawn after
  // every block; the others keep the plain drawing (declaration, then its edges).
  std::vector<std::string> cluster_body(options.clusters.size());
  std::vector<const Node*> clustered;
  for (const Node* n : g.nodes()) {
    std::string id = fmt::format("n{}", ids.size());
    ids[n] = id;
    std::string names, types;
    for (int i = 0; i < n->num_results(); ++i) {
      names += fmt::format("{}%{}", i ? ", " : "", n->result_info(i).name);
      types += fmt::format("{}{}", i ? "\n" : "", n->meta(i).str());
    }
    std::string label = fmt::format("{} = {}\n{}{}", names, n->info().name, types, attr_lines(*n, options.max_attr_chars));
    std::string decl = fmt::format("  {} [label=\"{}\"];\n", id, dot_escape(label));
    auto c = options.cluster_of.find(n);
    if (c != options.cluster_of.end() && c->second >= 0 && c->second < static_cast<int>(cluster_body.size())) {
      cluster_body[c->second] += "  " + decl;
      clustered.push_back(n);
      continue;
    }
    out += decl;
    for (Value v : n->inputs()) edge(v, id, "");
  }
  for (size_t i = 0; i < cluster_body.size(); ++i) {
    if (cluster_body[i].empty()) continue;
    const DotCluster& c = options.clusters[i];
    out += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\"; style=\"rounded{}\"; color=\"#808080\";\n{}  }}\n",
                       c.name, dot_escape(c.label), c.dashed ? ",dashed" : "", cluster_body[i]);
  }
  for (const Node* n : clustered)
    for (Value v : n->inputs()) edge(v, ids.at(n), "");

  out += "  return [label=\"return\", style=filled, fillcolor=\"#e0e0e0\"];\n";
  const auto& outs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i) edge(outs[i], "return", outs.size() > 1 ? fmt::format("#{}", i) : "");
  out += "}\n";
  return out;
}

std::optional<std::string> find_dot_program() {
  const char* path = std::getenv("PATH");
  std::string_view p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!p.empty()) {
    size_t colon = p.find(':');
    std::string dir(p.substr(0, colon));
    p = colon == std::string_view::npos ? std::string_view{} : p.substr(colon + 1);
    if (dir.empty()) dir = ".";
    fs::path candidate = fs::path(dir) / "dot";
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return std::nullopt;
}

namespace {

// A scratch file that removes itself.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& suffix) {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / fmt::format("kiln-{}-{}{}", ::getpid(), counter++, suffix);
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void render_dot(const std::string& dot_text, const std::string& out_path, const std::string& format) {
  if (format != "svg" && format != "png") fail("cannot render to '{}': kiln renders svg or png", format);
  auto dot = find_dot_program();
  if (!dot)
    fail("cannot write '{}': Graphviz is not installed (no 'dot' program on PATH); install it "
         "(apt-get install graphviz) or write the .dot text instead",
         out_path);
  TempFile input(".dot"), errors(".err");
  {
    std::ofstream f(input.path, std::ios::binary);
    if (!f) fail("cannot write a temporary file '{}'", input.path.string());
    f << dot_text;
  }
  // posix_spawn rather than system(): no shell, so paths need no quoting.
  std::string tflag = "-T" + format;
  std::vector<std::string> args = {*dot, tflag, "-o", out_path, input.path.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, errors.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, dot->c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail("cannot run Graphviz '{}': {}", *dot, std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("waiting for Graphviz '{}' failed: {}", *dot, std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string msg = read_all(errors.path);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    fail("Graphviz 'dot' failed writing '{}'{}", out_path, msg.empty() ? "" : ": " + msg);
  }
}

void write_graph_image(const Graph& g, const std::string& out_path, const DotOptions& options) {
  std::string ext = fs::path(out_path).extension().string();
  std::string text = to_dot(g, options);
  if (ext == ".dot" || ext == ".gv") {
    std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot write '{}'", out_path);
    f << text;
    if (!f) fail("error while writing '{}'", out_path);
    return;
  }
  if (ext == ".svg" || ext == ".png") return render_dot(text, out_path, ext.substr(1));
  fail("cannot tell the format of '{}' from its extension (use .dot, .svg or .png)", out_path);
}

}  // namespace kiln
