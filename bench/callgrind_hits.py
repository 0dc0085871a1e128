#!/usr/bin/env python3
"""User-space instructions per cache hit (workload c1) with callgrind.

For each server (nginx, sluice): start it under `valgrind --tool=callgrind`
with bench/conf/cache.conf in front of an origin nginx (proxy_origin.conf),
fill the cache with one GET of /1k.bin, then

  run A: wrk -t1 -c50 for the warm-up only, stop the server;
  run B: the same warm-up, then wrk for the main duration, stop the server;

instructions per hit = (Ir of B - Ir of A) / (requests of B - requests of A),
so start-up, the fill and shutdown cancel out (the method of docs/
benchmarks.md's earlier callgrind sections). nginx runs with
`-g "master_process off;"` (one process, so callgrind sees the worker).
Servers on CPU 0, wrk and the origin on CPU 1, loopback only, every run
bounded by wrk's -d. Standard library only.

    bench/callgrind_hits.py --sluice target/release/sluice
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
CONF = os.path.join(BENCH, "conf")


def render(template, prefix, port, origin_port):
    with open(os.path.join(CONF, template)) as f:
        t = f.read()
    t = (t.replace("@PREFIX@", prefix).replace("@PORT@", str(port))
         .replace("@ORIGIN_PORT@", str(origin_port)).replace("@CACHE_MEMORY@", ""))
    for d in ("conf", "logs", "html"):
        os.makedirs(os.path.join(prefix, d), exist_ok=True)
    shutil.copy("/etc/nginx/mime.types", os.path.join(prefix, "conf", "mime.types"))
    conf = os.path.join(prefix, "conf", "nginx.conf")
    with open(conf, "w") as f:
        f.write(t)
    return conf


def wait_port(port, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited with %s during start-up" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("port %d not open after %d s" % (port, timeout))


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                   % path).encode())
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                return buf
            buf += d


def wrk(port, secs):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d%ds" % secs,
                          "http://127.0.0.1:%d/1k.bin" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=secs + 120
                         ).stdout.decode()
    m = re.search(r"^\s*(\d+) requests in", out, re.M)
    if not m or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit("wrk: unexpected output:\n" + out)
    return int(m.group(1))


def one(name, binary, base, port, origin_port, warmup, main):
    prefix = os.path.join(base, "%s-%s" % (name, "B" if main else "A"))
    conf = render("cache.conf", prefix, port, origin_port)
    out = os.path.join(prefix, "callgrind.out")
    cmd = ["taskset", "-c", "0", "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           binary, "-p", prefix + "/", "-c", conf]
    if name == "nginx":
        cmd += ["-g", "master_process off;"]
    log = open(os.path.join(prefix, "logs", "valgrind.log"), "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(port, p)
        first = get(port, "/1k.bin")
        second = get(port, "/1k.bin")
        if b"X-Cache: HIT" not in second:
            raise SystemExit("%s: no HIT after the fill:\n%r\n%r" % (name, first[:300],
                                                                     second[:300]))
        reqs = 2 + wrk(port, warmup)
        if main:
            reqs += wrk(port, main)
    finally:
        p.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
        try:
            p.wait(120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    ir = None
    for fn in os.listdir(prefix):
        if fn.startswith("callgrind.out"):
            with open(os.path.join(prefix, fn)) as f:
                for line in f:
                    if line.startswith("totals:") or line.startswith("summary:"):
                        ir = (ir or 0) + int(line.split()[1])
                        break
    if ir is None:
        raise SystemExit("%s: no callgrind totals in %s" % (name, prefix))
    return ir, reqs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--port", type=int, default=18280)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sluice-callgrind-")
    os.chmod(base, 0o755)
    origin_prefix = os.path.join(base, "origin")
    oconf = render("proxy_origin.conf", origin_prefix, a.port + 1, 0)
    with open(os.path.join(origin_prefix, "html", "1k.bin"), "wb") as f:
        f.write(os.urandom(1024))
    origin = subprocess.Popen(["taskset", "-c", "1", a.nginx, "-p", origin_prefix + "/", "-c",
                               oconf], start_new_session=True)
    try:
        wait_port(a.port + 1, origin)
        for name, binary in (("nginx", a.nginx), ("sluice", os.path.abspath(a.sluice))):
            ir_a, n_a = one(name, binary, base, a.port, a.port + 1, a.warmup, 0)
            ir_b, n_b = one(name, binary, base, a.port, a.port + 1, a.warmup, a.duration)
            print("%-6s A: %d Ir, %d requests; B: %d Ir, %d requests; %.0f instructions/hit"
                  % (name, ir_a, n_a, ir_b, n_b, (ir_b - ir_a) / (n_b - n_a)), flush=True)
    finally:
        origin.send_signal(signal.SIGQUIT)
        origin.wait(30)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
