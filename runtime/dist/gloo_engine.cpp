// The host engine of the process group: Gloo (Debian's libgloo-dev) over TCP, meeting at the
// group's TcpStore. Gloo sums f32, f64 and integers; 16-bit floats are widened to f32 for the
// sum and rounded once at the end (as the reference does, which sums in double), and a mean is
// the sum scaled by 1/world_size before that rounding. all_gather and broadcast move bytes.
// reduce_scatter is an all_reduce whose part this rank keeps: Gloo 0.5 has reduce-scatter only
// as an old-style algorithm class on floats, and the CPU path is for tests and small groups.
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <cstring>

#include "ir/error.h"
#include "ir/host_tensor.h"
#include "runtime/dist/process_group.h"
#include "runtime/dist/tcp_store.h"

namespace kiln::runtime::dist {

namespace {

// Gloo's rendezvous over kiln's store.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(TcpStore& s, std::chrono::milliseconds timeout) : s_(s), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { s_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return s_.get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { s_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override { s_.wait(keys, timeout); }

 private:
  TcpStore& s_;
  std::chrono::milliseconds timeout_;  // the group's (KILN_DIST_TIMEOUT)
};

// The address Gloo's sockets listen on: the loopback for a group on one machine (MASTER_ADDR
// is a loopback address), else this machine's name.
std::string gloo_hostname(const std::string& master_addr) {
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0 || master_addr == "::1") return "127.0.0.1";
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) fail("gloo: gethostname failed: {}", std::strerror(errno));
  return name;
}

template <typename T>
void allreduce_sum(const std::shared_ptr<gloo::Context>& ctx, const T* in, T* out, size_t n, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(const_cast<T*>(in), n);
  opts.setOutput(out, n);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

template <typename T>
void reduce_sum(const std::shared_ptr<gloo::Context>& ctx, const T* in, T* out, size_t n, int root, std::chrono::milliseconds timeout) {
  gloo::ReduceOptions opts(ctx);
  opts.setInput(const_cast<T*>(in), n);
  opts.setOutput(out, n);
  opts.setRoot(root);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
  opts.setTimeout(timeout);
  gloo::reduce(opts);
}

// The sum over the ranks of n elements of `dtype` at `in`, into `out` (all ranks, or `root`
// only for a reduce), scaled by `scale` for a mean.
void sum_typed(const std::shared_ptr<gloo::Context>& ctx, DType dtype, const void* in, void* out, size_t n, int root, bool all,
               double scale, std::chrono::milliseconds timeout) {
  auto run = [&](auto* typed_in, auto* typed_out) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(typed_in)>>;
    if (all) allreduce_sum<T>(ctx, typed_in, typed_out, n, timeout);
    else reduce_sum<T>(ctx, typed_in, typed_out, n, root, timeout);
  };
  switch (dtype) {
    case DType::F32: run(static_cast<const float*>(in), static_cast<float*>(out)); break;
    case DType::F64: run(static_cast<const double*>(in), static_cast<double*>(out)); break;
    case DType::I64: run(static_cast<const int64_t*>(in), static_cast<int64_t*>(out)); break;
    case DType::I32: run(static_cast<const int32_t*>(in), static_cast<int32_t*>(out)); break;
    case DType::F16:
    case DType::BF16: {
      // Widened to f32 for the sum; rounded once, after the mean's scaling.
      const TensorMeta flat(dtype, {static_cast<int64_t>(n)});
      HostTensor src = HostTensor::borrow(flat, const_cast<void*>(in)), dst = HostTensor::borrow(flat, out);
      std::vector<float> wide(n), sum(n);
      for (size_t i = 0; i < n; ++i) wide[i] = static_cast<float>(src.get(static_cast<int64_t>(i)));
      run(static_cast<const float*>(wide.data()), sum.data());
      if (all || ctx->rank == root)
        for (size_t i = 0; i < n; ++i) dst.set(static_cast<int64_t>(i), static_cast<double>(sum[i]) * scale);
      return;
    }
    default: fail("gloo: cannot sum {} tensors across ranks", dtype_name(dtype));
  }
  if (scale == 1.0 || (!all && ctx->rank != root)) return;
  if (dtype == DType::F32)
    for (size_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = static_cast<float>(static_cast<float*>(out)[i] * scale);
  else if (dtype == DType::F64)
    for (size_t i = 0; i < n; ++i) static_cast<double*>(out)[i] *= scale;
}

}  // namespace

