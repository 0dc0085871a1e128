#!/usr/bin/env python3
"""User-space instructions and allocations per SSI page (workload s1 of
bench/grpc_ssi.py) with callgrind, sluice against nginx.

Each server runs under `valgrind --tool=callgrind` with s1's configuration
(one process: `daemon off; master_process off;`), the page and its three
parts. Two runs per server:

  run A: --warmup pages, stop the server;
  run B: the same warm-up, then --pages more, stop the server;

per page = (count of B - count of A) / --pages, so start-up, warm-up and
shutdown cancel out. Counted, in the thread that served
(`--separate-threads=yes`): instructions (callgrind's Ir) less aws-lc's
jitter-entropy start-up (a varying number of rounds, run at the first
random id), and calls to the allocator (malloc, calloc, realloc, aligned
allocation). CG_INSTR=1 adds `--dump-instr=yes` for a per-instruction look
(with --keep, which prints each file's path). The client is a
keep-alive HTTP/1.1 loop over --conns connections (counts, not times: the
machine may be shared). Server on CPU 0, client on CPU 1, loopback only.

    bench/callgrind_ssi.py --sluice target/release/sluice [--pages 2000]
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpc_ssi import PAGE, PARTS  # noqa: E402
from benchlib.common import stop_server, wait_port  # noqa: E402

CONF = """
worker_processes 1; daemon off; master_process off;
error_log @PREFIX@/logs/error.log error; pid @PREFIX@/logs/server.pid;
events { worker_connections 4096; }
http {
    include mime.types;
    access_log off;
    server {
        listen 127.0.0.1:@PORT@;
        root @PREFIX@/html;
        keepalive_requests 1000000;
        location / { ssi on; }
    }
}
"""

ALLOC = re.compile(r"^(malloc|calloc|realloc|__libc_malloc|__libc_calloc|__libc_realloc|"
                   r"aligned_alloc|posix_memalign|memalign)$")


def setup(prefix, port):
    for d in ("conf", "logs", "html"):
        os.makedirs(os.path.join(prefix, d), exist_ok=True)
    shutil.copy("/etc/nginx/mime.types", os.path.join(prefix, "conf", "mime.types"))
    conf = os.path.join(prefix, "conf", "nginx.conf")
    with open(conf, "w") as f:
        f.write(CONF.replace("@PREFIX@", prefix).replace("@PORT@", str(port)))
    with open(os.path.join(prefix, "html", "page.shtml"), "w") as f:
        f.write(PAGE)
    for n, body in PARTS.items():
        with open(os.path.join(prefix, "html", n), "w") as f:
            f.write(body)
    return conf




REQ = b"GET /page.shtml HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def read_response(s, buf):
    """Reads one response (chunked or with a length); returns (body, rest)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("connection closed mid-response")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    low = head.lower()
    if not low.startswith(b"http/1.1 200"):
        raise SystemExit("unexpected status: %r" % head[:100])
    m = re.search(rb"\r\ncontent-length:\s*(\d+)", low)
    if m:
        n = int(m.group(1))
        while len(buf) < n:
            buf += s.recv(65536)
        return buf[:n], buf[n:]
    body = b""
    while True:
        while b"\r\n" not in buf:
            buf += s.recv(65536)
        line, buf = buf.split(b"\r\n", 1)
        n = int(line.split(b";")[0], 16)
        while len(buf) < n + 2:
            buf += s.recv(65536)
        body += buf[:n]
        buf = buf[n + 2:]
        if n == 0:
            return body, buf


def pages(port, n, conns):
    want = PAGE
    for k, v in PARTS.items():
        want = want.replace('<!--#include virtual="/%s" -->' % k, v)
    want = want.encode()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in range(conns)]
    bufs = [b""] * conns
    done = 0
    try:
        while done < n:
            k = min(conns, n - done)
            for s in socks[:k]:
                s.sendall(REQ)
            for i, s in enumerate(socks[:k]):
                body, bufs[i] = read_response(s, bufs[i])
                if body != want:
                    raise SystemExit("wrong page: %r" % body[:200])
            done += k
    finally:
        for s in socks:
            s.close()
    return n


def totals(path):
    """Instructions and allocator calls of a callgrind output file, less
    what the start-up's entropy gathering (aws-lc's jitter entropy, a
    varying number of rounds) cost."""
    names, ir, allocs, entropy = {}, 0, 0, 0
    npos, caller, callee, after_calls = 1, "", "", False

    def name_of(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "")

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if after_calls:
                after_calls = False
                cols = line.split()
                if "jent" in callee and "jent" not in caller and len(cols) > npos:
                    entropy += int(cols[npos])
            elif line.startswith("positions:"):
                npos = len(line.split()) - 1
            elif line.startswith("totals:") or line.startswith("summary:"):
                ir = int(line.split()[1])
            elif line.startswith("fn="):
                caller = name_of(line[3:])
            elif line.startswith("cfn="):
                callee = name_of(line[4:])
            elif line.startswith("calls="):
                after_calls = True
                if ALLOC.match(callee):
                    allocs += int(line.split()[0][6:])
    return ir - entropy, allocs


def run(name, binary, base, port, warmup, n, conns, keep):
    prefix = os.path.join(base, "%s-%s" % (name, "B" if n else "A"))
    conf = setup(prefix, port)
    out = os.path.join(prefix, "callgrind.out")
    cmd = ["taskset", "-c", "0", "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, "--separate-threads=yes"] + (["--dump-instr=yes"] if os.environ.get("CG_INSTR") else []) + [
           binary, "-p", prefix + "/", "-c", conf]
    log = open(os.path.join(prefix, "logs", "valgrind.log"), "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(port, p)
        pages(port, warmup, conns)
        if n:
            pages(port, n, conns)
    finally:
        stop_server(p, name)
    # One file per thread (--separate-threads): the one that served (the
    # most allocator calls) counts, so the start-up's entropy gathering
    # (a varying number of rounds, in another thread) does not.
    per = []
    for fn in sorted(os.listdir(prefix)):
        if fn.startswith("callgrind.out"):
            per.append(totals(os.path.join(prefix, fn)) + (fn,))
    if not per:
        raise SystemExit("%s: no callgrind output in %s" % (name, prefix))
    if keep:
        for i, a, fn in per:
            print("%s: %s/%s %d Ir %d allocs" % (name, prefix, fn, i, a), file=sys.stderr)
    ir, allocs, _ = max(per, key=lambda t: t[1])
    return ir, allocs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--servers", default="nginx,sluice")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--conns", type=int, default=10)
    ap.add_argument("--port", type=int, default=18380)
    ap.add_argument("--keep", action="store_true", help="keep the callgrind files")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sluice-callgrind-ssi-")
    os.chmod(base, 0o755)
    try:
        for name in a.servers.split(","):
            binary = a.nginx if name == "nginx" else os.path.abspath(a.sluice)
            ir_a, al_a = run(name, binary, base, a.port, a.warmup, 0, a.conns, a.keep)
            ir_b, al_b = run(name, binary, base, a.port, a.warmup, a.pages, a.conns, a.keep)
            print("%-6s A: %d Ir, %d allocs; B: %d Ir, %d allocs; %.0f instructions/page, "
                  "%.1f allocations/page" % (name, ir_a, al_a, ir_b, al_b,
                                              (ir_b - ir_a) / a.pages, (al_b - al_a) / a.pages),
                  flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
