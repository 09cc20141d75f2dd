// DDP's semantics as graph ops (make_train_step with DataParallelConfig), run on the reference
// interpreter's simulated group: ranks on parts of a batch train exactly as one process on the
// whole batch; the gradients travel in buckets; parameter_broadcast starts every rank equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "frontend/kiln.h"
#include "ir/printer.h"
#include "ir/reference/group.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::has;
using testing::max_rel_diff;
using testing::rows;

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

struct Mlp {
  nn::MLP model{8, 16, /*seed=*/4};  // 8 -> 16 -> 8
  TracedGraph loss(const Tensor& x, const Tensor& y) {
    return trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square(model(b[0]) - b[1]))}; }, {x, y},
                 "loss");
  }
};

// `steps` steps of a data-parallel train step, rank r on its batch from starts[r]: each rank's
// losses and the final state of each rank.
struct GroupRun {
  std::vector<std::vector<double>> losses;  // [step][rank]
  std::vector<TrainState> states;
};
GroupRun run_group(const TrainStep& ts, std::vector<TrainState> starts, const std::vector<std::vector<HostTensor>>& batches, int steps) {
  GroupRun out;
  out.states = std::move(starts);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<HostTensor>> in;
    for (size_t r = 0; r < batches.size(); ++r) {
      const TrainState& st = out.states[r];
      std::vector<HostTensor> mine = st.params;
      mine.insert(mine.end(), st.state.begin(), st.state.end());
      mine.insert(mine.end(), batches[r].begin(), batches[r].end());
      mine.push_back(HostTensor::scalar(DType::F32, static_cast<double>(st.step + 1)));
      in.push_back(std::move(mine));
    }
    std::vector<std::vector<HostTensor>> res = interpret_group(ts.graph, in);
    std::vector<double> losses;
    for (size_t r = 0; r < batches.size(); ++r) {
      TrainState& st = out.states[r];
      losses.push_back(res[r][0].get(0));
      st.params.assign(res[r].begin() + 1, res[r].begin() + 1 + ts.num_params);
      st.state.assign(res[r].begin() + 1 + ts.num_params, res[r].end());
      ++st.step;
    }
    out.losses.push_back(losses);
  }
  return out;
}

TEST(DataParallel, RanksOnPartsOfTheBatchTrainAsOneProcessOnAllOfIt) {
  Tensor x = randn({12, 8}, 1), y = randn({12, 8}, 2);
  // SGD with momentum, whose steps follow the gradients' scale (AdamW's would hide a sum taken
  // for a mean); AdamW below.
  SGDConfig sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  for (const OptimizerConfig& opt : {OptimizerConfig(sgd), OptimizerConfig(AdamWConfig{.lr = 1e-2})}) {
    for (int64_t world : {2, 3}) {
      Mlp whole;
      TracedGraph whole_loss = whole.loss(x, y);
      TrainStep one = make_train_step(whole_loss, opt);
      TrainState single = one.init(whole_loss.parameters);
      std::vector<double> want = train(one, single, {x.data(), y.data()}, 4);
      Mlp part;  // the same initial weights (nn::MLP's seed 4)
      const int64_t n = 12 / world;
      TracedGraph part_loss = part.loss(Tensor(rows(x.data(), 0, n)), Tensor(rows(y.data(), 0, n)));
      DataParallelConfig dp;
      dp.world_size = world;
      // Two buckets of this model's gradients (proj: 32 + 512 bytes, fc: 64 + 512).
      dp.bucket_bytes = 600;
      TrainStep ddp = make_train_step(part_loss, opt, std::nullopt, dp);
      int all_reduces = 0;
      for (const Node* node : ddp.graph.nodes()) all_reduces += node->op() == Op::AllReduce;
      EXPECT_EQ(all_reduces, 2) << "two buckets of two gradients each";
      std::vector<std::vector<HostTensor>> batches;
      for (int64_t r = 0; r < world; ++r) batches.push_back({rows(x.data(), r * n, n), rows(y.data(), r * n, n)});
      GroupRun got = run_group(ddp, std::vector<TrainState>(batches.size(), ddp.init(part_loss.parameters)), batches, 4);
      for (size_t s = 0; s < want.size(); ++s) {
        double mean = 0;
        for (double l : got.losses[s]) mean += l / static_cast<double>(world);
        EXPECT_NEAR(mean, want[s], 1e-5 * want[s]) << world << " ranks, step " << s << ": the mean of the ranks' losses";
      }
      for (int64_t r = 0; r < world; ++r)
        for (int p = 0; p < ddp.num_params; ++p) {
          EXPECT_LT(max_rel_diff(got.states[static_cast<size_t>(r)].params[static_cast<size_t>(p)], single.params[static_cast<size_t>(p)]),
                    1e-5)
              << world << " ranks: rank " << r << "'s " << ddp.param_names[static_cast<size_t>(p)];
          EXPECT_EQ(got.states[static_cast<size_t>(r)].params[static_cast<size_t>(p)].to_doubles(),
                    got.states[0].params[static_cast<size_t>(p)].to_doubles())
              << "every rank holds the same parameters";
        }
    }
  }
  // Without the averaging the ranks drift apart: the check above can fail.
  Mlp alone;
  TracedGraph half = alone.loss(Tensor(rows(x.data(), 0, 6)), Tensor(rows(y.data(), 0, 6)));
  TrainStep plain = make_train_step(half, sgd);
  GroupRun apart = run_group(plain, std::vector<TrainState>(2, plain.init(half.parameters)), {{rows(x.data(), 0, 6), rows(y.data(), 0, 6)},
                                                                {rows(x.data(), 6, 6), rows(y.data(), 6, 6)}}, 2);
  EXPECT_GT(max_rel_diff(apart.states[0].params[0], apart.states[1].params[0]), 1e-4);
}

