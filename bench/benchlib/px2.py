"""Workload px2: overload fairness through a reverse proxy.

An origin that serves at most 20 requests at once, ~50 ms each
(bench/slot_origin.py: 20 prefork-style workers, listen backlog 511,
keep-alive with a 5 s idle timeout), 500 client connections for 30 s
(wrk -t2 -c500, its default 2 s timeout) through each proxy variant:

  nginx        max_conns=20, keepalive 20 (open-source nginx has no queue:
               with 20 connections busy it answers 502 at once)
  nginx-nomax  keepalive 20 without max_conns (nginx opens as many origin
               connections as it has requests; the excess waits in the
               origin's accept queue)
  sluice       max_conns=20, keepalive 20, queue 1000 timeout=10s

Each measured run starts the proxy fresh (so no proxy holds origin workers
with idle pooled connections while another one is measured), verifies it,
runs wrk, stops it and waits until the origin is idle again. Runs go
nginx, sluice, nginx-nomax, nginx, sluice, nginx-nomax, ...

wrk counts a request as a timeout only when its response arrives after 2 s;
a request still unanswered when wrk stops is not counted anywhere. So during
each run the harness also samples wrk's connections with `ss -ti` (lastsnd:
how long ago wrk sent the request still waiting for its answer) and reports
how many requests had been waiting more than 2 s.
"""

import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time

from .common import (
    BENCH_DIR, BenchError, CLK_TCK, cpu_sample, cpu_times, fmt_num, log, process_tree,
    raise_nofile_preexec, read_file, spawn_daemon)
from .httpcheck import read_response
from .loadgen import TIME_UNITS, parse_wrk
from .server import Server
from slot_origin import BODY     # bench/ is on sys.path (bench/run puts it there)

SLOT_ORIGIN = os.path.join(BENCH_DIR, "slot_origin.py")
PX2_TEMPLATE = "proxy_overload.conf"
PX2_SLOTS = 20
PX2_DELAY_MS = 50
PX2_BACKLOG = 511
PX2_KEEPALIVE_TIMEOUT = 5
PX2_CONNS = 500
PX2_THREADS = 2
PX2_TIMEOUT_MS = 2000          # wrk's default --timeout
PX2_PATH = "/"
QUEUE_LINE = "queue 1000 timeout=10s;"
NO_QUEUE = "# no queue: open-source nginx does not have the directive"
# Seconds into a run at which wrk's connections are sampled with ss; the
# last one is taken relative to the end of the run.
SS_AT = (10, 20)
SS_BEFORE_END = 1.0
IDLE_WAIT = 60                 # seconds to wait for the origin to drain
PX2_GRACE = 3                  # seconds the proxy keeps running after wrk stops


def variants(nginx, sluice, self_test, keys):
    """The proxy configurations, in the order they alternate."""
    all_v = {
        "nginx": dict(key="nginx", binary=nginx, port_index=0,
                      label="nginx max_conns=20",
                      subst={"@MAX_CONNS@": " max_conns=%d" % PX2_SLOTS, "@QUEUE@": NO_QUEUE}),
        "sluice": dict(key="sluice", binary=sluice, port_index=1,
                       label="sluice max_conns=20 + queue",
                       subst={"@MAX_CONNS@": " max_conns=%d" % PX2_SLOTS,
                              "@QUEUE@": QUEUE_LINE}),
        "nginx-nomax": dict(key="nginx-nomax", binary=nginx, port_index=0,
                            label="nginx without max_conns",
                            subst={"@MAX_CONNS@": "", "@QUEUE@": NO_QUEUE}),
    }
    if self_test:
        # The "sluice" binary is nginx, which refuses queue: run it like the
        # nginx variant so the self-test still exercises the harness.
        all_v["sluice"].update(label="self-test: nginx as sluice, max_conns=20, no queue",
                               subst=dict(all_v["nginx"]["subst"]))
    out = []
    for k in keys:
        if k not in all_v:
            raise BenchError("unknown px2 variant %r (choose from %s)" % (k, ",".join(all_v)))
        out.append(all_v[k])
    return out


