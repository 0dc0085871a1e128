#!/usr/bin/env python3
"""A capacity-limited HTTP/1.1 origin for bench/run's px2 workload.

Modelled on a prefork application server (Apache prefork with
MaxRequestWorkers 20, php-fpm with pm.max_children 20): SLOTS worker threads
each block in accept() on one listening socket (listen backlog BACKLOG, 511
like Apache's ListenBacklog and php-fpm's listen.backlog), and a worker serves
the connection it accepted until that connection ends. Connections beyond
SLOTS wait in the kernel's accept queue until a worker is free; when the
accept queue is full the kernel drops further SYNs (the client retransmits).

Per connection: requests are served one at a time with HTTP/1.1 keep-alive;
each request takes DELAY_MS of sleeping (no CPU), then gets a 200 with a
fixed small body. An idle kept-alive connection keeps its worker until the
client closes it or KEEPALIVE_TIMEOUT seconds pass without a new request
(Apache's KeepAliveTimeout 5); the first request on a new connection may take
HEADER_TIMEOUT seconds to arrive (mod_reqtimeout's header=20). A request
whose client went away while it waited in the accept queue is still served
if its bytes arrived (as Apache does): the worker sleeps, then the write
fails or goes nowhere; such requests are counted.

Counters are served as one JSON object on a Unix socket (STATUS_SOCKET; the
HTTP port has only SLOTS workers, all of which may be busy): connect, send
"status\\n" (or "status reset\\n" to restart the max-queue and max-busy
figures), read until EOF. Standard library only; loopback only.
"""

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time

BODY = (b"slot-origin: 200 after a fixed delay; one of a bounded number of "
        b"workers served this.\n")
MAX_HEAD = 16384


class Stats:
    FIELDS = ("accepted", "requests", "responses", "write_errors", "eof_before_request",
              "closed_idle_timeout", "closed_by_client", "closed_by_origin", "bad_requests",
              "gaps", "gap_ms")

    def __init__(self):
        self.lock = threading.Lock()
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.busy = 0              # workers holding a connection now
        self.in_request = 0        # workers inside the delay now
        self.max_busy = 0
        self.queue = 0             # accept queue length, last sample
        self.max_queue = 0         # since start or the last "status reset"
        self.backlog = 0           # accept queue limit the kernel reports

    def add(self, field, n=1):
        with self.lock:
            setattr(self, field, getattr(self, field) + n)

    def snapshot(self, reset):
        with self.lock:
            d = {f: getattr(self, f) for f in self.FIELDS}
            d["gap_ms"] = round(d["gap_ms"], 3)
            d.update(busy=self.busy, in_request=self.in_request, max_busy=self.max_busy,
                     queue=self.queue, max_queue=self.max_queue, backlog=self.backlog,
                     time=time.time())
            if reset:
                self.max_busy = self.busy
                self.max_queue = self.queue
        return d


def listen_queue(lsock):
    """(current accept queue length, its limit) of a listening TCP socket:
    tcpi_unacked and tcpi_sacked of TCP_INFO, which Linux fills with these
    for sockets in LISTEN state."""
    info = lsock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32)
    return struct.unpack_from("II", info, 24)


