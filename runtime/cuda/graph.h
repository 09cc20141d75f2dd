#pragma once
// CUDA graph capture: record the work queued on a stream once, replay it with one launch.
//
// The capture mode is RELAXED: kiln's caching allocator may have to call cuMemAlloc while a
// capture is under way (a first-time size), which the GLOBAL and THREAD_LOCAL modes forbid on
// the capturing thread. The price: nothing stops another thread from making an unsafe call in the
// meantime; kiln captures from one thread at a time. Addresses are baked into the graph: every
// buffer that the captured work touches must stay alive (held by the caller) for as long as the
// graph is replayed, and keep its contents where the work reads them.
#include <cuda.h>

#include <cstddef>

#include "runtime/cuda/stream.h"

namespace kiln::runtime::cuda {

class GraphCapture {
 public:
  // Begins capturing the work queued on `stream` from now on (nothing runs until replay).
  explicit GraphCapture(Stream& stream);
  // Ends a capture that is still open, discarding it.
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Ends the capture and instantiates the graph; kiln::Error when the capture was invalidated
  // (e.g. a synchronizing call on the stream meanwhile).
  void end();
  // Queues one run of the captured work on `stream` (after end()).
  void replay(Stream& stream);

  bool capturing() const { return capturing_; }
  size_t num_nodes() const { return num_nodes_; }

 private:
  Stream* stream_;
  bool capturing_ = false;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  size_t num_nodes_ = 0;
};

}  // namespace kiln::runtime::cuda