# --------------------------------------------------------------------------
# The origin
# --------------------------------------------------------------------------

class SlotOrigin:
    """bench/slot_origin.py as a child process, pinned to the load
    generator's CPU; its counters come from a Unix socket."""

    def __init__(self, base, port, cpu, slots=None, delay_ms=None):
        self.port = port
        self.cpu = cpu
        self.dir = os.path.join(base, "origin")
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "status.sock")
        self.log_path = os.path.join(self.dir, "origin.log")
        self.cmd = ["taskset", "-c", str(cpu), sys.executable, SLOT_ORIGIN, "--port", str(port),
                    "--slots", str(slots or PX2_SLOTS),
                    "--delay-ms", str(delay_ms or PX2_DELAY_MS),
                    "--backlog", str(PX2_BACKLOG),
                    "--keepalive-timeout", str(PX2_KEEPALIVE_TIMEOUT),
                    "--status-socket", self.sock]
        self.proc = None

    def start(self):
        self.proc = spawn_daemon(self.cmd, self.log_path)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise BenchError("the origin exited with %s during start-up:\n%s"
                                 % (self.proc.returncode, read_file(self.log_path, "")[-2000:]))
            try:
                self.status()
                return
            except BenchError:
                if time.monotonic() > deadline:
                    raise BenchError("the origin did not answer on %s within 20 s" % self.sock)
                time.sleep(0.05)

    def status(self, reset=False):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(self.sock)
                s.sendall(b"status reset\n" if reset else b"status\n")
                buf = b""
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    buf += d
            return json.loads(buf)
        except (OSError, ValueError) as e:
            raise BenchError("origin status: %s: %s" % (type(e).__name__, e))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pids(self):
        return process_tree(self.proc.pid) if self.alive() else []

    def wait_idle(self, timeout=IDLE_WAIT):
        """Until no worker holds a connection and the accept queue is empty
        (for 0.3 s). Returns the seconds waited, or None on timeout."""
        t0 = time.monotonic()
        quiet_since = None
        while time.monotonic() - t0 < timeout:
            st = self.status()
            if st["busy"] == 0 and st["queue"] == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= 0.3:
                    return time.monotonic() - t0
            else:
                quiet_since = None
            time.sleep(0.1)
        return None

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def origin_delta(a, b):
    keys = ("accepted", "requests", "responses", "write_errors", "eof_before_request",
            "closed_idle_timeout", "closed_by_client", "closed_by_origin", "bad_requests",
            "gaps", "gap_ms")
    return {k: b[k] - a[k] for k in keys}


def get_once(port, path, timeout=10):
    """One GET on a new connection: (status, body)."""
    deadline = time.monotonic() + timeout
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-verify\r\n\r\n"
           % (path, port)).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        out = []
        for _ in range(2):
            s.sendall(req)
            status, headers, body, _ = read_response(s, deadline)
            out.append((status, body))
    return out


# --------------------------------------------------------------------------
# Measurements of one run
# --------------------------------------------------------------------------

def netstat_listen():
    """(ListenOverflows, ListenDrops) from /proc/net/netstat (system-wide)."""
    t = read_file("/proc/net/netstat", "")
    lines = [l.split() for l in t.splitlines() if l.startswith("TcpExt:")]
    if len(lines) >= 2:
        d = dict(zip(lines[0][1:], lines[1][1:]))
        return int(d.get("ListenOverflows", 0)), int(d.get("ListenDrops", 0))
    return 0, 0


def ss_pending(port):
    """wrk's established connections to port: (connections, requests waiting
    for a response for more than 2 s, the longest wait in ms). A connection
    waits if it sent data after it last received some (lastsnd <= lastrcv,
    both in ms ago)."""
    r = subprocess.run(["ss", "-tinH", "state", "established", "( dport = :%d )" % port],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20)
    conns = late = 0
    oldest = 0
    for line in r.stdout.decode(errors="replace").splitlines():
        if not line.startswith((" ", "\t")):
            continue
        conns += 1
        ms = re.search(r"\blastsnd:(\d+)", line)
        mr = re.search(r"\blastrcv:(\d+)", line)
        if not ms:
            continue
        snd = int(ms.group(1))
        if mr and int(mr.group(1)) < snd:
            continue                # answered; the next request is not out yet
        oldest = max(oldest, snd)
        if snd > PX2_TIMEOUT_MS:
            late += 1
    return conns, late, oldest


