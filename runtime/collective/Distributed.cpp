//===- Distributed.cpp - Ranks from torchrun's environment, and a launcher ===//
#include "octet/runtime/Distributed.h"

#include "GlooCommunicator.h"
#include "TcpStore.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

namespace octet::rt {

#ifdef OCTET_HAVE_NCCL
std::shared_ptr<Communicator> makeNcclCommunicator(const DistEnv &env, TcpStore &store,
                                                   std::chrono::milliseconds timeout);
bool haveNccl() { return true; }
#else
bool haveNccl() { return false; }
#endif

namespace {

int64_t envInt(const char *name, int64_t dflt, int64_t min, int64_t max) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return dflt;
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  if (errno || *end || x < min || x > max)
    throw Error(std::string("environment: ") + name + "='" + v + "' is not an integer in [" + std::to_string(min) +
                ", " + std::to_string(max) + "]");
  return x;
}

bool isLoopback(const std::string &host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

} // namespace

std::string firstSlurmHost(const std::string &hostlist) {
  std::string host;
  for (size_t i = 0; i < hostlist.size() && hostlist[i] != ','; ++i) {
    if (hostlist[i] != '[') {
      host += hostlist[i];
      continue;
    }
    size_t close = hostlist.find(']', i);
    if (close == std::string::npos)
      throw Error("environment: the Slurm host list '" + hostlist + "' has a '[' without its ']'");
    std::string range = hostlist.substr(i + 1, close - i - 1); // "007-010,012": its first number
    host += range.substr(0, range.find_first_of(",-"));
    i = close;
  }
  return host;
}

DistEnv distEnvFromEnvironment() {
  DistEnv e;
  e.launcher = rankLauncher();
  e.present = !e.launcher.empty();
  auto var = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  if (e.launcher == "slurm") { // srun: a step's tasks
    e.size = int(envInt("SLURM_STEP_NUM_TASKS", 1, 1, 1 << 20));
    e.rank = int(envInt("SLURM_PROCID", 0, 0, e.size - 1));
    e.localRank = int(envInt("SLURM_LOCALID", 0, 0, e.size - 1));
    std::string nodes = !var("SLURM_STEP_NODELIST").empty() ? var("SLURM_STEP_NODELIST") : var("SLURM_JOB_NODELIST");
    e.masterAddr = !var("MASTER_ADDR").empty() ? var("MASTER_ADDR") : firstSlurmHost(nodes);
    if (e.masterAddr.empty())
      throw Error("environment: srun started " + std::to_string(e.size) +
                  " tasks but neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST names their hosts; set MASTER_ADDR to "
                  "the host of task 0");
  } else if (e.launcher == "mpi") { // mpirun / mpiexec: Open MPI's variables, else MPICH's
    bool ompi = !var("OMPI_COMM_WORLD_SIZE").empty();
    e.size = int(envInt(ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", 1, 1, 1 << 20));
    e.rank = int(envInt(ompi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK", 0, 0, e.size - 1));
    e.localRank = int(envInt(ompi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID", e.rank, 0, e.size - 1));
    int local = ompi ? int(envInt("OMPI_COMM_WORLD_LOCAL_SIZE", 0, 0, 1 << 20)) : 0;
    if (!var("MASTER_ADDR").empty())
      e.masterAddr = var("MASTER_ADDR");
    else if (local != e.size)
      throw Error("environment: mpirun started " + std::to_string(e.size) + " ranks" +
                  (local ? " on more than one host" : "") +
                  " and MASTER_ADDR is not set; pass rank 0's host (mpirun -x MASTER_ADDR=HOST -x MASTER_PORT=PORT)");
  } else {
    e.size = int(envInt("WORLD_SIZE", 1, 1, 1 << 20));
    e.rank = int(envInt("RANK", 0, 0, e.size - 1));
    if (e.present && !std::getenv("RANK"))
      throw Error("environment: WORLD_SIZE is set but RANK is not; launch with torchrun or fp8-run --nproc-per-node");
    e.localRank = int(envInt("LOCAL_RANK", e.rank, 0, e.size - 1));
    if (!var("MASTER_ADDR").empty())
      e.masterAddr = var("MASTER_ADDR");
  }
  e.masterPort = int(envInt("MASTER_PORT", 29500, 1, 65535));
  // torchrun's agent serves its own store on MASTER_PORT and tells its workers so.
  const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  bool underAgent = agent && (std::string(agent) == "True" || std::string(agent) == "true" || std::string(agent) == "1");
  e.storePort = underAgent ? e.masterPort + 1 : e.masterPort;
  if (e.storePort > 65535)
    throw Error("environment: MASTER_PORT=65535 leaves no port for Octet's rendezvous store (MASTER_PORT + 1)");
  return e;
}

std::shared_ptr<Communicator> connectRanks(const DistEnv &env, const std::string &backend,
                                           std::chrono::milliseconds timeout) {
  std::unique_ptr<TcpStoreServer> server;
  if (env.rank == 0)
    server = std::make_unique<TcpStoreServer>(env.storePort);
  TcpStore store(env.masterAddr, env.storePort, timeout);
  // Every rank says it is here. Rank 0 names the first that is not within the timeout; the others
  // wait for its word twice as long, so that the line naming the missing rank is the one said.
  store.set("octet.arrived." + std::to_string(env.rank), {1});
  if (env.rank == 0) {
    for (int r = 1; r < env.size; ++r) {
      try {
        store.wait({"octet.arrived." + std::to_string(r)}, timeout);
      } catch (const Error &) {
        throw Error("rendezvous: rank " + std::to_string(r) + " of " + std::to_string(env.size) +
                    " did not arrive within " + std::to_string(timeout.count() / 1000) +
                    " s; start every node's launcher (the same --master-addr, --master-port and world size, each "
                    "its own --node-rank) and check its output");
      }
    }
    store.set("octet.arrived.all", {1});
  } else {
    try {
      store.wait({"octet.arrived.all"}, 2 * timeout);
    } catch (const Error &) {
      // Rank 0 gave up (its store closed) and says why: let its line and exit come first, so that
      // the launcher names it rather than this rank.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      throw;
    }
  }
  std::shared_ptr<Communicator> comm;
  if (backend == "gloo") {
    comm = std::make_shared<GlooCommunicator>(env.rank, env.size, store, timeout, isLoopback(env.masterAddr));
  } else if (backend == "nccl") {
#ifdef OCTET_HAVE_NCCL
    comm = makeNcclCommunicator(env, store, timeout);
#else
    throw Error("this build has no NCCL (the CUDA backend was not built); run the ranks with --device cpu");
#endif
  } else {
    throw Error("collective backend '" + backend + "' is not known; use gloo or nccl");
  }
  // Every rank is connected: rank 0 may close the store once all have said so.
  store.set("octet.connected." + std::to_string(env.rank), {1});
  if (env.rank == 0)
    for (int r = 1; r < env.size; ++r)
      store.get("octet.connected." + std::to_string(r));
  return comm;
}

int freeLocalPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    ::close(fd);
  if (!port)
    throw Error(std::string("--nproc-per-node: cannot find a free port (") + std::strerror(errno) +
                "); set MASTER_PORT");
  return port;
}

namespace {

std::string describeExit(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

} // namespace

std::string rankBlasThreads(int nproc, int cores, bool userSet) {
  if (userSet || nproc <= 1)
    return "";
  return std::to_string(std::max(1, cores / nproc));
}

int launchRanks(const LaunchSpec &spec, const std::vector<std::string> &argv) {
  int nproc = spec.nproc, nnodes = spec.nnodes, node = spec.nodeRank;
  if (nproc < 1)
    throw Error("--nproc-per-node: " + std::to_string(nproc) + " is not valid; use an integer >= 1");
  if (nnodes < 1)
    throw Error("--nnodes: " + std::to_string(nnodes) + " is not valid; use an integer >= 1");
  if (node < 0 || node >= nnodes)
    throw Error("--node-rank: " + std::to_string(node) + " is not a node of --nnodes " + std::to_string(nnodes) +
                "; give each machine its own of 0.." + std::to_string(nnodes - 1));
  if (int64_t(nproc) * nnodes > (1 << 20))
    throw Error("--nnodes " + std::to_string(nnodes) + " x --nproc-per-node " + std::to_string(nproc) +
                " ranks is more than 2^20");
  const char *envAddr = std::getenv("MASTER_ADDR");
  std::string addr = !spec.masterAddr.empty() ? spec.masterAddr : envAddr && *envAddr ? envAddr : "127.0.0.1";
  int port = spec.masterPort ? spec.masterPort : int(envInt("MASTER_PORT", 0, 0, 65535));
  if (!port) // the nodes must agree on it without talking first: torchrun's default
    port = nnodes > 1 ? 29500 : freeLocalPort();
  int world = nproc * nnodes;
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::vector<pid_t> pids(size_t(nproc), -1);
  std::string blas = rankBlasThreads(nproc, int(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))),
                                     std::getenv("OPENBLAS_NUM_THREADS") || std::getenv("OMP_NUM_THREADS"));
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0)
      throw Error(std::string("--nproc-per-node: cannot start rank ") + std::to_string(r) + " (" +
                  std::strerror(errno) + ")");
    if (pid == 0) {
      ::setenv("RANK", std::to_string(node * nproc + r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("GROUP_RANK", std::to_string(node).c_str(), 1);
      ::setenv("MASTER_ADDR", addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      if (!blas.empty())
        ::setenv("OPENBLAS_NUM_THREADS", blas.c_str(), 1);
      ::execv("/proc/self/exe", args.data());
      std::cerr << "fp8-run: cannot start rank " << node * nproc + r << ": " << std::strerror(errno) << "\n";
      ::_exit(127);
    }
    pids[size_t(r)] = pid;
  }
  int running = nproc, failed = -1, failedStatus = 0;
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    int r = -1;
    for (int i = 0; i < nproc; ++i)
      if (pids[size_t(i)] == pid)
        r = i;
    if (r < 0)
      continue;
    pids[size_t(r)] = -1;
    --running;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failed < 0) {
      failed = r, failedStatus = status;
      // The first rank to fail is the one to name; the others are stopped (they would fail on
      // their next collective anyway, after Gloo's or NCCL's timeout).
      for (pid_t p : pids)
        if (p > 0)
          ::kill(p, SIGTERM);
      std::thread([pids]() {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        for (pid_t p : pids)
          if (p > 0)
            ::kill(p, SIGKILL);
      }).detach();
    }
  }
  if (failed >= 0) {
    std::cerr << "fp8-run: rank " << node * nproc + failed << " of " << world
              << (nnodes > 1 ? " (node " + std::to_string(node) + ", local rank " + std::to_string(failed) + ")" : "")
              << " " << describeExit(failedStatus) << "; stopped the other ranks"
              << (nnodes > 1 ? " of this node" : "") << "\n";
    return 1;
  }
  return 0;
}

void registerCollectives() {
  CollectiveSupport s;
  s.launch = launchRanks;
  s.connect = [](const std::string &device, std::chrono::milliseconds timeout) -> std::shared_ptr<Communicator> {
    DistEnv env = distEnvFromEnvironment();
    if (!env.present)
      return nullptr;
    return connectRanks(env, device == "cuda" ? "nccl" : "gloo", timeout);
  };
  registerCollectiveSupport(std::move(s));
}

} // namespace octet::rt
