//! `listen ... udp`: sessions of datagrams, as nginx's stream module keeps
//! them. One loop per listening socket reads datagrams and hands each to
//! the session of its client (a map by address; a new client starts a
//! session, which is one task for all of its datagrams: none per
//! datagram). A session runs the same phases as TCP (`set`,
//! `limit_conn`, access), then answers (`return`) or proxies through a
//! connected UDP socket to a peer the balancer picked, and ends as nginx's
//! does: once `proxy_requests` datagrams came and `proxy_responses` per
//! datagram went back, or after `proxy_timeout` of silence. The listening
//! socket is UDP's or a unix datagram one (`udp_socket`): the sessions are
//! the same, keyed by the sender's address or bound unix name.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

use super::conf::{Content, Pass, StreamConf};
use super::session::{Close, Session, Try, UpInfo};
use super::udp_socket::{Client, Listening};
use crate::config::family::Socket;
use crate::log::error::Level;
use crate::worker::{ConnGuard, WorkerCtx};

/// Datagrams a session holds before it forwards them (more are dropped,
/// as a full socket buffer would).
const QUEUE: usize = 64;

/// What the read loop and a session share.
struct Flow {
    queue: RefCell<VecDeque<Vec<u8>>>,
    ready: Notify,
    /// Datagrams the client sent in this session.
    requests: Cell<u64>,
    /// `proxy_upload_rate` once the session evaluated it, and when its
    /// allowance started counting.
    upload_rate: Cell<Option<(u64, Instant)>>,
    /// Bytes the session took from the client, its first datagram's too.
    uploaded: Cell<u64>,
}

type Flows = Rc<RefCell<HashMap<Client, Rc<Flow>>>>;

pub async fn run(conf: Arc<StreamConf>, index: usize, sock: Socket, w: Rc<WorkerCtx>, stop: Rc<Notify>) {
    let own = conf.routes[index].own.clone();
    let sock = match Listening::new(sock) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            let name = own.unix.as_ref().map_or_else(|| own.addr.to_string(), |p| format!("unix:{p}"));
            crate::log_to!(own.server.conf.error_log, Level::Alert, "udp listener {}: {}", name, e);
            return;
        }
    };
    let flows: Flows = Rc::new(RefCell::new(HashMap::new()));
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, peer) = tokio::select! {
            r = sock.recv_from(&mut buf) => match r {
                Ok(r) => r,
                // ICMP errors of earlier sends and the like: go on.
                Err(_) => continue,
            },
            _ = stop.notified() => return,
        };
        let data = buf[..n].to_vec();
        let existing = flows.borrow().get(&peer).cloned();
        // A datagram no session takes counts as discarded in the
        // address's default server's zone.
        let discarded = || {
            if let Some(c) = w.metrics.session_zone(own.server.zone) {
                c.discarded();
            }
        };
        if let Some(f) = existing {
            if !push(&f, data) {
                discarded();
            }
            detach_if_done(&flows, &peer, &f, &conf, index);
            continue;
        }
        if w.active.get() >= w.max_conns {
            discarded();
            continue;
        }
        let f = Rc::new(Flow {
            queue: RefCell::new(VecDeque::new()),
            ready: Notify::new(),
            requests: Cell::new(0),
            upload_rate: Cell::new(None),
            uploaded: Cell::new(0),
        });
        push(&f, data);
        flows.borrow_mut().insert(peer.clone(), f.clone());
        detach_if_done(&flows, &peer, &f, &conf, index);
        let local = sock.local(own.addr);
        let addr = conf.routes[index].find(local).clone();
        let guard = ConnGuard::new(w.clone());
        let task = session(w.clone(), conf.clone(), addr, sock.clone(), f, flows.clone(), peer, local, guard);
        tokio::task::spawn_local(crate::clock::per_poll(Box::pin(task)));
    }
}

/// Queues a datagram for its session: false when it was dropped, the
/// queue being full or the session past its `proxy_upload_rate`. nginx's
/// listening socket lends a datagram to its session only for the call of
/// the session's read handler, which leaves it unread while the upload
/// rate holds the session back (`ngx_stream_proxy_process`): the datagram
/// is gone, so an upload rate drops the client's excess datagrams instead
/// of delaying them (nginx 1.22 measured, `tests/stream.rs`).
fn push(f: &Flow, data: Vec<u8>) -> bool {
    if let Some((rate, started)) = f.upload_rate.get()
        && rate_delay(rate, started, f.uploaded.get()).is_some()
    {
        return false;
    }
    let mut q = f.queue.borrow_mut();
    let room = q.len() < QUEUE;
    if room {
        f.uploaded.set(f.uploaded.get() + data.len() as u64);
        q.push_back(data);
        f.requests.set(f.requests.get() + 1);
    }
    drop(q);
    f.ready.notify_one();
    room
}

