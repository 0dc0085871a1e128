//! `ssl_ocsp on | leaf`: a client certificate's revocation status, asked
//! of an OCSP responder once the handshake is done and before the
//! connection's first request is read (nginx's `ngx_ssl_ocsp_validate`).
//! The chain is the one the client verification built (leaf, CAs, trust
//! anchor); `leaf` asks about the leaf only, `on` about every certificate
//! but the anchor. A certificate that issued itself has nothing to ask.
//! A failure (no responder, no answer, a response that is not signed by
//! the issuer or its delegate, not current, or for another certificate)
//! fails the client's verification with nginx's "certificate status
//! request failed"; a revoked or unknown status names itself. With
//! `ssl_ocsp_cache`, statuses are kept until the response's
//! `nextUpdate` (an hour when it has none) in a cache every worker and
//! every server naming the zone share, across reloads.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rustls_pki_types::CertificateDer;

use super::der::{self, CertId, Status};
use super::http::{self, Url};
use crate::tls::client_verify::VerifyError;

/// What `ssl_ocsp` asks about.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Depth {
    /// `leaf`: the client's own certificate.
    Leaf,
    /// `on`: every certificate of the chain under the trust anchor.
    Chain,
}

/// A server's `ssl_ocsp*` settings, ready for handshakes.
pub struct ClientOcsp {
    pub depth: Depth,
    /// `ssl_ocsp_responder`: instead of each certificate's own.
    pub responder: Option<Url>,
    pub resolver: Option<crate::resolver::ResolverConf>,
    /// How long one certificate's exchange may take (resolving included).
    pub timeout: Duration,
    /// The trust files' certificates, to finish the chain as the
    /// verification did.
    pub anchors: Arc<Vec<CertificateDer<'static>>>,
    pub cache: Option<Arc<Cache>>,
}

/// Where a failed exchange is told (the connection's error log).
pub type Log<'a> = dyn Fn(&str) + 'a;

/// A certificate's status that fails verification, as nginx words it.
const FAILED: &str = "certificate status request failed";

fn failed() -> VerifyError {
    VerifyError::ocsp(FAILED)
}

