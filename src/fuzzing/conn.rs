//! The HTTP/1 connection loop (`connection/h1/conn::serve`: keep-alive,
//! pipelining, request bodies discarded with their framing kept, refused
//! heads, the lingering close) on arbitrary client bytes.
//!
//! The seam: the loop reads and writes through `connection::sock::Sock`,
//! an enum over the socket kinds (a fresh TCP socket, a registered one,
//! TLS), not a generic `AsyncRead + AsyncWrite`. So the target adds one
//! more kind, `Sock::Mem` (`connection/mem`), an in-memory client, rather
//! than cutting the loop apart at some buffer-processing function (there
//! is none: reading, answering and writing are interleaved in `serve_one`)
//! or making the connection layer generic. Everything above the socket is
//! the production code path, with a static configuration (`return`s, an
//! error page, limits small enough to reach 413/414/494) and no file
//! system, upstream or log.
//!
//! The future is polled by hand with a no-op waker inside a tokio runtime
//! context (its timers need one), at most [`POLLS`] times: the in-memory
//! client never makes it wait (input is always there, or end of file), so
//! a connection still pending is one that waits for a timer with nothing
//! left to wait for, a hang, and fails the target instead of the run
//! stalling for `client_header_timeout`.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Waker};

use super::{Picks, show};
use crate::config::model::Config;
use crate::config::{LoadOptions, Source};
use crate::http::connection::mem::MemPeer;
use crate::http::connection::sock::Sock;
use crate::http::handler::ctx::ConnInfo;
use crate::worker::{ConnGuard, WorkerCtx};

/// Polls allowed per connection: far more than any input needs (each poll
/// that returns Pending is a yield; the in-memory client never blocks).
const POLLS: usize = 10_000;

/// Three addresses, three rule sets. `:1` as shipped (nginx's limits),
/// with server names and locations for the usual answers; `:2` with limits
/// small enough for fuzzed inputs to reach (414, 494, 413 on a tiny body
/// limit, a few requests per connection) and the lenient header options;
/// `:3` with HTTP/2 buffers raised, so frames past 16 KiB are allowed and
/// read piecewise (h2_conn).
/// `X-Method` marks each answer with the request's method, so the check
/// knows which have no body (HEAD).
const CONF: &str = r#"
daemon off;
error_log stderr emerg;
events { worker_connections 64; }
http {
    access_log off;
    add_header X-Method $request_method always;
    server {
        listen 127.0.0.1:1;
        server_name a.example;
        location / { return 200 "ok\n"; }
        location /r { return 301 /x; }
        location /e { return 404; }
        location /v { return 200 "$request_method $content_length\n"; }
        location /close { keepalive_timeout 0; return 200 "bye\n"; }
        location /big { return 200 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; }
    }
    server {
        listen 127.0.0.1:1;
        server_name b.example *.b.example;
        client_max_body_size 16;
        return 202 "b\n";
    }
    server {
        listen 127.0.0.1:2;
        client_header_buffer_size 64;
        large_client_header_buffers 2 96;
        client_max_body_size 8;
        keepalive_requests 3;
        underscores_in_headers on;
        ignore_invalid_headers off;
        merge_slashes off;
        chunked_transfer_encoding off;
        location / { return 200 "two\n"; }
        location /e { return 500; }
    }
    server {
        listen 127.0.0.1:3;
        http2_body_preread_size 128k;
        client_max_body_size 1m;
        location / { return 200 "three\n"; }
    }
}
"#;

struct World {
    rt: tokio::runtime::Runtime,
    w: Rc<WorkerCtx>,
}

thread_local! {
    static WORLD: Option<World> = world();
}

