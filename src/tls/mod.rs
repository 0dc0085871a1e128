//! TLS with rustls (aws-lc-rs provider): one `ServerConfig` per `server`
//! block, picked per connection by SNI before the handshake proceeds
//! (`handshake`), so each server's certificates, protocols and client
//! verification apply, as with nginx's SNI callback.

pub mod acme;
pub mod certs;
pub mod client;
pub mod client_cert;
pub mod client_chain;
pub mod client_verify;
pub mod crl;
pub mod der;
pub mod dynamic;
pub mod handshake;
pub mod keyfile;
pub mod names;
pub mod ocsp;
pub mod origin_verify;
pub mod quic;
pub mod reneg;
pub mod session;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs as provider;
use rustls::server::{NoServerSessionStorage, ServerConfig, WebPkiClientVerifier};

use crate::config::model::{PemSource, SessionCache, SslConf, VerifyClient};
use crate::config::parser::{ConfError, Span};
pub use certs::CertCache;

/// A server's TLS: two configurations differing only in ALPN (an address
/// with `http2` offers h2), or a refusal (`ssl_reject_handshake on`).
pub struct ServerTls {
    pub reject: bool,
    pub with_h2: Option<Arc<ServerConfig>>,
    pub h1_only: Option<Arc<ServerConfig>>,
    /// For `listen ... quic`: TLS 1.3 only (QUIC requires it, whatever
    /// `ssl_protocols` says, as in nginx) with ALPN "h3".
    pub quic: Option<Arc<quinn_proto::crypto::rustls::QuicServerConfig>>,
    /// `ssl_verify_client on`: a request without a client certificate gets
    /// nginx's 400 "No required SSL certificate was sent".
    pub require_client_cert: bool,
    /// `ssl_verify_client optional_no_ca`: an unknown issuer is no error.
    pub no_ca: bool,
    /// Checks a client's chain after the handshake (`ssl_verify_client`).
    pub client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    /// `ssl_ocsp`: asks about a verified chain next (`ocsp::client`).
    pub ocsp: Option<Arc<ocsp::client::ClientOcsp>>,
    /// Certificates with variables: evaluated and loaded at each
    /// handshake (`dynamic`), the configurations above then carry none.
    pub dynamic: Option<Arc<dynamic::DynamicCerts>>,
    /// Whether the configurations offer TLS 1.3 (for `CertChooser`).
    pub tls13: bool,
}

impl ServerTls {
    /// `cfg` with the connection's own certificates (a server whose
    /// certificates have variables): the same settings, sessions and
    /// tickets, another certificate resolver.
    pub fn with_certs(&self, cfg: &ServerConfig, certs: Vec<Arc<rustls::sign::CertifiedKey>>) -> Arc<ServerConfig> {
        let mut c = cfg.clone();
        c.cert_resolver = Arc::new(certs::CertChooser::new(certs, self.tls13));
        Arc::new(c)
    }

    /// The configuration to finish a handshake with, once its ClientHello
    /// is read: `cfg`, or, for certificates with variables, `cfg` with
    /// the pairs they name for `conn` (both families' handshakes). The
    /// error is nginx's "cannot load certificate ..." for an `[error]`
    /// line; the handshake then ends with [`refuse`].
    pub async fn for_connection(
        &self,
        cfg: Arc<ServerConfig>,
        conn: &dynamic::Conn<'_>,
    ) -> Result<Arc<ServerConfig>, String> {
        match self.dynamic.as_ref().filter(|_| !self.reject) {
            Some(d) => Ok(self.with_certs(&cfg, d.resolve(conn).await?)),
            None => Ok(cfg),
        }
    }
}

/// Ends a handshake whose certificates did not load with an alert, as
/// nginx's failed certificate callback does.
pub async fn refuse<IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(start: tokio_rustls::StartHandshake<IO>) {
    if let Some(rc) = reject_config() {
        let _ = start.into_stream(rc).await;
    }
}

