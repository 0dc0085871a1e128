"""Starting, watching and stopping a server under test (nginx or sluice)."""

import os
import shutil
import signal
import socket
import subprocess
import time

from .common import (
    BenchError, CONF_DIR, log, proc_stat_fields, process_tree, raise_nofile_preexec, spawn_daemon,
    read_file)


class Server:
    def __init__(self, name, binary, base, port, template, files, cpu, conf_files=(),
                 subst=None):
        self.name = name
        self.binary = binary
        self.port = port
        self.cpu = cpu
        self.prefix = os.path.join(base, name)
        self.conf = os.path.join(self.prefix, "conf", "nginx.conf")
        self.proc = None
        self.known = {}           # pid -> start time of every process seen in the tree
        self.failed = None        # reason string once the server is unusable
        self.stdout_path = os.path.join(self.prefix, "logs", "stdout.log")
        # Graceful stop first (nginx: SIGQUIT), then SIGTERM; varnishd: SIGTERM.
        self.stop_signals = ("SIGQUIT", "SIGTERM")
        # Written by the server once it is up (nginx's `pid`); None for a
        # server that writes none (haproxy -db): the open port is enough.
        self.pidfile = os.path.join(self.prefix, "run.pid")
        for d in ("conf", "logs", "html"):
            os.makedirs(os.path.join(self.prefix, d), exist_ok=True)
        shutil.copy("/etc/nginx/mime.types", os.path.join(self.prefix, "conf", "mime.types"))
        with open(os.path.join(CONF_DIR, template)) as f:
            text = f.read()
        self.conf_text = text.replace("@PREFIX@", self.prefix).replace("@PORT@", str(port))
        for k, v in (subst or {}).items():     # e.g. @ORIGIN_PORT@ (px1)
            self.conf_text = self.conf_text.replace(k, str(v))
        with open(self.conf, "w") as f:
            f.write(self.conf_text)
        for fname, src in files:
            dst = os.path.join(self.prefix, "html", fname)
            if os.path.getsize(src) > (64 << 20):
                # c4's 1 GB object: a hard link, not a second gigabyte on disk.
                try:
                    os.link(src, dst)
                    continue
                except OSError:
                    pass
            shutil.copy(src, dst)
        for fname, src in conf_files:      # TLS certificate and key
            shutil.copy(src, os.path.join(self.prefix, "conf", fname))

    def log_tail(self, n=15):
        out = []
        for p in (self.stdout_path, os.path.join(self.prefix, "logs", "error.log")):
            t = read_file(p)
            if t:
                out.append("--- %s (last lines)\n%s" % (p, "\n".join(t.splitlines()[-n:])))
        return "\n".join(out)

    def test_config(self):
        cmd = [self.binary, "-t", "-p", self.prefix + "/", "-c", self.conf]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=60, preexec_fn=raise_nofile_preexec)
        if r.returncode != 0:
            raise BenchError("%s: config test failed (%s, exit %d):\n%s"
                             % (self.name, " ".join(cmd), r.returncode,
                                r.stdout.decode(errors="replace")[-2000:]))

    def start_cmd(self):
        return ["taskset", "-c", str(self.cpu), self.binary, "-p", self.prefix + "/", "-c",
                self.conf]

    def start(self):
        self.test_config()
        pidfile = self.pidfile
        if pidfile and os.path.exists(pidfile):
            os.unlink(pidfile)
        cmd = self.start_cmd()
        self.cmd = cmd
        self.proc = spawn_daemon(cmd, self.stdout_path)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise BenchError("%s exited with status %s during start-up:\n%s"
                                 % (self.name, self.proc.returncode, self.log_tail()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                if pidfile is None or os.path.exists(pidfile):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BenchError("%s did not accept connections on port %d (and write %s) "
                                 "within 20 s:\n%s" % (self.name, self.port, pidfile or "no pid file",
                                                       self.log_tail()))
            time.sleep(0.05)
        time.sleep(0.3)   # let nginx spawn its worker
        self.pid = self.proc.pid
        self.notes = []
        try:
            filepid = int(read_file(pidfile, "").strip() or 0) if pidfile else self.pid
        except ValueError:
            filepid = 0
        if filepid != self.pid:
            self.notes.append("pid file says %s, started process is %d" % (filepid, self.pid))
        return self

    def pids(self):
        tree = process_tree(self.pid)
        for p in tree:
            if p not in self.known:
                f = proc_stat_fields(p)
                if f:
                    self.known[p] = f[19]      # field 22: start time
        return tree

    def leftovers(self):
        """Processes of this server seen earlier that are still running (e.g.
        nginx workers orphaned by a crashed master)."""
        out = []
        for p, start in self.known.items():
            f = proc_stat_fields(p)
            if f and f[19] == start and f[0] != "Z":
                out.append(p)
        return out

    def affinity(self):
        res = {}
        for p in self.pids():
            try:
                res[p] = sorted(os.sched_getaffinity(p))
            except OSError:
                pass
        return res

    def threads(self):
        n = 0
        for p in self.pids():
            try:
                n += len(os.listdir("/proc/%d/task" % p))
            except OSError:
                pass
        return n

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            tree = self.pids()
            sigs = [(getattr(signal, n), timeout if i == 0 else 5)
                    for i, n in enumerate(self.stop_signals)]
            for sig, wait in sigs:
                try:
                    os.kill(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    log("  ! %s did not exit %ds after %s" % (self.name, wait, sig.name))
            else:
                for p in tree:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait(5)
            # nginx workers exit on their own after the master; make sure.
            deadline = time.monotonic() + 5
            for p in tree:
                while os.path.exists("/proc/%d" % p) and time.monotonic() < deadline:
                    f = proc_stat_fields(p)
                    if not f or f[0] == "Z":
                        break
                    time.sleep(0.05)
                f = proc_stat_fields(p)
                if f and f[0] != "Z" and p != self.proc.pid:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        for p in self.leftovers():
            log("  ! killing leftover %s process %d" % (self.name, p))
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None
