//! The serving process's control loop (with `master_process off`, the
//! whole server; with `on`, the process `supervisor` starts): it starts a
//! worker generation, then waits for signals.
//! SIGHUP reloads (a bad config is logged and the old one keeps serving;
//! a good one starts a new generation on the kept listeners, then the old
//! generation drains), SIGQUIT drains and exits, SIGTERM/SIGINT exit
//! promptly, SIGUSR1 reopens log files.

use std::fs::{File, OpenOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::config::{self, Config, LoadOptions};
use crate::listener::ListenerSet;
use crate::log::error::Level;
use crate::log_error;
use crate::worker::{self, Ctl};

struct Generation {
    cfg: Arc<Config>,
    workers: Vec<worker::Handle>,
    /// Tengine's upstream checks for this configuration (one thread; None without `check`).
    checker: Option<crate::upstream::check::Checker>,
    /// The re-resolution of `server ... resolve` (one thread; None without).
    resolver: Option<crate::upstream::zone::resolve::Resolver>,
    /// OCSP stapling's fetches (one thread; None without `ssl_stapling`).
    _ocsp: Option<crate::tls::ocsp::Fetcher>,
    /// ACME orders and renewals (one thread; None without `acme_certificate`).
    _acme: Option<crate::tls::acme::Runner>,
}

fn open_access_logs(cfg: &Config) -> Result<Vec<File>, String> {
    cfg.access_log_files
        .iter()
        .map(|f| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&f.path)
                .map_err(|e| format!("open() \"{}\" failed ({})", f.path.display(), super::signal::os_error(&e)))
        })
        .collect()
}

/// Starts a worker generation (`reload`: replacing a running one), counted
/// in `sluice_status` before any of its threads runs.
fn start_generation(
    cfg: Arc<Config>,
    listeners: &ListenerSet,
    logs: &[File],
    reload: bool,
) -> Result<Generation, String> {
    let previous = crate::metrics::generation_starting(reload, &cfg);
    let started = spawn_generation(cfg, listeners, logs);
    if started.is_err() {
        crate::metrics::generation_abandoned(reload, previous);
    }
    started
}

fn spawn_generation(cfg: Arc<Config>, listeners: &ListenerSet, logs: &[File]) -> Result<Generation, String> {
    let checker = crate::upstream::check::start(&cfg)?;
    let resolver = crate::upstream::zone::resolve::start(crate::upstream::zone::zones(&cfg))?;
    let ocsp = crate::tls::ocsp::start(&cfg.staples)?;
    let acme = crate::tls::acme::start(&cfg.acme)?;
    let mut workers = Vec::new();
    for i in 0..cfg.main.worker_processes {
        let socks = listeners.for_worker(&cfg, i).map_err(|e| format!("dup() of listeners failed ({e})"))?;
        let quic = listeners.quic_for_worker(&cfg, i).map_err(|e| format!("dup() of listeners failed ({e})"))?;
        let files = logs.iter().map(|f| f.try_clone()).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        let spec = worker::Spec {
            index: i,
            cfg: cfg.clone(),
            listeners: socks.http,
            family_listeners: socks.families,
            quic,
            log_files: files,
            cpus: worker::affinity::cpus_for(&cfg.main.cpu_affinity, i),
        };
        match worker::spawn(spec) {
            Ok(h) => workers.push(h),
            Err(e) => {
                for w in &workers {
                    let _ = w.ctl.send(Ctl::Stop);
                }
                return Err(format!("could not start worker thread ({e})"));
            }
        }
    }
    // From here on this generation reads the QUIC sockets; a retiring one
    // stops reading those it shares with it.
    listeners.take_over_udp();
    // The run-time API now reaches this configuration's zones.
    crate::upstream::zone::registry::publish(&cfg);
    Ok(Generation { cfg, workers, checker, resolver, _ocsp: ocsp, _acme: acme })
}