/// Ends a handshake refused by `ssl_reject_handshake on` with nginx's
/// fatal `unrecognized_name` alert (OpenSSL's servername callback answers
/// `SSL_AD_UNRECOGNIZED_NAME`). rustls has no way for a certificate
/// resolver to pick the alert (a resolver without a certificate makes it
/// send `access_denied`), so the alert record is written on the transport
/// here, before rustls writes anything, and the handshake is dropped.
pub async fn reject_unrecognized_name<IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    start: tokio_rustls::StartHandshake<IO>,
) {
    use tokio::io::AsyncWriteExt;
    /// A fatal (2) unrecognized_name (112) alert in a TLS 1.2 record.
    const ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];
    let Some(rc) = reject_config() else { return };
    let mut accept = start.into_stream(rc);
    if let Some(io) = accept.get_mut() {
        let _ = io.write_all(&ALERT).await;
        let _ = io.shutdown().await;
    }
}

fn err(msg: String, span: &Span) -> ConfError {
    ConfError::at(msg, span)
}

/// An `ssl_ciphers` list sorted out: suite names rustls implements (for
/// TLS 1.2), names it lacks, and whether an alias (`HIGH`, `ECDHE+AESGCM`)
/// selects a set of its own.
pub struct CipherClasses<'a> {
    pub known: usize,
    pub unknown: Vec<&'a str>,
    pub alias: bool,
}

fn cipher_words(list: &str) -> impl Iterator<Item = &str> {
    list.split([':', ' ', ',']).filter(|w| !w.is_empty())
}

pub fn classify_ciphers(list: &str) -> CipherClasses<'_> {
    let mut c = CipherClasses { known: 0, unknown: Vec::new(), alias: false };
    for word in cipher_words(list) {
        if word.starts_with(['!', '-', '+', '@']) {
            continue;
        }
        match names::suite_by_openssl_name(word) {
            Some(s) if is_tls12(s) => c.known += 1,
            // TLS 1.3 names: OpenSSL's ssl_ciphers does not set those; the
            // TLS 1.3 suites are always on.
            Some(_) => c.alias = true,
            None if word.contains('-') && !word.contains('+') => c.unknown.push(word),
            None => c.alias = true,
        }
    }
    c
}

fn is_tls12(s: rustls::CipherSuite) -> bool {
    provider::ALL_CIPHER_SUITES.iter().any(|x| x.suite() == s && x.version() == &rustls::version::TLS12)
}

/// nginx's default `ssl_ciphers HIGH:!aNULL:!MD5` selects every suite rustls
/// has. A list naming OpenSSL suites restricts TLS 1.2 to those rustls
/// implements, in that order (the others were warned about at load);
/// aliases and exclusions alone keep rustls's set, and TLS 1.3 suites are
/// always on, as in nginx where `ssl_ciphers` does not touch them.
fn choose_suites(ciphers: Option<&(String, Span)>) -> Vec<rustls::SupportedCipherSuite> {
    let all = provider::ALL_CIPHER_SUITES;
    let Some((list, _)) = ciphers else { return provider::DEFAULT_CIPHER_SUITES.to_vec() };
    let mut tls12 = Vec::new();
    for word in cipher_words(list) {
        if let Some(s) = names::suite_by_openssl_name(word)
            && let Some(sup) = all.iter().find(|x| x.suite() == s && x.version() == &rustls::version::TLS12)
            && !tls12.contains(sup)
        {
            tls12.push(*sup);
        }
    }
    if tls12.is_empty() {
        return provider::DEFAULT_CIPHER_SUITES.to_vec();
    }
    let tls13 = all.iter().filter(|s| s.version() == &rustls::version::TLS13).copied();
    tls13.chain(tls12).collect()
}

/// A key exchange group by an OpenSSL curve name rustls implements.
pub fn kx_group_by_name(name: &str) -> Option<&'static dyn rustls::crypto::SupportedKxGroup> {
    use provider::kx_group;
    Some(match name {
        "X25519" | "x25519" => kx_group::X25519,
        "prime256v1" | "secp256r1" | "P-256" => kx_group::SECP256R1,
        "secp384r1" | "P-384" => kx_group::SECP384R1,
        "X25519MLKEM768" => kx_group::X25519MLKEM768,
        "SecP256r1MLKEM768" => kx_group::SECP256R1MLKEM768,
        _ => return None,
    })
}

/// `ssl_ecdh_curve`: the named groups rustls implements, in order (the
/// others were warned about at load); `auto`: rustls's defaults.
fn choose_groups(curve: Option<&(String, Span)>) -> Vec<&'static dyn rustls::crypto::SupportedKxGroup> {
    match curve {
        Some((list, _)) if list != "auto" => list.split(':').filter_map(kx_group_by_name).collect(),
        _ => provider::DEFAULT_KX_GROUPS.to_vec(),
    }
}