// FSDP: each rank holds a shard of every parameter and of its optimizer state; gathered back
// after every step, the parameters equal one process's on the whole batch.
TEST(DataParallel, ShardedParametersTrainAsOneProcessOnTheWholeBatch) {
  Tensor x = randn({12, 8}, 1), y = randn({12, 8}, 2);
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  for (int64_t world : {2, 3}) {
    Mlp whole;
    TracedGraph whole_loss = whole.loss(x, y);
    TrainStep one = make_train_step(whole_loss, adamw);
    TrainState single = one.init(whole_loss.parameters);
    std::vector<double> want = train(one, single, {x.data(), y.data()}, 3);
    Mlp part;
    const int64_t n = 12 / world;
    TracedGraph part_loss = part.loss(Tensor(rows(x.data(), 0, n)), Tensor(rows(y.data(), 0, n)));
    DataParallelConfig dp;
    dp.world_size = world;
    dp.shard_parameters = true;
    TrainStep fsdp = make_train_step(part_loss, adamw, std::nullopt, dp);
    int gathers = 0, scatters = 0, all_reduces = 0;
    for (const Node* node : fsdp.graph.nodes()) {
      gathers += node->op() == Op::AllGather;
      scatters += node->op() == Op::ReduceScatter;
      all_reduces += node->op() == Op::AllReduce;
    }
    EXPECT_EQ(scatters, 4) << "one reduce_scatter per gradient";
    EXPECT_EQ(all_reduces, 0);
    // The backward reads proj's weight (the gradient of its input) and nothing else whole: that
    // one is gathered again, the others once.
    EXPECT_EQ(gathers, 5) << print_graph(fsdp.graph);
    EXPECT_TRUE(fsdp.graph.find("fsdp_gather_proj_weight_again")) << print_graph(fsdp.graph);
    // 16x8 + 16 + 8x16 + 8 = 280 elements, ceil(280/world)-ish per rank: the step's parameter
    // and state inputs are shards.
    int64_t kept = 0, whole_kept = 0;
    for (int i = 0; i < fsdp.num_params + fsdp.num_state; ++i) kept += fsdp.graph.inputs()[static_cast<size_t>(i)]->meta().numel();
    for (int i = 0; i < one.num_params + one.num_state; ++i) whole_kept += one.graph.inputs()[static_cast<size_t>(i)]->meta().numel();
    EXPECT_LE(kept * world, whole_kept + 3 * 4 * world) << "shards, padded to a multiple of the world size";

    std::vector<std::vector<HostTensor>> batches;
    std::vector<TrainState> starts;
    for (int64_t r = 0; r < world; ++r) {
      batches.push_back({rows(x.data(), r * n, n), rows(y.data(), r * n, n)});
      starts.push_back(fsdp.init(fsdp.shard(part_loss.parameters, r)));
    }
    GroupRun got = run_group(fsdp, starts, batches, 3);
    for (int step = 0; step < 3; ++step) {
      double mean = 0;
      for (double l : got.losses[static_cast<size_t>(step)]) mean += l / static_cast<double>(world);
      EXPECT_NEAR(mean, want[static_cast<size_t>(step)], 1e-5 * want[static_cast<size_t>(step)]) << world << " ranks, step " << step;
    }
    std::vector<std::vector<HostTensor>> shards;
    for (const TrainState& st : got.states) shards.push_back(st.params);
    auto gathered = interpret_group(parameter_gather(fsdp), shards);
    for (int64_t r = 0; r < world; ++r)
      for (int p = 0; p < fsdp.num_params; ++p)
        EXPECT_LT(max_rel_diff(gathered[static_cast<size_t>(r)][static_cast<size_t>(p)], single.params[static_cast<size_t>(p)]), 1e-5)
            << world << " ranks: rank " << r << "'s " << fsdp.param_names[static_cast<size_t>(p)];
  }
}

