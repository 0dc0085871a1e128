"""Paths, constants, /proc and sysctl helpers and small formatting helpers
shared by bench/run and its modules."""

import os
import subprocess
import re
import resource
import select
import signal
import socket
import time


# bench/ (this file is bench/benchlib/common.py)
BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(BENCH_DIR)
CONF_DIR = os.path.join(BENCH_DIR, "conf")
IDLE_SCRIPT = os.path.join(BENCH_DIR, "idle_conns.py")
# tls2's load generator: a standalone Rust crate (not part of sluice's
# build), built by the harness into its own target dir.
HSLOAD_DIR = os.path.join(BENCH_DIR, "hsload")
HSLOAD_TARGET = os.path.join(HSLOAD_DIR, "target")
HSLOAD_BIN = os.path.join(HSLOAD_TARGET, "release", "hsload")
DOCS_PATH = os.path.join(REPO_DIR, "docs", "benchmarks.md")
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOFILE = 65535
SERVERS = ("nginx", "sluice")

# The 43-byte transparent GIF served by nginx's empty_gif module.
EMPTY_GIF_LEN = 43

STATIC_SIZES = [("0k", 0), ("1k", 1024), ("10k", 10 * 1024), ("100k", 100 * 1024)]
LARGE_SIZES = [("1m", 1024 * 1024), ("10m", 10 * 1024 * 1024)]
# Workload c4's object (generated only when c4 runs; deleted with the temp dir).
HUGE_SIZE = ("1g", 1024 ** 3)

# The 12-byte object of the nuster vs nginx HTTP/2 benchmark (workload tls3).
HELLO_BODY = b"hello world\n"

# TLS workloads: the certificate and key bench/run generates once per run
# (ECDSA P-256, self-signed) and copies into every prefix's conf/.
CERT_NAME, KEY_NAME = "cert.pem", "key.pem"
CERT_SUBJ = "/CN=localhost"
CERT_SAN = "subjectAltName=DNS:localhost,IP:127.0.0.1"

# h2load -n: the harness keeps -n at or below this many requests per
# connection, well under the configs' keepalive_requests 100000 (which is
# what limits requests per HTTP/2 connection in nginx >= 1.19.7), so no
# connection is closed by the server in the middle of a run.
H2LOAD_MAX_PER_CONN = 50000
# h2load -N: a connection without any activity for this long is closed and
# its requests counted as timed out, so a stalled server ends the run with
# errors instead of hanging until the harness's own timeout.
H2LOAD_INACTIVITY = "10s"


class BenchError(Exception):
    pass


def log(msg=""):
    print(msg, flush=True)


def subst(text, subs):
    """`text` with each key of `subs` replaced by its value."""
    for k, v in subs.items():
        text = text.replace(k, str(v))
    return text


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


# --------------------------------------------------------------------------
# /proc helpers
# --------------------------------------------------------------------------