/// Checks `chain` (leaf first, as the client sent it); `log` gets the
/// error-log text of a failed exchange. Ok when every certificate asked
/// about is good.
pub async fn check(o: &ClientOcsp, chain: &[CertificateDer<'_>], log: &Log<'_>) -> Result<(), VerifyError> {
    let Some((leaf, rest)) = chain.split_first() else { return Ok(()) };
    let full = crate::tls::client_chain::build(leaf, rest, &o.anchors);
    for i in 0..full.len().saturating_sub(1) {
        if o.depth == Depth::Leaf && i == 1 {
            break;
        }
        let (Some(cert), Some(issuer)) = (der::cert_fields(&full[i]), der::cert_fields(&full[i + 1])) else {
            return Err(failed());
        };
        let status = match status_of(o, &cert, &issuer, log).await {
            Some(s) => s,
            None => return Err(failed()),
        };
        match status {
            Status::Good => {}
            Status::Revoked => return Err(VerifyError::ocsp("certificate revoked")),
            Status::Unknown => return Err(VerifyError::ocsp("certificate status unknown")),
        }
    }
    Ok(())
}

/// One certificate's status, from the cache or its responder; None when
/// it could not be had (logged).
async fn status_of(
    o: &ClientOcsp,
    cert: &der::CertFields<'_>,
    issuer: &der::CertFields<'_>,
    log: &Log<'_>,
) -> Option<Status> {
    let id = CertId::new(cert, issuer);
    if let Some(s) = o.cache.as_ref().and_then(|c| c.lookup(&id, unix_now())) {
        return Some(s);
    }
    let own;
    let url = match &o.responder {
        Some(u) => u,
        None => {
            let Some(aia) = cert.ocsp_url else {
                log("no OCSP responder URL in certificate");
                return None;
            };
            match Url::parse(aia) {
                Ok(u) => {
                    own = u;
                    &own
                }
                Err(why) => {
                    log(&format!("{why} in OCSP responder \"{}\" in certificate", String::from_utf8_lossy(aia)));
                    return None;
                }
            }
        }
    };
    let fail = |peer: Option<&str>, why: &str| {
        let peer = peer.map(|p| format!(", peer: {p}")).unwrap_or_default();
        log(&format!("{why} while requesting certificate status, responder: {}{peer}", url.host));
    };
    let body = der::request(&id);
    let (peer, resp) = match tokio::time::timeout(o.timeout, http::post(url, &body, o.resolver.as_ref())).await {
        Ok(Ok(r)) => r,
        Ok(Err((peer, why))) => {
            fail(peer.as_deref(), &why);
            return None;
        }
        Err(_) => {
            fail(None, "OCSP responder timed out");
            return None;
        }
    };
    let now = unix_now();
    let parsed = match der::parse_response(&resp) {
        Ok(p) => p,
        Err(why) => {
            fail(Some(&peer), why);
            return None;
        }
    };
    // OpenSSL's OCSP_basic_verify as nginx calls it: signed by the issuer
    // (a certificate of the verified chain) or by a responder the issuer
    // delegated. (The client CAs carry no OpenSSL trust settings here, so
    // no root is trusted for OCSP signing by itself.)
    if !der::verify_response(&parsed, issuer, &[]) {
        fail(Some(&peer), "OCSP_basic_verify() failed");
        return None;
    }
    let (status, next_update) = match der::status_of(&parsed, &id, now) {
        Ok(s) => s,
        Err(why) => {
            fail(Some(&peer), why);
            return None;
        }
    };
    if let Some(c) = &o.cache {
        c.store(&id, status, next_update.unwrap_or(now + 3600), now);
    }
    Some(status)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// `ssl_ocsp_cache shared:NAME:SIZE`: statuses by certificate, the
/// oldest stored dropped first when the zone is full (as nginx's expire
/// queue does).
pub struct Cache {
    capacity: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_id: HashMap<Vec<u8>, (Status, i64)>,
    order: VecDeque<Vec<u8>>,
}

/// What one entry costs in nginx's zone (its node and key, in slab
/// terms), so a size holds about as many statuses as there.
const ENTRY_BYTES: usize = 128;

fn key(id: &CertId) -> Vec<u8> {
    [&id.name_hash[..], &id.key_hash[..], &id.serial[..]].concat()
}

impl Cache {
    fn lookup(&self, id: &CertId, now: i64) -> Option<Status> {
        let mut e = self.inner.lock().ok()?;
        let k = key(id);
        match e.by_id.get(&k) {
            Some(&(s, valid)) if valid > now => Some(s),
            Some(_) => {
                e.by_id.remove(&k);
                e.order.retain(|o| o != &k);
                None
            }
            None => None,
        }
    }

    fn store(&self, id: &CertId, status: Status, valid: i64, now: i64) {
        if valid < now {
            return;
        }
        let Ok(mut e) = self.inner.lock() else { return };
        let k = key(id);
        if e.by_id.insert(k.clone(), (status, valid)).is_some() {
            e.order.retain(|o| o != &k);
        }
        e.order.push_back(k);
        while e.by_id.len() > self.capacity {
            let Some(old) = e.order.pop_front() else { break };
            e.by_id.remove(&old);
        }
    }
}

/// The zones by name: a zone outlives a reload while a configuration
/// still names it, as nginx's shared memory does.
static ZONES: Mutex<Option<HashMap<String, Weak<Cache>>>> = Mutex::new(None);

/// The cache zone `name` of `size` bytes (the one already in use, if any).
pub fn zone(name: &str, size: usize) -> Arc<Cache> {
    let fresh = || Arc::new(Cache { capacity: (size / ENTRY_BYTES).max(1), inner: Mutex::default() });
    let Ok(mut zones) = ZONES.lock() else { return fresh() };
    let zones = zones.get_or_insert_with(HashMap::new);
    zones.retain(|_, w| w.strong_count() > 0);
    if let Some(c) = zones.get(name).and_then(Weak::upgrade) {
        return c;
    }
    let c = fresh();
    zones.insert(name.to_string(), Arc::downgrade(&c));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(serial: u8) -> CertId {
        CertId { name_hash: vec![1; 20], key_hash: vec![2; 20], serial: vec![serial] }
    }

    #[test]
    fn cache_keeps_until_valid_and_drops_the_oldest() {
        let c = Cache { capacity: 2, inner: Mutex::default() };
        c.store(&id(1), Status::Good, 100, 10);
        c.store(&id(2), Status::Revoked, 100, 10);
        assert_eq!(c.lookup(&id(1), 50), Some(Status::Good));
        assert_eq!(c.lookup(&id(2), 50), Some(Status::Revoked));
        assert_eq!(c.lookup(&id(1), 100), None);
        c.store(&id(3), Status::Good, 100, 10);
        c.store(&id(4), Status::Good, 100, 10);
        assert_eq!(c.lookup(&id(2), 50), None);
        assert_eq!(c.lookup(&id(4), 50), Some(Status::Good));
        c.store(&id(5), Status::Good, 5, 10);
        assert_eq!(c.lookup(&id(5), 1), None);
    }

    #[test]
    fn zones_are_shared_by_name() {
        let a = zone("ocsp-test-a", 1 << 20);
        let b = zone("ocsp-test-a", 1 << 20);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &zone("ocsp-test-b", 1 << 20)));
    }
}
