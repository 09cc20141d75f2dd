#pragma once
// Shrinking a failing fuzz case to a small reproducer (delta debugging on graphs): outputs are
// dropped and nodes replaced by inputs of their type, one at a time, as long as the case still
// fails the same way; inputs nothing reads go. The result is printed as a .kir file whose
// header comments say how to reproduce it.
#include <functional>
#include <string>

#include "tools/fuzz/differential.h"
#include "tools/fuzz/random_graph.h"

namespace kiln::fuzz {

// Whether a candidate still shows the failure being shrunk.
using StillFails = std::function<bool(const FuzzCase&)>;

// The smallest case reached (by node count) that still fails; `c` itself if nothing smaller does.
// `max_tries` bounds the checks run (each compiles the candidate).
FuzzCase shrink(const FuzzCase& c, const StillFails& still_fails, int max_tries = 150);

// The case as a .kir file: a comment header (what failed, the seed, how to rerun it) and the
// graph. kiln fuzz --replay FILE.kir reads it back (inputs from the recorded seeds and bounds).
std::string reproducer_text(const FuzzCase& c, const Finding& finding, const std::string& device);
// Parses reproducer_text back (kiln::Error for a file that is not one).
FuzzCase parse_reproducer(const std::string& text, const std::string& file_name = "<reproducer>");

}  // namespace kiln::fuzz
