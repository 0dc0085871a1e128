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
//! renewed when the CA's renewal information (RFC 9773, `ari`) suggests,
//! else at two thirds of its lifetime; a failure is retried after 1, 10,
//! 100 minutes, then daily, as nginx-acme does.

pub mod alpn;
pub mod ari;
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
    /// `account_key FILE` (its PEM, read at load), else the type of a
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
    /// `preferred_chain NAME`: the chain whose topmost certificate was
    /// issued by the CN NAME, among those the CA offers.
    pub preferred_chain: Option<String>,
    pub state: StateDir,
    pub http: http::Client,
}

pub enum AccountKey {
    Generate(jws::KeyType),
    File(Vec<u8>),
}

/// One certificate: an issuer, its identifiers and key type, and what
/// handshakes serve (empty until issued or loaded from the state).
pub struct Order {
    pub issuer: Arc<Issuer>,
    pub names: Vec<String>,
    pub key_type: jws::KeyType,
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

/// When an order is next due by its certificate's lifetime (now without
/// one).
fn due_of(o: &Order) -> tokio::time::Instant {
    match o.slot.current() {
        Some(i) => at_unix(i.renew_at()),
        None => tokio::time::Instant::now(),
    }
}

/// The monotonic instant of a Unix time (now if it has passed).
fn at_unix(t: i64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs((t - unix_now()).max(0) as u64)
}

/// Where an order stands in the thread's schedule.
struct Plan {
    /// When to order next: the renewal time, or the retry after a failure.
    due: tokio::time::Instant,
    fails: u32,
    /// When to ask the CA's renewal information next (None: no
    /// certificate yet, or a CA that offers none).
    ari: Option<tokio::time::Instant>,
    /// When this thread last stored a certificate for the order: a
    /// window that starts at issuance (a short-lived certificate's) does
    /// not renew it again within `MIN_LIFE`.
    issued: Option<tokio::time::Instant>,
}

/// The least time a certificate this thread obtained is served before it
/// is renewed again, unless a third of its remaining life is less.
const MIN_LIFE: Duration = Duration::from_secs(30);

/// `MIN_LIFE`, or a third of what is left of the order's certificate if
/// that is less (a certificate of under 45 s is still renewed before it
/// expires).
fn min_life(o: &Order) -> Duration {
    let left = o.slot.current().map_or(0, |c| (c.not_after - unix_now()).max(0) as u64);
    MIN_LIFE.min(Duration::from_secs(left / 3))
}

fn run(orders: Vec<Weak<Order>>, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        log_error!(Level::Alert, "could not start the ACME runtime");
        return;
    };
    rt.block_on(async move {
        let now = tokio::time::Instant::now();
        // A stored certificate's renewal information is asked for at once:
        // a CA that revoked it, or moved its window, is heard at start.
        let mut plans: Vec<Plan> = orders
            .iter()
            .map(|w| {
                let o = w.upgrade();
                let has = o.as_ref().is_some_and(|o| o.slot.current().is_some());
                Plan { due: o.map_or(now, |o| due_of(&o)), fails: 0, ari: has.then_some(now), issued: None }
            })
            .collect();
        let mut accounts: HashMap<String, client::Account> = HashMap::new();
        loop {
            let mut alive = false;
            for (i, plan) in plans.iter_mut().enumerate() {
                let Some(o) = orders[i].upgrade() else { continue };
                alive = true;
                if plan.ari.is_some_and(|t| t <= tokio::time::Instant::now()) {
                    let checked = tokio::select! {
                        r = check_renewal_info(&o) => r,
                        _ = &mut stop => return,
                    };
                    follow_renewal_info(&o, plan, checked);
                }
                if plan.due > tokio::time::Instant::now() {
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
                        let now = tokio::time::Instant::now();
                        plan.fails = 0;
                        plan.due = due_of(&o).max(now + min_life(&o));
                        plan.ari = Some(now);
                        plan.issued = Some(now);
                    }
                    Err(why) => {
                        let wait = backoff(plan.fails);
                        plan.fails += 1;
                        log_error!(Level::Warn, "{}, next attempt in {}s", why, wait.as_secs());
                        plan.due = tokio::time::Instant::now() + wait;
                    }
                }
            }
            if !alive {
                return;
            }
            let wake = plans
                .iter()
                .flat_map(|p| [Some(p.due), p.ari])
                .flatten()
                .min()
                .unwrap_or_else(|| tokio::time::Instant::now() + backoff(0));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = &mut stop => return,
            }
        }
    });
}

/// The renewal window the CA gives for the order's current certificate,
/// with its Retry-After; None without a certificate, an identifier or
/// renewal information at the CA.
async fn check_renewal_info(o: &Order) -> Result<Option<(wire::RenewalWindow, Option<u64>)>, String> {
    let Some(id) = o.slot.current().and_then(|c| c.ck.cert.first().and_then(|l| ari::cert_id(l))) else {
        return Ok(None);
    };
    let session = client::Session::open(&o.issuer.http, &o.issuer.uri).await?;
    session.renewal_info(&id).await
}

/// Moves the order's renewal to a random moment of the CA's window (not
/// while a failure's backoff runs) and plans the next check.
fn follow_renewal_info(
    o: &Order,
    plan: &mut Plan,
    checked: Result<Option<(wire::RenewalWindow, Option<u64>)>, String>,
) {
    match checked {
        Ok(Some((window, retry_after))) => {
            let at = ari::pick(window, unix_now(), ari::random());
            if plan.fails == 0 {
                let floor = plan.issued.map_or_else(tokio::time::Instant::now, |t| t + min_life(o));
                plan.due = at_unix(at).max(floor);
            }
            plan.ari = Some(tokio::time::Instant::now() + ari::recheck(retry_after));
            log_error!(
                Level::Info,
                "acme certificate \"{}\": renewal information suggests renewal in {}s",
                o.slot.name,
                (at - unix_now()).max(0)
            );
        }
        Ok(None) => plan.ari = None,
        Err(why) => {
            log_error!(Level::Warn, "{} while checking renewal information of certificate \"{}\"", why, o.slot.name);
            plan.ari = Some(tokio::time::Instant::now() + backoff(1));
        }
    }
}

/// The issuer's account: from `account_key`, else `account.key` in the
/// state directory (made and stored on first use); its URL from
/// `account.url` when the key is the stored one.
fn account_for(issuer: &Issuer) -> Result<client::Account, String> {
    let (key, stored) = match &issuer.account_key {
        AccountKey::File(pem) => (jws::Key::from_pem(pem)?, false),
        AccountKey::Generate(kind) => match issuer.state.read("account.key").map(|pem| jws::Key::from_pem(&pem)) {
            Some(Ok(k)) if k.kind == *kind => (k, true),
            found => {
                if let Some(Err(why)) = found {
                    log_error!(
                        Level::Error,
                        "acme state \"account.key\" of issuer \"{}\" ignored: {}",
                        issuer.name,
                        why
                    );
                }
                let k = jws::Key::generate(*kind)?;
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
    let key = jws::Key::generate(o.key_type).map_err(for_cert)?;
    // A renewal names the certificate it replaces, if the CA keeps
    // renewal information (RFC 9773 section 5).
    let replaces = o
        .slot
        .current()
        .and_then(|c| c.ck.cert.first().and_then(|l| ari::cert_id(l)))
        .filter(|_| session.has_renewal_info());
    let how = client::OrderConf {
        challenge: issuer.challenge,
        profile: issuer.profile.as_ref(),
        preferred_chain: issuer.preferred_chain.as_deref(),
        replaces: replaces.as_deref(),
    };
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
