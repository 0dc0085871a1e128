//! Certificates obtained from an ACME server (RFC 8555) with nginx-acme's
//! configuration: `acme_issuer` blocks, `acme_certificate` in a server,
//! and `$acme_certificate` / `$acme_certificate_key` in its
//! `ssl_certificate` / `ssl_certificate_key`.
//!
//! One thread per configuration (workers are threads, so every worker
//! serves what it stores) talks to the CA for every certificate, never
//! inside a handshake or a request: a handshake reads the certificate's
//! `CertSlot` as it is at that moment (`tls::dynamic`), the HTTP-01
//! responder (`http::acme_challenge`) reads `challenge`, and the
//! handshake asks `alpn::config_for` about TLS-ALPN-01 validations. A certificate is
//! renewed at two thirds of its lifetime; a failure is retried after 1,
//! 10, 100 minutes, then daily, as nginx-acme does. ACME Renewal
//! Information (RFC 9773) is not asked for yet.

pub mod alpn;
pub mod client;
pub mod conf;
pub mod http;
pub mod jws;
pub mod state;
pub mod verify;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::log::error::Level;
use crate::log_error;
use state::{Issued, StateDir};

/// An `acme_issuer` block, ready to run.
pub struct Issuer {
    pub name: String,
    pub uri: String,
    /// `account_key FILE` (its PEM, read at load), else the curve of a
    /// key kept in the state directory.
    pub account_key: AccountKey,
    pub contact: Vec<String>,
    pub accept_terms: bool,
    /// `challenge`: "http-01" (the default) or "tls-alpn-01".
    pub challenge: &'static str,
    /// `external_account_key KID FILE`: the key id and the MAC key.
    pub eab: Option<(String, Vec<u8>)>,
    /// `profile NAME [require]`.
    pub profile: Option<(String, bool)>,
    pub state: StateDir,
    pub http: http::Client,
}

pub enum AccountKey {
    Generate(jws::Curve),
    File(Vec<u8>),
}

/// One certificate: an issuer, its identifiers and key type, and what
/// handshakes serve (empty until issued or loaded from the state).
pub struct Order {
    pub issuer: Arc<Issuer>,
    pub names: Vec<String>,
    pub curve: jws::Curve,
    /// The state files' stem: the first name and a hash of the order.
    pub id: String,
    pub slot: Arc<CertSlot>,
}

/// What `$acme_certificate` reads at a handshake.
#[derive(Debug, Default)]
pub struct CertSlot {
    /// "ISSUER/ID", for log lines.
    pub name: String,
    current: RwLock<Option<Arc<Issued>>>,
}

impl CertSlot {
    pub fn new(name: String) -> CertSlot {
        CertSlot { name, current: RwLock::new(None) }
    }

    pub fn current(&self) -> Option<Arc<Issued>> {
        self.current.read().ok().and_then(|c| c.clone())
    }

    fn set(&self, i: Arc<Issued>) {
        if let Ok(mut c) = self.current.write() {
            *c = Some(i);
        }
    }
}

/// HTTP-01 key authorizations by token, for every generation's thread.
static CHALLENGES: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// The key authorization for a token of a challenge in progress.
pub fn challenge(token: &str) -> Option<String> {
    CHALLENGES.lock().ok()?.as_ref()?.get(token).cloned()
}

/// Publishes a challenge's answer where the CA will look: the HTTP-01
/// responder's table (by token) or a TLS-ALPN-01 certificate (by SNI).
/// The handle returned is what `withdraw` takes.
fn publish(kind: &str, identifier: &str, token: &str, key_auth: &str) -> Result<String, String> {
    if kind == "tls-alpn-01" {
        return alpn::publish(identifier, key_auth).map(|sni| format!("alpn:{sni}"));
    }
    if let Ok(mut c) = CHALLENGES.lock() {
        c.get_or_insert_with(HashMap::new).insert(token.to_string(), key_auth.to_string());
    }
    Ok(format!("http:{token}"))
}

fn withdraw(handle: &str) {
    if let Some(sni) = handle.strip_prefix("alpn:") {
        alpn::withdraw(sni);
    } else if let Some(token) = handle.strip_prefix("http:")
        && let Ok(mut c) = CHALLENGES.lock()
        && let Some(m) = c.as_mut()
    {
        m.remove(token);
    }
}

/// The thread of a configuration; it ends when the configuration is gone
/// or this is dropped.
pub struct Runner {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.stop.take();
    }
}

/// Loads the stored certificates (before any worker runs, so a restart
/// serves them at once), then starts the thread for `orders` (none: no
/// thread).
pub fn start(orders: &[Arc<Order>]) -> Result<Option<Runner>, String> {
    if orders.is_empty() {
        return Ok(None);
    }
    for o in orders {
        if let Some(i) = state::load_certificate(&o.issuer.state, &o.id) {
            o.slot.set(Arc::new(i));
        }
    }
    let weak: Vec<Weak<Order>> = orders.iter().map(Arc::downgrade).collect();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("sluice-acme".into())
        .spawn(move || run(weak, rx))
        .map_err(|e| format!("could not start the ACME thread ({e})"))?;
    Ok(Some(Runner { stop: Some(tx) }))
}

/// nginx-acme's retry intervals after 0, 1, 2, more failures.
fn backoff(fails: u32) -> Duration {
    Duration::from_secs(match fails {
        0 => 60,
        1 => 600,
        2 => 6000,
        _ => 86400,
    })
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// When an order is next due, from its certificate (now without one).
fn due_of(o: &Order) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    match o.slot.current() {
        Some(i) => now + Duration::from_secs((i.renew_at() - unix_now()).max(0) as u64),
        None => now,
    }
}

