//! Session resumption: the session cache (`ssl_session_cache`) and session
//! tickets (`ssl_session_tickets`, `ssl_session_ticket_key`).
//!
//! Workers are threads of one process, so "shared" needs no shared memory:
//! a named cache and the ticket keys live in process-wide registries that
//! every worker's configuration points at. They also outlive a reload, so a
//! client keeps resuming across `-s reload` (nginx keeps shared caches over
//! reloads too; its generated ticket keys it does not).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::{ProducesTickets, StoresServerSessions};

/// A bounded session store: oldest entries go first when full, and entries
/// expire after the `ssl_session_timeout` they were stored with.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<StoreInner>,
    max: usize,
}

#[derive(Debug, Default)]
struct StoreInner {
    map: HashMap<Vec<u8>, (Instant, Vec<u8>)>,
    order: VecDeque<Vec<u8>>,
}

impl Store {
    pub fn new(max: usize) -> Arc<Store> {
        Arc::new(Store { inner: Mutex::new(StoreInner::default()), max: max.max(1) })
    }

    /// The process-wide cache called `name` (`shared:NAME:SIZE`).
    pub fn shared(name: &str, max: usize) -> Arc<Store> {
        static SHARED: OnceLock<Mutex<HashMap<String, Arc<Store>>>> = OnceLock::new();
        let reg = SHARED.get_or_init(Default::default);
        let mut reg = reg.lock().unwrap_or_else(|p| p.into_inner());
        reg.entry(name.to_string()).or_insert_with(|| Store::new(max)).clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreInner> {
        // A panic while holding this lock cannot leave the map inconsistent
        // in a way that matters: keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A server's session id context (`tls::session_context`).
pub const CONTEXT_LEN: usize = 20;
pub type Context = [u8; CONTEXT_LEN];

/// One server's view of a store, with its own timeout; its sessions are
/// kept under its session id context, so a server with another context
/// sharing the store finds none of them (OpenSSL's sid_ctx check).
#[derive(Debug)]
pub struct TimedStore {
    pub store: Arc<Store>,
    pub timeout: Duration,
    pub context: Context,
}

impl TimedStore {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        [&self.context[..], key].concat()
    }
}

impl StoresServerSessions for TimedStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let key = self.key(&key);
        let mut s = self.store.lock();
        let expires = Instant::now() + self.timeout;
        if s.map.insert(key.clone(), (expires, value)).is_none() {
            s.order.push_back(key);
        }
        while s.map.len() > self.store.max {
            let Some(old) = s.order.pop_front() else { break };
            s.map.remove(&old);
        }
        // Keys `take` removed stay in `order` (finding them there would
        // cost a scan of the whole store per resumption, under the lock
        // every worker shares); they are dropped once they are as many as
        // the live ones, which keeps a put O(1) on average. (A key taken
        // and put again is in `order` twice and may go a little early.)
        if s.order.len() > 2 * self.store.max {
            let StoreInner { map, order } = &mut *s;
            order.retain(|k| map.contains_key(k));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let key = self.key(key);
        let s = self.store.lock();
        s.map.get(&key).filter(|(exp, _)| *exp > Instant::now()).map(|(_, v)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let key = self.key(key);
        let mut s = self.store.lock();
        let (exp, v) = s.map.remove(&key)?;
        (exp > Instant::now()).then_some(v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// The process-wide store of QUIC sessions resumed with 0-RTT
/// (`tls::zero_rtt`) for servers without `ssl_session_cache`: a name no
/// `shared:NAME` has (a NUL byte).
pub const ZERO_RTT_STORE: &str = "\0quic 0-rtt";
/// Its size: about what nginx's 4 MB of shared cache holds.
pub const ZERO_RTT_SESSIONS: usize = 16 * 1024;

/// No stateless tickets: rustls then issues stateful ones (an id into
/// the session store), the only ones it accepts early data with.
#[derive(Debug)]
pub struct Stateful;

impl ProducesTickets for Stateful {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

const NAME_LEN: usize = 16;

struct TicketKey {
    name: [u8; NAME_LEN],
    key: LessSafeKey,
}

/// Session tickets sealed with AES-256-GCM. The first key seals, every key
/// opens (nginx's rotation scheme with several `ssl_session_ticket_key`).
/// A ticket is `name | nonce | seal(issued_at | context | session)`; one
/// older than `ssl_session_timeout`, or from a server with another
/// session id context, is refused.
pub struct Tickets {
    /// From `ssl_session_ticket_key` files; empty when keys are generated.
    keys: Vec<Arc<TicketKey>>,
    /// Generated keys, rotated as nginx rotates them (see [`Ring`]).
    ring: Option<Arc<Mutex<Ring>>>,
    lifetime: Duration,
    rng: SystemRandom,
    context: Context,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets").field("keys", &self.keys.len()).field("lifetime", &self.lifetime).finish()
    }
}

/// Generated ticket keys, as nginx's `ngx_ssl_rotate_ticket_keys`: the
/// current key seals for one `ssl_session_timeout` from its first use,
/// then a fresh key takes over while the previous ones still open the
/// tickets they sealed (which expire within a timeout anyway). A client
/// thus cannot keep one key's tickets alive forever, and a key that leaks
/// exposes one period's sessions. One ring per timeout, process-wide, so
/// every worker (and a reloaded configuration) seals with the same key.
struct Ring {
    /// Newest first: the sealing key and when it stops sealing.
    keys: VecDeque<(Arc<TicketKey>, Instant)>,
}

/// Keys kept to open tickets: the sealing one and two before it.
const RING_KEEP: usize = 3;

impl Ring {
    fn shared(lifetime: Duration) -> Arc<Mutex<Ring>> {
        static RINGS: OnceLock<Mutex<HashMap<Duration, Arc<Mutex<Ring>>>>> = OnceLock::new();
        let reg = RINGS.get_or_init(Default::default);
        let mut reg = reg.lock().unwrap_or_else(|p| p.into_inner());
        reg.entry(lifetime).or_insert_with(|| Arc::new(Mutex::new(Ring { keys: VecDeque::new() }))).clone()
    }

    /// The sealing key, rotated once its period is over.
    fn current(&mut self, lifetime: Duration) -> Option<Arc<TicketKey>> {
        let now = Instant::now();
        let fresh = match self.keys.front() {
            Some((_, until)) => now >= *until,
            None => true,
        };
        if fresh {
            // The first key is the process key (tickets open across
            // workers from the start); later ones are random.
            let key = if self.keys.is_empty() {
                key_from(process_key()).ok()?
            } else {
                let mut material = [0u8; 80];
                SystemRandom::new().fill(&mut material).ok()?;
                key_from(&material).ok()?
            };
            self.keys.push_front((Arc::new(key), now + lifetime));
            self.keys.truncate(RING_KEEP);
        }
        self.keys.front().map(|(k, _)| k.clone())
    }

    fn find(&self, name: &[u8]) -> Option<Arc<TicketKey>> {
        self.keys.iter().find(|(k, _)| k.name == name).map(|(k, _)| k.clone())
    }
}

fn key_from(material: &[u8]) -> Result<TicketKey, String> {
    let mut name = [0u8; NAME_LEN];
    name.copy_from_slice(&material[..NAME_LEN]);
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &material[NAME_LEN..]);
    let unbound = UnboundKey::new(&AES_256_GCM, digest.as_ref()).map_err(|_| "cannot create ticket key".to_string())?;
    Ok(TicketKey { name, key: LessSafeKey::new(unbound) })
}

/// Random key material made once per process, so tickets issued by one
/// worker (or before a reload) open on any other.
fn process_key() -> &'static [u8; 80] {
    static KEY: OnceLock<[u8; 80]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut k = [0u8; 80];
        // Without randomness no ticket can be safe; an all-zero key would be
        // worse than none, so fall back to time-seeded bytes only for the
        // name and leave tickets failing to decrypt across restarts.
        if SystemRandom::new().fill(&mut k).is_err() {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            k[..16].copy_from_slice(&t.as_nanos().to_le_bytes());
        }
        k
    })
}

impl Tickets {
    /// From `ssl_session_ticket_key` files (48 or 80 bytes each, as nginx
    /// requires), or the process key when there are none.
    pub fn new(files: &[std::path::PathBuf], lifetime: Duration, context: Context) -> Result<Arc<Tickets>, String> {
        let mut keys = Vec::new();
        for f in files {
            let data = std::fs::read(f).map_err(|e| format!("open() \"{}\" failed ({})", f.display(), e))?;
            if data.len() != 48 && data.len() != 80 {
                return Err(format!("\"{}\" must be 48 or 80 bytes", f.display()));
            }
            keys.push(Arc::new(key_from(&data)?));
        }
        let ring = keys.is_empty().then(|| Ring::shared(lifetime));
        Ok(Arc::new(Tickets { keys, ring, lifetime, rng: SystemRandom::new(), context }))
    }

