//! The cache on a request's path, before and after the origin: the lookup
//! that answers a hit (memory tier, else the entry file, sent with
//! sendfile), and the fill that decides from the origin's head whether the
//! response is stored. `proxy_cache_lock` makes concurrent misses for a key
//! wait for one fill and wakes them the moment it lands (no polling).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use super::conf::Resolved;
use super::entry::Meta;
use super::memory::MemEntry;
use super::store::{self, Found};
use super::zone::{self, Flight, Hash, Zone};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::handler::open_cache::OpenFile;
use crate::http::request::Method;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_to;
use crate::variables::Template;

/// `$upstream_cache_status` values.
pub const MISS: &str = "MISS";
pub const BYPASS: &str = "BYPASS";
pub const EXPIRED: &str = "EXPIRED";
pub const STALE: &str = "STALE";
pub const HIT: &str = "HIT";
pub const UPDATING: &str = "UPDATING";
pub const REVALIDATED: &str = "REVALIDATED";

/// What the cache keeps on a request past the lookup.
#[derive(Default)]
pub struct ReqCache {
    /// `proxy_cache_revalidate`: the stored entry's ETag and Last-Modified,
    /// sent to the origin as If-None-Match / If-Modified-Since.
    pub etag: Vec<u8>,
    pub last_modified: Vec<u8>,
    /// `proxy_cache_background_update`: the refresh to run once the stale
    /// answer has gone out (then the lookup takes it back as its fill).
    pub refresh: Option<Fill>,
    /// The refresh is running: the lookup hands this fill over at once.
    pub refilling: bool,
    /// The request goes to the origin as the client sent it (ranges and
    /// conditions included): it will not be stored.
    pub as_is: bool,
}

/// Request headers not passed to the origin when the response may be
/// cached (nginx's cache headers): the origin is asked for the whole,
/// unconditional representation, and ranges and conditions are then
/// answered from the stored entry.
const NOT_PASSED: [&str; 6] =
    ["if-modified-since", "if-unmodified-since", "if-none-match", "if-match", "range", "if-range"];

impl ReqCache {
    /// Whether the client's header `name` stays off the origin request
    /// (proxy: the header; FastCGI: its `HTTP_*` param).
    pub fn withholds(ctx: &ReqCtx<'_, '_>, name: &[u8]) -> bool {
        ctx.cache_status.is_some()
            && !ctx.cache.as_deref().is_some_and(|c| c.as_is)
            && NOT_PASSED.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    }

    /// `*_cache_revalidate`: the stored entry's validators, as the request
    /// headers to send in their place (empty ones left out).
    pub fn validators<'a>(ctx: &'a ReqCtx<'_, '_>) -> impl Iterator<Item = (&'static str, &'a [u8])> {
        let c = ctx.cache.as_deref();
        [("If-None-Match", c.map(|c| &c.etag[..])), ("If-Modified-Since", c.map(|c| &c.last_modified[..]))]
            .into_iter()
            .filter_map(|(n, v)| v.filter(|v| !v.is_empty()).map(|v| (n, v)))
    }
}

/// What the lookup decided.
pub enum Lookup<'c> {
    /// Answer from the cache.
    Hit(Response<'c>),
    /// Ask the origin; with a fill when the answer may be stored.
    Fetch(Option<Fill>),
}

/// A request that may store the origin's answer.
pub struct Fill {
    pub zone: Arc<Zone>,
    pub key: Vec<u8>,
    pub hash: Hash,
    /// Requests for the key reached proxy_cache_min_uses.
    pub store: bool,
    pub flight: Option<Arc<Flight>>,
    /// The expired entry, for `proxy_cache_use_stale`.
    pub stale: Option<Stale>,
}

/// An expired entry that may still be served.
pub struct Stale {
    pub found: Found,
    pub hash: Hash,
}

