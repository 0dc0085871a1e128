//! TLS for QUIC: the server is chosen by SNI from the ClientHello, as for
//! TLS over TCP (`handshake`), and its own rustls configuration (its
//! certificates, client verification, session cache) finishes the
//! handshake. quinn takes one TLS configuration per endpoint, so `Sni` is
//! that configuration: each connection's session waits for the complete
//! ClientHello in the CRYPTO stream, reads its server name, and only then
//! starts quinn's rustls session with the chosen server's configuration,
//! handing it the bytes read so far.
//!
//! quinn reports only ALPN and SNI once the handshake is done; the cipher
//! suite, key exchange group and resumption that `$ssl_cipher`,
//! `$ssl_curve` and `$ssl_session_reused` show are read from our own
//! ServerHello as it goes out (`server_hello`).
//!
//! 0-RTT follows the chosen server too: its configuration decides
//! (`tls::zero_rtt`, `ssl_early_data`), and the 0-RTT keys quinn asks for
//! (`early_crypto`) are that session's.

use std::any::Any;
use std::sync::Arc;

use quinn_proto::crypto::rustls::{HandshakeData, QuicServerConfig};
use quinn_proto::crypto::{self, ExportKeyingMaterialError, KeyPair, Keys, PacketKey, UnsupportedVersion};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectionId, Side, TransportError, TransportErrorCode};

use crate::config::Config;

/// A ClientHello larger than this is refused (rustls's own limit for a
/// handshake message is 64 KB; a real one is a few KB even with
/// post-quantum key shares).
const MAX_HELLO: usize = 64 * 1024;

/// TLS alerts sent as QUIC CRYPTO_ERROR codes (RFC 9001 4.8).
const ALERT_DECODE_ERROR: u8 = 50;
const ALERT_UNRECOGNIZED_NAME: u8 = 112;

/// The endpoint's TLS: the listen group whose servers SNI chooses among.
pub struct Sni {
    cfg: Arc<Config>,
    group: usize,
    /// Initial keys and Retry tags: the same for every server (they depend
    /// on the QUIC version only), so from the default server's
    /// configuration, or the refusing one when it has none
    /// (`ssl_reject_handshake on` without certificates).
    default: Arc<QuicServerConfig>,
}

impl Sni {
    /// None only if no TLS 1.3 configuration can be made at all.
    pub fn new(cfg: Arc<Config>, group: usize) -> Option<Sni> {
        let g = cfg.http.listens.get(group)?;
        let default = match g.default_server.tls.as_ref().and_then(|t| t.quic.clone()) {
            Some(q) => q,
            None => Arc::new(QuicServerConfig::try_from(super::reject_config()?).ok()?),
        };
        Some(Sni { cfg, group, default })
    }
}