/// One worker, made once per thread: its runtime (for timers), and the
/// configuration above loaded as `-t` would.
fn world() -> Option<World> {
    let opts = LoadOptions {
        prefix: super::config::prefix().to_path_buf(),
        source: Source::Text { name: super::config::prefix().join("conf/h1_conn.conf"), text: CONF.into() },
        globals: None,
        error_log: None,
    };
    let cfg: Config = match crate::config::load(&opts) {
        Ok(c) => c,
        Err(e) => panic!("the h1_conn configuration does not load: {e}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().ok()?;
    let logs = crate::log::access::AccessLogs::new(Vec::new(), &cfg.access_log_files, &cfg.access_log_syslog);
    let w = Rc::new(WorkerCtx {
        cfg: Arc::new(cfg),
        index: 0,
        logs: RefCell::new(logs),
        serial: Default::default(),
        active: Default::default(),
        max_conns: 64,
        slot: Default::default(),
        draining: Default::default(),
        aborting: Default::default(),
        idle: Default::default(),
        parking: crate::worker::park::Parking::new(),
        drained: Default::default(),
        pool: RefCell::new(Vec::new()),
        proxy: RefCell::new(Default::default()),
        tls_clients: RefCell::new(Default::default()),
        dns: RefCell::new(Default::default()),
        stats: crate::worker::stats::register(),
        metrics: crate::metrics::register(),
        handoff: std::cell::RefCell::new(Vec::new()),
    });
    Some(World { rt, w })
}

/// Runs `f` with this thread's runtime and worker (None without them).
pub(super) fn with<R>(f: impl FnOnce(&tokio::runtime::Runtime, &Rc<WorkerCtx>) -> R) -> Option<R> {
    WORLD.with(|world| {
        let World { rt, w } = world.as_ref()?;
        let r = f(rt, w);
        w.pool.borrow_mut().clear();
        Some(r)
    })
}

/// The HTTP/1 connection target. The first byte picks the address (`:1`
/// or `:2`) and how the client's bytes are cut into sends (all at once,
/// byte by byte, or at input-chosen points); the rest is what the client
/// sends before closing its side. Properties: no panic; the connection
/// ends (no hang, see the module comment); every answer is a valid
/// HTTP/1.1 response head (read back with httparse) with a whole body as
/// its framing says, unless it is an HTTP/0.9 answer (a bare body, last);
/// a refused request (400 and the other head errors) closes the
/// connection, and nothing at all is written after an answer that says
/// `Connection: close`, nor after the server shut its side down.
pub fn h1_conn(data: &[u8]) {
    let Some((&flags, input)) = data.split_first() else { return };
    if let Some(out) = serve(flags, input, &mut Picks::new(data)) {
        check_output(&out, input);
    }
}

/// Serves `input` on one in-memory connection; what was written (None
/// without a runtime).
fn serve(flags: u8, input: &[u8], picks: &mut Picks) -> Option<Vec<u8>> {
    let sends = match (flags >> 1) & 3 {
        0 => Vec::new(),
        1 if input.len() <= 4096 => (1..input.len()).collect(),
        _ => picks.cuts(input.len(), 64),
    };
    WORLD.with(|world| {
        let World { rt, w } = world.as_ref()?;
        let group = usize::from(flags & 1).min(w.cfg.http.listens.len() - 1);
        let peer = MemPeer::new(input.to_vec(), sends);
        let info = ConnInfo::new(SocketAddr::from(([192, 0, 2, 1], 40000)), w.cfg.http.listens[group].addr, 1);
        let _enter = rt.enter();
        crate::clock::mono_stale();
        let conn =
            crate::http::connection::h1::conn::serve(Sock::Mem(peer.clone()), info, group, ConnGuard::new(w.clone()));
        let mut conn = std::pin::pin!(conn);
        let mut cx = Context::from_waker(Waker::noop());
        let done = (0..POLLS).any(|_| conn.as_mut().poll(&mut cx).is_ready());
        // Pooled read buffers of earlier inputs would change how much one
        // read takes: every input starts from an empty pool.
        w.pool.borrow_mut().clear();
        let p = peer.borrow();
        assert!(done, "the connection still waits after {POLLS} polls, input read to {}: {}", p.at_eof(), show(input));
        assert_eq!(p.late_writes, 0, "{} bytes written after the shutdown: {}", p.late_writes, show(input));
        Some(p.output.clone())
    })
}

/// The answers, one after the other: see [`h1_conn`].
fn check_output(out: &[u8], input: &[u8]) {
    let mut at = 0;
    while at < out.len() {
        let rest = &out[at..];
        if !rest.starts_with(b"HTTP/") {
            // HTTP/0.9: the body alone, and the connection closes.
            assert!(
                memchr::memmem::find(rest, b"HTTP/1.1 ").is_none(),
                "an answer after an HTTP/0.9 one, or garbage: {}\nfor {}",
                show(rest),
                show(input)
            );
            return;
        }
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut slots);
        let head_len = match r.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!("not a response head ({other:?}): {}\nfor {}", show(rest), show(input)),
        };
        assert_eq!(r.version, Some(1), "not HTTP/1.1: {}", show(rest));
        let code = r.code.unwrap_or(0);
        assert!((100..600).contains(&code), "status {code}: {}", show(rest));
        let values = |name: &str| -> Vec<&[u8]> {
            r.headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value).collect()
        };
        let lengths = values("content-length");
        let chunked = values("transfer-encoding").iter().any(|v| v.eq_ignore_ascii_case(b"chunked"));
        assert!(lengths.len() <= 1 && (lengths.is_empty() || !chunked), "framing of {}", show(&rest[..head_len]));
        let close = values("connection").iter().any(|v| v.eq_ignore_ascii_case(b"close"));
        let head_only = code < 200 || code == 204 || code == 304 || values("x-method") == [b"HEAD"];
        let body = &rest[head_len..];
        let body_len = if head_only {
            0
        } else if chunked {
            match chunked_len(body) {
                Some(n) => n,
                None => panic!("a chunked body cut short or malformed: {}\nfor {}", show(rest), show(input)),
            }
        } else if let Some(v) = lengths.first() {
            let n = std::str::from_utf8(v).ok().and_then(|t| t.parse::<usize>().ok());
            let Some(n) = n else { panic!("Content-Length {}", show(v)) };
            assert!(n <= body.len(), "a body cut short ({n} declared): {}\nfor {}", show(rest), show(input));
            n
        } else {
            assert!(close, "no length, not chunked, not closing: {}", show(rest));
            body.len()
        };
        if code == 400 || code == 413 || code == 414 || code == 494 || code == 501 || code == 505 {
            assert!(close, "a {code} that keeps the connection: {}\nfor {}", show(rest), show(input));
        }
        at += head_len + body_len;
        if close {
            assert_eq!(
                at,
                out.len(),
                "bytes after an answer that closes the connection: {}\nfor {}",
                show(&out[at..]),
                show(input)
            );
        }
    }
}

