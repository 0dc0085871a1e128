//! A worker: one OS thread running a tokio `current_thread` runtime, with
//! its own accept loops, access log buffers and open-file cache. Workers of
//! one generation share only the immutable config; everything a request
//! touches is thread-local, so the hot path takes no locks.

pub mod accept;
pub mod affinity;
pub mod credentials;
pub mod idle;
pub mod park;
pub mod stats;
pub mod trim;
pub mod unwind;

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::config::Config;
use crate::log::access::AccessLogs;
use crate::log::error::Level;
use crate::log_error;

/// Messages from the master thread.
pub enum Ctl {
    /// Graceful: stop accepting, finish in-flight requests, then exit.
    Quit,
    /// Fast: flush logs and exit now.
    Stop,
    /// New access log descriptors after `-s reopen`.
    Reopen(Vec<File>),
}

pub struct WorkerCtx {
    pub cfg: Arc<Config>,
    pub index: usize,
    pub logs: RefCell<AccessLogs>,
    pub serial: Cell<u64>,
    pub active: Cell<usize>,
    pub max_conns: usize,
    /// A connection slot was freed (worker_connections).
    pub slot: Notify,
    pub draining: Cell<bool>,
    /// `worker_shutdown_timeout` passed: connections still open are to
    /// close now, their requests ending as if the client had gone (nginx
    /// then logs them with 499).
    pub aborting: Cell<bool>,
    /// Timers of idle connections (keep-alive and first-request waits).
    pub idle: idle::IdleTimers,
    /// Long-idle connections, held without a task.
    pub parking: park::Parking,
    /// The last connection ended while draining.
    pub drained: Notify,
    /// Read buffers kept between requests, so idle connections hold none.
    pub pool: RefCell<Vec<Vec<u8>>>,
    /// Upstream peer state and idle origin connections of this worker.
    pub proxy: RefCell<crate::http::proxy::peers::WorkerProxy>,
    /// TLS client configurations for `proxy_pass https://`.
    pub tls_clients: RefCell<crate::http::proxy::upstream_tls::Clients>,
    /// DNS answers for `resolver` (`proxy_pass` with variables).
    pub dns: RefCell<crate::resolver::Cache>,
    /// This worker's counters for `stub_status`.
    pub stats: std::sync::Arc<stats::WorkerStats>,
    /// This worker's `status_zone` counters.
    pub metrics: std::sync::Arc<crate::metrics::WorkerMetrics>,
    /// Every TCP listening socket this worker accepts on, by address, with
    /// its family's handler: stream's `pass` hands a connection to one.
    pub handoff: RefCell<Vec<(std::net::SocketAddr, Handoff)>>,
}

/// Serves a connection as if the listening socket it is registered under
/// had accepted it (`peer`: the client's address).
pub type Handoff = Rc<dyn Fn(&Rc<WorkerCtx>, Handed, std::net::SocketAddr, ConnGuard)>;

/// A connection handed over by stream's `pass`: as accepted, or with the
/// TLS handshake the stream server made on it (nginx passes the
/// connection with its SSL state, and http serves it as handshaked).
pub enum Handed {
    Plain(std::net::TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>>),
}

impl WorkerCtx {
    pub fn next_serial(&self) -> u64 {
        let n = self.serial.get() + 1;
        self.serial.set(n);
        n
    }

    pub fn take_buf(&self, cap: usize) -> Vec<u8> {
        match self.pool.borrow_mut().pop() {
            Some(mut b) if b.capacity() >= cap => {
                b.clear();
                b
            }
            _ => Vec::with_capacity(cap),
        }
    }

    /// The handler of the listening socket `addr` names, as nginx's stream
    /// `pass` finds it: that exact address, else a wildcard on its port.
    pub fn handoff_to(&self, addr: std::net::SocketAddr) -> Option<Handoff> {
        let list = self.handoff.borrow();
        let exact = list.iter().find(|(a, _)| *a == addr);
        let wildcard = || {
            list.iter()
                .find(|(a, _)| a.ip().is_unspecified() && a.port() == addr.port() && a.is_ipv4() == addr.is_ipv4())
        };
        exact.or_else(wildcard).map(|(_, h)| h.clone())
    }

    pub fn give_buf(&self, mut b: Vec<u8>) {
        let mut pool = self.pool.borrow_mut();
        if b.capacity() > 0 && b.capacity() <= 64 * 1024 && pool.len() < 256 {
            b.clear();
            pool.push(b);
        }
    }
}

/// Counts a live connection; dropping it (even during a panic unwinding the
/// connection's task) frees the slot.
pub struct ConnGuard(pub Rc<WorkerCtx>);

