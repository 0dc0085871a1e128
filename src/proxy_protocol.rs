//! The PROXY protocol header (versions 1 and 2, as HAProxy and cloud L4
//! balancers send it) that a `listen ... proxy_protocol` address expects
//! before anything else on a connection, TLS included. It names the
//! balancer's client, for `$proxy_protocol_addr` and
//! `real_ip_header proxy_protocol`.
//!
//! [`parse`] is a pure function over the bytes received so far, with
//! nginx's rules (`ngx_proxy_protocol_read`): v1 is
//! `PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n` with addresses kept as the
//! text sent (hex digits, `.` and `:` only) or `PROXY UNKNOWN...\r\n`;
//! v2 is the 12-byte signature, version 2, and for the PROXY command over
//! TCP the binary addresses and the TLVs after them (LOCAL, UDP and unix
//! are skipped), which `$proxy_protocol_tlv_*` reads ([`ProxyAddrs::tlv`]).
//! Unlike nginx, which parses whatever its first read returned, a header
//! split across packets is waited for (`Need`) within the connection's
//! `client_header_timeout`. [`read`] consumes exactly the header with
//! peek-then-read, so the bytes after it stay in the socket for TLS or
//! HTTP.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The addresses a PROXY header carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyAddrs {
    /// As sent (v1) or printed (v2): `$proxy_protocol_addr`.
    pub src_addr: String,
    pub src_port: u16,
    pub dst_addr: String,
    pub dst_port: u16,
    /// v2's TLV block as sent (empty for v1).
    pub tlvs: Vec<u8>,
}

/// The TLV types nginx names (`$proxy_protocol_tlv_alpn`...).
const NAMED: [(&str, u8); 5] =
    [("alpn", 0x01), ("authority", 0x02), ("unique_id", 0x05), ("ssl", 0x20), ("netns", 0x30)];
/// The sub-TLVs of PP2_TYPE_SSL nginx names (`$proxy_protocol_tlv_ssl_cn`...).
const SSL_NAMED: [(&str, u8); 5] =
    [("version", 0x21), ("cn", 0x22), ("cipher", 0x23), ("sig_alg", 0x24), ("key_alg", 0x25)];

impl ProxyAddrs {
    /// `$proxy_protocol_tlv_NAME`, as nginx's ngx_proxy_protocol_get_tlv
    /// reads it: a named type or `0xHH`, `ssl_NAME` or `ssl_0xHH` for the
    /// SSL TLV's sub-TLVs, and `ssl_verify` for its verify field (as a
    /// decimal number). None: not sent (or a name nginx does not know).
    pub fn tlv(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        if let Some(sub) = name.strip_prefix("ssl_") {
            let ssl = find_tlv(&self.tlvs, 0x20)?;
            // client (1 byte), verify (4 bytes), then sub-TLVs.
            if ssl.len() < 5 {
                return None;
            }
            if sub == "verify" {
                let v = u32::from_be_bytes([ssl[1], ssl[2], ssl[3], ssl[4]]);
                return Some(std::borrow::Cow::Owned(v.to_string().into_bytes()));
            }
            let t = tlv_type(sub, &SSL_NAMED)?;
            return find_tlv(&ssl[5..], t).map(std::borrow::Cow::Borrowed);
        }
        find_tlv(&self.tlvs, tlv_type(name, &NAMED)?).map(std::borrow::Cow::Borrowed)
    }
}

