//! Certificates chosen at handshake time: `ssl_certificate` and
//! `ssl_certificate_key` with variables (nginx 1.15.9), evaluated for each
//! connection once its ClientHello is read (`$ssl_server_name`, the
//! addresses, `map`/`geo`/`split_clients` over them), loaded off the
//! worker's event loop (`spawn_blocking`: a slow disk or a large chain
//! never stalls the worker's other connections), and kept in the server's
//! `ssl_certificate_cache` (nginx 1.27.4) when it has one.
//!
//! This is the per-connection half of the certificate store: `resolve`
//! hands the handshake the certified keys, and the handshake finishes with
//! a rustls `ResolvesServerCert` over them (`certs::CertChooser`, which
//! picks ECDSA or RSA by what the client offers). `tls::store` is the
//! process-wide half, where names are installed by code rather than by
//! files (the hook an ACME client fills).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;

use super::certs::{self, Pem};
use crate::config::model::{CertCacheConf, PemSource};
use crate::variables::{Var, VarSource};

/// The connection a handshake's values are evaluated for.
pub struct Conn<'a> {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub sni: Option<&'a str>,
}

/// What an evaluated value names: a file, or PEM (`data:`). Shared with
/// the client certificates shown to origins (`proxy_ssl_certificate`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    File(PathBuf),
    Data(Arc<[u8]>),
}

impl Source {
    pub fn pem(&self) -> Pem<'_> {
        match self {
            Source::File(p) => Pem::File(p),
            Source::Data(d) => Pem::Data(d),
        }
    }
}

/// A server's certificates with variables in them.
pub struct DynamicCerts {
    pairs: Vec<(PemSource, PemSource)>,
    passwords: Arc<Vec<Vec<u8>>>,
    provider: Arc<CryptoProvider>,
    cache: Option<Cache>,
    /// `acme_certificate`: what `$acme_certificate` reads.
    acme: Option<Arc<super::acme::CertSlot>>,
}

type Key = (Source, Source);

struct Entry {
    ck: Arc<CertifiedKey>,
    /// When it was loaded or last found unchanged (`valid`).
    checked: Instant,
    used: Instant,
    /// The files' identities when loaded: after `valid`, an unchanged
    /// pair is kept rather than read again, as nginx does.
    ident: (Option<FileId>, Option<FileId>),
}

/// What tells a changed file: its modification time, size and inode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FileId(SystemTime, u64, u64);

pub fn file_id(s: &Source) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    match s {
        Source::File(p) => {
            std::fs::metadata(p).ok().map(|m| FileId(m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), m.ino()))
        }
        Source::Data(_) => None,
    }
}

struct Cache {
    conf: CertCacheConf,
    map: Mutex<HashMap<Key, Entry>>,
}

impl Cache {
    /// A fresh entry, or the stale one (to be checked against its files).
    fn get(&self, key: &Key, now: Instant) -> Result<Arc<CertifiedKey>, Option<Entry>> {
        let Ok(mut map) = self.map.lock() else { return Err(None) };
        let Some(e) = map.get_mut(key) else { return Err(None) };
        if now.duration_since(e.used) > self.conf.inactive {
            map.remove(key);
            return Err(None);
        }
        if now.duration_since(e.checked) > self.conf.valid {
            return Err(map.remove(key));
        }
        e.used = now;
        Ok(e.ck.clone())
    }

    fn put(&self, key: Key, e: Entry, now: Instant) {
        let Ok(mut map) = self.map.lock() else { return };
        let inactive = self.conf.inactive;
        map.retain(|_, e| now.duration_since(e.used) <= inactive);
        // nginx caches a certificate and a key as two elements of `max`.
        while !map.is_empty() && (map.len() + 1) * 2 > self.conf.max {
            // The least recently used goes, as in nginx's LRU queue.
            let Some(oldest) = map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
            map.remove(&oldest);
        }
        map.insert(key, e);
    }
}

impl DynamicCerts {
    pub fn new(
        pairs: Vec<(PemSource, PemSource)>,
        passwords: Option<Arc<Vec<Vec<u8>>>>,
        provider: Arc<CryptoProvider>,
        cache: Option<CertCacheConf>,
        acme: Option<Arc<super::acme::CertSlot>>,
    ) -> DynamicCerts {
        DynamicCerts {
            pairs,
            passwords: passwords.unwrap_or_default(),
            provider,
            cache: cache.map(|conf| Cache { conf, map: Mutex::new(HashMap::new()) }),
            acme,
        }
    }

    /// The connection's certified keys, in `ssl_certificate` order; the
    /// error is nginx's "cannot load certificate ..." for the error log.
    pub async fn resolve(&self, conn: &Conn<'_>) -> Result<Vec<Arc<CertifiedKey>>, String> {
        let issued = self.acme.as_ref().and_then(|s| s.current());
        let vars = HandshakeVars(conn, issued.as_deref());
        let mut out = Vec::with_capacity(self.pairs.len());
        for (cert, key) in &self.pairs {
            // `ssl_certificate $acme_certificate; ssl_certificate_key
            // $acme_certificate_key;` (nginx-acme's form): the key loaded
            // once when it was issued, not parsed at each handshake.
            if is_var(cert, &Var::AcmeCertificate) && is_var(key, &Var::AcmeCertificateKey) {
                match (&issued, &self.acme) {
                    (Some(i), _) => out.push(i.ck.clone()),
                    (None, Some(s)) => {
                        return Err(format!(
                            "cannot load certificate \"data:\": acme certificate \"{}\" is not issued yet",
                            s.name
                        ));
                    }
                    (None, None) => {
                        return Err("cannot load certificate \"data:\": no \"acme_certificate\" in this server".into());
                    }
                }
                continue;
            }
            let key = (evaluate(cert, &vars), evaluate(key, &vars));
            out.push(self.load(key).await?);
        }
        Ok(out)
    }