impl crypto::ServerConfig for Sni {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> Result<Keys, UnsupportedVersion> {
        self.default.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.default.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(self: Arc<Self>, version: u32, params: &TransportParameters) -> Box<dyn crypto::Session> {
        Box::new(Session { sni: self, version, params: *params, hello: Vec::new(), inner: None, shown: None })
    }
}

/// What sluice reads from a finished QUIC handshake
/// (`quinn::Connection::handshake_data`).
#[derive(Clone, Debug, Default)]
pub struct Handshake {
    pub server_name: Option<String>,
    pub alpn: Option<Vec<u8>>,
    /// From the ServerHello: the cipher suite, the key exchange group and
    /// whether a pre-shared key (a resumed session) was accepted.
    pub suite: Option<u16>,
    pub group: Option<u16>,
    pub resumed: bool,
    /// The client's 0-RTT data is accepted: rustls took its early data
    /// (a resumed session whose server has `ssl_early_data on`) and
    /// quinn has the 0-RTT keys. The connection may then be served
    /// before the handshake completes.
    pub early: bool,
}

struct Session {
    sni: Arc<Sni>,
    version: u32,
    params: TransportParameters,
    /// The CRYPTO stream until the ClientHello is complete.
    hello: Vec<u8>,
    inner: Option<Box<dyn crypto::Session>>,
    /// The ServerHello's facts, once it went out.
    shown: Option<(u16, Option<u16>, bool)>,
}

fn crypto_error(alert: u8, reason: &str) -> TransportError {
    TransportError { code: TransportErrorCode::crypto(alert), frame: None, reason: reason.into() }
}

impl crypto::Session for Session {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        match &self.inner {
            Some(s) => s.initial_keys(dst_cid, side),
            // The version was checked before the session started.
            None => match crypto::ServerConfig::initial_keys(&*self.sni.default, self.version, dst_cid) {
                Ok(k) => k,
                Err(_) => crypto::ServerConfig::initial_keys(&*self.sni.default, 1, dst_cid)
                    .unwrap_or_else(|_| unreachable_keys()),
            },
        }
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let data = self.inner.as_ref()?.handshake_data()?;
        let hd = data.downcast::<HandshakeData>().ok()?;
        let (suite, group, resumed) = self.shown.unwrap_or((0, None, false));
        // On the server rustls keeps the early secret only when it
        // accepted the early data (and `early_data_accepted` is the
        // client's question).
        let early = self.inner.as_ref().is_some_and(|s| s.early_crypto().is_some());
        Some(Box::new(Handshake {
            server_name: hd.server_name,
            alpn: hd.protocol,
            suite: (suite != 0).then_some(suite),
            group,
            resumed,
            early,
        }))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.as_ref()?.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.as_ref()?.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.as_ref()?.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.as_ref().is_none_or(|s| s.is_handshaking())
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        if let Some(s) = self.inner.as_mut() {
            return s.read_handshake(buf);
        }
        self.hello.extend_from_slice(buf);
        let name = match client_hello_sni(&self.hello) {
            Hello::Incomplete if self.hello.len() <= MAX_HELLO => return Ok(false),
            Hello::Incomplete | Hello::Bad => return Err(crypto_error(ALERT_DECODE_ERROR, "bad ClientHello")),
            Hello::Done(name) => name,
        };
        let g = &self.sni.cfg.http.listens[self.sni.group];
        let server = match &name {
            Some(n) => crate::http::routing::server::select(g, n.to_ascii_lowercase().as_bytes()),
            None => &g.default_server,
        };
        let tls = server.tls.as_ref().or(g.default_server.tls.as_ref());
        // `ssl_reject_handshake on`: the handshake ends with an alert, as
        // nginx's SNI callback refuses it.
        let cfg = match tls {
            Some(t) if !t.reject => t.quic.clone(),
            _ => None,
        };
        let Some(cfg) = cfg else {
            return Err(crypto_error(ALERT_UNRECOGNIZED_NAME, "handshake rejected"));
        };
        let mut inner = crypto::ServerConfig::start_session(cfg, self.version, &self.params);
        let hello = std::mem::take(&mut self.hello);
        let r = inner.read_handshake(&hello);
        self.inner = Some(inner);
        r
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        match &self.inner {
            Some(s) => s.transport_parameters(),
            None => Ok(None),
        }
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let s = self.inner.as_mut()?;
        let start = buf.len();
        let keys = s.write_handshake(buf);
        if self.shown.is_none() {
            self.shown = server_hello(&buf[start..]);
        }
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.as_mut()?.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.as_ref().is_some_and(|s| s.is_valid_retry(orig_dst_cid, header, payload))
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        match &self.inner {
            Some(s) => s.export_keying_material(output, label, context),
            None => Err(ExportKeyingMaterialError),
        }
    }
}

/// QUIC v1's Initial keys are always derivable; this is only the type's
/// answer for a version quinn would have refused before any session.
fn unreachable_keys() -> Keys {
    panic!("QUIC Initial keys for a version quinn accepted could not be derived")
}

/// What the ClientHello at the start of a CRYPTO stream says so far.
#[derive(Debug, PartialEq)]
pub enum Hello {
    Incomplete,
    Bad,
    /// Complete, with its server name (SNI) if it has one.
    Done(Option<String>),
}

/// A bounds-checked reader over untrusted bytes.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// Reads the server name from the ClientHello (RFC 8446 4.1.2, RFC 6066 3)
/// that starts `crypto`, the first bytes of a QUIC Initial CRYPTO stream.
pub fn client_hello_sni(crypto: &[u8]) -> Hello {
    if crypto.len() < 4 {
        return Hello::Incomplete;
    }
    if crypto[0] != 1 {
        return Hello::Bad;
    }
    let len = (usize::from(crypto[1]) << 16) | (usize::from(crypto[2]) << 8) | usize::from(crypto[3]);
    if len > MAX_HELLO {
        return Hello::Bad;
    }
    let Some(body) = crypto.get(4..4 + len) else { return Hello::Incomplete };
    match hello_name(body) {
        Some(name) => Hello::Done(name),
        None => Hello::Bad,
    }
}

