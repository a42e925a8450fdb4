"""Starts N copies of a command as a cluster launcher would, with its variables and nothing else
that names a rank, waits for them, and prints each one's exit status (and the last line of any that
failed). Used by launchers.test.

  launch_env.py slurm|mpi|mpich N -- COMMAND...

slurm: srun's SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NODEID and SLURM_STEP_NODELIST
(this host, so the master is found in the host list); mpi: Open MPI's OMPI_COMM_WORLD_RANK, _SIZE,
_LOCAL_RANK and _LOCAL_SIZE (every rank on this host); mpich: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
with MASTER_ADDR. MASTER_PORT is a free port unless set.
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
    style, n, sep, *cmd = sys.argv[1:]
    assert sep == "--"
    n = int(n)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    base.setdefault("MASTER_PORT", str(free_port()))
    procs = []
    for r in range(n):
        env = dict(base)
        if style == "slurm":
            env.update(SLURM_PROCID=str(r), SLURM_STEP_NUM_TASKS=str(n), SLURM_LOCALID=str(r), SLURM_NODEID="0",
                       SLURM_STEP_NODELIST="localhost", SLURM_JOB_ID="4242")
        elif style == "mpi":
            env.update(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(n), OMPI_COMM_WORLD_LOCAL_RANK=str(r),
                       OMPI_COMM_WORLD_LOCAL_SIZE=os.environ.get("LOCAL_SIZE", str(n)))
        elif style == "mpich":
            env.update(PMI_RANK=str(r), PMI_SIZE=str(n), MPI_LOCALRANKID=str(r), MASTER_ADDR="127.0.0.1")
        else:
            sys.exit("unknown launcher style " + style)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for r, p in enumerate(procs):
        out = p.communicate(timeout=300)[0]
        line = out.strip().splitlines()[-1] if p.returncode and out.strip() else ""
        print(f"rank {r}: exit {p.returncode}" + (f": {line}" if line else ""))


if __name__ == "__main__":
    main()
