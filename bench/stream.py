#!/usr/bin/env python3
"""Stream (TCP/UDP) proxying: sluice against nginx's stream module and
HAProxy in mode tcp, throughput, connection rate, TLS handshakes, UDP
queries and idle memory.

  st1:  TCP throughput, 1 connection: 1 GB (10^9 bytes) from the origin
        through the proxy to the client. MB/s and server CPU s per GB.
  st2:  the same on 10 connections at once (100 MB each, 1 GB in all).
  st3:  connection rate: 100 concurrent slots, each a new TCP connection
        that sends 100 bytes, reads the 100 echoed bytes and closes.
        Sessions/s and server CPU µs per session.
  st4:  TLS termination in front of TCP (`listen ... ssl`, a plain TCP
        origin): bench/hsload -c 100, TLSv1.3, a new connection and a full
        handshake per request (no resumption); the origin answers the GET
        with a 43-byte body and closes. Handshakes/s, CPU µs per handshake.
  st4b: st4 with TLSv1.2.
  st5:  UDP, DNS-sized: 100 client sockets with one 40-byte query in flight
        each, the origin answers 100 bytes; `proxy_responses 1` (a session
        per query). Queries/s and CPU µs per query. nginx and sluice only:
        HAProxy 2.6 has no UDP proxy.
  st6:  idle memory: 10,000 proxied TCP sessions (each echoed 100 bytes
        once, so the origin side is connected too) held open on freshly
        started servers; RSS and PSS growth per session, fds per session.

Beside the servers, for st1-st3 and st5, runs the floor proxy
(bench/stream/floorproxy.c: accept, connect, relay, close; a socket per UDP
query; nothing else): what the kernel costs for the workload, so a target
below it is recognised as such.

The same configuration text (bench/conf/stream.conf) runs on nginx and on
sluice, only the prefix and ports differ; HAProxy runs
bench/conf/stream_haproxy.cfg (`haproxy -f CONF -db`, `nbthread 1`). The
server under test is pinned to CPU 0 (one worker), the load generator and
the origin to CPU 1. The origins and the load generators of st1-st3, st5
and st6 are bench/stream/streamtool.c, built with cc into the temp dir at
start; st4's is bench/hsload (built with cargo when missing). Each round
runs every server once, the order rotating round by round (A B C, B C A,
...); CPU is the server's utime+stime over the measured run. Reported, per
server: the median of runs; per peer: the median of the run-by-run
sluice/peer ratios with their range.

    bench/stream.py --sluice target/release/sluice [--workloads st1,...]
                    [--runs 9] [--duration 5] [--peers nginx,haproxy,floor]

Loopback only, every run bounded in time (and st1/st2 in bytes). Standard
library only; needs nginx with libnginx-mod-stream, haproxy, openssl, cc
(Debian packages nginx, libnginx-mod-stream, haproxy, openssl, gcc), and
cargo for bench/hsload. Run it as root (nginx's worker switches to nobody,
st6 raises the file limit).
"""

import argparse
import os
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.common import (  # noqa: E402
    BENCH_DIR, CLK_TCK, HSLOAD_BIN, BenchError, cpu_sample, cpu_times, log, mem_sample,
    pick_ports, raise_nofile_preexec, read_line, short, spawn_daemon, sysctl, set_sysctl)
from benchlib.loadgen import hsload_cmd, parse_hsload  # noqa: E402
from benchlib.server import Server  # noqa: E402
from benchlib.setup import SetupMixin  # noqa: E402

TOOL_SRC = os.path.join(BENCH_DIR, "stream", "streamtool.c")
FLOOR_SRC = os.path.join(BENCH_DIR, "stream", "floorproxy.c")
CONF = "stream.conf"
HAPROXY_CONF = "stream_haproxy.cfg"
NGINX_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"

