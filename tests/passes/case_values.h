#pragma once
// A rewrite pass's .kir cases checked by value, beside their text (tests/passes/cases/): for
// every case file whose name starts with `prefix`, the first graph (the input) is interpreted on
// random inputs before and after `rewrite`, and every output must stay within atol + rtol.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln::testing {

// How many cases were checked.
inline int expect_cases_keep_their_values(const std::string& prefix, const std::function<void(Graph&)>& rewrite, double atol,
                                          double rtol, uint64_t seed) {
  int cases = 0;
  for (auto& e : std::filesystem::directory_iterator(data_dir() + "/passes/cases")) {
    const std::string file = e.path().filename().string();
    if (file.rfind(prefix, 0) != 0) continue;
    ++cases;
    SCOPED_TRACE(file);
    Graph g = std::move(parse_graphs(read_text(e.path().string()), file)[0]);
    std::vector<HostTensor> in;
    for (size_t i = 0; i < g.inputs().size(); ++i) in.push_back(random_tensor(g.inputs()[i]->meta(), seed + i, 2));
    std::vector<HostTensor> want = interpret(g, in);
    Graph r = g.clone();
    rewrite(r);
    std::vector<HostTensor> got = interpret(r, in);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size() && i < want.size(); ++i)
      EXPECT_TRUE(tensors_close(got[i], want[i], atol, rtol)) << "output " << i;
  }
  return cases;
}

}  // namespace kiln::testing
