//! The HTTP exchange with an OCSP responder: one `GET` with the DER
//! request in base64 after the responder's path (RFC 6960 A.1, as nginx
//! sends it), over HTTP/1.0, the answer read to the end of the
//! connection (at most `MAX_RESPONSE`), its head checked. The responder's
//! bytes are untrusted; `parse_answer` is fuzzed (`ocsp_response`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// nginx reads a responder's answer into a 16 KB buffer; a little more
/// room here, still bounded.
pub const MAX_RESPONSE: usize = 64 * 1024;

/// An `http://host[:port][/path]` responder (nginx refuses https ones).
#[derive(Clone, Debug, PartialEq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Url {
    pub fn parse(u: &[u8]) -> Result<Url, &'static str> {
        let u = std::str::from_utf8(u).map_err(|_| "invalid URL")?;
        let rest = if u.len() >= 7 && u[..7].eq_ignore_ascii_case("http://") {
            &u[7..]
        } else if u.len() >= 8 && u[..8].eq_ignore_ascii_case("https://") {
            return Err("\"https\" OCSP responders are not supported");
        } else {
            return Err("invalid URL prefix");
        };
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, p) = h.split_once(']').ok_or("invalid URL")?;
            (h, p.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or("invalid port in URL")?,
            None => 80,
        };
        if host.is_empty() || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err("invalid URL");
        }
        Ok(Url { host: host.to_string(), port, path: path.to_string() })
    }
}

/// Sends `body` and returns the peer and the response's DER; the error
/// names the peer when one was reached.
pub async fn post(
    url: &Url,
    body: &[u8],
    resolver: Option<&crate::resolver::ResolverConf>,
) -> Result<(String, Vec<u8>), (Option<String>, String)> {
    let addrs: Vec<SocketAddr> = match url.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, url.port)],
        Err(_) => {
            let Some(r) = resolver else {
                return Err((None, format!("no resolver defined to resolve {}", url.host)));
            };
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            match crate::resolver::query::addresses(r, &url.host, deadline).await {
                Ok((ips, _)) => ips.into_iter().map(|ip| SocketAddr::new(ip, url.port)).collect(),
                Err(f) => return Err((None, format!("{} could not be resolved ({})", url.host, f.nginx_text()))),
            }
        }
    };
    let mut last = (None, "no address".to_string());
    for addr in addrs {
        match exchange(addr, url, body).await {
            Ok(r) => return Ok((addr.to_string(), r)),
            Err(e) => last = (Some(addr.to_string()), e),
        }
    }
    Err(last)
}

async fn exchange(addr: SocketAddr, url: &Url, body: &[u8]) -> Result<Vec<u8>, String> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect() failed ({})", crate::process::signal::os_error(&e)))?;
    let host = if url.host.contains(':') { format!("[{}]", url.host) } else { url.host.clone() };
    // nginx puts the request after the path and a slash.
    let slash = if url.path.ends_with('/') { "" } else { "/" };
    let head = format!("GET {}{slash}{} HTTP/1.0\r\nHost: {}\r\n\r\n", url.path, escaped_base64(body), host);
    s.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("send() failed ({})", crate::process::signal::os_error(&e)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| format!("recv() failed ({})", crate::process::signal::os_error(&e)))?;
        if n == 0 {
            break;
        }
        if buf.len() + n > MAX_RESPONSE {
            return Err("OCSP responder sent too large response".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    if buf.is_empty() {
        return Err("OCSP responder prematurely closed connection".into());
    }
    parse_answer(&buf).map(|b| b.to_vec()).map_err(str::to_string)
}

/// Base64 with `+`, `/` and `=` escaped for a URI path.
fn escaped_base64(der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(der.len() * 2);
    let mut push = |c: u8| match c {
        b'+' => out.push_str("%2B"),
        b'/' => out.push_str("%2F"),
        b'=' => out.push_str("%3D"),
        c => out.push(c as char),
    };
    for chunk in der.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                push(B64[(n >> (18 - 6 * i) & 63) as usize]);
            } else {
                push(b'=');
            }
        }
    }
    out
}

/// The body of a responder's complete answer: status 200, and the body
/// cut at `Content-Length` when there is one.
pub fn parse_answer(buf: &[u8]) -> Result<&[u8], &'static str> {
    // The head ends at an empty line; bare LF line ends are taken too,
    // as nginx's parser does.
    let (end, sep) = (0..buf.len())
        .find_map(|i| match &buf[i..] {
            [b'\n', b'\r', b'\n', ..] => Some((i, 3)),
            [b'\n', b'\n', ..] => Some((i, 2)),
            _ => None,
        })
        .ok_or("OCSP responder sent invalid response")?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "OCSP responder sent invalid response")?;
    let body = &buf[end + sep..];
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let status = lines.next().unwrap_or("");
    let code = status
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .filter(|_| status.as_bytes().get(8) == Some(&b' '))
        .ok_or("OCSP responder sent invalid response")?;
    if code != "200" {
        return Err("OCSP responder sent an unexpected HTTP status");
    }
    let mut len = None;
    for l in lines {
        let (name, value) = l.split_once(':').ok_or("OCSP responder sent invalid response header")?;
        if name.trim().eq_ignore_ascii_case("content-type")
            && !value.trim().eq_ignore_ascii_case("application/ocsp-response")
        {
            return Err("OCSP responder sent invalid \"Content-Type\" header");
        }
        if name.trim().eq_ignore_ascii_case("content-length") {
            len = Some(value.trim().parse::<usize>().map_err(|_| "OCSP responder sent invalid response header")?);
        }
    }
    match len {
        Some(n) if n > body.len() => Err("OCSP responder prematurely closed connection"),
        Some(n) => Ok(&body[..n]),
        None => Ok(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse(b"http://127.0.0.1:8081").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("127.0.0.1", 8081, "/"));
        let u = Url::parse(b"HTTP://ocsp.example/x").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("ocsp.example", 80, "/x"));
        assert!(Url::parse(b"https://x/").is_err());
        assert!(Url::parse(b"http://x:0/").is_err());
        assert_eq!(Url::parse(b"http://[::1]:9/").unwrap().host, "::1");
    }

    #[test]
    fn answers() {
        let ok = b"HTTP/1.0 200 OK\r\nContent-Type: application/ocsp-response\r\nContent-Length: 3\r\n\r\nabcd";
        assert_eq!(parse_answer(ok), Ok(&b"abc"[..]));
        assert!(parse_answer(b"HTTP/1.0 404 Not Found\r\n\r\n").is_err());
        assert!(parse_answer(b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
        assert!(parse_answer(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n").is_err());
        assert_eq!(parse_answer(b"HTTP/1.1 200 OK\nConnection: close\n\nxy"), Ok(&b"xy"[..]));
        assert_eq!(escaped_base64(b"\xfb\xff"), "%2B%2F8%3D");
        assert_eq!(escaped_base64(b"abc"), "YWJj");
    }
}