def read_head(conn, buf, timeout):
    """Read until the end of a request head. Returns (head bytes, rest) or
    (None, buf) on EOF/timeout before a complete head; raises ValueError on
    an oversized head."""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise ValueError("request head too large")
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        conn.settimeout(left)
        d = conn.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def serve_conn(conn, args, stats):
    """Serve one accepted connection until it ends. Returns nothing."""
    buf = b""
    first = True
    served = 0
    sent_at = None      # when the last response was written
    while True:
        try:
            head, buf = read_head(conn, buf, args.header_timeout if first
                                  else args.keepalive_timeout)
        except socket.timeout:
            stats.add("closed_idle_timeout")
            return
        except ValueError:
            stats.add("bad_requests")
            return
        except OSError:           # reset by the client
            stats.add("eof_before_request" if first else "closed_by_client")
            return
        if head is None:
            stats.add("eof_before_request" if first else "closed_by_client")
            return
        first = False
        if sent_at is not None:
            # Idle time of this worker between its last response and the
            # next request on the same connection: the proxy's turnaround.
            with stats.lock:
                stats.gaps += 1
                stats.gap_ms += (time.monotonic() - sent_at) * 1e3
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            stats.add("bad_requests")
            return
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        if "chunked" in headers.get("transfer-encoding", ""):
            stats.add("bad_requests")      # not needed by the benchmark
            return
        try:
            n = int(headers.get("content-length", "0"))
        except ValueError:
            stats.add("bad_requests")
            return
        try:
            while len(buf) < n:            # discard a request body
                conn.settimeout(args.header_timeout)
                d = conn.recv(65536)
                if not d:
                    stats.add("closed_by_client")
                    return
                buf += d
        except OSError:
            stats.add("closed_by_client")
            return
        buf = buf[n:]
        conn_hdr = headers.get("connection", "")
        keep = "close" not in conn_hdr and (parts[2] == "HTTP/1.1" or "keep-alive" in conn_hdr)
        served += 1
        if args.max_keepalive_requests and served >= args.max_keepalive_requests:
            keep = False
        stats.add("requests")
        with stats.lock:
            stats.in_request += 1
        time.sleep(args.delay_ms / 1000.0)
        with stats.lock:
            stats.in_request -= 1
        resp = (b"HTTP/1.1 200 OK\r\nServer: slot-origin\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n%s\r\n" % (len(BODY), b"" if keep else
                                                  b"Connection: close\r\n")) + BODY
        try:
            conn.settimeout(args.header_timeout)
            conn.sendall(resp)
        except OSError:
            stats.add("write_errors")
            return
        stats.add("responses")
        sent_at = time.monotonic()
        if not keep:
            stats.add("closed_by_origin")
            return


def worker(lsock, args, stats):
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError:
            time.sleep(0.01)
            continue
        with stats.lock:
            stats.accepted += 1
            stats.busy += 1
            stats.max_busy = max(stats.max_busy, stats.busy)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            serve_conn(conn, args, stats)
        except Exception as e:      # never lose a worker
            print("slot-origin: worker error: %s: %s" % (type(e).__name__, e),
                  file=sys.stderr, flush=True)
        finally:
            try:
                conn.close()
            except OSError:
                pass
            with stats.lock:
                stats.busy -= 1


def sampler(lsock, stats, interval):
    while True:
        try:
            q, limit = listen_queue(lsock)
        except OSError:
            q, limit = 0, 0
        with stats.lock:
            stats.queue = q
            stats.backlog = limit
            stats.max_queue = max(stats.max_queue, q)
        time.sleep(interval)


def status_server(path, stats):
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            c.settimeout(2)
            req = c.recv(256)
            d = stats.snapshot(reset=b"reset" in req)
            c.sendall(json.dumps(d).encode() + b"\n")
        except OSError:
            pass
        finally:
            c.close()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    ap.add_argument("--slots", type=int, default=20,
                    help="workers = connections served at once")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="time per request (sleep)")
    ap.add_argument("--backlog", type=int, default=511, help="listen(2) backlog")
    ap.add_argument("--keepalive-timeout", type=float, default=5.0,
                    help="seconds an idle kept-alive connection keeps its worker")
    ap.add_argument("--header-timeout", type=float, default=20.0,
                    help="seconds for the first request head on a new connection")
    ap.add_argument("--max-keepalive-requests", type=int, default=0,
                    help="close a connection after this many requests (0: never; "
                         "Apache's MaxKeepAliveRequests)")
    ap.add_argument("--status-socket", required=True, help="Unix socket for the counters")
    ap.add_argument("--sample-interval", type=float, default=0.02,
                    help="seconds between accept-queue samples")
    args = ap.parse_args(argv)

    stats = Stats()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(args.backlog)
    threads = [threading.Thread(target=worker, args=(lsock, args, stats), daemon=True)
               for _ in range(args.slots)]
    threads.append(threading.Thread(target=sampler, args=(lsock, stats, args.sample_interval),
                                    daemon=True))
    threads.append(threading.Thread(target=status_server, args=(args.status_socket, stats),
                                    daemon=True))
    for t in threads:
        t.start()
    print("slot-origin: 127.0.0.1:%d, %d workers, %g ms per request, backlog %d, "
          "keep-alive timeout %g s, pid %d" % (args.port, args.slots, args.delay_ms,
                                              args.backlog, args.keepalive_timeout, os.getpid()),
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
