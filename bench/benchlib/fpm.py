"""Workloads k1 and k2 (the Kangle article's PHP test): each server in front of
its own php-fpm pool. The pools are Debian's php-fpm (php8.2-fpm), started
here with a config of their own in the server's prefix (fpm/), a unix
socket, pm = static with FPM_CHILDREN children for both servers, Debian's
php.ini and conf.d (opcache on), pinned to the load generator's CPU as px1's
origin is, so the server's core holds the server alone and its CPU figures
are its own; the pool's CPU is reported beside them."""

import os
import signal
import socket
import subprocess
import time

from .common import BENCH_DIR, BenchError, CLK_TCK, cpu_sample, log, process_tree, spawn_daemon

FPM_BIN = "/usr/sbin/php-fpm8.2"
FPM_CHILDREN = 4
# php-fpm's listen backlog (its default on Linux, written out): with nginx,
# which has no queue, requests beyond the children wait here.
FPM_BACKLOG = 511
PHP_SCRIPT = os.path.join(BENCH_DIR, "php", "index.php")


class FpmPool:
    """One php-fpm master (foreground, -F) and its static pool."""

    def __init__(self, server, cpu):
        self.server = server
        self.dir = os.path.join(server.prefix, "fpm")
        self.sock = os.path.join(self.dir, "php.sock")
        self.conf = os.path.join(self.dir, "php-fpm.conf")
        self.log = os.path.join(self.dir, "php-fpm.log")
        self.cpu = cpu
        self.proc = None
        os.makedirs(self.dir, exist_ok=True)
        root = os.geteuid() == 0
        with open(self.conf, "w") as f:
            f.write("[global]\npid = %s/php-fpm.pid\nerror_log = %s\ndaemonize = no\n\n"
                    "[bench]\n%slisten = %s\nlisten.mode = 0666\nlisten.backlog = %d\n"
                    "pm = static\npm.max_children = %d\ncatch_workers_output = no\n"
                    % (self.dir, self.log, "user = root\ngroup = root\n" if root else "",
                       self.sock, FPM_BACKLOG, FPM_CHILDREN))
        self.cmd = ["taskset", "-c", str(cpu), FPM_BIN, "-F", "-y", self.conf, "-p", self.dir] \
            + (["-R"] if root else [])

    def start(self):
        self.proc = spawn_daemon(self.cmd, os.path.join(self.dir, "stdout.log"))
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise BenchError("php-fpm exited with status %s during start-up:\n%s"
                                 % (self.proc.returncode, self.log_tail()))
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BenchError("php-fpm did not listen on %s within 15 s:\n%s"
                                 % (self.sock, self.log_tail()))
            time.sleep(0.05)
        time.sleep(0.2)
        return self

    def log_tail(self, n=10):
        out = []
        for p in (os.path.join(self.dir, "stdout.log"), self.log):
            try:
                with open(p) as f:
                    out.append("--- %s\n%s" % (p, "\n".join(f.read().splitlines()[-n:])))
            except OSError:
                pass
        return "\n".join(out)

    def pids(self):
        return process_tree(self.proc.pid) if self.proc else []

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None:
            return
        tree = self.pids()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                log("  ! php-fpm (%s) did not exit 10 s after SIGTERM" % self.server.name)
        for p in tree:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.wait(5)
        self.proc = None


