//! `-s stop|quit|reopen|reload`: signal the master named by the pid file.

use rustix::process::{Pid, Signal, kill_process};

use crate::config::Config;

pub fn os_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let t = e.to_string();
            format!("{}: {}", n, t.split(" (os error").next().unwrap_or(&t))
        }
        None => e.to_string(),
    }
}

/// The C library's text for an errno, without Rust's " (os error N)".
pub fn strerror(n: i32) -> String {
    let t = std::io::Error::from_raw_os_error(n).to_string();
    t.split(" (os error").next().unwrap_or(&t).to_string()
}

pub fn send(cfg: &Config, name: &str) -> Result<(), String> {
    let (sig, num) = match name {
        "stop" => (Signal::TERM, 15),
        "quit" => (Signal::QUIT, 3),
        "reopen" => (Signal::USR1, 10),
        "reload" => (Signal::HUP, 1),
        _ => return Err(format!("invalid option: \"-s {name}\"")),
    };
    let pid = super::pidfile::read(&cfg.main.pid)?;
    let p = Pid::from_raw(pid).ok_or_else(|| format!("invalid PID number \"{pid}\""))?;
    kill_process(p, sig).map_err(|e| format!("kill({}, {}) failed ({})", pid, num, os_error(&e.into())))
}
