//! nginx's `ngx_mail_auth_http_module`: the session's credentials go to
//! the authentication server as an HTTP/1.0 GET with nginx's `Auth-*`
//! headers; its answer's `Auth-*` headers say where to proxy to, or what
//! error to give the client (after `Auth-Wait` seconds).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::conf::{AuthHttp, Protocol};

/// What one authentication request carries.
pub struct Request<'a> {
    pub conf: &'a AuthHttp,
    /// nginx's `Auth-Method` word: plain, apop, cram-md5, external, none.
    pub method: &'static str,
    pub user: &'a [u8],
    pub pass: &'a [u8],
    /// The challenge sent for APOP and CRAM-MD5 (with its line end).
    pub salt: Option<&'a [u8]>,
    pub protocol: Protocol,
    pub attempt: u32,
    pub client_ip: String,
    pub client_host: Option<&'a str>,
    /// The PROXY header the client's connection began with.
    pub proxy_protocol: Option<&'a crate::proxy_protocol::ProxyAddrs>,
    /// SMTP without authentication: HELO, MAIL FROM and RCPT TO lines.
    pub smtp: Option<(&'a [u8], &'a [u8], &'a [u8])>,
    /// TLS with the client (`Auth-SSL: on`), and the client certificate's
    /// details when it was asked for.
    pub ssl: Option<SslInfo>,
    pub headers: &'a [(String, String)],
}

#[derive(Default, Clone)]
pub struct SslInfo {
    pub protocol: Option<String>,
    pub cipher: Option<String>,
    pub verify: Option<String>,
    pub subject: Option<String>,
    pub issuer: Option<String>,
    pub serial: Option<String>,
    pub fingerprint: Option<String>,
    pub cert: Option<String>,
}

/// nginx's `NGX_ESCAPE_MAIL_AUTH`: controls, space and `%` as `%XX`.
pub fn escape(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    for &b in v {
        if b <= 0x20 || b == b'%' || b == 0x7f {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

fn put(b: &mut Vec<u8>, name: &str, v: &[u8]) {
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(b": ");
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
}

fn head_salt(b: &mut Vec<u8>, salt: &[u8]) {
    b.extend_from_slice(b"Auth-Salt: ");
    b.extend_from_slice(salt);
    if !salt.ends_with(b"\r\n") {
        b.extend_from_slice(b"\r\n");
    }
}

/// The request's bytes, headers in nginx's order.
pub fn request(r: &Request<'_>) -> Vec<u8> {
    let mut b = Vec::with_capacity(512);
    let mut head = format!("GET {} HTTP/1.0\r\n", r.conf.uri).into_bytes();
    head.extend_from_slice(format!("Host: {}\r\n", r.conf.host).as_bytes());
    put(&mut b, "Auth-Method", r.method.as_bytes());
    put(&mut b, "Auth-User", &escape(r.user));
    put(&mut b, "Auth-Pass", &escape(r.pass));
    if let Some(salt) = r.salt {
        // The salt keeps its line end, which ends the header.
        head_salt(&mut b, salt);
    }
    put(&mut b, "Auth-Protocol", r.protocol.name().as_bytes());
    put(&mut b, "Auth-Login-Attempt", r.attempt.to_string().as_bytes());
    put(&mut b, "Client-IP", r.client_ip.as_bytes());
    if let Some(h) = r.client_host {
        put(&mut b, "Client-Host", h.as_bytes());
    }
    if let Some(pp) = r.proxy_protocol {
        put(&mut b, "Proxy-Protocol-Addr", pp.src_addr.as_bytes());
        put(&mut b, "Proxy-Protocol-Port", pp.src_port.to_string().as_bytes());
        put(&mut b, "Proxy-Protocol-Server-Addr", pp.dst_addr.as_bytes());
        put(&mut b, "Proxy-Protocol-Server-Port", pp.dst_port.to_string().as_bytes());
    }
    if let Some((helo, from, to)) = r.smtp {
        // As nginx: these lines cannot hold a line end; sent as they came.
        put(&mut b, "Auth-SMTP-Helo", helo);
        put(&mut b, "Auth-SMTP-From", from);
        put(&mut b, "Auth-SMTP-To", to);
    }
    if let Some(ssl) = &r.ssl {
        put(&mut b, "Auth-SSL", b"on");
        for (name, v) in [
            ("Auth-SSL-Protocol", &ssl.protocol),
            ("Auth-SSL-Cipher", &ssl.cipher),
            ("Auth-SSL-Verify", &ssl.verify),
            ("Auth-SSL-Subject", &ssl.subject),
            ("Auth-SSL-Issuer", &ssl.issuer),
            ("Auth-SSL-Serial", &ssl.serial),
            ("Auth-SSL-Fingerprint", &ssl.fingerprint),
            ("Auth-SSL-Cert", &ssl.cert),
        ] {
            if let Some(v) = v {
                put(&mut b, name, v.as_bytes());
            }
        }
    }
    for (n, v) in r.headers {
        put(&mut b, n, v.as_bytes());
    }
    head.extend_from_slice(&b);
    head.extend_from_slice(b"\r\n");
    head
}

/// A response's header lines: (name, value).
pub type Headers = Vec<(Vec<u8>, Vec<u8>)>;

/// The response head: Some(headers) once the empty line came, None while
/// more is needed, Err on a malformed head (nginx's "sent invalid
/// response" / "sent invalid header in response").
pub fn parse_head(buf: &[u8]) -> Result<Option<Headers>, &'static str> {
    let Some(lf) = memchr::memchr(b'\n', buf) else {
        if buf.len() >= 5 && !buf.starts_with(b"HTTP/") {
            return Err("invalid response");
        }
        return Ok(None);
    };
    let status = &buf[..lf];
    let status = status.strip_suffix(b"\r").unwrap_or(status);
    // "HTTP/d.d ddd ..."
    let ok = status.len() >= 12
        && status.starts_with(b"HTTP/")
        && status[5].is_ascii_digit()
        && status[6] == b'.'
        && status[7].is_ascii_digit()
        && status[8] == b' '
        && status[9..12].iter().all(u8::is_ascii_digit);
    if !ok {
        return Err("invalid response");
    }
    let mut headers = Vec::new();
    let mut pos = lf + 1;
    loop {
        let Some(n) = memchr::memchr(b'\n', &buf[pos..]) else { return Ok(None) };
        let raw = &buf[pos..pos + n];
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        pos += n + 1;
        if raw.is_empty() {
            return Ok(Some(headers));
        }
        let Some(colon) = memchr::memchr(b':', raw) else { return Err("invalid header in response") };
        let name = &raw[..colon];
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
            return Err("invalid header in response");
        }
        let value = raw[colon + 1..].trim_ascii();
        headers.push((name.to_vec(), value.to_vec()));
    }
}

/// What the authentication server decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Proxy to `server:port`, logging in with `user` and `pass` (when the
    /// server sent them; else the client's).
    Ok { server: Vec<u8>, port: Vec<u8>, user: Option<Vec<u8>>, pass: Option<Vec<u8>> },
    /// Refused: `msg` for the client (SMTP: after `code`), after `wait`
    /// seconds (none: the session ends).
    Error { msg: Vec<u8>, code: Option<Vec<u8>>, wait: Option<u64> },
    /// `Auth-Status: WAIT`: ask again after `wait` seconds.
    Wait { wait: u64 },
}