/// After `proxy_requests` datagrams the client's next one starts a new
/// session.
fn detach_if_done(flows: &Flows, peer: &Client, f: &Flow, conf: &StreamConf, index: usize) {
    let server = &conf.routes[index].own.server;
    let n = server.conf.proxy.requests;
    if n > 0 && f.requests.get() >= n {
        flows.borrow_mut().remove(peer);
    }
}

#[allow(clippy::too_many_arguments)]
async fn session(
    w: Rc<WorkerCtx>,
    sc: Arc<StreamConf>,
    addr: Arc<super::conf::Addr>,
    sock: Rc<Listening>,
    flow: Rc<Flow>,
    flows: Flows,
    from: Client,
    local: std::net::SocketAddr,
    _guard: ConnGuard,
) {
    let peer = from.addr();
    let s = Session {
        debug: crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), from.is_unix()),
        zone: Session::open_zone(&w, &addr),
        id: w.next_serial(),
        w,
        conf: sc,
        addr,
        client: Cell::new(peer),
        client_unix: Cell::new(from.is_unix()),
        unix_name: from.unix_name().into(),
        peer,
        local,
        udp: true,
        start: crate::clock::mono(),
        status: Cell::new(200),
        bytes_sent: Cell::new(0),
        bytes_received: Cell::new(0),
        up: RefCell::new(UpInfo::default()),
        vars: RefCell::new(Vec::new()),
        named: RefCell::new(Vec::new()),
        proxy_protocol: None,
        preread: RefCell::new(None),
        tls: RefCell::new(None),
        limit_status: Cell::new(""),
        srv: std::cell::OnceCell::new(),
        guard: RefCell::new(None),
        passed: std::cell::Cell::new(false),
        close_line: std::cell::Cell::new(None),
    };
    // nginx counts the datagram that started the session as received at
    // once (`ngx_stream_init_connection`), whatever becomes of the session:
    // a denied one logs its size too.
    s.log_udp_connected();
    let first = flow.queue.borrow().front().map_or(0, |d| d.len() as u64);
    s.bytes_received.set(first);
    let _holds = match super::session::preaccess_and_access(&s) {
        Some(h) => h,
        None => {
            end(&s, &flows, &flow, &from);
            return;
        }
    };
    match &s.server().content {
        Content::Return(t) => {
            let v = t.render_to_vec(&s);
            flow.queue.borrow_mut().pop_front();
            if sock.send_to(&v, &from).await.is_ok() {
                s.bytes_sent.set(v.len() as u64);
            }
        }
        Content::Proxy(pass) => proxy(&s, pass, &sock, &flow, &from).await,
        // A datagram has no connection to hand over.
        Content::Pass(_) => {
            s.log(Level::Error, format_args!("cannot pass udp session"));
            s.status.set(500);
        }
    }
    end(&s, &flows, &flow, &from);
}

/// How long `proxy_download_rate` holds the next datagram back (and
/// whether `proxy_upload_rate` drops the client's next one), as nginx's:
/// the session may have moved `rate` bytes per second begun; past that,
/// the wait until the excess is paid off. A datagram is never split (one
/// bigger than the allowance goes, and the next waits longer).
fn rate_delay(rate: u64, started: Instant, moved: u64) -> Option<std::time::Duration> {
    if rate == 0 {
        return None;
    }
    let allowed = u128::from(rate) * (u128::from(started.elapsed().as_secs()) + 1);
    let over = u128::from(moved).checked_sub(allowed)?;
    let ms = (over * 1000 / u128::from(rate)).min(u128::from(u32::MAX)) as u64 + 1;
    Some(std::time::Duration::from_millis(ms))
}

/// The session is over: the client's next datagram starts another.
fn end(s: &Session, flows: &Flows, flow: &Rc<Flow>, from: &Client) {
    let mut m = flows.borrow_mut();
    if m.get(from).is_some_and(|f| Rc::ptr_eq(f, flow)) {
        m.remove(from);
    }
    drop(m);
    s.finish();
}

