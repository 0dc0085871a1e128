#!/usr/bin/env python3
"""An HTTP/3 client on aioquic for sluice's tests (tests/h3*.rs).

usage: client.py HOST PORT [--sni NAME] [--insecure] [--ca FILE]
                 [--request METHOD PATH [--header NAME:VALUE]... [--body-file F]]...
                 [--out DIR] [--rebind-after BYTES] [--on-progress FILE] [--timeout S]

Each --request starts a new request on the same connection (all are sent
at once, concurrently). For each one a JSON line is printed:
  {"status": 200, "headers": [[name, value], ...], "length": N,
   "sha256": "...", "body": "<first 1 KB as text>", "error": null}
plus a last line {"connection": {...}} with what the connection saw
(GOAWAY, close reason, ALPN, the number of rebinds).

--rebind-after N: once N body bytes arrived in total, the client moves to a
new local UDP port (a NAT rebinding: the server sees a new address).
--on-progress FILE: when a quarter of the first response's body arrived,
the client writes FILE (the test then reloads the server) and goes on.
--reset-body-after S: each request sends its headers and the start of its
body (--body-file), then resets its stream S seconds later.
--no-fin: each request sends its headers and body (--body-file) and leaves
its stream open; the response line's "stop_sending" is the code of a
STOP_SENDING the server sent for it, the connection line's "cancelled" the
stream ids the server's QPACK decoder stream cancelled (and "acked", the
stream ids it acknowledged; "inserts_acked", the inserts it counted;
"encoder_bytes", what the client's QPACK encoder stream sent).
--empty-data-between: the body goes as two DATA frames with an empty one
between them (a body's end only at the stream's end).
--after-settings: the requests wait for the server's SETTINGS (the
connection line's "settings" shows them), so that the client's QPACK
encoder may use the dynamic table the server offers.
--token HEX: the Initial carries this address validation token (a
corrupted one tests the server's INVALID_TOKEN close).
--ticket-out FILE: the last TLS session ticket the server sent is saved
(pickled) to FILE. --ticket-in FILE: the connection resumes that session.
--early: the requests go at once, before the handshake completes: in 0-RTT
packets when the ticket allows early data (--force-early: even when it does
not, to see the server refuse it). --late METHOD PATH: a request sent once
the handshake completed (after the others). The connection line then says
"zero_rtt" (the client had 0-RTT keys when it sent), "early_data_accepted"
and "session_resumed" (from the handshake), and "ticket_early" (the
max_early_data_size of the ticket saved, or null).
--mute: once the requests are sent, the client sends nothing more (with
--early: its handshake never completes) but goes on reading.
--stall S: once the requests are sent, the client blocks S seconds without
reading or acknowledging (as nginx's test client does between its reads);
the connection line's dups_1rtt counts the 1-RTT CRYPTO and STREAM frames
that repeated data already received (copies the server resent).
"""
import argparse
import asyncio
import hashlib
import json
import os
import pickle
import socket
import ssl
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic import tls
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)


def varint(buf, i):
    """A QUIC variable-length integer at buf[i:]: (value, next index), or
    None when buf ends first."""
    if i >= len(buf):
        return None
    n = 1 << (buf[i] >> 6)
    if i + n > len(buf):
        return None
    v = buf[i] & 0x3F
    for b in buf[i + 1 : i + n]:
        v = (v << 8) | b
    return v, i + n


class Result:
    def __init__(self):
        self.status = None
        self.headers = []
        self.trailers = []
        self.length = 0
        self.sha = hashlib.sha256()
        self.head = b""
        self.error = None
        self.done = asyncio.get_event_loop().create_future()
        self.expected = None
        self.stop_sending = None

    def finish(self, error=None):
        if error and not self.error:
            self.error = error
        if not self.done.done():
            self.done.set_result(True)

    def json(self):
        return {
            "status": self.status,
            "headers": self.headers,
            "trailers": self.trailers,
            "length": self.length,
            "sha256": self.sha.hexdigest(),
            "body": self.head.decode("latin-1"),
            "error": self.error,
            "stop_sending": self.stop_sending,
        }