/// Panics are logged at `alert`, as nginx logs a worker that died: one
/// under a request's guard (`worker::unwind`) by the guard, with the
/// request named; any other here (a spawned task's panic ends that task
/// only: tokio catches it and the worker's event loop goes on).
fn install_panic_hook() {
    crate::worker::unwind::init_test_hook();
    std::panic::set_hook(Box::new(|info| {
        if crate::worker::unwind::stash(info) {
            return;
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        log_error!(Level::Alert, "thread {} panicked: {}", name, crate::worker::unwind::describe(info));
    }));
}

/// Runs the server. `serving`: this is the process a master started, with
/// the master's channel and the sockets it handed over (reused by
/// address; the master keeps the pid file).
pub fn run(cfg: Config, opts: LoadOptions, serving: Option<(super::serving::Link, ListenerSet)>) -> i32 {
    let (link, inherited) = match serving {
        Some((l, set)) => (Some(l), set),
        None => (None, ListenerSet::default()),
    };
    let owns_pid = link.is_none();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            super::emerg(&opts, &e);
            return 1;
        }
    };
    let sigs = {
        let _enter = rt.enter();
        match install_signals() {
            Ok(s) => s,
            Err(e) => {
                super::emerg(&opts, format_args!("could not install signal handlers ({e})"));
                return 1;
            }
        }
    };
    super::rlimits::apply(&cfg.main);
    if let Err(e) = crate::log::error_file::open_all(&cfg.error_log_files) {
        super::emerg(&opts, &e);
        return 1;
    }
    crate::log::error::install(cfg.main.error_log.clone());
    if let Err(e) = super::prepare::check_roots(&cfg) {
        super::emerg(&opts, &e);
        return 1;
    }
    let logs = match open_access_logs(&cfg) {
        Ok(l) => l,
        Err(e) => {
            super::emerg(&opts, &e);
            return 1;
        }
    };
    // The pid file is complete before any socket accepts, so whoever sees
    // the port open can signal us; it is removed again if binding fails.
    // Under a master, the master's pid is in it.
    if owns_pid && let Err(e) = super::pidfile::write(&cfg.main.pid) {
        super::emerg(&opts, &e);
        return 1;
    }
    let remove_pid = |p: &std::path::Path| {
        if owns_pid {
            super::pidfile::remove(p);
        }
    };
    // The temporary and cache directories exist before any socket accepts
    // (nginx creates its paths before opening listening sockets): a client
    // that finds the port open finds the server ready, and nothing made
    // in the directories' place meanwhile can stop the start-up.
    if let Err(e) = super::prepare::temp_dirs(&cfg) {
        super::emerg(&opts, &e);
        remove_pid(&cfg.main.pid);
        return 1;
    }
    let listeners = match inherited.prepare(&cfg) {
        Ok(l) => l,
        Err(e) => {
            super::emerg(&opts, &e);
            remove_pid(&cfg.main.pid);
            return 1;
        }
    };
    drop(inherited);
    install_panic_hook();
    let cfg = Arc::new(cfg);
    let pid_path = cfg.main.pid.clone();
    let current = match start_generation(cfg, &listeners, &logs, false) {
        Ok(g) => g,
        Err(e) => {
            super::emerg(&opts, &e);
            remove_pid(&pid_path);
            return 1;
        }
    };
    // nginx's start-up notice names its version (`nginx/1.26.3`); tools
    // and nginx's test suite look for it.
    log_error!(
        Level::Notice,
        "sluice/{} (nginx/{}) started, {} worker(s)",
        env!("CARGO_PKG_VERSION"),
        super::build_info::NGINX_VERSION,
        current.workers.len()
    );
    match &link {
        Some(l) => {
            if let Err(e) = l.send_listeners(&listeners) {
                log_error!(Level::Alert, "could not hand the listening sockets to the master ({})", e);
            }
            l.ready();
        }
        None => super::daemon::ready(),
    }
    let mut m = Master { opts, current, retiring: Vec::new(), retired_cfgs: Vec::new(), listeners, logs, link };
    rt.block_on(m.signal_loop(sigs))
}

/// The master's signal streams, installed before any socket is bound so a
/// signal sent right after startup is never lost to a default action.
struct Signals {
    hup: Signal,
    quit: Signal,
    term: Signal,
    int: Signal,
    usr1: Signal,
    usr2: Option<Signal>,
    winch: Option<Signal>,
}

fn install_signals() -> std::io::Result<Signals> {
    Ok(Signals {
        hup: signal(SignalKind::hangup())?,
        quit: signal(SignalKind::quit())?,
        term: signal(SignalKind::terminate())?,
        int: signal(SignalKind::interrupt())?,
        usr1: signal(SignalKind::user_defined1())?,
        // nginx uses these for binary upgrades; sluice has none, but the
        // signals must not kill it.
        usr2: signal(SignalKind::user_defined2()).ok(),
        winch: signal(SignalKind::window_change()).ok(),
    })
}

