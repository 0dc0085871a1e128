//! The stream family's variables (nginx's `ngx_stream_variables.c` and
//! the modules' own): the names templates in `stream {}` may use, compiled
//! through [`NAMESPACE`], and their values for a session.

use std::cell::RefCell;
use std::io::Write;
use std::net::IpAddr;

use super::session::Session;
use crate::variables::{Namespace, SetVar, Var, VarSource};

/// The variables only stream has (`Var::Family`'s numbers).
pub mod id {
    pub const BYTES_RECEIVED: u16 = 0;
    pub const SESSION_TIME: u16 = 1;
    pub const PROTOCOL: u16 = 2;
    pub const UPSTREAM_BYTES_SENT: u16 = 3;
    pub const UPSTREAM_BYTES_RECEIVED: u16 = 4;
    pub const UPSTREAM_FIRST_BYTE_TIME: u16 = 5;
    pub const UPSTREAM_SESSION_TIME: u16 = 6;
    pub const SSL_PREREAD_SERVER_NAME: u16 = 7;
    pub const SSL_PREREAD_ALPN_PROTOCOLS: u16 = 8;
    pub const SSL_PREREAD_PROTOCOL: u16 = 9;
    pub const SSL_SESSION_ID: u16 = 10;
}

pub struct StreamNamespace;

pub static NAMESPACE: StreamNamespace = StreamNamespace;

thread_local! {
    /// The `set` variables of the stream block being built, by slot.
    static SETS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

pub fn reset() {
    SETS.with(|s| s.borrow_mut().clear());
}

/// The slot of a `set` variable (made on first use).
pub fn declare(name: &str) -> usize {
    let lower = name.to_ascii_lowercase();
    SETS.with(|s| {
        let mut s = s.borrow_mut();
        match s.iter().position(|n| *n == lower) {
            Some(i) => i,
            None => {
                s.push(lower);
                s.len() - 1
            }
        }
    })
}

fn slot(name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    SETS.with(|s| s.borrow().iter().position(|n| *n == lower))
}

fn builtin(lower: &str) -> Option<Var> {
    use id::*;
    Some(match lower {
        "remote_addr" => Var::RemoteAddr,
        "binary_remote_addr" => Var::BinaryRemoteAddr,
        "remote_port" => Var::RemotePort,
        "server_addr" => Var::ServerAddr,
        "server_port" => Var::ServerPort,
        "status" => Var::Status,
        "server_name" => Var::ServerName,
        "bytes_sent" => Var::BytesSent,
        "connection" => Var::Connection,
        "hostname" => Var::Hostname,
        "pid" => Var::Pid,
        "msec" => Var::Msec,
        "time_local" => Var::TimeLocal,
        "time_iso8601" => Var::TimeIso8601,
        "nginx_version" | "sluice_version" => Var::Version,
        "upstream_addr" => Var::UpstreamAddr,
        "upstream_connect_time" => Var::UpstreamConnectTime,
        "proxy_protocol_addr" => Var::ProxyProtocolAddr,
        "proxy_protocol_port" => Var::ProxyProtocolPort,
        "proxy_protocol_server_addr" => Var::ProxyProtocolServerAddr,
        "proxy_protocol_server_port" => Var::ProxyProtocolServerPort,
        n if n.starts_with("proxy_protocol_tlv_") => {
            Var::ProxyProtocolTlv(n["proxy_protocol_tlv_".len()..].to_string())
        }
        "realip_remote_addr" => Var::RealipRemoteAddr,
        "realip_remote_port" => Var::RealipRemotePort,
        "ssl_protocol" => Var::SslProtocol,
        "ssl_cipher" => Var::SslCipher,
        "ssl_server_name" => Var::SslServerName,
        "ssl_session_reused" => Var::SslSessionReused,
        "ssl_alpn_protocol" => Var::SslAlpnProtocol,
        "ssl_client_verify" => Var::SslClientVerify,
        "ssl_session_id" => Var::Family(SSL_SESSION_ID),
        n if n.starts_with("ssl_client_") => Var::SslClient(crate::variables::client_cert_var(n)?),
        "limit_conn_status" => Var::LimitConnStatus,
        "bytes_received" => Var::Family(BYTES_RECEIVED),
        "session_time" => Var::Family(SESSION_TIME),
        "protocol" => Var::Family(PROTOCOL),
        "upstream_bytes_sent" => Var::Family(UPSTREAM_BYTES_SENT),
        "upstream_bytes_received" => Var::Family(UPSTREAM_BYTES_RECEIVED),
        "upstream_first_byte_time" => Var::Family(UPSTREAM_FIRST_BYTE_TIME),
        "upstream_session_time" => Var::Family(UPSTREAM_SESSION_TIME),
        "ssl_preread_server_name" => Var::Family(SSL_PREREAD_SERVER_NAME),
        "ssl_preread_alpn_protocols" => Var::Family(SSL_PREREAD_ALPN_PROTOCOLS),
        "ssl_preread_protocol" => Var::Family(SSL_PREREAD_PROTOCOL),
        _ => return None,
    })
}

impl Namespace for StreamNamespace {
    fn resolve(&self, name: &str) -> Option<Var> {
        let named = || crate::config::captures::is_defined(name).then(|| Var::Named(name.into()));
        if let Some(slot) = slot(name) {
            let fallback = crate::variables::block_var(name).or_else(named);
            let set = SetVar { slot, name: name.to_ascii_lowercase(), fallback };
            return Some(Var::Set(std::sync::Arc::new(set)));
        }
        builtin(&name.to_ascii_lowercase()).or_else(|| crate::variables::block_var(name)).or_else(named)
    }
}

fn push_u64(out: &mut Vec<u8>, n: u64) {
    let _ = write!(out, "{n}");
}

/// nginx's `%T.%03M`: seconds with milliseconds.
pub fn push_ms(out: &mut Vec<u8>, ms: u64) {
    let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
}

fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    let _ = write!(out, "{ip}");
}

