//! `ssl_preread`: the TLS ClientHello read from the first bytes a client
//! sends, without terminating TLS, for `$ssl_preread_server_name`,
//! `$ssl_preread_alpn_protocols` and `$ssl_preread_protocol` (nginx's
//! `ngx_stream_ssl_preread_module`). The bytes stay the client's: they are
//! sent to the origin as read.
//!
//! [`parse`] is a pure function over the bytes received so far: the
//! handshake message may span several records; everything is
//! bounds-checked, and anything that is not a ClientHello ends the parse
//! with no values (the session goes on, as in nginx).

/// What the ClientHello told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    /// The SNI host name as sent.
    pub server_name: Vec<u8>,
    /// The ALPN protocols, joined with commas.
    pub alpn: Vec<u8>,
    /// The highest version offered: `TLSv1.3`, `TLSv1.2`, ..., `SSLv2`.
    pub protocol: &'static str,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A valid beginning: more bytes are needed.
    Need,
    Done(Hello),
    /// Not a TLS ClientHello.
    NotTls,
}

fn version_name(major: u8, minor: u8) -> &'static str {
    match (major, minor) {
        (3, 0) => "SSLv3",
        (3, 1) => "TLSv1",
        (3, 2) => "TLSv1.1",
        (3, 3) => "TLSv1.2",
        (3, 4) => "TLSv1.3",
        _ => "",
    }
}

/// A cursor that never reads past its end.
struct Cur<'a> {
    b: &'a [u8],
}

