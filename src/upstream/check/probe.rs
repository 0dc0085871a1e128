//! The checker: one thread per worker generation running a tokio `current_thread` runtime,
//! with one task per checked peer. A peer is probed every `interval` (measured from the start
//! of one probe to the next, as Tengine measures from its last access); the first probes of an
//! upstream's peers are spread over one interval so they do not all go out together (Tengine
//! spreads them at random).
//!
//! Failures are logged as Tengine logs them, at `error` level: `connect() to ADDR failed (...)`,
//! `check time out with peer: ADDR `, `check protocol http error with peer: ADDR ` (a status
//! outside `check_http_expect_alive`, or no valid status line, which also logs `http parse
//! status line error with peer: ADDR `). A peer that accepts and then closes, or resets the
//! connection while the check is sent, fails silently, as in Tengine.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Check, CheckConf, Kind, class_bit};
use crate::log::error::Level;
use crate::log_error;
use crate::upstream::zone::Zone;

/// The longest status line read before giving up on it.
const MAX_STATUS_LINE: usize = 4096;

/// The checker thread's body: probes until `stop` fires or its sender is dropped.
pub(super) fn run(checks: Vec<Arc<Check>>, zones: Vec<Arc<Zone>>, stop: oneshot::Receiver<()>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            log_error!(Level::Alert, "upstream check runtime failed ({}); health checks are not running", e);
            return;
        }
    };
    rt.block_on(async move {
        for c in &checks {
            let n = c.peers.len().max(1) as u32;
            for j in 0..c.peers.len() {
                let offset = c.conf.interval.checked_mul(j as u32).map_or(c.conf.interval, |d| d / n);
                tokio::spawn(peer_loop(c.clone(), j, offset));
            }
        }
        for z in zones {
            tokio::spawn(zone_loop(z));
        }
        let _ = stop.await;
    });
    // Dropping the runtime cancels every probe at its next await.
}

async fn peer_loop(c: Arc<Check>, j: usize, offset: std::time::Duration) {
    let Some(addr) = c.peers.get(j).map(|p| p.addr) else { return };
    let mut tick = tokio::time::interval_at(Instant::now() + offset, c.conf.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ok = probe(&c.conf, addr).await;
        c.record(j, ok);
    }
}

/// The checks of an upstream whose peers change (`zone`): one task per
/// checked peer as in [`peer_loop`], started when the peer appears in the
/// zone's list and stopped when it leaves (the list is looked at once a
/// second, or every `interval` if shorter).
async fn zone_loop(z: Arc<Zone>) {
    let Some(conf) = z.conf.check.clone().map(Arc::new) else { return };
    let mut tasks: HashMap<(u64, SocketAddr), tokio::task::JoinHandle<()>> = HashMap::new();
    let mut seen = None;
    let poll = conf.interval.min(std::time::Duration::from_secs(1));
    loop {
        let v = z.version();
        if seen != Some(v) {
            seen = Some(v);
            let peers = z.current();
            let live: Vec<(u64, SocketAddr)> =
                peers.list.iter().filter(|p| p.shared.check.is_some()).map(|p| (p.id, p.conf.addr)).collect();
            tasks.retain(|k, t| {
                let keep = live.contains(k);
                if !keep {
                    t.abort();
                }
                keep
            });
            let fresh: Vec<&Arc<crate::upstream::zone::Peer>> = peers
                .list
                .iter()
                .filter(|p| p.shared.check.is_some() && !tasks.contains_key(&(p.id, p.conf.addr)))
                .collect();
            let n = fresh.len().max(1) as u32;
            for (j, p) in fresh.into_iter().enumerate() {
                let offset = conf.interval.checked_mul(j as u32).map_or(conf.interval, |d| d / n);
                tasks.insert((p.id, p.conf.addr), tokio::spawn(zone_peer(p.clone(), conf.clone(), offset)));
            }
        }
        tokio::time::sleep(poll).await;
    }
}

async fn zone_peer(p: Arc<crate::upstream::zone::Peer>, conf: Arc<CheckConf>, offset: std::time::Duration) {
    let Some(state) = p.shared.check.as_ref() else { return };
    let mut tick = tokio::time::interval_at(Instant::now() + offset, conf.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ok = probe(&conf, state.addr).await;
        state.record(&conf, ok);
    }
}

