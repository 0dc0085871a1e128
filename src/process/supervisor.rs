//! The master process (`master_process on`, the default), as nginx's: it
//! does not serve. It parses the configuration, opens the listening
//! sockets and the error logs, writes the pid file, and starts the serving
//! process (this binary again, `SLUICE_SERVING` set), which holds the
//! worker threads and does everything else, reloads included
//! (`process::master`). A fault Rust's unwinding cannot catch (a SIGSEGV or
//! abort in a C library, a stack overflow, the OOM killer) ends only the
//! serving process: the master logs it in nginx's words and starts a new
//! one on the same sockets at once, so the kernel keeps queueing new
//! connections meanwhile and none is refused.
//!
//! The serving process sends the master its listening sockets after it
//! starts and after each reload (`handoff`), so the master holds the ones
//! in use; a new serving process receives them before it reads its
//! configuration and reuses them by address.
//!
//! Signals sent to the master (the pid file names it) are passed on: HUP
//! (reload), USR1 (reopen, also done for the master's own error logs),
//! QUIT, TERM, INT. A serving process that keeps dying within 2 s of its
//! start is restarted after a growing pause (from the third crash in a
//! row, up to 5 s), logged, so a crash loop is never a busy loop.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tokio::io::Interest;
use tokio::net::UnixDatagram;
use tokio::signal::unix::{SignalKind, signal};

use super::handoff::{self, Msg, Receiver};
use std::path::PathBuf;

use crate::config::{Config, LoadOptions};
use crate::listener::ListenerSet;
use crate::log::error::Level;
use crate::log_error;

/// Set in the serving process's environment: the master's pid, then
/// ` daemon` when the master is a daemon still reporting its start.
pub const SERVING_ENV: &str = "SLUICE_SERVING";

/// A serving process that lived at least this long was not in a crash loop.
const STEADY: Duration = Duration::from_secs(2);
/// The longest pause before restarting a crashing serving process.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// This process is a serving process started by a master.
pub fn is_serving() -> bool {
    std::env::var_os(SERVING_ENV).is_some()
}

/// One serving process and the master's end of its channel.
struct Serving {
    child: Child,
    /// The SEQPACKET channel, driven as a datagram socket (tokio has no
    /// SEQPACKET type; the calls are the same).
    link: UnixDatagram,
    rx: Receiver,
    started: Instant,
    ready: bool,
    /// Its channel closed: it is exiting; `reap` will see it.
    closed: bool,
}

enum Stopping {
    No,
    Quit,
    Stop(Instant),
}

struct Supervisor {
    opts: LoadOptions,
    /// The pid file: all the master keeps of its configuration (the
    /// serving process reads its own; a copy of a large configuration
    /// here would double its memory).
    pid: PathBuf,
    listeners: ListenerSet,
    serving: Option<Serving>,
    /// Serving processes in a row that died before running `STEADY`.
    crashes: u32,
    restart_at: Option<Instant>,
    stopping: Stopping,
    /// Reload and reopen signals that came while no serving process was
    /// ready to handle them (its default action would end it): passed on
    /// once one is.
    held: Vec<Signal>,
}

pub fn run(cfg: Config, opts: LoadOptions) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            super::emerg(&opts, &e);
            return 1;
        }
    };
    rt.block_on(async_run(cfg, opts))
}