/// Builds a server's TLS from its `ssl_*` settings: None when it has no
/// certificate (a plain-HTTP server).
pub fn build_server(
    ssl: &SslConf,
    cache: &mut CertCache,
    resolver: Option<&crate::resolver::Conf>,
) -> Result<Option<Arc<ServerTls>>, ConfError> {
    // `ssl_conf_command`s win over the other directives, as in nginx.
    let applied = ssl.with_conf_commands();
    let ssl: &SslConf = &applied;
    if ssl.certificates.is_empty() {
        return Ok(ssl.reject_handshake.then(|| {
            Arc::new(ServerTls {
                reject: true,
                with_h2: None,
                h1_only: None,
                quic: None,
                require_client_cert: false,
                no_ca: false,
                client_verifier: None,
                ocsp: None,
                dynamic: None,
                tls13: false,
            })
        }));
    }
    let cipher_suites = choose_suites(ssl.ciphers.as_ref());
    let kx_groups = choose_groups(ssl.ecdh_curve.as_ref());
    let provider = Arc::new(CryptoProvider { cipher_suites, kx_groups, ..provider::default_provider() });
    let span0 = &ssl.certificates[0].1;

    let mut keys = Vec::new();
    let ocsp = if ssl.stapling { ssl.stapling_file.as_ref().map(|(p, _)| p.clone()) } else { None };
    let passwords: &[Vec<u8>] = ssl.passwords.as_deref().map(|v| v.as_slice()).unwrap_or(&[]);
    let dynamic = ssl.certificates.iter().chain(&ssl.keys).any(|(c, _)| matches!(c, PemSource::Vars(..)));
    // With OpenSSL's trust settings kept: `TRUSTED CERTIFICATE` blocks
    // can make a root trusted for OCSP signing (`ssl_stapling_verify`).
    let trusted = match &ssl.trusted_certificate {
        Some((p, span)) if ssl.stapling => {
            let pem =
                std::fs::read(p).map_err(|e| err(format!("cannot load certificate \"{}\": {e}", p.display()), span))?;
            let found = ocsp::trust::certificates(&pem);
            if found.is_empty() {
                certs::load_chain(p).map_err(|m| err(m, span))?;
            }
            found
        }
        _ => Vec::new(),
    };
    let mut pairs = Vec::new();
    for (i, (cert, span)) in ssl.certificates.iter().enumerate() {
        let Some((key, _)) = ssl.keys.get(i) else {
            return Err(err(
                format!("no \"ssl_certificate_key\" is defined for certificate \"{}\"", cert.display()),
                span,
            ));
        };
        if dynamic {
            // nginx loads none of them now: with one value having
            // variables, every pair is evaluated at handshake time.
            pairs.push((cert.clone(), key.clone()));
            continue;
        }
        let (cert, key) = (static_pem(cert), static_pem(key));
        let id = (cert.id(), key.id(), ocsp.clone());
        let ck = match cache.pairs.get(&id) {
            Some(ck) => ck.clone(),
            None => {
                let ck =
                    certs::load_pair(&provider, cert, key, passwords, ocsp.as_deref()).map_err(|m| err(m, span))?;
                cache.pairs.insert(id, ck.clone());
                ck
            }
        };
        let staple =
            if ssl.stapling && ocsp.is_none() { staple(ssl, cache, &ck, cert, &trusted, resolver, span) } else { None };
        keys.push((ck, staple));
    }
    let dynamic = dynamic.then(|| {
        Arc::new(dynamic::DynamicCerts::new(
            pairs,
            ssl.passwords.clone(),
            provider.clone(),
            ssl.certificate_cache,
            ssl.acme.clone(),
        ))
    });

    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if ssl.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if ssl.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let (mut cfg, client_verifier) = server_config(ssl, &provider, keys.clone(), &versions, span0)?;
    // Over TCP 0-RTT stays off even with `ssl_early_data on`: the TCP
    // handshake layer does not hand early data to the request pipeline.
    cfg.max_early_data_size = 0;
    let mut h1 = cfg.clone();
    h1.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let context = session_context(ssl, &keys);
    let (mut q, _) = server_config(ssl, &provider, keys, &[&rustls::version::TLS13], span0)?;
    q.max_early_data_size = 0;
    if ssl.early_data {
        zero_rtt(&mut q, ssl, context);
    }
    q.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn_proto::crypto::rustls::QuicServerConfig::try_from(Arc::new(q))
        .map_err(|e| err(format!("invalid TLS settings for QUIC: {e}"), span0))?;
    Ok(Some(Arc::new(ServerTls {
        reject: ssl.reject_handshake,
        with_h2: Some(Arc::new(cfg)),
        h1_only: Some(Arc::new(h1)),
        // QUIC's handshake cannot wait for a loader: refused at load
        // (`config::build`) for a server whose certificates have variables.
        quic: if dynamic.is_some() { None } else { Some(Arc::new(quic)) },
        require_client_cert: ssl.verify_client == VerifyClient::On,
        no_ca: ssl.verify_client == VerifyClient::OptionalNoCa,
        client_verifier,
        ocsp: client_ocsp(ssl, resolver, span0)?,
        dynamic,
        tls13: ssl.tls13,
    })))
}

