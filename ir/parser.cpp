#include "ir/parser.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/lexer.h"
#include "ir/verifier.h"

namespace kiln {

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string file) : toks_(tokenize(text, file)), file_(std::move(file)) {}

  std::vector<Graph> parse_all() {
    std::vector<Graph> out;
    skip_newlines();
    if (peek().kind == Tok::End) error(peek(), "expected 'graph', found an empty file");
    while (peek().kind != Tok::End) {
      out.push_back(parse_graph());
      skip_newlines();
    }
    return out;
  }

  TensorMeta parse_type_only() {
    TensorMeta m = parse_type();
    skip_newlines();
    if (peek().kind != Tok::End) error(peek(), fmt::format("unexpected {} after the type", describe(peek())));
    return m;
  }

 private:
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void error(const Token& t, const std::string& msg) { throw Error(t.loc, msg); }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Ident: return fmt::format("'{}'", t.text);
      case Tok::Value: return fmt::format("'%{}'", t.text);
      case Tok::Int:
      case Tok::Float: return fmt::format("'{}'", t.text);
      case Tok::String: return fmt::format("string \"{}\"", t.text);
      default: return std::string(tok_name(t.kind));
    }
  }
  const Token& expect(Tok k, const char* context) {
    if (peek().kind != k) error(peek(), fmt::format("expected {} {}, found {}", tok_name(k), context, describe(peek())));
    return next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) ++pos_;
  }

  Graph parse_graph() {
    const Token& kw = peek();
    if (kw.kind != Tok::Ident || kw.text != "graph")
      error(kw, fmt::format("expected 'graph', found {}", describe(kw)));
    next();
    const Token& name = expect(Tok::Ident, "(the graph's name) after 'graph'");
    Graph g(name.text);
    expect(Tok::LParen, "after the graph's name");
    skip_newlines();
    if (!accept(Tok::RParen)) {
      for (;;) {
        skip_newlines();
        const Token& v = expect(Tok::Value, "(a parameter such as %x: f32[4])");
        expect(Tok::Colon, fmt::format("after parameter '%{}'", v.text).c_str());
        TensorMeta m = parse_type();
        if (g.find(v.text)) error(v, fmt::format("parameter '%{}' is declared twice", v.text));
        g.add_input(v.text, m);
        skip_newlines();
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "or ')' in the parameter list");
      }
    }
    expect(Tok::LBrace, "to open the graph's body");
    expect(Tok::Newline, "after '{'");
    for (;;) {
      skip_newlines();
      const Token& t = peek();
      if (t.kind == Tok::Ident && t.text == "return") {
        parse_return(g);
        break;
      }
      if (t.kind == Tok::RBrace) error(t, fmt::format("graph '{}' has no return statement", g.name()));
      if (t.kind == Tok::End) error(t, fmt::format("unexpected end of input in graph '{}' (missing 'return' and '}}')", g.name()));
      parse_statement(g);
    }
    skip_newlines();
    expect(Tok::RBrace, "to close the graph after its return statement");
    if (peek().kind != Tok::Newline && peek().kind != Tok::End)
      error(peek(), fmt::format("unexpected {} after '}}'", describe(peek())));
    verify_or_throw(g);
    return g;
  }

  // A result's annotation without {strides} checks dtype, shape and device only: the printer
  // writes strides where they are not contiguous, but a hand-written view need not.
  bool type_had_strides_ = false;

  TensorMeta parse_type() {
    type_had_strides_ = false;
    const Token& dt = expect(Tok::Ident, "(a dtype such as f32)");
    auto dtype = dtype_from_name(dt.text);
    if (!dtype) error(dt, fmt::format("unknown dtype '{}' (expected one of f64, f32, f16, bf16, i64, i32, bool)", dt.text));
    expect(Tok::LBracket, fmt::format("after dtype '{}' (a shape such as [8,64])", dt.text).c_str());
    Shape shape = parse_int_list_tail("in the shape", Tok::RBracket, /*sizes=*/true);
    TensorMeta m;
    try {
      m = TensorMeta(*dtype, shape);
      m.nbytes();
    } catch (const Error& e) {
      error(dt, e.what());
    }
    if (peek().kind == Tok::LBrace && peek(1).kind == Tok::Int) {
      const Token& at = next();
      Strides st = parse_int_list_tail("in the strides", Tok::RBrace);
      if (st.size() != shape.size())
        error(at, fmt::format("strides {} have {} entries but the shape {} has {}", shape_str(st), st.size(), shape_str(shape), shape.size()));
      m.strides = st;
      type_had_strides_ = true;
    }
    if (accept(Tok::At)) {
      const Token& dev = expect(Tok::Ident, "(a device: cpu or cuda:N) after '@'");
      std::string text = dev.text;
      if (accept(Tok::Colon)) text += ":" + std::to_string(expect(Tok::Int, "(a device index)").int_value);
      std::optional<Device> d = parse_device(text);
      if (!d) error(dev, fmt::format("unknown device '{}' (known: {})", text, device_kind_names()));
      m.device = *d;
    }
    return m;
  }

  // After '[' (or '{'): integers separated by commas up to the closing bracket.
  // With `sizes`, negative entries are errors at the entry.
  IntList parse_int_list_tail(const char* context, Tok close = Tok::RBracket, bool sizes = false) {
    IntList out;
    if (accept(close)) return out;
    for (;;) {
      const Token& t = peek();
      if (t.kind != Tok::Int) error(t, fmt::format("expected an integer {}, found {}", context, describe(t)));
      if (sizes && t.int_value < 0) error(t, fmt::format("negative size {} in the shape", t.int_value));
      out.push_back(next().int_value);
      if (accept(close)) return out;
      expect(Tok::Comma, context);
    }
  }

  AttrValue parse_literal() {
    const Token& t = next();
    switch (t.kind) {
      case Tok::Int: return t.int_value;
      case Tok::Float: return t.float_value;
      case Tok::String: return t.text;
      case Tok::Ident:
        if (t.text == "true") return true;
        if (t.text == "false") return false;
        if (auto d = dtype_from_name(t.text)) return *d;
        error(t, fmt::format("unknown name '{}' as an attribute value (strings need double quotes)", t.text));
      case Tok::LBracket: {
        IntList ints;
        FloatList floats;
        bool any_float = false;
        if (accept(Tok::RBracket)) return ints;
        for (;;) {
          const Token& e = next();
          if (e.kind == Tok::Int) {
            ints.push_back(e.int_value);
            floats.push_back(static_cast<double>(e.int_value));
          } else if (e.kind == Tok::Float) {
            any_float = true;
            floats.push_back(e.float_value);
          } else {
            error(e, fmt::format("expected a number in the list, found {}", describe(e)));
          }
          if (accept(Tok::RBracket)) break;
          expect(Tok::Comma, "or ']' in the list");
        }
        if (any_float) return floats;
        return ints;
      }
      default: error(t, fmt::format("expected an attribute value, found {}", describe(t)));
    }
  }

  void parse_statement(Graph& g) {
    std::vector<const Token*> lhs;
    for (;;) {
      const Token& v = peek();
      if (v.kind != Tok::Value) error(v, fmt::format("expected a statement (%name = op(...)) or 'return', found {}", describe(v)));
      next();
      if (g.find(v.text)) error(v, fmt::format("'%{}' is defined twice (values are assigned once)", v.text));
      for (auto* p : lhs)
        if (p->text == v.text) error(v, fmt::format("'%{}' appears twice on the left of '='", v.text));
      lhs.push_back(&v);
      if (accept(Tok::Comma)) continue;
      break;
    }
    expect(Tok::Equals, "after the result name");
    const Token& opname = expect(Tok::Ident, "(an op name)");
    const OpInfo* info = find_op(opname.text);
    if (!info) error(opname, fmt::format("unknown op '{}'", opname.text));
    if (info->category == OpCategory::Placeholder)
      error(opname, fmt::format("'{}' cannot be used as an op (graph inputs are declared in the signature)", opname.text));
    expect(Tok::LParen, fmt::format("after op '{}'", opname.text).c_str());
    std::vector<Value> inputs;
    Attrs attrs;
    bool named_seen = false;
    if (!accept(Tok::RParen)) {
      for (;;) {
        const Token& a = peek();
        if (a.kind == Tok::Value) {
          if (named_seen) error(a, fmt::format("tensor argument '%{}' after a named attribute (tensors come first)", a.text));
          next();
          Value v = g.find(a.text);
          if (!v) error(a, fmt::format("use of undefined value '%{}'", a.text));
          inputs.push_back(v);
        } else if (a.kind == Tok::Ident && peek(1).kind == Tok::Equals) {
          named_seen = true;
          next();
          next();
          if (attrs.has(a.text)) error(a, fmt::format("attribute '{}' is given twice", a.text));
          if (!info->schema.find_attr(a.text)) error(a, *attr_error(*info, a.text, AttrValue(int64_t{0})));
          const Token& value_tok = peek();
          AttrValue value = parse_literal();
          if (auto err = attr_error(*info, a.text, value)) error(value_tok, *err);
          attrs.set(a.text, std::move(value));
        } else {
          error(a, fmt::format("expected a value (%name) or an attribute (name=value), found {}", describe(a)));
        }
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "or ')' between arguments");
      }
    }
    Node* n = nullptr;
    std::string what = fmt::format("%{} = {}", lhs[0]->text, info->name);
    try {
      n = g.add_node(info->op, inputs, attrs, lhs[0]->text);
    } catch (const Error& e) {
      // Shape-rule errors already start with "op(input types): "; name the result in front.
      // Messages that start with the op's name ("add(f32[2], f32[3]): ...", "softmax: missing
      // attribute 'dim'") get the result name in front; others get "%y = op: " in front.
      std::string msg = e.what();
      bool names_op = msg.rfind(info->name + "(", 0) == 0 || msg.rfind(info->name + ":", 0) == 0;
      error(opname, names_op ? fmt::format("%{} = {}", lhs[0]->text, msg) : fmt::format("{}: {}", what, msg));
    }
    if (static_cast<int>(lhs.size()) != n->num_results())
      error(*lhs[0], fmt::format("{} has {} result{} but {} name{} given", what, n->num_results(),
                                 n->num_results() == 1 ? "" : "s", lhs.size(), lhs.size() == 1 ? " is" : "s are"));
    // add_node named the later results after the first (`y_1`, `y_2`); the names written here
    // were checked to be new above, so one of them can only clash with such an automatic name
    // of this very node, which is moved out of the way (it gets its own written name later).
    for (size_t i = 1; i < lhs.size(); ++i) {
      Value r = n->result(static_cast<int>(i));
      if (r.name() == lhs[i]->text) continue;
      if (Value other = g.find(lhs[i]->text)) g.rename(other, g.fresh_name(lhs[i]->text));
      g.rename(r, lhs[i]->text);
    }
    if (n->name() != lhs[0]->text) error(*lhs[0], fmt::format("'%{}' is defined twice", lhs[0]->text));
    if (accept(Tok::Colon)) {
      for (int i = 0;; ++i) {
        const Token& at = peek();
        TensorMeta m = parse_type();
        if (i >= n->num_results())
          error(at, fmt::format("{}: {} type annotations for {} result{}", what, i + 1, n->num_results(), n->num_results() == 1 ? "" : "s"));
        const TensorMeta& inferred = n->meta(i);
        const bool same = type_had_strides_ ? m == inferred
                                            : m.dtype == inferred.dtype && m.shape == inferred.shape && m.device == inferred.device;
        if (!same)
          error(at, fmt::format("{}: the annotated type {} differs from the inferred type {}", what,
                                type_had_strides_ ? m.str() : fmt::format("{}[{}]", dtype_name(m.dtype), fmt::join(m.shape, ",")),
                                inferred.str()));
        if (!accept(Tok::Comma)) {
          if (i + 1 != n->num_results())
            error(at, fmt::format("{}: {} type annotation{} for {} results", what, i + 1, i ? "s" : "", n->num_results()));
          break;
        }
      }
    }
    if (peek().kind != Tok::Newline)
      error(peek(), fmt::format("expected the end of the line after the statement, found {}", describe(peek())));
  }

  void parse_return(Graph& g) {
    next();  // 'return'
    expect(Tok::LParen, "after 'return'");
    std::vector<Value> outs;
    if (!accept(Tok::RParen)) {
      for (;;) {
        const Token& t = expect(Tok::Value, "(a value to return)");
        Value v = g.find(t.text);
        if (!v) error(t, fmt::format("return of undefined value '%{}'", t.text));
        outs.push_back(v);
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "or ')' in the return list");
      }
    }
    g.set_outputs(std::move(outs));
    if (peek().kind != Tok::Newline) error(peek(), fmt::format("expected end of line after the return statement, found {}", describe(peek())));
  }

  std::vector<Token> toks_;
  std::string file_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Graph> parse_graphs(std::string_view text, const std::string& file) {
  return Parser(text, file).parse_all();
}

Graph parse_graph(std::string_view text, const std::string& file) {
  auto graphs = parse_graphs(text, file);
  if (graphs.size() != 1) throw Error(SourceLoc{file, 1, 1}, fmt::format("expected one graph, found {}", graphs.size()));
  return std::move(graphs[0]);
}

std::vector<Graph> parse_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(fmt::format("'{}' is a directory, not a .kir file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_graphs(ss.str(), path);
}

TensorMeta parse_type(std::string_view text) { return Parser(text, "<type>").parse_type_only(); }

}  // namespace kiln
