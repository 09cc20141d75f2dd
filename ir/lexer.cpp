#include "ir/lexer.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace kiln {

std::string_view tok_name(Tok t) {
  switch (t) {
    case Tok::Ident: return "identifier";
    case Tok::Value: return "value name";
    case Tok::Int: return "integer";
    case Tok::Float: return "number";
    case Tok::String: return "string";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Equals: return "'='";
    case Tok::At: return "'@'";
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of input";
  }
  return "?";
}

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
}  // namespace

std::vector<Token> tokenize(std::string_view s, const std::string& file) {
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  auto loc_here = [&] { return SourceLoc{file, line, col}; };
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
  };
  // Inside (...) and [...] a newline is plain whitespace, as in Python, so a long call
  // or list may be broken across lines.
  int nesting = 0;
  auto push = [&](Tok k, std::string text, SourceLoc loc) {
    if (k == Tok::Newline && (nesting > 0 || out.empty() || out.back().kind == Tok::Newline)) return;
    if (k == Tok::LParen || k == Tok::LBracket) ++nesting;
    if ((k == Tok::RParen || k == Tok::RBracket) && nesting > 0) --nesting;
    out.push_back(Token{k, std::move(text), std::move(loc)});
  };
  if (s.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte-order mark
  while (i < s.size()) {
    char c = s[i];
    SourceLoc loc = loc_here();
    if (c == '\n') { push(Tok::Newline, "", loc); advance(1); continue; }
    if (c == ' ' || c == '\t' || c == '\r') { advance(1); continue; }
    if (c == '#') { while (i < s.size() && s[i] != '\n') advance(1); continue; }
    switch (c) {
      case '(': push(Tok::LParen, "(", loc); advance(1); continue;
      case ')': push(Tok::RParen, ")", loc); advance(1); continue;
      case '{': push(Tok::LBrace, "{", loc); advance(1); continue;
      case '}': push(Tok::RBrace, "}", loc); advance(1); continue;
      case '[': push(Tok::LBracket, "[", loc); advance(1); continue;
      case ']': push(Tok::RBracket, "]", loc); advance(1); continue;
      case ',': push(Tok::Comma, ",", loc); advance(1); continue;
      case ':': push(Tok::Colon, ":", loc); advance(1); continue;
      case '=': push(Tok::Equals, "=", loc); advance(1); continue;
      case '@': push(Tok::At, "@", loc); advance(1); continue;
      default: break;
    }
    if (c == '%') {
      size_t j = i + 1;
      while (j < s.size() && ident_char(s[j])) ++j;
      if (j == i + 1) throw Error(loc, "expected a value name after '%'");
      push(Tok::Value, std::string(s.substr(i + 1, j - i - 1)), loc);
      advance(j - i);
      continue;
    }
    if (c == '"') {
      std::string text;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= s.size() || s[j] == '\n') throw Error(loc, "unterminated string");
        if (s[j] == '"') break;
        if (s[j] == '\\' && j + 1 < s.size()) {
          ++j;
          text += s[j] == 'n' ? '\n' : s[j];
        } else {
          text += s[j];
        }
      }
      push(Tok::String, text, loc);
      advance(j + 1 - i);
      continue;
    }
    bool sign = (c == '-' || c == '+') && i + 1 < s.size();
    // inf and nan, signed or not, are numbers wherever they appear (an attribute, a list),
    // but for an attribute's name: `nan=0.0` (nan_to_num's) names the attribute.
    auto names_an_attribute = [&](size_t at) {
      size_t k = at + 3;
      while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) ++k;
      return k < s.size() && s[k] == '=' && (k + 1 >= s.size() || s[k + 1] != '=');
    };
    auto special_at = [&](size_t at) {
      return (s.substr(at, 3) == "inf" || s.substr(at, 3) == "nan") && (at + 3 >= s.size() || !ident_char(s[at + 3])) &&
             !names_an_attribute(at);
    };
    if (std::isdigit(static_cast<unsigned char>(c)) || special_at(i) ||
        (sign && (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.' || special_at(i + 1))) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i + (sign ? 1 : 0);
      if (special_at(j)) {
        bool neg = c == '-';
        bool is_inf = s.substr(j, 3) == "inf";
        Token t{Tok::Float, std::string(s.substr(i, j + 3 - i)), loc};
        t.float_value = is_inf ? (neg ? -INFINITY : INFINITY) : NAN;
        out.push_back(t);
        advance(j + 3 - i);
        continue;
      }
      bool is_float = false;
      while (j < s.size()) {
        char d = s[j];
        if (std::isdigit(static_cast<unsigned char>(d))) { ++j; continue; }
        if (d == '.') { is_float = true; ++j; continue; }
        if ((d == 'e' || d == 'E') && j + 1 < s.size()) {
          is_float = true;
          ++j;
          if (s[j] == '+' || s[j] == '-') ++j;
          continue;
        }
        break;
      }
      if (j < s.size() && ident_start(s[j]))
        throw Error(loc, fmt::format("malformed number '{}'", std::string(s.substr(i, j + 1 - i))));
      std::string text(s.substr(i, j - i));
      Token t{is_float ? Tok::Float : Tok::Int, text, loc};
      const char* b = text.data() + (text[0] == '+' ? 1 : 0);
      const char* e = text.data() + text.size();
      if (is_float) {
        auto r = std::from_chars(b, e, t.float_value);
        if (r.ec != std::errc() || r.ptr != e) throw Error(loc, fmt::format("malformed number '{}'", text));
      } else {
        auto r = std::from_chars(b, e, t.int_value);
        if (r.ec == std::errc::result_out_of_range)
          throw Error(loc, fmt::format("integer '{}' does not fit in 64 bits", text));
        if (r.ec != std::errc() || r.ptr != e) throw Error(loc, fmt::format("malformed number '{}'", text));
      }
      out.push_back(t);
      advance(j - i);
      continue;
    }
    if (ident_start(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      // A namespaced op name, "mylib::scaled_swish" (custom ops): one identifier.
      while (j + 2 < s.size() && s[j] == ':' && s[j + 1] == ':' && ident_start(s[j + 2]))
        for (j += 2; j < s.size() && ident_char(s[j]);) ++j;
      push(Tok::Ident, std::string(s.substr(i, j - i)), loc);
      advance(j - i);
      continue;
    }
    throw Error(loc, fmt::format("unexpected character '{}'", c));
  }
  push(Tok::Newline, "", loc_here());
  out.push_back(Token{Tok::End, "", loc_here()});
  return out;
}

AttrValue parse_attr_literal(std::string_view text) {
  auto toks = tokenize(text, "<literal>");
  const Token& t = toks[0];
  switch (t.kind) {
    case Tok::Int: return t.int_value;
    case Tok::Float: return t.float_value;
    case Tok::String: return t.text;
    case Tok::Ident:
      if (t.text == "true") return true;
      if (t.text == "false") return false;
      if (auto d = dtype_from_name(t.text)) return *d;
      break;
    case Tok::LBracket: {
      IntList ints;
      FloatList floats;
      bool any_float = false;
      for (size_t k = 1; toks[k].kind != Tok::RBracket; ++k) {
        if (toks[k].kind == Tok::Comma) continue;
        if (toks[k].kind == Tok::Int) { ints.push_back(toks[k].int_value); floats.push_back(double(toks[k].int_value)); }
        else if (toks[k].kind == Tok::Float) { any_float = true; floats.push_back(toks[k].float_value); }
        else throw Error(fmt::format("bad list literal '{}'", std::string(text)));
      }
      if (any_float) return floats;
      return ints;
    }
    default: break;
  }
  throw Error(fmt::format("bad attribute literal '{}'", std::string(text)));
}

}  // namespace kiln