/// `ssl_ocsp`'s settings for handshakes; None when it is off or no
/// client certificate is verified.
fn client_ocsp(
    ssl: &SslConf,
    resolver: Option<&crate::resolver::Conf>,
    span0: &Span,
) -> Result<Option<Arc<ocsp::client::ClientOcsp>>, ConfError> {
    let Some(depth) = ssl.ocsp else { return Ok(None) };
    match ssl.verify_client {
        VerifyClient::Off => return Ok(None),
        VerifyClient::OptionalNoCa => {
            let why = "\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\"";
            return Err(err(why.into(), span0));
        }
        VerifyClient::On | VerifyClient::Optional => {}
    }
    let mut anchors = Vec::new();
    for (path, span) in [ssl.client_certificate.as_ref(), ssl.trusted_certificate.as_ref()].into_iter().flatten() {
        anchors.extend(certs::load_chain(path).map_err(|m| err(m, span))?);
    }
    let responder = match &ssl.ocsp_responder {
        Some(u) => Some(ocsp::http::Url::parse(u.as_bytes()).map_err(|why| err(why.into(), span0))?),
        None => None,
    };
    Ok(Some(Arc::new(ocsp::client::ClientOcsp {
        depth,
        responder,
        resolver: resolver.and_then(|r| r.resolver.clone()),
        // nginx's OCSP exchanges have a minute.
        timeout: std::time::Duration::from_secs(60),
        anchors: Arc::new(anchors),
        cache: ssl.ocsp_cache.as_ref().map(|(name, size)| ocsp::client::zone(name, *size)),
    })))
}

/// A value without variables as the loader reads it.
fn static_pem(v: &PemSource) -> certs::Pem<'_> {
    match v {
        PemSource::File(p) => certs::Pem::File(p),
        PemSource::Data(d) => certs::Pem::Data(d),
        // Not reached: a value with variables makes the server dynamic.
        PemSource::Vars(_, dir, _) => certs::Pem::File(dir),
    }
}

type ClientVerifier = Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>;

/// A certified key and its OCSP staple, if stapled.
type Keyed = (Arc<rustls::sign::CertifiedKey>, Option<Arc<ocsp::Staple>>);

/// The staple of a certificate (one per certificate, responder and
/// verification setting for the whole configuration), or None with
/// nginx's warning when it cannot be stapled.
fn staple(
    ssl: &SslConf,
    cache: &mut CertCache,
    ck: &Arc<rustls::sign::CertifiedKey>,
    cert: certs::Pem<'_>,
    trusted: &[(Vec<u8>, bool)],
    resolver: Option<&crate::resolver::Conf>,
    span: &Span,
) -> Option<Arc<ocsp::Staple>> {
    let key = (cert.id(), ssl.stapling_responder.clone(), ssl.stapling_verify);
    if let Some(s) = cache.stapled.get(&key) {
        return Some(s.clone());
    }
    let conf = ocsp::StaplingConf {
        responder: ssl.stapling_responder.as_deref(),
        verify: ssl.stapling_verify,
        trusted,
        resolver: resolver.and_then(|r| r.resolver.clone()),
        timeout: resolver.map_or(std::time::Duration::from_secs(30), |r| r.timeout),
    };
    match ocsp::staple_for(ck, &cert.name(), &conf) {
        Ok(Some(s)) => {
            cache.stapled.insert(key, s.clone());
            cache.staples.push(s.clone());
            Some(s)
        }
        Ok(None) => None,
        Err(why) => {
            cache.warnings.push(err(why, span).to_string());
            None
        }
    }
}

