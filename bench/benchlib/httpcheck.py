"""Verification of a server before it is measured (HTTP/1.1, TLS, HTTP/2), and
the px1 origin's counters."""

import os
import re
import socket
import ssl
import subprocess
import time

from .common import BenchError, read_file


def read_chunked(sock, rest, deadline):
    """The body of a chunked response whose head has been read; rest is what
    followed the head. Returns the decoded body; trailers are skipped, and
    nothing may follow the last chunk."""
    buf = rest
    body = b""

    def need(n):
        nonlocal buf
        while len(buf) < n:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            d = sock.recv(1 << 20)
            if not d:
                raise BenchError("connection closed inside a chunked body")
            buf += d

    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        l, _, buf = buf.partition(b"\r\n")
        return l

    while True:
        size = int(line().split(b";")[0].strip(), 16)
        if size == 0:
            while line():
                pass          # trailers
            break
        need(size + 2)
        body += buf[:size]
        if buf[size:size + 2] != b"\r\n":
            raise BenchError("bad chunk framing")
        buf = buf[size + 2:]
    if buf:
        raise BenchError("%d extra bytes after the chunked body" % len(buf))
    return body


def read_response(sock, deadline, chunked_ok=False):
    """One HTTP/1.1 response: (status, headers, body, head length). The body
    must have a Content-Length, or with chunked_ok be chunked (decoded)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        d = sock.recv(65536)
        if not d:
            raise BenchError("connection closed before response headers (got %r)" % buf[:200])
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise BenchError("bad status line %r" % lines[0])
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = rest
    if "chunked" in headers.get("transfer-encoding", "").lower():
        if chunked_ok:
            return status, headers, read_chunked(sock, rest, deadline), len(head) + 4
        raise BenchError("unexpected chunked response (expected Content-Length)")
    if "content-length" not in headers:
        raise BenchError("response has no Content-Length")
    n = int(headers["content-length"])
    while len(body) < n:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        d = sock.recv(1 << 20)
        if not d:
            raise BenchError("connection closed after %d of %d body bytes" % (len(body), n))
        body += d
    if len(body) > n:
        raise BenchError("%d extra bytes after the response body" % (len(body) - n))
    return status, headers, body, len(head) + 4


def tls_client_context(cafile, row):
    """Client context for verifying a TLS row: the server's certificate must
    chain to the generated one (and match 127.0.0.1); ALPN offers h2 only on
    HTTP/2 rows; TLSv1.2 rows cap the client at TLSv1.2 (as ab -f TLS1.2)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if row.tls == "TLSv1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2", "http/1.1"] if row.h2 else ["http/1.1"])
    return ctx


