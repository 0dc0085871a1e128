//! OCSP stapling (`ssl_stapling on`): each certificate's response is
//! fetched from its responder (the certificate's Authority Information
//! Access, or `ssl_stapling_responder`) by one thread for the whole
//! process (workers are threads, so every worker staples what it fetched),
//! refreshed before `nextUpdate`, and never fetched inside a handshake: a
//! handshake staples whatever `Staple::current` holds at that moment.
//! A response that is not successful, not for this certificate, expired,
//! for a revoked certificate, or (with `ssl_stapling_verify on`) not
//! signed by the issuer or its delegated responder, is not stapled, and
//! the reason is logged. `ssl_stapling_file` staples a file's response
//! as is, with no fetching (nginx's behaviour).

pub mod client;
pub mod der;
pub mod http;
pub mod trust;

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use rustls::sign::CertifiedKey;

use crate::log::error::Level;
use crate::log_error;

/// One certificate's stapling: the certified key as loaded, and the one
/// handshakes use (the same with the current response, once fetched).
#[derive(Debug)]
pub struct Staple {
    base: Arc<CertifiedKey>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The certificate's name for log lines (its file).
    name: String,
    id: der::CertId,
    issuer: Vec<u8>,
    responder: Option<http::Url>,
    verify: bool,
    /// `ssl_trusted_certificate` when verifying: a responder's own chain
    /// may lead to one of its roots trusted for OCSP signing.
    trusted: Vec<(Vec<u8>, bool)>,
    resolver: Option<crate::resolver::ResolverConf>,
    timeout: Duration,
}

impl Staple {
    /// What a handshake sends: the certificate with the response, if any.
    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(_) => self.base.clone(),
        }
    }

    fn set(&self, response: Option<Vec<u8>>) {
        let next = match response {
            Some(r) => Arc::new(CertifiedKey { ocsp: Some(r), ..(*self.base).clone() }),
            None => self.base.clone(),
        };
        if let Ok(mut c) = self.current.write() {
            *c = next;
        }
    }
}

/// The settings of `ssl_stapling*` for a server.
pub struct StaplingConf<'a> {
    pub responder: Option<&'a str>,
    pub verify: bool,
    /// `ssl_trusted_certificate`: issuers not in the chain, each with
    /// whether its trust settings make it a root for OCSP signing.
    pub trusted: &'a [(Vec<u8>, bool)],
    pub resolver: Option<crate::resolver::ResolverConf>,
    pub timeout: Duration,
}

/// A staple for `ck` (loaded from `name`), or None with a warning when
/// nginx would not staple it either ("no OCSP responder URL", "no issuer
/// certificate"): nginx's `[warn] "ssl_stapling" ignored, ...`.
pub fn staple_for(ck: &Arc<CertifiedKey>, name: &str, conf: &StaplingConf<'_>) -> Result<Option<Arc<Staple>>, String> {
    let Some(leaf) = ck.cert.first().and_then(|c| der::cert_fields(c)) else { return Ok(None) };
    let issuer = ck.cert[1..]
        .iter()
        .map(|c| c.as_ref())
        .chain(conf.trusted.iter().map(|(c, _)| c.as_slice()))
        .find(|c| der::cert_fields(c).is_some_and(|f| f.subject == leaf.issuer));
    let Some(issuer) = issuer else {
        return Err(format!("\"ssl_stapling\" ignored, issuer certificate not found for certificate \"{name}\""));
    };
    let responder = match conf.responder {
        Some(u) => Some(u.as_bytes()),
        None => leaf.ocsp_url,
    };
    let Some(url) = responder else {
        return Err(format!("\"ssl_stapling\" ignored, no OCSP responder URL in the certificate \"{name}\""));
    };
    let url = http::Url::parse(url).map_err(|why| format!("\"ssl_stapling\" ignored, {why} in \"{name}\""))?;
    let Some(issuer_fields) = der::cert_fields(issuer) else { return Ok(None) };
    Ok(Some(Arc::new(Staple {
        base: ck.clone(),
        current: RwLock::new(ck.clone()),
        name: name.to_string(),
        id: der::CertId::new(&leaf, &issuer_fields),
        issuer: issuer.to_vec(),
        responder: Some(url),
        verify: conf.verify,
        trusted: if conf.verify { conf.trusted.to_vec() } else { Vec::new() },
        resolver: conf.resolver.clone(),
        timeout: conf.timeout,
    })))
}

