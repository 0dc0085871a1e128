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
use super::session::{Close, Session, Try};
use super::udp_inline::{Inline, Key, Step};
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

/// A client's current session: a task's, or one run inline by the
/// listener's loop (`udp_inline`).
enum Entry {
    Task(Rc<Flow>),
    Inline(Key),
}

/// The sessions by client. foldhash (seeded per map): the map is looked
/// up for every datagram, and SipHash's cost showed per query.
type Flows = Rc<RefCell<HashMap<Client, Entry, foldhash::fast::RandomState>>>;

/// What woke the listener's loop.
enum Event {
    Datagram(usize, Client),
    Ended(Vec<Client>),
    Stop,
    Nothing,
}

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
    let inline = match Inline::new() {
        Ok(i) => Some(i),
        Err(e) => {
            crate::log_to!(own.server.conf.error_log, Level::Alert, "epoll_create() for udp sessions failed ({})", e);
            None
        }
    };
    let flows: Flows = Rc::new(RefCell::new(HashMap::default()));
    let mut buf = vec![0u8; 65536];
    // One timer for every inline session's `proxy_timeout`: set to the
    // earliest deadline when that comes sooner than the one it is set to,
    // else left to fire and be set again.
    let sleep = tokio::time::sleep(std::time::Duration::from_secs(3600));
    tokio::pin!(sleep);
    let mut armed: Option<Instant> = None;
    let mut stopping = false;
    // Made once: a `Notified` per turn of the loop would join and leave
    // the Notify's waiter list for every datagram.
    let stopped = stop.notified();
    tokio::pin!(stopped);
    let at = At { conf: &conf, index, w: &w, sock: &sock, flows: &flows, inline: inline.as_ref() };
    loop {
        let ev = tokio::select! {
            r = sock.recv_from(&mut buf), if !stopping => match r {
                Ok((n, peer)) => Event::Datagram(n, peer),
                // ICMP errors of earlier sends and the like: go on.
                Err(_) => Event::Nothing,
            },
            ended = origins(inline.as_ref(), &sock) => Event::Ended(ended),
            () = &mut sleep, if armed.is_some() => {
                armed = None;
                Event::Ended(inline.as_ref().map(Inline::expire).unwrap_or_default())
            }
            () = &mut stopped, if !stopping => Event::Stop,
        };
        match ev {
            Event::Datagram(n, peer) => at.datagram(&buf[..n], peer),
            Event::Ended(clients) => at.forget(clients),
            // Sessions under way finish; no new datagrams are read.
            Event::Stop => stopping = true,
            Event::Nothing => {}
        }
        let Some(inl) = &inline else {
            if stopping {
                return;
            }
            continue;
        };
        if stopping && inl.is_empty() {
            return;
        }
        if let Some(next) = inl.next_deadline()
            && armed.is_none_or(|a| next < a)
        {
            sleep.as_mut().reset(next.into());
            armed = Some(next);
        }
    }
}

/// The inline sessions' answers, or never without them.
async fn origins(inline: Option<&Inline>, sock: &Listening) -> Vec<Client> {
    match inline {
        Some(i) => i.origins(sock).await,
        None => std::future::pending().await,
    }
}

/// What the listener's loop hands a datagram to.
struct At<'a> {
    conf: &'a Arc<StreamConf>,
    index: usize,
    w: &'a Rc<WorkerCtx>,
    sock: &'a Rc<Listening>,
    flows: &'a Flows,
    inline: Option<&'a Inline>,
}

