//! The serving process's side of the master's channel (`supervisor`,
//! `handoff`): it receives the master's listening sockets before reading
//! its configuration, and reports its own after starting and after each
//! reload, then that it serves.

use std::os::fd::{AsFd, OwnedFd};

use super::handoff::{self, Msg, Receiver};
use super::supervisor::SERVING_ENV;
use crate::listener::ListenerSet;

pub struct Link {
    fd: OwnedFd,
    /// The master is a daemon still waiting to report its start: let go
    /// of its stderr pipe before saying we serve.
    daemon: bool,
}

/// In a serving process: the channel (given as standard input) and the
/// master's sockets. Err when the channel cannot be read; None when this
/// is not a serving process.
pub fn attach() -> Option<Result<(Link, ListenerSet), String>> {
    let env = std::env::var(SERVING_ENV).ok()?;
    Some(attach_with(&env))
}

fn attach_with(env: &str) -> Result<(Link, ListenerSet), String> {
    let mut words = env.split(' ');
    let master: i32 = words.next().and_then(|w| w.parse().ok()).ok_or("bad SLUICE_SERVING")?;
    let daemon = words.next() == Some("daemon");
    // Ends with the master (it dies only by SIGKILL or a bug: a serving
    // process left alone would hold the ports against a restarted one).
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(master) {
        return Err("the master process is gone".into());
    }
    let fd = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 3).map_err(|e| e.to_string())?;
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = rustix::stdio::dup2_stdin(&null);
    }
    let mut rx = Receiver::default();
    let set = loop {
        match rx.recv(&fd).map_err(|e| format!("reading the master's sockets failed ({e})"))? {
            Some(Msg::Listeners(set)) => break set,
            Some(Msg::Passwords(list)) => crate::config::password_files::give(list),
            _ => continue,
        }
    };
    Ok((Link { fd, daemon }, ListenerSet::import(set)))
}

impl Link {
    /// Hands the master the sockets in use now.
    pub fn send_listeners(&self, set: &ListenerSet) -> Result<(), String> {
        handoff::send_listeners(self.fd.as_fd(), &set.export()).map_err(|e| e.to_string())
    }

    /// Says the process serves (once, after its start).
    pub fn ready(&self) {
        if self.daemon
            && let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null")
        {
            let _ = rustix::stdio::dup2_stderr(&null);
        }
        let _ = handoff::send_ready(self.fd.as_fd());
    }
}
