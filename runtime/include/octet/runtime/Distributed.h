//===- Distributed.h - Ranks from torchrun's environment --------*- C++ -*-===//
//
// liboctet_collective: the engines behind Collective.h's Communicator (Gloo
// over TCP for host memory, NCCL for CUDA device memory) and how a process
// finds its peers: torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), Slurm's (srun) and MPI's (mpirun), a small TCP
// key-value store on rank 0 for the rendezvous, and fp8-run's own launcher
// (--nproc-per-node).
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
  bool present = false;  // a launcher's variables were set
  std::string launcher; // rankLauncher(): torchrun, slurm, mpi
};

/// This process's rank from its launcher's variables (Collective.h's rankLauncher): torchrun's
/// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; srun's SLURM_PROCID,
/// SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the master the step's first host (SLURM_STEP_NODELIST,
/// else SLURM_JOB_NODELIST) unless MASTER_ADDR says; mpirun's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}
/// (MPICH: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), the master MASTER_ADDR, or the loopback when every
/// rank is on this host (OMPI_COMM_WORLD_LOCAL_SIZE). MASTER_PORT defaults to 29500. Throws Error
/// naming a malformed or missing variable.
DistEnv distEnvFromEnvironment();

/// The first host of a Slurm hostlist: "gpu[007-010,012],cpu1" -> "gpu007" ("" for "").
std::string firstSlurmHost(const std::string &hostlist);

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

/// fp8-run --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]: runs
/// `argv` (this program, its flags minus the launcher's) N times with torchrun's variables set
/// (RANK = R * N + local rank, WORLD_SIZE = M * N, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
/// MASTER_ADDR, MASTER_PORT). When a rank fails, this node's others are stopped and one line names
/// it (another node's ranks fail at their next collective and their launcher says so). Returns
/// the exit status for the launcher; throws Error for a spec that names no valid node.
int launchRanks(const LaunchSpec &spec, const std::vector<std::string> &argv);

/// Registers launchRanks and a connect that reads the environment (gloo for --device cpu, nccl for
/// cuda) with fp8-run (Collective.h's CollectiveSupport).
void registerCollectives();

} // namespace octet::rt

#endif