/// `$time_iso8601`: local time with its offset.
fn push_iso8601(out: &mut Vec<u8>) {
    let secs = crate::clock::now_secs() as i64;
    let off = chrono::FixedOffset::east_opt(crate::clock::offset())
        .unwrap_or(chrono::FixedOffset::east_opt(0).expect("zero offset"));
    if let Some(t) = chrono::DateTime::from_timestamp(secs, 0) {
        let _ = write!(out, "{}", t.with_timezone(&off).format("%Y-%m-%dT%H:%M:%S%:z"));
    }
}

/// A per-try list, joined as nginx joins them (", ").
fn push_list<T>(out: &mut Vec<u8>, items: &[T], f: impl Fn(&mut Vec<u8>, &T)) {
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        f(out, it);
    }
}

impl Session {
    /// The address a geoip2 variable looks up: `source=`'s value, else the
    /// client (after realip).
    fn geoip2_address(&self, g: &crate::geoip2::Geoip2Var) -> Option<std::net::IpAddr> {
        match g.source() {
            Some(t) => crate::geoip2::parse_addr(&t.render_to_vec(self)),
            None => (!self.client_unix.get()).then(|| self.client.get().ip()),
        }
    }
}

impl VarSource for Session {
    /// A ClientHello without ALPN has an empty `$ssl_preread_alpn_protocols`
    /// (logged as nothing), unlike a session with no ClientHello (`-`).
    fn empty_found(&self, var: &Var) -> bool {
        match var {
            Var::Family(id::SSL_PREREAD_SERVER_NAME | id::SSL_PREREAD_ALPN_PROTOCOLS | id::SSL_PREREAD_PROTOCOL) => {
                self.preread.borrow().is_some()
            }
            Var::Set(_) => true,
            // An empty string in the database is a value (logged as nothing).
            Var::Geoip2(g) => g.value(self.geoip2_address(g), &mut Vec::new()),
            _ => false,
        }
    }

    fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
        use id::*;
        match var {
            // A unix-domain client (nginx's `AF_UNIX`): `unix:` and the
            // name a datagram client bound, no port.
            Var::RemoteAddr | Var::BinaryRemoteAddr if self.client_unix.get() => {
                out.extend_from_slice(b"unix:");
                out.extend_from_slice(&self.unix_name);
            }
            Var::RemotePort if self.client_unix.get() => {}
            Var::RealipRemoteAddr if self.addr.unix.is_some() => {
                out.extend_from_slice(b"unix:");
                out.extend_from_slice(&self.unix_name);
            }
            Var::RealipRemotePort | Var::ServerPort if self.addr.unix.is_some() => {}
            Var::ServerAddr if self.addr.unix.is_some() => {
                out.extend_from_slice(b"unix:");
                out.extend_from_slice(self.addr.unix.as_deref().unwrap_or("").as_bytes());
            }
            Var::RemoteAddr => push_ip(out, self.client.get().ip()),
            Var::BinaryRemoteAddr => match self.client.get().ip() {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            },
            Var::RemotePort => {
                let p = self.client.get().port();
                if p != 0 {
                    push_u64(out, p.into())
                }
            }
            Var::RealipRemoteAddr => push_ip(out, self.peer.ip()),
            Var::RealipRemotePort => push_u64(out, self.peer.port().into()),
            Var::ServerAddr => push_ip(out, self.local.ip()),
            Var::ServerPort => push_u64(out, self.local.port().into()),
            Var::Status => push_u64(out, self.status.get().into()),
            Var::ServerName => out.extend_from_slice(self.server().name.as_bytes()),
            Var::BytesSent => push_u64(out, self.bytes_sent.get()),
            Var::Connection => push_u64(out, self.id),
            Var::Hostname => out.extend_from_slice(crate::process::hostname().as_bytes()),
            Var::Pid => push_u64(out, std::process::id().into()),
            Var::Msec => push_ms(out, crate::clock::unix_now_ms()),
            Var::TimeLocal => crate::clock::push_time_local(out),
            Var::TimeIso8601 => push_iso8601(out),
            Var::Version => out.extend_from_slice(crate::process::build_info::NGINX_VERSION.as_bytes()),
            Var::ProxyProtocolAddr
            | Var::ProxyProtocolPort
            | Var::ProxyProtocolServerAddr
            | Var::ProxyProtocolServerPort => {
                if let Some(p) = &self.proxy_protocol {
                    match var {
                        Var::ProxyProtocolAddr => out.extend_from_slice(p.src_addr.as_bytes()),
                        Var::ProxyProtocolPort => push_u64(out, p.src_port.into()),
                        Var::ProxyProtocolServerAddr => out.extend_from_slice(p.dst_addr.as_bytes()),
                        _ => push_u64(out, p.dst_port.into()),
                    }
                }
            }
            Var::ProxyProtocolTlv(name) => {
                if let Some(v) = self.proxy_protocol.as_ref().and_then(|p| p.tlv(name)) {
                    out.extend_from_slice(&v);
                }
            }
            Var::UpstreamAddr => push_list(out, &self.up.borrow().tries, |o, t| o.extend_from_slice(t.addr.as_bytes())),
            Var::UpstreamConnectTime => push_list(out, &self.up.borrow().tries, |o, t| match t.connect_ms {
                Some(ms) => push_ms(o, ms),
                None => o.push(b'-'),
            }),
            Var::Family(UPSTREAM_BYTES_SENT) => push_list(out, &self.up.borrow().tries, |o, t| push_u64(o, t.sent)),
            Var::Family(UPSTREAM_BYTES_RECEIVED) => {
                push_list(out, &self.up.borrow().tries, |o, t| push_u64(o, t.received))
            }
            Var::Family(UPSTREAM_FIRST_BYTE_TIME) => {
                push_list(out, &self.up.borrow().tries, |o, t| match t.first_byte_ms {
                    Some(ms) => push_ms(o, ms),
                    None => o.push(b'-'),
                })
            }
            Var::Family(UPSTREAM_SESSION_TIME) => push_list(out, &self.up.borrow().tries, |o, t| match t.session_ms {
                Some(ms) => push_ms(o, ms),
                None => o.push(b'-'),
            }),
            Var::Family(BYTES_RECEIVED) => push_u64(out, self.bytes_received.get()),
            Var::Family(SESSION_TIME) => push_ms(out, crate::clock::since_ms(self.start)),
            Var::Family(PROTOCOL) => out.extend_from_slice(if self.udp { b"UDP" } else { b"TCP" }),
            Var::Family(SSL_PREREAD_SERVER_NAME | SSL_PREREAD_ALPN_PROTOCOLS | SSL_PREREAD_PROTOCOL) => {
                if let Some(h) = self.preread.borrow().as_ref() {
                    match var {
                        Var::Family(SSL_PREREAD_SERVER_NAME) => out.extend_from_slice(&h.server_name),
                        Var::Family(SSL_PREREAD_ALPN_PROTOCOLS) => out.extend_from_slice(&h.alpn),
                        _ => out.extend_from_slice(h.protocol.as_bytes()),
                    }
                }
            }
            Var::SslProtocol | Var::SslCipher | Var::SslServerName | Var::SslSessionReused | Var::SslAlpnProtocol => {
                if let Some(t) = self.tls.borrow().as_ref() {
                    match var {
                        Var::SslProtocol => out.extend_from_slice(t.protocol.as_bytes()),
                        Var::SslCipher => out.extend_from_slice(t.cipher.as_bytes()),
                        Var::SslServerName => out.extend_from_slice(t.server_name.as_bytes()),
                        Var::SslAlpnProtocol => out.extend_from_slice(&t.alpn),
                        _ => out.extend_from_slice(if t.resumed { b"r" } else { b"." }),
                    }
                }
            }
            Var::SslClientVerify => {
                if let Some(t) = self.tls.borrow().as_ref() {
                    out.extend_from_slice(t.client_verify().as_bytes())
                }
            }
            Var::SslClient(which) => {
                if let Some(c) = self.tls.borrow().as_ref().and_then(|t| t.client_cert.as_ref()) {
                    crate::tls::client_cert::var(c, *which, out)
                }
            }
            // rustls does not show a server the session's ID: empty, as
            // nginx's is for a session resumed by a TLS 1.3 ticket.
            Var::Family(SSL_SESSION_ID) => {}
            Var::LimitConnStatus => out.extend_from_slice(self.limit_status.get().as_bytes()),
            Var::Geo(g) => {
                let client = (!self.client_unix.get()).then(|| self.client.get());
                out.extend_from_slice(g.eval(self, client, &[]))
            }
            Var::Geoip(g) => {
                g.value((!self.client_unix.get()).then(|| self.client.get().ip()), out);
            }
            Var::Geoip2(g) => {
                g.value(self.geoip2_address(g), out);
            }
            Var::Split(sc) => out.extend_from_slice(sc.eval(self)),
            Var::Map(m) => m.eval(self, Some(&self.named), &|_| {}, out),
            Var::Named(name) => {
                if let Some((_, v)) = self.named.borrow().iter().find(|(n, _)| **n == **name) {
                    out.extend_from_slice(v);
                }
            }
            Var::Set(sv) => {
                let done = self.vars.borrow().get(sv.slot).is_some_and(|v| match v {
                    Some(v) => {
                        out.extend_from_slice(v);
                        true
                    }
                    None => false,
                });
                if !done && let Some(f) = &sv.fallback {
                    self.write_var(f, out);
                }
            }
            _ => {}
        }
    }
}