class Client(QuicConnectionProtocol):
    # The last one made: what a connection that failed to start saw.
    last = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Client.last = self
        self.cancelled = []
        self.acked = []
        self.increments = 0
        self.http = H3Connection(self._quic)
        self.results = {}
        self.goaway = False
        self.terminated = None
        self.received = 0
        self.on_bytes = []
        # The server's unidirectional streams, to see its GOAWAY on the
        # control stream (aioquic reads and drops it without an event).
        self.uni = {}
        self.dups_1rtt = 0
        self.handshake = None
        self.spy_dups()

    def spy_dups(self):
        """Counts the 1-RTT CRYPTO and STREAM frames whose data overlaps data
        already received on the same stream: aioquic drops such copies,
        nginx's test client dies on a copy of CRYPTO data ("bad inner")."""
        handlers = self._quic._QuicConnection__frame_handlers
        seen = {}

        def spy(frame_type, buf, epoch):
            pos = buf.tell()
            if frame_type == 0x06:
                key, off = "crypto", buf.pull_uint_var()
                n = buf.pull_uint_var()
            else:
                key = buf.pull_uint_var()
                off = buf.pull_uint_var() if frame_type & 4 else 0
                n = buf.pull_uint_var() if frame_type & 2 else buf.capacity - buf.tell()
            buf.seek(pos)
            if epoch == tls.Epoch.ONE_RTT and n:
                ranges = seen.setdefault(key, [])
                if any(s < off + n and off < e for s, e in ranges):
                    self.dups_1rtt += 1
                ranges.append((off, off + n))

        def wrap(frame_type):
            orig, epochs = handlers[frame_type]

            def handler(context, ft, buf):
                spy(ft, buf, context.epoch)
                return orig(context, ft, buf)

            handlers[frame_type] = (handler, epochs)

        for t in [0x06] + list(range(0x08, 0x10)):
            wrap(t)

    def watch_decoder(self, buf, i):
        """The server's QPACK decoder stream: the stream ids of its Stream
        Cancellations (01 and a 6-bit prefixed integer) and Section
        Acknowledgments (1 and a 7-bit one), and the sum of its Insert Count
        Increments (00 and a 6-bit one)."""
        cancelled, acked, increments = [], [], 0
        while i < len(buf):
            b = buf[i]
            bits = 7 if b & 0x80 else 6
            v, i = b & ((1 << bits) - 1), i + 1
            if v == (1 << bits) - 1:
                shift = 0
                while True:
                    if i >= len(buf):
                        return
                    c, i = buf[i], i + 1
                    v += (c & 0x7F) << shift
                    shift += 7
                    if not c & 0x80:
                        break
            if b & 0x80:
                acked.append(v)
            elif b & 0xC0 == 0x40:
                cancelled.append(v)
            else:
                increments += v
        self.cancelled, self.acked, self.increments = cancelled, acked, increments

    def watch_control(self, event):
        buf = self.uni.setdefault(event.stream_id, bytearray())
        buf += event.data
        first = varint(buf, 0)
        if first is not None and first[0] == 3:  # 0x03: QPACK decoder stream
            self.watch_decoder(buf, first[1])
            return
        if first is None or first[0] != 0:  # 0x00: the control stream
            return
        i = first[1]
        while True:
            t = varint(buf, i)
            if t is None:
                return
            n = varint(buf, t[1])
            if n is None or n[1] + n[0] > len(buf):
                return
            if t[0] == 0x07:
                self.goaway = True
            i = n[1] + n[0]

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.handshake = {
                "early_data_accepted": event.early_data_accepted,
                "session_resumed": event.session_resumed,
            }
        if isinstance(event, StreamDataReceived) and event.stream_id % 4 == 3:
            self.watch_control(event)
        if isinstance(event, ConnectionTerminated):
            self.terminated = {"error_code": event.error_code, "reason": event.reason_phrase}
            for r in self.results.values():
                r.finish("connection terminated: %s" % event.reason_phrase)
            return
        if isinstance(event, StopSendingReceived) and event.stream_id in self.results:
            self.results[event.stream_id].stop_sending = event.error_code
            return
        if isinstance(event, StreamReset) and event.stream_id in self.results:
            self.results[event.stream_id].finish("stream reset: %d" % event.error_code)
            return
        for e in self.http.handle_event(event):
            if not isinstance(e, (HeadersReceived, DataReceived)):
                continue
            r = self.results.get(e.stream_id)
            if r is None:
                continue
            if isinstance(e, HeadersReceived):
                if r.status is None:
                    for k, v in e.headers:
                        if k == b":status":
                            r.status = int(v)
                        else:
                            r.headers.append([k.decode("latin-1"), v.decode("latin-1")])
                else:
                    # A HEADERS frame after the body: the trailers.
                    for k, v in e.headers:
                        r.trailers.append([k.decode("latin-1"), v.decode("latin-1")])
            else:
                r.length += len(e.data)
                r.sha.update(e.data)
                if len(r.head) < 1024:
                    r.head += e.data[: 1024 - len(r.head)]
                self.received += len(e.data)
                for f in list(self.on_bytes):
                    f(self)
            if e.stream_ended:
                r.finish()

    def request(self, method, path, authority, headers, body, reset_after=None, no_fin=False, empty_between=False):
        sid = self._quic.get_next_available_stream_id()
        hdrs = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
        ] + [(k.lower().encode(), v.encode()) for k, v in headers]
        r = Result()
        self.results[sid] = r
        if reset_after is not None:
            # The body's start, then RESET_STREAM (H3_REQUEST_CANCELLED).
            self.http.send_headers(sid, hdrs, end_stream=False)
            self.http.send_data(sid, body or b"", end_stream=False)

            def reset():
                self._quic.reset_stream(sid, 0x10C)
                self.transmit()
                r.finish("reset by the client")

            asyncio.get_event_loop().call_later(reset_after, reset)
            self.transmit()
            return r
        self.http.send_headers(sid, hdrs, end_stream=body is None and not no_fin)
        if body is not None and empty_between:
            half = len(body) // 2
            self.http.send_data(sid, body[:half], end_stream=False)
            self.http.send_data(sid, b"", end_stream=False)
            body = body[half:]
        if body is not None:
            self.http.send_data(sid, body, end_stream=not no_fin)
        self.transmit()
        return r