/// None: malformed; Some(None): no server_name extension.
fn hello_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Rd(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec8()?; // legacy_session_id
    r.vec16()?; // cipher_suites
    r.vec8()?; // legacy_compression_methods
    if r.0.is_empty() {
        return Some(None);
    }
    let mut exts = Rd(r.vec16()?);
    while !exts.0.is_empty() {
        let ty = exts.u16()?;
        let data = exts.vec16()?;
        if ty != 0 {
            continue;
        }
        let mut list = Rd(Rd(data).vec16()?);
        while !list.0.is_empty() {
            let kind = list.u8()?;
            let name = list.vec16()?;
            if kind == 0 {
                // A host name is ASCII (RFC 6066 3); anything else is bad.
                if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
                    return None;
                }
                return Some(Some(String::from_utf8_lossy(name).into_owned()));
            }
        }
        return Some(None);
    }
    Some(None)
}

/// The cipher suite, key exchange group and whether a pre-shared key was
/// accepted, from the ServerHello at the start of `out` (our own output).
pub fn server_hello(out: &[u8]) -> Option<(u16, Option<u16>, bool)> {
    let mut r = Rd(out);
    if r.u8()? != 2 {
        return None;
    }
    let len = (r.u16()? << 8) | r.u8()?;
    let mut b = Rd(r.take(len)?);
    b.take(2 + 32)?;
    b.vec8()?;
    let suite = b.u16()? as u16;
    b.u8()?;
    let (mut group, mut psk) = (None, false);
    let mut exts = Rd(b.vec16()?);
    while !exts.0.is_empty() {
        let ty = exts.u16()?;
        let data = exts.vec16()?;
        match ty {
            0x33 => group = Rd(data).u16().map(|g| g as u16),
            0x29 => psk = true,
            _ => {}
        }
    }
    Some((suite, group, psk))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(exts: &[u8]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(exts);
        let mut m = vec![1];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(&body);
        m
    }

    fn sni_ext(name: &[u8]) -> Vec<u8> {
        let mut entry = vec![0];
        entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
        entry.extend_from_slice(name);
        let mut list = (entry.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&entry);
        let mut e = vec![0, 0];
        e.extend_from_slice(&(list.len() as u16).to_be_bytes());
        e.extend_from_slice(&list);
        e
    }

    #[test]
    fn reads_the_server_name() {
        let mut exts = vec![0x00, 0x39, 0, 2, 9, 9];
        exts.extend_from_slice(&sni_ext(b"Example.COM"));
        let m = hello(&exts);
        assert_eq!(client_hello_sni(&m), Hello::Done(Some("Example.COM".into())));
        for cut in 0..m.len() {
            assert_eq!(client_hello_sni(&m[..cut]), Hello::Incomplete, "{cut}");
        }
        assert_eq!(client_hello_sni(&hello(&[0x00, 0x39, 0, 0])), Hello::Done(None));
        assert_eq!(client_hello_sni(&hello(&sni_ext(b"a b"))), Hello::Bad);
        assert_eq!(client_hello_sni(&[2, 0, 0, 0]), Hello::Bad);
        let mut short = hello(&[]);
        short[3] = 5;
        assert_eq!(client_hello_sni(&short), Hello::Bad);
    }

    #[test]
    fn reads_our_server_hello() {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[1; 32]);
        body.push(0);
        body.extend_from_slice(&[0x13, 0x02, 0]);
        let exts = [0x00, 0x2b, 0, 2, 3, 4, 0x00, 0x33, 0, 4, 0x00, 0x1d, 0, 0, 0x00, 0x29, 0, 2, 0, 0];
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut m = vec![2];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(&body);
        assert_eq!(server_hello(&m), Some((0x1302, Some(0x1d), true)));
        assert_eq!(server_hello(&m[..10]), None);
    }
}
