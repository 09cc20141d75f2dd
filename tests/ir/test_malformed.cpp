// Malformed .kir files: each file in tests/ir/malformed/ starts with a comment
//   # error: LINE:COLUMN: TEXT
// and parsing it must throw a kiln::Error whose message starts "FILE:LINE:COLUMN: error: "
// and contains TEXT. The location is checked exactly, the message by substring, so a
// rewording that keeps the meaning only needs TEXT to be shortened, never the location.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "ir/error.h"
#include "ir/parser.h"
#include "tests/support/support.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> malformed_files() {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(fs::path(kiln::testing::data_dir()) / "ir" / "malformed"))
    if (e.path().extension() == ".kir") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class Malformed : public ::testing::TestWithParam<std::string> {};

TEST_P(Malformed, FailsWithTheExpectedMessage) {
  const std::string name = GetParam();
  const std::string text = kiln::testing::read_text(kiln::testing::data_dir() + "/ir/malformed/" + name);
  std::smatch m;
  std::string first_line = text.substr(0, text.find('\n'));
  ASSERT_TRUE(std::regex_match(first_line, m, std::regex(R"(# error: (\d+):(\d+): (.+))")))
      << name << ": the first line must be '# error: LINE:COLUMN: TEXT', found: " << first_line;
  const std::string prefix = name + ":" + m[1].str() + ":" + m[2].str() + ": error: ";
  const std::string expected = m[3].str();
  try {
    kiln::parse_graphs(text, name);
    FAIL() << name << ": parsed without an error; expected " << prefix << "..." << expected;
  } catch (const kiln::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << "expected the message to start with '" << prefix << "', got: " << what;
    EXPECT_NE(what.find(expected), std::string::npos) << "expected '" << expected << "' in: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, Malformed, ::testing::ValuesIn(malformed_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param.substr(0, info.param.size() - 4);
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(MalformedCorpus, HasAtLeastThirtyCases) { EXPECT_GE(malformed_files().size(), 30u); }

}  // namespace