fn default_key() -> &'static Template {
    static K: OnceLock<Template> = OnceLock::new();
    K.get_or_init(|| Template::compile("$scheme$proxy_host$request_uri").unwrap_or(Template { parts: Vec::new() }))
}

/// A predicate list (`proxy_cache_bypass`, `proxy_no_cache`): true when any
/// value is non-empty and not "0".
pub fn any_true(ctx: &ReqCtx<'_, '_>, list: &[Template]) -> bool {
    let vars = Vars::request(ctx);
    list.iter().any(|t| {
        let v = t.render_to_vec(&vars);
        !v.is_empty() && v != b"0"
    })
}

/// The cache's part before the origin.
pub async fn lookup<'c>(ctx: &mut ReqCtx<'c, '_>) -> Lookup<'c> {
    let conf = super::conf::of(ctx.conf);
    let cacheable_method = match ctx.req.method {
        Method::Get | Method::Head => true,
        Method::Post => conf.post,
        _ => false,
    };
    // nginx evaluates a `proxy_cache $var` only for a cacheable method
    // (and a purge request names its zone the same way).
    let purging = !matches!(conf.purge, super::purge::Purge::Off);
    if !cacheable_method && !purging {
        return Lookup::Fetch(None);
    }
    let zconf = match conf.zone.resolve(&Vars::request(ctx)) {
        Resolved::Off => return Lookup::Fetch(None),
        Resolved::Zone(z) => z,
        Resolved::Unknown(name) => {
            log_to!(
                ctx.conf.error_log,
                Level::Error,
                "*{} cache \"{}\" not found",
                ctx.conn.id,
                String::from_utf8_lossy(&name)
            );
            return Lookup::Hit(crate::http::handler::finish_error(ctx, 500));
        }
    };
    ctx.cache_zone = zconf.metrics;
    if !matches!(conf.purge, super::purge::Purge::Off) {
        let key = conf.key.as_deref().unwrap_or_else(|| default_key()).render_to_vec(&Vars::request(ctx));
        if let Some(r) = super::purge::check(ctx, &key, zconf) {
            return Lookup::Hit(r);
        }
    }
    if !cacheable_method {
        return Lookup::Fetch(None);
    }
    if beyond_range_offset(ctx) {
        // nginx calls it a MISS, passes the request as it is and stores
        // nothing.
        ctx.cache_status = Some(MISS);
        ctx.cache.get_or_insert_with(Default::default).as_is = true;
        return Lookup::Fetch(None);
    }
    if ctx.req.method == Method::Head && conf.convert_head {
        // The origin is asked with GET, so the entry serves both.
        ctx.req.method = Method::Get;
    }
    // A background refresh (after a stale answer) goes straight to the
    // origin with the fill it was given.
    if let Some(c) = ctx.cache.as_deref_mut()
        && c.refilling
        && let Some(f) = c.refresh.take()
    {
        return Lookup::Fetch(Some(f));
    }
    let mut key = conf.key.as_deref().unwrap_or_else(|| default_key()).render_to_vec(&Vars::request(ctx));
    let main = zone::hash(&key);
    let z = zone::get(zconf);
    if any_true(ctx, &conf.bypass) {
        ctx.cache_status = Some(BYPASS);
        return Lookup::Fetch(Some(Fill { zone: z, key, hash: main, store: true, flight: None, stale: None }));
    }
    let deadline = crate::clock::mono() + conf.lock_timeout;
    loop {
        let used = zone::stamp();
        let now = used / 1_000_000;
        // One probe of the index: count the use, learn variance and state.
        let node = z.with_node(&main, true, |n| {
            n.uses = n.uses.saturating_add(1);
            n.last_access = used;
            n.clone()
        });
        // An intercepted error remembered for the key (nginx's node
        // `error`): answered as the error page, a HIT, without the origin.
        if let Some(n) = node.as_ref().filter(|n| n.error != 0 && n.error_until >= used / 1_000_000) {
            ctx.cache_status = Some(HIT);
            return Lookup::Hit(crate::http::handler::finish_error(ctx, n.error));
        }
        let uses = node.as_ref().map_or(1, |n| n.uses.max(1));
        let (hash, node) = match node.as_ref().and_then(|n| n.vary.clone()) {
            Some(vary) => {
                let h = zone::variant_hash(&key, &variant(ctx, &vary));
                let n = z.with_node(&h, false, |n| {
                    n.last_access = used;
                    n.clone()
                });
                (h, n)
            }
            None => (main, node),
        };
        let store_ok = uses >= conf.min_uses;
        // Fresh while valid_until >= now, in whole seconds: nginx calls an
        // entry expired once valid_sec < now, so `max-age=1` stored in
        // second S is a hit through second S+1.
        let mem = zone::lock(&z.mem).get(&hash);
        if let Some(e) = mem
            && e.meta.valid_until >= now
            && !z.purged(&e.meta.key, e.meta.stored)
        {
            ctx.cache_status = Some(HIT);
            return Lookup::Hit(super::deliver::from_memory(ctx, e));
        }
        let mut stale = None;
        // A disk hit on an entry file this worker holds open: no open,
        // fstat or header read (nginx keeps the descriptor the same way).
        if let Some(n) = node.as_ref().filter(|n| n.on_disk && n.valid_until >= now)
            && let Some((file, meta, body_at)) = open_entry(&z, &hash, n.stored)
            && meta.key == key
            && !z.purged(&meta.key, meta.stored)
        {
            ctx.cache_status = Some(HIT);
            return Lookup::Hit(super::deliver::from_open(ctx, file, &meta, body_at));
        }
        // Until the loader has indexed the directory (just after a start)
        // the file is looked for directly. `loaded` is read before the node
        // is read again: once it is set, the loader's entries are indexed.
        let loaded = z.loaded.load(std::sync::atomic::Ordering::Acquire);
        let on_disk = node.as_ref().is_some_and(|n| n.on_disk) || loaded && z.node(&hash).is_some_and(|n| n.on_disk);
        if on_disk || !loaded {
            let mut read = store::read(&z, &hash, &key);
            let mut on_disk = on_disk;
            // The key's own file has a Vary: the link to its newest variant
            // (the index did not know the key varies: just after a start).
            let hash = match &read {
                Ok(Some(found)) if hash == main && !found.meta.vary.is_empty() => {
                    let (h, r) = through_link(ctx, &z, main, &key, found);
                    if let Some(r) = r {
                        read = r;
                    }
                    on_disk = z.node(&h).is_some_and(|n| n.on_disk);
                    h
                }
                _ => hash,
            };
            match read {
                Ok(Some(found)) if z.purged(&found.meta.key, found.meta.stored) => {
                    z.forget(&hash);
                    let id = store::file_id(&z.path_of(&hash));
                    let _ = std::fs::remove_file(z.path_of(&hash));
                    if let Some(id) = id.filter(|_| hash != main) {
                        store::drop_link(&z, &main, id);
                    }
                }
                Ok(Some(found)) if found.meta.valid_until >= now => {
                    if !on_disk {
                        // Found before the loader got to it (just started).
                        z.stored(&hash, zone::Node::entry(&found.meta, found.file_len, used));
                    }
                    promote(&z, &hash, &found);
                    ctx.cache_status = Some(HIT);
                    let (file, meta, body_at) = keep_open(&z, hash, found);
                    return Lookup::Hit(super::deliver::from_open(ctx, file, &meta, body_at));
                }
                Ok(Some(found)) => stale = Some(Stale { found, hash }),
                Ok(None) => {
                    if on_disk {
                        z.forget(&hash);
                    }
                }
                Err(why) => {
                    log_to!(ctx.conf.error_log, Level::Crit, "*{} {}", ctx.conn.id, why);
                    z.forget(&hash);
                }
            }
        }
        let status = if stale.is_some() { EXPIRED } else { MISS };
        ctx.cache_status = Some(status);
        if !store_ok && stale.is_none() {
            // nginx's NGX_HTTP_CACHE_SCARCE (proxy_cache_min_uses not yet
            // reached): the request goes to the origin as the client sent
            // it, ranges and conditions included, and nothing is stored.
            ctx.cache.get_or_insert_with(Default::default).as_is = true;
            return Lookup::Fetch(None);
        }
        if let Some(s) = stale.take() {
            match expired(ctx, &z, key, main, store_ok, s) {
                Ok(l) => return l,
                Err((k, s)) => {
                    key = k;
                    stale = Some(s);
                }
            }
        }
        if !(conf.lock && store_ok) {
            return Lookup::Fetch(Some(Fill { zone: z, key, hash: main, store: store_ok, flight: None, stale }));
        }
        match z.flight(&main) {
            Ok(flight) => {
                return Lookup::Fetch(Some(Fill {
                    zone: z,
                    key,
                    hash: main,
                    store: true,
                    flight: Some(flight),
                    stale,
                }));
            }
            Err(flight) => {
                // Wait for the fill in flight, then look again.
                let notified = flight.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !flight.done.load(std::sync::atomic::Ordering::Acquire) {
                    let now = crate::clock::mono();
                    let left = deadline.saturating_duration_since(now);
                    // proxy_cache_lock_age: a fill older than this lets one
                    // more request go to the origin (and fill in its place).
                    let to_age = (flight.started + conf.lock_age).saturating_duration_since(now);
                    if crate::clock::timeout(left.min(to_age), notified).await.is_ok() {
                        continue;
                    }
                    if to_age < left {
                        if let Some(f) = z.take_over(&main, &flight) {
                            return Lookup::Fetch(Some(Fill {
                                zone: z,
                                key,
                                hash: main,
                                store: true,
                                flight: Some(f),
                                stale,
                            }));
                        }
                        continue;
                    }
                    // nginx: after proxy_cache_lock_timeout the request goes
                    // to the origin and its answer is not cached.
                    return Lookup::Fetch(Some(Fill { zone: z, key, hash: main, store: false, flight: None, stale }));
                }
            }
        }
    }
}

