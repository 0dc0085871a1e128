//! The HTTPS exchange with an ACME server: one request per connection
//! (`Connection: close`), its address from the issuer's `resolver` unless
//! the URI names an IP address, TLS with rustls (the server's certificate
//! checked against `ssl_trusted_certificate`, or the system's CA bundle,
//! unless `ssl_verify off`), the answer read to the end and parsed by
//! `wire::parse_answer`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::wire::{self, Answer};

/// An `https://host[:port]/path` (or `http://`) URL.
#[derive(Clone, Debug, PartialEq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Url {
    pub fn parse(u: &str) -> Result<Url, String> {
        let bad = || format!("invalid URL \"{u}\"");
        let (tls, rest) = if u.len() > 8 && u[..8].eq_ignore_ascii_case("https://") {
            (true, &u[8..])
        } else if u.len() > 7 && u[..7].eq_ignore_ascii_case("http://") {
            (false, &u[7..])
        } else {
            return Err(bad());
        };
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, p) = h.split_once(']').ok_or_else(bad)?;
            (h, p.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(bad)?,
            None if tls => 443,
            None => 80,
        };
        if host.is_empty() || hostport.contains('@') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(bad());
        }
        Ok(Url { tls, host: host.to_ascii_lowercase(), port, path: path.to_string() })
    }
}

/// How an issuer reaches its server.
pub struct Client {
    pub tls: Arc<ClientConfig>,
    pub resolver: Option<crate::resolver::ResolverConf>,
    pub timeout: Duration,
}

impl Client {
    /// `body`: a JWS to POST; None: a GET.
    pub async fn request(&self, url: &str, body: Option<&str>) -> Result<Answer, String> {
        let u = Url::parse(url)?;
        let exchange = async {
            let addrs = self.addresses(&u).await?;
            let mut last = format!("no address for \"{}\"", u.host);
            for addr in addrs {
                match self.exchange(addr, &u, body).await {
                    Ok(a) => return Ok(a),
                    Err(e) => last = format!("{e} while talking to {addr}"),
                }
            }
            Err(last)
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("ACME server \"{}\" timed out", u.host)))
    }

    async fn addresses(&self, u: &Url) -> Result<Vec<SocketAddr>, String> {
        if let Ok(ip) = u.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, u.port)]);
        }
        let r = self.resolver.as_ref().ok_or_else(|| format!("no resolver defined to resolve {}", u.host))?;
        let deadline = tokio::time::Instant::now() + self.timeout;
        match crate::resolver::query::addresses(r, &u.host, deadline).await {
            Ok((ips, _)) => Ok(ips.into_iter().map(|ip| SocketAddr::new(ip, u.port)).collect()),
            Err(f) => Err(format!("{} could not be resolved ({})", u.host, f.nginx_text())),
        }
    }

    async fn exchange(&self, addr: SocketAddr, u: &Url, body: Option<&str>) -> Result<Answer, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect() failed ({e})"))?;
        // The request follows the handshake's last flight: with Nagle it
        // waits for the server's delayed ACK, about 40 ms per request.
        let _ = tcp.set_nodelay(true);
        let host = if u.host.contains(':') { format!("[{}]", u.host) } else { u.host.clone() };
        let host =
            if (u.tls && u.port == 443) || (!u.tls && u.port == 80) { host } else { format!("{host}:{}", u.port) };
        let head = match body {
            Some(b) => format!(
                "POST {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sluice/{}\r\nContent-Type: application/jose+json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{b}",
                u.path,
                env!("CARGO_PKG_VERSION"),
                b.len()
            ),
            None => format!(
                "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sluice/{}\r\nConnection: close\r\n\r\n",
                u.path,
                env!("CARGO_PKG_VERSION")
            ),
        };
        if !u.tls {
            return send(tcp, head.as_bytes()).await;
        }
        let name = rustls_pki_types::ServerName::try_from(u.host.clone())
            .map_err(|_| format!("invalid host \"{}\"", u.host))?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| crate::tls::client::handshake_error(&e, &u.host))?;
        send(tls, head.as_bytes()).await
    }
}

async fn send<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, req: &[u8]) -> Result<Answer, String> {
    s.write_all(req).await.map_err(|e| format!("send() failed ({e})"))?;
    s.flush().await.map_err(|e| format!("send() failed ({e})"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let n = match s.read(&mut chunk).await {
            Ok(n) => n,
            // A server that closes without close_notify: what arrived is
            // checked by the parser (lengths), as for a plain connection.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(format!("recv() failed ({e})")),
        };
        if n == 0 {
            break;
        }
        if buf.len() + n > wire::MAX_RESPONSE {
            return Err("ACME server sent too large response".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    wire::parse_answer(&buf).map_err(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("https://127.0.0.1:14000/dir").unwrap();
        assert_eq!((u.tls, u.host.as_str(), u.port, u.path.as_str()), (true, "127.0.0.1", 14000, "/dir"));
        assert_eq!(Url::parse("https://ACME.test").unwrap().port, 443);
        assert_eq!(Url::parse("https://[::1]:9/x").unwrap().host, "::1");
        assert!(Url::parse("ftp://x/").is_err());
        assert!(Url::parse("https://u@x/").is_err());
    }
}
