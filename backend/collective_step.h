#pragma once
// The collective steps of a compiled program (codegen::Step::Kind::Collective), shared by the
// backends: what the process group's engines are handed, and the check, before a program's
// first collective, that every rank runs the same graph.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "codegen/lower.h"
#include "runtime/dist/process_group.h"

namespace kiln::backend {

struct ExecutableState;

// The engine's view of one step, on buffers `in` and `out`.
runtime::dist::CollectiveArgs collective_args(const codegen::OpaqueCall& c, const void* in, void* out);

// One line per collective step of the program, what every rank must agree on:
// "#0 all_reduce bf16[1024] op=mean world_size=2".
std::string describe_collectives(const codegen::LoweredGraph& lg);

// The group a program's collectives over `world_size` > 1 ranks run in, checked once per
// program and group against the other ranks' programs (ProcessGroup::check_same_program).
class CollectiveGate {
 public:
  runtime::dist::ProcessGroup& group(const ExecutableState& s, const codegen::OpaqueCall& c) const;

 private:
  mutable std::mutex mu_;
  mutable const runtime::dist::ProcessGroup* checked_ = nullptr;
};

// Whether a collective step is a copy: one over one rank in a process that joined no group
// (every collective hands one rank its own tensor). In a group, even of one rank, it goes
// through the engine: a one-rank group runs the code path of a larger one.
bool is_local_copy(const codegen::OpaqueCall& c);

// Collectives launched and not yet waited for: the buffer each writes and what to wait on (a
// future on the CPU, an event on CUDA). Before a step runs, take() hands over those whose
// buffers it touches, removed from the list.
template <typename Handle>
class InFlight {
 public:
  void add(int buffer, Handle h) { items_.emplace_back(buffer, std::move(h)); }
  bool empty() const { return items_.empty(); }
  std::vector<Handle> take(const std::vector<int>& buffers) {
    std::vector<Handle> out;
    for (size_t i = 0; i < items_.size();) {
      if (std::find(buffers.begin(), buffers.end(), items_[i].first) == buffers.end()) {
        ++i;
        continue;
      }
      out.push_back(std::move(items_[i].second));
      items_.erase(items_.begin() + static_cast<long>(i));
    }
    return out;
  }
  std::vector<Handle> take_all() {
    std::vector<Handle> out;
    for (auto& [buffer, h] : items_) out.push_back(std::move(h));
    items_.clear();
    return out;
  }

 private:
  std::vector<std::pair<int, Handle>> items_;
};

// A collective on host memory: a copy (is_local_copy) or a call of the group's Gloo engine.
void run_host_collective(const ExecutableState& s, const CollectiveGate& gate, const codegen::OpaqueCall& c, const void* in, void* out);

}  // namespace kiln::backend