/// A lookup met the key's link to its newest variant (`store::link_main`):
/// the index learns the key's Vary, and the request's variant is the
/// link's own entry (None: `found` is it) or read from its file.
fn through_link(
    ctx: &ReqCtx<'_, '_>,
    z: &Zone,
    main: Hash,
    key: &[u8],
    found: &Found,
) -> (Hash, Option<Result<Option<Found>, String>>) {
    z.varies(&main, found.meta.vary.clone().into(), found.meta.stored, false, false);
    let var = variant(ctx, &found.meta.vary);
    let h = zone::variant_hash(key, &var);
    if var == found.meta.variant {
        return (h, None);
    }
    (h, Some(store::read(z, &h, key)))
}

/// The request's values of the headers a Vary names, hashed.
fn variant(ctx: &ReqCtx<'_, '_>, vary: &[u8]) -> Hash {
    use md5::Digest;
    let mut h = md5::Md5::new();
    for name in tokens(vary) {
        h.update(name.to_ascii_lowercase());
        h.update(b":");
        // nginx's ngx_http_file_cache_vary_header: every field of the name,
        // joined by ","; for the Accept-Charset/-Encoding/-Language fields
        // the values' tokens with spaces and empty list items dropped, so
        // "foo, bar" and "foo,,  ,bar , " select the same variant.
        let normalize = [&b"accept-charset"[..], b"accept-encoding", b"accept-language"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n));
        let mut first = true;
        for (_, v) in ctx.req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
            if !normalize {
                if !first {
                    h.update(b",");
                }
                h.update(v);
                first = false;
                continue;
            }
            for t in tokens(v) {
                if !first {
                    h.update(b",");
                }
                h.update(t);
                first = false;
            }
        }
        h.update(b"\n");
    }
    h.finalize().into()
}