/// Why a probe failed, for the log line.
enum Fail {
    Connect(std::io::Error),
    BadStatusLine,
    /// A status outside `check_http_expect_alive`, or no status line at all.
    Protocol,
    /// Closed or reset by the peer: failed without a log line.
    Quiet,
}

/// One probe within `timeout`; logs a failure and returns whether the peer passed.
pub(super) async fn probe(conf: &CheckConf, addr: SocketAddr) -> bool {
    let fail = match tokio::time::timeout(conf.timeout, attempt(conf, addr)).await {
        Ok(Ok(())) => return true,
        Ok(Err(f)) => f,
        Err(_) => {
            log_error!(Level::Error, "check time out with peer: {} ", addr);
            return false;
        }
    };
    match fail {
        Fail::Connect(e) => {
            log_error!(Level::Error, "connect() to {} failed ({})", addr, crate::process::signal::os_error(&e));
        }
        Fail::BadStatusLine => {
            log_error!(Level::Error, "http parse status line error with peer: {} ", addr);
            log_error!(Level::Error, "check protocol http error with peer: {} ", addr);
        }
        Fail::Protocol => log_error!(Level::Error, "check protocol http error with peer: {} ", addr),
        Fail::Quiet => {}
    }
    false
}

async fn attempt(conf: &CheckConf, addr: SocketAddr) -> Result<(), Fail> {
    let mut s = TcpStream::connect(addr).await.map_err(Fail::Connect)?;
    match conf.kind {
        Kind::Tcp => {
            // Tengine's peek: data waiting or nothing yet is alive; end of stream or an
            // error is not.
            let mut b = [0u8; 1];
            match s.try_read(&mut b) {
                Ok(0) => Err(Fail::Quiet),
                Ok(_) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
                Err(_) => Err(Fail::Quiet),
            }
        }
        Kind::Http => {
            let _ = s.set_nodelay(true);
            s.write_all(&conf.send).await.map_err(|_| Fail::Quiet)?;
            let mut buf = Vec::with_capacity(1024);
            loop {
                if let Some(end) = memchr::memchr(b'\n', &buf) {
                    let code = status_code(&buf[..end]).ok_or(Fail::BadStatusLine)?;
                    return if conf.alive & class_bit(code) != 0 { Ok(()) } else { Err(Fail::Protocol) };
                }
                if buf.len() >= MAX_STATUS_LINE {
                    return Err(Fail::BadStatusLine);
                }
                match s.read_buf(&mut buf).await {
                    Ok(0) if buf.is_empty() => return Err(Fail::Quiet),
                    Ok(0) => return Err(Fail::Protocol),
                    Ok(_) => {}
                    Err(_) => return Err(Fail::Quiet),
                }
            }
        }
    }
}

/// The status code of an HTTP/1 status line (`HTTP/1.1 200 OK`, reason optional), as nginx's
/// status line parser accepts it.
fn status_code(line: &[u8]) -> Option<u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let rest = line.strip_prefix(b"HTTP/")?;
    let sp = memchr::memchr(b' ', rest)?;
    let (major, minor) = rest[..sp].split_at(memchr::memchr(b'.', &rest[..sp])?);
    let digits = |s: &[u8]| !s.is_empty() && s.len() <= 3 && s.iter().all(u8::is_ascii_digit);
    if !digits(major) || !digits(&minor[1..]) {
        return None;
    }
    let rest = &rest[sp..];
    let rest = &rest[rest.iter().position(|&b| b != b' ')?..];
    let (code, after) = rest.split_at(rest.len().min(3));
    if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) || after.first().is_some_and(|&b| b != b' ') {
        return None;
    }
    code.iter().try_fold(0u16, |n, &d| Some(n * 10 + u16::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::status_code;

    #[test]
    fn status_lines() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r"), Some(200));
        assert_eq!(status_code(b"HTTP/1.0 302\r"), Some(302));
        assert_eq!(status_code(b"HTTP/1.1  503 Busy"), Some(503));
        for bad in
            [&b"HTTP/1.1 20 OK"[..], b"HTTP/1.1 2000", b"HTTP/x.1 200", b"HTTP/1 200", b"SSH-2.0", b"", b"HTTP/1.1 "]
        {
            assert_eq!(status_code(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
