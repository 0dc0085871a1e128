#!/usr/bin/env python3
"""The kernel's floor for one response: what the least possible server
(bench/floor/floor.c: recv, a fixed head, sendfile of one open file) costs
per response on this machine, next to nginx and sluice serving the same
file, so a CPU target below that floor can be recognised as such.

    bench/floor.py --sluice target/release/sluice [--size 102400] [--runs 9]

Every server is pinned to --server-cpu, wrk (-t1 -c50, keep-alive) to
--client-cpu; the servers take turns run by run (floor with MSG_MORE,
floor with the head written apart, nginx, sluice), and the table gives the
median CPU µs per response (utime + stime of the server's processes over
the run) with the run-by-run range. nginx and sluice serve the file as a
static file (sendfile on, open_file_cache), as bench/conf/static.conf does.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib.common import CLK_TCK, cpu_sample, log, pick_ports, process_tree  # noqa: E402
from benchlib.loadgen import parse_wrk, wrk_cmd  # noqa: E402
from benchlib.server import Server  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

CONF = """daemon off;
worker_processes 1;
worker_rlimit_nofile 65535;
pid @PREFIX@/run.pid;
error_log @PREFIX@/logs/error.log;
events { worker_connections 20000; }
http {
    include mime.types;
    default_type application/octet-stream;
    access_log off;
    server_tokens off;
    sendfile on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    open_file_cache max=1000 inactive=20s;
    server {
        listen 127.0.0.1:@PORT@ backlog=4096;
        root @PREFIX@/html;
    }
}
"""


class Floor:
    """The floor server, pinned like the others."""

    def __init__(self, name, binary, port, path, mode, cpu):
        self.name, self.port = name, port
        self.cmd = ["taskset", "-c", str(cpu), binary, str(port), path, mode]

    def start(self):
        self.proc = subprocess.Popen(self.cmd)
        self.pid = self.proc.pid
        time.sleep(0.3)
        return self

    def pids(self):
        return process_tree(self.pid)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def measure(srv, url, args):
    pids = srv.pids()
    before = cpu_sample(pids)
    p = subprocess.run(wrk_cmd(args.client_cpu, url, 50, args.duration), capture_output=True,
                       text=True, timeout=args.duration + 30)
    out = p.stdout + p.stderr
    after = cpu_sample(pids)
    r = parse_wrk(out)
    bad = sum(r["errors"].values())
    if bad:
        raise SystemExit("%s: %d errors:\n%s" % (srv.name, bad, out))
    ticks = after[0] - before[0]
    sys_ticks = after[2] - before[2]
    us = ticks / CLK_TCK * 1e6 / r["requests"]
    return us, sys_ticks / CLK_TCK * 1e6 / r["requests"], r["rps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--size", type=int, default=100 * 1024, help="response body bytes")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--port", type=int, default=18180)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="sluice-floor-")
    os.chmod(tmp, 0o755)   # nginx's worker runs as nobody
    body = os.path.join(tmp, "body.bin")
    with open(body, "wb") as f:
        f.write(os.urandom(args.size))
    floor_bin = os.path.join(tmp, "floor")
    subprocess.run(["gcc", "-O2", "-o", floor_bin, os.path.join(HERE, "floor", "floor.c")],
                   check=True)
    ports = pick_ports(args.port, 4)
    tpl = os.path.join(tmp, "floor.conf")
    with open(tpl, "w") as f:
        f.write(CONF)
    servers = [
        Floor("floor (MSG_MORE)", floor_bin, ports[0], body, "more", args.server_cpu),
        Floor("floor (head apart)", floor_bin, ports[1], body, "writev", args.server_cpu),
    ]
    for (name, binary), port in zip((("nginx", args.nginx), ("sluice", args.sluice)), ports[2:]):
        # Server reads templates from bench/conf; give it an absolute path.
        servers.append(Server(name, binary, tmp, port, tpl, [("body.bin", body)], args.server_cpu))
    for s in servers:
        s.start()
    results = {s.name: [] for s in servers}
    try:
        for s in servers:   # warm-up
            measure(s, "http://127.0.0.1:%d/body.bin" % s.port, argparse.Namespace(
                client_cpu=args.client_cpu, duration=2))
        for i in range(args.runs):
            for s in servers:
                time.sleep(0.5)
                r = measure(s, "http://127.0.0.1:%d/body.bin" % s.port, args)
                results[s.name].append(r)
                log("run %d %-20s %7.2f us/resp (kernel %6.2f)  %8.0f resp/s"
                    % (i + 1, s.name, r[0], r[1], r[2]))
    finally:
        for s in servers:
            try:
                s.stop()
            except Exception as e:   # noqa: BLE001 - report and go on stopping the rest
                log("! stopping %s: %s" % (s.name, e))
    ref = [r[0] for r in results["nginx"]]
    log("")
    log("%d-byte responses, keep-alive, wrk -t1 -c50, %d runs of %d s (median, range)"
        % (args.size, args.runs, args.duration))
    log("| server | CPU µs/response | kernel µs/response | / nginx (paired median, range) |")
    log("|---|---:|---:|---:|")
    for s in servers:
        cpu = [r[0] for r in results[s.name]]
        ker = [r[1] for r in results[s.name]]
        pair = sorted(c / n for c, n in zip(cpu, ref))
        log("| %s | %.2f (%.2f-%.2f) | %.2f | %.2f (%.2f-%.2f) |"
            % (s.name, statistics.median(cpu), min(cpu), max(cpu), statistics.median(ker),
               statistics.median(pair), pair[0], pair[-1]))


if __name__ == "__main__":
    main()