async fn async_run(cfg: Config, opts: LoadOptions) -> i32 {
    let sig = |k: SignalKind| signal(k);
    let (mut hup, mut quit, mut term, mut int, mut usr1, mut chld) = match (
        sig(SignalKind::hangup()),
        sig(SignalKind::quit()),
        sig(SignalKind::terminate()),
        sig(SignalKind::interrupt()),
        sig(SignalKind::user_defined1()),
        sig(SignalKind::child()),
    ) {
        (Ok(a), Ok(b), Ok(c), Ok(d), Ok(e), Ok(f)) => (a, b, c, d, e, f),
        _ => {
            super::emerg(&opts, "could not install signal handlers");
            return 1;
        }
    };
    // nginx's binary-upgrade signals: not supported, must not kill us.
    let mut usr2 = sig(SignalKind::user_defined2()).ok();
    let mut winch = sig(SignalKind::window_change()).ok();
    if let Err(e) = crate::log::error_file::open_all(&cfg.error_log_files) {
        super::emerg(&opts, &e);
        return 1;
    }
    crate::log::error::install(cfg.main.error_log.clone());
    if let Err(e) = super::prepare::check_roots(&cfg) {
        super::emerg(&opts, &e);
        return 1;
    }
    // The temporary and cache directories exist before any socket accepts,
    // as with one process (and nginx's master makes its paths).
    if let Err(e) = super::prepare::temp_dirs(&cfg) {
        super::emerg(&opts, &e);
        return 1;
    }
    let listeners = match ListenerSet::default().prepare(&cfg) {
        Ok(l) => l,
        Err(e) => {
            super::emerg(&opts, &e);
            return 1;
        }
    };
    let pid = cfg.main.pid.clone();
    drop(cfg);
    crate::worker::trim::release_free_memory();
    let mut s = Supervisor {
        opts,
        pid,
        listeners,
        serving: None,
        crashes: 0,
        restart_at: None,
        stopping: Stopping::No,
        held: Vec::new(),
    };
    if let Err(code) = s.first_start(&mut chld).await {
        return code;
    }
    // Written once the serving process serves: a pid file means the server
    // is up (signals sent before reach the master all the same).
    if let Err(e) = super::pidfile::write(&s.pid) {
        log_error!(Level::Alert, "{}", e);
    }
    super::daemon::ready();
    loop {
        tokio::select! {
            _ = hup.recv() => {
                log_error!(Level::Notice, "signal 1 (SIGHUP) received, reconfiguring");
                s.reload_own();
                s.forward(Signal::HUP);
            }
            _ = usr1.recv() => {
                log_error!(Level::Notice, "signal 10 (SIGUSR1) received, reopening logs");
                for e in crate::log::error_file::reopen_all() {
                    log_error!(Level::Alert, "{}", e);
                }
                s.forward(Signal::USR1);
            }
            _ = quit.recv() => {
                log_error!(Level::Notice, "signal 3 (SIGQUIT) received, shutting down gracefully");
                s.stopping = Stopping::Quit;
                s.stop_listening();
                s.forward(Signal::QUIT);
            }
            _ = term.recv() => {
                log_error!(Level::Notice, "signal 15 (SIGTERM) received, exiting");
                s.stopping = Stopping::Stop(Instant::now());
                s.stop_listening();
                s.forward(Signal::TERM);
            }
            _ = int.recv() => {
                log_error!(Level::Notice, "signal 2 (SIGINT) received, exiting");
                s.stopping = Stopping::Stop(Instant::now());
                s.stop_listening();
                s.forward(Signal::TERM);
            }
            _ = async { if let Some(x) = usr2.as_mut() { x.recv().await } else { std::future::pending().await } } => {
                log_error!(Level::Notice, "signal 12 (SIGUSR2) received: binary upgrade is not supported, ignored");
            }
            _ = async { if let Some(x) = winch.as_mut() { x.recv().await } else { std::future::pending().await } } => {}
            _ = chld.recv() => {}
            msg = next_msg(&mut s.serving) => s.handle(msg),
            _ = sleep_until(s.restart_at) => {
                s.restart_at = None;
                if matches!(s.stopping, Stopping::No) {
                    s.start();
                }
            }
            // SIGCHLD can coalesce with others; look again now and then.
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        s.reap();
        if let Stopping::Stop(since) = s.stopping
            && since.elapsed() > Duration::from_secs(10)
            && let Some(sv) = s.serving.as_mut()
        {
            let _ = sv.child.kill();
        }
        if !matches!(s.stopping, Stopping::No) && s.serving.is_none() {
            break;
        }
    }
    super::pidfile::remove(&s.pid);
    log_error!(Level::Notice, "exit");
    0
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// The next message from the serving process (pending forever without one).
async fn next_msg(serving: &mut Option<Serving>) -> std::io::Result<Option<Msg>> {
    let Some(sv) = serving.as_mut().filter(|s| !s.closed) else { return std::future::pending().await };
    loop {
        sv.link.readable().await?;
        match sv.link.try_io(Interest::READABLE, || sv.rx.recv(&sv.link)) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

impl Supervisor {
    /// Starts the first serving process and waits until it serves: if it
    /// exits with an error before that, the start failed (it said why on
    /// stderr), and so does the master, with its exit code. One killed by a
    /// signal crashed (its workers may already have taken a request): it
    /// is restarted as any crash is.
    async fn first_start(&mut self, chld: &mut tokio::signal::unix::Signal) -> Result<(), i32> {
        match self.spawn() {
            Ok(sv) => {
                log_error!(Level::Notice, "start worker process {}", sv.child.id());
                self.serving = Some(sv);
            }
            Err(e) => {
                super::emerg(&self.opts, format_args!("could not start the serving process ({e})"));
                return Err(1);
            }
        }
        loop {
            if self.serving.as_ref().is_some_and(|s| s.ready) {
                return Ok(());
            }
            match self.serving.as_mut() {
                None if self.restart_at.is_none() => return Err(1),
                None => {}
                Some(sv) => {
                    if let Ok(Some(status)) = sv.child.try_wait()
                        && status.signal().is_none()
                    {
                        return Err(status.code().unwrap_or(1).max(1));
                    }
                }
            }
            self.reap();
            tokio::select! {
                msg = next_msg(&mut self.serving) => self.handle(msg),
                _ = chld.recv() => {}
                _ = sleep_until(self.restart_at) => {
                    self.restart_at = None;
                    self.start();
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    /// Starts a serving process and hands it the listening sockets.
    fn start(&mut self) {
        match self.spawn() {
            Ok(sv) => {
                log_error!(Level::Notice, "start worker process {}", sv.child.id());
                self.serving = Some(sv);
            }
            Err(e) => {
                log_error!(Level::Alert, "could not start the serving process ({}); trying again in 1s", e);
                self.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
    }

    fn spawn(&self) -> std::io::Result<Serving> {
        let (mine, theirs) = handoff::pair()?;
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| "sluice".into());
        let mut env = std::process::id().to_string();
        if super::daemon::is_child() {
            env.push_str(" daemon");
        }
        // The image this process runs, even if the file was replaced
        // since (a package upgrade replaces the binary, as with nginx's
        // fork the serving process stays the same build as the master).
        let child = Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env(SERVING_ENV, env)
            .env_remove(super::daemon::ENV)
            .stdin(Stdio::from(theirs))
            .spawn()?;
        handoff::send_passwords(std::os::fd::AsFd::as_fd(&mine), &crate::config::password_files::read_so_far())?;
        handoff::send_listeners(std::os::fd::AsFd::as_fd(&mine), &self.listeners.export())?;
        let link = std::os::unix::net::UnixDatagram::from(mine);
        link.set_nonblocking(true)?;
        Ok(Serving {
            child,
            link: UnixDatagram::from_std(link)?,
            rx: Receiver::default(),
            started: Instant::now(),
            ready: false,
            closed: false,
        })
    }

    fn handle(&mut self, msg: std::io::Result<Option<Msg>>) {
        match msg {
            Ok(Some(Msg::Ready)) => {
                if let Some(sv) = self.serving.as_mut() {
                    sv.ready = true;
                }
                for sig in std::mem::take(&mut self.held) {
                    self.forward(sig);
                }
            }
            Ok(Some(Msg::Passwords(_))) => {}
            Ok(Some(Msg::Listeners(set))) => {
                // What the serving process uses now; the sockets it
                // dropped close here too.
                self.listeners = ListenerSet::import(set);
            }
            Ok(None) => {}
            Err(e) => {
                // Closed: the serving process is exiting, and `reap` will
                // see how. Anything else on the channel is a bug of ours:
                // logged, and the channel is no longer read either.
                if e.kind() != std::io::ErrorKind::UnexpectedEof {
                    log_error!(Level::Alert, "the serving process's channel: {}", e);
                }
                if let Some(sv) = self.serving.as_mut() {
                    sv.closed = true;
                }
            }
        }
    }

    /// Passes a signal on to the serving process; a reload or reopen for
    /// one that is not ready yet (or not there) waits for the next ready.
    fn forward(&mut self, sig: Signal) {
        let ready = self.serving.as_ref().is_some_and(|s| s.ready);
        if !ready && matches!(sig, Signal::HUP | Signal::USR1) {
            if !self.held.contains(&sig) {
                self.held.push(sig);
            }
            return;
        }
        if let Some(sv) = &self.serving
            && let Some(pid) = rustix::process::Pid::from_raw(sv.child.id() as i32)
        {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }

    /// Stopping: the master's copies of the listening sockets close now,
    /// so that once the serving process closes its own, new connections
    /// are refused instead of queueing.
    fn stop_listening(&mut self) {
        self.listeners = ListenerSet::default();
    }

    /// The master's own part of a reload: its error logs and pid file
    /// follow the new configuration. Errors are the serving process's to
    /// report (it reads the same files and keeps the old configuration).
    fn reload_own(&mut self) {
        if let Ok(cfg) = crate::config::load(&self.opts) {
            self.follow(cfg);
        }
        crate::worker::trim::release_free_memory();
    }

    fn follow(&mut self, cfg: Config) {
        if crate::log::error_file::open_all(&cfg.error_log_files).is_err() {
            return;
        }
        crate::log::error::install(cfg.main.error_log.clone());
        if cfg.main.pid != self.pid {
            if let Err(e) = super::pidfile::write(&cfg.main.pid) {
                log_error!(Level::Alert, "{}", e);
            }
            super::pidfile::remove(&self.pid);
            self.pid = cfg.main.pid.clone();
        }
    }

    /// Notices a serving process that exited: logged as nginx logs a
    /// worker's exit, and, unless the master is stopping, a new one starts
    /// now or after the crash loop's pause.
    fn reap(&mut self) {
        let Some(sv) = self.serving.as_mut() else { return };
        let status = match sv.child.try_wait() {
            Ok(Some(s)) => s,
            _ => return,
        };
        let pid = sv.child.id();
        let lived = sv.started.elapsed();
        self.serving = None;
        if !matches!(self.stopping, Stopping::No) {
            log_error!(Level::Notice, "worker process {} exited with code {}", pid, status.code().unwrap_or(0));
            return;
        }
        log_error!(Level::Alert, "{}", describe_exit(pid, status));
        self.crashes = if lived >= STEADY { 1 } else { self.crashes + 1 };
        let pause = pause_after(self.crashes);
        if pause.is_zero() {
            self.start();
        } else {
            log_error!(
                Level::Alert,
                "worker process exited {} times in a row within {}s of starting; starting a new one in {}ms",
                self.crashes,
                STEADY.as_secs(),
                pause.as_millis()
            );
            self.restart_at = Some(Instant::now() + pause);
        }
    }
}

/// nginx's line for a worker that died: `worker process 1234 exited on
/// signal 11 (core dumped)`, or `... exited with code 2`.
fn describe_exit(pid: u32, status: ExitStatus) -> String {
    match status.signal() {
        Some(sig) => format!(
            "worker process {pid} exited on signal {sig}{}",
            if status.core_dumped() { " (core dumped)" } else { "" }
        ),
        None => format!("worker process {pid} exited with code {}", status.code().unwrap_or(0)),
    }
}

/// The first two crashes in a row restart at once; each further one waits
/// twice as long as the one before, from 250 ms up to `MAX_PAUSE`.
fn pause_after(crashes: u32) -> Duration {
    if crashes <= 2 {
        return Duration::ZERO;
    }
    let ms = 250u64.saturating_mul(1u64 << (crashes - 3).min(16));
    Duration::from_millis(ms).min(MAX_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_loop_pauses_grow_to_a_bound() {
        let p: Vec<u64> = (1..=8).map(|n| pause_after(n).as_millis() as u64).collect();
        assert_eq!(p, [0, 0, 250, 500, 1000, 2000, 4000, 5000]);
        assert_eq!(pause_after(u32::MAX), MAX_PAUSE);
    }

    #[test]
    fn exits_are_described_as_nginx_does() {
        assert_eq!(describe_exit(7, ExitStatus::from_raw(11)), "worker process 7 exited on signal 11");
        assert_eq!(
            describe_exit(7, ExitStatus::from_raw(11 | 0x80)),
            "worker process 7 exited on signal 11 (core dumped)"
        );
        assert_eq!(describe_exit(7, ExitStatus::from_raw(2 << 8)), "worker process 7 exited with code 2");
    }
}