fn run(orders: Vec<Weak<Order>>, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        log_error!(Level::Alert, "could not start the ACME runtime");
        return;
    };
    rt.block_on(async move {
        let mut due: Vec<tokio::time::Instant> =
            orders.iter().map(|w| w.upgrade().map_or_else(tokio::time::Instant::now, |o| due_of(&o))).collect();
        let mut fails = vec![0u32; orders.len()];
        let mut accounts: HashMap<String, client::Account> = HashMap::new();
        loop {
            let mut alive = false;
            for i in 0..orders.len() {
                let Some(o) = orders[i].upgrade() else { continue };
                alive = true;
                if due[i] > tokio::time::Instant::now() {
                    continue;
                }
                let obtained = tokio::select! {
                    r = obtain(&o, &mut accounts) => r,
                    _ = &mut stop => return,
                };
                match obtained {
                    Ok(issued) => {
                        log_error!(
                            Level::Notice,
                            "acme certificate \"{}\" issued (serial {}), renewal in {}s",
                            o.slot.name,
                            issued.serial,
                            (issued.renew_at() - unix_now()).max(0)
                        );
                        o.slot.set(Arc::new(issued));
                        fails[i] = 0;
                        due[i] = due_of(&o).max(tokio::time::Instant::now() + Duration::from_secs(30));
                    }
                    Err(why) => {
                        let wait = backoff(fails[i]);
                        fails[i] += 1;
                        log_error!(Level::Warn, "{}, next attempt in {}s", why, wait.as_secs());
                        due[i] = tokio::time::Instant::now() + wait;
                    }
                }
            }
            if !alive {
                return;
            }
            let wake = due.iter().min().copied().unwrap_or_else(|| tokio::time::Instant::now() + backoff(0));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = &mut stop => return,
            }
        }
    });
}

/// The issuer's account: from `account_key`, else `account.key` in the
/// state directory (made and stored on first use); its URL from
/// `account.url` when the key is the stored one.
fn account_for(issuer: &Issuer) -> Result<client::Account, String> {
    let (key, stored) = match &issuer.account_key {
        AccountKey::File(pem) => (jws::Key::from_pem(pem)?, false),
        AccountKey::Generate(curve) => match issuer.state.read("account.key").map(|pem| jws::Key::from_pem(&pem)) {
            Some(Ok(k)) if k.curve == *curve => (k, true),
            found => {
                if let Some(Err(why)) = found {
                    log_error!(
                        Level::Error,
                        "acme state \"account.key\" of issuer \"{}\" ignored: {}",
                        issuer.name,
                        why
                    );
                }
                let k = jws::Key::generate(*curve)?;
                issuer.state.write("account.key", &k.pem(), true)?;
                (k, false)
            }
        },
    };
    let kid = if stored {
        issuer
            .state
            .read("account.url")
            .and_then(|u| String::from_utf8(u).ok())
            .map(|u| u.trim().to_string())
            .filter(|u| http::Url::parse(u).is_ok())
    } else {
        None
    };
    Ok(client::Account { key, kid })
}

/// One attempt; an account the server does not know (a CA that lost its
/// state, or a stored `account.url` of another server) is registered
/// again with the same key and the order tried once more.
async fn obtain(o: &Order, accounts: &mut HashMap<String, client::Account>) -> Result<Issued, String> {
    match obtain_once(o, accounts).await {
        Err(e) if e.contains("accountDoesNotExist") => {
            log_error!(Level::Info, "{}, registering the account again", e);
            if let Some(a) = accounts.get_mut(&o.issuer.name) {
                a.kid = None;
            }
            obtain_once(o, accounts).await
        }
        r => r,
    }
}

async fn obtain_once(o: &Order, accounts: &mut HashMap<String, client::Account>) -> Result<Issued, String> {
    let issuer = &o.issuer;
    // nginx-acme's words: the directory and the account are the issuer's,
    // the order the certificate's.
    let for_account = |e: String| format!("{e} while creating account for acme issuer \"{}\"", issuer.name);
    let mut session = client::Session::open(&issuer.http, &issuer.uri).await.map_err(for_account)?;
    if !accounts.contains_key(&issuer.name) {
        accounts.insert(issuer.name.clone(), account_for(issuer).map_err(for_account)?);
    }
    let acct = accounts.get_mut(&issuer.name).ok_or("no account")?;
    let conf =
        client::AccountConf { contact: &issuer.contact, accept_terms: issuer.accept_terms, eab: issuer.eab.as_ref() };
    let had = acct.kid.is_some();
    session.account(acct, &conf).await.map_err(for_account)?;
    if !had && let Some(kid) = &acct.kid {
        log_error!(Level::Info, "account \"{}\" for acme issuer \"{}\"", kid, issuer.name);
        issuer.state.write("account.url", kid.as_bytes(), false)?;
    }
    let for_cert = |e: String| format!("{e} while updating certificate \"{}\"", o.slot.name);
    let key = jws::Key::generate(o.curve).map_err(for_cert)?;
    let how = client::OrderConf { challenge: issuer.challenge, profile: issuer.profile.as_ref() };
    let chain = session.order(acct, &o.names, &key, &how, &publish, &withdraw).await.map_err(for_cert)?;
    let key_pem = key.pem();
    let issued = Issued::load(&chain, &key_pem).map_err(for_cert)?;
    // Stored before it is served: a restart finds what was served.
    let stored = issuer
        .state
        .write(&format!("{}.key", o.id), &key_pem, true)
        .and_then(|()| issuer.state.write(&format!("{}.crt", o.id), &chain, false));
    if let Err(e) = stored {
        log_error!(Level::Error, "{}", e);
    }
    Ok(issued)
}