GB = 10 ** 9
SOURCE_FILE_BYTES = 64 << 20      # what the origin sends, round and round
ECHO_BYTES = 100
QUERY_BYTES, ANSWER_BYTES = 40, 100
CONC = 100                        # st3, st4, st5
IDLE_SESSIONS = 10000             # st6
TPUT_TIMEOUT = 120                # seconds for one GB at most

ALL = ("st1", "st2", "st3", "st4", "st4b", "st5", "st6")
TITLES = {
    "st1": "st1 TCP throughput, 1 connection, 1 GB",
    "st2": "st2 TCP throughput, 10 connections, 1 GB in all",
    "st3": "st3 connection rate, c=100, a new connection per 100-byte echo",
    "st4": "st4 TLS termination, full handshakes, TLSv1.3, hsload -c 100",
    "st4b": "st4b TLS termination, full handshakes, TLSv1.2, hsload -c 100",
    "st5": "st5 UDP, 40-byte queries, 100-byte answers, proxy_responses 1, 100 sockets",
    "st6": "st6 idle memory, proxied TCP sessions held idle",
}
# The targets, printed under each table.
TARGETS = {
    "st1": "MB/s >= nginx's; CPU/GB <= 0.7x nginx's and <= HAProxy's",
    "st2": "MB/s >= nginx's; CPU/GB <= 0.7x nginx's and <= HAProxy's",
    "st3": "sessions/s >= 1.3x nginx's at no more CPU per session",
    "st4": "handshakes/s >= 1.5x nginx's",
    "st4b": "handshakes/s >= 1.5x nginx's",
    "st5": "queries/s >= nginx's at <= 0.8x its CPU per query",
    "st6": "memory per session <= nginx's",
}
# (label, key, format, ratio column?) per kind of workload.
METRICS = {
    "tput": [("MB/s", "rate", "{:,.0f}", True),
             ("server CPU s per GB (utime+stime)", "cpu_per", "{:.3f}", True),
             ("server CPU %", "cpu_pct", "{:.1f}", False),
             ("CPU 1 busy % (load generator + origin)", "cpu1_pct", "{:.1f}", False)],
    "crate": [("sessions/s", "rate", "{:,.0f}", True),
              ("server CPU µs per session", "cpu_per", "{:.2f}", True),
              ("server CPU %", "cpu_pct", "{:.1f}", False),
              ("CPU 1 busy % (load generator + origin)", "cpu1_pct", "{:.1f}", False)],
    "tls": [("handshakes/s", "rate", "{:,.0f}", True),
            ("server CPU µs per handshake", "cpu_per", "{:.1f}", True),
            ("server CPU %", "cpu_pct", "{:.1f}", False),
            ("CPU 1 busy % (hsload + origin)", "cpu1_pct", "{:.1f}", False)],
    "udp": [("queries/s", "rate", "{:,.0f}", True),
            ("server CPU µs per query", "cpu_per", "{:.2f}", True),
            ("server CPU %", "cpu_pct", "{:.1f}", False),
            ("CPU 1 busy % (load generator + origin)", "cpu1_pct", "{:.1f}", False)],
    "idle": [("RSS KB per session", "rss_kb", "{:.2f}", True),
             ("PSS KB per session", "pss_kb", "{:.2f}", True),
             ("RSS MB before (idle server)", "rss0_mb", "{:.1f}", False),
             ("fds per session", "fds_per", "{:.2f}", False),
             ("kernel slab KB per session (whole machine: client and origin too; noisy)",
              "slab_kb", "{:.2f}", False)],
}
KIND = {"st1": "tput", "st2": "tput", "st3": "crate", "st4": "tls", "st4b": "tls", "st5": "udp",
        "st6": "idle"}


