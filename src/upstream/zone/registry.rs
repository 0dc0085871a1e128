//! The upstreams of the configuration being served, by family and name,
//! for the run-time API: the zone of each (None for an upstream without
//! one, which the API calls static). Published when a worker generation
//! starts (`process::master`), so a reload's API requests reach the new
//! configuration's zones, which inherited the old ones' servers.

use std::sync::{Arc, Mutex};

use super::Zone;

/// (family, upstream name, its zone).
pub type Entry = (&'static str, String, Option<Arc<Zone>>);

static CURRENT: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The upstream blocks of a configuration (not the implicit ones that
/// `proxy_pass http://host:port` makes).
pub fn publish(cfg: &crate::config::Config) {
    let http = cfg.http.upstreams.iter().map(|u| ("http", u));
    let families = cfg.families.iter().flat_map(|(name, f)| f.upstreams().iter().map(move |u| (*name, u)));
    let list: Vec<Entry> =
        http.chain(families).filter(|(_, u)| !u.implicit).map(|(f, u)| (f, u.name.clone(), u.zone.clone())).collect();
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = list;
}

/// None: no such upstream; Some(None): one without a zone.
pub fn find(family: &str, name: &str) -> Option<Option<Arc<Zone>>> {
    let g = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().find(|(f, n, _)| *f == family && n == name).map(|(_, _, z)| z.clone())
}

/// The names of a family's upstreams, in configuration order.
pub fn names(family: &str) -> Vec<(String, bool)> {
    let g = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().filter(|(f, _, _)| *f == family).map(|(_, n, z)| (n.clone(), z.is_some())).collect()
}
