"""The mem workload: resident memory with idle keep-alive connections."""

import json
import subprocess
import sys
import time

from .common import (
    BenchError, EMPTY_GIF_LEN, IDLE_SCRIPT, fmt_opt, log, mem_sample, raise_nofile_preexec,
    read_line)
from .httpcheck import verify
from .workloads import Row


class MemMixin:
    """Harness methods of the mem workload."""

    def run_mem(self, wl):
        args = self.args
        wl = dict(wl, key="mem")
        log("")
        log("=== Workload mem: %s, %d connections (config bench/conf/%s)"
            % (wl["title"], args.idle_conns, wl["template"]))
        row = Row("mem", "mem", "/empty.gif", 1, True, body_len=EMPTY_GIF_LEN)
        cmd_t = ["python3", "bench/idle_conns.py", "--port", "PORT", "--count", str(args.idle_conns),
                 "--path", "/empty.gif", "--hold", "300"]
        self.commands.append(("mem idle keep-alive connections",
                              "taskset -c %d %s" % (args.client_cpu, " ".join(cmd_t))))
        res = {"runs": {}, "failed": {}, "conns": args.idle_conns}
        reps = max(1, args.mem_runs)
        servers = None
        try:
            for i in range(reps):
                # A fresh server per measurement: freed memory is not handed back
                # to the OS, so a reused server would understate the next delta.
                servers = self.start_servers(wl, [])
                for srv in servers:
                    if srv.failed:
                        res["failed"].setdefault(srv.name, srv.failed)
                        continue
                    try:
                        verify(srv.port, row, None)
                        r = self.measure_idle(srv)
                    except BenchError as e:
                        res["failed"].setdefault(srv.name, str(e))
                        log("  ! %s FAILED: %s" % (srv.name, e))
                        self.failures += 1
                        continue
                    res["runs"].setdefault(srv.name, []).append(r)
                    log("    run %d %-6s RSS %7.1f MiB -> %7.1f MiB  (+%.0f B/conn; PSS +%s B/conn) "
                        "ok %d failed %d closed-by-server %d, %d thread(s)"
                        % (i + 1, srv.name, r["rss_before"] / 1048576, r["rss_after"] / 1048576,
                           r["rss_per_conn"], fmt_opt(r["pss_per_conn"], "%.0f"), r["ok"],
                           r["failed"], r["closed_by_server"], r["threads"]))
                self.stop_servers(servers)
                servers = None
        finally:
            if servers:
                self.stop_servers(servers)
        self.mem_results = res

    def measure_idle(self, srv):
        args = self.args
        time.sleep(0.5)
        rss0, pss0 = mem_sample(srv.pids())
        cmd = ["taskset", "-c", str(args.client_cpu), sys.executable, IDLE_SCRIPT,
               "--port", str(srv.port), "--count", str(args.idle_conns),
               "--path", "/empty.gif", "--hold", "300"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             preexec_fn=raise_nofile_preexec)
        try:
            line = read_line(p, 180)
            if not line.startswith("READY "):
                raise BenchError("idle_conns.py: unexpected output %r" % line)
            ready = json.loads(line[6:])
            time.sleep(args.idle_settle)
            if not srv.alive():
                raise BenchError("%s died while holding idle connections:\n%s"
                                 % (srv.name, srv.log_tail()))
            rss1, pss1 = mem_sample(srv.pids())
            threads = srv.threads()
            p.stdin.close()
            line = read_line(p, 30)
            done = json.loads(line[5:]) if line.startswith("DONE ") else {}
            p.wait(30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if ready["ok"] == 0:
            raise BenchError("no idle connection could be set up: %s" % ready)
        ok = ready["ok"]
        return {
            "rss_before": rss0, "rss_after": rss1, "pss_before": pss0, "pss_after": pss1,
            "rss_per_conn": (rss1 - rss0) / ok,
            "pss_per_conn": (pss1 - pss0) / ok if pss0 is not None and pss1 is not None else None,
            "ok": ok, "failed": ready["failed"], "errors": ready.get("errors", {}),
            "setup_s": ready["seconds"], "closed_by_server": done.get("closed_by_server", -1),
            "threads": threads,
        }
