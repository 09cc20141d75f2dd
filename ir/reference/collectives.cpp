// Reference kernels of the collectives: what each rank of a group receives, computed from every
// rank's tensor (run_collective), the definition that the engines (NCCL, Gloo) are checked
// against. A lone interpreter is a group of one; for more ranks, interpret_group
// (ir/reference/group.h) hands run_collective all of them.
#include "ir/error.h"
#include "ir/reference/group.h"
#include "ir/reference/kernels.h"

namespace kiln::reference {

namespace {

// outer x n x inner: the elements before `dim`, along it, after it (row-major).
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const Shape& s, int64_t dim) {
  Split p;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    const int64_t e = s[static_cast<size_t>(i)];
    if (i < dim) p.outer *= e;
    else if (i == dim) p.n = e;
    else p.inner *= e;
  }
  return p;
}

int64_t normalized_dim(const Attrs& a, int64_t rank) {
  const int64_t d = a.get_int("dim");
  return d < 0 ? d + rank : d;
}

// dst[at_dst] = sum over the ranks of src[r][at_src], divided by the group's size for a mean:
// floats summed in double and rounded once, integers wrapping as two's complement.
class Reducer {
 public:
  Reducer(const std::vector<HostTensor>& src, const Attrs& a) : src_(src), mean_(a.get_string("op") == "mean") {}
  void operator()(HostTensor& dst, int64_t at_dst, int64_t at_src) const {
    if (is_floating(dst.dtype())) {
      double s = 0;
      for (const HostTensor& t : src_) s += t.get(at_src);
      dst.set(at_dst, mean_ ? s / static_cast<double>(src_.size()) : s);
    } else {
      uint64_t s = 0;
      for (const HostTensor& t : src_) s += static_cast<uint64_t>(t.get_int(at_src));
      dst.set_int(at_dst, static_cast<int64_t>(s));
    }
  }

 private:
  const std::vector<HostTensor>& src_;
  bool mean_;
};

void copy_element(const HostTensor& from, int64_t i, HostTensor& to, int64_t j) {
  if (is_floating(from.dtype())) to.set(j, from.get(i));
  else to.set_int(j, from.get_int(i));
}

}  // namespace

std::vector<HostTensor> run_collective(Op op, const std::vector<HostTensor>& ranks, const Attrs& a, const TensorMeta& out) {
  const int64_t world = static_cast<int64_t>(ranks.size());
  KILN_INTERNAL_ASSERT(world >= 1, "a group has at least one rank");
  if (a.get_int("world_size") != world)
    fail("{} is for a group of {} ranks, run by {}", op_name(op), a.get_int("world_size"), world);
  for (int64_t r = 1; r < world; ++r)
    if (ranks[static_cast<size_t>(r)].dtype() != ranks[0].dtype() || ranks[static_cast<size_t>(r)].shape() != ranks[0].shape())
      fail("{}: rank {} holds {} where rank 0 holds {}", op_name(op), r,
           TensorMeta(ranks[static_cast<size_t>(r)].dtype(), ranks[static_cast<size_t>(r)].shape()).str(),
           TensorMeta(ranks[0].dtype(), ranks[0].shape()).str());
  std::vector<HostTensor> results;
  for (int64_t r = 0; r < world; ++r) results.push_back(HostTensor::empty(out));
  const int64_t numel = ranks[0].numel();
  switch (op) {
    case Op::AllReduce: {
      Reducer reduce(ranks, a);
      for (HostTensor& y : results)
        for (int64_t i = 0; i < numel; ++i) reduce(y, i, i);
      break;
    }
    case Op::Reduce: {  // the reduction on dst, zeros elsewhere (HostTensor::empty is zeroed)
      Reducer reduce(ranks, a);
      HostTensor& y = results[static_cast<size_t>(a.get_int("dst"))];
      for (int64_t i = 0; i < numel; ++i) reduce(y, i, i);
      break;
    }
    case Op::Broadcast: {
      const HostTensor& from = ranks[static_cast<size_t>(a.get_int("src"))];
      for (HostTensor& y : results)
        for (int64_t i = 0; i < numel; ++i) copy_element(from, i, y, i);
      break;
    }
    case Op::AllGather: {  // rank s's tensor at [s*n, (s+1)*n) along dim, on every rank
      const Split p = split_at(ranks[0].shape(), normalized_dim(a, ranks[0].rank()));
      for (HostTensor& y : results)
        for (int64_t s = 0; s < world; ++s)
          for (int64_t o = 0; o < p.outer; ++o)
            for (int64_t k = 0; k < p.n; ++k)
              for (int64_t i = 0; i < p.inner; ++i)
                copy_element(ranks[static_cast<size_t>(s)], (o * p.n + k) * p.inner + i, y, (o * p.n * world + s * p.n + k) * p.inner + i);
      break;
    }
    case Op::ReduceScatter: {  // rank r: the reduction of part r (of world_size) along dim
      const Split p = split_at(ranks[0].shape(), normalized_dim(a, ranks[0].rank()));
      const int64_t m = p.n / world;
      Reducer reduce(ranks, a);
      for (int64_t r = 0; r < world; ++r)
        for (int64_t o = 0; o < p.outer; ++o)
          for (int64_t k = 0; k < m; ++k)
            for (int64_t i = 0; i < p.inner; ++i)
              reduce(results[static_cast<size_t>(r)], (o * m + k) * p.inner + i, (o * p.n + r * m + k) * p.inner + i);
      break;
    }
    default: KILN_INTERNAL_ASSERT(false, "run_collective is given a collective op");
  }
  return results;
}

void install_collectives(const Setter& set) {
  for (Op op : {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::Broadcast, Op::Reduce})
    set(op, [op](std::span<const HostTensor> in, const Attrs& a, std::span<const TensorMeta> out) {
      if (a.get_int("world_size") != 1)
        fail("{} over {} ranks needs the other ranks' tensors: run the graph with interpret_group "
             "(ir/reference/group.h), one input list per rank",
             op_name(op), a.get_int("world_size"));
      return run_collective(op, {in[0]}, a, out[0]);
    });
}

}  // namespace kiln::reference
