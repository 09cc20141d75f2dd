#pragma once
// DDP's gradient averaging as graph ops (beside frontend/fsdp.h, FSDP's sharding): buckets of
// about DataParallelConfig::bucket_bytes (at least one gradient each, one dtype each), filled
// from the last parameter back, as the backward makes the gradients; each bucket's gradients
// flattened and joined, averaged over the ranks by one all_reduce, and split back into the
// parameters' shapes. KILN_LOGS=ddp names each bucket.
#include <vector>

#include "frontend/optim.h"
#include "frontend/param_update.h"
#include "ir/builder.h"

namespace kiln {

// kiln::Error for a world size or bucket size below 1.
void check_data_parallel(const DataParallelConfig& dp);
// Replaces each u.grad with its mean over the ranks.
void all_reduce_gradients(Builder& b, const DataParallelConfig& dp, std::vector<ParamUpdate>& updates);

}  // namespace kiln