def parse_wrk_px2(out):
    """parse_wrk plus p50, max and the error kinds px2 reports."""
    r = parse_wrk(out)
    m = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s|m|h)\b", out, re.M)
    r["p50_ms"] = float(m.group(1)) * TIME_UNITS[m.group(2)] if m else None
    m = re.search(r"^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s|m|h)\s", out, re.M)
    r["max_ms"] = float(m.group(1)) * TIME_UNITS[m.group(2)] if m else None
    e = r["errors"]
    r["non2xx"] = e["non2xx3xx"]
    r["ok"] = r["requests"] - e["non2xx3xx"]
    r["socket_errors"] = e["connect"] + e["read"] + e["write"] + e["timeout"]
    return r


# --------------------------------------------------------------------------
# The workload
# --------------------------------------------------------------------------

class Px2Mixin:
    """Harness methods of workload px2."""

    def px2_command(self, port, duration):
        return ["taskset", "-c", str(self.args.client_cpu), "wrk", "-t%d" % PX2_THREADS,
                "-c%d" % PX2_CONNS, "-d%ss" % fmt_num(duration), "--latency",
                "http://127.0.0.1:%d%s" % (port, PX2_PATH)]

    def run_px2(self, wl):
        a = self.args
        log("")
        log("=== Workload px2: %s (config bench/conf/%s, origin bench/slot_origin.py)"
            % (wl["title"], PX2_TEMPLATE))
        vs = variants(a.nginx, a.sluice, self.self_test, a.px2_variants.split(","))
        res = {"variants": [dict(key=v["key"], label=v["label"]) for v in vs],
               "runs": {}, "failed": {}, "verify": {}, "duration": a.px2_duration,
               "config": {}, "notes": []}
        self.px2_results = res
        base = os.path.join(self.tmp, "wl-px2-%d" % int(time.time() * 1000))
        os.makedirs(base)
        origin = SlotOrigin(base, self.ports[2], a.client_cpu)
        servers = {}
        try:
            origin.start()
            log("  origin: bench/slot_origin.py pid %d on CPU %d, 127.0.0.1:%d: %d workers, "
                "%d ms per request, backlog %d, keep-alive timeout %d s"
                % (origin.proc.pid, a.client_cpu, origin.port, PX2_SLOTS, PX2_DELAY_MS,
                   PX2_BACKLOG, PX2_KEEPALIVE_TIMEOUT))
            got = get_once(origin.port, PX2_PATH)
            if any(s != 200 or b != BODY for s, b in got):
                raise BenchError("the origin answered %r" % (got,))
            self.commands.append(("px2 origin", " ".join(
                ["taskset", "-c", str(a.client_cpu), "python3", "bench/slot_origin.py"]
                + origin.cmd[5:-2])))
            for v in vs:
                srv = Server(v["key"], v["binary"], base, self.ports[v["port_index"]],
                             PX2_TEMPLATE, [], a.server_cpu,
                             subst=dict(v["subst"], **{"@ORIGIN_PORT@": origin.port}))
                self.servers.append(srv)
                servers[v["key"]] = srv
                m = re.search(r"upstream backend \{.*?\}", srv.conf_text, re.S)
                res["config"][v["key"]] = m.group(0) if m else ""
                try:
                    srv.test_config()
                except BenchError as e:
                    res["failed"][v["key"]] = str(e)
                    self.failures += 1
                    log("  ! %s FAILED: %s" % (v["key"], e))
            cmd = self.px2_command(self.ports[0], a.px2_duration)
            self.commands.append(("px2 overload c%d" % PX2_CONNS, " ".join(cmd)))
            log("    load: %s" % " ".join(cmd))
            for i in range(a.px2_runs):
                for v in vs:
                    if v["key"] in res["failed"]:
                        continue
                    try:
                        r = self.px2_one_run(servers[v["key"]], origin, v, res)
                    except BenchError as e:
                        res["failed"][v["key"]] = "run %d: %s" % (i + 1, e)
                        self.failures += 1
                        log("  ! %s FAILED: %s" % (v["key"], e))
                        servers[v["key"]].stop()
                        if not origin.alive():
                            raise
                        continue
                    res["runs"].setdefault(v["key"], []).append(r)
                    self.px2_log_run(i + 1, v, r)
        except BenchError as e:
            res["failed"]["origin"] = str(e)
            self.failures += 1
            log("  ! px2 FAILED: %s" % e)
        finally:
            self.stop_servers(list(servers.values()))
            origin.stop()

    def px2_one_run(self, srv, origin, v, res):
        a = self.args
        waited = origin.wait_idle()
        if waited is None:
            raise BenchError("the origin was still busy %d s after the previous run: %s"
                             % (IDLE_WAIT, origin.status()))
        srv.start()
        st0 = origin.status()
        got = get_once(srv.port, PX2_PATH)
        st1 = origin.status()
        if any(s != 200 or b != BODY for s, b in got):
            raise BenchError("verification: GET %s through the proxy answered %r"
                             % (PX2_PATH, [(s, b[:80]) for s, b in got]))
        if st1["responses"] - st0["responses"] != len(got):
            raise BenchError("verification: the origin served %d requests for %d proxied ones"
                             % (st1["responses"] - st0["responses"], len(got)))
        res["verify"][v["key"]] = "200 with the origin's %d-byte body, twice on one " \
                                  "connection" % len(BODY)
        time.sleep(a.pause)
        errlog = os.path.join(srv.prefix, "logs", "error.log")
        err0 = os.path.getsize(errlog) if os.path.exists(errlog) else 0
        cmd = self.px2_command(srv.port, a.px2_duration)
        pids, opids = srv.pids(), origin.pids()
        st0 = origin.status(reset=True)
        nl0 = netstat_listen()
        k0, kc0 = cpu_times(a.server_cpu), cpu_times(a.client_cpu)
        c0, oc0 = cpu_sample(pids), cpu_sample(opids)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=raise_nofile_preexec)
        samples = []
        st_last = None       # the origin's counters at the last sample, 1 s before the end
        per_s = []           # the origin's responses in each second of the run
        try:
            marks = [t for t in SS_AT if t < a.px2_duration - SS_BEFORE_END - 1]
            marks.append(a.px2_duration - SS_BEFORE_END)
            # Once a second: the origin's responses (its per-second rate
            # shows stalls); at the marks also wrk's waiting connections.
            tick, prev = 1, st0["responses"]
            while marks and p.poll() is None:
                t = min(tick, marks[0])
                delay = t0 + t - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if p.poll() is not None:
                    break
                if t == tick:
                    st = origin.status()
                    per_s.append(st["responses"] - prev)
                    prev = st["responses"]
                    tick += 1
                if t == marks[0]:
                    marks.pop(0)
                    samples.append((round(time.monotonic() - t0, 1),) + ss_pending(srv.port))
                    st_last = origin.status()
            out, _ = p.communicate(timeout=a.px2_duration + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise BenchError("wrk did not finish within %d s" % (a.px2_duration + 60))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c1 = cpu_sample(sorted(set(pids) | set(srv.pids())))
        oc1 = cpu_sample(sorted(set(opids) | set(origin.pids())))
        k1, kc1 = cpu_times(a.server_cpu), cpu_times(a.client_cpu)
        st1 = origin.status()
        nl1 = netstat_listen()
        out = out.decode(errors="replace")
        if not srv.alive():
            raise BenchError("%s died during the run (exit %s):\n%s"
                             % (srv.name, srv.proc.returncode, srv.log_tail()))
        if not origin.alive():
            raise BenchError("the origin died during the run")
        if p.returncode != 0:
            raise BenchError("wrk exited %d: %s\n%s" % (p.returncode, " ".join(cmd), out[-3000:]))
        r = parse_wrk_px2(out)
        r["raw"] = out
        r["wall_s"] = wall
        cpu_us = (c1[0] - c0[0]) * 1e6 / CLK_TCK
        r["proxy_cpu_pct"] = 100.0 * cpu_us / 1e6 / wall
        r["proxy_cpu_us_per_ok"] = cpu_us / r["ok"] if r["ok"] else None
        r["proxy_cpu_us_per_resp"] = cpu_us / r["requests"] if r["requests"] else None
        if k0 and k1:
            busy = (k1[0] - k0[0]) * 1e6 / CLK_TCK
            r["other_cpu_pct"] = max(0.0, 100.0 * (busy - cpu_us) / 1e6 / wall)
            r["steal_pct"] = 100.0 * (k1[1] - k0[1]) / CLK_TCK / wall
        else:
            r["other_cpu_pct"] = r["steal_pct"] = None
        r["origin_cpu_pct"] = 100.0 * (oc1[0] - oc0[0]) / CLK_TCK / wall
        r["cpu1_busy_pct"] = (100.0 * (kc1[0] - kc0[0]) / CLK_TCK / wall
                              if kc0 and kc1 else None)
        r["wrk_cpu_pct"] = 100.0 * ((ru1.ru_utime - ru0.ru_utime)
                                    + (ru1.ru_stime - ru0.ru_stime)) / wall
        r["origin"] = origin_delta(st0, st1)
        r["origin_max_queue"] = st1["max_queue"]
        r["origin_max_busy"] = st1["max_busy"]
        # The same until 1 s before the end: when wrk stops, its 500 clients
        # close at once, which can make a proxy open new origin connections
        # for requests whose clients are gone.
        r["origin_per_s"] = per_s
        r["origin_min_per_s"] = min(per_s[1:-1]) if len(per_s) > 2 else None
        r["origin_max_queue_run"] = st_last["max_queue"] if st_last else None
        r["origin_accepted_run"] = st_last["accepted"] - st0["accepted"] if st_last else None
        r["listen_overflows"] = nl1[0] - nl0[0]
        r["ss_samples"] = samples
        last = samples[-1] if samples else None
        r["pending_late_end"] = last[2] if last else None
        r["pending_oldest_end_ms"] = last[3] if last else None
        r["pending_late_max"] = max(s[2] for s in samples) if samples else None
        # wrk's 500 clients are gone. With the proxy still running: does it
        # still send the origin requests whose clients have left?
        time.sleep(max(0.0, PX2_GRACE - (time.monotonic() - t0 - wall)))
        st_grace = origin.status()
        r["origin_grace"] = origin_delta(st1, st_grace)
        r["error_log_lines"] = self.px2_error_log(errlog, err0)
        srv.stop()
        # Then what the origin still had to do once the proxy was stopped too:
        # requests left in its accept queue (served into closed sockets).
        waited = origin.wait_idle()
        st2 = origin.status()
        r["origin_after"] = origin_delta(st_grace, st2)
        r["origin_drain_s"] = waited
        return r

    def px2_error_log(self, path, offset):
        """Lines the proxy wrote to its error log during the run, by message
        (the text after the connection number); the log is then truncated."""
        kinds = {}
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                for line in f:
                    m = re.search(rb"\*\d+ ([^,]*)", line) or re.search(rb"\] (.{0,60})", line)
                    k = (m.group(1) if m else line[:60]).decode(errors="replace").strip()
                    kinds[k] = kinds.get(k, 0) + 1
            os.truncate(path, 0)
        except FileNotFoundError:
            pass
        return kinds

    def px2_log_run(self, i, v, r):
        e = r["errors"]
        o = r["origin"]
        log("    run %d %-12s %7d 2xx, %7d non-2xx; socket errors connect %d read %d write %d "
            "timeout %d; p50 %s p99 %s max %s ms"
            % (i, v["key"], r["ok"], r["non2xx"], e["connect"], e["read"], e["write"],
               e["timeout"], fmt_ms(r["p50_ms"]), fmt_ms(r["p99_ms"]), fmt_ms(r["max_ms"])))
        log("          waiting > 2 s (ss): %s; proxy CPU %.1f%%, other on CPU %d %.1f%%; "
            "origin: %d responses, %s/%d accepted, max queue %s/%d, listen overflows %d; "
            "after wrk: %d more with the proxy running, %d after it stopped; error log %s"
            % (", ".join("%gs: %d (oldest %.1f s)" % (t, late, old / 1e3)
                         for t, _, late, old in r["ss_samples"]) or "-",
               r["proxy_cpu_pct"], self.args.server_cpu, r["other_cpu_pct"] or 0,
               o["responses"], r["origin_accepted_run"], o["accepted"],
               r["origin_max_queue_run"], r["origin_max_queue"], r["listen_overflows"],
               r["origin_grace"]["requests"], r["origin_after"]["requests"],
               sum(r["error_log_lines"].values())))

    # ---- reporting ---------------------------------------------------------

    def px2_table(self):
        res = getattr(self, "px2_results", None)
        if not res:
            return []
        vs = res["variants"]
        out = ["| px2 overload: %d connections, %g s (wrk -t%d --latency) | %s |"
               % (PX2_CONNS, res["duration"], PX2_THREADS,
                  " | ".join(v["label"] for v in vs)),
               "|---|" + "---:|" * len(vs)]

        def row(label, fn, fmt="{:,.0f}"):
            cells = []
            for v in vs:
                runs = res["runs"].get(v["key"], [])
                xs = [fn(r) for r in runs]
                if not runs:
                    cells.append("FAILED" if res["failed"].get(v["key"]) else "-")
                    continue
                vals = [x for x in xs if x is not None]
                med = statistics.median(vals) if vals else None
                cell = fmt.format(med) if med is not None else "n/a"
                if len(xs) > 1:
                    cell += " (%s)" % ", ".join(fmt.format(x) if x is not None else "n/a"
                                                for x in xs)
                cells.append(cell)
            out.append("| %s | %s |" % (label, " | ".join(cells)))

        row("completed 2xx responses", lambda r: r["ok"])
        row("non-2xx responses", lambda r: r["non2xx"])
        row("all responses (wrk's N requests)", lambda r: r["requests"])
        for k in ("connect", "read", "write", "timeout"):
            row("socket errors: %s" % k, lambda r, k=k: r["errors"][k])
        row("requests unanswered > 2 s at the end (ss, not in wrk's counts)",
            lambda r: r["pending_late_end"])
        row("longest unanswered wait at the end, s (ss)",
            lambda r: r["pending_oldest_end_ms"] / 1e3
            if r["pending_oldest_end_ms"] is not None else None, "{:.1f}")
        row("p50 latency ms", lambda r: r["p50_ms"], "{:,.1f}")
        row("p99 latency ms (wrk: responses under 2 s only)", lambda r: r["p99_ms"], "{:,.1f}")
        row("max latency ms (same)", lambda r: r["max_ms"], "{:,.1f}")
        row("origin: responses served during the run", lambda r: r["origin"]["responses"])
        row("origin: responses per second (capacity %d)" % (PX2_SLOTS * 1000 // PX2_DELAY_MS),
            lambda r: r["origin"]["responses"] / r["wall_s"], "{:,.0f}")
        row("origin: fewest responses in one second (not the first or last)",
            lambda r: r["origin_min_per_s"])
        row("origin: mean idle ms between requests on a connection (proxy turnaround)",
            lambda r: r["origin"]["gap_ms"] / r["origin"]["gaps"] if r["origin"]["gaps"]
            else None, "{:.2f}")
        row("origin: connections accepted until 1 s before the end",
            lambda r: r["origin_accepted_run"])
        row("origin: connections accepted (whole run)", lambda r: r["origin"]["accepted"])
        row("origin: max accept queue until 1 s before the end (of %d)" % PX2_BACKLOG,
            lambda r: r["origin_max_queue_run"])
        row("origin: max accept queue (whole run)", lambda r: r["origin_max_queue"])
        row("origin: requests in the %d s after wrk stopped (clients gone, proxy running)"
            % PX2_GRACE, lambda r: r["origin_grace"]["requests"])
        row("origin: requests after the proxy was stopped too (left in its accept queue)",
            lambda r: r["origin_after"]["requests"])
        row("SYNs dropped, accept queue full (ListenOverflows)", lambda r: r["listen_overflows"])
        row("proxy CPU %% (CPU %d)" % self.args.server_cpu, lambda r: r["proxy_cpu_pct"],
            "{:.1f}")
        row("proxy CPU µs per 2xx response", lambda r: r["proxy_cpu_us_per_ok"], "{:.1f}")
        row("proxy error log lines", lambda r: sum(r["error_log_lines"].values()))
        row("origin CPU %% (CPU %d)" % self.args.client_cpu, lambda r: r["origin_cpu_pct"],
            "{:.1f}")
        row("wrk CPU %% (CPU %d)" % self.args.client_cpu, lambda r: r["wrk_cpu_pct"], "{:.1f}")
        row("noise: other busy %% on CPU %d" % self.args.server_cpu,
            lambda r: r["other_cpu_pct"], "{:.1f}")
        return out

    def px2_lines(self):
        """Verdict and error-log lines under the table."""
        res = getattr(self, "px2_results", None)
        if not res:
            return []
        out = []
        for v in res["variants"]:
            kinds = {}
            for r in res["runs"].get(v["key"], []):
                for k, n in r["error_log_lines"].items():
                    kinds[k] = kinds.get(k, 0) + n
            if kinds:
                top = sorted(kinds.items(), key=lambda kv: -kv[1])[:3]
                out.append("px2 %s error log: %s" % (v["key"], "; ".join(
                    "%d x \"%s\"" % (n, k) for k, n in top)))
        s_runs = res["runs"].get("sluice", [])
        n_runs = res["runs"].get("nginx", [])
        if s_runs and not self.self_test:
            bad = sum(r["non2xx"] + r["socket_errors"] + (r["pending_late_end"] or 0)
                      for r in s_runs)
            ok_s = statistics.median(r["ok"] for r in s_runs)
            line = "px2 target (zero errors and timeouts for sluice, its 2xx at least " \
                   "nginx's): sluice errors+timeouts+late %d" % bad
            if n_runs:
                ok_n = statistics.median(r["ok"] for r in n_runs)
                line += ", 2xx %s vs nginx %s" % ("{:,.0f}".format(ok_s), "{:,.0f}".format(ok_n))
                met = bad == 0 and ok_s >= ok_n
            else:
                met = bad == 0
            out.append(line + (": met" if met else ": NOT met"))
        return out

    def px2_failures(self):
        res = getattr(self, "px2_results", None)
        if not res:
            return []
        out = ["px2: %s FAILED: %s" % (k, " / ".join(
            l.strip() for l in why.splitlines() if l.strip())[:400])
            for k, why in res["failed"].items()]
        if not self.self_test:
            for r in res["runs"].get("sluice", []):
                bad = r["non2xx"] + r["socket_errors"] + (r["pending_late_end"] or 0)
                if bad:
                    out.append("px2: sluice: %d non-2xx, socket errors %s, %s unanswered > 2 s "
                               "(target: none)" % (r["non2xx"], json.dumps(r["errors"]),
                                                    r["pending_late_end"]))
        return out

    def px2_per_run(self):
        res = getattr(self, "px2_results", None)
        if not res:
            return []
        out = []
        for v in res["variants"]:
            runs = res["runs"].get(v["key"], [])
            if runs:
                out.append("- px2 %s: %s" % (v["key"], "; ".join(
                    "2xx %d, non-2xx %d, errors %s, late at end %s, p50 %s, p99 %s, max %s ms, "
                    "origin %d" % (r["ok"], r["non2xx"], "/".join(
                        str(r["errors"][k]) for k in ("connect", "read", "write", "timeout")),
                        r["pending_late_end"], fmt_ms(r["p50_ms"]), fmt_ms(r["p99_ms"]),
                        fmt_ms(r["max_ms"]), r["origin"]["responses"]) for r in runs)))
        return out


def fmt_ms(x):
    return "%.1f" % x if x is not None else "n/a"
