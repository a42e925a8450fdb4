//===- Collective.h - What a data-parallel plan's collectives run on -*- C++ -*-===//
//
// The one interface fp8.all_reduce and fp8.world_size execute through. The
// engines behind it (Gloo over TCP for the CPU executor, NCCL for the CUDA
// executor) live in liboctet_collective (runtime/collective/); fp8-run makes
// one per process from torchrun's environment and installs it here. Without
// one a plan runs as a single rank: all-reduces are the identity.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_COLLECTIVE_H
#define OCTET_RUNTIME_COLLECTIVE_H

#include "octet/runtime/Tensor.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace octet::rt {

/// Avg: the sum divided by the number of ranks (not for FP8 payloads).
enum class ReduceOp { Sum, Max, Avg };

/// A process group of `size()` ranks. Every rank calls the same collectives in the same order.
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo", "nccl".
  virtual std::string backend() const = 0;
  /// Where the buffers of allReduce live: false host memory, true CUDA device memory.
  virtual bool deviceMemory() const = 0;
  /// In place over `count` elements of `dtype` (F32, F16, BF16, F8E4M3FN, F8E5M2). FP8 sums
  /// decode, add in float and round to nearest even with saturation (NCCL's float8 rule); max
  /// propagates NaN (fp8.all_reduce maps NaN to +Inf first). `stream` is the CUDA stream for device
  /// buffers (nullptr: the default one).
  /// Throws Error naming the peer when a rank is gone or the timeout passes.
  virtual void allReduce(void *data, size_t count, DType dtype, ReduceOp op, void *stream = nullptr) = 0;
  /// `bytes` of rank `root`'s buffer to every rank (host or device memory, as allReduce).
  virtual void broadcast(void *data, size_t bytes, int root, void *stream = nullptr) = 0;
  /// The reduction of every rank's `send` (size() * `count` elements), of which this rank keeps
  /// the slice [rank() * count, rank() * count + count) in `recv` (`count` elements; recv may be
  /// that slice of send): a sharded optimizer's gradients. Types and rounding as allReduce.
  virtual void reduceScatter(const void *send, void *recv, size_t count, DType dtype, ReduceOp op,
                             void *stream = nullptr) = 0;
  /// Every rank's `bytes` of `send` into `recv`, rank r's at r * bytes (size() * bytes in all; send
  /// may be this rank's slice of recv): sharded weights gathered back whole.
  virtual void allGather(const void *send, void *recv, size_t bytes, void *stream = nullptr) = 0;
  virtual void barrier() = 0;
  /// A barrier whose wait may last `timeout` instead of the collectives' own (timeout_, which the
  /// engines read for every wait): the ranks waiting while one does work of its own (rank 0's
  /// evaluation and checkpoint writes). A rank that dies still fails it at once; one that hangs,
  /// after `timeout`.
  void barrierWithin(std::chrono::milliseconds timeout) {
    std::chrono::milliseconds own = timeout_;
    timeout_ = timeout;
    try {
      barrier();
    } catch (...) {
      timeout_ = own;
      throw;
    }
    timeout_ = own;
  }

  /// Device engines: blocks until `stream`'s work is done, failing (and aborting the communicator)
  /// when a collective errs or the step outlasts the timeout: a dead peer never hangs the rank.
  /// Host engines return at once (their collectives are synchronous).
  virtual void waitFor(void *stream) {}

  /// Payload bytes this rank handed to all-reduces, by element type name ("float32",
  /// "float8e4m3fn"), since the last reset. The callers count (the CPU kernel per call, the CUDA
  /// executor per step, whose collectives a CUDA graph may replay without calling it).
  const std::map<std::string, uint64_t> &bytesReduced() const { return bytes_; }
  void resetCounters() { bytes_.clear(); }
  void record(DType dtype, size_t elements) { bytes_[dtypeName(dtype)] += uint64_t(elements) * dtypeSize(dtype); }

protected:
  /// How long a collective waits for a peer (fp8-run --comm-timeout), set by the engine.
  std::chrono::milliseconds timeout_{0};

private:
  std::map<std::string, uint64_t> bytes_;
};

/// What fp8-run's launcher starts on this host: `nproc` ranks of node `nodeRank` of `nnodes`, whose
/// rank 0 (node 0's first) serves the rendezvous at masterAddr:masterPort. An empty address is
/// MASTER_ADDR, else the loopback; port 0 is MASTER_PORT, else a free port on one node and
/// torchrun's 29500 on several (every node must name the same).
struct LaunchSpec {
  int nproc = 1, nnodes = 1, nodeRank = 0;
  std::string masterAddr;
  int masterPort = 0;
};

/// What fp8-run needs from liboctet_collective, registered by the program that links it (as device
/// backends are): start ranks on this host, and connect this process to its peers from torchrun's
/// environment (nullptr when the environment names no ranks).
struct CollectiveSupport {
  std::function<int(const LaunchSpec &spec, const std::vector<std::string> &argv)> launch;
  std::function<std::shared_ptr<Communicator>(const std::string &device, std::chrono::milliseconds timeout)> connect;
};
void registerCollectiveSupport(CollectiveSupport s);
const CollectiveSupport *collectiveSupport();

/// Which launcher started this process as one of several ranks, read from its variables:
/// "torchrun" (WORLD_SIZE: torchrun, fp8-run --nproc-per-node), "slurm" (srun: SLURM_PROCID with
/// SLURM_STEP_NUM_TASKS above 1), "mpi" (Open MPI's OMPI_COMM_WORLD_SIZE or MPICH's PMI_SIZE above
/// 1), or "" (a process of its own). Distributed.cpp's distEnvFromEnvironment reads each one's rank.
std::string rankLauncher();

/// The process's communicator (nullptr: one rank). fp8-run sets it before making its runner.
void setCommunicator(std::shared_ptr<Communicator> c);
Communicator *communicator();
/// The world size a plan sees: the communicator's, or 1.
int worldSize();

} // namespace octet::rt

#endif