/// One rustls configuration of a server for the protocol `versions`, with
/// its certificates, client verification, session cache and tickets.
fn server_config(
    ssl: &SslConf,
    provider: &Arc<CryptoProvider>,
    keys: Vec<Keyed>,
    versions: &[&'static rustls::SupportedProtocolVersion],
    span0: &Span,
) -> Result<(ServerConfig, ClientVerifier), ConfError> {
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| err(format!("invalid TLS settings: {}", e), span0))?;
    let mut client_verifier = None;
    let builder = match ssl.verify_client {
        VerifyClient::Off => builder.with_no_client_auth(),
        // nginx needs no CA for optional_no_ca: any certificate is then of
        // an unknown issuer, which that mode lets through.
        VerifyClient::OptionalNoCa if ssl.client_certificate.is_none() && ssl.trusted_certificate.is_none() => builder
            .with_client_cert_verifier(Arc::new(client_verify::Deferred {
                inner: None,
                algorithms: provider.signature_verification_algorithms,
            })),
        _ => {
            // nginx verifies with both files; only `ssl_client_certificate`'s
            // names are sent to the client as acceptable issuers.
            let (ca, span) = match (&ssl.client_certificate, &ssl.trusted_certificate) {
                (Some((p, s)), _) | (None, Some((p, s))) => (p, s),
                (None, None) => {
                    let why = "no ssl_client_certificate or ssl_trusted_certificate for ssl_verify_client";
                    return Err(err(why.into(), span0));
                }
            };
            let mut roots = rustls::RootCertStore::empty();
            let mut anchors = Vec::new();
            let mut hints = Vec::new();
            let files = [ssl.client_certificate.as_ref(), ssl.trusted_certificate.as_ref()];
            for (i, (path, span)) in files.into_iter().enumerate().filter_map(|(i, f)| Some((i, f?))) {
                for c in certs::load_chain(path).map_err(|m| err(m, span))? {
                    // A name listed twice is sent once, as OpenSSL's
                    // SSL_load_client_CA_file skips duplicates.
                    if i == 0
                        && let Some(n) = client_verify::subject(&c)
                        && !hints.iter().any(|h: &rustls::DistinguishedName| h.as_ref() == n.as_ref())
                    {
                        hints.push(n);
                    }
                    // A certificate webpki cannot take as a root (version
                    // 1) still counts for itself.
                    let _ = roots.add(c.clone());
                    anchors.push(c);
                }
            }
            if roots.is_empty() && anchors.is_empty() {
                return Err(err(format!("no certificates in \"{}\"", ca.display()), span));
            }
            // Optional at the TLS level and checked after the handshake:
            // nginx completes it and answers 400 to a request without a
            // certificate (with `on`) or with one that fails verification.
            let mut vb = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .clear_root_hint_subjects()
                .add_root_hint_subjects(hints);
            // OpenSSL's CRL_CHECK_ALL, as nginx sets it: every certificate
            // of the chain under a CA needs its issuer's CRL, and an
            // expired CRL fails the check.
            // CRLs webpki cannot read (version 1) are applied by `crl`.
            let mut own_crls = None;
            if let Some((path, span)) = &ssl.crl {
                let crls = certs::load_crls(path).map_err(|m| err(m, span))?;
                if crl::webpki_reads(&crls) {
                    vb = vb.with_crls(crls).enforce_revocation_expiration();
                } else {
                    let parsed = crl::Crls::parse(&crls)
                        .map_err(|m| err(format!("cannot load CRL \"{}\": {m}", path.display()), span))?;
                    own_crls = Some(Arc::new(parsed));
                }
            }
            let v: Arc<dyn rustls::server::danger::ClientCertVerifier> = Arc::new(client_verify::Anchored {
                inner: vb.build().map_err(|e| {
                    err(format!("cannot use \"{}\" for client verification: {}", ca.display(), e), span)
                })?,
                anchors,
                algorithms: provider.signature_verification_algorithms,
                depth: ssl.verify_depth,
                webpki_crl: ssl.crl.is_some() && own_crls.is_none(),
                crls: own_crls,
            });
            client_verifier = Some(v.clone());
            builder.with_client_cert_verifier(Arc::new(client_verify::Deferred {
                inner: Some(v),
                algorithms: provider.signature_verification_algorithms,
            }))
        }
    };
    let tls13 = versions.contains(&&rustls::version::TLS13);
    let context = session_context(ssl, &keys);
    let mut cfg = builder.with_cert_resolver(Arc::new(certs::CertChooser::stapled(keys, tls13)));
    cfg.ignore_client_order = ssl.prefer_server_ciphers;
    cfg.session_storage = match &ssl.session_cache {
        SessionCache::Off | SessionCache::None => Arc::new(NoServerSessionStorage {}),
        SessionCache::Builtin(n) => {
            Arc::new(session::TimedStore { store: session::Store::new(*n), timeout: ssl.session_timeout, context })
        }
        SessionCache::Shared(name, n) => Arc::new(session::TimedStore {
            store: session::Store::shared(name, *n),
            timeout: ssl.session_timeout,
            context,
        }),
    };
    if ssl.session_tickets {
        let files: Vec<_> = ssl.ticket_keys.iter().map(|(p, _)| p.clone()).collect();
        let span = ssl.ticket_keys.first().map(|(_, s)| s).unwrap_or(span0);
        cfg.ticketer = session::Tickets::new(&files, ssl.session_timeout, context).map_err(|m| err(m, span))?;
    } else {
        // TLS 1.3 resumption then relies on the cache alone, as in nginx.
        cfg.send_tls13_tickets =
            if matches!(ssl.session_cache, SessionCache::Off | SessionCache::None) { 0 } else { 1 };
    }
    Ok((cfg, client_verifier))
}