struct Master {
    opts: LoadOptions,
    current: Generation,
    retiring: Vec<worker::Handle>,
    /// The configurations of retiring generations, until their workers
    /// let go of them.
    retired_cfgs: Vec<std::sync::Weak<Config>>,
    listeners: ListenerSet,
    logs: Vec<File>,
    /// Under a master: the channel that gets the sockets after a reload.
    link: Option<super::serving::Link>,
}

impl Master {
    async fn signal_loop(&mut self, sigs: Signals) -> i32 {
        let Signals { mut hup, mut quit, mut term, mut int, mut usr1, mut usr2, mut winch } = sigs;
        let mut reap = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    if self.link.is_none() {
                        log_error!(Level::Notice, "signal 1 (SIGHUP) received, reconfiguring");
                    }
                    self.reload();
                }
                _ = usr1.recv() => {
                    if self.link.is_none() {
                        log_error!(Level::Notice, "signal 10 (SIGUSR1) received, reopening logs");
                    }
                    self.reopen();
                }
                _ = quit.recv() => {
                    if self.link.is_none() {
                        log_error!(Level::Notice, "signal 3 (SIGQUIT) received, shutting down gracefully");
                    }
                    self.stop_all(Ctl::Quit, Duration::from_secs(3600));
                    break;
                }
                _ = term.recv() => {
                    if self.link.is_none() {
                        log_error!(Level::Notice, "signal 15 (SIGTERM) received, exiting");
                    }
                    self.stop_all(Ctl::Stop, Duration::from_secs(2));
                    break;
                }
                _ = int.recv() => {
                    if self.link.is_none() {
                        log_error!(Level::Notice, "signal 2 (SIGINT) received, exiting");
                    }
                    self.stop_all(Ctl::Stop, Duration::from_secs(2));
                    break;
                }
                _ = async { if let Some(s) = usr2.as_mut() { s.recv().await } else { std::future::pending().await } } => {
                    log_error!(Level::Notice, "signal 12 (SIGUSR2) received: binary upgrade is not supported, ignored");
                }
                _ = async { if let Some(s) = winch.as_mut() { s.recv().await } else { std::future::pending().await } } => {}
                _ = reap.tick() => self.reap(),
            }
        }
        if self.link.is_none() {
            super::pidfile::remove(&self.current.cfg.main.pid);
        }
        log_error!(Level::Notice, "exit");
        0
    }

    /// SIGHUP: a new generation, or the old one goes on; `sluice_status`
    /// counts the reload (as done when the generation starts, see
    /// `start_generation`).
    fn reload(&mut self) {
        if !self.try_reload() {
            crate::metrics::reload_failed();
        }
    }

    fn try_reload(&mut self) -> bool {
        let cfg = match config::load(&self.opts) {
            Ok(c) => c,
            Err(e) => {
                log_error!(Level::Emerg, "{}", e);
                log_error!(Level::Alert, "reload failed: the configuration is invalid; still serving the previous one");
                return false;
            }
        };
        for n in &cfg.notices {
            log_error!(Level::Notice, "{}", n);
        }
        for w in &cfg.warnings {
            log_error!(Level::Warn, "{}", w);
        }
        if let Err(e) = super::prepare::check_roots(&cfg).and_then(|()| super::prepare::temp_dirs(&cfg)) {
            log_error!(Level::Emerg, "{}; reload failed, still serving the previous configuration", e);
            return false;
        }
        let logs = match open_access_logs(&cfg) {
            Ok(l) => l,
            Err(e) => {
                log_error!(Level::Emerg, "{}; reload failed, still serving the previous configuration", e);
                return false;
            }
        };
        if let Err(e) = crate::log::error_file::open_all(&cfg.error_log_files) {
            log_error!(Level::Emerg, "{}; reload failed, still serving the previous configuration", e);
            return false;
        }
        let listeners = match self.listeners.prepare(&cfg) {
            Ok(l) => l,
            Err(e) => {
                log_error!(Level::Emerg, "{}; reload failed, still serving the previous configuration", e);
                return false;
            }
        };
        if self.link.is_none() && cfg.main.pid != self.current.cfg.main.pid {
            if let Err(e) = super::pidfile::write(&cfg.main.pid) {
                log_error!(Level::Alert, "{}", e);
            }
            super::pidfile::remove(&self.current.cfg.main.pid);
        }
        crate::upstream::check::inherit(&self.current.cfg, &cfg);
        crate::upstream::zone::inherit(&self.current.cfg, &cfg);
        super::rlimits::apply(&cfg.main);
        let cfg = Arc::new(cfg);
        let next = match start_generation(cfg, &listeners, &logs, true) {
            Ok(g) => g,
            Err(e) => {
                log_error!(Level::Emerg, "{}; reload failed, still serving the previous configuration", e);
                return false;
            }
        };
        crate::log::error::install(next.cfg.main.error_log.clone());
        // What loading freed (the parse tree) goes back to the kernel.
        crate::worker::trim::release_free_memory();
        let old = std::mem::replace(&mut self.current, next);
        self.retired_cfgs.push(Arc::downgrade(&old.cfg));
        // The old checker stops now; the old workers drain on its last state.
        drop(old.checker);
        drop(old.resolver);
        for w in old.workers {
            let _ = w.ctl.send(Ctl::Quit);
            self.retiring.push(w);
        }
        // Old workers hold their own descriptors; the master keeps only the
        // sockets the new configuration uses. A unix listen the new one
        // dropped loses its file now, as in nginx's reload.
        self.listeners.remove_unix_files(Some(&listeners));
        self.listeners = listeners;
        self.logs = logs;
        if let Some(l) = &self.link
            && let Err(e) = l.send_listeners(&self.listeners)
        {
            log_error!(Level::Alert, "could not hand the listening sockets to the master ({})", e);
        }
        log_error!(Level::Notice, "reconfigured: listening on {:?}", self.listeners.addrs());
        true
    }

    fn reopen(&mut self) {
        for e in crate::log::error_file::reopen_all() {
            log_error!(Level::Alert, "{}", e);
        }
        match open_access_logs(&self.current.cfg) {
            Ok(files) => {
                for w in &self.current.workers {
                    if let Ok(dups) = files.iter().map(|f| f.try_clone()).collect::<Result<Vec<_>, _>>() {
                        let _ = w.ctl.send(Ctl::Reopen(dups));
                    }
                }
                self.logs = files;
            }
            Err(e) => log_error!(Level::Alert, "{}", e),
        }
    }

    fn reap(&mut self) {
        // A retired worker that has drained is logged in nginx's words for
        // an old worker process after a reload: scripts (and nginx's own
        // tests) wait for `exited with code` to know the reload is over.
        // Code 0 is a worker that ended its event loop, 1 one that unwound.
        self.retiring.retain(|w| {
            let code = match w.done.try_recv() {
                Ok(tid) => (tid, 0),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => (0, 1),
                Err(std::sync::mpsc::TryRecvError::Empty) if w.thread.is_finished() => (0, 1),
                Err(std::sync::mpsc::TryRecvError::Empty) => return true,
            };
            log_error!(Level::Notice, "{}", retired_exit(code.0, code.1));
            false
        });
        let before = self.retired_cfgs.len();
        self.retired_cfgs.retain(|c| c.strong_count() > 0);
        if self.retired_cfgs.len() < before {
            // The last holder of an old configuration (its last worker)
            // dropped it: its pages go back to the kernel.
            crate::worker::trim::release_free_memory();
        }
    }

    fn stop_all(&mut self, how: Ctl, limit: Duration) {
        // Close the master's listening sockets now: with the workers' copies
        // gone too, new connections are refused instead of queueing. The
        // unix listens' files go, as nginx removes them when it exits.
        self.listeners.remove_unix_files(None);
        self.listeners = ListenerSet::default();
        if let Some(c) = self.current.checker.take() {
            c.stop();
        }
        if let Some(r) = self.current.resolver.take() {
            r.stop();
        }
        let all: Vec<worker::Handle> = self.current.workers.drain(..).chain(self.retiring.drain(..)).collect();
        for w in &all {
            let msg = match how {
                Ctl::Quit => Ctl::Quit,
                _ => Ctl::Stop,
            };
            let _ = w.ctl.send(msg);
        }
        let deadline = Instant::now() + limit;
        for w in all {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = w.done.recv_timeout(left);
        }
    }
}

/// The line for a retired worker thread that ended: nginx's `worker
/// process PID exited with code N`, naming the thread (its id is the one
/// in its own log lines' `PID#TID`) when it reported it.
fn retired_exit(tid: i32, code: i32) -> String {
    if tid == 0 {
        return format!("worker thread of the previous configuration exited with code {code}");
    }
    format!("worker thread {tid} of the previous configuration exited with code {code}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn retired_workers_are_logged_as_nginx_logs_old_workers() {
        assert_eq!(super::retired_exit(42, 0), "worker thread 42 of the previous configuration exited with code 0");
        assert!(super::retired_exit(0, 1).ends_with("exited with code 1"));
    }
}
