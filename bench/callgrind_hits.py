#!/usr/bin/env python3
"""User-space instructions per cache hit (workloads c1 and c2) with callgrind.

For each server (nginx, sluice): start it under `valgrind --tool=callgrind`
in front of an origin nginx (proxy_origin.conf), fill the cache with one GET,
then

  run A: the warm-up only, stop the server;
  run B: the same warm-up, then the main load, stop the server;

instructions per hit = (Ir of B - Ir of A) / (requests of B - requests of A),
so start-up, the fill, TLS handshakes and shutdown cancel out. The loads:

  c1: bench/conf/cache.conf, /1k.bin over HTTP/1.1, `wrk -t1 -c50` for
      --warmup and then --duration seconds;
  c2: bench/conf/cache_tls_h2.conf (HTTP/2 over TLS, an ECDSA P-256
      certificate made here), the 12-byte /helloworld, `h2load -c100 -m100`
      with --h2-warmup and then --h2-requests requests (counts, not times,
      so both runs make the same 100 handshakes).

nginx runs with `-g "master_process off;"` (one process, so callgrind sees
the worker). Servers on CPU 0, the load generator and the origin on CPU 1,
loopback only, every run bounded. Standard library only.

    bench/callgrind_hits.py --sluice target/release/sluice [--workload c2]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.common import stop_server, wait_port  # noqa: E402

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


def h2load(port, n):
    out = subprocess.run(["taskset", "-c", "1", "h2load", "-c100", "-m100", "-n%d" % n,
                          "https://127.0.0.1:%d/helloworld" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600
                         ).stdout.decode()
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
    if not m or int(m.group(2)) != 0 or int(m.group(1)) != n:
        raise SystemExit("h2load: unexpected output:\n" + out)
    return n


def make_cert(prefix):
    d = os.path.join(prefix, "conf")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", os.path.join(d, "key.pem"),
                    "-out", os.path.join(d, "cert.pem"), "-days", "30", "-subj", "/CN=localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def get_tls(port, path):
    return subprocess.run(["curl", "-sk", "--http1.1", "-D", "-", "-o", "/dev/null",
                           "https://127.0.0.1:%d%s" % (port, path)],
                          stdout=subprocess.PIPE, timeout=60).stdout


def wrk(port, secs):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d%ds" % secs,
                          "http://127.0.0.1:%d/1k.bin" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=secs + 120
                         ).stdout.decode()
    m = re.search(r"^\s*(\d+) requests in", out, re.M)
    if not m or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit("wrk: unexpected output:\n" + out)
    return int(m.group(1))


def one(name, binary, base, port, origin_port, warmup, main, workload="c1"):
    prefix = os.path.join(base, "%s-%s" % (name, "B" if main else "A"))
    tls = workload == "c2"
    conf = render("cache_tls_h2.conf" if tls else "cache.conf", prefix, port, origin_port)
    if tls:
        make_cert(prefix)
    out = os.path.join(prefix, "callgrind.out")
    cmd = ["taskset", "-c", "0", "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           binary, "-p", prefix + "/", "-c", conf]
    if name == "nginx":
        cmd += ["-g", "master_process off;"]
    log = open(os.path.join(prefix, "logs", "valgrind.log"), "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(port, p)
        fetch = (lambda: get_tls(port, "/helloworld")) if tls else (lambda: get(port, "/1k.bin"))
        first = fetch()
        second = fetch()
        if b"X-Cache: HIT" not in second:
            raise SystemExit("%s: no HIT after the fill:\n%r\n%r" % (name, first[:300],
                                                                     second[:300]))
        load = h2load if tls else wrk
        reqs = 2 + load(port, warmup)
        if main:
            reqs += load(port, main)
    finally:
        stop_server(p, name)
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
    ap.add_argument("--workload", choices=["c1", "c2"], default="c1")
    ap.add_argument("--h2-warmup", type=int, default=20000)
    ap.add_argument("--h2-requests", type=int, default=100000)
    a = ap.parse_args()
    warmup, main_load = (a.h2_warmup, a.h2_requests) if a.workload == "c2" else (a.warmup, a.duration)
    base = tempfile.mkdtemp(prefix="sluice-callgrind-")
    os.chmod(base, 0o755)
    origin_prefix = os.path.join(base, "origin")
    oconf = render("proxy_origin.conf", origin_prefix, a.port + 1, 0)
    with open(os.path.join(origin_prefix, "html", "1k.bin"), "wb") as f:
        f.write(os.urandom(1024))
    with open(os.path.join(origin_prefix, "html", "helloworld"), "wb") as f:
        f.write(b"Hello World\n")
    origin = subprocess.Popen(["taskset", "-c", "1", a.nginx, "-p", origin_prefix + "/", "-c",
                               oconf], start_new_session=True)
    try:
        wait_port(a.port + 1, origin)
        for name, binary in (("nginx", a.nginx), ("sluice", os.path.abspath(a.sluice))):
            ir_a, n_a = one(name, binary, base, a.port, a.port + 1, warmup, 0, a.workload)
            ir_b, n_b = one(name, binary, base, a.port, a.port + 1, warmup, main_load, a.workload)
            print("%-6s A: %d Ir, %d requests; B: %d Ir, %d requests; %.0f instructions/hit"
                  % (name, ir_a, n_a, ir_b, n_b, (ir_b - ir_a) / (n_b - n_a)), flush=True)
    finally:
        origin.send_signal(signal.SIGQUIT)
        origin.wait(30)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