impl ConnGuard {
    pub fn new(w: Rc<WorkerCtx>) -> ConnGuard {
        w.active.set(w.active.get() + 1);
        w.stats.accepted();
        w.stats.set_active(w.active.get());
        ConnGuard(w)
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let w = &self.0;
        w.active.set(w.active.get().saturating_sub(1));
        w.stats.set_active(w.active.get());
        w.slot.notify_one();
        if w.draining.get() && w.active.get() == 0 {
            w.drained.notify_one();
        }
    }
}

pub struct Handle {
    pub ctl: mpsc::UnboundedSender<Ctl>,
    /// Gets the worker thread's id once its event loop has ended (nothing
    /// if the thread unwound instead).
    pub done: std::sync::mpsc::Receiver<i32>,
    pub thread: std::thread::JoinHandle<()>,
}

/// What one worker needs to start.
pub struct Spec {
    pub index: usize,
    pub cfg: Arc<Config>,
    /// (listen group index, socket)
    pub listeners: Vec<(usize, std::net::TcpListener)>,
    /// (family, listen index, socket): served by the family's module.
    pub family_listeners: Vec<(usize, usize, crate::config::family::Socket)>,
    /// `listen ... quic` sockets.
    pub quic: Vec<crate::listener::QuicSock>,
    pub log_files: Vec<File>,
    pub cpus: Option<Vec<usize>>,
}

pub fn spawn(spec: Spec) -> std::io::Result<Handle> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("sluice-w{}", spec.index)).spawn(move || {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        run(spec, rx);
        let _ = done_tx.send(tid);
    })?;
    Ok(Handle { ctl: tx, done: done_rx, thread })
}

fn run(spec: Spec, mut ctl: mpsc::UnboundedReceiver<Ctl>) {
    if let Some(cpus) = &spec.cpus {
        affinity::pin(spec.index, cpus);
    }
    // `worker_priority`: this thread's nice value, while it may still lower
    // it (before dropping to `user`).
    if let Some(p) = spec.cfg.main.worker_priority
        && let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), p)
    {
        log_error!(Level::Alert, "setpriority({}) failed ({})", p, e);
    }
    // Before the event loop exists: nothing this worker opens or serves
    // may run with the master's (root) credentials.
    if let Some(user) = &spec.cfg.main.user
        && let Err(e) = user.apply_to_thread()
    {
        log_error!(Level::Emerg, "worker {} does not serve: {}", spec.index, e);
        return;
    }
    if spec.cfg.main.user.is_some() {
        crate::process::rlimits::allow_core_dumps(&spec.cfg.main);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_unpark(crate::clock::mono_stale)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log_error!(Level::Alert, "worker {} could not start its event loop: {}", spec.index, e);
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let max_conns = spec.cfg.main.worker_connections;
    let logs = AccessLogs::new(spec.log_files, &spec.cfg.access_log_files, &spec.cfg.access_log_syslog);
    let w = Rc::new(WorkerCtx {
        cfg: spec.cfg,
        index: spec.index,
        logs: RefCell::new(logs),
        serial: Cell::new(0),
        active: Cell::new(0),
        max_conns,
        slot: Notify::new(),
        draining: Cell::new(false),
        aborting: Cell::new(false),
        idle: idle::IdleTimers::default(),
        parking: park::Parking::new(),
        drained: Notify::new(),
        pool: RefCell::new(Vec::new()),
        proxy: RefCell::new(Default::default()),
        tls_clients: RefCell::new(Default::default()),
        dns: RefCell::new(Default::default()),
        stats: stats::register(),
        metrics: crate::metrics::register(),
        handoff: RefCell::new(Vec::new()),
    });
    local.block_on(&rt, async move {
        crate::clock::refresh();
        let stop_accept = Rc::new(Notify::new());
        for (group, listener) in spec.listeners {
            tokio::task::spawn_local(crate::clock::per_poll(accept::supervise(
                listener,
                accept::Http::new(w.cfg.clone(), group),
                w.clone(),
                stop_accept.clone(),
            )));
        }
        for q in spec.quic {
            let run = crate::http::connection::h3::endpoint::run(w.clone(), q, stop_accept.clone());
            tokio::task::spawn_local(crate::clock::per_poll(run));
        }
        for (family, index, sock) in spec.family_listeners {
            if let Some((_, conf)) = w.cfg.families.get(family) {
                conf.clone().serve(w.clone(), index, sock, stop_accept.clone());
            }
        }
        tokio::task::spawn_local(crate::clock::per_poll(tick(w.clone())));
        tokio::task::spawn_local(crate::clock::per_poll(flush_logs_soon(w.clone())));
        tokio::task::spawn_local(crate::clock::per_poll(park::run(w.clone())));
        loop {
            match ctl.recv().await {
                Some(Ctl::Reopen(files)) => w.logs.borrow_mut().reopen(files),
                Some(Ctl::Quit) => {
                    stop_accept.notify_waiters();
                    w.draining.set(true);
                    sweep(&w, crate::clock::now_secs()).await;
                    let drained = || async {
                        while w.active.get() > 0 {
                            w.drained.notified().await;
                        }
                    };
                    // `worker_shutdown_timeout`: what is still open then is
                    // closed (its tasks dropped with the event loop).
                    match w.cfg.main.worker_shutdown_timeout {
                        Some(t) => {
                            if tokio::time::timeout(t, drained()).await.is_err() {
                                abort(&w).await;
                            }
                        }
                        None => drained().await,
                    }
                    break;
                }
                Some(Ctl::Stop) | None => break,
            }
        }
        w.logs.borrow_mut().flush_all();
    });
}

