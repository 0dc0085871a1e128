"""The gRPC peers of tests/grpc.rs, on grpcio (scripts/install-grpcio).

`server PORT [CERT KEY]`: a gRPC server (TLS with CERT and KEY) with the
service `test.Echo`, whose messages are raw bytes (no protobuf):
  Unary         answers b"echo:" + the request, the request's metadata
                (x-in) and the connection's peer address (x-peer) in
                initial metadata, and trailing metadata x-trailer: done;
  ServerStream  the request is a count N: N messages "msg-I";
  ClientStream  one message: the requests joined with "+";
  Bidi          each request upper-cased;
  Fail          aborts with NOT_FOUND, "no such thing" (trailers only).
It prints "ready" once listening.

`client TARGET METHOD [ARG...] [--tls CA NAME]`: one call (or PingPong:
Bidi, each message sent after the previous one's answer), printed as JSON
(code, details, responses, initial and trailing metadata).
"""
import json
import sys
from concurrent import futures

import grpc


def unary(req, ctx):
    md = dict(ctx.invocation_metadata())
    ctx.send_initial_metadata((("x-seen-in", md.get("x-in", "-")), ("x-peer", ctx.peer())))
    ctx.set_trailing_metadata((("x-trailer", "done"),))
    return b"echo:" + req


def server_stream(req, ctx):
    for i in range(int(req.decode())):
        yield ("msg-%d" % i).encode()


def client_stream(it, ctx):
    return b"+".join(it)


def bidi(it, ctx):
    for m in it:
        yield m.upper()


def fail(req, ctx):
    ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def serve(port, cert=None, key=None):
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    }
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    addr = "127.0.0.1:%d" % port
    if cert:
        creds = grpc.ssl_server_credentials(((open(key, "rb").read(), open(cert, "rb").read()),))
        s.add_secure_port(addr, creds)
    else:
        s.add_insecure_port(addr)
    s.start()
    print("ready", flush=True)
    s.wait_for_termination()


def call(target, method, args, ca=None, name=None):
    if ca:
        creds = grpc.ssl_channel_credentials(root_certificates=open(ca, "rb").read())
        ch = grpc.secure_channel(target, creds, options=(("grpc.ssl_target_name_override", name),))
    else:
        ch = grpc.insecure_channel(target)
    path = "/test.Echo/" + method
    md = (("x-in", "hello"),)
    out = {"responses": [], "initial": {}, "trailing": {}}
    try:
        if method in ("Unary", "Fail"):
            resp, c = ch.unary_unary(path).with_call(args[0].encode(), metadata=md, timeout=10)
            out["responses"] = [resp.decode()]
        elif method == "ServerStream":
            c = ch.unary_stream(path)(args[0].encode(), metadata=md, timeout=10)
            out["responses"] = [m.decode() for m in c]
        elif method == "ClientStream":
            resp, c = ch.stream_unary(path).with_call(iter([a.encode() for a in args]), metadata=md, timeout=10)
            out["responses"] = [resp.decode()]
        elif method == "PingPong":
            # Bidi, each message sent only once the answer to the one
            # before arrived: needs the request streamed, not buffered.
            import queue
            answered = queue.Queue()

            def gen():
                for a in args:
                    yield a.encode()
                    answered.get(timeout=5)

            c = ch.stream_stream("/test.Echo/Bidi")(gen(), metadata=md, timeout=10)
            for m in c:
                out["responses"].append(m.decode())
                answered.put(1)
        elif method == "Bidi":
            c = ch.stream_stream(path)(iter([a.encode() for a in args]), metadata=md, timeout=10)
            out["responses"] = [m.decode() for m in c]
        out["code"] = c.code().name
        out["details"] = c.details()
        out["initial"] = dict(c.initial_metadata() or ())
        out["trailing"] = dict(c.trailing_metadata() or ())
    except grpc.RpcError as e:
        out["code"] = e.code().name
        out["details"] = e.details()
        out["trailing"] = dict(e.trailing_metadata() or ())
    print(json.dumps(out), flush=True)


def main():
    a = sys.argv[1:]
    if a[0] == "server":
        serve(int(a[1]), *a[2:4])
    else:
        tls = None
        if "--tls" in a:
            i = a.index("--tls")
            tls = a[i + 1:i + 3]
            a = a[:i]
        call(a[1], a[2], a[3:], *(tls or ()))


if __name__ == "__main__":
    main()