/// The items of a list split at spaces and commas, as nginx reads Vary
/// (it stops at the first empty item: one that only trailing separators
/// leave).
fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',' || b == b' ').filter(|t| !t.is_empty())
}

/// A disk hit of a small entry is offered to the memory tier.
fn promote(z: &Zone, h: &Hash, found: &Found) {
    let max = zone::lock(&z.mem).max_object();
    if found.meta.body_len > max {
        return;
    }
    if let Some(body) = store::body(found) {
        let e = Arc::new(MemEntry { meta: found.meta.clone(), body: body.into() });
        zone::lock(&z.mem).offer(*h, e);
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        // A fill that stores nothing still ends: its waiters look again.
        if let Some(f) = self.flight.take() {
            self.zone.land(&self.hash, &f);
        }
    }
}

/// An entry's stored `X-Accel-Charset` (the charset filter's, not sent).
pub const ACCEL_CHARSET: &str = "X-Accel-Charset";

/// The origin's head arrived: the entry writer when the response may be
/// stored (nginx's `u->cacheable` after `proxy_no_cache`, the headers'
/// rules and `proxy_cache_valid`). `buffering` off stores nothing, as in
/// nginx.
pub fn writer_for(
    ctx: &ReqCtx<'_, '_>,
    fill: &mut Fill,
    resp: &Response<'_>,
    accel_expires: Option<&[u8]>,
    buffering: bool,
) -> Option<Box<store::Writer>> {
    let conf = super::conf::of(ctx.conf);
    if !fill.store || !buffering || any_true(ctx, &conf.no_cache) {
        return None;
    }
    let now = super::manager::now();
    let v = super::policy::decide(resp.status, &resp.headers, accel_expires, conf, now);
    let valid_until = v.valid_until?;
    let (hash, main, var) = if v.vary.is_empty() {
        (fill.hash, None, [0u8; 16])
    } else {
        let var = variant(ctx, &v.vary);
        (zone::variant_hash(&fill.key, &var), Some(fill.hash), var)
    };
    let meta = Meta {
        valid_until,
        stale_updating: v.stale_updating,
        stale_error: v.stale_error,
        stored: zone::stamp(),
        status: resp.status,
        body_len: 0,
        key: fill.key.clone(),
        vary: v.vary,
        variant: var,
        content_type: resp.content_type.as_deref().map(str::to_string),
        headers: resp
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_slice().to_vec()))
            // nginx keeps the origin's whole head, so a hit recodes too.
            .chain(ctx.override_charset.iter().map(|c| (ACCEL_CHARSET.to_string(), c.as_bytes().to_vec())))
            .collect(),
    };
    match store::Writer::start(fill.zone.clone(), hash, main, meta, fill.flight.take()) {
        Ok(w) => Some(Box::new(w)),
        Err(why) => {
            log_to!(ctx.conf.error_log, Level::Crit, "*{} {}", ctx.conn.id, why);
            None
        }
    }
}

