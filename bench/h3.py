#!/usr/bin/env python3
"""HTTP/3: sluice against nginx 1.26 and Caddy 2.6, per core: requests per
second and server CPU per request over QUIC.

  h3-small: a 12-byte static file (`hello world\\n`), h3load -c 10 -m 10
            (10 connections, 10 requests in flight on each).
  h3-1k:    a 1 KB static file, h3load -c 10 -m 10.
  h3-100k:  a 100 KB static file, h3load -c 10 -m 2.
  h3-conn:  a new QUIC connection per request: h3load -c 50 -m 1 -r 1 (50
            slots, each a full TLS 1.3 handshake, one GET of the 12-byte
            file, CONNECTION_CLOSE, again); reports connections per second
            and server CPU per connection, the price of a QUIC handshake.
  h2-small, h2-1k, h2-100k: the same files and load over HTTP/2 and TLS
            1.3 on TCP (the same servers, `listen ... ssl` beside the quic
            one), with Debian's h2load, so HTTP/3's cost shows beside
            HTTP/2's.

The load generator is bench/h3load (quinn + h3, a standalone crate like
bench/hsload; it verifies neither certificates nor handshake signatures):
Debian 12's h2load (nghttp2 1.52) is built without ngtcp2 and cannot
speak HTTP/3. Its summary is in h2load's format, read by benchlib's
parse_h2load.

Servers, all three started once, each on CPU 0 with one core's worth of
workers: sluice (`worker_processes 1`, `listen ... quic`, `http3 on`),
nginx (`--nginx`, default /work/nginx126/usr/sbin/nginx: Debian 13's
1.26.3, `worker_processes 1`, the same configuration text as sluice) and
Caddy (`--caddy`, Debian's 2.6.2, GOMAXPROCS=1, a Caddyfile with
`file_server` and the same certificate). One self-signed ECDSA P-256
certificate (openssl CLI) for all. h3load runs on CPU 1, and so does the
harness.

Per workload each server is checked (4 requests: status 200, byte-exact
body, ALPN h3), warmed up (--warmup seconds), then measured --runs times,
the order rotating run by run (sluice, nginx, caddy; nginx, caddy, sluice;
caddy, sluice, nginx; ...). Server CPU is utime+stime of the server's
process tree (/proc/PID/stat) just before and just after the h3load run.
Reported: per server the median req/s (connections/s for h3-conn), CPU
µs per request and CPU %, and for sluice the median of the run-by-run
ratios against nginx and against Caddy with their range.

    bench/h3.py --sluice target/release/sluice [--workloads h3-small,h3-1k,h3-100k,h3-conn,h2-small,h2-1k,h2-100k]
                [--runs 9] [--duration 5] [--json FILE]

Loopback only; every run bounded by -D (--duration, at most 10 s). Standard
library only. Needs caddy and openssl (Debian packages), Debian 13's nginx
1.26 (for its HTTP/3 module; Debian 12's 1.22 has none), cargo for
bench/h3load, which it builds on first use, and for the h2 workloads
h2load and curl (nghttp2-client, curl). Run as root (nginx's worker
switches to nobody).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.common import (  # noqa: E402
    log, subst, write_text as write,
    BENCH_DIR, CLK_TCK, REPO_DIR, cpu_sample, cpu_times, process_tree, raise_nofile_preexec)
from benchlib.loadgen import parse_h2load  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
H3LOAD_DIR = os.path.join(BENCH_DIR, "h3load")
H3LOAD_BIN = os.path.join(H3LOAD_DIR, "target", "release", "h3load")
NGINX126 = "/work/nginx126/usr/sbin/nginx"
SERVERS = ("sluice", "nginx", "caddy")

# name: (path, body size, h3load options, what a "request" is)
WORKLOADS = {
    "h3-small": ("/helloworld", 12, ["-c", "10", "-m", "10"], "req"),
    "h3-1k": ("/1k.bin", 1024, ["-c", "10", "-m", "10"], "req"),
    "h3-100k": ("/100k.bin", 100 * 1024, ["-c", "10", "-m", "2"], "req"),
    "h3-conn": ("/helloworld", 12, ["-c", "50", "-m", "1", "-r", "1"], "conn"),
    "h2-small": ("/helloworld", 12, ["-c", "10", "-m", "10"], "req"),
    "h2-1k": ("/1k.bin", 1024, ["-c", "10", "-m", "10"], "req"),
    "h2-100k": ("/100k.bin", 100 * 1024, ["-c", "10", "-m", "2"], "req"),
}

# sluice and nginx: the same text, only the prefix and port differ.
CONF = """
daemon off; worker_processes 1; worker_rlimit_nofile 65535;
pid @PREFIX@/run.pid; error_log @PREFIX@/logs/error.log;
events { worker_connections 20000; }
http {
    default_type application/octet-stream;
    access_log off;
    server_tokens off;
    keepalive_requests 1000000;
    ssl_protocols TLSv1.3;
    ssl_certificate @TOP@/cert.pem;
    ssl_certificate_key @TOP@/key.pem;
    server {
        # nginx's socket otherwise keeps the kernel's default (208 KB here)
        # and drops Initial packets in h3-conn's handshake bursts; sluice
        # asks for 4 MB by itself, quic-go (Caddy) for 2 MB.
        listen 127.0.0.1:@PORT@ quic rcvbuf=4m;
        listen 127.0.0.1:@PORT@ ssl;
        http2 on;
        http3 on;
        root @TOP@/html;
    }
}
"""

CADDYFILE = """{
\tadmin off
\tauto_https disable_redirects
\thttp_port @HTTP_PORT@
\thttps_port @PORT@
\tskip_install_trust
\tservers {
\t\tprotocols h1 h2 h3
\t}
}
https://127.0.0.1:@PORT@ {
\tbind 127.0.0.1
\ttls @TOP@/cert.pem @TOP@/key.pem
\troot * @TOP@/html
\tfile_server
}
"""


def free_port(port):
    """Free for TCP and UDP on 127.0.0.1 (Caddy binds both)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def pick(start, n):
    ports = [p for p in range(start, start + 300) if free_port(p)][:n]
    if len(ports) < n:
        raise SystemExit("no free loopback ports near %d" % start)
    return ports