    fn sealing_key(&self) -> Option<Arc<TicketKey>> {
        match &self.ring {
            Some(r) => r.lock().unwrap_or_else(|p| p.into_inner()).current(self.lifetime),
            None => self.keys.first().cloned(),
        }
    }

    fn opening_key(&self, name: &[u8]) -> Option<Arc<TicketKey>> {
        match &self.ring {
            Some(r) => r.lock().unwrap_or_else(|p| p.into_inner()).find(name),
            None => self.keys.iter().find(|k| k.name == name).cloned(),
        }
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime.as_secs().min(u32::MAX as u64) as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let k = self.sealing_key()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut sealed = Vec::with_capacity(8 + CONTEXT_LEN + plain.len() + 16);
        sealed.extend_from_slice(&now_secs().to_be_bytes());
        sealed.extend_from_slice(&self.context);
        sealed.extend_from_slice(plain);
        k.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&k.name), &mut sealed).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + sealed.len());
        out.extend_from_slice(&k.name);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < NAME_LEN + NONCE_LEN + 8 + CONTEXT_LEN + 16 {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let k = self.opening_key(name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = k.key.open_in_place(nonce, Aad::from(&k.name), &mut buf).ok()?;
        let issued = u64::from_be_bytes(plain.get(..8)?.try_into().ok()?);
        if now_secs() > issued.saturating_add(self.lifetime.as_secs()) {
            return None;
        }
        if plain.get(8..8 + CONTEXT_LEN)? != self.context {
            return None;
        }
        Some(plain[8 + CONTEXT_LEN..].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_round_trip_and_expire_and_rotate() {
        let t = Tickets::new(&[], Duration::from_secs(60), [0; CONTEXT_LEN]).unwrap();
        let sealed = t.encrypt(b"session state").unwrap();
        assert_eq!(t.decrypt(&sealed).unwrap(), b"session state");
        let mut bad = sealed.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(t.decrypt(&bad).is_none(), "a tampered ticket must not open");
        let expired = Tickets::new(&[], Duration::ZERO, [0; CONTEXT_LEN]).unwrap();
        let old = expired.encrypt(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        assert!(expired.decrypt(&old).is_none(), "a ticket older than the timeout must not open");
        // Another Tickets from the process key opens it (another worker).
        let other = Tickets::new(&[], Duration::from_secs(60), [0; CONTEXT_LEN]).unwrap();
        assert_eq!(other.decrypt(&sealed).unwrap(), b"session state");
        // A server with another session id context does not.
        let elsewhere = Tickets::new(&[], Duration::from_secs(60), [1; CONTEXT_LEN]).unwrap();
        assert!(elsewhere.decrypt(&sealed).is_none());
    }

    #[test]
    fn generated_keys_rotate_each_timeout() {
        let lifetime = Duration::from_millis(1500);
        let t = Tickets::new(&[], lifetime, [0; CONTEXT_LEN]).unwrap();
        let first = t.encrypt(b"a").unwrap();
        assert_eq!(first[..NAME_LEN], t.encrypt(b"b").unwrap()[..NAME_LEN], "one key within a period");
        std::thread::sleep(Duration::from_millis(1600));
        let next = t.encrypt(b"c").unwrap();
        assert_ne!(first[..NAME_LEN], next[..NAME_LEN], "a new key after the timeout");
        assert_eq!(t.decrypt(&next).unwrap(), b"c");
    }

    #[test]
    fn store_bounds_and_expiry() {
        let s = TimedStore { store: Store::new(2), timeout: Duration::from_secs(60), context: [0; CONTEXT_LEN] };
        s.put(b"a".to_vec(), b"1".to_vec());
        s.put(b"b".to_vec(), b"2".to_vec());
        s.put(b"c".to_vec(), b"3".to_vec());
        assert!(s.get(b"a").is_none(), "oldest evicted");
        assert_eq!(s.get(b"c").unwrap(), b"3");
        assert_eq!(s.take(b"b").unwrap(), b"2");
        assert!(s.get(b"b").is_none());
        // Taken keys (single-use tickets) neither count against the size
        // nor pile up.
        s.put(b"d".to_vec(), b"4".to_vec());
        assert_eq!(s.get(b"c").unwrap(), b"3", "b was taken: c and d fit");
        for i in 0..100u32 {
            let k = i.to_be_bytes().to_vec();
            s.put(k.clone(), b"x".to_vec());
            assert_eq!(s.take(&k).unwrap(), b"x");
        }
        assert_eq!(s.get(b"d").unwrap(), b"4");
        assert!(s.store.lock().order.len() <= 5);
        let z = TimedStore { store: Store::new(2), timeout: Duration::ZERO, context: [0; CONTEXT_LEN] };
        z.put(b"k".to_vec(), b"v".to_vec());
        assert!(z.get(b"k").is_none(), "expired at once");
    }
}
