#include "frontend/ddp.h"

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/log.h"

namespace kiln {

void check_data_parallel(const DataParallelConfig& dp) {
  if (dp.world_size < 1) fail("DataParallel: world_size {} must be at least 1", dp.world_size);
  if (dp.bucket_bytes < 1) fail("DataParallel: bucket_bytes {} must be at least 1", dp.bucket_bytes);
}

void all_reduce_gradients(Builder& b, const DataParallelConfig& dp, std::vector<ParamUpdate>& updates) {
  const bool log = log_enabled("ddp");
  size_t k = updates.size();
  for (int bucket = 0; k > 0; ++bucket) {
    const DType dt = updates[k - 1].grad.meta().dtype;
    std::vector<size_t> members;
    int64_t bytes = 0;
    while (k > 0 && updates[k - 1].grad.meta().dtype == dt &&
           (members.empty() || bytes + updates[k - 1].grad.meta().nbytes() <= dp.bucket_bytes)) {
      bytes += updates[k - 1].grad.meta().nbytes();
      members.push_back(--k);
    }
    std::vector<Value> flat;
    for (size_t m : members) flat.push_back(b.reshape(b.wrap(updates[m].grad), {-1}).v);
    Var joined = flat.size() == 1 ? b.wrap(flat[0]) : b.cat(flat, 0);
    Var mean = b.op(Op::AllReduce, {joined.v}, Attrs{{"world_size", dp.world_size}, {"op", std::string("mean")}});
    int64_t offset = 0;
    std::string names;
    for (size_t m : members) {
      const TensorMeta& meta = updates[m].grad.meta();
      updates[m].grad = b.reshape(b.slice(mean.v, 0, offset, offset + meta.numel()), meta.shape).v;
      offset += meta.numel();
      names += (names.empty() ? "" : ", ") + updates[m].param.name();
    }
    if (log)
      log_line("ddp", fmt::format("bucket {}: {} gradients, {} bytes, one all_reduce (mean over {} ranks): {}", bucket,
                                  members.size(), bytes, dp.world_size, names));
  }
}

}  // namespace kiln