/// An expired entry was found. With `proxy_cache_use_stale updating` (or
/// the entry's `stale-while-revalidate` window), one request refreshes it
/// and the others get the stale entry (`UPDATING`); with
/// `proxy_cache_background_update` the refreshing request gets it too
/// (`STALE`) and refreshes after its answer. With
/// `proxy_cache_revalidate` the refresh asks the origin whether the entry
/// is still good. Err gives the key and entry back for the usual fetch.
#[allow(clippy::result_large_err)]
fn expired<'c>(
    ctx: &mut ReqCtx<'c, '_>,
    z: &Arc<Zone>,
    key: Vec<u8>,
    main: Hash,
    store_ok: bool,
    stale: Stale,
) -> Result<Lookup<'c>, (Vec<u8>, Stale)> {
    let conf = super::conf::of(ctx.conf);
    let m = &stale.found.meta;
    let now = super::manager::now();
    let may_update = conf.use_stale.updating
        || (m.stale_updating > 0 && now <= m.valid_until.saturating_add(m.stale_updating as i64));
    // nginx keeps validators only of a 200 or 206 (its cache header's
    // last_modified and etag), so nothing else is revalidated.
    if conf.revalidate && matches!(m.status, 200 | 206) {
        let header = |n: &str| m.headers.iter().find(|(h, _)| h.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone());
        let c = ctx.cache.get_or_insert_with(Default::default);
        c.etag = header("etag").unwrap_or_default();
        c.last_modified = header("last-modified").unwrap_or_default();
    }
    if !may_update || !store_ok {
        return Err((key, stale));
    }
    match z.flight(&main) {
        Err(_) => {
            ctx.cache_status = Some(UPDATING);
            Ok(Lookup::Hit(super::deliver::from_file(ctx, stale.found)))
        }
        Ok(flight) => {
            let mut fill = Fill { zone: z.clone(), key, hash: main, store: true, flight: Some(flight), stale: None };
            if conf.background_update {
                // With proxy_cache_revalidate the refresh asks with the
                // entry's validators, and its 304 renews this entry.
                if conf.revalidate {
                    fill.stale = stale.found.try_clone().ok().map(|found| Stale { found, hash: stale.hash });
                }
                ctx.cache_status = Some(STALE);
                ctx.cache.get_or_insert_with(Default::default).refresh = Some(fill);
                return Ok(Lookup::Hit(super::deliver::from_file(ctx, stale.found)));
            }
            fill.stale = Some(stale);
            Ok(Lookup::Fetch(Some(fill)))
        }
    }
}

