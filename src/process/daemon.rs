//! `daemon on` without fork(): the foreground process re-executes itself
//! as a detached child and relays the child's startup messages, exiting 0
//! once the child reports it is serving, or 1 with the child's error. A
//! failed start is therefore reported on the terminal, as nginx does.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

pub const ENV: &str = "SLUICE_DAEMON_CHILD";
const READY: &[u8] = b"\0sluice-ready\n";

pub fn is_child() -> bool {
    std::env::var_os(ENV).is_some()
}

pub fn run_parent() -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sluice: [emerg] cannot find own executable to daemonize ({e})");
            return 1;
        }
    };
    let mut child = match Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: [emerg] daemonizing failed ({e})");
            return 1;
        }
    };
    let mut out = Vec::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_end(&mut out);
    }
    let ready = out.ends_with(READY);
    let text = if ready { &out[..out.len() - READY.len()] } else { &out[..] };
    let _ = std::io::stderr().write_all(text);
    if ready {
        return 0;
    }
    match child.wait() {
        Ok(s) if s.success() => 0,
        _ => 1,
    }
}

/// In the child, before any thread starts: a new session, no terminal.
pub fn detach() {
    let _ = rustix::process::setsid();
}

/// Startup succeeded: tell the parent, then let go of its pipe.
pub fn ready() {
    if !is_child() {
        return;
    }
    let _ = std::io::stderr().write_all(READY);
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}