class FpmMixin:
    """Harness methods for the php-fpm pools of k1 and k2."""

    def start_fpm_pools(self, servers):
        """One pool per server, before the servers start; a pool that fails
        marks its server failed."""
        self.fpm_pools = {}
        if not os.access(FPM_BIN, os.X_OK):
            raise BenchError("%s is missing (apt-get install php8.2-fpm)" % FPM_BIN)
        for srv in servers:
            pool = FpmPool(srv, self.args.client_cpu)
            self.fpm_pools[srv.name] = pool
            try:
                pool.start()
                log("  %s's php-fpm: pid %d, %d process(es) (pm = static, %d children), "
                    "CPU %d, %s" % (srv.name, pool.proc.pid, len(pool.pids()), FPM_CHILDREN,
                                    self.args.client_cpu, pool.sock))
            except BenchError as e:
                srv.failed = "its php-fpm pool failed: %s" % e
                log("  ! %s's php-fpm FAILED: %s" % (srv.name, e))
        cmd = ("k1/k2 php-fpm pool (one per server)",
               " ".join(self.fpm_pools[servers[0].name].cmd).replace(servers[0].prefix,
                                                                      "PREFIX"))
        if cmd not in self.commands:
            self.commands.append(cmd)

    def stop_fpm_pools(self):
        for pool in getattr(self, "fpm_pools", {}).values():
            try:
                pool.stop()
            except Exception as e:   # keep cleaning up
                log("  ! stopping php-fpm: %s" % e)
        self.fpm_pools = {}

    def fpm_settle(self, row):
        """Before a k row's run: waits until every pool is idle. A client
        that leaves does not take back the requests nginx already connected
        for: they sit in its pool's listen backlog (up to c500 - 4 of them)
        and php-fpm renders each one after wrk has gone, about 1.7 s of CPU 1
        that spilled into the next (sluice's) run and took 2 % of php-fpm's
        share there. sluice drops a queued request whose client left, so its
        pool is idle at once."""
        pools = list(getattr(self, "fpm_pools", {}).values())
        if not row.fpm or not pools:
            return 0.0
        start = time.monotonic()
        while time.monotonic() - start < 60:
            pids = sorted({p for pool in pools for p in pool.pids()})
            c0 = cpu_sample(pids)[0]
            time.sleep(0.2)
            if cpu_sample(pids)[0] - c0 <= 1:     # at most 1 tick in 200 ms
                break
        if time.monotonic() - start > 1:
            log("    (php-fpm busy for %.1f s after the previous run)" % (time.monotonic() - start))

    def fpm_sample(self, srv):
        """CPU (ticks) of srv's pool before a run, or None."""
        pool = getattr(self, "fpm_pools", {}).get(srv.name)
        return (pool, pool.pids(), cpu_sample(pool.pids())) if pool else None

    def fpm_measure(self, before, res, wall, kc0, kc1):
        """Adds the pool's CPU per request and CPU % to a run's result."""
        pool, pids, c0 = before
        if not pool.alive():
            raise BenchError("%s's php-fpm died during the run:\n%s"
                             % (pool.server.name, pool.log_tail()))
        c1 = cpu_sample(sorted(set(pids) | set(pool.pids())))
        ticks = c1[0] - c0[0]
        res["fpm_cpu_us_per_req"] = (ticks * 1e6 / CLK_TCK / res["requests"]
                                     if res["requests"] else None)
        res["fpm_cpu_pct"] = 100.0 * ticks / CLK_TCK / wall
        res["cpu1_busy_pct"] = (100.0 * (kc1[0] - kc0[0]) / CLK_TCK / wall
                                if kc0 and kc1 else None)
        # wrk's req/s counts error responses too, and a server that answers
        # 502 at once when the pool is busy serves many cheap ones: count
        # what the page was served for (2xx) separately.
        ok = res["requests"] - res["errors"].get("non2xx3xx", 0)
        res["ok_rps"] = ok * res["rps"] / res["requests"] if res["requests"] else 0.0
        res["cpu_us_per_ok"] = (res["cpu_us_per_req"] * res["requests"] / ok
                                if ok and res["cpu_us_per_req"] is not None else None)

    def run_extra(self, row, r):
        """The end of a measured run's log line: z and k rows' bytes per
        response, k rows' php-fpm CPU and how busy the load generator's CPU was."""
        extra = ""
        if row.fpm:
            extra += ("\n          php-fpm: CPU %.0f us/req, %.1f%%; CPU %d busy %s%%"
                      % (r["fpm_cpu_us_per_req"] or 0, r["fpm_cpu_pct"], self.args.client_cpu,
                         "-" if r["cpu1_busy_pct"] is None else "%.1f" % r["cpu1_busy_pct"]))
        if r.get("bytes_per_resp"):
            extra += " %.0f B/resp" % r["bytes_per_resp"]
        return extra

    def fpm_row_notes(self, row, result):
        """The issue's target for k2: no timeouts and no errors for sluice,
        req/s at least nginx's. A note when sluice misses it."""
        runs = result["runs"].get("sluice", [])
        if not runs or self.self_test:
            return
        errs = {}
        for r in runs:
            for k, v in r["errors"].items():
                errs[k] = errs.get(k, 0) + v
        bad = ", ".join("%s %d" % kv for kv in errs.items() if kv[1])
        if bad:
            self.notes.append("%s: sluice had load generator errors in %d measured runs (%s); "
                              "the target is none." % (row.title, len(runs), bad))