impl<'a> Cur<'a> {
    /// `n` bytes, or what is left: as nginx's parser, the handshake
    /// message's own length bounds everything, and an inner length that
    /// runs past it is cut there.
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.is_empty() && n > 0 {
            return None;
        }
        let (h, t) = self.b.split_at(n.min(self.b.len()));
        self.b = t;
        Some(h)
    }

    fn exact(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        self.take(n)
    }

    fn u8(&mut self) -> Option<u8> {
        self.exact(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<usize> {
        self.exact(2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

pub fn parse(buf: &[u8]) -> Parsed {
    let Some(&first) = buf.first() else { return Parsed::Need };
    // SSLv2-compatible ClientHello: a 2-byte header with the high bit set,
    // message type 1, then the client's version (0x0002 for SSLv2).
    if first & 0x80 != 0 {
        if buf.len() < 5 {
            return if buf.len() < 3 || buf[2] == 1 { Parsed::Need } else { Parsed::NotTls };
        }
        if buf[2] != 1 {
            return Parsed::NotTls;
        }
        let protocol = if (buf[3], buf[4]) == (0, 2) { "SSLv2" } else { version_name(buf[3], buf[4]) };
        return Parsed::Done(Hello { protocol, ..Hello::default() });
    }
    if first != 22 {
        return Parsed::NotTls;
    }
    // Gather the handshake message from as many records as it spans.
    let mut msg = Vec::new();
    let mut rest = buf;
    loop {
        if rest.len() < 5 {
            return if rest.is_empty() || rest[0] == 22 { Parsed::Need } else { Parsed::NotTls };
        }
        if rest[0] != 22 || rest[1] != 3 {
            return Parsed::NotTls;
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if len == 0 || len > 16384 {
            return Parsed::NotTls;
        }
        if rest.len() < 5 + len {
            // A partial record: what it has may already hold the whole
            // message header; the rest has to come.
            return Parsed::Need;
        }
        msg.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
        if msg.len() >= 4 {
            if msg[0] != 1 {
                return Parsed::NotTls;
            }
            let body = (usize::from(msg[1]) << 16) | (usize::from(msg[2]) << 8) | usize::from(msg[3]);
            if msg.len() >= 4 + body {
                return hello(&msg[4..4 + body]).map_or(Parsed::NotTls, Parsed::Done);
            }
        }
    }
}

/// The ClientHello body, read as far as it goes (a field cut short by
/// the message's end ends the reading, with what was found so far).
fn hello(b: &[u8]) -> Option<Hello> {
    let mut c = Cur { b };
    let v = c.exact(2)?;
    let mut h = Hello::default();
    let mut best = (v[0], v[1]);
    fields(&mut c, &mut h, &mut best);
    h.protocol = version_name(best.0, best.1);
    Some(h)
}

fn fields(c: &mut Cur<'_>, h: &mut Hello, best: &mut (u8, u8)) -> Option<()> {
    c.take(32)?; // random
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    let mut ext = Cur { b: c.vec16()? };
    while !ext.b.is_empty() {
        let typ = ext.u16()?;
        let mut data = Cur { b: ext.vec16()? };
        match typ {
            0 => {
                let mut list = Cur { b: data.vec16()? };
                while !list.b.is_empty() {
                    let kind = list.u8()?;
                    // A name cut short by the message's end is no name.
                    let n = list.u16()?;
                    let name = list.exact(n)?;
                    if kind == 0 && h.server_name.is_empty() {
                        h.server_name = name.to_vec();
                    }
                }
            }
            16 => {
                let mut list = Cur { b: data.vec16()? };
                while !list.b.is_empty() {
                    let n = usize::from(list.u8()?);
                    let p = list.exact(n)?;
                    if !h.alpn.is_empty() {
                        h.alpn.push(b',');
                    }
                    h.alpn.extend_from_slice(p);
                }
            }
            43 => {
                let mut list = Cur { b: data.vec8()? };
                while let Some(v) = list.exact(2) {
                    // TLS 1.3 drafts (0x7fXX) count as TLS 1.3, as in
                    // nginx; GREASE and unknown versions are skipped.
                    let v = if v[0] == 0x7f { (3, 4) } else { (v[0], v[1]) };
                    if v.0 == 3 && v.1 <= 4 && v > *best {
                        *best = v;
                    }
                }
            }
            _ => {}
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello with SNI, ALPN and supported_versions, in one record.
    pub fn sample(sni: &[u8], alpn: &[&[u8]], versions: &[u16]) -> Vec<u8> {
        let mut ext = Vec::new();
        let mut name = vec![0u8];
        name.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        name.extend_from_slice(sni);
        let mut list = (name.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&name);
        ext.extend_from_slice(&0u16.to_be_bytes());
        ext.extend_from_slice(&(list.len() as u16).to_be_bytes());
        ext.extend_from_slice(&list);
        let mut protos = Vec::new();
        for p in alpn {
            protos.push(p.len() as u8);
            protos.extend_from_slice(p);
        }
        let mut alist = (protos.len() as u16).to_be_bytes().to_vec();
        alist.extend_from_slice(&protos);
        ext.extend_from_slice(&16u16.to_be_bytes());
        ext.extend_from_slice(&(alist.len() as u16).to_be_bytes());
        ext.extend_from_slice(&alist);
        if !versions.is_empty() {
            let mut v = vec![(versions.len() * 2) as u8];
            for x in versions {
                v.extend_from_slice(&x.to_be_bytes());
            }
            ext.extend_from_slice(&43u16.to_be_bytes());
            ext.extend_from_slice(&(v.len() as u16).to_be_bytes());
            ext.extend_from_slice(&v);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0u8; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let mut msg = vec![1, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend_from_slice(&body);
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        rec.extend_from_slice(&msg);
        rec
    }

    #[test]
    fn reads_sni_alpn_and_version() {
        let h = sample(b"foo.example", &[b"h2", b"http/1.1"], &[0x0a0a, 0x0304, 0x0303]);
        let want = Hello { server_name: b"foo.example".to_vec(), alpn: b"h2,http/1.1".to_vec(), protocol: "TLSv1.3" };
        assert_eq!(parse(&h), Parsed::Done(want.clone()));
        for cut in 0..h.len() {
            assert_eq!(parse(&h[..cut]), Parsed::Need, "prefix {cut}");
        }
        assert_eq!(
            parse(&sample(b"a", &[], &[])),
            Parsed::Done(Hello { server_name: b"a".to_vec(), alpn: Vec::new(), protocol: "TLSv1.2" })
        );
    }

    #[test]
    fn split_over_records() {
        let h = sample(b"bar", &[b"x"], &[]);
        let msg = &h[5..];
        let mut two = vec![22, 3, 1, 0, 10];
        two.extend_from_slice(&msg[..10]);
        two.extend_from_slice(&[22, 3, 1]);
        two.extend_from_slice(&((msg.len() - 10) as u16).to_be_bytes());
        two.extend_from_slice(&msg[10..]);
        assert!(matches!(parse(&two), Parsed::Done(h) if h.server_name == b"bar"));
    }

    #[test]
    fn not_tls() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Parsed::NotTls);
        assert_eq!(parse(&[22, 3, 1, 0, 4, 2, 0, 0, 0]), Parsed::NotTls);
        assert_eq!(
            parse(&[0x80, 0x2e, 0x01, 0x00, 0x02]),
            Parsed::Done(Hello { protocol: "SSLv2", ..Hello::default() })
        );
        assert_eq!(
            parse(&[0x80, 0x2e, 0x01, 0x03, 0x01]),
            Parsed::Done(Hello { protocol: "TLSv1", ..Hello::default() })
        );
        let mut bad = sample(b"x", &[], &[]);
        let n = bad.len();
        bad[n - 1] = 0xff; // a truncated extension inside a complete message
        assert!(matches!(parse(&bad), Parsed::NotTls | Parsed::Done(_)));
    }
}
