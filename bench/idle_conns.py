#!/usr/bin/env python3
"""Open many idle HTTP/1.1 keep-alive connections to a server and hold them.

Used by bench/run for the "mem" workload (resident memory per idle
connection). Standard library only.

Each connection: non-blocking connect, one `GET PATH HTTP/1.1` request
(keep-alive is the HTTP/1.1 default), read the complete response
(Content-Length or chunked body), then leave the connection idle.

When every connection has been handled, one line is printed on stdout:

    READY {"ok": N, "failed": M, "errors": {...}, "seconds": S}

The connections are then held until stdin reaches EOF (the harness closes
it) or --hold seconds pass, whichever comes first. Then one more line is
printed:

    DONE {"held": N, "closed_by_server": K, "held_seconds": S}

and all sockets are closed. `closed_by_server` counts connections the
server closed (or sent data on) while they should have been idle.
"""

import argparse
import errno
import json
import os
import resource
import selectors
import socket
import sys
import time


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return
    try:
        new_hard = hard if hard == resource.RLIM_INFINITY or hard >= want else want
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, new_hard))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Conn:
    __slots__ = ("sock", "state", "out", "buf", "need", "chunked", "status")

    def __init__(self, sock, request):
        self.sock = sock
        self.state = "connecting"
        self.out = request
        self.buf = b""
        self.need = None      # total bytes (headers + body) once known
        self.chunked = False
        self.status = None


def response_complete(c):
    """Return True when c.buf holds one complete response. Raises ValueError
    on a malformed response."""
    if c.need is None:
        end = c.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(c.buf) > 65536:
                raise ValueError("header too large")
            return False
        head = c.buf[:end].decode("latin-1").split("\r\n")
        parts = head[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError("bad status line %r" % head[0][:80])
        c.status = int(parts[1])
        length = None
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            value = value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                c.chunked = True
            elif name == "connection" and value.lower() == "close":
                raise ValueError("server sent Connection: close")
        if c.chunked:
            c.need = -(end + 4)  # negative: body starts here, chunked
        elif length is None:
            raise ValueError("no Content-Length")
        else:
            c.need = end + 4 + length
    if c.need >= 0:
        if len(c.buf) > c.need:
            raise ValueError("extra bytes after response")
        return len(c.buf) == c.need
    # chunked: look for the terminating zero-size chunk
    return c.buf.endswith(b"\r\n0\r\n\r\n") or c.buf[-c.need:].startswith(b"0\r\n\r\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", "-n", type=int, default=10000)
    ap.add_argument("--path", default="/empty.gif")
    ap.add_argument("--concurrency", type=int, default=256,
                    help="connections being set up at once (default 256)")
    ap.add_argument("--hold", type=float, default=300.0,
                    help="maximum seconds to hold the idle connections")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="maximum seconds to set all connections up")
    ap.add_argument("--expect-status", type=int, default=200)
    args = ap.parse_args()

    raise_nofile(args.count + 256)
    request = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: sluice-bench-idle\r\n"
               "Accept: */*\r\n\r\n" % (args.path, args.host, args.port)).encode()

    sel = selectors.DefaultSelector()
    idle = []
    errors = {}
    failed = 0
    started = 0
    active = 0
    t0 = time.monotonic()
    deadline = t0 + args.timeout

    def fail(c, why):
        nonlocal failed, active
        failed += 1
        active -= 1
        errors[why] = errors.get(why, 0) + 1
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    while (started < args.count or active > 0) and time.monotonic() < deadline:
        while started < args.count and active < args.concurrency:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            started += 1
            rc = s.connect_ex((args.host, args.port))
            c = Conn(s, request)
            active += 1
            if rc not in (0, errno.EINPROGRESS):
                fail(c, "connect: " + errno.errorcode.get(rc, str(rc)))
                continue
            sel.register(s, selectors.EVENT_WRITE, c)
        for key, ev in sel.select(timeout=1.0):
            c = key.data
            if c.state == "connecting":
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    fail(c, "connect: " + errno.errorcode.get(err, str(err)))
                    continue
                c.state = "sending"
            if c.state == "sending":
                try:
                    n = c.sock.send(c.out)
                except BlockingIOError:
                    continue
                except OSError as e:
                    fail(c, "send: " + errno.errorcode.get(e.errno, str(e.errno)))
                    continue
                c.out = c.out[n:]
                if not c.out:
                    c.state = "reading"
                    sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            if c.state == "reading":
                try:
                    data = c.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as e:
                    fail(c, "recv: " + errno.errorcode.get(e.errno, str(e.errno)))
                    continue
                if not data:
                    fail(c, "closed before complete response")
                    continue
                c.buf += data
                try:
                    done = response_complete(c)
                except ValueError as e:
                    fail(c, str(e))
                    continue
                if done:
                    if c.status != args.expect_status:
                        fail(c, "status %d" % c.status)
                        continue
                    sel.unregister(c.sock)
                    c.state = "idle"
                    c.buf = b""
                    active -= 1
                    idle.append(c)
    if active > 0:
        errors["setup timeout"] = active
        failed += active
    setup_seconds = time.monotonic() - t0
    sel.close()

    print("READY " + json.dumps({"ok": len(idle), "failed": failed, "errors": errors,
                                 "seconds": round(setup_seconds, 3)}), flush=True)

    # Hold: watch stdin for EOF and every idle socket for unexpected events.
    sel = selectors.DefaultSelector()
    stdin_open = True
    try:
        sel.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
    except (ValueError, OSError, PermissionError):
        stdin_open = False
    for c in idle:
        sel.register(c.sock, selectors.EVENT_READ, c)
    closed_by_server = 0
    hold_start = time.monotonic()
    hold_end = hold_start + args.hold
    while time.monotonic() < hold_end:
        events = sel.select(timeout=min(1.0, max(0.0, hold_end - time.monotonic())))
        stop = False
        for key, ev in events:
            if key.data is None:
                chunk = os.read(key.fd, 4096)
                if not chunk:
                    stop = True
                continue
            closed_by_server += 1
            sel.unregister(key.fileobj)
        if stop:
            break
    held = time.monotonic() - hold_start
    sel.close()
    print("DONE " + json.dumps({"held": len(idle) - closed_by_server,
                                "closed_by_server": closed_by_server,
                                "held_seconds": round(held, 3)}), flush=True)
    for c in idle:
        c.sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
