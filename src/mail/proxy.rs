//! nginx's `ngx_mail_proxy_module`: connects to the backend the
//! authentication server named, logs in there with the protocol's own
//! commands (IMAP LOGIN with literals, POP3 USER/PASS, SMTP HELO/EHLO,
//! XCLIENT, AUTH PLAIN or MAIL FROM/RCPT TO), tells the client, passes on
//! what the client pipelined after its credentials, then relays bytes
//! both ways until one side closes or `proxy_timeout` passes in silence.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::conf::Protocol;
use super::parse::encode_base64;
use super::session::{Backend, Method, Session};
use crate::log::error::Level;

/// The backend's side during the login: a connection and the bytes read
/// from it not yet taken.
struct Up {
    tcp: TcpStream,
    buf: Vec<u8>,
    cap: usize,
    timeout: Duration,
}

/// What a backend answer should be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `* OK` (IMAP greeting).
    ImapOk,
    /// `+` (IMAP continuation).
    Plus,
    /// The tagged answer to the IMAP LOGIN (untagged lines before it are
    /// passed on with it).
    Tagged,
    /// `+OK` (POP3).
    PopOk,
    /// An SMTP reply whose code starts with 2 (the last line of a
    /// multi-line one).
    Smtp2,
    /// SMTP `235` (AUTH).
    Smtp235,
    /// Any SMTP reply (RCPT TO's, passed on).
    SmtpAny,
}

impl Up {
    async fn send(&mut self, data: &[u8]) -> Result<(), String> {
        match tokio::time::timeout(self.timeout, self.tcp.write_all(data)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("send() failed ({})", crate::process::signal::os_error(&e))),
            Err(_) => Err("upstream timed out (110: Connection timed out)".into()),
        }
    }

    /// Reads until a whole answer of the kind expected is there: Ok(the
    /// answer's bytes, taken from the buffer) if it is that kind, Err(its
    /// bytes) when it is another, Err(empty) when the backend is gone.
    async fn answer(&mut self, expect: Expect, tag: &[u8]) -> Result<Vec<u8>, Result<Vec<u8>, String>> {
        loop {
            if let Some(end) = complete(&self.buf, expect, tag) {
                let ans: Vec<u8> = self.buf.drain(..end).collect();
                return if good(&ans, expect, tag) { Ok(ans) } else { Err(Ok(ans)) };
            }
            if self.buf.len() >= self.cap {
                return Err(Ok(std::mem::take(&mut self.buf)));
            }
            let mut chunk = vec![0u8; self.cap - self.buf.len()];
            match tokio::time::timeout(self.timeout, self.tcp.read(&mut chunk)).await {
                Ok(Ok(0)) => return Err(Err("upstream prematurely closed connection".into())),
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Ok(Err(e)) => return Err(Err(format!("recv() failed ({})", crate::process::signal::os_error(&e)))),
                Err(_) => return Err(Err("upstream timed out (110: Connection timed out)".into())),
            }
        }
    }
}

/// Where the answer ends (after its last line), once it is whole.
fn complete(buf: &[u8], expect: Expect, tag: &[u8]) -> Option<usize> {
    let mut pos = 0;
    while let Some(n) = memchr::memchr(b'\n', &buf[pos..]) {
        let line = &buf[pos..pos + n + 1];
        pos += n + 1;
        let last = match expect {
            Expect::Tagged => !line.starts_with(b"* ") || tag.is_empty(),
            Expect::Smtp2 | Expect::Smtp235 | Expect::SmtpAny => line.get(3) != Some(&b'-'),
            _ => true,
        };
        if last {
            return Some(pos);
        }
    }
    None
}

fn good(ans: &[u8], expect: Expect, tag: &[u8]) -> bool {
    let last = last_line(ans);
    match expect {
        Expect::ImapOk => last.starts_with(b"* OK"),
        Expect::Plus => last.starts_with(b"+"),
        Expect::Tagged => {
            last.len() > tag.len() + 2 && last.starts_with(tag) && last[tag.len() + 1..].starts_with(b"OK")
        }
        Expect::PopOk => last.starts_with(b"+OK"),
        Expect::Smtp2 => last.first() == Some(&b'2'),
        Expect::Smtp235 => last.starts_with(b"235"),
        Expect::SmtpAny => true,
    }
}