def read_file(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def proc_stat_fields(pid):
    """Fields of /proc/PID/stat after the command name; index 0 is field 3."""
    s = read_file("/proc/%d/stat" % pid)
    if s is None:
        return None
    return s.rsplit(")", 1)[1].split()


def all_ppids():
    res = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        f = proc_stat_fields(int(d))
        if f:
            res[int(d)] = int(f[1])
    return res


def process_tree(root):
    """root and all of its descendants (live processes only)."""
    if not os.path.exists("/proc/%d" % root):
        return []
    children = {}
    for pid, ppid in all_ppids().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return sorted(out)


def cpu_sample(pids):
    """(utime+stime in ticks summed over pids, schedstat ns summed over all
    their threads or None if unavailable, stime ticks alone)."""
    ticks = 0
    sys_ticks = 0
    ns = 0
    have_sched = True
    for pid in pids:
        f = proc_stat_fields(pid)
        if f:
            ticks += int(f[11]) + int(f[12])   # fields 14 and 15
            sys_ticks += int(f[12])
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            s = read_file("/proc/%d/task/%s/schedstat" % (pid, tid))
            if s is None:
                have_sched = False
                continue
            ns += int(s.split()[0])
    return ticks, (ns if have_sched else None), sys_ticks


def mem_sample(pids):
    """(sum of VmRSS bytes, sum of Pss bytes or None)."""
    rss = 0
    pss = 0
    have_pss = True
    for pid in pids:
        st = read_file("/proc/%d/status" % pid, "")
        m = re.search(r"^VmRSS:\s+(\d+) kB", st, re.M)
        if m:
            rss += int(m.group(1)) * 1024
        sr = read_file("/proc/%d/smaps_rollup" % pid)
        m = re.search(r"^Pss:\s+(\d+) kB", sr or "", re.M)
        if m:
            pss += int(m.group(1)) * 1024
        else:
            have_pss = False
    return rss, (pss if have_pss else None)


def cpu_times(cpu):
    """(busy ticks, steal ticks) of one CPU from /proc/stat."""
    for line in read_file("/proc/stat", "").splitlines():
        f = line.split()
        if f and f[0] == "cpu%d" % cpu:
            v = [int(x) for x in f[1:]]
            v += [0] * (8 - len(v))
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            return user + nice + system + irq + softirq, steal
    return None


def tcp_sockstat():
    s = read_file("/proc/net/sockstat", "")
    m = re.search(r"^TCP:.*\btw (\d+)", s, re.M)
    return int(m.group(1)) if m else None


def sysctl(name):
    v = read_file("/proc/sys/" + name.replace(".", "/"))
    return v.strip().replace("\t", " ") if v is not None else None


def set_sysctl(name, value):
    with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
        f.write(str(value))


def raise_nofile_preexec():
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_ports(start, n):
    ports, p = [], start
    while len(ports) < n and p < start + 200:
        if port_free(p):
            ports.append(p)
        p += 1
    if len(ports) < n:
        raise BenchError("no free loopback ports near %d" % start)
    return ports


def fmt_num(x):
    return ("%g" % x)


def read_line(p, timeout):
    """Read one line from p.stdout within timeout seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = p.stdout.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError("timed out waiting for output from %s" % " ".join(p.args))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            b = os.read(fd, 1)
            if not b:
                raise BenchError("%s exited without output (exit %s)"
                                 % (" ".join(p.args), p.poll()))
            buf += b
    return buf.decode().strip()


def short(text, lines=4, width=400):
    """First few non-empty lines of an error, joined on one line."""
    ls = [l.strip() for l in text.splitlines() if l.strip()][:lines]
    t = " / ".join(ls)
    return t if len(t) <= width else t[:width] + "..."


def fmt_opt(x, fmt):
    return fmt % x if x is not None else "n/a"


def fmt_cell(x, fmt, failed):
    if x is None:
        return "FAILED" if failed else "-"
    return fmt.format(x)


def ratio(a, b):
    if a is None or b is None:
        return "n/a"
    if a == 0:
        return "n/a" if b == 0 else "inf"
    return "%.2f" % (b / a)


def fmt_dur(td):
    s = int(td.total_seconds())
    return "%dm%02ds" % (s // 60, s % 60)


def spawn_daemon(cmd, log_path):
    """Starts a long-running server process in its own session, stdout and
    stderr appended to log_path, with the raised file limit."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=raise_nofile_preexec)


def wait_port(port, proc, timeout=120):
    """Waits until 127.0.0.1:port accepts a connection; exits the script if
    proc (the server, e.g. under valgrind) ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited with %s during start-up" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("port %d not open after %d s" % (port, timeout))


def stop_server(p, name, timeout=120):
    """Stops a server started by a callgrind script: nginx with SIGQUIT (it
    then writes its profile), anything else with SIGTERM; killed after `timeout` seconds."""
    p.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