bool gloo_available() { return true; }

struct ProcessGroup::Gloo {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
};

ProcessGroup::Gloo& ProcessGroup::gloo() {
  if (gloo_) return *gloo_;
  auto g = std::make_shared<Gloo>();
  gloo::transport::tcp::attr attr;
  attr.hostname = gloo_hostname(o_.master_addr);
  try {
    g->device = gloo::transport::tcp::CreateDevice(attr);
    g->context = std::make_shared<gloo::rendezvous::Context>(o_.rank, o_.world_size);
    g->context->setTimeout(o_.timeout);
    GlooStore adapter(*store_, o_.timeout);
    gloo::rendezvous::PrefixStore prefixed("kiln/gloo", adapter);
    g->context->connectFullMesh(prefixed, g->device);
  } catch (const std::exception& e) {
    fail("rank {}: Gloo could not connect the group of {} ranks ({}): {}", o_.rank, o_.world_size, diagnose(seq_), e.what());
  }
  gloo_ = std::move(g);
  return *gloo_;
}

void ProcessGroup::run_on_host(const CollectiveArgs& c) {
  const int64_t seq = begin_collective(c.label);
  std::shared_ptr<gloo::Context> ctx;
  try {
    ctx = gloo().context;
  } catch (const Error& e) {
    fail("rank {}: {} (collective #{}): {}", o_.rank, c.label, seq, e.what());
  }
  const size_t in_bytes = static_cast<size_t>(c.input_numel) * static_cast<size_t>(dtype_size(c.dtype));
  if (in_bytes == 0) return;  // every rank holds the same (empty) shape: nothing travels
  const double scale = c.mean ? 1.0 / o_.world_size : 1.0;
  try {
    switch (c.op) {
      case Op::AllReduce:
        sum_typed(ctx, c.dtype, c.input, c.output, static_cast<size_t>(c.input_numel), 0, true, scale, o_.timeout);
        break;
      case Op::Reduce:
        sum_typed(ctx, c.dtype, c.input, c.output, static_cast<size_t>(c.input_numel), c.root, false, scale, o_.timeout);
        if (o_.rank != c.root) std::memset(c.output, 0, in_bytes);  // the reference's zeros elsewhere
        break;
      case Op::ReduceScatter: {
        std::vector<std::byte> whole(in_bytes);
        sum_typed(ctx, c.dtype, c.input, whole.data(), static_cast<size_t>(c.input_numel), 0, true, scale, o_.timeout);
        const size_t part = static_cast<size_t>(c.output_numel) * static_cast<size_t>(dtype_size(c.dtype));
        std::memcpy(c.output, whole.data() + part * static_cast<size_t>(o_.rank), part);
        break;
      }
      case Op::AllGather: {
        gloo::AllgatherOptions opts(ctx);
        opts.setInput(static_cast<uint8_t*>(const_cast<void*>(c.input)), in_bytes);
        opts.setOutput(static_cast<uint8_t*>(c.output), in_bytes * static_cast<size_t>(o_.world_size));
        opts.setTimeout(o_.timeout);
        gloo::allgather(opts);
        break;
      }
      case Op::Broadcast: {
        gloo::BroadcastOptions opts(ctx);
        if (o_.rank == c.root) opts.setInput(static_cast<uint8_t*>(const_cast<void*>(c.input)), in_bytes);
        opts.setOutput(static_cast<uint8_t*>(c.output), in_bytes);
        opts.setRoot(c.root);
        opts.setTimeout(o_.timeout);
        gloo::broadcast(opts);
        break;
      }
      default: KILN_INTERNAL_ASSERT(false, "run_on_host is given a collective");
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Gloo says what its socket saw ("Connection closed by peer", "Timed out"); the store says
    // which rank it was.
    fail("rank {}: {} (collective #{}) failed: {}. Gloo: {}", o_.rank, c.label, seq, diagnose(seq), e.what());
  }
}

}  // namespace kiln::runtime::dist