def h3load(url, opts, duration=None, requests=None, out=None, timeout=10, h2=False):
    """The load command: h3load, or h2load (same options) with h2."""
    if h2:
        cmd = ["taskset", "-c", str(CLIENT_CPU), "h2load"] + opts
        if requests is not None:
            cmd += ["-n", str(requests)]
        if duration is not None:
            cmd += ["-D", "%g" % duration]
        return cmd + [url]
    cmd = ["taskset", "-c", str(CLIENT_CPU), H3LOAD_BIN] + opts
    if requests is not None:
        cmd += ["-n", str(requests)]
    if duration is not None:
        cmd += ["-D", "%g" % duration]
    cmd += ["--timeout", str(timeout)]
    if out:
        cmd += ["-o", out]
    return cmd + [url]


def udp_rcvbuf_errors():
    """The kernel's count of UDP datagrams dropped for a full receive buffer
    (any socket: the server's or h3load's)."""
    lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Udp:")]
    return int(lines[1][lines[0].index("RcvbufErrors")])


def run(cmd, limit):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                       preexec_fn=raise_nofile_preexec)
    return p.stdout, p.stderr


class Server:
    def __init__(self, kind, binary, top, port, http_port):
        self.kind, self.port = kind, port
        self.prefix = os.path.join(top, kind)
        os.makedirs(os.path.join(self.prefix, "logs"))
        os.chmod(self.prefix, 0o755)
        subs = {"@PREFIX@": self.prefix, "@TOP@": top, "@PORT@": port, "@HTTP_PORT@": http_port}
        self.env = None
        self.stop_sig = signal.SIGQUIT
        if kind == "caddy":
            conf = os.path.join(self.prefix, "Caddyfile")
            write(conf, subst(CADDYFILE, subs))
            self.cmd = [binary, "run", "--config", conf, "--adapter", "caddyfile"]
            # autosave.json and its data directory stay in the temp dir;
            # one P for Go's scheduler, as the others have one worker.
            self.env = dict(os.environ, XDG_CONFIG_HOME=self.prefix, XDG_DATA_HOME=self.prefix,
                            HOME=self.prefix, GOMAXPROCS="1")
            self.stop_sig = signal.SIGTERM
            self.logs = [os.path.join(self.prefix, "stdout.log")]
        else:
            conf = os.path.join(self.prefix, "nginx.conf")
            write(conf, subst(CONF, subs))
            t = subprocess.run([binary, "-t", "-p", self.prefix + "/", "-c", conf],
                               capture_output=True, text=True)
            if t.returncode != 0:
                raise SystemExit("%s -t failed:\n%s" % (kind, t.stdout + t.stderr))
            self.cmd = [binary, "-p", self.prefix + "/", "-c", conf]
            self.logs = [os.path.join(self.prefix, "logs", "error.log"),
                         os.path.join(self.prefix, "stdout.log")]
        self.proc = None
        self.seen = set()

    def start(self):
        with open(os.path.join(self.prefix, "stdout.log"), "ab") as out:
            self.proc = subprocess.Popen(["taskset", "-c", str(SERVER_CPU)] + self.cmd,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=raise_nofile_preexec,
                                         env=self.env)
        url = "https://127.0.0.1:%d/helloworld" % self.port
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("%s exited (%s):\n%s" % (self.kind, self.proc.returncode, self.tail()))
            out, _ = run(h3load(url, ["-c", "1", "-m", "1"], requests=1, timeout=1), 10)
            if "1 succeeded" in out:
                break
            if time.monotonic() > deadline:
                raise SystemExit("%s never answered over HTTP/3:\n%s\n%s" % (self.kind, out, self.tail()))
            time.sleep(0.1)

    def pids(self):
        pids = process_tree(self.proc.pid)
        self.seen.update(pids)
        return pids

    def affinity(self):
        out = []
        for pid in self.pids():
            try:
                out.append("%d:%s" % (pid, ",".join(str(c) for c in sorted(os.sched_getaffinity(pid)))))
            except OSError:
                pass
        return " ".join(out)

    def tail(self, n=2000):
        text = ""
        for p in self.logs:
            try:
                text += open(p, errors="replace").read()[-n:]
            except OSError:
                pass
        return text

    def log_lines(self):
        lines = []
        for p in self.logs:
            try:
                lines += open(p, errors="replace").read().splitlines()
            except OSError:
                pass
        return lines

    def stop(self):
        if self.proc is None:
            return
        self.pids()
        try:
            os.kill(self.proc.pid, self.stop_sig)
            self.proc.wait(10)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        # Whatever of its tree is still there (a worker left behind, or all
        # of it after 10 s): SIGKILL, by pid, only if it is still this binary.
        for pid in sorted(self.seen):
            try:
                exe = os.readlink("/proc/%d/exe" % pid)
            except OSError:
                continue
            if os.path.basename(self.cmd[0]) in exe or pid == self.proc.pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def check(srv, top, wl):
    """4 GETs on one connection: 200, byte-exact body, ALPN h3."""
    path, size, _, _ = WORKLOADS[wl]
    got = os.path.join(top, "check-%s.body" % srv.kind)
    url = "https://127.0.0.1:%d%s" % (srv.port, path)
    h2 = wl.startswith("h2")
    out, err = run(h3load(url, ["-c", "1", "-m", "2"], requests=4, out=None if h2 else got, h2=h2), 30)
    if h2:
        run(["curl", "-sk", "--http2", "-o", got, url], 30)
    r = parse_h2load(out)
    want = open(os.path.join(top, "html", path.lstrip("/")), "rb").read()
    body = open(got, "rb").read() if os.path.exists(got) else b""
    if r["errors"]["not_succeeded"] or r["alpn"] != ("h2" if h2 else "h3") or body != want or len(want) != size:
        raise SystemExit("%s %s check failed (alpn %s, body %d of %d bytes):\n%s%s"
                         % (srv.kind, wl, r["alpn"], len(body), size, out, err))
    return r


