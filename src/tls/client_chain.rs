//! A client's chain the way OpenSSL builds it, for what webpki does not
//! decide as nginx does: the chain's length (`ssl_verify_depth`) and a
//! client certificate that is itself a CA (OpenSSL accepts one as a peer
//! certificate; webpki refuses it as `CaUsedAsEndEntity`).

use rustls_pki_types::{CertificateDer, UnixTime};

use super::ocsp::der::{CertFields, cert_fields, verify_sig};

/// More than any chain a client may present (OpenSSL's default depth is
/// 100): ends the walk of a chain whose names loop.
const MAX_LEN: usize = 110;

/// The issuer of `cert` among `pool`: its subject is `cert`'s issuer and
/// its key signed `cert`.
fn issuer_in<'a>(cert: &CertFields<'_>, mut pool: impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    pool.find(|c| {
        cert_fields(c)
            .is_some_and(|i| i.subject == cert.issuer && verify_sig(&i, cert.sig_alg, cert.tbs, cert.signature))
    })
}

/// OpenSSL's chain from `leaf`: the leaf, then each issuer (from the
/// client's chain, else the trust files) up to one that issued itself.
/// nginx's `ssl_verify_depth N` allows N + 2 certificates (the leaf, N
/// intermediate CAs and the trust anchor).
pub fn build(
    leaf: &CertificateDer<'_>,
    rest: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'static>],
) -> Vec<Vec<u8>> {
    let mut chain = vec![leaf.as_ref().to_vec()];
    while chain.len() < MAX_LEN {
        let Some(f) = chain.last().and_then(|c| cert_fields(c)) else { break };
        if f.subject == f.issuer {
            break;
        }
        let pool = rest.iter().map(|c| c.as_ref()).chain(anchors.iter().map(|c| c.as_ref()));
        let Some(next) = issuer_in(&f, pool) else { break };
        let next = next.to_vec();
        chain.push(next);
    }
    chain
}

/// A chain whose leaf is a CA certificate, checked as OpenSSL does: each
/// certificate valid now and signed by the next, up to one of the trust
/// files' certificates. Only for the case webpki refuses outright.
pub fn ca_leaf_trusted(
    leaf: &CertificateDer<'_>,
    rest: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'static>],
    now: UnixTime,
) -> bool {
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let valid = |c: &[u8]| {
        super::client_cert::validity(&CertificateDer::from(c))
            .is_some_and(|(start, end)| start.unix <= now && now <= end.unix)
    };
    let mut cur = leaf.as_ref().to_vec();
    for _ in 0..MAX_LEN {
        if !valid(&cur) {
            return false;
        }
        if anchors.iter().any(|a| a.as_ref() == cur.as_slice()) {
            return true;
        }
        let Some(f) = cert_fields(&cur) else { return false };
        let Some(next) = issuer_in(&f, anchors.iter().map(|c| c.as_ref()).chain(rest.iter().map(|c| c.as_ref())))
        else {
            return false;
        };
        cur = next.to_vec();
    }
    false
}