fn last_line(ans: &[u8]) -> &[u8] {
    let body = ans.strip_suffix(b"\n").unwrap_or(ans);
    match memchr::memrchr(b'\n', body) {
        Some(i) => &ans[i + 1..],
        None => ans,
    }
}

/// SMTP's xtext (RFC 1891) for XCLIENT's LOGIN.
fn xtext(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    for &b in v {
        if b <= b' ' || b >= 0x7f || b == b'+' || b == b'=' {
            out.extend_from_slice(format!("+{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

fn line(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = parts.concat();
    v.extend_from_slice(b"\r\n");
    v
}

/// Proxies the session to `b`.
pub async fn run(s: &mut Session, b: Backend) {
    let conf = s.conf().clone();
    let connect = tokio::time::timeout(conf.timeout, TcpStream::connect(b.addr)).await;
    let tcp = match connect {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            let msg =
                format!("connect() failed ({}) while connecting to upstream", crate::process::signal::os_error(&e));
            s.log(Level::Error, format_args!("{msg}, upstream: {}", b.name));
            fail(s).await;
            return;
        }
        Err(_) => {
            s.log(
                Level::Error,
                format_args!(
                    "upstream timed out (110: Connection timed out) while connecting to upstream, upstream: {}",
                    b.name
                ),
            );
            fail(s).await;
            return;
        }
    };
    let _ = tcp.set_nodelay(true);
    let mut up = Up { tcp, buf: Vec::new(), cap: conf.proxy_buffer.max(64), timeout: conf.timeout };
    if conf.proxy_protocol {
        // A unix-domain client has no addresses to tell (nginx: UNKNOWN).
        let header = if s.client_unix || s.addr.unix.is_some() {
            b"PROXY UNKNOWN\r\n".to_vec()
        } else {
            crate::proxy_protocol::v1_line(s.client, s.local)
        };
        if let Err(e) = up.send(&header).await {
            s.log(
                Level::Error,
                format_args!("{e} while sending PROXY protocol header to upstream, upstream: {}", b.name),
            );
            fail(s).await;
            return;
        }
    }
    let to_client = match login(s, &mut up).await {
        Ok(reply) => reply,
        Err(Ok(ans)) => {
            let text = String::from_utf8_lossy(last_line(&ans)).trim_end().to_string();
            let level = if conf.proxy_pass_error_message { Level::Info } else { Level::Error };
            s.log(
                level,
                format_args!(
                    "upstream sent invalid response: \"{text}\" while reading response from upstream, upstream: {}",
                    b.name
                ),
            );
            if conf.proxy_pass_error_message && !ans.is_empty() {
                let mut out = ans;
                if s.protocol == Protocol::Imap && !s.tag.is_empty() && out.starts_with(b"* ") {
                    out = last_line(&out).to_vec();
                }
                s.send(&out).await;
            } else {
                fail(s).await;
            }
            return;
        }
        Err(Err(e)) => {
            s.log(Level::Error, format_args!("{e} while reading response from upstream, upstream: {}", b.name));
            fail(s).await;
            return;
        }
    };
    if !s.send(&to_client).await {
        return;
    }
    // What the client pipelined after its credentials, and what the
    // backend sent after its answer.
    let pending = std::mem::take(&mut s.buf);
    if !pending.is_empty() && up.tcp.write_all(&pending).await.is_err() {
        return;
    }
    let early = std::mem::take(&mut up.buf);
    if !early.is_empty() && !s.send(&early).await {
        return;
    }
    s.log(Level::Info, format_args!("client logged in, upstream: {}", b.name));
    relay(s, up.tcp, &b.name).await;
}

/// The protocol's internal error answer, then the session ends.
async fn fail(s: &mut Session) {
    let r: &[u8] = match s.protocol {
        Protocol::Imap => b"* BAD internal server error\r\n",
        Protocol::Pop3 => b"-ERR internal server error\r\n",
        Protocol::Smtp => b"451 4.3.2 Internal server error\r\n",
    };
    s.send(r).await;
}

/// The login on the backend; Ok(what to tell the client).
async fn login(s: &mut Session, up: &mut Up) -> Result<Vec<u8>, Result<Vec<u8>, String>> {
    let conf = s.conf().clone();
    match s.protocol {
        Protocol::Imap => {
            let mut tag = s.tag.clone();
            if tag.is_empty() {
                tag = b"*".to_vec();
            }
            up.answer(Expect::ImapOk, b"").await?;
            let head = format!(" LOGIN {{{}}}", s.login.len());
            up.send(&line(&[&tag, head.as_bytes()])).await.map_err(Err)?;
            up.answer(Expect::Plus, b"").await?;
            let rest = format!(" {{{}}}", s.passwd.len());
            up.send(&line(&[&s.login, rest.as_bytes()])).await.map_err(Err)?;
            up.answer(Expect::Plus, b"").await?;
            up.send(&line(&[&s.passwd])).await.map_err(Err)?;
            up.answer(Expect::Tagged, &tag).await
        }
        Protocol::Pop3 => {
            up.answer(Expect::PopOk, b"").await?;
            up.send(&line(&[b"USER ", &s.login])).await.map_err(Err)?;
            up.answer(Expect::PopOk, b"").await?;
            up.send(&line(&[b"PASS ", &s.passwd])).await.map_err(Err)?;
            up.answer(Expect::PopOk, b"").await
        }
        Protocol::Smtp => {
            up.answer(Expect::Smtp2, b"").await?;
            let verb: &[u8] = if s.esmtp || conf.xclient { b"EHLO " } else { b"HELO " };
            up.send(&line(&[verb, conf.server_name.as_bytes()])).await.map_err(Err)?;
            up.answer(Expect::Smtp2, b"").await?;
            if conf.xclient {
                let addr = if s.client_unix { s.client_text() } else { xclient_addr(s.client.ip()) };
                let mut x = format!("XCLIENT ADDR={addr}").into_bytes();
                if !s.login.is_empty() && !conf.proxy_smtp_auth {
                    x.extend_from_slice(b" LOGIN=");
                    x.extend_from_slice(&xtext(&s.login));
                }
                x.extend_from_slice(b" NAME=");
                x.extend_from_slice(s.host.as_deref().unwrap_or("[UNAVAILABLE]").as_bytes());
                up.send(&line(&[&x])).await.map_err(Err)?;
                up.answer(Expect::Smtp2, b"").await?;
                if !s.smtp_helo.is_empty() {
                    let verb: &[u8] = if s.esmtp { b"EHLO " } else { b"HELO " };
                    up.send(&line(&[verb, &s.smtp_helo])).await.map_err(Err)?;
                    up.answer(Expect::Smtp2, b"").await?;
                }
            }
            if s.method == Method::None {
                up.send(&line(&[&s.smtp_from])).await.map_err(Err)?;
                up.answer(Expect::Smtp2, b"").await?;
                up.send(&line(&[&s.smtp_to])).await.map_err(Err)?;
                return up.answer(Expect::SmtpAny, b"").await;
            }
            if conf.proxy_smtp_auth {
                let plain = [b"\0".as_slice(), &s.login, b"\0", &s.passwd].concat();
                up.send(&line(&[b"AUTH PLAIN ", encode_base64(&plain).as_bytes()])).await.map_err(Err)?;
                up.answer(Expect::Smtp235, b"").await?;
            }
            Ok(b"235 2.0.0 OK\r\n".to_vec())
        }
    }
}

fn xclient_addr(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("IPV6:{v6}"),
    }
}

/// Bytes both ways; ends when either side closes or neither sent for
/// `proxy_timeout`.
async fn relay(s: &mut Session, mut tcp: TcpStream, name: &str) {
    let conf = s.conf().clone();
    let Some(client) = s.conn.as_mut() else { return };
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut br, mut bw) = tcp.split();
    let mut a = vec![0u8; conf.proxy_buffer.max(1024)];
    let mut b = vec![0u8; conf.proxy_buffer.max(1024)];
    let mut timed_out = false;
    loop {
        tokio::select! {
            r = cr.read(&mut a) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => if bw.write_all(&a[..n]).await.is_err() { break },
            },
            r = br.read(&mut b) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if cw.write_all(&b[..n]).await.is_err() || cw.flush().await.is_err() { break }
                }
            },
            _ = tokio::time::sleep(conf.proxy_timeout) => { timed_out = true; break }
        }
    }
    let _ = cw.shutdown().await;
    if timed_out {
        s.log(
            Level::Info,
            format_args!("client timed out (110: Connection timed out) while proxying, upstream: {name}"),
        );
    } else {
        s.log(Level::Info, format_args!("proxied session done while proxying, upstream: {name}"));
    }
}
