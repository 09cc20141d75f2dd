#pragma once
// Tokens of the .kir text form (also used for default values in op schemas).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attr.h"
#include "ir/error.h"

namespace kiln {

enum class Tok {
  Ident,    // graph, return, linear, f32, true ...
  Value,    // %name
  Int,      // 42, -3
  Float,    // 1.5, -2e-3, inf, -inf, nan
  String,   // "tanh"
  LParen, RParen, LBrace, RBrace, LBracket, RBracket,
  Comma, Colon, Equals, At,
  Newline,  // statements end at newlines
  End,
};

struct Token {
  Tok kind;
  std::string text;  // identifier / value name (without %) / unescaped string / literal text
  SourceLoc loc;
  int64_t int_value = 0;
  double float_value = 0;
};

std::string_view tok_name(Tok t);

// Splits the whole input into tokens; comments (# to end of line) are dropped, newlines kept
// (consecutive ones collapsed). Throws kiln::Error at the offending character.
std::vector<Token> tokenize(std::string_view text, const std::string& file);

// Parses one attribute literal (used for schema defaults): 3, -1.5, inf, true, "x", f32, [1,2].
AttrValue parse_attr_literal(std::string_view text);

}  // namespace kiln