impl At<'_> {
    /// A datagram from `peer`: to its session, or a new one.
    fn datagram(&self, data: &[u8], peer: Client) {
        let (conf, w, flows) = (self.conf, self.w, self.flows);
        let own = &conf.routes[self.index].own;
        let requests_max = own.server.conf.proxy.requests;
        // A datagram no session takes counts as discarded in the
        // address's default server's zone.
        let discarded = || {
            if let Some(c) = w.metrics.session_zone(own.server.zone) {
                c.discarded();
            }
        };
        let existing = flows.borrow().get(&peer).map(|e| match e {
            Entry::Task(f) => Entry::Task(f.clone()),
            Entry::Inline(k) => Entry::Inline(*k),
        });
        match (existing, self.inline) {
            (Some(Entry::Task(f)), _) => {
                if !push(&f, data.to_vec()) {
                    discarded();
                }
                detach_if_done(flows, &peer, &f, requests_max);
                return;
            }
            (Some(Entry::Inline(key)), Some(inl)) => {
                match inl.more(key, data) {
                    Step::Ended(c) => self.forget(vec![c]),
                    Step::Open => {
                        if requests_max > 0 && inl.requests(key) >= requests_max {
                            flows.borrow_mut().remove(&peer);
                        }
                    }
                }
                return;
            }
            _ => {}
        }
        if w.active.get() >= w.max_conns {
            discarded();
            return;
        }
        let local = self.sock.local(own.addr);
        let addr = conf.routes[self.index].find(local).clone();
        if let Some(inl) = self.inline
            && super::udp_inline::eligible(&addr.server, self.sock)
        {
            let guard = ConnGuard::new(w.clone());
            let s = Box::new(new_session(w.clone(), conf.clone(), addr, &peer, local));
            // Counted as received at once, as `session` counts it.
            s.log_udp_connected();
            s.bytes_received.set(data.len() as u64);
            let Some(holds) = super::session::preaccess_and_access(&s) else {
                s.finish();
                return;
            };
            let Content::Proxy(Pass::Fixed(u)) = &s.server().content else {
                s.finish();
                return;
            };
            let u = u.clone();
            if let Some(key) = inl.start(s, peer.clone(), u, data, holds, guard)
                && (requests_max == 0 || requests_max > 1)
            {
                flows.borrow_mut().insert(peer, Entry::Inline(key));
            }
            return;
        }
        let f = Rc::new(Flow {
            queue: RefCell::new(VecDeque::new()),
            ready: Notify::new(),
            requests: Cell::new(0),
            upload_rate: Cell::new(None),
            uploaded: Cell::new(0),
        });
        push(&f, data.to_vec());
        flows.borrow_mut().insert(peer.clone(), Entry::Task(f.clone()));
        detach_if_done(flows, &peer, &f, requests_max);
        let guard = ConnGuard::new(w.clone());
        let task = session(w.clone(), conf.clone(), addr, self.sock.clone(), f, flows.clone(), peer, local, guard);
        tokio::task::spawn_local(crate::clock::per_poll(Box::pin(task)));
    }

    /// Inline sessions that ended: their clients' next datagrams start new
    /// ones.
    fn forget(&self, clients: Vec<Client>) {
        let mut m = self.flows.borrow_mut();
        for c in clients {
            if matches!(m.get(&c), Some(Entry::Inline(_))) {
                m.remove(&c);
            }
        }
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
fn detach_if_done(flows: &Flows, peer: &Client, f: &Flow, requests_max: u64) {
    if requests_max > 0 && f.requests.get() >= requests_max {
        flows.borrow_mut().remove(peer);
    }
}

/// A datagram session's state as its phases start (the task's and the
/// inline one's alike).
fn new_session(
    w: Rc<WorkerCtx>,
    sc: Arc<StreamConf>,
    addr: Arc<super::conf::Addr>,
    from: &Client,
    local: std::net::SocketAddr,
) -> Session {
    let mut s = Session::new(w, sc, addr, from.addr(), local, true);
    s.client_unix.set(from.is_unix());
    s.unix_name = from.unix_name().into();
    s
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
    let s = new_session(w, sc, addr, &from, local);
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
    if m.get(from).is_some_and(|e| matches!(e, Entry::Task(f) if Rc::ptr_eq(f, flow))) {
        m.remove(from);
    }
    drop(m);
    s.finish();
}

async fn proxy(s: &Session, pass: &Pass, sock: &Listening, flow: &Flow, from: &Client) {
    let p = &s.server().conf.proxy;
    let Some((u, i, peer)) = super::proxy::pick_one(s, pass).await else { return };
    let name = peer.name.clone();
    s.up.borrow_mut().tries.push(Try::datagram(name.clone()));
    let up = match &peer.unix {
        Some(path) => super::udp_origin::Origin::unix(path),
        None => super::udp_origin::Origin::udp(peer.addr),
    };
    let up = match up {
        Ok(up) => up,
        Err(e) => {
            s.log_upstream(Level::Error, format_args!("{e} while connecting to upstream"), Some(&name));
            s.status.set(502);
            super::upstream::release(s, &u, &i, true);
            return;
        }
    };
    super::upstream::connected(&u, &i);
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
    super::upstream::release(s, &u, &i, failed);
}