/// The fetching thread of a configuration; it ends when the configuration
/// (every `Staple`) is gone or `Fetcher` is dropped.
pub struct Fetcher {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.stop.take();
    }
}

/// Starts fetching for `staples` (none: no thread).
pub fn start(staples: &[Arc<Staple>]) -> Result<Option<Fetcher>, String> {
    if staples.is_empty() {
        return Ok(None);
    }
    let weak: Vec<Weak<Staple>> = staples.iter().map(Arc::downgrade).collect();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("sluice-ocsp".into())
        .spawn(move || run(weak, rx))
        .map_err(|e| format!("could not start the OCSP thread ({e})"))?;
    Ok(Some(Fetcher { stop: Some(tx) }))
}

/// nginx's schedule: after a good response, again 5 minutes before its
/// `nextUpdate` but within the hour; after a failure, in 5 minutes.
fn next_refresh(next_update: Option<i64>, now: i64) -> Duration {
    let secs = match next_update {
        Some(n) => (n - 300).min(now + 3600).max(now + 300) - now,
        None => 3600,
    };
    Duration::from_secs(secs.max(1) as u64)
}

/// How soon a failed fetch is tried again (nginx: 5 minutes).
const RETRY: Duration = Duration::from_secs(300);

fn run(staples: Vec<Weak<Staple>>, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        log_error!(Level::Alert, "could not start the OCSP runtime");
        return;
    };
    rt.block_on(async move {
        let mut due: Vec<Instant> = vec![Instant::now(); staples.len()];
        loop {
            let now = Instant::now();
            let mut alive = false;
            for (i, w) in staples.iter().enumerate() {
                let Some(s) = w.upgrade() else { continue };
                alive = true;
                if due[i] > now {
                    continue;
                }
                due[i] = now + refresh(&s).await;
            }
            if !alive {
                return;
            }
            let wake = due.iter().min().copied().unwrap_or(now + RETRY);
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = &mut stop => return,
            }
        }
    });
}

/// One fetch for `s`; the time until the next.
async fn refresh(s: &Staple) -> Duration {
    let Some(url) = &s.responder else { return Duration::from_secs(86400) };
    let body = der::request(&s.id);
    let fetched = tokio::time::timeout(s.timeout, http::post(url, &body, s.resolver.as_ref())).await;
    let (peer, resp) = match fetched {
        Ok(Ok(r)) => r,
        Ok(Err((peer, why))) => {
            log_failure(s, url, peer.as_deref(), &why);
            return RETRY;
        }
        Err(_) => {
            log_failure(s, url, None, "OCSP responder timed out");
            return RETRY;
        }
    };
    let now = unix_now();
    match check(s, &resp, now) {
        Ok(next_update) => {
            s.set(Some(resp));
            next_refresh(next_update, now)
        }
        Err(why) => {
            // A bad or late response is not stapled; a previous good one is
            // kept only while it is still current.
            s.set(None);
            log_failure(s, url, Some(&peer), why);
            RETRY
        }
    }
}

fn check(s: &Staple, resp: &[u8], now: i64) -> Result<Option<i64>, &'static str> {
    let parsed = der::parse_response(resp)?;
    let (status, next_update) = der::status_of(&parsed, &s.id, now)?;
    if s.verify {
        let issuer = der::cert_fields(&s.issuer).ok_or("issuer certificate unreadable")?;
        let trusted: Vec<(&[u8], bool)> = s.trusted.iter().map(|(c, o)| (c.as_slice(), *o)).collect();
        if !der::verify_response(&parsed, &issuer, &trusted) {
            return Err("OCSP_basic_verify() failed");
        }
    }
    match status {
        der::Status::Good => Ok(next_update),
        der::Status::Revoked => Err("certificate status \"revoked\" in the OCSP response"),
        der::Status::Unknown => Err("certificate status \"unknown\" in the OCSP response"),
    }
}

fn log_failure(s: &Staple, url: &http::Url, peer: Option<&str>, why: &str) {
    log_error!(
        Level::Error,
        "{} while requesting certificate status, responder: {}, peer: {}, certificate: \"{}\"",
        why,
        url.host,
        peer.unwrap_or("-"),
        s.name
    );
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_schedule_as_nginx() {
        assert_eq!(next_refresh(Some(1000 + 86400), 1000), Duration::from_secs(3600));
        assert_eq!(next_refresh(Some(1000 + 400), 1000), Duration::from_secs(300));
        assert_eq!(next_refresh(Some(1000 + 1000), 1000), Duration::from_secs(700));
    }
}
