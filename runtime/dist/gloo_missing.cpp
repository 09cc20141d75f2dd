// A build without Gloo (the GPU machine has no libgloo-dev): the group forms and NCCL works,
// and a collective on host memory says what is missing.
#include "ir/error.h"
#include "runtime/dist/process_group.h"
#include "runtime/dist/tcp_store.h"

namespace kiln::runtime::dist {

bool gloo_available() { return false; }

struct ProcessGroup::Gloo {};

ProcessGroup::Gloo& ProcessGroup::gloo() {
  fail("rank {}: this build of kiln has no Gloo engine, so collectives on host memory across processes cannot run (on Debian: "
       "apt-get install libgloo-dev, then rebuild)",
       o_.rank);
}

void ProcessGroup::run_on_host(const CollectiveArgs& c) {
  begin_collective(c.label);
  gloo();
}

}  // namespace kiln::runtime::dist