def measure(srv, wl, duration):
    path, _, opts, unit = WORKLOADS[wl]
    h2 = wl.startswith("h2")
    cmd = h3load("https://127.0.0.1:%d%s" % (srv.port, path), opts, duration=duration, h2=h2)
    pids = srv.pids()
    before, cpu0_before, cpu1_before = cpu_sample(pids)[0], cpu_times(SERVER_CPU), cpu_times(CLIENT_CPU)
    drops = udp_rcvbuf_errors()
    t0 = time.monotonic()
    out, err = run(cmd, duration + 40)
    drops = udp_rcvbuf_errors() - drops
    wall = time.monotonic() - t0
    after, cpu0_after, cpu1_after = cpu_sample(srv.pids())[0], cpu_times(SERVER_CPU), cpu_times(CLIENT_CPU)
    if srv.proc.poll() is not None:
        raise SystemExit("%s died during %s:\n%s" % (srv.kind, wl, srv.tail()))
    r = parse_h2load(out)
    if h2:
        # h2load prints neither: its connections are -c, its CPU is CPU 1's.
        conns = int(opts[opts.index("-c") + 1])
        r["client_cpu_pct"] = 100.0 * (cpu_times(CLIENT_CPU)[0] - cpu1_before[0]) / CLK_TCK / max(0.001, time.monotonic() - t0)
    else:
        conns = int(out.split("connections: ", 1)[1].split()[0])
        cli = out.split("client cpu: ", 1)[1].split("%")[0].split(",")[-1].strip()
        r["client_cpu_pct"] = float(cli)
    # UDP payload h3load received (QUIC packets whole) per request or connection
    r["rx_bytes"] = int(out.split("traffic: ", 1)[1].split("(", 1)[1].split(")", 1)[0])
    r["connections"] = conns
    cpu_s = (after - before) / CLK_TCK
    n = r["requests"] if unit == "req" else conns
    r["rate"] = r["rps"] if unit == "req" else conns / parse_elapsed(out)
    r["us_per"] = cpu_s * 1e6 / max(1, n)
    r["cpu_pct"] = 100.0 * cpu_s / wall
    r["rx_per"] = r["rx_bytes"] / max(1, n)
    # CPU 0 busy with anything but the server, and CPU 1 busy (h3load, the
    # harness, anything else): a rate limited by CPU 1 is the client's.
    r["other_pct"] = 100.0 * ((cpu0_after[0] - cpu0_before[0]) / CLK_TCK - cpu_s) / wall
    r["steal_pct"] = 100.0 * (cpu0_after[1] - cpu0_before[1]) / CLK_TCK / wall
    r["cpu1_pct"] = 100.0 * (cpu1_after[0] - cpu1_before[0]) / CLK_TCK / wall
    r["errors_total"] = r["errors"]["not_succeeded"] + r["errors"]["3xx"]
    r["udp_drops"] = drops
    r["stderr"] = err.strip()
    return r