TEST(DataParallel, TheBucketsAreLogged) {
  Mlp m;
  TracedGraph loss = m.loss(randn({4, 8}, 1), randn({4, 8}, 2));
  DataParallelConfig dp;
  dp.world_size = 2;
  std::string err;
  {
    ScopedEnv logs("KILN_LOGS", "ddp");
    ::testing::internal::CaptureStderr();
    make_train_step(loss, SGDConfig{}, std::nullopt, dp);
    err = ::testing::internal::GetCapturedStderr();
  }
  // Every gradient fits one default bucket of 25 MiB, the last parameter's first.
  EXPECT_TRUE(has(err, "[ddp] bucket 0: 4 gradients, 1120 bytes, one all_reduce (mean over 2 ranks): proj_bias, proj_weight, "
                       "fc_bias, fc_weight"))
      << err;
  EXPECT_FALSE(has(err, "bucket 1")) << err;
}

TEST(DataParallel, ParameterBroadcastStartsEveryRankFromRankZerosWeights) {
  Mlp m;
  TracedGraph loss = m.loss(randn({4, 8}, 1), randn({4, 8}, 2));
  TrainStep ts = make_train_step(loss, SGDConfig{});
  Graph g = parameter_broadcast(ts, 3);
  std::vector<std::vector<HostTensor>> in;
  for (int r = 0; r < 3; ++r) {
    std::vector<HostTensor> mine;
    for (int p = 0; p < ts.num_params; ++p) mine.push_back(random_tensor(ts.graph.inputs()[static_cast<size_t>(p)]->meta(), 10 * r + p + 1));
    in.push_back(std::move(mine));
  }
  auto out = interpret_group(g, in);
  for (int r = 0; r < 3; ++r)
    for (int p = 0; p < ts.num_params; ++p)
      EXPECT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(p)].to_doubles(), in[0][static_cast<size_t>(p)].to_doubles());
  EXPECT_NE(in[1][0].to_doubles(), in[0][0].to_doubles()) << "the ranks started apart";
}

TEST(DataParallel, ATrainerRefusesShardedParametersAndAnInterpretedGroup) {
  Mlp m;
  Tensor x = randn({4, 8}, 1), y = randn({4, 8}, 2);
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(m.model(b[0]) - b[1])); };
  DataParallelConfig dp;
  dp.world_size = 2;
  dp.shard_parameters = true;
  EXPECT_TRUE(has(testing::error_of([&] { Trainer(m.model, loss_fn, {x, y}, SGDConfig{}, {}, dp); }), "use make_train_step"));
  dp.shard_parameters = false;
  EXPECT_TRUE(has(testing::error_of([&] { Trainer(m.model, loss_fn, {x, y}, SGDConfig{}, {}, dp); }), "pass compiled_executor()"));
}

TEST(DataParallel, BadConfigsAreErrors) {
  Mlp m;
  TracedGraph loss = m.loss(randn({4, 8}, 1), randn({4, 8}, 2));
  DataParallelConfig dp;
  dp.world_size = 0;
  EXPECT_TRUE(has(testing::error_of([&] { make_train_step(loss, SGDConfig{}, std::nullopt, dp); }), "world_size 0 must be at least 1"));
  dp.world_size = 2;
  dp.bucket_bytes = 0;
  EXPECT_TRUE(has(testing::error_of([&] { make_train_step(loss, SGDConfig{}, std::nullopt, dp); }), "bucket_bytes 0 must be at least 1"));
}

}  // namespace
}  // namespace kiln