/// `ssl_early_data on` over QUIC: 0-RTT is accepted on a resumed session
/// whose ticket allows it. rustls accepts early data only with stateful
/// resumption (RFC 8446 8.1): the ticket is an id into a session store,
/// and resuming takes the session out of it, so every ticket resumes (and
/// carries 0-RTT) at most once, and replayed early data finds no session
/// and is rejected. The store is the server's `ssl_session_cache` when it
/// has one, else a process-wide one kept for this (so tickets outlive a
/// reload, not a restart); `ssl_session_ticket_key` then does not apply
/// to this server's QUIC tickets. Without any resumption
/// (`ssl_session_tickets off` and no cache) there is no 0-RTT either.
/// QUIC allows no other `max_early_data_size` than 0xffffffff (RFC 9001
/// 4.6.1); the tickets carry it.
fn zero_rtt(q: &mut ServerConfig, ssl: &SslConf, context: session::Context) {
    let cached = !matches!(ssl.session_cache, SessionCache::Off | SessionCache::None);
    if !cached && !ssl.session_tickets {
        return;
    }
    q.max_early_data_size = u32::MAX;
    q.ticketer = Arc::new(session::Stateful);
    if !cached {
        q.session_storage = Arc::new(session::TimedStore {
            store: session::Store::shared(session::ZERO_RTT_STORE, session::ZERO_RTT_SESSIONS),
            timeout: ssl.session_timeout,
            context,
        });
    }
}

/// OpenSSL's session id context as nginx sets it
/// (`ngx_ssl_session_id_context`): a digest of the server's certificates,
/// or, when they are chosen by variables, of their values as written. A
/// session (cached or in a ticket) resumes only on a server with the
/// same context: servers sharing a cache or ticket keys but not their
/// certificates do not resume each other's sessions.
fn session_context(ssl: &SslConf, keys: &[Keyed]) -> session::Context {
    let mut h = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    for (ck, _) in keys {
        if let Some(leaf) = ck.cert.first() {
            h.update(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, leaf.as_ref()).as_ref());
        }
    }
    if keys.is_empty() {
        for (c, _) in &ssl.certificates {
            h.update(c.display().as_bytes());
        }
    }
    let mut out = [0u8; session::CONTEXT_LEN];
    out.copy_from_slice(&h.finish().as_ref()[..session::CONTEXT_LEN]);
    out
}

/// A configuration that refuses every handshake with an alert.
pub fn reject_config() -> Option<Arc<ServerConfig>> {
    static REJECT: std::sync::OnceLock<Option<Arc<ServerConfig>>> = std::sync::OnceLock::new();
    REJECT
        .get_or_init(|| {
            ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_no_client_auth().with_cert_resolver(Arc::new(certs::RejectAll))))
                .ok()
        })
        .clone()
}