    async fn load(&self, key: Key) -> Result<Arc<CertifiedKey>, String> {
        let now = Instant::now();
        let stale = match &self.cache {
            Some(c) => match c.get(&key, now) {
                Ok(ck) => return Ok(ck),
                Err(stale) => stale,
            },
            None => None,
        };
        let provider = self.provider.clone();
        let passwords = self.passwords.clone();
        let k = key.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let ident = (file_id(&k.0), file_id(&k.1));
            if let Some(old) = stale.filter(|old| old.ident == ident && ident.0.is_some() && ident.1.is_some()) {
                return Ok((old.ck, ident));
            }
            certs::load_pair(&provider, k.0.pem(), k.1.pem(), &passwords, None).map(|ck| (ck, ident))
        })
        .await
        .map_err(|e| format!("certificate loader failed: {e}"))??;
        let (ck, ident) = loaded;
        if let Some(c) = &self.cache {
            c.put(key, Entry { ck: ck.clone(), checked: now, used: now, ident }, now);
        }
        Ok(ck)
    }
}

/// Whether `v` is exactly `$name`.
fn is_var(v: &PemSource, var: &Var) -> bool {
    matches!(v, PemSource::Vars(t, _, _) if matches!(t.parts.as_slice(), [crate::variables::Part::Var(x)] if x == var))
}

/// A value evaluated for the connection: `data:` PEM, or a path (relative
/// ones under the configuration's directory, as nginx's conf prefix).
pub fn evaluate(v: &PemSource, vars: &dyn VarSource) -> Source {
    match v {
        PemSource::Vars(t, dir, _) => source_of(&t.render_to_vec(vars), dir),
        _ => fixed(v),
    }
}

/// As [`evaluate`], None when the value is empty (nginx then shows an
/// origin no certificate).
pub fn evaluate_nonempty(v: &PemSource, vars: &dyn VarSource) -> Option<Source> {
    match v {
        PemSource::Vars(t, dir, _) => {
            let text = t.render_to_vec(vars);
            (!text.is_empty()).then(|| source_of(&text, dir))
        }
        _ => Some(fixed(v)),
    }
}

/// A value without variables as a source.
pub fn fixed(v: &PemSource) -> Source {
    match v {
        PemSource::File(p) => Source::File(p.clone()),
        PemSource::Data(d) => Source::Data(d.clone()),
        PemSource::Vars(_, dir, _) => Source::File(dir.clone()),
    }
}

fn source_of(text: &[u8], dir: &Path) -> Source {
    if let Some(pem) = text.strip_prefix(b"data:") {
        return Source::Data(pem.into());
    }
    let p = PathBuf::from(String::from_utf8_lossy(text).into_owned());
    Source::File(if p.is_absolute() { p } else { dir.join(p) })
}

/// The variables a handshake has: the connection's addresses, the SNI
/// name, and blocks (`map`, `geo`, `split_clients`) over them. Request
/// variables are empty, as in nginx before the request exists.
struct HandshakeVars<'a>(&'a Conn<'a>, Option<&'a super::acme::state::Issued>);

impl VarSource for HandshakeVars<'_> {
    fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
        use std::io::Write;
        let c = self.0;
        match var {
            Var::RemoteAddr | Var::RealipRemoteAddr => {
                let _ = write!(out, "{}", c.peer.ip());
            }
            Var::RemotePort | Var::RealipRemotePort => {
                let _ = write!(out, "{}", c.peer.port());
            }
            Var::BinaryRemoteAddr => match c.peer.ip() {
                std::net::IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                std::net::IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            },
            Var::ServerAddr => {
                let _ = write!(out, "{}", c.local.ip());
            }
            Var::ServerPort => {
                let _ = write!(out, "{}", c.local.port());
            }
            Var::SslServerName => out.extend_from_slice(c.sni.unwrap_or("").as_bytes()),
            Var::AcmeCertificate | Var::AcmeCertificateKey => {
                if let Some(i) = self.1 {
                    out.extend_from_slice(b"data:");
                    out.extend_from_slice(if *var == Var::AcmeCertificate { &i.chain_pem } else { &i.key_pem });
                }
            }
            Var::Hostname => out.extend_from_slice(crate::process::hostname().as_bytes()),
            Var::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Var::Geo(g) => out.extend_from_slice(g.eval(self, Some(c.peer), &[])),
            Var::Geoip(g) => {
                g.value(Some(c.peer.ip()), out);
            }
            Var::Geoip2(g) => {
                let addr = match g.source() {
                    Some(t) => crate::geoip2::parse_addr(&t.render_to_vec(self)),
                    None => Some(c.peer.ip()),
                };
                g.value(addr, out);
            }
            Var::Split(sc) => out.extend_from_slice(sc.eval(self)),
            Var::Map(m) => m.eval(self, None, &|_| {}, out),
            _ => {}
        }
    }
}