class HAProxy(Server):
    """haproxy in the foreground (-db), one thread, pinned like the others.
    It writes no pid file in the foreground; stopped with SIGTERM."""

    def __init__(self, binary, base, port, cpu, subst, conf_files):
        Server.__init__(self, "haproxy", binary, base, port, HAPROXY_CONF, [], cpu, conf_files,
                        subst)
        cfg = os.path.join(self.prefix, "conf", "haproxy.cfg")
        os.rename(self.conf, cfg)
        self.conf = cfg
        self.pidfile = None
        self.stop_signals = ("SIGTERM",)

    def test_config(self):
        cmd = [self.binary, "-c", "-f", self.conf]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                           preexec_fn=raise_nofile_preexec)
        if r.returncode != 0:
            raise BenchError("haproxy: config check failed (%s, exit %d):\n%s"
                             % (" ".join(cmd), r.returncode, r.stdout.decode(errors="replace")))

    def start_cmd(self):
        return ["taskset", "-c", str(self.cpu), self.binary, "-f", self.conf, "-db"]


class FloorProxy(Server):
    """bench/stream/floorproxy.c: the least a proxy can do (accept, connect,
    relay, close; a socket per UDP query), pinned like the others. A floor,
    not a peer: what the kernel costs for st1-st3 and st5."""

    def __init__(self, binary, base, port, cpu, subst):
        Server.__init__(self, "floor", binary, base, port, CONF, [], cpu, (), subst)
        self.pidfile = None
        self.stop_signals = ("SIGTERM",)
        self.subst = subst

    def test_config(self):
        pass

    def start_cmd(self):
        s = self.subst
        return ["taskset", "-c", str(self.cpu), self.binary, str(self.port), str(s["@ECHO_PORT@"]),
                str(s["@TPUT_PORT@"]), str(s["@SRC_PORT@"]), str(s["@UDP_PORT@"]),
                str(s["@UDP_ORIGIN_PORT@"])]


# The floor proxy runs these only (no TLS, and its memory says nothing).
FLOOR_WORKLOADS = ("st1", "st2", "st3", "st5")


