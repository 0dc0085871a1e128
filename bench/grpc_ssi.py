#!/usr/bin/env python3
"""gRPC unary calls and SSI page assembly: sluice against nginx, CPU per
call or page and calls or pages per second.

  g1: a gRPC unary call (POST /bench.Echo/Say, a 5-byte message, content-type
      application/grpc, te: trailers) over h2c through `grpc_pass` to an
      origin that answers with a 5-byte message and `grpc-status: 0` in
      trailers. Load: `h2load -c10 -m10` for --duration seconds.
  s1: an SSI page (`ssi on`) with three `<!--#include virtual=... -->` of
      small static files, 1.3 KB assembled, over HTTP/1.1 keep-alive, `wrk
      -c50`.

The same configuration text runs on both servers (only the prefix and port
differ). The servers under test are pinned to CPU 0 (one worker), the load
generator and the gRPC origin (an nginx on h2c: a static, gRPC-framed body
with `add_trailer grpc-status 0`, reading each request whole before it
answers) to CPU 1. Each round runs nginx then
sluice (or the reverse: A B alternation); CPU is the server's utime+stime
over the measured run. Reported: per server the median of runs, and the
paired median of sluice/nginx ratios with its run-by-run range.

    bench/grpc_ssi.py --sluice target/release/sluice [--workloads g1,s1]
                      [--runs 9] [--duration 5]

Loopback only, every run bounded. Standard library only; needs nginx,
h2load (nghttp2-client) and wrk (Debian packages of those names).
"""

import argparse
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.common import cpu_sample, pick_ports, process_tree  # noqa: E402
from benchlib.loadgen import parse_h2load, parse_wrk  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SERVER_CPU, CLIENT_CPU = 0, 1

ORIGIN_CONF = """
daemon off; master_process off; worker_processes 1;
error_log @PREFIX@/logs/error.log error; pid @PREFIX@/logs/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:@PORT@ http2;
        root @PREFIX@/html;
        keepalive_requests 1000000;
        # The mirror makes nginx read the whole request before answering:
        # an answer that comes before the request's DATA has left makes a
        # gRPC proxy see frames for a stream it has finished.
        location / {
            mirror /read-body;
            default_type application/grpc;
            add_trailer grpc-status 0;
            add_trailer grpc-message "";
            error_page 405 =200 $uri;
        }
        location = /read-body { internal; return 204; }
    }
}
"""

PROXY_CONF = """
worker_processes 1; daemon off; master_process on;
error_log @PREFIX@/logs/error.log error; pid @PREFIX@/logs/server.pid;
events { worker_connections 4096; }
http {
    include mime.types;
    access_log off;
    upstream grpc_origin { server 127.0.0.1:@ORIGIN_PORT@; keepalive 32; }
    server {
        listen 127.0.0.1:@PORT@ http2;
        root @PREFIX@/html;
        keepalive_requests 1000000;
        location /bench.Echo/ { grpc_pass grpc://grpc_origin; }
        location /page.shtml { ssi on; }
    }
    server {
        listen 127.0.0.1:@PORT1@;
        root @PREFIX@/html;
        keepalive_requests 1000000;
        location / { ssi on; }
    }
}
"""

MESSAGE = b"\x00" + struct.pack(">I", 5) + b"hello"
PARTS = {"head.html": "<header>" + "h" * 300 + "</header>\n",
         "body.html": "<main>" + "b" * 500 + "</main>\n",
         "foot.html": "<footer>" + "f" * 300 + "</footer>\n"}
PAGE = ("<html><body>\n"
        + "".join('<!--#include virtual="/%s" -->\n' % n for n in PARTS)
        + "</body></html>\n")


def write(prefix, conf, subs):
    for d in ("conf", "logs", "html"):
        os.makedirs(os.path.join(prefix, d), exist_ok=True)
    shutil.copy("/etc/nginx/mime.types", os.path.join(prefix, "conf", "mime.types"))
    for k, v in subs.items():
        conf = conf.replace(k, str(v))
    path = os.path.join(prefix, "conf", "nginx.conf")
    with open(path, "w") as f:
        f.write(conf.replace("@PREFIX@", prefix))
    return path


def wait_port(port, proc, timeout=30):
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited: see its error.log")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("port %d never opened" % port)


