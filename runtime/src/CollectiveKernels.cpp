//===- CollectiveKernels.cpp - fp8 collectives and fp8.world_size on the CPU ===//
//
// The CPU reference of a data-parallel plan's collectives: the process's
// communicator (Collective.h; Gloo in fp8-run) reduces host buffers in place.
// Without one, or with one rank, an all-reduce is the identity and the world
// size is 1, so the plan runs as a single process would.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "octet/runtime/Collective.h"

#include <cmath>
#include <cstdlib>
#include <cstring>


namespace octet::rt {

namespace {
std::shared_ptr<Communicator> &current() {
  static std::shared_ptr<Communicator> c;
  return c;
}
} // namespace

void setCommunicator(std::shared_ptr<Communicator> c) { current() = std::move(c); }

namespace {
std::unique_ptr<CollectiveSupport> &support() {
  static std::unique_ptr<CollectiveSupport> s;
  return s;
}
} // namespace

void registerCollectiveSupport(CollectiveSupport s) { support() = std::make_unique<CollectiveSupport>(std::move(s)); }
const CollectiveSupport *collectiveSupport() { return support().get(); }
Communicator *communicator() { return current().get(); }

std::string rankLauncher() {
  auto set = [](const char *name) {
    const char *v = std::getenv(name);
    return v && *v;
  };
  auto many = [&](const char *name) { return set(name) && std::strtoll(std::getenv(name), nullptr, 10) > 1; };
  if (set("WORLD_SIZE"))
    return "torchrun";
  if (set("SLURM_PROCID") && many("SLURM_STEP_NUM_TASKS"))
    return "slurm";
  if (many("OMPI_COMM_WORLD_SIZE") || many("PMI_SIZE"))
    return "mpi";
  return "";
}
int worldSize() { return current() ? current()->size() : 1; }

namespace {

/// The op's reduction, checked against its payload's type.
ReduceOp reductionOf(KernelContext &c, DType payload) {
  std::string red = c.attrString("reduction", "sum");
  if (red != "sum" && red != "max" && red != "avg")
    c.fail("reduction must be sum, max or avg, got '" + red + "'");
  if (isFp8(payload) && red == "avg")
    c.fail("an FP8 payload cannot be averaged; pre-divide it before its cast and sum it");
  return red == "max" ? ReduceOp::Max : red == "avg" ? ReduceOp::Avg : ReduceOp::Sum;
}

/// A host engine's communicator (the CPU reference reduces host buffers).
Communicator *hostCommunicator(KernelContext &c) {
  Communicator *comm = communicator();
  if (comm && comm->size() > 1 && comm->deviceMemory())
    c.fail("this process's communicator (" + comm->backend() + ") works on device memory; run the plan with "
           "--device cuda");
  return comm && comm->size() > 1 ? comm : nullptr;
}

/// The result in the plan's type (BF16/F16 values are computed widened to float32).
void setResult(KernelContext &c, Tensor out) {
  DType want = c.outputDType(0);
  c.setOutput(0, out.dtype == want || isFp8(want) ? std::move(out) : out.castTo(want));
}

void allReduceKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  ReduceOp op = reductionOf(c, x.dtype);
  // BF16/F16 values arrive widened to float32 (the executor rounds the result to the plan's type).
  Tensor out = x;
  if (op == ReduceOp::Max && out.dtype == DType::F32) // NaN counts as +Inf (the op's rule, MS-AMP's for amaxes)
    for (int64_t i = 0; i < out.numel(); ++i)
      if (std::isnan(out.data<float>()[i]))
        out.data<float>()[i] = INFINITY;
  if (Communicator *comm = hostCommunicator(c)) {
    comm->record(out.dtype, size_t(out.numel()));
    comm->allReduce(out.bytes.data(), size_t(out.numel()), out.dtype, op);
  }
  setResult(c, std::move(out));
}

/// A sharding op's world size: the plan's, which the run's must be (shards' shapes depend on it).
/// `whole`: the input is the whole tensor (of world_size shards), not one shard.
int64_t shardRanks(KernelContext &c, bool whole = true) {
  int64_t n = c.attrInt("world_size", 0);
  if (n < 1 || (whole && c.input(0).numel() % n))
    c.fail("world_size " + std::to_string(n) + " does not divide the input's " + std::to_string(c.input(0).numel()) +
           " elements");
  if (n != worldSize())
    c.fail("the plan shards across " + std::to_string(n) + " ranks (fp8-opt --shard-optimizer) and this run has " +
           std::to_string(worldSize()) + "; run it with --nproc-per-node " + std::to_string(n));
  return n;
}

void reduceScatterKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t n = shardRanks(c), part = x.numel() / n;
  ReduceOp op = reductionOf(c, x.dtype);
  Tensor out(x.dtype, {part});
  if (Communicator *comm = hostCommunicator(c)) {
    comm->record(x.dtype, size_t(x.numel()));
    comm->reduceScatter(x.bytes.data(), out.bytes.data(), size_t(part), x.dtype, op);
  } else { // one rank: the reduction of one tensor
    std::memcpy(out.bytes.data(), x.bytes.data(), out.bytes.size());
  }
  setResult(c, std::move(out));
}

void allGatherKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t n = shardRanks(c, false);
  Tensor out(x.dtype, {x.numel() * n});
  if (Communicator *comm = hostCommunicator(c)) {
    comm->record(x.dtype, size_t(x.numel()));
    comm->allGather(x.bytes.data(), out.bytes.data(), x.bytes.size());
  } else {
    std::memcpy(out.bytes.data(), x.bytes.data(), out.bytes.size());
  }
  setResult(c, std::move(out));
}

void shardKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t n = shardRanks(c), part = x.numel() / n;
  Tensor out(x.dtype, {part});
  size_t bytes = out.bytes.size();
  std::memcpy(out.bytes.data(), x.bytes.data() + size_t(communicator() ? communicator()->rank() : 0) * bytes, bytes);
  setResult(c, std::move(out));
}

void worldSizeKernel(KernelContext &c) {
  Tensor t(DType::F32, {});
  t.data<float>()[0] = float(worldSize());
  c.setOutput(0, std::move(t));
}

} // namespace

void registerCollectiveKernels(std::map<std::string, Kernel> &k) {
  k["fp8.all_reduce"] = allReduceKernel;
  // The reference runs the split all-reduce whole at its start; the done hands the result on.
  k["fp8.all_reduce_start"] = allReduceKernel;
  k["fp8.all_reduce_done"] = [](KernelContext &c) { c.setOutput(0, std::make_shared<Tensor>(c.input(0))); };
  k["fp8.world_size"] = worldSizeKernel;
  k["fp8.reduce_scatter"] = reduceScatterKernel;
  // The reference reduces the whole buffer at the start (every slice, this rank's included).
  k["fp8.reduce_scatter_start"] = [](KernelContext &c) {
    shardRanks(c);
    allReduceKernel(c);
  };
  k["fp8.all_gather"] = allGatherKernel;
  k["fp8.all_gather_start"] = allGatherKernel; // whole at its start, as the all-reduce's
  k["fp8.shard"] = shardKernel;
}

} // namespace octet::rt