def slab():
    """Slab bytes of the whole machine (/proc/meminfo): sockets, pipes, files."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Slab:"):
                return int(line.split()[1]) * 1024
    return 0


def kv(line):
    return {k: float(v) for k, v in (x.split("=", 1) for x in line.split() if "=" in x)}


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="sluice-stream-")
        os.chmod(self.tmp, 0o755)    # nginx's worker runs as nobody
        self.servers = {}
        self.origin = None
        self.restore = []
        self.failures = []
        self.notes = []
        self.results = []

    # ------------------------------------------------------------------ setup

    def setup(self, keys):
        a = self.a
        if not os.path.exists(NGINX_MODULE):
            raise BenchError("%s missing: apt-get install -y libnginx-mod-stream" % NGINX_MODULE)
        self.tool = os.path.join(self.tmp, "streamtool")
        subprocess.run(["cc", "-O2", "-o", self.tool, TOOL_SRC], check=True)
        if "floor" in a.peers:
            self.floor_bin = os.path.join(self.tmp, "floorproxy")
            subprocess.run(["cc", "-O2", "-o", self.floor_bin, FLOOR_SRC], check=True)
        self.src_file = os.path.join(self.tmp, "source.bin")
        with open(self.src_file, "wb") as f:
            f.write(os.urandom(SOURCE_FILE_BYTES))
        # SetupMixin's certificate (ECDSA P-256, as bench/run's) and hsload build.
        helper = types.SimpleNamespace(tmp=self.tmp, args=types.SimpleNamespace(
            varnish="-", client="hsload"))
        SetupMixin.make_cert(helper)
        combined = os.path.join(self.tmp, "tls", "combined.pem")
        with open(combined, "w") as f:
            f.write(open(helper.cert).read() + open(helper.key).read())
        if {"st4", "st4b"} & set(keys):
            if not os.access(HSLOAD_BIN, os.X_OK) or a.build_hsload:
                SetupMixin.ensure_hsload(helper, ["tls2"])
        # st3: loopback TIME_WAIT reuse on the connecting side (2 = loopback only).
        v = sysctl("net.ipv4.tcp_tw_reuse")
        if v == "0":
            set_sysctl("net.ipv4.tcp_tw_reuse", 2)
            self.restore.append(("net.ipv4.tcp_tw_reuse", v))
            log("set net.ipv4.tcp_tw_reuse=2 (was 0); restored at exit")
        # st6 needs 2 fds per session in the proxy (client and origin side),
        # more if the proxy adds its own; the hard file limit may be lower
        # than that (a container's): then fewer sessions, said so.
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (65535, 65535))
        except (ValueError, OSError):
            pass
        hard = min(65535, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        self.maxconn = min(30000, (hard - 100) // 2)
        self.idle_n = a.idle_sessions
        if "st6" in keys and 2 * self.idle_n + 200 > hard:
            self.idle_n = (hard - 200) // 2
            self.notes.append("the file limit's hard maximum is %d (cannot be raised here): st6 "
                              "holds %d sessions instead of %d" % (hard, self.idle_n,
                                                                   a.idle_sessions))
            log("note: " + self.notes[-1])
        ports = pick_ports(a.port, 4 + 4 * 4)
        self.oports = dict(zip(("SRC", "ECHO", "HTTP", "UDP_ORIGIN"), ports[:4]))
        self.origin = spawn_daemon(["taskset", "-c", str(a.client_cpu), self.tool, "origin",
                                    str(self.oports["SRC"]), str(self.oports["ECHO"]),
                                    str(self.oports["HTTP"]), str(self.oports["UDP_ORIGIN"]),
                                    self.src_file, str(ANSWER_BYTES)],
                                   os.path.join(self.tmp, "origin.log"))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.oports["ECHO"]), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.origin.poll() is not None:
                    raise BenchError("the origin did not start: %s"
                                     % open(os.path.join(self.tmp, "origin.log")).read())
                time.sleep(0.05)
        conf_files = [("cert.pem", helper.cert), ("key.pem", helper.key),
                      ("combined.pem", combined)]
        names = ["nginx"] + [p for p in ("haproxy", "floor") if p in a.peers] + ["sluice"]
        for i, name in enumerate(names):
            p = ports[4 + 4 * i: 8 + 4 * i]
            subst = {"@MAXCONN@": self.maxconn, "@TPUT_PORT@": p[1], "@TLS_PORT@": p[2], "@UDP_PORT@": p[3],
                     "@SRC_PORT@": self.oports["SRC"], "@ECHO_PORT@": self.oports["ECHO"],
                     "@HTTP_PORT@": self.oports["HTTP"],
                     "@UDP_ORIGIN_PORT@": self.oports["UDP_ORIGIN"]}
            if name == "haproxy":
                srv = HAProxy(a.haproxy, self.tmp, p[0], a.server_cpu, subst, conf_files)
            elif name == "floor":
                srv = FloorProxy(self.floor_bin, self.tmp, p[0], a.server_cpu, subst)
            else:
                binary = a.nginx if name == "nginx" else os.path.abspath(a.sluice)
                srv = Server(name, binary, self.tmp, p[0], CONF, [], a.server_cpu, conf_files,
                             subst)
            srv.ports = {"echo": p[0], "tput": p[1], "tls": p[2], "udp": p[3]}
            self.servers[name] = srv
        for srv in self.servers.values():
            srv.start()
            log("started %s (pid %d): %s" % (srv.name, srv.pid, " ".join(srv.cmd)))

    def cleanup(self):
        for srv in self.servers.values():
            try:
                srv.stop()
            except Exception as e:   # noqa: BLE001 - stop the rest too
                log("! stopping %s: %s" % (srv.name, e))
        if self.origin and self.origin.poll() is None:
            os.killpg(self.origin.pid, signal.SIGKILL)
            self.origin.wait()
        for name, v in self.restore:
            set_sysctl(name, v)
        if self.a.keep_tmp:
            log("kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ verification

    def verify(self, w, srv):
        """What a client gets through srv: the source's bytes, the echo, the
        origin's HTTP answer over TLS, the DNS-like answer."""
        kind = KIND[w]
        if kind == "tput":
            n = 1 << 20
            s = socket.create_connection(("127.0.0.1", srv.ports["tput"]), 10)
            s.sendall(n.to_bytes(8, "big"))
            got = bytearray()
            while True:
                b = s.recv(1 << 16)
                if not b:
                    break
                got += b
            s.close()
            with open(self.src_file, "rb") as f:
                if bytes(got) != f.read(n):
                    raise BenchError("%s: %d bytes through the proxy, not the origin's %d"
                                     % (srv.name, len(got), n))
        elif kind in ("crate", "idle"):
            msg = bytes(range(ECHO_BYTES))
            s = socket.create_connection(("127.0.0.1", srv.ports["echo"]), 10)
            s.sendall(msg)
            got = b""
            while len(got) < len(msg):
                b = s.recv(4096)
                if not b:
                    break
                got += b
            s.close()
            if got != msg:
                raise BenchError("%s: echo returned %r" % (srv.name, got[:40]))
        elif kind == "tls":
            ver = ssl.TLSVersion.TLSv1_2 if w == "st4b" else ssl.TLSVersion.TLSv1_3
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.minimum_version = ctx.maximum_version = ver
            with socket.create_connection(("127.0.0.1", srv.ports["tls"]), 10) as raw:
                with ctx.wrap_socket(raw) as s:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    got = b""
                    while True:
                        try:
                            b = s.recv(4096)
                        except (ssl.SSLEOFError, ConnectionResetError):
                            break
                        if not b:
                            break
                        got += b
                    version = s.version()
            if not got.startswith(b"HTTP/1.1 200") or not got.endswith(b"012"):
                raise BenchError("%s: TLS answer %r" % (srv.name, got[:80]))
            srv.tls = "%s (verify)" % version
        elif kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            s.connect(("127.0.0.1", srv.ports["udp"]))
            q = b"\x12\x34" + b"q" * (QUERY_BYTES - 2)
            s.send(q)
            a = s.recv(2048)
            s.close()
            if len(a) != ANSWER_BYTES or a[:2] != q[:2]:
                raise BenchError("%s: UDP answer %r" % (srv.name, a[:20]))

    # ------------------------------------------------------------- measuring

    def command(self, w, srv, warmup=False):
        a = self.a
        c = ["taskset", "-c", str(a.client_cpu)]
        dur = "%g" % (1 if warmup else a.duration)
        kind = KIND[w]
        if kind == "tput":
            conns = 1 if w == "st1" else 10
            total = GB // 10 if warmup else GB
            return c + [self.tool, "tput", str(srv.ports["tput"]), str(conns), str(total),
                        str(TPUT_TIMEOUT)], TPUT_TIMEOUT + 30
        if kind == "crate":
            return c + [self.tool, "crate", str(srv.ports["echo"]), str(CONC), dur,
                        str(ECHO_BYTES)], float(dur) + 30
        if kind == "udp":
            return c + [self.tool, "udpq", str(srv.ports["udp"]), str(CONC), dur,
                        str(QUERY_BYTES), str(ANSWER_BYTES)], float(dur) + 30
        return (hsload_cmd(a.client_cpu, "https://127.0.0.1:%d/" % srv.ports["tls"], CONC,
                           float(dur), "TLSv1.2" if w == "st4b" else "TLSv1.3"),
                float(dur) + 40)

    def measure(self, w, srv, warmup=False):
        cmd, timeout = self.command(w, srv, warmup)
        pids = srv.pids()
        c0, b0, t0 = cpu_sample(pids)[0], cpu_times(self.a.client_cpu)[0], time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        t1, c1, b1 = time.monotonic(), cpu_sample(pids)[0], cpu_times(self.a.client_cpu)[0]
        if not srv.alive():
            raise BenchError("%s died during the run:\n%s" % (srv.name, srv.log_tail()))
        wall = t1 - t0
        r = {"cpu_s": (c1 - c0) / CLK_TCK, "wall": wall,
             "cpu1_pct": (b1 - b0) / CLK_TCK / wall * 100, "cmd": " ".join(cmd)}
        r["cpu_pct"] = r["cpu_s"] / wall * 100
        kind = KIND[w]
        if kind == "tls":
            h = parse_hsload(p.stdout)
            r.update(count=h["requests"], rate=h["rps"], errors=sum(h["errors"].values()),
                     detail=", ".join("%s %d" % kv_ for kv_ in h["errors"].items() if kv_[1]),
                     tls=h["tls"])
            r["cpu_per"] = r["cpu_s"] * 1e6 / max(1, r["count"])
            return r
        if p.returncode != 0 or not p.stdout.strip():
            raise BenchError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode,
                                                         short(p.stdout + p.stderr)))
        o = kv(p.stdout.strip().splitlines()[-1])
        if kind == "tput":
            r.update(count=o["bytes"], errors=int(o["errors"]), rate=o["bytes"] / o["elapsed"] / 1e6,
                     detail="%d of %d bytes" % (o["bytes"], o["expected"])
                     if o["bytes"] != o["expected"] else "")
            if o["bytes"] != o["expected"]:
                r["errors"] += 1
            r["cpu_per"] = r["cpu_s"] / (o["bytes"] / GB) if o["bytes"] else None
        elif kind == "crate":
            r.update(count=o["sessions"], errors=int(o["errors"]), rate=o["sessions"] / o["elapsed"],
                     detail=", ".join("%s %d" % (k, o[k]) for k in
                                      ("connect", "write", "read", "data", "timeout") if o[k]))
            r["cpu_per"] = r["cpu_s"] * 1e6 / max(1, o["sessions"])
        else:
            r.update(count=o["answered"], errors=int(o["errors"]),
                     rate=o["answered"] / o["elapsed"],
                     detail=", ".join("%s %d" % (k, o[k]) for k in
                                      ("timeout", "stale", "size", "send", "recv") if o[k]))
            r["cpu_per"] = r["cpu_s"] * 1e6 / max(1, o["answered"])
        return r

    def measure_idle(self, srv):
        """A fresh server, IDLE_SESSIONS sessions set up and left idle:
        memory growth of the server's process tree."""
        srv.stop()
        srv.start()
        self.verify("st6", srv)
        time.sleep(0.5)
        rss0, pss0 = mem_sample(srv.pids())
        fds0, slab0 = self.fds(srv), slab()
        cmd = ["taskset", "-c", str(self.a.client_cpu), self.tool, "hold",
               str(srv.ports["echo"]), str(self.idle_n), str(ECHO_BYTES), "300"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             preexec_fn=raise_nofile_preexec)
        try:
            ready = read_line(p, 180)
            if not ready.startswith("READY "):
                raise BenchError("streamtool hold: %r" % ready)
            ready = kv(ready)
            time.sleep(2)
            if not srv.alive():
                raise BenchError("%s died holding idle sessions:\n%s" % (srv.name, srv.log_tail()))
            rss1, pss1 = mem_sample(srv.pids())
            fds1, slab1 = self.fds(srv), slab()
            p.stdin.close()
            done = kv(read_line(p, 30))
            p.wait(30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        ok = ready["ok"]
        if not ok:
            raise BenchError("no idle session could be set up")
        return {"rss_kb": (rss1 - rss0) / ok / 1024,
                "pss_kb": (pss1 - pss0) / ok / 1024 if pss0 is not None and pss1 is not None
                else None,
                "rss0_mb": rss0 / 1e6, "fds_per": (fds1 - fds0) / ok, "count": ok,
                "slab_kb": (slab1 - slab0) / ok / 1024,
                "errors": int(ready["failed"] + done["closed"]),
                "detail": "failed %d, closed while idle %d" % (ready["failed"], done["closed"])
                if ready["failed"] or done["closed"] else "",
                "cmd": " ".join(cmd)}

    @staticmethod
    def fds(srv):
        n = 0
        for pid in srv.pids():
            try:
                n += len(os.listdir("/proc/%d/fd" % pid))
            except OSError:
                pass
        return n

    def run(self, w):
        a = self.a
        names = [n for n in self.servers if not (w == "st5" and n == "haproxy")
                 and not (n == "floor" and w not in FLOOR_WORKLOADS)]
        log("")
        log("=== %s" % TITLES[w])
        res = {n: [] for n in names}
        failed = {}
        if w != "st6":
            for n in names:
                try:
                    self.verify(w, self.servers[n])
                    self.measure(w, self.servers[n], warmup=True)
                except (BenchError, OSError, subprocess.TimeoutExpired) as e:
                    failed[n] = str(e)
                    log("  ! %s FAILED: %s" % (n, short(str(e))))
        for i in range(a.runs):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                if n in failed:
                    continue
                srv = self.servers[n]
                try:
                    r = self.measure_idle(srv) if w == "st6" else self.measure(w, srv)
                except (BenchError, OSError, subprocess.TimeoutExpired) as e:
                    failed[n] = str(e)
                    log("  ! %s FAILED: %s" % (n, short(str(e))))
                    continue
                res[n].append(r)
                if w == "st6":
                    log("  run %d %-7s RSS +%.2f KB/session, PSS +%s KB/session, %.2f fds/session, "
                        "%d sessions%s" % (i + 1, n, r["rss_kb"], "%.2f" % r["pss_kb"]
                                           if r["pss_kb"] is not None else "n/a", r["fds_per"],
                                           r["count"], "; " + r["detail"] if r["detail"] else ""))
                else:
                    log("  run %d %-7s %12.1f %-13s %9.3f %s  server CPU %5.1f %%  CPU1 %5.1f %%"
                        "  errors %d%s" % (i + 1, n, r["rate"], METRICS[KIND[w]][0][0],
                                           r["cpu_per"] or 0, METRICS[KIND[w]][1][0].split(" (")[0],
                                           r["cpu_pct"], r["cpu1_pct"], r["errors"],
                                           " (" + r["detail"] + ")" if r["detail"] else ""))
        for n, why in failed.items():
            self.failures.append("%s: %s FAILED: %s" % (w, n, short(why)))
        for n, rs in res.items():
            bad = sum(r["errors"] for r in rs)
            if bad:
                self.failures.append("%s: %s: %d errors in %d runs (%s)" % (
                    w, n, bad, len(rs), "; ".join(r["detail"] for r in rs if r["detail"])))
        self.results.append((w, names, res, failed))

    # -------------------------------------------------------------- reporting

    def table(self, w, names, res, failed):
        peers = [n for n in names if n != "sluice"]
        title = TITLES[w] + (" (%d)" % self.idle_n if w == "st6" else "")
        out = ["", "%s  (target: %s)" % (title, TARGETS[w]), "",
               "| metric | %s | %s |" % (" | ".join(names),
                                        " | ".join("sluice/%s" % p for p in peers)),
               "|---|" + "---:|" * (len(names) + len(peers))]
        for label, key, fmt, with_ratio in METRICS[KIND[w]]:
            cells = []
            for n in names:
                xs = [r[key] for r in res[n] if r.get(key) is not None]
                cells.append(fmt.format(statistics.median(xs)) if xs else
                             ("FAILED" if n in failed else "-"))
            ratios = []
            for p in peers:
                pair = [s[key] / q[key] for q, s in zip(res[p], res["sluice"])
                        if with_ratio and q.get(key) and s.get(key) is not None]
                ratios.append("%.2f (%.2f-%.2f)" % (statistics.median(pair), min(pair), max(pair))
                              if pair else "")
            out.append("| %s | %s | %s |" % (label, " | ".join(cells), " | ".join(ratios)))
        cells = ["{:,} / {:,}".format(sum(r["errors"] for r in res[n]),
                                      int(sum(r["count"] for r in res[n])))
                 if res[n] else ("FAILED" if n in failed else "-") for n in names]
        what = {"tput": "bytes", "crate": "sessions", "tls": "handshakes", "udp": "queries",
                "idle": "sessions"}[KIND[w]]
        out.append("| errors / %s (all runs) | %s |%s" % (what, " | ".join(cells),
                                                          " |" * len(peers)))
        if KIND[w] == "tls":
            out.append("| TLS negotiated | %s |%s" % (
                " | ".join(res[n][0]["tls"] if res[n] and res[n][0].get("tls") else "-"
                           for n in names), " |" * len(peers)))
        out.append("")
        out.append("runs, in order (%s): %s" % (
            "KB/session RSS" if KIND[w] == "idle" else "%s; %s" % (
                METRICS[KIND[w]][0][0], METRICS[KIND[w]][1][0]),
            "; ".join("%s %s" % (n, ", ".join(
                "%.2f" % r["rss_kb"] if KIND[w] == "idle" else
                "%.0f/%.3g" % (r["rate"], r["cpu_per"] or 0) for r in res[n])) for n in names)))
        return out

    def report(self):
        log("")
        log("## Results: %d runs, --duration %g, server CPU %d, client CPU %d"
            % (self.a.runs, self.a.duration, self.a.server_cpu, self.a.client_cpu))
        log("Ratios: the median of the run-by-run sluice/peer ratios (lowest-highest); "
            "> 1 means sluice's figure is higher.")
        for w, names, res, failed in self.results:
            for line in self.table(w, names, res, failed):
                log(line)
        log("")
        log("Load commands (each server's differ only in the port; the temp dir is deleted):")
        for w, names, res, _ in self.results:
            for n in names:
                if res[n]:
                    log("  %s (%s): %s" % (w, n, res[n][-1]["cmd"]))
                    break
        for n in self.notes:
            log("note: " + n)
        if self.failures:
            log("")
            log("FAILURES")
            for f in self.failures:
                log("  " + f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "/usr/sbin/haproxy")
    ap.add_argument("--peers", default="nginx,haproxy,floor",
                    help="nginx always runs (the reference); haproxy and floor (the floor "
                    "proxy, bench/stream/floorproxy.c) if listed")
    ap.add_argument("--workloads", default=",".join(ALL))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--duration", type=float, default=5,
                    help="seconds per measured run of st3-st5 (st1/st2 move 1 GB, st6 is memory)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--idle-sessions", type=int, default=IDLE_SESSIONS,
                    help="st6's sessions (fewer if the file limit's hard maximum is too low)")
    ap.add_argument("--port", type=int, default=25400, help="first port to try")
    ap.add_argument("--build-hsload", action="store_true",
                    help="run cargo build for bench/hsload even when its binary exists")
    ap.add_argument("--keep-tmp", action="store_true")
    a = ap.parse_args()
    a.peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    keys = [w.strip() for w in a.workloads.split(",") if w.strip()]
    bad = [w for w in keys if w not in ALL]
    if bad:
        ap.error("unknown workload(s) %s; known: %s" % (", ".join(bad), ", ".join(ALL)))
    if "haproxy" in a.peers and not os.access(a.haproxy, os.X_OK):
        ap.error("%s not found: apt-get install -y haproxy (and keep its service stopped), "
                 "or --peers nginx" % a.haproxy)
    def on_term(signum, frame):
        raise KeyboardInterrupt    # stop the servers and the origin on the way out

    signal.signal(signal.SIGTERM, on_term)
    b = Bench(a)
    status = 0
    try:
        b.setup(keys)
        for w in keys:
            b.run(w)
    except BenchError as e:
        log("error: %s" % e)
        status = 2
    except KeyboardInterrupt:
        status = 130
    finally:
        b.cleanup()
    b.report()
    sys.exit(status or (1 if b.failures else 0))


if __name__ == "__main__":
    main()
