// NCCL through dlopen: the few declarations below are NCCL's stable C ABI (nccl.h, unchanged
// in these parts since NCCL 2.10, which added ncclAvg), so kiln needs no NCCL headers to build:
// Debian's CUDA 11.8 has none, and CI compiles this file all the same.
#include "runtime/cuda/nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/dist/tcp_store.h"

namespace kiln::runtime::cuda {

namespace {

// ---- from nccl.h
using ncclComm_t = struct ncclComm*;
struct ncclUniqueId {
  char internal[128];
};
using ncclResult_t = int;  // 0 ncclSuccess ... 7 ncclInProgress
constexpr ncclResult_t ncclSuccess = 0, ncclInProgress = 7;
enum ncclDataType_t { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
                      ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum ncclRedOp_t { ncclSum = 0, ncclAvg = 4 };

struct NcclApi {
  std::string why;  // empty when loaded
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
};

const NcclApi& api() {
  static const NcclApi a = [] {
    NcclApi n;
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = ::dlerror();
      n.why = fmt::format("NCCL is not installed here: libnccl.so.2 not found ({})", err ? err : "dlopen failed");
      return n;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (!fn && n.why.empty()) n.why = fmt::format("libnccl.so.2 has no {} (NCCL 2.10 or later is needed)", name);
    };
    get(n.GetUniqueId, "ncclGetUniqueId");
    get(n.CommInitRank, "ncclCommInitRank");
    get(n.CommAbort, "ncclCommAbort");
    get(n.CommDestroy, "ncclCommDestroy");
    get(n.CommGetAsyncError, "ncclCommGetAsyncError");
    get(n.GetErrorString, "ncclGetErrorString");
    get(n.GetLastError, "ncclGetLastError");
    get(n.AllReduce, "ncclAllReduce");
    get(n.Reduce, "ncclReduce");
    get(n.Broadcast, "ncclBroadcast");
    get(n.AllGather, "ncclAllGather");
    get(n.ReduceScatter, "ncclReduceScatter");
    return n;
  }();
  if (!a.why.empty()) fail("{}", a.why);
  return a;
}

ncclDataType_t nccl_type(DType t, const std::string& label) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    default: fail("{}: NCCL has no {} type", label, dtype_name(t));
  }
}

// The group's communicator (one per group: one GPU a rank), aborted rather than destroyed
// after a failure, since a destroy would wait for the kernels that hang.
struct Communicator final : dist::ProcessGroup::Engine {
  ncclComm_t comm = nullptr;
  int device = -1;
  bool broken = false;
  ~Communicator() override {
    if (!comm) return;
    if (broken) api().CommAbort(comm);
    else api().CommDestroy(comm);
  }
};

Communicator& communicator(dist::ProcessGroup& g, int device) {
  std::shared_ptr<dist::ProcessGroup::Engine>& slot = g.engine_slot("nccl");
  if (slot) {
    auto& c = static_cast<Communicator&>(*slot);
    if (c.device != device)
      fail("rank {}: the process group's NCCL communicator is on GPU {}; a collective on GPU {} needs a group of its own (one GPU "
           "a rank)", g.rank(), c.device, device);
    if (c.broken) fail("rank {}: the process group's NCCL communicator was aborted after an earlier failure", g.rank());
    return c;
  }
  const NcclApi& n = api();
  ncclUniqueId id{};
  const std::string key = "kiln/nccl/unique_id";
  if (g.rank() == 0) {
    if (ncclResult_t r = n.GetUniqueId(&id); r != ncclSuccess) fail("rank 0: ncclGetUniqueId failed: {}", n.GetErrorString(r));
    g.store().set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<char> got = g.store().get(key, g.options().timeout);
    KILN_INTERNAL_ASSERT(got.size() == sizeof id.internal, "NCCL's unique id is 128 bytes");
    std::copy(got.begin(), got.end(), id.internal);
  }
  auto c = std::make_shared<Communicator>();
  c->device = device;
  ScopedContext ctx(device);
  if (ncclResult_t r = n.CommInitRank(&c->comm, g.world_size(), id, g.rank()); r != ncclSuccess)
    fail("rank {}: ncclCommInitRank for a group of {} on GPU {} failed: {} ({})", g.rank(), g.world_size(), device, n.GetErrorString(r),
         g.diagnose(g.collectives_begun()));
  slot = c;
  return *c;
}

}  // namespace

