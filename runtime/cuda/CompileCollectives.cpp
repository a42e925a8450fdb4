//===- CompileCollectives.cpp - The CUDA executor's collective ops -------===//
//
// A data-parallel plan's collectives on the process's communicator (NCCL): all-reduces (whole or
// split in a start and a done), the sharded optimizer's reduce-scatters, all-gathers and shards,
// and the world size. Collectives run on one high-priority stream in plan order, with events.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"
#include "octet/runtime/Collective.h"

namespace octet::rt::cuda::detail {

int CudaExecutor::newCollective() {
  if (!commStream_) { // the highest priority: a collective's kernels start as soon as the SMs allow
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    cudaCheck(cudaStreamCreateWithPriority(&commStream_, cudaStreamNonBlocking, greatest), "collectives' stream");
  }
  cudaEvent_t a, b;
  cudaCheck(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), "collective event");
  cudaCheck(cudaEventCreateWithFlags(&b, cudaEventDisableTiming), "collective event");
  collReady_.push_back(a);
  collDone_.push_back(b);
  return int(collDone_.size() - 1);
}

/// The op's launches if it is a collective (true), else nothing (false).
bool CudaExecutor::compileCollective(const PlanOp &op, std::vector<Step> &out) {
  const std::string &t = op.type;
  auto outPtr = [&](size_t i) { return devicePtr(op.outputs[i]); };
  auto outBytes = [&](size_t i) {
    return size_t(numElements(shapeOf(op.outputs[i]))) * dtypeSize(plan_.values[size_t(op.outputs[i])].dtype);
  };
  if (t == "fp8.all_reduce" || t == "fp8.all_reduce_start") {
    // Data parallelism: the process's communicator (NCCL) reduces the result buffer in place on the
    // collectives' stream; with none (one rank) the op is a copy, with NaN as +Inf for max. A plain
    // all-reduce makes the step's stream wait at once; a start, at its fp8.all_reduce_done.
    Communicator *comm = communicator();
    if (comm && !comm->deviceMemory())
      fail(op, "this process's communicator (" + comm->backend() + ") reduces host memory; start the ranks "
               "with --device cuda for NCCL, or run them all with --device cpu");
    std::string red = attrStr(op, "reduction", "sum");
    DType dt = typeOf(op.inputs[0]);
    if (red != "sum" && red != "max" && red != "avg")
      fail(op, "reduction must be sum, max or avg, got '" + red + "'");
    if (isFp8(dt) && red == "avg")
      fail(op, "an FP8 payload cannot be averaged; pre-divide it before its cast and sum it");
    const void *in = devicePtr(op.inputs[0]);
    void *o = outPtr(0);
    size_t n = size_t(numElements(shapeOf(op.inputs[0]))), bytes = outBytes(0);
    bool nanAsInf = red == "max" && dt == DType::F32, wait = t == "fp8.all_reduce";
    ReduceOp r = red == "max" ? ReduceOp::Max : red == "avg" ? ReduceOp::Avg : ReduceOp::Sum;
    int ev = -1;
    if (comm && comm->size() > 1) {
      ev = newCollective();
      allReduces_.push_back({dt, n});
      allReducesLast_.push_back(op.lastMicroBatch);
    }
    if (!wait)
      collectiveOf_[op.outputs[0]] = ev;
    out.push_back([=](cudaStream_t s) -> std::string {
      if (o != in) {
        cudaError_t e = cudaMemcpyAsync(o, in, bytes, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
          return std::string("all-reduce copy: ") + cudaGetErrorString(e);
      }
      if (nanAsInf)
        if (std::string err = dev::nanToInf(static_cast<float *>(o), int64_t(n), s); !err.empty())
          return err;
      if (ev < 0)
        return "";
      cudaEventRecord(collReady_[size_t(ev)], s);
      cudaStreamWaitEvent(commStream_, collReady_[size_t(ev)], 0);
      comm->allReduce(o, n, dt, r, commStream_);
      cudaEventRecord(collDone_[size_t(ev)], commStream_);
      if (wait)
        cudaStreamWaitEvent(s, collDone_[size_t(ev)], 0);
      cudaError_t e = cudaGetLastError();
      return e == cudaSuccess ? "" : std::string("all-reduce: ") + cudaGetErrorString(e);
    });
    return true;
  }
  if (t == "fp8.all_reduce_done") {
    auto it = collectiveOf_.find(op.inputs[0]);
    if (it == collectiveOf_.end())
      fail(op, "its operand is not an fp8.all_reduce_start's result");
    int ev = it->second;
    const void *in = devicePtr(op.inputs[0]);
    void *o = outPtr(0);
    size_t bytes = outBytes(0);
    out.push_back([=](cudaStream_t s) -> std::string {
      if (ev >= 0)
        cudaStreamWaitEvent(s, collDone_[size_t(ev)], 0);
      if (o != in) // the plan gives the done its start's buffer; a copy only if it did not
        if (cudaError_t e = cudaMemcpyAsync(o, in, bytes, cudaMemcpyDeviceToDevice, s); e != cudaSuccess)
          return std::string("all-reduce done copy: ") + cudaGetErrorString(e);
      return "";
    });
    return true;
  }
  if (t == "fp8.reduce_scatter" || t == "fp8.reduce_scatter_start" || t == "fp8.all_gather" ||
      t == "fp8.all_gather_start" || t == "fp8.shard") {
    // The sharded optimizer's (fp8-opt --shard-optimizer), whose shapes fix the world size: the
    // run's must be the plan's. A reduce-scatter or all-gather runs on the collectives' stream and
    // the step's stream waits for it at once (a start: at its fp8.all_reduce_done);
    // a shard is this rank's slice of a replicated tensor.
    Communicator *comm = communicator();
    int64_t n = attrInt(op, "world_size", 0);
    if (n != worldSize())
      fail(op, "the plan shards across " + std::to_string(n) + " ranks (fp8-opt --shard-optimizer) and this run has " +
                   std::to_string(worldSize()) + "; run it with --nproc-per-node " + std::to_string(n));
    if (comm && !comm->deviceMemory())
      fail(op, "this process's communicator (" + comm->backend() + ") works on host memory; start the ranks "
               "with --device cuda for NCCL, or run them all with --device cpu");
    DType dt = typeOf(op.inputs[0]);
    const char *in = static_cast<const char *>(devicePtr(op.inputs[0]));
    char *o = static_cast<char *>(outPtr(0));
    size_t outB = outBytes(0), inElems = size_t(numElements(shapeOf(op.inputs[0])));
    size_t inB = inElems * dtypeSize(dt);
    bool gather = t == "fp8.all_gather" || t == "fp8.all_gather_start";
    bool start = t == "fp8.reduce_scatter_start" || t == "fp8.all_gather_start";
    if (n < 1 || typeOf(op.outputs[0]) != dt ||
        (gather ? outB != inB * size_t(n) : start ? outB != inB : outB * size_t(n) != inB))
      fail(op, "its input and result sizes do not match world_size " + std::to_string(n));
    size_t from = t == "fp8.shard" ? size_t(comm ? comm->rank() : 0) * outB : 0;
    if (start)
      collectiveOf_[op.outputs[0]] = -1; // its done waits for nothing unless a collective runs
    if (t == "fp8.shard" || n == 1) { // one rank: each collective is a copy
      out.push_back([=](cudaStream_t s) -> std::string {
        if (o == in + from) // a start in place
          return "";
        cudaError_t e = cudaMemcpyAsync(o, in + from, outB, cudaMemcpyDeviceToDevice, s);
        return e == cudaSuccess ? "" : std::string("shard copy: ") + cudaGetErrorString(e);
      });
      return true;
    }
    bool scatter = !gather;
    std::string red = attrStr(op, "reduction", "sum");
    if (scatter && red != "sum" && red != "max" && red != "avg")
      fail(op, "reduction must be sum, max or avg, got '" + red + "'");
    if (scatter && isFp8(dt) && red == "avg")
      fail(op, "an FP8 payload cannot be averaged; pre-divide it before its cast and sum it");
    ReduceOp r = red == "max" ? ReduceOp::Max : red == "avg" ? ReduceOp::Avg : ReduceOp::Sum;
    int ev = newCollective();
    allReduces_.push_back({dt, inElems}); // the payload handed over, as the CPU reference counts it
    allReducesLast_.push_back(op.lastMicroBatch);
    // A start reduces in place in the whole buffer (NCCL's in-place reduce-scatter: this rank's
    // slice of it receives), the done waits.
    // An all-gather's start copies the shard into its slot and gathers in place (NCCL's rule).
    size_t part = start && scatter ? inElems / size_t(n) : scatter ? outB / dtypeSize(dt) : 0;
    size_t mine = size_t(comm->rank()) * (gather ? inB : part * dtypeSize(dt));
    if (start)
      collectiveOf_[op.outputs[0]] = ev;
    out.push_back([=](cudaStream_t s) -> std::string {
      char *to = gather ? o + mine : o;
      if (start && to != in)
        if (cudaError_t e = cudaMemcpyAsync(to, in, inB, cudaMemcpyDeviceToDevice, s); e != cudaSuccess)
          return std::string("collective start copy: ") + cudaGetErrorString(e);
      cudaEventRecord(collReady_[size_t(ev)], s);
      cudaStreamWaitEvent(commStream_, collReady_[size_t(ev)], 0);
      if (start && scatter)
        comm->reduceScatter(o, o + mine, part, dt, r, commStream_);
      else if (start)
        comm->allGather(o + mine, o, inB, commStream_);
      else if (scatter)
        comm->reduceScatter(in, o, part, dt, r, commStream_);
      else
        comm->allGather(in, o, inB, commStream_);
      cudaEventRecord(collDone_[size_t(ev)], commStream_);
      if (!start)
        cudaStreamWaitEvent(s, collDone_[size_t(ev)], 0);
      cudaError_t e = cudaGetLastError();
      return e == cudaSuccess ? "" : std::string(scatter ? "reduce-scatter: " : "all-gather: ") + cudaGetErrorString(e);
    });
    return true;
  }
  if (t == "fp8.world_size") {
    auto *o = static_cast<float *>(outPtr(0));
    float n = float(worldSize());
    cudaCheck(cudaMemcpy(o, &n, sizeof n, cudaMemcpyHostToDevice), "world size"); // constant for the run
    return true;
  }
  return false;
}

} // namespace octet::rt::cuda::detail