/// How long connections closed by `worker_shutdown_timeout` get to end
/// their requests (and log them) before the event loop is dropped. The
/// HTTP/2 loop sees the flag on its next half-second tick; what does not
/// watch it (HTTP/1 connections) is dropped with the loop, as before.
const ABORT_GRACE: Duration = Duration::from_secs(1);

/// `worker_shutdown_timeout` is up: as nginx closes each connection left
/// (marking it errored, so a request in progress ends as the client's
/// abort and its access log line says 499), the connections that watch
/// `aborting` close, and their requests get `ABORT_GRACE` to finish.
async fn abort(w: &WorkerCtx) {
    w.aborting.set(true);
    let deadline = tokio::time::Instant::now() + ABORT_GRACE;
    while (w.active.get() > 0 || w.stats.busy()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Writes the access-log lines of files without `buffer=` once the turn
/// of the event loop that logged them is over: as good as nginx's write
/// per line for anyone reading the file, with one `write` per burst.
async fn flush_logs_soon(w: Rc<WorkerCtx>) {
    let soon = w.logs.borrow().soon();
    loop {
        soon.notified().await;
        // Behind every task that is ready now, so a burst of requests
        // finishing together shares the write.
        tokio::task::yield_now().await;
        w.logs.borrow_mut().flush_eager();
    }
}

/// Once a second, at the second boundary: refresh the cached time and flush
/// access logs that reached their `flush` age.
async fn tick(w: Rc<WorkerCtx>) {
    loop {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let to_next = Duration::from_nanos(1_000_000_000 - u64::from(now.subsec_nanos()));
        tokio::time::sleep(to_next).await;
        crate::clock::refresh();
        sweep(&w, crate::clock::now_secs()).await;
        w.logs.borrow_mut().tick();
        crate::http::proxy::settle_orphans(&w);
    }
}

/// Timers fired, or parked connections closed, per pass of [`sweep`]: a
/// pass costs well under a millisecond (closing a parked socket is the
/// dearest step, about 5 to 10 microseconds with its FIN on loopback).
const SWEEP_BATCH: usize = 64;

/// How long [`sweep`] spreads its passes out (a millisecond's pause
/// between two) before it only yields between them.
const SWEEP_SPREAD: Duration = Duration::from_millis(500);

/// Fires the idle timers due by `now` (keep-alive and header timeouts,
/// parking) and closes the parked connections whose time is up, or all of
/// them while draining.
///
/// In passes of [`SWEEP_BATCH`], so a flood of connections that went idle
/// or timed out in the same second does not hold the worker: done at once,
/// 12,500 of them cost one worker 12 to 16 ms of CPU to park and 28 to 33
/// ms to close (up to three times that on a loaded machine), during which
/// nothing else is served (tokio runs the woken tasks in order, before a
/// connection that became readable meanwhile).
/// Between two passes the event loop polls for I/O and serves what is
/// ready. The pause between passes is a millisecond's sleep rather than a
/// yield, for the first [`SWEEP_SPREAD`]: where workers outnumber idle
/// cores (other workers sweeping in the same second, other processes),
/// back-to-back passes keep this worker's CPU busy and its own clients
/// wait for the CPU instead (tests/idle_flood.rs: probe p99 22 to 26 ms
/// with yields, 2 to 10 ms with pauses). Past that the passes only yield, so a
/// huge sweep still ends in time; a draining worker never sleeps.
async fn sweep(w: &WorkerCtx, now: u64) {
    let draining = w.draining.get();
    let cap = draining.then_some(now + crate::http::connection::h1::conn::DRAIN_GRACE.as_secs());
    let started = std::time::Instant::now();
    let pause = || async move {
        if draining || started.elapsed() >= SWEEP_SPREAD {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let mut next = Some(0);
    while let Some(from) = next {
        next = w.idle.sweep(now, cap, from, SWEEP_BATCH);
        if next.is_some() {
            pause().await;
        }
    }
    let mut next = Some(0);
    while let Some(from) = next {
        next = w.parking.expire(now, draining, from, SWEEP_BATCH);
        if next.is_some() {
            pause().await;
        }
    }
}
