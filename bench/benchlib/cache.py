"""Cache workloads c1-c5: proxy_cache hits and cold misses, sluice against
nginx (proxy_cache) and, where it applies, Varnish.

c1-c4 run through bench/run's usual row machinery (run_row/run_load) with an
origin (px1's nginx) and, for c1 and c3, a third server: varnishd with
bench/conf/cache.vcl. c5 (cold misses under proxy_cache_lock) has its own
runner here, with bench/slot_origin.py as a 200 ms origin and bench/burst.py
as the client. The table of every cache row is made here too (columns
nginx, sluice, varnish)."""

import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time

from .common import (
    BENCH_DIR, BenchError, fmt_cell, log, raise_nofile_preexec, ratio, read_file, short,
    spawn_daemon)
from .httpcheck import origin_delta, origin_status, read_response
from .server import Server

CACHE_SERVERS = ("nginx", "sluice", "varnish")
BURST = os.path.join(BENCH_DIR, "burst.py")
C5_CONNS = 1000
C5_DELAY_MS = 200
C5_SLOTS = 64
C5_TEMPLATE = "cache_lock.conf"
# Hits checked after the fill, before measuring.
CACHE_VERIFY_HITS = 5


class VarnishServer(Server):
    """varnishd in the foreground (-F), pinned like the other servers. Its
    process tree (manager + cache child, all threads) is measured the same
    way. Default storage (malloc, 100 MB) unless storage is given."""

    def __init__(self, binary, base, port, vcl_template, cpu, subst, storage=None):
        Server.__init__(self, "varnish", binary, base, port, vcl_template, [], cpu, (), subst)
        vcl = os.path.join(self.prefix, "conf", "default.vcl")
        os.rename(self.conf, vcl)
        self.conf = vcl
        self.workdir = os.path.join(self.prefix, "varnishd")
        self.storage = storage
        self.stop_signals = ("SIGTERM",)

    def varnish_args(self):
        a = ["-n", self.workdir, "-f", self.conf, "-a", "127.0.0.1:%d" % self.port,
             "-P", os.path.join(self.prefix, "run.pid")]
        if self.storage:
            a += ["-s", self.storage]
        return a

    def test_config(self):
        cmd = [self.binary, "-C", "-n", self.workdir, "-f", self.conf]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if r.returncode != 0:
            raise BenchError("varnish: VCL compilation failed (%s, exit %d):\n%s"
                             % (" ".join(cmd), r.returncode,
                                r.stdout.decode(errors="replace")[-2000:]))

    def start_cmd(self):
        return ["taskset", "-c", str(self.cpu), self.binary, "-F"] + self.varnish_args()


# --------------------------------------------------------------------------
# Verification of cache rows
# --------------------------------------------------------------------------

def get(sock, port, path, deadline):
    sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-verify\r\n"
                  "Accept: */*\r\n\r\n" % (path, port)).encode())
    return read_response(sock, deadline)