def start(cmd, cpu, port):
    p = subprocess.Popen(["taskset", "-c", str(cpu)] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    wait_port(port, p)
    return p


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def measure(proc, cmd, parse, duration):
    pids = process_tree(proc.pid)
    before = cpu_sample(pids)[0]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    after = cpu_sample(process_tree(proc.pid))[0]
    r = parse(out.stdout)
    r["cpu_s"] = (after - before) / TICK
    r["us_per"] = r["cpu_s"] * 1e6 / max(1, r["requests"])
    return r


def load(workload, port, port1, duration):
    if workload == "g1":
        msg = os.path.join(tempfile.gettempdir(), "sluice-bench-grpc.msg")
        cmd = ["taskset", "-c", str(CLIENT_CPU), "h2load", "-t", "1", "-c", "10", "-m", "10",
               "-D", str(duration), "-d", msg, "-H", "content-type: application/grpc",
               "-H", "te: trailers", "http://127.0.0.1:%d/bench.Echo/Say" % port]
        return cmd, parse_h2load
    cmd = ["taskset", "-c", str(CLIENT_CPU), "wrk", "-t1", "-c50", "-d%ds" % duration,
           "http://127.0.0.1:%d/page.shtml" % port1]
    return cmd, parse_wrk


def check(workload, port, port1):
    """What a client gets: the origin's message and grpc-status 0; the page
    with its three parts."""
    if workload == "g1":
        msg = os.path.join(tempfile.gettempdir(), "sluice-bench-grpc.msg")
        out = subprocess.run(["h2load", "-n", "1", "-c", "1", "-d", msg, "-H",
                              "content-type: application/grpc", "-H", "te: trailers",
                              "http://127.0.0.1:%d/bench.Echo/Say" % port],
                             capture_output=True, text=True, timeout=20)
        if "status codes" not in out.stdout:
            raise SystemExit("g1 check: h2load said:\n" + out.stdout + out.stderr)
        out = out.stdout
        r = parse_h2load(out)
        if r["errors"]["not_succeeded"]:
            raise SystemExit("g1 check failed:\n" + out)
        return
    out = subprocess.run(["curl", "-s", "http://127.0.0.1:%d/page.shtml" % port1],
                         capture_output=True, timeout=20).stdout.decode()
    want = PAGE
    for n, body in PARTS.items():
        want = want.replace('<!--#include virtual="/%s" -->' % n, body)
    if out != want:
        raise SystemExit("s1 check failed: got %r" % out[:200])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--nginx", default="nginx")
    ap.add_argument("--workloads", default="g1,s1")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--duration", type=int, default=5)
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="sluice-grpc-ssi-")
    os.chmod(top, 0o755)   # nginx's worker runs as nobody
    with open(os.path.join(tempfile.gettempdir(), "sluice-bench-grpc.msg"), "wb") as f:
        f.write(MESSAGE)
    ports = pick_ports(24000, 5)
    origin_prefix = os.path.join(top, "origin")
    oconf = write(origin_prefix, ORIGIN_CONF, {"@PORT@": ports[0]})
    with open(os.path.join(origin_prefix, "html", "Say"), "wb") as f:
        f.write(MESSAGE)
    os.makedirs(os.path.join(origin_prefix, "html", "bench.Echo"), exist_ok=True)
    os.replace(os.path.join(origin_prefix, "html", "Say"),
               os.path.join(origin_prefix, "html", "bench.Echo", "Say"))
    origin = start([a.nginx, "-p", origin_prefix, "-c", oconf], CLIENT_CPU, ports[0])
    servers = {}
    try:
        for i, (name, binary) in enumerate((("nginx", a.nginx), ("sluice", os.path.abspath(a.sluice)))):
            prefix = os.path.join(top, name)
            port, port1 = ports[1 + 2 * i], ports[2 + 2 * i]
            conf = write(prefix, PROXY_CONF, {"@PORT@": port, "@PORT1@": port1, "@ORIGIN_PORT@": ports[0]})
            with open(os.path.join(prefix, "html", "page.shtml"), "w") as f:
                f.write(PAGE)
            for n, body in PARTS.items():
                with open(os.path.join(prefix, "html", n), "w") as f:
                    f.write(body)
            servers[name] = (start([binary, "-p", prefix, "-c", conf], SERVER_CPU, port), port, port1)
        for w in a.workloads.split(","):
            for name, (_, port, port1) in servers.items():
                check(w, port, port1)
            results = {"nginx": [], "sluice": []}
            for run in range(a.runs):
                order = ["nginx", "sluice"] if run % 2 == 0 else ["sluice", "nginx"]
                for name in order:
                    proc, port, port1 = servers[name]
                    cmd, parse = load(w, port, port1, a.duration)
                    r = measure(proc, cmd, parse, a.duration)
                    if w == "g1" and r["errors"]["not_succeeded"]:
                        logs = "".join(open(os.path.join(top, n, "logs", "error.log")).read()[-1500:]
                                       for n in ("origin", name))
                        raise SystemExit("%s g1: %s of %s\n%s" % (name, r["errors"], r["requests_total"], logs))
                    results[name].append(r)
            report(w, results)
    finally:
        for proc, _, _ in servers.values():
            stop(proc)
        stop(origin)
        shutil.rmtree(top, ignore_errors=True)


def report(w, results):
    title = {"g1": "g1 gRPC unary call, h2c, h2load -c10 -m10",
             "s1": "s1 SSI page, 3 includes, wrk -c50"}[w]
    print("\n" + title)
    for name in ("nginx", "sluice"):
        rs = results[name]
        print("  %-6s  %9.0f req/s  %7.2f us CPU per request  (runs: %s)" % (
            name, statistics.median(r["rps"] for r in rs), statistics.median(r["us_per"] for r in rs),
            ", ".join("%.2f" % r["us_per"] for r in rs)))
    ratios = [s["us_per"] / n["us_per"] for n, s in zip(results["nginx"], results["sluice"])]
    rps = [s["rps"] / n["rps"] for n, s in zip(results["nginx"], results["sluice"])]
    print("  sluice/nginx CPU per request: median %.2f (range %.2f-%.2f); req/s: median %.2f (range %.2f-%.2f)" % (
        statistics.median(ratios), min(ratios), max(ratios), statistics.median(rps), min(rps), max(rps)))


if __name__ == "__main__":
    main()
