"""Starts `fp8-run --nproc-per-node N ...`, waits for a file (a checkpoint) to appear, kills one rank
with SIGKILL, and prints what the launcher said, its exit status and how long it took to exit."""
import os, signal, subprocess, sys, time

rank, wait_for, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.time() + 120
while not os.path.exists(wait_for):
    if launcher.poll() is not None or time.time() > deadline:
        sys.exit("the run ended before %s appeared: %s" % (wait_for, launcher.communicate()[0]))
    time.sleep(0.05)


def ranks():  # the launcher's children by RANK
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[1])
            env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if ppid == launcher.pid:
            for e in env:
                if e.startswith(b"RANK="):
                    out[int(e[5:])] = int(pid)
    return out


os.kill(ranks()[rank], signal.SIGKILL)
t0 = time.time()
out = launcher.communicate(timeout=90)[0]
print(out.strip().splitlines()[-1])
print("exit", launcher.returncode, "within 60 s:", time.time() - t0 < 60)
print("ranks left:", sorted(ranks()))