async fn proxy(s: &Session, pass: &Pass, sock: &Listening, flow: &Flow, from: &Client) {
    let p = &s.server().conf.proxy;
    let Some((u, i, peer)) = super::proxy::pick_one(s, pass).await else { return };
    let name = peer.name.clone();
    s.up.borrow_mut().tries.push(Try {
        addr: name.clone(),
        connect_ms: Some(0),
        first_byte_ms: None,
        session_ms: None,
        sent: 0,
        received: 0,
    });
    let up = match &peer.unix {
        Some(path) => super::udp_origin::Origin::unix(path),
        None => super::udp_origin::Origin::udp(peer.addr),
    };
    let up = match up {
        Ok(up) => up,
        Err(e) => {
            s.log_upstream(Level::Error, format_args!("{e} while connecting to upstream"), Some(&name));
            s.status.set(502);
            super::proxy::release(s, &u, &i, true);
            return;
        }
    };
    super::proxy::connected(&u, &i);
    s.log_proxy_connected(|| up.local(), &name);
    let started = crate::clock::mono();
    let mut active = crate::clock::mono();
    let mut responses: u64 = 0;
    let mut failed = false;
    let (upload_rate, download_rate) = (p.upload_rate.eval(s), p.download_rate.eval(s));
    if upload_rate > 0 {
        flow.upload_rate.set(Some((upload_rate, started)));
    }
    let mut downloaded = 0u64;
    // The session's first datagram counted as received when it started.
    let mut first = true;
    // While the download rate holds the origin's answers back: until when.
    let mut download_until: Option<Instant> = None;
    loop {
        let now = crate::clock::mono();
        download_until = download_until.filter(|t| *t > now);
        // Everything queued goes out first: the upload rate dropped what
        // it does not allow before it was queued (`push`).
        loop {
            let d = flow.queue.borrow_mut().pop_front();
            let Some(d) = d else { break };
            match up.send(&d).await {
                Ok(n) => {
                    if !std::mem::take(&mut first) {
                        s.bytes_received.set(s.bytes_received.get() + d.len() as u64);
                    }
                    if let Some(t) = s.up.borrow_mut().tries.last_mut() {
                        t.sent += n as u64;
                    }
                    active = crate::clock::mono();
                }
                Err(e) => {
                    let e = crate::process::signal::os_error(&e);
                    let msg = format_args!("send() failed ({e}) while proxying and sending to upstream");
                    s.log_upstream(Level::Error, msg, Some(&name));
                    s.status.set(502);
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            break;
        }
        // nginx's test_finalize for datagrams.
        let requests = flow.requests.get();
        let enough_requests = p.requests == 0 || requests >= p.requests;
        if enough_requests
            && let Some(r) = p.responses
            && responses >= r * requests
        {
            s.close_line.set(Some(Close::Udp { done: true, requests, responses }));
            break;
        }
        let deadline = active + p.timeout;
        let wake = download_until;
        tokio::select! {
            _ = flow.ready.notified() => {}
            _ = tokio::time::sleep_until(wake.unwrap_or(deadline).into()), if wake.is_some() => {}
            r = up.recv(), if download_until.is_none() => match r {
                Ok(d) => {
                    let n = d.len();
                    if s.up.borrow().tries.last().is_some_and(|t| t.first_byte_ms.is_none())
                        && let Some(t) = s.up.borrow_mut().tries.last_mut()
                    {
                        t.first_byte_ms = Some(crate::clock::since_ms(started));
                    }
                    if let Some(t) = s.up.borrow_mut().tries.last_mut() {
                        t.received += n as u64;
                    }
                    responses += 1;
                    downloaded += n as u64;
                    active = crate::clock::mono();
                    download_until = rate_delay(download_rate, started, downloaded).map(|d| active + d);
                    if sock.send_to(&d, from).await.is_ok() {
                        s.bytes_sent.set(s.bytes_sent.get() + n as u64);
                    }
                }
                Err(e) => {
                    let e = crate::process::signal::os_error(&e);
                    let msg = format_args!("recv() failed ({e}) while proxying and reading from upstream");
                    s.log_upstream(Level::Error, msg, Some(&name));
                    s.status.set(502);
                    failed = true;
                    break;
                }
            },
            _ = tokio::time::sleep_until(deadline.into()) => {
                let requests = flow.requests.get();
                if p.responses.is_none_or(|r| responses >= r * requests) {
                    s.close_line.set(Some(Close::Udp { done: false, requests, responses }));
                } else {
                    let msg = format_args!("upstream timed out (110: Connection timed out) while proxying connection");
                    s.log_upstream(Level::Error, msg, Some(&name));
                    s.status.set(502);
                }
                break;
            }
        }
    }
    if let Some(t) = s.up.borrow_mut().tries.last_mut() {
        t.session_ms = Some(crate::clock::since_ms(started));
    }
    super::proxy::release(s, &u, &i, failed);
}