/// The origin's head arrived for a fill: its 304 to a revalidation keeps
/// the stored entry (`REVALIDATED`), with the validity the 304 gives.
pub fn on_head<'c>(
    ctx: &mut ReqCtx<'c, '_>,
    fill: &mut Option<Fill>,
    head: &crate::http::proxy::response_head::ResponseHead,
) -> Option<Response<'c>> {
    if head.status != 304 || ctx.cache.as_deref().is_none_or(|c| c.etag.is_empty() && c.last_modified.is_empty()) {
        return None;
    }
    let f = fill.as_mut()?;
    let stale = f.stale.take()?;
    let now = super::manager::now();
    let valid = super::policy::revalidated(
        stale.found.meta.status,
        &head.headers,
        head.accel_expires.as_deref(),
        &stale.found.meta.headers,
        super::conf::of(ctx.conf),
        now,
    );
    let mut found = stale.found;
    if let Some(valid_until) = valid {
        found.meta.valid_until = valid_until;
        if let Err(why) = store::revalidated(&f.zone, &stale.hash, &found, zone::stamp()) {
            log_to!(ctx.conf.error_log, Level::Crit, "*{} {}", ctx.conn.id, why);
        }
    }
    ctx.cache_status = Some(REVALIDATED);
    Some(super::deliver::from_file(ctx, found))
}

/// `proxy_intercept_errors` is turning the origin's error into an error
/// page: when the error may be cached (its headers, else
/// `proxy_cache_valid` for its status, give it a time), the key remembers
/// it, as nginx's `ngx_http_upstream_intercept_errors` sets the node's
/// `error`. Nothing is written to disk.
pub fn remember_error(
    ctx: &ReqCtx<'_, '_>,
    fill: &Fill,
    status: u16,
    headers: &[(impl AsRef<str>, impl AsRef<[u8]>)],
    accel_expires: Option<&[u8]>,
) {
    let v = super::policy::decide(status, headers, accel_expires, super::conf::of(ctx.conf), super::manager::now());
    if let Some(until) = v.valid_until {
        fill.zone.with_node(&fill.hash, true, |n| {
            n.error = status;
            n.error_until = until;
        });
    }
}

