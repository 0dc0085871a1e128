//! `syslog:` targets of `access_log` and `error_log`, as nginx's
//! ngx_syslog: `syslog:server=ADDR[:PORT][,facility=F][,severity=S][,tag=T][,nohostname]`,
//! one datagram per line (UDP, default port 514, or a unix datagram
//! socket with `server=unix:/path`) in nginx's RFC 3164 form:
//! `<PRI>Nov 27 14:02:34 hostname tag: line`.
//!
//! Sending never blocks a worker: the socket is non-blocking and a line the
//! kernel will not take at once (EAGAIN, ENOBUFS, a receiver that is gone)
//! is dropped and counted; the worker reports its drops in the error log
//! once a second. A socket that failed is reconnected on the next line (a
//! failing connect at most once a second).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

const FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp", "clock", "authpriv", "ftp", "ntp",
    "audit", "alert", "cron", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];

/// nginx's error_log level names, in syslog severity order (0: emerg).
const SEVERITIES: [&str; 8] = ["emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"];

/// nginx's limit on a whole error-log datagram (NGX_SYSLOG_MAX_STR: the
/// 2048-byte error line plus the header).
const MAX_ERROR_DATAGRAM: usize = 2048 + 21 + 64 + 1 + 32 + 2;

#[derive(Clone, Debug, PartialEq)]
pub enum Dest {
    Udp(SocketAddr),
    Unix(PathBuf),
}

/// One `syslog:` target of the configuration.
pub struct Peer {
    /// The `server=` value as written, for messages.
    pub server: String,
    pub dest: Dest,
    pub facility: u8,
    /// For access_log lines (error lines carry their own level).
    pub severity: u8,
    pub tag: String,
    pub nohostname: bool,
    /// The machine's name, lowercased as nginx does.
    host: String,
    /// Lines dropped by every worker since start.
    dropped: AtomicU64,
    /// The socket error-log lines go through (rare lines from any thread);
    /// access-log lines use a socket per worker ([`Sender`]).
    shared: Mutex<Sender>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "syslog:{:?},{},{},{},{}", self.dest, self.facility, self.severity, self.tag, self.nohostname)
    }
}

impl PartialEq for Peer {
    fn eq(&self, o: &Peer) -> bool {
        (&self.dest, self.facility, self.severity, &self.tag, self.nohostname)
            == (&o.dest, o.facility, o.severity, &o.tag, o.nohostname)
    }
}

/// Parses what follows `syslog:`, with nginx's messages.
pub fn parse(spec: &str) -> Result<Peer, String> {
    let (mut server, mut facility, mut severity, mut tag, mut nohostname) = (None, None, None, None, false);
    for p in spec.split(',') {
        if let Some(v) = p.strip_prefix("server=") {
            if server.is_some() {
                return Err("duplicate syslog \"server\"".into());
            }
            server = Some((v.to_string(), parse_server(v)?));
        } else if let Some(v) = p.strip_prefix("facility=") {
            if facility.is_some() {
                return Err("duplicate syslog \"facility\"".into());
            }
            let i = FACILITIES.iter().position(|f| *f == v);
            facility = Some(i.ok_or_else(|| format!("unknown syslog facility \"{v}\""))? as u8);
        } else if let Some(v) = p.strip_prefix("severity=") {
            if severity.is_some() {
                return Err("duplicate syslog \"severity\"".into());
            }
            let i = SEVERITIES.iter().position(|s| *s == v);
            severity = Some(i.ok_or_else(|| format!("unknown syslog severity \"{v}\""))? as u8);
        } else if let Some(v) = p.strip_prefix("tag=") {
            if tag.is_some() {
                return Err("duplicate syslog \"tag\"".into());
            }
            if v.len() > 32 {
                return Err("syslog tag length exceeds 32".into());
            }
            if !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                return Err("syslog \"tag\" only allows alphanumeric characters and underscore".into());
            }
            tag = Some(v.to_string());
        } else if p == "nohostname" {
            nohostname = true;
        } else {
            return Err(format!("unknown syslog parameter \"{p}\""));
        }
    }
    let (server, dest) = server.ok_or("no syslog server specified")?;
    Ok(Peer {
        server,
        shared: Mutex::new(Sender::new(dest.clone())),
        dest,
        facility: facility.unwrap_or(23),
        severity: severity.unwrap_or(6),
        tag: tag.unwrap_or_else(|| "nginx".into()),
        nohostname,
        host: crate::process::hostname().to_ascii_lowercase(),
        dropped: AtomicU64::new(0),
    })
}

