"""Starts N copies of a command as a cluster launcher would, with its variables and nothing else
that names a rank, waits for them, and prints each one's exit status (and the last line of any that
failed). Used by launchers.test and nnodes.test.

  launch_env.py slurm|mpi|mpich|nodes N [--per-node K] -- COMMAND...

slurm: srun's SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NODEID and SLURM_STEP_NODELIST
(this host, so the master is found in the host list); mpi: Open MPI's OMPI_COMM_WORLD_RANK, _SIZE,
_LOCAL_RANK and _LOCAL_SIZE; mpich: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID with MASTER_ADDR. --per-node K
pretends the ranks are K to a node (local ranks 0..K-1, node ids; mpi then needs MASTER_ADDR, given).
nodes: N launcher processes (fp8-run --nnodes N), '{node}' and '{port}' in COMMAND replaced by each
one's node rank and the shared port. MASTER_PORT is a free port unless set.
"""
import os
import socket
import subprocess
import sys


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    style, n, *rest = sys.argv[1:]
    n = int(n)
    per_node = n
    if rest[0] == "--per-node":
        per_node, rest = int(rest[1]), rest[2:]
    sep, *cmd = rest
    assert sep == "--"
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    base.setdefault("MASTER_PORT", str(free_port()))
    procs = []
    for r in range(n):
        env = dict(base)
        local, node, nodes = r % per_node, r // per_node, (n + per_node - 1) // per_node
        argv = cmd
        if style == "slurm":
            env.update(SLURM_PROCID=str(r), SLURM_STEP_NUM_TASKS=str(n), SLURM_LOCALID=str(local),
                       SLURM_NODEID=str(node), SLURM_STEP_NODELIST=",".join(["localhost"] * nodes),
                       SLURM_JOB_ID="4242")
        elif style == "mpi":
            env.update(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(n), OMPI_COMM_WORLD_LOCAL_RANK=str(local),
                       OMPI_COMM_WORLD_LOCAL_SIZE=os.environ.get("LOCAL_SIZE", str(per_node)))
            if per_node < n:
                env.setdefault("MASTER_ADDR", "127.0.0.1")
        elif style == "mpich":
            env.update(PMI_RANK=str(r), PMI_SIZE=str(n), MPI_LOCALRANKID=str(local), MASTER_ADDR="127.0.0.1")
        elif style == "nodes":
            argv = [a.replace("{node}", str(r)).replace("{port}", base["MASTER_PORT"]) for a in cmd]
            env.pop("MASTER_PORT")
        else:
            sys.exit("unknown launcher style " + style)
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for r, p in enumerate(procs):
        out = p.communicate(timeout=300)[0]
        line = out.strip().splitlines()[-1] if p.returncode and out.strip() else ""
        print(f"{'node' if style == 'nodes' else 'rank'} {r}: exit {p.returncode}" + (f": {line}" if line else ""))


if __name__ == "__main__":
    main()
