#!/usr/bin/env python3
"""Cold-miss burst for bench/run's workload c5: N clients ask for one URL at
the same moment.

Opens --conns connections to 127.0.0.1:PORT and waits until all are
established; then sends one `GET PATH HTTP/1.1` on each, as fast as one
thread can (a few ms for 1,000), and reads every response (Content-Length
bodies). Latency is per request, from its own send to the last byte of its
response. Prints one JSON object: responses by status, by X-Cache header,
errors, and latency p50/p99/max in ms. Loopback only; bounded by --timeout.
Standard library only.
"""

import argparse
import json
import resource
import selectors
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for the whole burst")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < a.conns + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.conns + 1024), hard))
    deadline = time.monotonic() + a.timeout
    sel = selectors.DefaultSelector()
    socks = []
    errors = {"connect": 0, "read": 0, "closed": 0, "timeout": 0, "parse": 0}
    pending = 0
    for i in range(a.conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect_ex(("127.0.0.1", a.port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, i)
        pending += 1
    connected = [False] * a.conns
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            i = key.data
            err = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            sel.unregister(key.fileobj)
            pending -= 1
            if err:
                errors["connect"] += 1
            else:
                connected[i] = True
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-burst\r\n"
           "Accept: */*\r\n\r\n" % (a.path, a.port)).encode()
    sent = {}
    bufs = {}
    t_first = time.monotonic()
    for i, s in enumerate(socks):
        if not connected[i]:
            continue
        try:
            s.send(req)
        except OSError:
            errors["connect"] += 1
            continue
        sent[i] = time.monotonic()
        bufs[i] = b""
        sel.register(s, selectors.EVENT_READ, i)
    send_spread_ms = (time.monotonic() - t_first) * 1e3
    lat = []
    status = {}
    xcache = {}
    left = len(sent)
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            i = key.data
            s = key.fileobj
            done = False
            try:
                d = s.recv(65536)
            except OSError:
                errors["read"] += 1
                done = True
                d = None
            if d == b"":
                errors["closed"] += 1
                done = True
            elif d:
                bufs[i] += d
                b = bufs[i]
                if b"\r\n\r\n" in b:
                    head, _, body = b.partition(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    hdr = {}
                    for l in lines[1:]:
                        k, _, v = l.partition(":")
                        hdr[k.strip().lower()] = v.strip()
                    try:
                        code = int(lines[0].split()[1])
                        n = int(hdr["content-length"])
                    except (IndexError, KeyError, ValueError):
                        errors["parse"] += 1
                        done = True
                    else:
                        if len(body) >= n:
                            lat.append((time.monotonic() - sent[i]) * 1e3)
                            status[code] = status.get(code, 0) + 1
                            xc = hdr.get("x-cache", "-")
                            xcache[xc] = xcache.get(xc, 0) + 1
                            done = True
            if done:
                sel.unregister(s)
                left -= 1
    errors["timeout"] = left
    for s in socks:
        s.close()
    lat.sort()

    def pct(p):
        if not lat:
            return None
        return lat[min(len(lat) - 1, int(round(p / 100.0 * len(lat) + 0.5)) - 1)]

    print(json.dumps({"conns": a.conns, "connected": sum(connected), "sent": len(sent),
                      "responses": len(lat), "status": status, "x_cache": xcache,
                      "errors": errors, "send_spread_ms": round(send_spread_ms, 2),
                      "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": lat[-1] if lat else None,
                      "min_ms": lat[0] if lat else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
