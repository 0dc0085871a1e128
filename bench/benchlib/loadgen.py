"""Load generator command lines (wrk, ab, hsload, h2load) and output parsers."""

import re

from .common import BenchError, H2LOAD_INACTIVITY, HSLOAD_BIN, fmt_num


TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
BIN_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}


def wrk_cmd(cpu, url, conns, duration, timeout=None, headers=()):
    threads = 1
    extra = ["--timeout", "%ds" % timeout] if timeout else []
    for h in headers:              # e.g. "Accept-Encoding: gzip" (z and k rows)
        extra += ["-H", h]
    return ["taskset", "-c", str(cpu), "wrk", "-t%d" % threads, "-c%d" % conns,
            "-d%ss" % fmt_num(duration)] + extra + ["--latency", url]


def ab_cmd(cpu, url, conns, duration, max_requests, tls=None):
    # -t first, then -n: ab's -t resets the request count, a later -n caps it.
    # -f forces the TLS version (ab never resumes TLS sessions: a new SSL
    # object per connection, so every connection is a full handshake).
    tls_opt = ["-f", tls.replace("TLSv", "TLS")] if tls else []
    return ["taskset", "-c", str(cpu), "ab", "-r", "-q", "-t", str(int(max(1, duration))),
            "-n", str(max_requests), "-c", str(conns)] + tls_opt + [url]


def hsload_cmd(cpu, url, conns, duration, tls):
    """bench/hsload: -c connections for -d seconds, each request a new TCP
    connection and a full handshake (no resumption) with the row's TLS
    version; it verifies neither the certificate nor the handshake signature."""
    return ["taskset", "-c", str(cpu), HSLOAD_BIN, "-c", str(conns), "-d", fmt_num(duration),
            "--tls12" if tls == "TLSv1.2" else "--tls13", url]


def h2load_cmd(cpu, url, conns, streams, duration=None, requests=None, h1=False):
    """h2load with one thread. duration: timing-based run (-D, used for the
    warm-up); requests: a run of exactly that many requests (-n)."""
    cmd = ["taskset", "-c", str(cpu), "h2load", "-t", "1", "-c", str(conns),
           "-m", str(streams), "-N", H2LOAD_INACTIVITY]
    if h1:
        cmd.append("--h1")
    if requests is not None:
        cmd += ["-n", str(requests)]
    else:
        cmd += ["-D", str(int(max(1, duration)))]
    return cmd + [url]


