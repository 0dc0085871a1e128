//! One certificate obtained from an ACME server (RFC 8555 section 7):
//! the directory, a nonce, the account (created once, then named by its
//! URL), a new order, each authorization's HTTP-01 challenge (its key
//! authorization published for the HTTP listeners, section 8.3), the
//! order finalized with a CSR for a fresh key, and the chain downloaded.
//! A `badNonce` refusal is retried with the nonce it carries, as section
//! 6.5 asks. With `preferred_chain`, the alternate chains the download
//! links to (section 7.4.2) are looked at too; a renewal names the
//! certificate it replaces (RFC 9773 section 5).

use std::time::Duration;

use super::http::Client;
use super::jws::Key;
use super::wire::{self, Answer, Directory};

/// The account an issuer uses: its key, and its URL once known.
pub struct Account {
    pub key: Key,
    pub kid: Option<String>,
}

/// What the issuer block says about the account.
pub struct AccountConf<'a> {
    pub contact: &'a [String],
    pub accept_terms: bool,
    /// External account binding: key id and MAC key.
    pub eab: Option<&'a (String, Vec<u8>)>,
}

/// How an order is made: the challenge type and the profile asked for
/// (and whether the server must offer it).
pub struct OrderConf<'a> {
    pub challenge: &'a str,
    pub profile: Option<&'a (String, bool)>,
    /// `preferred_chain`: the issuer CN of the topmost certificate wanted.
    pub preferred_chain: Option<&'a str>,
    /// The ARI identifier of the certificate this order renews.
    pub replaces: Option<&'a str>,
}

/// A session with one server: its directory and the next nonce.
pub struct Session<'a> {
    pub http: &'a Client,
    dir: Directory,
    nonce: Option<String>,
}

/// How long polling an order or authorization may take in all.
const POLL_LIMIT: Duration = Duration::from_secs(120);