def tls_connect(port, row, cafile, timeout=10):
    """TCP connect plus TLS handshake; checks the negotiated version and, for
    HTTP/2 rows, ALPN h2. Returns (ssl socket, description)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s = tls_client_context(cafile, row).wrap_socket(raw, server_hostname="127.0.0.1")
    except (OSError, ValueError) as e:
        raw.close()
        raise BenchError("TLS handshake failed: %s: %s" % (type(e).__name__, e))
    version, cipher, alpn = s.version(), (s.cipher() or ("?",))[0], s.selected_alpn_protocol()
    desc = "%s %s ALPN %s" % (version, cipher, alpn or "-")
    if version != row.tls:
        s.close()
        raise BenchError("negotiated %s, expected %s (%s)" % (version, row.tls, desc))
    if row.h2 and alpn != "h2":
        s.close()
        raise BenchError("ALPN h2 not selected (%s): is 'listen ... ssl http2' supported?" % desc)
    if not row.h2 and alpn not in (None, "http/1.1"):
        s.close()
        raise BenchError("unexpected ALPN %r on an HTTP/1.1 row" % alpn)
    return s, desc


def verify_h2(port, row, expected_body, cafile, tmpdir):
    """HTTP/2 rows: two GETs with curl --http2 on one connection; status 200,
    HTTP/2, the exact body, and the second request reusing the connection."""
    s, tls_desc = tls_connect(port, row, cafile)
    s.close()
    url = "https://127.0.0.1:%d%s" % (port, row.path)
    outs = [os.path.join(tmpdir, "verify-h2-%d-%d" % (port, i)) for i in range(2)]
    fmt = "%{http_version} %{response_code} %{size_download} %{num_connects} %{ssl_verify_result}\\n"
    cmd = ["curl", "-sS", "--http2", "--cacert", cafile, "--max-time", "60",
           "-A", "sluice-bench-verify", "-w", fmt, "-o", outs[0], url, "-o", outs[1], url]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise BenchError("GET %s (curl --http2) exited %d: %s" % (row.path, r.returncode,
                                                                      out.strip()[-500:]))
        lines = [l.split() for l in out.splitlines() if l.strip()]
        if len(lines) != 2 or any(len(l) != 5 for l in lines):
            raise BenchError("GET %s (curl --http2): unexpected output %r" % (row.path, out))
        for i, (ver, code, size, conns, vres) in enumerate(lines):
            if ver != "2":
                raise BenchError("GET %s: HTTP version %s, expected 2" % (row.path, ver))
            if code != "200":
                raise BenchError("GET %s: status %s, expected 200" % (row.path, code))
            if vres != "0":
                raise BenchError("GET %s: certificate verification result %s" % (row.path, vres))
            with open(outs[i], "rb") as f:
                body = f.read()
            if row.body_len is not None and len(body) != row.body_len:
                raise BenchError("GET %s: body %d bytes, expected %d"
                                 % (row.path, len(body), row.body_len))
            if expected_body is not None and body != expected_body:
                raise BenchError("GET %s: body content differs from the file" % row.path)
        if lines[1][3] != "0":
            raise BenchError("GET %s: the second request did not reuse the HTTP/2 connection"
                             % row.path)
        return "%s; 200 over HTTP/2 (curl), %d body bytes, connection reused" % (
            tls_desc, row.body_len)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("GET %s (curl --http2): %s: %s" % (row.path, type(e).__name__, e))
    finally:
        for o in outs:
            if os.path.exists(o):
                os.unlink(o)


def verify_h2c(port, row, expected_body):
    """HTTP/2 rows without TLS: two GETs with nghttp (nghttp2-client, as
    h2load) on one h2c connection with prior knowledge, as h2load makes on
    http:// URLs; each must be 200 with the exact body. Not curl: curl 7.88
    (Debian 12) fails its second request on a reused prior-knowledge
    connection ("Error in the HTTP2 framing layer") against nginx, h2o and
    sluice alike. nghttp asks for a URL only once, so the two differ in a
    query string, which static files ignore."""
    urls = ["http://127.0.0.1:%d%s?verify=%d" % (port, row.path, i) for i in (1, 2)]
    # -s: a table of every request (status, size) after the bodies.
    cmd = ["nghttp", "-s", "-H", "user-agent: sluice-bench-verify", "-t", "60"] + urls
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("GET %s (nghttp, h2c): %s: %s" % (row.path, type(e).__name__, e))
    body, sep, stats = r.stdout.partition(b"***** Statistics *****")
    if r.returncode != 0 or not sep:
        raise BenchError("GET %s (nghttp, h2c) exited %d: %s" % (
            row.path, r.returncode, r.stdout.decode(errors="replace").strip()[-500:]))
    codes = re.findall(r"^\s*\d+\s+\S+\s+\S+\s+\S+\s+(\d{3})\s+\S+\s+/",
                       stats.decode(errors="replace"), re.M)
    if codes != ["200", "200"]:
        raise BenchError("GET %s (nghttp, h2c): statuses %s, expected 200 twice"
                         % (row.path, codes))
    # Both bodies, in the order their DATA frames arrived (one frame each
    # for a small file; the rows with h2c serve 12 bytes).
    if expected_body is not None and body != expected_body * 2:
        raise BenchError("GET %s (nghttp, h2c): %d body bytes, expected 2 x %d of the file"
                         % (row.path, len(body), len(expected_body)))
    return "h2c (prior knowledge); 200 over HTTP/2 (nghttp), %d body bytes, one connection" % (
        len(body) // 2)


def verify(port, row, expected_body, cafile=None, tmpdir=None):
    """Raise BenchError unless the server answers row.path correctly and
    honours the expected connection behaviour. Returns a short description."""
    if row.h2 and not row.tls:
        return verify_h2c(port, row, expected_body)
    if row.h2:
        return verify_h2(port, row, expected_body, cafile, tmpdir)
    deadline = time.monotonic() + 30
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-verify\r\n"
           "Accept: */*\r\n\r\n" % (row.path, port)).encode()
    tls_desc = ""
    if row.tls:
        s, tls_desc = tls_connect(port, row, cafile)
        tls_desc += "; "
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        rounds = 2 if row.keepalive else 1
        for i in range(rounds):
            s.sendall(req)
            status, headers, body, head_len = read_response(s, deadline)
            if status != 200:
                raise BenchError("GET %s: status %d, expected 200" % (row.path, status))
            if row.body_len is not None and len(body) != row.body_len:
                raise BenchError("GET %s: body %d bytes, expected %d"
                                 % (row.path, len(body), row.body_len))
            if expected_body is not None and body != expected_body:
                raise BenchError("GET %s: body content differs from the file" % row.path)
            if row.path == "/empty.gif":
                if headers.get("content-type") != "image/gif":
                    raise BenchError("GET /empty.gif: Content-Type %r, expected image/gif"
                                     % headers.get("content-type"))
                if not body.startswith(b"GIF89a"):
                    raise BenchError("GET /empty.gif: body is not a GIF")
            conn_hdr = headers.get("connection", "").lower()
            if row.keepalive and conn_hdr == "close":
                raise BenchError("GET %s: Connection: close on a keep-alive workload" % row.path)
        if row.close_expected:
            if conn_hdr != "close":
                raise BenchError("GET %s: expected 'Connection: close' with keepalive_timeout 0, "
                                 "got %r" % (row.path, headers.get("connection")))
            s.settimeout(3)
            try:
                extra = s.recv(1)
            except socket.timeout:
                raise BenchError("GET %s: server did not close the connection within 3 s "
                                 "(keepalive_timeout 0)" % row.path)
            except ConnectionResetError:
                extra = b""
            if extra:
                raise BenchError("GET %s: unexpected bytes after response" % row.path)
        return "%s200, %d body bytes, %d header bytes, Server: %s%s" % (
            tls_desc, len(body), head_len, headers.get("server", "-"),
            ", closes connection" if row.close_expected else ", keep-alive reused")
    except (OSError, ValueError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    finally:
        s.close()


# --------------------------------------------------------------------------
# Reverse proxy workloads (px1): the origin's counters, connections to it
# --------------------------------------------------------------------------

ORIGIN_STATUS_PATH = "/origin_status"
# Verification of a proxy: this many sequential requests, spread over two
# client connections, must all reach the origin over at most
# ORIGIN_VERIFY_MAX_CONNS new origin connections (keep-alive to the origin).
ORIGIN_VERIFY_REQUESTS = 20
ORIGIN_VERIFY_MAX_CONNS = 2
# A measured run in which the proxy opens more new origin connections than
# this (the client's 50 connections, i.e. more than refilling the whole pool)
# gets a note: keep-alive to the origin is not holding under load.
PX_CHURN_CONNS = 50


def origin_status(port):
    """The origin nginx's stub_status counters: dict with active, accepts,
    handled, requests. The query's own connection and request are included
    (accepts and requests count it), so a difference between two queries is
    one more than what happened in between."""
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
           % (ORIGIN_STATUS_PATH, port)).encode()
    buf = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(req)
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
    except OSError as e:
        raise BenchError("origin status %s: %s: %s" % (ORIGIN_STATUS_PATH, type(e).__name__, e))
    text = buf.decode("latin-1")
    m1 = re.search(r"Active connections:\s*(\d+)", text)
    m2 = re.search(r"server accepts handled requests\s+(\d+)\s+(\d+)\s+(\d+)", text)
    if not (text.startswith("HTTP/1.1 200") and m1 and m2):
        raise BenchError("origin status %s: unexpected response %r" % (ORIGIN_STATUS_PATH,
                                                                      text[:300]))
    return {"active": int(m1.group(1)), "accepts": int(m2.group(1)),
            "handled": int(m2.group(2)), "requests": int(m2.group(3))}


def origin_delta(before, after):
    """(connections accepted, requests) by the origin between two
    origin_status() samples, not counting the second query itself."""
    return after["accepts"] - before["accepts"] - 1, after["requests"] - before["requests"] - 1


def conns_to_port(pids, port):
    """Established TCP connections held by the processes pids (any thread)
    whose remote end is 127.0.0.1:port: a proxy's connections to the origin.
    From the socket inodes in /proc/PID/fd and /proc/net/tcp."""
    inodes = set()
    for pid in pids:
        d = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(d)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(os.path.join(d, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    n = 0
    for line in read_file("/proc/net/tcp", "").splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != "01":          # 01 = ESTABLISHED
            continue
        if int(f[2].rsplit(":", 1)[1], 16) == port and f[9] in inodes:
            n += 1
    return n


def verify_proxy_keepalive(port, origin_port, row, expected_body):
    """px rows: ORIGIN_VERIFY_REQUESTS sequential GETs through the proxy on
    two client connections; each must be 200 with the exact body, each must
    reach the origin (its request counter), and the origin must accept at most
    ORIGIN_VERIFY_MAX_CONNS new connections for all of them."""
    deadline = time.monotonic() + 30
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-verify\r\n"
           "Accept: */*\r\n\r\n" % (row.path, port)).encode()
    before = origin_status(origin_port)
    per_conn = ORIGIN_VERIFY_REQUESTS // 2
    try:
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                for _ in range(per_conn):
                    s.sendall(req)
                    status, headers, body, _ = read_response(s, deadline)
                    if status != 200:
                        raise BenchError("GET %s: status %d, expected 200" % (row.path, status))
                    if len(body) != row.body_len or (expected_body is not None
                                                     and body != expected_body):
                        raise BenchError("GET %s: body differs from the origin's file (%d bytes)"
                                         % (row.path, len(body)))
                    if headers.get("connection", "").lower() == "close":
                        raise BenchError("GET %s: Connection: close on a keep-alive workload"
                                         % row.path)
    except (OSError, ValueError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    conns, reqs = origin_delta(before, origin_status(origin_port))
    n = 2 * per_conn
    if reqs != n:
        raise BenchError("the origin saw %d requests for %d proxied requests" % (reqs, n))
    if conns > ORIGIN_VERIFY_MAX_CONNS:
        raise BenchError("keep-alive to the origin is not working: the origin accepted %d "
                         "connections for %d sequential proxied requests (at most %d expected)"
                         % (conns, n, ORIGIN_VERIFY_MAX_CONNS))
    return "origin: %d sequential requests (2 client connections) took %d new origin " \
           "connection(s)" % (n, conns)