def parse_elapsed(out):
    s = out.split("finished in ", 1)[1].split(",")[0]
    return float(s.rstrip("s"))


def span(xs, fmt="%.2f"):
    return (fmt + " (" + fmt + "–" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def num(x, digits=0):
    return "{:,.{d}f}".format(x, d=digits)


def report(wl, res, runs, duration):
    path, size, opts, unit = WORKLOADS[wl]
    what = "connections/s" if unit == "conn" else "req/s"
    per = "connection" if unit == "conn" else "request"
    log("\n### %s: %s (%d B), `%s %s -D %g`, %d runs each\n"
        % (wl, path, size, "h2load" if wl.startswith("h2") else "h3load", " ".join(opts), duration, runs))
    log("| | sluice | nginx 1.26.3 | Caddy 2.6.2 | sluice/nginx, paired median (range) | sluice/Caddy, paired median (range) |")
    log("|---|---|---|---|---|---|")
    s, n, c = res["sluice"], res["nginx"], res["caddy"]

    def row(label, key, digits, fmt, ratios=True):
        med = [statistics.median(r[key] for r in res[k]) for k in SERVERS]
        rn = [a[key] / b[key] for a, b in zip(s, n)] if all(b[key] for b in n) else None
        rc = [a[key] / b[key] for a, b in zip(s, c)] if all(b[key] for b in c) else None
        log("| %s | %s | %s | %s | %s | %s |" % (
            label, num(med[0], digits), num(med[1], digits), num(med[2], digits),
            span(rn, fmt) if rn and ratios else "", span(rc, fmt) if rc and ratios else ""))

    row(what, "rate", 0, "%.2f")
    row("server CPU µs/%s" % per, "us_per", 1, "%.2f")
    row("server CPU % (of one core)", "cpu_pct", 0, "%.2f", ratios=False)
    row("bytes received by the load generator per %s (UDP or TCP payload)" % per, "rx_per", 0, "%.2f")
    log("| load generator CPU %% (CPU 1) | %s |" % " | ".join(
        num(statistics.median(r["client_cpu_pct"] for r in res[k])) for k in SERVERS) + " | | |")
    log("| errors / requests (all runs) | %s |" % " | ".join(
        "%d / %s" % (sum(r["errors_total"] for r in res[k]), num(sum(r["requests_total"] for r in res[k])))
        for k in SERVERS) + " | | |")
    log("| UDP datagrams dropped, receive buffer full (all runs) | %s | | |" % " | ".join(
        num(sum(r["udp_drops"] for r in res[k])) for k in SERVERS))


def build_h3load():
    cmd = ["cargo", "build", "--release", "--locked", "--manifest-path",
           os.path.join(H3LOAD_DIR, "Cargo.toml"), "--target-dir", os.path.join(H3LOAD_DIR, "target")]
    if shutil.which("cargo") is None:
        raise SystemExit("cargo not found: bench/h3load needs it")
    log("building bench/h3load: " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def machine(binaries):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")

    def ver(cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (r.stdout + r.stderr).strip().splitlines()
        except (OSError, IndexError):
            return ["?"]
    ng = ver([binaries["nginx"], "-V"])
    return {"nproc": os.cpu_count(), "cpu": cpu, "sluice": ver([binaries["sluice"], "-v"])[0],
            "nginx": ng[0], "nginx_openssl": ng[1] if len(ng) > 1 else "?",
            "caddy": ver([binaries["caddy"], "version"])[0], "openssl": ver(["openssl", "version"])[0],
            "kernel": os.uname().release, "loadavg": open("/proc/loadavg").read().strip()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", default=os.path.join(REPO_DIR, "target", "release", "sluice"))
    ap.add_argument("--nginx", default=NGINX126)
    ap.add_argument("--caddy", default="caddy")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--runs", type=int, default=9, help="measured runs per server and workload (default 9)")
    ap.add_argument("--duration", type=float, default=5, help="seconds per run (default 5, at most 10)")
    ap.add_argument("--warmup", type=float, default=2, help="seconds of warm-up per server and workload (default 2)")
    ap.add_argument("--pause", type=float, default=0.5)
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--json", help="write every figure to this file")
    a = ap.parse_args()
    if not 0 < a.duration <= 10 or not 0 <= a.warmup <= 10:
        raise SystemExit("--duration and --warmup are at most 10 s")
    wls = a.workloads.split(",")
    for w in wls:
        if w not in WORKLOADS:
            raise SystemExit("unknown workload %s (have %s)" % (w, ", ".join(WORKLOADS)))
    binaries = {"sluice": os.path.abspath(a.sluice), "nginx": shutil.which(a.nginx) or a.nginx,
                "caddy": shutil.which(a.caddy) or a.caddy}
    for k, b in binaries.items():
        if not os.access(b, os.X_OK):
            raise SystemExit("%s not found at %s%s" % (k, b, {
                "caddy": " (apt-get install -y caddy, and stop its packaged service)",
                "nginx": " (Debian 13's nginx 1.26: --nginx PATH)"}.get(k, "")))
    if not os.access(H3LOAD_BIN, os.X_OK):
        build_h3load()
    os.sched_setaffinity(0, {CLIENT_CPU})
    m = machine(binaries)
    log("machine: nproc %s, %s, kernel %s; %s; %s (%s); caddy %s; %s; load average %s"
        % (m["nproc"], m["cpu"], m["kernel"], m["sluice"], m["nginx"], m["nginx_openssl"], m["caddy"],
           m["openssl"], m["loadavg"]))
    top = tempfile.mkdtemp(prefix="sluice-h3-")
    os.chmod(top, 0o755)     # nginx's worker runs as nobody
    html = os.path.join(top, "html")
    os.makedirs(html)
    write(os.path.join(html, "helloworld"), "hello world\n")
    for name, size in (("1k.bin", 1024), ("100k.bin", 100 * 1024)):
        with open(os.path.join(html, name), "wb") as f:
            f.write(os.urandom(size))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", os.path.join(top, "key.pem"), "-out", os.path.join(top, "cert.pem"),
                    "-days", "30", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    for f in ("key.pem", "cert.pem"):
        os.chmod(os.path.join(top, f), 0o644)
    ports = pick(27000, 4)
    servers = {}
    out = {"machine": m, "args": vars(a), "runs": {}}
    try:
        for i, kind in enumerate(SERVERS):
            servers[kind] = Server(kind, binaries[kind], top, ports[i], ports[3])
            servers[kind].start()
            log("  %s on udp %d, pid %d, affinity %s" % (kind, ports[i], servers[kind].proc.pid,
                                                           servers[kind].affinity()))
        log_start = {k: len(s.log_lines()) for k, s in servers.items()}
        for wl in wls:
            for kind in SERVERS:
                r = check(servers[kind], top, wl)
                log("  %s %s check: 4 of 4 ok, alpn %s, body byte-exact" % (kind, wl, r["alpn"]))
            path, _, opts, _ = WORKLOADS[wl]
            if a.warmup:
                for kind in SERVERS:
                    run(h3load("https://127.0.0.1:%d%s" % (servers[kind].port, path), opts, duration=a.warmup,
                               h2=wl.startswith("h2")), a.warmup + 40)
            log("\n== %s: %s %s -D %g, %d runs, order rotating"
                % (wl, "h2load" if wl.startswith("h2") else "h3load", " ".join(opts), a.duration, a.runs))
            res = {k: [] for k in SERVERS}
            for i in range(a.runs):
                order = SERVERS[i % 3:] + SERVERS[:i % 3]
                for kind in order:
                    time.sleep(a.pause)
                    r = measure(servers[kind], wl, a.duration)
                    res[kind].append(r)
                    log("  run %d %-6s %9.0f %s  %7.1f us CPU/%s  cpu %3.0f%%  other %3.0f%%  steal %2.0f%%  "
                        "cli %3.0f%%  CPU1 %3.0f%%  errors %d/%d  udp drops %d%s"
                        % (i + 1, kind, r["rate"], "conn/s" if WORKLOADS[wl][3] == "conn" else "req/s",
                           r["us_per"], WORKLOADS[wl][3], r["cpu_pct"], r["other_pct"], r["steal_pct"],
                           r["client_cpu_pct"], r["cpu1_pct"], r["errors_total"], r["requests_total"], r["udp_drops"],
                           ("  [%s]" % r["stderr"].replace("\n", " / ")[:300]) if r["stderr"] else ""))
            out["runs"][wl] = res
            report(wl, res, a.runs, a.duration)
        log("\nserver logs during the runs (lines, and those at error level or worse):")
        for kind, s in servers.items():
            lines = s.log_lines()[log_start[kind]:]
            bad = [l for l in lines if any(t in l for t in ("[error]", "[crit]", "[alert]", "[emerg]",
                                                             '"level":"error"', "panic"))]
            out.setdefault("logs", {})[kind] = {"lines": len(lines), "errors": bad[:50]}
            log("  %s: %d lines, %d at error level or worse%s" % (kind, len(lines), len(bad),
                                                                 "".join("\n    " + l[:300] for l in bad[:10])))
    finally:
        for s in servers.values():
            s.stop()
        if not a.keep_tmp:
            shutil.rmtree(top, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