impl<'a> Session<'a> {
    /// Fetches the directory, following up to five redirects (nginx-acme
    /// does: a directory URL may answer 301 or 302).
    pub async fn open(http: &'a Client, uri: &str) -> Result<Session<'a>, String> {
        let mut url = uri.to_string();
        let mut a = http.request(&url, None).await?;
        for _ in 0..5 {
            let Some(next) = a.location.as_deref().filter(|_| matches!(a.status, 301 | 302 | 303 | 307 | 308)) else {
                break;
            };
            url = join(&url, next)?;
            a = http.request(&url, None).await?;
        }
        if a.status != 200 {
            return Err(format!(
                "ACME directory \"{uri}\" answered {}: {}",
                a.status,
                wire::problem(a.status, &a.body)
            ));
        }
        let dir = wire::directory(&a.body)?;
        Ok(Session { http, dir, nonce: a.nonce })
    }

    async fn nonce(&mut self) -> Result<String, String> {
        if let Some(n) = self.nonce.take() {
            return Ok(n);
        }
        let url = self.dir.new_nonce.clone();
        let a = self.http.request(&url, None).await?;
        a.nonce.ok_or_else(|| "ACME server sent no Replay-Nonce".to_string())
    }

    /// Whether the server offers renewal information (RFC 9773).
    pub fn has_renewal_info(&self) -> bool {
        self.dir.renewal_info.is_some()
    }

    /// The renewal window of the certificate `cert_id` and the server's
    /// Retry-After; None when the server offers no renewal information.
    /// A plain GET (section 4.1: no account is needed).
    pub async fn renewal_info(&self, cert_id: &str) -> Result<Option<(wire::RenewalWindow, Option<u64>)>, String> {
        let Some(base) = &self.dir.renewal_info else { return Ok(None) };
        let url = format!("{}/{cert_id}", base.trim_end_matches('/'));
        let a = self.http.request(&url, None).await?;
        if a.status != 200 {
            return Err(format!(
                "ACME server answered {} to \"{url}\": {}",
                a.status,
                wire::problem(a.status, &a.body)
            ));
        }
        Ok(Some((wire::renewal_window(&a.body)?, a.retry_after)))
    }

    /// A signed POST (None: POST-as-GET); a `badNonce` refusal is tried
    /// again with the fresh nonce it carries, up to nine times (a CA may
    /// reject any share of nonces; each retry costs one request).
    async fn post(&mut self, acct: &Account, url: &str, payload: Option<&str>, jwk: bool) -> Result<Answer, String> {
        let mut tries = 0;
        loop {
            let nonce = self.nonce().await?;
            let kid = if jwk { None } else { acct.kid.as_deref() };
            let body = acct.key.jws(url, &nonce, kid, payload)?;
            let a = self.http.request(url, Some(&body)).await?;
            self.nonce = a.nonce.clone();
            if a.status < 400 {
                return Ok(a);
            }
            let p = wire::problem(a.status, &a.body);
            tries += 1;
            if p.is("badNonce") && tries < 10 {
                crate::log_error!(crate::log::error::Level::Info, "acme: nonce rejected by \"{url}\", retrying");
                continue;
            }
            return Err(format!("ACME server answered {} to \"{url}\": {p}", a.status));
        }
    }

    /// Finds or creates the account (`onlyReturnExisting` is not used:
    /// newAccount with a known key returns the existing one, 200).
    pub async fn account(&mut self, acct: &mut Account, conf: &AccountConf<'_>) -> Result<bool, String> {
        if acct.kid.is_some() {
            return Ok(false);
        }
        if self.dir.terms_of_service.is_some() && !conf.accept_terms {
            crate::log_error!(
                crate::log::error::Level::Warn,
                "the ACME server's terms of service ({}) are not accepted (\"accept_terms_of_service\")",
                self.dir.terms_of_service.as_deref().unwrap_or("")
            );
        }
        let contact: Vec<String> =
            conf.contact.iter().map(|c| if c.contains(':') { c.clone() } else { format!("mailto:{c}") }).collect();
        let mut payload = serde_json::json!({ "contact": contact });
        if conf.accept_terms {
            payload["termsOfServiceAgreed"] = true.into();
        }
        let url = self.dir.new_account.clone();
        match conf.eab {
            Some((kid, mac)) => {
                payload["externalAccountBinding"] =
                    super::jws::external_account_binding(kid, mac, &url, &acct.key.jwk());
            }
            None if self.dir.eab_required => {
                return Err("the ACME server requires external account binding (\"external_account_key\")".into());
            }
            None => {}
        }
        let a = self.post(acct, &url, Some(&payload.to_string()), true).await?;
        let kid = a.location.ok_or("ACME server sent no account URL")?;
        acct.kid = Some(kid);
        Ok(a.status == 201)
    }

    /// The whole order for `names`; `publish` makes a challenge's key
    /// authorization answerable (token, key authorization) and
    /// `withdraw` ends that. Returns the chain (PEM) and the new key.
    pub async fn order(
        &mut self,
        acct: &Account,
        names: &[String],
        cert_key: &Key,
        how: &OrderConf<'_>,
        publish: &Publish,
        withdraw: &dyn Fn(&str),
    ) -> Result<Vec<u8>, String> {
        let ids: Vec<serde_json::Value> = names
            .iter()
            .map(|n| {
                let kind = if n.parse::<std::net::IpAddr>().is_ok() { "ip" } else { "dns" };
                serde_json::json!({ "type": kind, "value": n })
            })
            .collect();
        let url = self.dir.new_order.clone();
        let mut req = serde_json::json!({ "identifiers": ids });
        // A profile the server does not offer is left out (the CA's
        // default), unless `require` makes it an error.
        if let Some((name, require)) = how.profile {
            if self.dir.profiles.iter().any(|p| p == name) {
                req["profile"] = name.as_str().into();
            } else if *require {
                return Err(format!("the ACME server does not offer profile \"{name}\""));
            }
        }
        if let Some(id) = how.replaces {
            req["replaces"] = id.into();
        }
        let a = match self.post(acct, &url, Some(&req.to_string()), false).await {
            // A certificate already replaced (an order of an earlier
            // attempt was finalized) is ordered without naming it.
            Err(e) if how.replaces.is_some() && e.contains("alreadyReplaced") => {
                if let Some(o) = req.as_object_mut() {
                    o.remove("replaces");
                }
                self.post(acct, &url, Some(&req.to_string()), false).await?
            }
            r => r?,
        };
        let order_url = a.location.clone().ok_or("ACME server sent no order URL")?;
        let mut order = wire::order(&a.body)?;
        let thumb = acct.key.thumbprint();
        // Withdrawn however this ends, also when the thread stops mid-order
        // (the future is dropped).
        let mut published = Published(Vec::new(), withdraw);
        let result = async {
            for authz_url in &order.authorizations {
                self.authorize(acct, authz_url, &thumb, how.challenge, publish, &mut published.0).await?;
            }
            let deadline = tokio::time::Instant::now() + POLL_LIMIT;
            order = self.poll_order(acct, &order_url, &["ready", "valid"], deadline).await?;
            if order.status == "ready" {
                let csr = cert_key.csr(names)?;
                let body = serde_json::json!({ "csr": super::jws::b64u(&csr) }).to_string();
                let finalize = order.finalize.clone();
                self.post(acct, &finalize, Some(&body), false).await?;
                order = self.poll_order(acct, &order_url, &["valid"], deadline).await?;
            }
            let cert_url = order.certificate.clone().ok_or("no certificate URL in a valid ACME order")?;
            let a = self.post(acct, &cert_url, None, false).await?;
            if !a.body.starts_with(b"-----BEGIN CERTIFICATE-----") {
                return Err("ACME server sent a certificate that is not PEM".into());
            }
            match how.preferred_chain {
                Some(want) if !top_issued_by(&a.body, want) => self.preferred(acct, &a.alternates, want, a.body).await,
                _ => Ok(a.body),
            }
        }
        .await;
        drop(published);
        result
    }

    /// The first alternate chain whose topmost certificate `want` issued,
    /// else `default` (nginx-acme: "if there are no matches, the default
    /// chain will be used").
    async fn preferred(
        &mut self,
        acct: &Account,
        alternates: &[String],
        want: &str,
        default: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        for url in alternates.iter().take(8) {
            let a = self.post(acct, url, None, false).await?;
            if a.body.starts_with(b"-----BEGIN CERTIFICATE-----") && top_issued_by(&a.body, want) {
                return Ok(a.body);
            }
        }
        Ok(default)
    }

    async fn authorize(
        &mut self,
        acct: &Account,
        url: &str,
        thumb: &str,
        kind: &str,
        publish: &Publish,
        published: &mut Vec<String>,
    ) -> Result<(), String> {
        let a = self.post(acct, url, None, false).await?;
        let authz = wire::authorization(&a.body)?;
        if authz.status == "valid" {
            return Ok(());
        }
        let ch = authz
            .challenges
            .iter()
            .find(|c| c.kind == kind)
            .ok_or_else(|| format!("no {kind} challenge offered for \"{}\"", authz.identifier))?;
        if !wire::valid_token(&ch.token) {
            return Err(format!("invalid {kind} token for \"{}\"", authz.identifier));
        }
        let handle = publish(kind, &authz.identifier, &ch.token, &format!("{}.{}", ch.token, thumb))?;
        published.push(handle);
        let ch_url = ch.url.clone();
        self.post(acct, &ch_url, Some("{}"), false).await?;
        let deadline = tokio::time::Instant::now() + POLL_LIMIT;
        for n in 0.. {
            let a = self.post(acct, url, None, false).await?;
            let authz = wire::authorization(&a.body)?;
            match authz.status.as_str() {
                "valid" => return Ok(()),
                "pending" | "processing" => {}
                other => {
                    let why = authz.challenges.iter().find_map(|c| c.error.as_ref()).map(|p| p.to_string());
                    return Err(format!(
                        "authorization for \"{}\" is {other}: {}",
                        authz.identifier,
                        why.unwrap_or_else(|| "no reason given".into())
                    ));
                }
            }
            wait(&a, n, deadline, &authz.identifier).await?;
        }
        Err("ACME authorization polled too often".into())
    }

    async fn poll_order(
        &mut self,
        acct: &Account,
        url: &str,
        want: &[&str],
        deadline: tokio::time::Instant,
    ) -> Result<wire::Order, String> {
        for n in 0.. {
            let a = self.post(acct, url, None, false).await?;
            let o = wire::order(&a.body)?;
            if want.contains(&o.status.as_str()) {
                return Ok(o);
            }
            if o.status == "invalid" {
                let why = o.error.map(|p| p.to_string()).unwrap_or_else(|| "no reason given".into());
                return Err(format!("order is invalid: {why}"));
            }
            wait(&a, n, deadline, "order").await?;
        }
        Err("ACME order polled too often".into())
    }
}

/// Whether the last certificate of a PEM chain was issued by a CA whose
/// commonName is `want`.
fn top_issued_by(chain_pem: &[u8], want: &str) -> bool {
    use rustls_pki_types::pem::PemObject;
    let top = rustls_pki_types::CertificateDer::pem_slice_iter(chain_pem).filter_map(Result::ok).last();
    top.is_some_and(|c| crate::tls::client_cert::issuer_common_names(&c).iter().any(|cn| cn == want))
}

/// A `Location` against the URL it came from: absolute, or a path on the
/// same origin.
fn join(base: &str, location: &str) -> Result<String, String> {
    if super::http::Url::parse(location).is_ok() {
        return Ok(location.to_string());
    }
    let b = super::http::Url::parse(base)?;
    if !location.starts_with('/') {
        return Err(format!("invalid redirect \"{location}\" from \"{base}\""));
    }
    let host = if b.host.contains(':') { format!("[{}]", b.host) } else { b.host };
    Ok(format!("{}://{host}:{}{location}", if b.tls { "https" } else { "http" }, b.port))
}

/// The tokens published for an order, withdrawn when it ends.
/// Puts a challenge's answer where the CA looks: (challenge type,
/// identifier, token, key authorization) to the handle `withdraw` takes.
pub type Publish = dyn Fn(&str, &str, &str, &str) -> Result<String, String>;

struct Published<'a>(Vec<String>, &'a dyn Fn(&str));

impl Drop for Published<'_> {
    fn drop(&mut self) {
        for t in &self.0 {
            (self.1)(t);
        }
    }
}

/// The pause before poll `n` (0, 1, ...): the server's Retry-After (1 to
/// 10 s), else 250 ms doubling to a second (a validation or an issuance
/// often completes within the first); an error past the deadline.
async fn wait(a: &Answer, n: u32, deadline: tokio::time::Instant, what: &str) -> Result<(), String> {
    let pause = match a.retry_after {
        Some(s) => Duration::from_secs(s.clamp(1, 10)),
        None => Duration::from_millis(250 << n.min(2)),
    };
    if tokio::time::Instant::now() + pause > deadline {
        return Err(format!("ACME server did not complete \"{what}\" in time"));
    }
    tokio::time::sleep(pause).await;
    Ok(())
}