def verify_cache(port, origin_port, row, expected_body):
    """After verify() (whose first GET filled the cache): CACHE_VERIFY_HITS
    more GETs on one connection must each be 200, byte-exact, X-Cache: HIT,
    and none may reach the origin (its request counter)."""
    deadline = time.monotonic() + 30
    before = origin_status(origin_port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            for _ in range(CACHE_VERIFY_HITS):
                status, headers, body, _ = get(s, port, row.path, deadline)
                if status != 200:
                    raise BenchError("GET %s: status %d, expected 200" % (row.path, status))
                if expected_body is not None and body != expected_body:
                    raise BenchError("GET %s: body differs from the origin's file" % row.path)
                xc = headers.get("x-cache", "-")
                if xc != "HIT":
                    raise BenchError("GET %s: X-Cache %s after the fill, expected HIT"
                                     % (row.path, xc))
    except (OSError, ValueError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    _, reqs = origin_delta(before, origin_status(origin_port))
    if reqs:
        raise BenchError("%d of %d hits reached the origin" % (reqs, CACHE_VERIFY_HITS))
    return "cache: %d more GETs all X-Cache: HIT, 0 origin requests" % CACHE_VERIFY_HITS


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def verify_large(port, origin_port, row, digest):
    """c4: two GETs of the large object on one connection, streamed and
    hashed (never held in memory): the first fills the cache (MISS), the
    second must be a HIT with the same SHA-256 and no origin request."""
    out = []
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            for i in range(2):
                before = origin_status(origin_port)
                s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           "User-Agent: sluice-bench-verify\r\n\r\n" % (row.path, port)).encode())
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        raise BenchError("connection closed before the response head")
                    buf += d
                head, _, rest = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                hdr = {}
                for l in lines[1:]:
                    k, _, v = l.partition(":")
                    hdr[k.strip().lower()] = v.strip()
                code = int(lines[0].split()[1])
                if code != 200:
                    raise BenchError("GET %s: status %d" % (row.path, code))
                n = int(hdr.get("content-length", -1))
                if n != row.body_len:
                    raise BenchError("GET %s: Content-Length %s, expected %d"
                                     % (row.path, hdr.get("content-length"), row.body_len))
                h = hashlib.sha256(rest)
                got = len(rest)
                t0 = time.monotonic()
                while got < n:
                    d = s.recv(min(1 << 20, n - got))
                    if not d:
                        raise BenchError("GET %s: closed after %d of %d bytes" % (row.path, got, n))
                    h.update(d)
                    got += len(d)
                secs = time.monotonic() - t0
                if h.hexdigest() != digest:
                    raise BenchError("GET %s: body differs from the origin's file (SHA-256)"
                                     % row.path)
                _, reqs = origin_delta(before, origin_status(origin_port))
                xc = hdr.get("x-cache", "-")
                if i == 1 and (xc != "HIT" or reqs):
                    raise BenchError("GET %s: second GET X-Cache %s, %d origin request(s); "
                                     "expected a HIT" % (row.path, xc, reqs))
                out.append("%s %.1f s" % (xc, secs))
    except (OSError, ValueError, IndexError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    return "200, %d bytes twice, SHA-256 matches (%s), the second from cache" % (
        row.body_len, ", ".join(out))


# --------------------------------------------------------------------------
# The harness side
# --------------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class CacheMixin:
    """Harness methods of the cache workloads (c5's runner, the cache table)."""

    def make_varnish(self, wl, base, subst):
        a = self.args
        if not wl.get("varnish") or a.no_varnish:
            return None
        return VarnishServer(a.varnish, base, self.ports[3], wl["varnish"], a.server_cpu, subst,
                             storage=wl.get("varnish_storage"))

    # ---- c5: cold misses -------------------------------------------------

    def burst_cmd(self, port, path):
        return ["taskset", "-c", str(self.args.client_cpu), sys.executable, BURST,
                "--port", str(port), "--path", path, "--conns", str(C5_CONNS),
                "--timeout", "30"]

    def run_c5(self, wl):
        from .px2 import SlotOrigin, get_once
        from slot_origin import BODY
        a = self.args
        log("")
        log("=== Workload c5: %s (config bench/conf/%s, origin bench/slot_origin.py)"
            % (wl["title"], C5_TEMPLATE))
        res = {"row": "c5", "title": "c5 cold miss, %d clients, one key, origin 200 ms"
               % C5_CONNS, "runs": {}, "failed": {}, "verify": {}}
        self.c5_results = res
        base = os.path.join(self.tmp, "wl-c5-%d" % int(time.time() * 1000))
        os.makedirs(base)
        origin = SlotOrigin(base, self.ports[2], a.client_cpu, slots=C5_SLOTS,
                            delay_ms=C5_DELAY_MS)
        servers = []
        try:
            origin.start()
            log("  origin: bench/slot_origin.py pid %d on CPU %d, 127.0.0.1:%d: %d workers, "
                "%d ms per request" % (origin.proc.pid, a.client_cpu, origin.port, C5_SLOTS,
                                       C5_DELAY_MS))
            self.commands.append(("c5 origin", " ".join(
                ["taskset", "-c", str(a.client_cpu), "python3", "bench/slot_origin.py"]
                + origin.cmd[5:-2])))
            for name, binary, port in zip(("nginx", "sluice"), (a.nginx, a.sluice), self.ports):
                srv = Server(name, binary, base, port, C5_TEMPLATE, [], a.server_cpu,
                             subst={"@ORIGIN_PORT@": origin.port})
                self.servers.append(srv)
                servers.append(srv)
                try:
                    srv.start()
                    st0 = origin.status()
                    got = get_once(port, "/verify-%s" % name)
                    st1 = origin.status()
                    if any(s != 200 or b != BODY for s, b in got):
                        raise BenchError("answered %r" % (got,))
                    n = st1["requests"] - st0["requests"]
                    if n != 1:
                        raise BenchError("two GETs of one key made %d origin requests "
                                         "(expected 1: a MISS, then a HIT)" % n)
                    res["verify"][name] = "2 GETs: 200, origin's body, 1 origin request"
                    log("    verify %-6s %s" % (name + ":", res["verify"][name]))
                except BenchError as e:
                    res["failed"][name] = str(e)
                    self.failures += 1
                    log("  ! %s FAILED: %s" % (name, e))
            cmd = self.burst_cmd(self.ports[0], "/cold/RUN")
            self.commands.append((res["title"], " ".join(cmd).replace(sys.executable, "python3")
                                  .replace(BURST, "bench/burst.py")))
            log("    load: %s" % self.commands[-1][1])
            for i in range(a.runs):
                for srv in servers:
                    if srv.name in res["failed"]:
                        continue
                    time.sleep(a.pause)
                    if origin.wait_idle() is None:
                        log("  ! the origin did not become idle")
                    path = "/cold/%d-%s-%d" % (i + 1, srv.name, int(time.time() * 1000))
                    st0 = origin.status()
                    t0 = time.monotonic()
                    try:
                        p = subprocess.run(self.burst_cmd(srv.port, path), stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, timeout=90,
                                           preexec_fn=raise_nofile_preexec)
                        out = p.stdout.decode(errors="replace")
                        if p.returncode != 0:
                            raise BenchError("burst.py exited %d: %s" % (p.returncode, out[-2000:]))
                        r = json.loads(out.strip().splitlines()[-1])
                    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
                        res["failed"][srv.name] = "run %d: %s" % (i + 1, e)
                        self.failures += 1
                        log("  ! %s FAILED: %s" % (srv.name, e))
                        continue
                    time.sleep(0.3)
                    st1 = origin.status()
                    if not srv.alive():
                        res["failed"][srv.name] = "died during run %d:\n%s" % (i + 1, srv.log_tail())
                        self.failures += 1
                        continue
                    r["origin_requests"] = st1["requests"] - st0["requests"]
                    r["wall_s"] = time.monotonic() - t0
                    r["error_total"] = sum(r["errors"].values()) + sum(
                        v for k, v in r["status"].items() if k != "200")
                    res["runs"].setdefault(srv.name, []).append(r)
                    log("    run %d %-6s origin requests %d, responses %d/%d (status %s, X-Cache "
                        "%s), p50 %.1f ms, p99 %.1f ms, max %.1f ms, errors %s (send spread "
                        "%.1f ms)" % (i + 1, srv.name, r["origin_requests"], r["responses"],
                                      r["conns"], json.dumps(r["status"]),
                                      json.dumps(r["x_cache"]), r["p50_ms"] or -1,
                                      r["p99_ms"] or -1, r["max_ms"] or -1,
                                      json.dumps(r["errors"]), r["send_spread_ms"]))
        except BenchError as e:
            res["failed"]["origin"] = str(e)
            self.failures += 1
            log("  ! c5 FAILED: %s" % e)
        finally:
            self.stop_servers(servers)
            origin.stop()

    # ---- tables ------------------------------------------------------------

    def cache_tables(self):
        rows = [r for r in self.results if r.get("group") == "cache"]
        c5 = getattr(self, "c5_results", None)
        if not rows and not c5:
            return []
        out = ["| cache workload | metric | nginx | sluice | varnish | sluice/nginx | "
               "sluice/varnish |", "|---|---|---:|---:|---:|---:|---:|"]
        for res in rows:
            who = "server"
            per = "hit"
            metrics = [("req/s", "rps", "{:,.0f}"),
                       ("%s CPU µs/%s (utime+stime)" % (who, per), "cpu_us_per_req", "{:.2f}"),
                       ("of which kernel µs/%s (stime)" % per, "sys_us_per_req", "{:.2f}"),
                       ("%s CPU µs/%s (schedstat)" % (who, per), "sched_us_per_req", "{:.2f}"),
                       ("%s CPU %%" % who, "server_cpu_pct", "{:.1f}"),
                       ("mean request time ms (h2load)", "mean_ms", "{:.2f}")
                       if res["client"] == "h2load" else ("p99 latency ms", "p99_ms", "{:.2f}")]
            if res["throughput"]:
                metrics.insert(1, ("MiB/s", "mib_per_s", "{:,.1f}"))
                metrics.insert(2, ("server CPU ms/GiB sent", "cpu_ms_per_gib", "{:,.1f}"))
            if res.get("rss"):
                # Responses of 1 GB outlast a run: no per-request figures.
                metrics = [m for m in metrics if m[1] in (
                    "mib_per_s", "cpu_ms_per_gib", "server_cpu_pct")]
                metrics += [("RSS before run MiB", "rss_before_mib", "{:,.1f}"),
                            ("RSS growth during run MiB (peak - before)", "rss_growth_mib",
                             "{:,.1f}")]
            metrics.append(("noise: other busy % on server CPU", "other_cpu_pct", "{:.1f}"))
            first = True

            def title():
                nonlocal first
                t = res["title"] if first else ""
                first = False
                return t
            for label, key, fmt in metrics:
                vals = {s: med([r.get(key) for r in res["runs"].get(s, [])])
                        for s in CACHE_SERVERS}
                if all(v is None for v in vals.values()):
                    continue
                cells = [fmt_cell(vals[s], fmt, res["failed"].get(s)) for s in CACHE_SERVERS]
                diag = key in ("other_cpu_pct", "server_cpu_pct", "rss_before_mib")
                rts = ["" if diag else ratio(vals[o], vals["sluice"]) for o in ("nginx", "varnish")]
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    title(), label, cells[0], cells[1], cells[2], rts[0], rts[1]))
            # Paired run-by-run ratios (sluice's run i against nginx's/varnish's run i).
            pr = {}
            # c4: MiB/s and CPU per GiB (its responses outlast a run).
            kr, kc = ("mib_per_s", "cpu_ms_per_gib") if res.get("rss") else ("rps",
                                                                              "cpu_us_per_req")
            unit = "MiB/s" if res.get("rss") else "req/s"
            for o in ("nginx", "varnish"):
                a_, b_ = res["runs"].get(o, []), res["runs"].get("sluice", [])
                n = min(len(a_), len(b_))
                ps = {}
                for key, name in ((kr, "rps"), (kc, "cpu_us_per_req")):
                    xs = [b_[i][key] / a_[i][key] for i in range(n)
                          if a_[i].get(key) and b_[i].get(key) is not None]
                    ps[name] = xs
                pr[o] = ps
            if any(pr[o]["cpu_us_per_req"] for o in pr):
                def cell(o, f):
                    p = pr[o]
                    if not p["cpu_us_per_req"] or not p["rps"]:
                        return ""
                    return f(p)
                out.append("| %s | paired runs: median of run-by-run ratios (%s; CPU) | | | | "
                           "%s | %s |" % ((title(), unit) + tuple(cell(o, lambda p: "%.2f; %.2f" % (
                               statistics.median(p["rps"]),
                               statistics.median(p["cpu_us_per_req"]))) for o in pr)))
                out.append("| %s | paired runs: lowest-highest run-by-run ratio (%s; CPU) | | | | "
                           "%s | %s |" % ((title(), unit) + tuple(cell(o, lambda p: "%.2f-%.2f; %.2f-%.2f" % (
                               min(p["rps"]), max(p["rps"]), min(p["cpu_us_per_req"]),
                               max(p["cpu_us_per_req"]))) for o in pr)))
            if res.get("proxy"):
                cells = []
                for s in CACHE_SERVERS:
                    runs = res["runs"].get(s, [])
                    cells.append(", ".join("%d" % r["origin_requests"] for r in runs)
                                 or ("FAILED" if res["failed"].get(s) else "-"))
                out.append("| %s | origin requests during each run (0: all hits) | %s | %s | %s | | |"
                           % ((title(),) + tuple(cells)))
            cells = []
            for s in CACHE_SERVERS:
                runs = res["runs"].get(s, [])
                if not runs:
                    cells.append("FAILED" if res["failed"].get(s) else "-")
                    continue
                tot = sum(r["error_total"] for r in runs)
                reqs = sum(r.get("requests_total", r["requests"]) for r in runs)
                cells.append("{:,} / {:,}".format(tot, reqs))
            out.append("| %s | errors / requests (all runs) | %s | %s | %s | | |"
                       % ((title(),) + tuple(cells)))
        if c5:
            first = True
            for label, key, fmt in (("origin requests (target 1)", "origin_requests", "{:.0f}"),
                                    ("responses (of %d)" % C5_CONNS, "responses", "{:,.0f}"),
                                    ("p50 latency ms", "p50_ms", "{:.1f}"),
                                    ("p99 latency ms", "p99_ms", "{:.1f}"),
                                    ("max latency ms", "max_ms", "{:.1f}"),
                                    ("errors (socket, timeout, non-200)", "error_total",
                                     "{:.0f}")):
                vals = {s: med([r.get(key) for r in c5["runs"].get(s, [])])
                        for s in CACHE_SERVERS}
                cells = [fmt_cell(vals[s], fmt, c5["failed"].get(s)) for s in CACHE_SERVERS]
                runs = {s: ", ".join(fmt.format(r[key]) for r in c5["runs"].get(s, [])
                                     if r.get(key) is not None) for s in CACHE_SERVERS}
                cells = ["%s (%s)" % (c, runs[s]) if runs[s] else c
                         for c, s in zip(cells, CACHE_SERVERS)]
                rt = ratio(vals["nginx"], vals["sluice"]) if "latency" in label else ""
                out.append("| %s | %s | %s | %s | %s | %s | |" % (
                    c5["title"] if first else "", label, cells[0], cells[1], "-", rt))
                first = False
            xc = {}
            for s in ("nginx", "sluice"):
                tot = {}
                for r in c5["runs"].get(s, []):
                    for k, v in r["x_cache"].items():
                        tot[k] = tot.get(k, 0) + v
                xc[s] = ", ".join("%s %d" % kv for kv in sorted(tot.items())) or "-"
            out.append("| | X-Cache of the responses (all runs) | %s | %s | - | | |"
                       % (xc["nginx"], xc["sluice"]))
        return out

    def cache_failures(self):
        c5 = getattr(self, "c5_results", None)
        out = []
        if c5:
            for s, why in c5["failed"].items():
                out.append("%s: %s FAILED: %s" % (c5["title"], s, short(why)))
        return out