/// `unix:/path`, `host[:port]`, `[v6][:port]`; the first address of a name.
fn parse_server(v: &str) -> Result<Dest, String> {
    if let Some(path) = v.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(format!("no path in the unix domain socket in syslog server \"{v}\""));
        }
        return Ok(Dest::Unix(PathBuf::from(path)));
    }
    let bad = |why: &str| format!("{why} in syslog server \"{v}\"");
    let (host, port) = if let Some(rest) = v.strip_prefix('[') {
        let end = rest.find(']').ok_or_else(|| bad("invalid host"))?;
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(bad("invalid host")),
        };
        (&rest[..end], port)
    } else {
        match v.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (v, None),
        }
    };
    let port = match port {
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(bad("invalid port")),
        },
        None => 514,
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(Dest::Udp(SocketAddr::new(ip, port)));
    }
    match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(Dest::Udp(a)),
        _ => Err(bad("host not found")),
    }
}

impl Peer {
    /// Lines dropped so far by every worker.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// nginx's header: `<PRI>Mmm dd hh:mm:ss host tag: `.
    pub fn header(&self, severity: u8, secs: u64, offset: i32, out: &mut Vec<u8>) {
        out.push(b'<');
        crate::http::date::push_u64(out, u64::from(self.facility) * 8 + u64::from(severity));
        out.push(b'>');
        crate::http::date::syslog_time(secs, offset, out);
        out.push(b' ');
        if !self.nohostname {
            out.extend_from_slice(self.host.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(self.tag.as_bytes());
        out.extend_from_slice(b": ");
    }

    /// Sends an error-log line (with its newline, which is left out) at
    /// the line's level, through the shared socket.
    pub fn write_error(&self, level: u8, line: &[u8]) {
        let mut msg = Vec::with_capacity(line.len() + 96);
        self.header(level.saturating_sub(1), crate::clock::unix_now(), crate::clock::local_offset(), &mut msg);
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let room = MAX_ERROR_DATAGRAM.saturating_sub(msg.len());
        msg.extend_from_slice(&line[..line.len().min(room)]);
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if !s.send(&msg, crate::clock::unix_now()) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

enum Socket {
    Udp(UdpSocket),
    Unix(UnixDatagram),
}

impl Socket {
    fn connect(dest: &Dest) -> io::Result<Socket> {
        let s = match dest {
            Dest::Udp(a) => {
                let any: SocketAddr =
                    if a.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
                let s = UdpSocket::bind(any)?;
                s.connect(a)?;
                Socket::Udp(s)
            }
            Dest::Unix(p) => {
                let s = UnixDatagram::unbound()?;
                s.connect(p)?;
                Socket::Unix(s)
            }
        };
        match &s {
            Socket::Udp(u) => u.set_nonblocking(true)?,
            Socket::Unix(u) => u.set_nonblocking(true)?,
        }
        Ok(s)
    }

    fn send(&self, b: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Udp(s) => s.send(b),
            Socket::Unix(s) => s.send(b),
        }
    }
}

/// A connection to a peer: made on the first line, dropped after an error
/// other than a full queue and made again on the next line (a connect that
/// fails is tried again at most once a second).
pub struct Sender {
    dest: Dest,
    sock: Option<Socket>,
    /// When connecting last failed (unix seconds).
    failed_at: Option<u64>,
}

impl Sender {
    pub fn new(dest: Dest) -> Sender {
        Sender { dest, sock: None, failed_at: None }
    }

    /// One datagram, never waiting; false if it was dropped.
    pub fn send(&mut self, msg: &[u8], now: u64) -> bool {
        if self.sock.is_none() {
            if self.failed_at == Some(now) {
                return false;
            }
            match Socket::connect(&self.dest) {
                Ok(s) => {
                    self.sock = Some(s);
                    self.failed_at = None;
                }
                Err(_) => {
                    self.failed_at = Some(now);
                    return false;
                }
            }
        }
        let Some(s) = &self.sock else { return false };
        match s.send(msg) {
            Ok(_) => true,
            // A full queue: the line is dropped, the socket kept.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => false,
            Err(_) => {
                // The receiver went away (ECONNREFUSED, a unix socket
                // removed): connect again on the next line, as nginx does,
                // so a receiver that comes back gets it. Only a failing
                // connect waits a second.
                self.sock = None;
                false
            }
        }
    }
}

/// A worker's access-log target: its own socket, a reusable line buffer,
/// and its drops not yet reported.
pub struct AccessSender {
    pub peer: std::sync::Arc<Peer>,
    sender: Sender,
    pub buf: Vec<u8>,
    unreported: u64,
}

impl AccessSender {
    pub fn new(peer: std::sync::Arc<Peer>) -> AccessSender {
        AccessSender { sender: Sender::new(peer.dest.clone()), peer, buf: Vec::new(), unreported: 0 }
    }

    /// Starts a line in `buf`: the header, at the current second.
    pub fn begin(&mut self) {
        self.buf.clear();
        self.peer.header(self.peer.severity, crate::clock::now_secs(), crate::clock::offset(), &mut self.buf);
    }

    /// Sends `buf` (a rendered line: its newline is left out).
    pub fn finish(&mut self) {
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        if !self.sender.send(&self.buf, crate::clock::now_secs()) {
            self.unreported += 1;
            self.peer.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Once a second: says how many lines this worker dropped since the
    /// last report.
    pub fn report(&mut self) {
        if self.unreported > 0 {
            crate::log_error!(
                crate::log::error::Level::Warn,
                "{} access log lines to syslog server \"{}\" dropped",
                self.unreported,
                self.peer.server
            );
            self.unreported = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nginx_forms() {
        let p = parse("server=127.0.0.1").unwrap();
        assert_eq!(
            (p.dest.clone(), p.facility, p.severity, p.tag.as_str()),
            (Dest::Udp(([127, 0, 0, 1], 514).into()), 23, 6, "nginx")
        );
        let p = parse("server=[::1]:5514,facility=daemon,severity=warn,tag=web_1,nohostname").unwrap();
        assert_eq!(p.dest, Dest::Udp("[::1]:5514".parse().unwrap()));
        assert_eq!((p.facility, p.severity, p.tag.as_str(), p.nohostname), (3, 4, "web_1", true));
        assert_eq!(parse("server=unix:/dev/log").unwrap().dest, Dest::Unix("/dev/log".into()));
        assert_eq!(parse("tag=x").unwrap_err(), "no syslog server specified");
        assert_eq!(parse("server=1.2.3.4,facility=local9").unwrap_err(), "unknown syslog facility \"local9\"");
        assert_eq!(parse("server=1.2.3.4,severity=err").unwrap_err(), "unknown syslog severity \"err\"");
        assert_eq!(
            parse("server=1.2.3.4,tag=a-b").unwrap_err(),
            "syslog \"tag\" only allows alphanumeric characters and underscore"
        );
        assert_eq!(parse("server=1.2.3.4,x=1").unwrap_err(), "unknown syslog parameter \"x=1\"");
        assert!(parse("server=1.2.3.4:99999").is_err());
    }

    #[test]
    fn header_format() {
        let p = parse("server=127.0.0.1,tag=t,nohostname").unwrap();
        let mut out = Vec::new();
        // 2026-11-07 09:05:03 UTC
        p.header(6, 1794042303, 0, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "<190>Nov  7 09:05:03 t: ");
    }
}
