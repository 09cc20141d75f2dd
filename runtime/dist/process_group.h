#pragma once
// The process group: the ranks of one program run SPMD in several processes (kiln launch, or
// torchrun's environment), and the engines that carry their collectives: Gloo over TCP for
// tensors in host memory, NCCL for tensors on GPUs. The compiled programs of both backends call
// it for their collective steps (codegen::Step::Kind::Collective); the reference interpreter's
// simulated group (ir/reference/group.h) is what both are checked against.
//
// Rank 0 serves a key-value store (TcpStore, c10d's TCPStore) that the ranks meet at: Gloo's
// rendezvous, NCCL's unique id, the check that every rank runs the same graph, and each rank's
// progress, which names the rank at fault when a collective fails or times out.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/op_registry.h"

namespace kiln::runtime::dist {

class TcpStore;

// Where and how the group meets; from_environment() reads what torchrun and kiln launch set.
struct GroupOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // the GPU a rank uses on its machine
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // How long a collective, or the group's set-up, may wait for the other ranks before it fails
  // naming the ranks it waits for (KILN_DIST_TIMEOUT, in seconds; PyTorch's default is 10 min).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};

  // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, KILN_DIST_TIMEOUT; kiln::Error for
  // one missing or malformed (naming it and `kiln launch`).
  static GroupOptions from_environment();
};

// One collective on contiguous buffers, as the lowering describes it (codegen::OpaqueCall):
// all_gather and reduce_scatter along dim 0 (the lowering moves other dims there first).
struct CollectiveArgs {
  Op op{};
  DType dtype = DType::F32;
  const void* input = nullptr;
  void* output = nullptr;
  int64_t input_numel = 0, output_numel = 0;
  bool mean = false;  // all_reduce / reduce_scatter / reduce: divide the sum by the world size
  int root = 0;       // broadcast's src, reduce's dst
  std::string label;  // "%g = all_reduce(%x, world_size=2, op=mean) : f32[64]", for errors
};

class ProcessGroup {
 public:
  explicit ProcessGroup(const GroupOptions& o);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return o_.rank; }
  int world_size() const { return o_.world_size; }
  const GroupOptions& options() const { return o_; }
  TcpStore& store() { return *store_; }

  // Runs one collective on host memory through Gloo and returns when this rank's output is
  // complete. kiln::Error naming the collective and the rank at fault when a peer died, hung
  // past the timeout, or runs another collective.
  void run_on_host(const CollectiveArgs& c);

  // Before a compiled program's first collective: every rank describes the collectives its
  // graph runs (`description`, one line per collective) and all must agree; kiln::Error showing
  // the first difference otherwise ("rank 1 runs all_reduce f32[99] where rank 0 runs ...").
  void check_same_program(const std::string& graph, const std::string& description);

  // This rank is about to run collective number `seq` (counted per group): recorded in the
  // store, so that a rank that times out can name the ranks that never came.
  int64_t begin_collective(const std::string& label);
  // Why a collective failed, as the store sees the group now: "rank 1 died (its connection to
  // the store closed)", or "rank 1 has not reached collective #7 (its last: #6)".
  std::string diagnose(int64_t seq);
  int64_t collectives_begun() const { return seq_; }

  // An engine kept by the group for as long as it lives (NCCL's communicator, per device).
  struct Engine {
    virtual ~Engine() = default;
  };
  std::shared_ptr<Engine>& engine_slot(const std::string& name);

 private:
  struct Gloo;
  Gloo& gloo();
  struct Diagnosis {
    std::string text;
    bool found_death = false;  // a rank's connection to the store closed, or the store is gone
  };
  Diagnosis diagnose_now(int64_t seq);
  GroupOptions o_;
  std::unique_ptr<TcpStore> store_;
  std::shared_ptr<Gloo> gloo_;  // connected on the first host collective (shared: its type is the engine file's)
  int64_t seq_ = 0;             // collectives begun by this rank
  bool failed_ = false;         // a collective failed: leaving waits for no one
  int64_t programs_checked_ = 0;
  std::vector<std::pair<std::string, std::shared_ptr<Engine>>> engines_;
};

// Whether this build has the Gloo engine (collectives on host memory across processes).
bool gloo_available();

// The group of this process: set by init_process_group, or nullptr. Compiled programs look it
// up when they run a collective over more than one rank.
ProcessGroup* default_group();
// Joins the group (blocking until every rank has joined, up to o.timeout); kiln::Error when
// one exists already or the rendezvous fails.
ProcessGroup& init_process_group(const GroupOptions& o);
// Leaves it: says goodbye to the store (a clean exit, not a death).
void destroy_process_group();

// The group for a collective of `world_size` ranks, or an error saying how to make one that fits.
ProcessGroup& group_for(int64_t world_size, const std::string& label);

}  // namespace kiln::runtime::dist
