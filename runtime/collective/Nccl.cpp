//===- Nccl.cpp - Device-memory collectives through NCCL ------------------===//
//
// Stock NCCL (2.24+): float32/16, bfloat16 and both FP8 formats are reduced
// by NCCL itself (ncclFloat8e4m3 / ncclFloat8e5m2), average through ncclAvg.
// The communicator is non-blocking, so no call waits on a peer forever: each
// NCCL call and each step's end poll ncclCommGetAsyncError against the
// timeout, and a peer that is gone or stuck aborts the communicator
// (ncclCommAbort) and fails this rank with one line.
//
//===----------------------------------------------------------------------===//
#include "TcpStore.h"

#include "octet/runtime/Distributed.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <thread>
#include <utility>

namespace octet::rt {

namespace {

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(const DistEnv &env, TcpStore &store, std::chrono::milliseconds timeout)
      : rank_(env.rank), size_(env.size) {
    timeout_ = timeout;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw Error("rank " + std::to_string(rank_) + ": NCCL needs a CUDA device; there is none (run with --device cpu)");
    if (env.localRank >= devices)
      throw Error("rank " + std::to_string(rank_) + ": LOCAL_RANK " + std::to_string(env.localRank) + " but " +
                  std::to_string(devices) + " CUDA device(s); start at most one rank per GPU");
    cudaSetDevice(env.localRank); // one GPU per rank: the executor allocates on the current device
    ncclUniqueId id;
    if (rank_ == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store.set("octet.nccl.id", std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<char> v = store.get("octet.nccl.id");
      if (v.size() != sizeof id.internal)
        throw Error("rank " + std::to_string(rank_) + ": the NCCL id from rank 0 is malformed");
      std::copy(v.begin(), v.end(), id.internal);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    check(ncclCommInitRankConfig(&comm_, size_, id, rank_, &cfg), "ncclCommInitRankConfig");
    settle("connecting to the other ranks");
    cudaMalloc(&scratch_, sizeof(float));
  }

  ~NcclCommunicator() override {
    if (comm_) {
      if (aborted_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (scratch_)
      cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  bool deviceMemory() const override { return true; }

  /// NCCL's element type and reduction for `dtype` and `op` (`what` names the collective in errors).
  static std::pair<ncclDataType_t, ncclRedOp_t> reduction(DType dtype, ReduceOp op, const char *what) {
    ncclDataType_t t;
    switch (dtype) {
    case DType::F32: t = ncclFloat32; break;
    case DType::F16: t = ncclFloat16; break;
    case DType::BF16: t = ncclBfloat16; break;
    case DType::F8E4M3FN: t = ncclFloat8e4m3; break;
    case DType::F8E5M2: t = ncclFloat8e5m2; break;
    default: throw Error(std::string(what) + ": element type " + dtypeName(dtype) + " is not reducible");
    }
    if (op == ReduceOp::Avg && isFp8(dtype))
      throw Error(std::string(what) + ": an FP8 payload cannot be averaged (pre-divide it and sum)");
    return {t, op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Max ? ncclMax : ncclAvg};
  }

  void allReduce(void *data, size_t count, DType dtype, ReduceOp op, void *stream) override {
    if (!count)
      return;
    auto [t, r] = reduction(dtype, op, "all-reduce");
    check(ncclAllReduce(data, data, count, t, r, comm_, static_cast<cudaStream_t>(stream)), "all-reduce");
    settle("all-reduce");
  }

  void reduceScatter(const void *send, void *recv, size_t count, DType dtype, ReduceOp op, void *stream) override {
    if (!count)
      return;
    auto [t, r] = reduction(dtype, op, "reduce-scatter");
    check(ncclReduceScatter(send, recv, count, t, r, comm_, static_cast<cudaStream_t>(stream)), "reduce-scatter");
    settle("reduce-scatter");
  }

  void allGather(const void *send, void *recv, size_t bytes, void *stream) override {
    if (!bytes)
      return;
    check(ncclAllGather(send, recv, bytes, ncclUint8, comm_, static_cast<cudaStream_t>(stream)), "all-gather");
    settle("all-gather");
  }

  void broadcast(void *data, size_t bytes, int root, void *stream) override {
    check(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, static_cast<cudaStream_t>(stream)), "broadcast");
    settle("broadcast");
  }

  void barrier() override {
    allReduce(scratch_, 1, DType::F32, ReduceOp::Sum, nullptr);
    waitFor(nullptr);
  }


  void waitFor(void *stream) override {
    auto s = static_cast<cudaStream_t>(stream);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int spin = 0;; ++spin) {
      cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess)
        return;
      if (e != cudaErrorNotReady)
        throw Error("rank " + std::to_string(rank_) + ": the step failed on the GPU (" + cudaGetErrorString(e) + ")");
      ncclResult_t a = ncclSuccess;
      ncclCommGetAsyncError(comm_, &a);
      if (a != ncclSuccess && a != ncclInProgress)
        fail("a collective", a);
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        throw Error("rank " + std::to_string(rank_) + ": the step's collectives did not finish within " +
                    std::to_string(timeout_.count() / 1000) + " s: " + peer() + " is gone or stuck (NCCL aborted)");
      }
      if (spin > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

private:
  std::string peer() const { return size_ == 2 ? "rank " + std::to_string(1 - rank_) : "a peer"; }

  void abort() {
    if (!aborted_ && comm_)
      ncclCommAbort(comm_);
    aborted_ = true;
    comm_ = nullptr;
  }

  [[noreturn]] void fail(const char *what, ncclResult_t r) {
    std::string msg = "rank " + std::to_string(rank_) + ": " + what + " failed: " + ncclGetErrorString(r) +
                      (r == ncclRemoteError || r == ncclSystemError ? " (" + peer() + " is gone?)" : "");
    abort();
    throw Error(msg);
  }

  void check(ncclResult_t r, const char *what) {
    if (r != ncclSuccess && r != ncclInProgress)
      fail(what, r);
  }

  /// A non-blocking communicator's call may still be in progress: wait (bounded) before the next.
  void settle(const char *what) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      ncclResult_t a = ncclSuccess;
      ncclCommGetAsyncError(comm_, &a);
      if (a == ncclSuccess)
        return;
      if (a != ncclInProgress)
        fail(what, a);
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        throw Error("rank " + std::to_string(rank_) + ": " + what + " did not finish within " +
                    std::to_string(timeout_.count() / 1000) + " s: " + peer() + " did not come or is stuck");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  void *scratch_ = nullptr;
};

} // namespace

std::shared_ptr<Communicator> makeNcclCommunicator(const DistEnv &env, TcpStore &store,
                                                   std::chrono::milliseconds timeout) {
  return std::make_shared<NcclCommunicator>(env, store, timeout);
}

} // namespace octet::rt