/// The length of a whole chunked body at the start of `b`, or None.
fn chunked_len(b: &[u8]) -> Option<usize> {
    let mut d = crate::http::connection::h1::chunked::Decoder::default();
    let used = d.feed(b, |_| {}).ok()?;
    d.is_done().then_some(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_requests_get_their_answers() {
        for flags in 0u8..8 {
            let mut v = vec![flags];
            v.extend_from_slice(
                b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\nHEAD /big HTTP/1.1\r\nHost: a.example\r\n\r\n\
                  POST /v HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n\r\nabc\
                  POST /v HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
                  GET /e HTTP/1.1\r\nHost: a.example\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            );
            h1_conn(&v);
            let out = serve(v[0], &v[1..], &mut Picks::new(&v)).expect("a runtime");
            let text = String::from_utf8_lossy(&out);
            let statuses: Vec<&str> = text.lines().filter(|l| l.starts_with("HTTP/1.1 ")).map(|l| &l[9..12]).collect();
            // `:2` closes after three (keepalive_requests).
            let group_one = ["200", "200", "200", "200", "404", "400"];
            let group_two = ["200", "200", "200"];
            assert_eq!(statuses, if flags & 1 == 0 { &group_one[..] } else { &group_two[..] }, "{text}");
        }
    }

    #[test]
    fn a_bad_request_ends_the_output() {
        h1_conn(b"\x00GET / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxxGET / HTTP/1.1\r\n\r\n");
        h1_conn(b"\x00GET / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    }
}