/// A type by nginx's name for it or as `0xHH` (any number of hex digits,
/// at most 0xff).
fn tlv_type(name: &str, named: &[(&str, u8)]) -> Option<u8> {
    if let Some(hex) = name.strip_prefix("0x") {
        return u32::from_str_radix(hex, 16).ok().and_then(|n| u8::try_from(n).ok());
    }
    named.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The value of the first TLV of type `t` in `block` (type, 16-bit length,
/// value; a truncated one ends the search).
fn find_tlv(mut block: &[u8], t: u8) -> Option<&[u8]> {
    while block.len() >= 3 {
        let len = u16::from_be_bytes([block[1], block[2]]) as usize;
        let value = block.get(3..3 + len)?;
        if block[0] == t {
            return Some(value);
        }
        block = &block[3 + len..];
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The bytes so far are a valid beginning: wait for more.
    Need,
    /// A whole header of `len` bytes; None: one that names no client
    /// (v1 UNKNOWN, v2 LOCAL or a family nginx does not read).
    Done { len: usize, addrs: Option<ProxyAddrs> },
    /// Not a PROXY header: nginx's error-log text.
    Invalid(String),
}

const SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 line, CRLF included (the specification's 107).
pub const V1_MAX: usize = 107;
/// The most a v2 header may take here (nginx reads at most 4 KB of it).
pub const V2_MAX: usize = 4096;

pub fn parse(buf: &[u8]) -> Parsed {
    if buf.len() < SIGNATURE.len() && SIGNATURE.starts_with(buf) && !buf.is_empty() {
        return Parsed::Need;
    }
    if buf.starts_with(SIGNATURE) {
        return parse_v2(buf);
    }
    if buf.len() < 6 {
        return if b"PROXY ".starts_with(buf) { Parsed::Need } else { broken(buf) };
    }
    if !buf.starts_with(b"PROXY ") {
        return broken(buf);
    }
    let line = match memchr::memchr(b'\n', &buf[..buf.len().min(V1_MAX)]) {
        Some(i) => &buf[..=i],
        None if buf.len() < V1_MAX => return Parsed::Need,
        None => return broken(buf),
    };
    parse_v1(line).unwrap_or_else(|| broken(line))
}

fn broken(buf: &[u8]) -> Parsed {
    let shown = &buf[..buf.len().min(V1_MAX)];
    Parsed::Invalid(format!("broken header: \"{}\"", String::from_utf8_lossy(shown)))
}

/// One v1 line, LF included.
fn parse_v1(line: &[u8]) -> Option<Parsed> {
    let len = line.len();
    let rest = &line[6..];
    if rest.starts_with(b"UNKNOWN") {
        // Anything up to CRLF.
        return line.ends_with(b"\r\n").then_some(Parsed::Done { len, addrs: None });
    }
    let rest = rest.strip_prefix(b"TCP4 ").or_else(|| rest.strip_prefix(b"TCP6 "))?;
    let body = rest.strip_suffix(b"\r\n")?;
    let mut fields = body.splitn(3, |&b| b == b' ');
    let src = addr_text(fields.next()?)?;
    let dst = addr_text(fields.next()?)?;
    let ports = fields.next()?;
    let sp = ports.iter().position(|&c| c == b' ')?;
    let addrs = ProxyAddrs {
        src_addr: src,
        src_port: port(&ports[..sp])?,
        dst_addr: dst,
        dst_port: port(&ports[sp + 1..])?,
        tlvs: Vec::new(),
    };
    Some(Parsed::Done { len, addrs: Some(addrs) })
}

/// nginx accepts hex digits, `.` and `:` in an address, even none (it does
/// not check the form further; `real_ip_header proxy_protocol` does).
fn addr_text(b: &[u8]) -> Option<String> {
    let ok = b.iter().all(|&c| c == b':' || c == b'.' || c.is_ascii_hexdigit());
    ok.then(|| String::from_utf8_lossy(b).into_owned())
}

/// nginx's ngx_atoi: decimal digits (at least one), then 0..=65535.
fn port(b: &[u8]) -> Option<u16> {
    if b.is_empty() || b.len() > 5 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse::<u32>().ok().and_then(|n| u16::try_from(n).ok())
}

fn parse_v2(buf: &[u8]) -> Parsed {
    if buf.len() < 16 {
        return Parsed::Need;
    }
    let version = buf[12] >> 4;
    if version != 2 {
        return Parsed::Invalid(format!("unknown PROXY protocol version: {version}"));
    }
    let body_len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    let len = 16 + body_len;
    if len > V2_MAX {
        return Parsed::Invalid("header is too large".into());
    }
    if buf.len() < len {
        return Parsed::Need;
    }
    let body = &buf[16..len];
    let command = buf[12] & 0x0f;
    let (family, transport) = (buf[13] >> 4, buf[13] & 0x0f);
    // Only PROXY over STREAM names a client.
    if command != 1 || transport != 1 {
        return Parsed::Done { len, addrs: None };
    }
    let addrs = match family {
        1 if body.len() >= 12 => ProxyAddrs {
            src_addr: Ipv4Addr::new(body[0], body[1], body[2], body[3]).to_string(),
            dst_addr: Ipv4Addr::new(body[4], body[5], body[6], body[7]).to_string(),
            src_port: u16::from_be_bytes([body[8], body[9]]),
            dst_port: u16::from_be_bytes([body[10], body[11]]),
            tlvs: body[12..].to_vec(),
        },
        2 if body.len() >= 36 => {
            let v6 = |b: &[u8]| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[..16]);
                Ipv6Addr::from(a).to_string()
            };
            ProxyAddrs {
                src_addr: v6(&body[0..16]),
                dst_addr: v6(&body[16..32]),
                src_port: u16::from_be_bytes([body[32], body[33]]),
                dst_port: u16::from_be_bytes([body[34], body[35]]),
                tlvs: body[36..].to_vec(),
            }
        }
        // nginx closes on an address block too short for its family.
        1 | 2 => return Parsed::Invalid("broken header: truncated address block".into()),
        _ => return Parsed::Done { len, addrs: None },
    };
    Parsed::Done { len, addrs: Some(addrs) }
}

/// Reads the header off `tcp` (peeking until it is whole, then consuming
/// exactly it). Err: nginx's log text; the caller logs and closes. A
/// client that closes or stays silent past `timeout` gives Err too.
pub async fn read(tcp: &mut TcpStream, timeout: Duration) -> Result<Option<ProxyAddrs>, String> {
    read_with(tcp, timeout, true).await
}

/// [`read`]; with `wait_whole` false, as nginx's stream module reads it:
/// the header must be complete in the first bytes that arrive, else it is
/// broken (nginx parses what its first read returned).
pub async fn read_with(tcp: &mut TcpStream, timeout: Duration, wait_whole: bool) -> Result<Option<ProxyAddrs>, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = vec![0u8; V2_MAX];
    let mut seen = 0;
    loop {
        let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err("client closed connection".into()),
            Ok(Ok(n)) => n,
            Err(_) => return Err("client timed out (110: Connection timed out)".into()),
        };
        match parse(&buf[..n]) {
            Parsed::Done { len, addrs } => {
                let mut header = vec![0u8; len];
                tcp.read_exact(&mut header).await.map_err(|e| format!("recv() failed ({e})"))?;
                return Ok(addrs);
            }
            Parsed::Invalid(msg) => return Err(msg),
            Parsed::Need if !wait_whole => {
                return Err(format!("broken header: \"{}\"", String::from_utf8_lossy(&buf[..n.min(V1_MAX)])));
            }
            Parsed::Need => {
                // Peeking returns at once while nothing new arrived: give
                // the rest a moment, bounded by the deadline.
                if n == seen {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                seen = n;
            }
        }
    }
}

/// The v1 line sluice sends an origin for `proxy_protocol on` (nginx's
/// `ngx_proxy_protocol_write`): the client and the address it reached.
pub fn v1_line(client: std::net::SocketAddr, local: std::net::SocketAddr) -> Vec<u8> {
    let fam = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    format!("PROXY {fam} {} {} {} {}\r\n", client.ip(), local.ip(), client.port(), local.port()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(b: &[u8]) -> (usize, Option<ProxyAddrs>) {
        match parse(b) {
            Parsed::Done { len, addrs } => (len, addrs),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn v1_lines() {
        let (len, a) = done(b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n");
        assert_eq!(len, 45);
        let a = a.unwrap();
        assert_eq!(
            (a.src_addr.as_str(), a.src_port, a.dst_addr.as_str(), a.dst_port),
            ("192.0.2.1", 56324, "198.51.100.2", 443)
        );
        let (_, a) = done(b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n");
        assert_eq!(a.unwrap().src_addr, "2001:db8::1");
        assert_eq!(done(b"PROXY UNKNOWN\r\n"), (15, None));
        // nginx takes an empty address.
        assert_eq!(done(b"PROXY TCP4 1.2.3.4  1 2\r\n").1.unwrap().dst_addr, "");
        assert_eq!(done(b"PROXY UNKNOWN ffff::1 ::1 1 2\r\n").1, None);
        for need in [&b"P"[..], b"PROXY", b"PROXY TCP4 1.2.3.4", b"\r\n\r\n\0"] {
            assert_eq!(parse(need), Parsed::Need, "{need:?}");
        }
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 65536\r\n",
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n",
            b"PROXY TCP4 1.2.3.4 1.2.3.4 x 2\r\n",
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n",
            b"PROXY TCP4 1.2.3.z 1.2.3.4 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2 3\r\n",
        ] {
            assert!(matches!(parse(bad), Parsed::Invalid(_)), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = [b"PROXY ".as_slice(), &[b'1'; 200]].concat();
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
    }

    fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
        [&[t][..], &(v.len() as u16).to_be_bytes(), v].concat()
    }

    #[test]
    fn v2_tlvs() {
        let mut body = vec![192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 22, 46];
        body.extend(tlv(0x01, b"h2"));
        body.extend(tlv(0x03, b"4321"));
        body.extend(tlv(0x01, b"second"));
        let mut ssl = vec![0x01, 0, 0, 0, 255];
        ssl.extend(tlv(0x21, b"TLSv1.3"));
        ssl.extend(tlv(0x22, b"example.com"));
        body.extend(tlv(0x20, &ssl));
        body.extend(tlv(0xae, b"custom"));
        let a = done(&v2(1, 0x11, &body)).1.unwrap();
        let get = |n: &str| a.tlv(n).map(|v| String::from_utf8_lossy(&v).into_owned());
        assert_eq!(get("alpn").as_deref(), Some("h2"), "the first of a type");
        assert_eq!(get("0x01").as_deref(), Some("h2"));
        assert_eq!(get("0x3").as_deref(), Some("4321"));
        assert_eq!(get("0x000ae").as_deref(), Some("custom"));
        assert_eq!(get("ssl_verify").as_deref(), Some("255"));
        assert_eq!(get("ssl_version").as_deref(), Some("TLSv1.3"));
        assert_eq!(get("ssl_0x22").as_deref(), Some("example.com"));
        assert_eq!(a.tlv("ssl").map(|v| v.len()), Some(ssl.len()));
        for absent in ["authority", "0x0f", "ssl_cipher", "0x100", "nonsense", "0xzz"] {
            assert_eq!(get(absent), None, "{absent}");
        }
        // A truncated TLV ends the search.
        let mut cut = body[..12].to_vec();
        cut.extend_from_slice(&[0x01, 0, 9, b'h']);
        assert_eq!(done(&v2(1, 0x11, &cut)).1.unwrap().tlv("alpn"), None);
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.push(0x20 | cmd);
        v.push(fam);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn v2_headers() {
        let mut body = vec![10, 0, 0, 1, 10, 0, 0, 2, 0x1f, 0x90, 0, 80];
        body.extend_from_slice(&[1, 0, 1, 0xff]); // a TLV, skipped
        let h = v2(1, 0x11, &body);
        let (len, a) = done(&[h.as_slice(), b"GET /"].concat());
        assert_eq!(len, h.len());
        let a = a.unwrap();
        assert_eq!(
            (a.src_addr.as_str(), a.src_port, a.dst_addr.as_str(), a.dst_port),
            ("10.0.0.1", 8080, "10.0.0.2", 80)
        );
        let mut b6 = vec![0u8; 36];
        b6[15] = 1;
        b6[31] = 2;
        b6[33] = 7;
        assert_eq!(done(&v2(1, 0x21, &b6)).1.unwrap().src_addr, "::1");
        // LOCAL, UDP and unix carry no client.
        assert_eq!(done(&v2(0, 0x11, &body)).1, None);
        assert_eq!(done(&v2(1, 0x12, &body)).1, None);
        assert_eq!(done(&v2(1, 0x31, &[0; 216])).1, None);
        assert_eq!(parse(&h[..20]), Parsed::Need);
        let mut bad = h.clone();
        bad[12] = 0x11;
        assert_eq!(parse(&bad), Parsed::Invalid("unknown PROXY protocol version: 1".into()));
        assert!(matches!(parse(&v2(1, 0x11, &[1, 2, 3])), Parsed::Invalid(_)));
        let mut huge = v2(1, 0x11, &body);
        huge[14] = 0xff;
        assert_eq!(parse(&huge), Parsed::Invalid("header is too large".into()));
    }

    #[test]
    fn writes_v1() {
        let l = v1_line("192.0.2.1:5000".parse().unwrap(), "127.0.0.1:80".parse().unwrap());
        assert_eq!(l, b"PROXY TCP4 192.0.2.1 127.0.0.1 5000 80\r\n");
        assert_eq!(done(&l).1.unwrap().src_port, 5000);
    }
}
