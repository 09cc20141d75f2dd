#pragma once
// The dispatch trace's lines, collected while a TraceLines lives (tests of the dispatcher and
// of Autocast).
#include <string>
#include <vector>

#include "frontend/dispatcher.h"

namespace kiln::testing {

struct TraceLines {
  std::vector<std::string> lines;
  TraceLines() {
    set_dispatch_trace(true);
    set_dispatch_trace_sink([this](const std::string& l) { lines.push_back(l); });
  }
  ~TraceLines() {
    set_dispatch_trace(false);
    set_dispatch_trace_sink(nullptr);
  }
  TraceLines(const TraceLines&) = delete;
  TraceLines& operator=(const TraceLines&) = delete;
};

}  // namespace kiln::testing
