//===- Distributed.h - Ranks from torchrun's environment --------*- C++ -*-===//
//
// liboctet_collective: the engines behind Collective.h's Communicator (Gloo
// over TCP for host memory, NCCL for CUDA device memory) and how a process
// finds its peers: torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), a small TCP key-value store on rank 0 for the
// rendezvous, and fp8-run's own launcher (--nproc-per-node).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_DISTRIBUTED_H
#define OCTET_RUNTIME_DISTRIBUTED_H

#include "octet/runtime/Collective.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace octet::rt {

struct DistEnv {
  int rank = 0, size = 1, localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// Where rank 0's rendezvous store listens: MASTER_PORT, or MASTER_PORT + 1 under torchrun
  /// (whose agent already serves its own store on MASTER_PORT).
  int storePort = 29500;
  bool present = false; // WORLD_SIZE was set
};

/// Reads torchrun's variables; throws Error naming a malformed one.
DistEnv distEnvFromEnvironment();

/// Connects this rank to the others: "gloo" (host memory) or "nccl" (device memory, this process's
/// current CUDA device). Collectives that wait longer than `timeout` for a peer throw Error.
std::shared_ptr<Communicator> connectRanks(const DistEnv &env, const std::string &backend,
                                           std::chrono::milliseconds timeout);
/// A TCP port free on the loopback interface now (the launcher's MASTER_PORT); throws Error.
int freeLocalPort();

/// Whether this build has the NCCL engine.
bool haveNccl();

/// The BLAS threads a rank of `nproc` on this host gets (OPENBLAS_NUM_THREADS): the host's `cores`
/// shared out, at least 1; "" where the user chose (OPENBLAS_NUM_THREADS or OMP_NUM_THREADS set,
/// `userSet`) or one rank runs alone. N ranks each starting a thread per core would spin against
/// each other (torchrun sets OMP_NUM_THREADS=1 for the same reason).
std::string rankBlasThreads(int nproc, int cores, bool userSet);

/// fp8-run --nproc-per-node N: runs `argv` (this program, its flags minus the launcher's) N times
/// with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set. When a rank fails, the others are
/// stopped and one line names it. Returns the exit status for the launcher.
int launchRanks(int nproc, const std::vector<std::string> &argv);

/// Registers launchRanks and a connect that reads the environment (gloo for --device cpu, nccl for
/// cuda) with fp8-run (Collective.h's CollectiveSupport).
void registerCollectives();

} // namespace octet::rt

#endif