void run_nccl(dist::ProcessGroup& g, const dist::CollectiveArgs& c, int device, Stream& stream) {
  const int64_t seq = g.begin_collective(c.label);
  const NcclApi& n = api();
  Communicator& comm = communicator(g, device);
  const ncclDataType_t t = nccl_type(c.dtype, c.label);
  const ncclRedOp_t op = c.mean ? ncclAvg : ncclSum;
  const size_t count = static_cast<size_t>(c.input_numel);
  if (count == 0) return;
  ncclResult_t r = ncclSuccess;
  switch (c.op) {
    case Op::AllReduce: r = n.AllReduce(c.input, c.output, count, t, op, comm.comm, stream.raw()); break;
    case Op::Reduce:
      // NCCL leaves the other ranks' outputs as they were: the reference gives them zeros.
      if (g.rank() != c.root) memset_async(c.output, 0, count * static_cast<size_t>(dtype_size(c.dtype)), stream);
      r = n.Reduce(c.input, c.output, count, t, op, c.root, comm.comm, stream.raw());
      break;
    case Op::Broadcast: r = n.Broadcast(c.input, c.output, count, t, c.root, comm.comm, stream.raw()); break;
    case Op::AllGather: r = n.AllGather(c.input, c.output, count, t, comm.comm, stream.raw()); break;
    case Op::ReduceScatter:
      r = n.ReduceScatter(c.input, c.output, static_cast<size_t>(c.output_numel), t, op, comm.comm, stream.raw());
      break;
    default: KILN_INTERNAL_ASSERT(false, "run_nccl is given a collective");
  }
  if (r != ncclSuccess && r != ncclInProgress)
    fail("rank {}: {} (collective #{}): NCCL refused it: {} ({})", g.rank(), c.label, seq, n.GetErrorString(r), n.GetLastError(comm.comm));
}

void wait_for_collectives(dist::ProcessGroup& g, Stream& stream, const std::string& what) {
  std::shared_ptr<dist::ProcessGroup::Engine>& slot = g.engine_slot("nccl");
  if (!slot) return stream.synchronize();  // no NCCL collective was enqueued (a group of one)
  auto& comm = static_cast<Communicator&>(*slot);
  const NcclApi& n = api();
  const auto start = std::chrono::steady_clock::now(), deadline = start + g.options().timeout;
  auto next_look = start + std::chrono::milliseconds(250);
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(200))) {
    if (stream.query()) return;
    ncclResult_t async = ncclSuccess;
    n.CommGetAsyncError(comm.comm, &async);
    bool failed = async != ncclSuccess && async != ncclInProgress;
    // NCCL's kernels wait for a dead peer until the timeout: the store knows sooner (its
    // connection closed), so a long wait asks it four times a second.
    const auto now = std::chrono::steady_clock::now();
    bool peer_died = false;
    if (now > next_look) {
      next_look = now + std::chrono::milliseconds(250);
      try {
        peer_died = !g.store().dead_ranks().empty();
      } catch (const Error&) {
        peer_died = true;  // the store itself is gone: rank 0 died
      }
    }
    if (failed || peer_died || now > deadline) {
      const std::string why = g.diagnose(g.collectives_begun());
      comm.broken = true;
      n.CommAbort(comm.comm);
      comm.comm = nullptr;
      fail("rank {}: {}: the collectives {} ({}). The NCCL communicator was aborted", g.rank(), what,
           failed      ? fmt::format("failed: NCCL {}", n.GetErrorString(async))
           : peer_died ? std::string("cannot finish: a rank of the group is gone")
                       : fmt::format("did not finish within {:.1f} s", std::chrono::duration<double>(g.options().timeout).count()),
           why);
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace kiln::runtime::cuda