/// After a stale answer went out: refresh the entry from the origin
/// (`proxy_cache_background_update`), reading the whole body into it.
pub async fn refresh_after(w: &crate::worker::WorkerCtx, ctx: &mut ReqCtx<'_, '_>) {
    let Some(c) = ctx.cache.as_deref_mut() else { return };
    if c.refresh.is_none() {
        return;
    }
    c.refilling = true;
    let mut client = crate::http::proxy::request_body::Client::detached();
    let mut resp = crate::http::proxy::respond(w, ctx, &mut client).await;
    let up = match &mut resp.body {
        crate::http::response::Body::Upstream(up) => Some(&mut **up),
        crate::http::response::Body::Compressed(z) => z.upstream_mut(),
        _ => None,
    };
    if let Some(up) = up {
        crate::http::proxy::fill_rest(w, up, true).await;
        crate::http::proxy::finish_body(w, ctx, up);
    }
}

/// `proxy_cache_max_range_offset`: a range starting past it goes to the
/// origin as it is, and the answer is not cached.
fn beyond_range_offset(ctx: &ReqCtx<'_, '_>) -> bool {
    let Some(max) = super::conf::of(ctx.conf).max_range_offset else { return false };
    let Some(h) = ctx.req.header("range") else { return false };
    // nginx's ngx_http_upstream_cache_check_range: with 0 every range
    // passes; a suffix range (`bytes=-N`, which may end anywhere) passes;
    // else the first range's start, at or past the offset, passes.
    if max == 0 {
        return true;
    }
    if h.len() < 7 || !h[..6].eq_ignore_ascii_case(b"bytes=") {
        return false;
    }
    let at = h[6..].iter().take_while(|b| **b == b' ').count();
    let spec = &h[6 + at..];
    if spec.first() == Some(&b'-') {
        return true;
    }
    let digits: Vec<u8> = spec.iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok().and_then(|d| d.parse::<u64>().ok()).is_some_and(|start| start >= max)
}

/// Entry files a worker keeps open, by zone and hash, with their parsed
/// header: valid while the index still names the same file (its `stored`
/// stamp). At most `OPEN_MAX` per worker; a replaced or removed entry's
/// descriptor goes when its key is next looked up, or when the table fills.
struct OpenEntry {
    file: Rc<OpenFile>,
    meta: Rc<Meta>,
    body_at: u64,
}

const OPEN_MAX: usize = 1024;

thread_local! {
    static OPEN: RefCell<HashMap<(usize, Hash), OpenEntry>> = RefCell::new(HashMap::new());
}

fn zone_id(z: &Arc<Zone>) -> usize {
    Arc::as_ptr(z) as usize
}

fn open_entry(z: &Arc<Zone>, h: &Hash, stored: i64) -> Option<(Rc<OpenFile>, Rc<Meta>, u64)> {
    OPEN.with(|o| {
        let mut o = o.borrow_mut();
        let id = (zone_id(z), *h);
        match o.get(&id) {
            Some(e) if e.meta.stored == stored => Some((e.file.clone(), e.meta.clone(), e.body_at)),
            Some(_) => {
                o.remove(&id);
                None
            }
            None => None,
        }
    })
}

fn keep_open(z: &Arc<Zone>, h: Hash, found: Found) -> (Rc<OpenFile>, Rc<Meta>, u64) {
    let mtime = (found.meta.stored.max(0) / 1_000_000) as u64;
    let file = Rc::new(OpenFile::from_file(found.file, found.file_len, mtime));
    let meta = Rc::new(found.meta);
    OPEN.with(|o| {
        let mut o = o.borrow_mut();
        if o.len() >= OPEN_MAX {
            o.clear();
        }
        o.insert((zone_id(z), h), OpenEntry { file: file.clone(), meta: meta.clone(), body_at: found.body_at });
    });
    (file, meta, found.body_at)
}
