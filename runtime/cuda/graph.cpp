// CUDA graph capture and replay.
#include "runtime/cuda/graph.h"

#include "ir/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::runtime::cuda {

using detail::api;

GraphCapture::GraphCapture(Stream& stream) : stream_(&stream) {
  ScopedContext ctx(stream.device());
  check(api().cuStreamBeginCapture(stream.raw(), CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture");
  capturing_ = true;
}

GraphCapture::~GraphCapture() {
  if (capturing_) {
    CUgraph discarded = nullptr;
    api().cuStreamEndCapture(stream_->raw(), &discarded);
    if (discarded) api().cuGraphDestroy(discarded);
  }
  if (exec_) api().cuGraphExecDestroy(exec_);
  if (graph_) api().cuGraphDestroy(graph_);
}

void GraphCapture::end() {
  if (!capturing_) kiln::fail("GraphCapture::end: the capture has already ended");
  ScopedContext ctx(stream_->device());
  capturing_ = false;
  CUresult r = api().cuStreamEndCapture(stream_->raw(), &graph_);
  if (r != CUDA_SUCCESS || !graph_)
    kiln::fail("CUDA graph capture failed: {} (was the stream synchronized, or a blocking copy made, while capturing?)",
               error_string(r));
  check(api().cuGraphGetNodes(graph_, nullptr, &num_nodes_), "cuGraphGetNodes");
  check(api().cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
}

void GraphCapture::replay(Stream& stream) {
  if (!exec_) kiln::fail("GraphCapture::replay: the capture has not ended (call end() first)");
  ScopedContext ctx(stream.device());
  check(api().cuGraphLaunch(exec_, stream.raw()), "cuGraphLaunch");
}

}  // namespace kiln::runtime::cuda