def rebind(proto):
    """Moves the client to a new local UDP port (a NAT rebinding)."""
    transport = proto._transport
    old = transport._sock
    fam = old.family
    new = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        # aioquic's socket is dual-stack and talks to ::ffff:127.0.0.1.
        new.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        new.bind(("::", 0, 0, 0))
    else:
        new.bind(("127.0.0.1", 0))
    new.setblocking(False)
    loop = asyncio.get_event_loop()
    # asyncio's datagram transport keeps its socket in _sock; the loop's
    # private reader calls skip the check that a transport owns the fd.
    loop._remove_reader(old.fileno())
    transport._sock = new
    transport._sock_fd = new.fileno()
    loop._add_reader(new.fileno(), transport._read_ready)
    old.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--sni")
    ap.add_argument("--authority")
    ap.add_argument("--insecure", action="store_true")
    ap.add_argument("--ca")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--rebind-after", type=int)
    ap.add_argument("--on-progress")
    ap.add_argument("--stall", type=float)
    ap.add_argument("--reset-body-after", type=float)
    ap.add_argument("--ticket-out")
    ap.add_argument("--ticket-in")
    ap.add_argument("--early", action="store_true")
    ap.add_argument("--force-early", action="store_true")
    ap.add_argument("--mute", action="store_true")
    ap.add_argument("--late", nargs=2, action="append", metavar=("METHOD", "PATH"), default=[])
    ap.add_argument("--request", nargs=2, action="append", metavar=("METHOD", "PATH"), default=[])
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--body-file")
    ap.add_argument("--no-fin", action="store_true")
    ap.add_argument("--empty-data-between", action="store_true")
    ap.add_argument("--token")
    ap.add_argument("--after-settings", action="store_true")
    a = ap.parse_args()

    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, max_datagram_frame_size=None)
    cfg.server_name = a.sni or "localhost"
    if a.insecure:
        cfg.verify_mode = ssl.CERT_NONE
    if a.ca:
        cfg.load_verify_locations(a.ca)
    if a.token:
        cfg.token = bytes.fromhex(a.token)
    if a.ticket_in:
        with open(a.ticket_in, "rb") as f:
            cfg.session_ticket = pickle.load(f)
        if a.force_early:
            cfg.session_ticket.max_early_data_size = 0xFFFFFFFF
    tickets = []

    def on_ticket(ticket):
        tickets.append(ticket)
        if a.ticket_out:
            with open(a.ticket_out, "wb") as f:
                pickle.dump(ticket, f)
    body = open(a.body_file, "rb").read() if a.body_file else None
    headers = [tuple(h.split(":", 1)) for h in a.header]
    authority = a.authority or "%s:%d" % (cfg.server_name, a.port)
    out = {"alpn": None, "rebinds": 0}
    try:
        # A session ticket handler makes aioquic offer resumption, so the
        # server sends its tickets (1-RTT CRYPTO) as to nginx's test client.
        async with connect(
            a.host,
            a.port,
            configuration=cfg,
            create_protocol=Client,
            session_ticket_handler=on_ticket,
            wait_connected=not a.early,
        ) as proto:
            out["alpn"] = proto._quic.tls.alpn_negotiated
            out["zero_rtt"] = proto._quic._cryptos[tls.Epoch.ZERO_RTT].send.is_valid()
            if a.rebind_after is not None:
                def maybe_rebind(p, state={"done": False}):
                    if not state["done"] and p.received >= a.rebind_after:
                        state["done"] = True
                        rebind(p)
                        out["rebinds"] += 1
                        p.transmit()
                proto.on_bytes.append(maybe_rebind)
            if a.after_settings:
                # Requests go once the server's SETTINGS arrived, so that
                # aioquic's QPACK encoder knows the table it may use.
                for _ in range(200):
                    if proto.http.received_settings is not None:
                        break
                    await asyncio.sleep(0.01)
                out["settings"] = {str(k): v for k, v in (proto.http.received_settings or {}).items()}
            results = []
            for method, path in a.request or [("GET", "/")]:
                results.append(proto.request(
                    method, path, authority, headers, body, a.reset_body_after, a.no_fin, a.empty_data_between
                ))
            if a.mute:
                proto._transport.sendto = lambda *args, **kwargs: None
            if a.stall:
                # Blocks the event loop: datagrams wait in the socket.
                time.sleep(a.stall)
            if a.on_progress:
                def progress(p, state={"done": False}):
                    r = results[0]
                    want = None
                    for k, v in r.headers:
                        if k == "content-length":
                            want = int(v)
                    if not state["done"] and want and r.length * 4 >= want:
                        state["done"] = True
                        open(a.on_progress, "w").write("x")
                proto.on_bytes.append(progress)
            try:
                await asyncio.wait_for(asyncio.gather(*[r.done for r in results]), a.timeout)
                if a.late:
                    # (aioquic's wait_connected never returns when the
                    # handshake completed while nothing waited for it.)
                    for _ in range(int(a.timeout * 100)):
                        if proto.handshake is not None:
                            break
                        await asyncio.sleep(0.01)
                    late = [
                        proto.request(method, path, authority, headers, body) for method, path in a.late
                    ]
                    results += late
                    await asyncio.wait_for(asyncio.gather(*[r.done for r in late]), a.timeout)
            except asyncio.TimeoutError:
                for r in results:
                    r.finish("timeout")
            # Give a GOAWAY, CONNECTION_CLOSE or STOP_SENDING that
            # follows a moment.
            await asyncio.sleep(0.05)
            for r in results:
                print(json.dumps(r.json()))
            out["cancelled"] = proto.cancelled
            out["acked"] = proto.acked
            out["inserts_acked"] = proto.increments
            # What aioquic's QPACK encoder put in the dynamic table (it
            # uses one when the server's SETTINGS offer a capacity).
            out["encoder_bytes"] = proto.http._encoder_bytes_sent
            out["goaway"] = proto.goaway
            out["terminated"] = proto.terminated
            out["dups_1rtt"] = proto.dups_1rtt
            out["alpn"] = proto._quic.tls.alpn_negotiated
            out.update(proto.handshake or {})
            out["ticket_early"] = tickets[-1].max_early_data_size if tickets else None
    except Exception as e:  # handshake failures and the like
        out["error"] = "%s: %s" % (type(e).__name__, e)
        if Client.last is not None and Client.last.terminated:
            out["terminated"] = Client.last.terminated
    print(json.dumps({"connection": out}))


if __name__ == "__main__":
    asyncio.run(main())