def parse_wrk(out):
    r = {}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+), ([\d.]+)(\w*)B read", out, re.M)
    if not m:
        raise BenchError("cannot parse wrk output:\n" + out)
    r["requests"] = int(m.group(1))
    r["rps"] = float(re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M).group(1))
    m = re.search(r"^Transfer/sec:\s+([\d.]+)([KMGTP]?)B", out, re.M)
    r["bytes_per_s"] = float(m.group(1)) * BIN_UNITS[m.group(2)] if m else None
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s|m|h)\b", out, re.M)
    r["p99_ms"] = float(m.group(1)) * TIME_UNITS[m.group(2)] if m else None
    errs = {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non2xx3xx": 0}
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs.update(connect=int(m.group(1)), read=int(m.group(2)), write=int(m.group(3)),
                    timeout=int(m.group(4)))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errs["non2xx3xx"] = int(m.group(1))
    r["errors"] = errs
    r["tls"] = None
    return r


def parse_ab(out):
    r = {}
    m = re.search(r"^Complete requests:\s+(\d+)", out, re.M)
    if not m:
        raise BenchError("cannot parse ab output:\n" + out[-3000:])
    r["requests"] = int(m.group(1))
    r["rps"] = float(re.search(r"^Requests per second:\s+([\d.]+)", out, re.M).group(1))
    m = re.search(r"^Transfer rate:\s+([\d.]+) \[Kbytes/sec\]", out, re.M)
    r["bytes_per_s"] = float(m.group(1)) * 1024 if m else None
    m = re.search(r"^\s+99%\s+(\d+)", out, re.M)
    r["p99_ms"] = float(m.group(1)) if m else None
    errs = {"failed": 0, "connect": 0, "receive": 0, "length": 0, "exceptions": 0,
            "non2xx": 0}
    m = re.search(r"^Failed requests:\s+(\d+)", out, re.M)
    if m:
        errs["failed"] = int(m.group(1))
    m = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", out)
    if m:
        errs.update(connect=int(m.group(1)), receive=int(m.group(2)),
                    length=int(m.group(3)), exceptions=int(m.group(4)))
    m = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
    if m:
        errs["non2xx"] = int(m.group(1))
    # ab reports failed TLS handshakes on stderr ("SSL handshake failed (N).")
    # without counting them as failed requests.
    n = len(re.findall(r"^SSL handshake failed", out, re.M))
    if n:
        errs["failed"] += n
        errs["exceptions"] += n
    r["errors"] = errs
    r["tls"] = tls_summary(out)
    return r


def parse_hsload(out):
    """hsload's summary: 'requests: N ok, E errors, elapsed S s, R req/s',
    'errors: connect N, tls N, ...', 'handshakes: N full, N hrr, N resumed',
    'latency: p50 X ms, p99 Y ms, max Z ms' and 'TLS: VERSION CIPHER GROUP ...'."""
    r = {}
    m = re.search(r"^requests: (\d+) ok, (\d+) errors, elapsed ([\d.]+) s, ([\d.]+) req/s",
                  out, re.M)
    me = re.search(r"^errors: (.*)$", out, re.M)
    if not (m and me):
        raise BenchError("cannot parse hsload output:\n" + out[-3000:])
    r["requests"] = int(m.group(1))
    r["rps"] = float(m.group(4))
    r["bytes_per_s"] = None
    ml = re.search(r"^latency: p50 ([\d.]+) ms, p99 ([\d.]+) ms", out, re.M)
    r["p99_ms"] = float(ml.group(2)) if ml and r["requests"] else None
    # Every kind counts: connect, tls (handshake), write, read, status (not
    # 200), length (body vs Content-Length), timeout, resumed (a resumed
    # handshake; cannot happen, as hsload keeps no sessions).
    errs = {}
    for part in me.group(1).split(","):
        k, _, v = part.strip().rpartition(" ")
        errs[k] = int(v)
    if sum(errs.values()) != int(m.group(2)):
        raise BenchError("inconsistent hsload error counts:\n" + out[-3000:])
    r["errors"] = errs
    mh = re.search(r"^handshakes: (\d+) full, (\d+) hrr, (\d+) resumed", out, re.M)
    r["hrr"] = int(mh.group(2)) if mh else None
    r["tls"] = tls_summary(out)
    return r


def parse_duration_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * TIME_UNITS[m.group(2)] if m else None


def parse_h2load(out):
    """h2load's summary: 'finished in Xs, Y req/s, ZMB/s', 'requests: N total,
    N started, N done, N succeeded, N failed, N errored, N timeout', 'status
    codes: ...', 'traffic: 1.2MB (1234) total, ...', 'time for request: min
    max mean sd', and the TLS lines of the first connection."""
    r = {}
    m = re.search(r"^finished in ([\d.]+(?:us|ms|s|m|h)), ([\d.]+) req/s, ([\d.]+)([KMGTP]?)B/s",
                  out, re.M)
    mr = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                   r"(\d+) failed, (\d+) errored, (\d+) timeout", out, re.M)
    ms = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out, re.M)
    if not (m and mr and ms):
        raise BenchError("cannot parse h2load output:\n" + out[-3000:])
    finished_ms = parse_duration_ms(m.group(1))
    total, started, done, succeeded, failed, errored, timeout = (int(x) for x in mr.groups())
    s2, s3, s4, s5 = (int(x) for x in ms.groups())
    r["requests"] = done
    r["requests_total"] = total      # -n (or, with -D, the requests counted)
    r["rps"] = float(m.group(2))
    mt = re.search(r"^traffic: \S+ \((\d+)\) total", out, re.M)
    if mt and finished_ms:
        r["bytes_per_s"] = int(mt.group(1)) / (finished_ms / 1e3)
    else:
        r["bytes_per_s"] = float(m.group(3)) * BIN_UNITS[m.group(4)]
    r["p99_ms"] = None          # h2load reports min/max/mean/sd only
    ml = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out, re.M)
    r["mean_ms"] = parse_duration_ms(ml.group(3)) if ml else None
    # h2load counts 2xx and 3xx as succeeded; everything not succeeded
    # (failed incl. 4xx/5xx, errored, timed out, never done) is an error, and
    # so is a 3xx here (every row expects 200).
    r["errors"] = {"not_succeeded": total - succeeded, "failed": failed, "errored": errored,
                   "timeout": timeout, "not_done": total - done, "3xx": s3, "4xx": s4,
                   "5xx": s5}
    r["tls"] = tls_summary(out)
    ma = re.search(r"^Application protocol: (\S+)", out, re.M)
    r["alpn"] = ma.group(1) if ma else None
    return r


def tls_summary(out):
    """'TLSv1.3 TLS_AES_128_GCM_SHA256 X25519' from h2load's or ab's output."""
    m = re.search(r"^TLS Protocol: (\S+)\s*^Cipher: (\S+)", out, re.M)     # h2load
    if not m:
        m = re.search(r"^SSL/TLS Protocol:\s+([^,\s]+),([^,\s]+)", out, re.M)  # ab
    if not m:
        m = re.search(r"^TLS: (TLSv\S+) (\S+) (\S+)", out, re.M)               # hsload
        if m:
            return " ".join(m.groups())
    if not m:
        return None
    k = re.search(r"^Server Temp Key:\s+(\S+)", out, re.M)
    return "%s %s%s" % (m.group(1), m.group(2), " " + k.group(1) if k else "")


def error_total(errs):
    if "not_succeeded" in errs:   # h2load
        return errs["not_succeeded"] + errs["3xx"]
    if "failed" in errs:     # ab: "failed" already sums connect/receive/length/exceptions
        return errs["failed"] + errs["non2xx"]
    return sum(errs.values())