/// Reads the answer's headers as nginx does (names case-insensitive).
pub fn answer(headers: &[(Vec<u8>, Vec<u8>)]) -> Answer {
    let mut status: Option<&[u8]> = None;
    let (mut server, mut port, mut user, mut pass, mut code, mut wait) = (None, None, None, None, None, None);
    for (n, v) in headers {
        let is = |s: &str| n.eq_ignore_ascii_case(s.as_bytes());
        if is("Auth-Status") {
            status = Some(v);
        } else if is("Auth-Server") {
            server = Some(v.clone());
        } else if is("Auth-Port") {
            port = Some(v.clone());
        } else if is("Auth-User") {
            user = Some(v.clone());
        } else if is("Auth-Pass") {
            pass = Some(v.clone());
        } else if is("Auth-Error-Code") {
            code = Some(v.clone());
        } else if is("Auth-Wait")
            && let Some(n) = std::str::from_utf8(v).ok().and_then(|s| s.parse::<u64>().ok())
        {
            wait = Some(n);
        }
    }
    match status {
        Some(b"OK") | None => {
            Answer::Ok { server: server.unwrap_or_default(), port: port.unwrap_or_default(), user, pass }
        }
        Some(b"WAIT") => Answer::Wait { wait: wait.unwrap_or(0) },
        Some(msg) => Answer::Error { msg: msg.to_vec(), code, wait: wait.filter(|w| *w > 0) },
    }
}

/// Asks the authentication server: the answer, or the error-log text of
/// what went wrong.
pub async fn ask(conf: &AuthHttp, req: &[u8], timeout: Duration) -> Result<Answer, String> {
    let peer = conf.addr;
    let fut = async {
        let mut tcp = tokio::net::TcpStream::connect(peer)
            .await
            .map_err(|e| format!("connect() failed ({}) while in http auth state", os_err(&e)))?;
        tcp.write_all(req).await.map_err(|e| format!("send() failed ({}) while in http auth state", os_err(&e)))?;
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = tcp
                .read(&mut chunk)
                .await
                .map_err(|e| format!("recv() failed ({}) while in http auth state", os_err(&e)))?;
            if n == 0 {
                return Err(format!("auth http server {} sent invalid response while in http auth state", peer));
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.len() > 64 * 1024 {
                return Err(format!("auth http server {} sent too long response while in http auth state", peer));
            }
            match parse_head(&buf) {
                Ok(Some(h)) => return Ok(answer(&h)),
                Ok(None) => {}
                Err(what) => return Err(format!("auth http server {peer} sent {what} while in http auth state")),
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("auth http server {peer} timed out while in http auth state")),
    }
}

fn os_err(e: &std::io::Error) -> String {
    crate::process::signal::os_error(e)
}

/// `Auth-Server` and `Auth-Port` as an address (nginx takes an IP
/// address only).
pub fn backend(server: &[u8], port: &[u8]) -> Option<SocketAddr> {
    let ip: std::net::IpAddr = std::str::from_utf8(server).ok()?.parse().ok()?;
    let port: u16 = std::str::from_utf8(port).ok()?.parse().ok().filter(|p| *p > 0)?;
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_answer() {
        let r = b"HTTP/1.1 204 No Content\r\nAuth-Status: OK\r\nAuth-Server: 127.0.0.1\r\nauth-port: 8144\r\n\r\n";
        let h = parse_head(r).unwrap().unwrap();
        assert_eq!(
            answer(&h),
            Answer::Ok { server: b"127.0.0.1".to_vec(), port: b"8144".to_vec(), user: None, pass: None }
        );
        assert_eq!(parse_head(&r[..30]).unwrap(), None);
        assert!(parse_head(b"SMTP/1.0 200\r\n\r\n").is_err());
        let h = parse_head(b"HTTP/1.0 200 OK\r\nAuth-Status: Invalid login\r\nAuth-Wait: 3\r\n\r\n").unwrap().unwrap();
        assert_eq!(answer(&h), Answer::Error { msg: b"Invalid login".to_vec(), code: None, wait: Some(3) });
        assert_eq!(escape(b"a b%\r"), b"a%20b%25%0D");
    }
}
