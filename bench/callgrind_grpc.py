#!/usr/bin/env python3
"""User-space instructions and malloc calls per gRPC unary call (workload g1
of bench/grpc_ssi.py) with callgrind.

The origin (grpc_ssi.py's ORIGIN_CONF on nginx) runs natively; each proxy
(nginx, sluice; grpc_ssi.py's PROXY_CONF in one process) runs under
`valgrind --tool=callgrind` twice:

  run A: --warmup calls (`h2load -c10 -m10`), then the proxy stops;
  run B: the same warm-up, then --calls more, then the proxy stops;

instructions per call = (Ir of B - Ir of A) / --calls, so start-up, the
warm-up and shutdown cancel out; malloc calls per call likewise (the calls
to malloc, calloc and realloc that callgrind counted). Proxies on CPU 0,
h2load and the origin on CPU 1, loopback only, every run bounded.
Standard library only.

    bench/callgrind_grpc.py --sluice target/release/sluice [--calls 10000]
                            [--warmup 2000] [--servers nginx,sluice] [--keep DIR]

With --keep, the callgrind files stay in DIR (`callgrind_annotate
--inclusive=yes DIR/sluice-B/callgrind.out`).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_ssi  # noqa: E402
from benchlib.common import pick_ports, stop_server, wait_port  # noqa: E402

ALLOC_FNS = ("malloc", "calloc", "realloc")




def h2load(port, msg, n):
    out = subprocess.run(["taskset", "-c", "1", "h2load", "-t", "1", "-c", "10", "-m", "10",
                          "-n", str(n), "-d", msg, "-H", "content-type: application/grpc",
                          "-H", "te: trailers", "http://127.0.0.1:%d/bench.Echo/Say" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200
                         ).stdout.decode()
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
    if not m or int(m.group(2)) != 0 or int(m.group(1)) != n:
        raise SystemExit("h2load: unexpected output:\n" + out)
    return n


def totals(path):
    """Ir and allocation calls in one callgrind file."""
    ir, allocs = 0, 0
    names = {}
    current = None
    with open(path) as f:
        for line in f:
            if line.startswith("cfn="):
                m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    current = names.get(m.group(1))
                else:
                    current = line[4:].strip()
            elif line.startswith("fn="):
                m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                current = None
            elif line.startswith("calls="):
                if current in ALLOC_FNS:
                    allocs += int(line.split()[0][6:])
                current = None
            elif line.startswith("totals:") or line.startswith("summary:"):
                ir = int(line.split()[1])
    return ir, allocs


def one(name, binary, base, ports, msg, warmup, calls):
    prefix = os.path.join(base, "%s-%s" % (name, "B" if calls else "A"))
    conf = grpc_ssi.PROXY_CONF.replace("master_process on", "master_process off")
    path = grpc_ssi.write(prefix, conf, {"@PORT@": ports[1], "@PORT1@": ports[2],
                                          "@ORIGIN_PORT@": ports[0]})
    out = os.path.join(prefix, "callgrind.out")
    cmd = ["taskset", "-c", "0", "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           binary, "-p", prefix + "/", "-c", path]
    log = open(os.path.join(prefix, "logs", "valgrind.log"), "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(ports[1], p)
        h2load(ports[1], msg, warmup)
        if calls:
            h2load(ports[1], msg, calls)
    finally:
        stop_server(p, name, 300)
    return totals(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--servers", default="nginx,sluice")
    ap.add_argument("--port", type=int, default=18380)
    ap.add_argument("--keep", help="a directory to keep the callgrind files in")
    a = ap.parse_args()
    base = a.keep or tempfile.mkdtemp(prefix="sluice-callgrind-grpc-")
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)   # nginx's worker runs as nobody
    msg = os.path.join(base, "grpc.msg")
    with open(msg, "wb") as f:
        f.write(grpc_ssi.MESSAGE)
    ports = pick_ports(a.port, 3)
    origin_prefix = os.path.join(base, "origin")
    oconf = grpc_ssi.write(origin_prefix, grpc_ssi.ORIGIN_CONF, {"@PORT@": ports[0]})
    os.makedirs(os.path.join(origin_prefix, "html", "bench.Echo"), exist_ok=True)
    with open(os.path.join(origin_prefix, "html", "bench.Echo", "Say"), "wb") as f:
        f.write(grpc_ssi.MESSAGE)
    origin = subprocess.Popen(["taskset", "-c", "1", a.nginx, "-p", origin_prefix + "/", "-c", oconf],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        wait_port(ports[0], origin)
        time.sleep(0.5)
        if origin.poll() is not None:
            raise SystemExit("the origin exited: see %s/logs/error.log" % origin_prefix)
        binaries = {"nginx": a.nginx, "sluice": os.path.abspath(a.sluice)}
        for name in a.servers.split(","):
            ir_a, al_a = one(name, binaries[name], base, ports, msg, a.warmup, 0)
            ir_b, al_b = one(name, binaries[name], base, ports, msg, a.warmup, a.calls)
            print("%-6s A: %d Ir, %d allocs; B: %d Ir, %d allocs; %.0f instructions/call, "
                  "%.1f allocs/call" % (name, ir_a, al_a, ir_b, al_b, (ir_b - ir_a) / a.calls,
                                        (al_b - al_a) / a.calls), flush=True)
    finally:
        origin.send_signal(signal.SIGQUIT)
        origin.wait(30)
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
