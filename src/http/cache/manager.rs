//! The zone's background thread, nginx's cache loader and cache manager in
//! one: first it walks the cache directory and indexes every valid entry
//! (removing temporary files left by a crash and any file that is not a
//! whole entry), `loader_files` at a time with `loader_sleep` between
//! batches; then, once a second, it removes entries not used for
//! `inactive` and evicts the least recently used ones while the cache is
//! over `max_size` or the file system has less than `min_free`, at most
//! `manager_files` per batch with `manager_sleep` between batches. It
//! never runs on a worker's event loop.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::zone::{Hash, Node, Zone};

pub fn start(zone: Arc<Zone>) {
    let name = format!("cache {}", zone.conf.name);
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        load(&zone);
        zone.loaded.store(true, Ordering::Release);
        loop {
            std::thread::sleep(Duration::from_secs(1));
            if !super::zone::is_current(&zone) {
                return;
            }
            manage(&zone, super::zone::stamp());
        }
    });
    if let Err(e) = spawned {
        crate::log_error!(crate::log::error::Level::Alert, "could not start the cache manager thread ({})", e);
    }
}

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Indexes what is on disk.
fn load(zone: &Zone) {
    let _ = std::fs::create_dir_all(&zone.conf.path);
    let mut batch = 0u64;
    walk(zone, &zone.conf.path, zone.conf.levels.len(), &mut batch);
}

fn walk(zone: &Zone, dir: &Path, depth: usize, batch: &mut u64) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let path = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if depth > 0 {
            if ft.is_dir() {
                walk(zone, &path, depth - 1, batch);
            }
            continue;
        }
        if !ft.is_file() {
            continue;
        }
        *batch += 1;
        if batch.is_multiple_of(zone.conf.loader_files) {
            std::thread::sleep(zone.conf.loader_sleep);
        }
        index_file(zone, &path);
    }
}

/// Whether `name` is a temporary entry file (`HASH.tmpPID.N`, see
/// `Zone::temp_path`) made by this process.
fn own_temp(name: &str) -> bool {
    let Some((_, rest)) = name.split_once(".tmp") else { return false };
    let pid = rest.split('.').next().unwrap_or("");
    pid.parse::<u32>().is_ok_and(|p| p == std::process::id())
}

/// Adds one file to the index, or removes it when it is not a whole entry
/// under its own name (temporary files, damaged or foreign files).
fn index_file(zone: &Zone, path: &Path) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(h) = parse_hex(name) else {
        // A temporary file of this process is a fill in progress (the
        // loader starts with the zone's first request, so it can meet one):
        // removing it lost that entry. Another process's is a leftover.
        if own_temp(name) {
            return;
        }
        if name.contains(".tmp") || name.len() >= 32 {
            let _ = std::fs::remove_file(path);
        }
        return;
    };
    let Ok(file) = std::fs::File::open(path) else { return };
    let (meta, file_len) = match super::store::check(&file, &[]) {
        Ok((meta, _, len)) => (meta, len),
        Err(why) => {
            let _ = std::fs::remove_file(path);
            crate::log_error!(
                crate::log::error::Level::Warn,
                "cache file \"{}\" is invalid ({}), removed",
                path.display(),
                why
            );
            return;
        }
    };
    // The file must sit where its key puts it (a variant's name is its own
    // hash, checked when read).
    if zone.path_of(&h) != path {
        let _ = std::fs::remove_file(path);
        return;
    }
    let accessed = file.metadata().ok().and_then(|m| m.modified().ok()).map(unix).unwrap_or_else(now) * 1_000_000;
    if meta.vary.is_empty() {
        zone.stored(&h, Node::entry(&meta, file_len, accessed));
        return;
    }
    let main = super::zone::hash(&meta.key);
    if main == h {
        // The key's link to its newest variant (`store::link_main`): its
        // bytes are the variant's. Alone (the variant was replaced or
        // removed since), it is a leftover.
        use std::os::unix::fs::MetadataExt;
        if file.metadata().is_ok_and(|m| m.nlink() < 2) {
            let _ = std::fs::remove_file(path);
            return;
        }
    } else {
        zone.stored(&h, Node::entry(&meta, file_len, accessed));
    }
    zone.varies(&main, meta.vary.into(), meta.stored, false, false);
}

fn unix(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn parse_hex(name: &str) -> Option<Hash> {
    if name.len() != 32 {
        return None;
    }
    let mut h = [0u8; 16];
    for (i, b) in h.iter_mut().enumerate() {
        *b = u8::from_str_radix(name.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(h)
}

/// Carries out prefix purges: every entry file whose key matches and was
/// stored before the purge is removed.
fn purge(zone: &Zone) {
    let marks = zone.pending_purges();
    if marks.is_empty() {
        return;
    }
    for (h, n) in zone.snapshot() {
        if !n.on_disk {
            continue;
        }
        let path = zone.path_of(&h);
        let Ok(file) = std::fs::File::open(&path) else { continue };
        let Ok((meta, _, _)) = super::store::check(&file, &[]) else { continue };
        let purged = marks
            .iter()
            .any(|m| meta.stored <= m.at && if m.exact { meta.key == m.key } else { meta.key.starts_with(&m.key) });
        // A refill may have renamed a new entry into place since the read:
        // only the file that was read goes.
        if purged && same_file(&file, &path) {
            remove(zone, &h, &n);
        }
    }
    zone.purges_done(marks.len());
}

/// One manager pass; `now` is a [`super::zone::stamp`].
pub fn manage(zone: &Zone, now: i64) {
    purge(zone);
    let inactive = zone.conf.inactive.as_micros().min(i64::MAX as u128) as i64;
    let mut nodes = zone.snapshot();
    let mut removed = 0u64;
    let pause = |removed: &mut u64| {
        *removed += 1;
        if removed.is_multiple_of(zone.conf.manager_files) {
            std::thread::sleep(zone.conf.manager_sleep);
        }
    };
    // Entry files removed, for `sluice_status` (use counters of keys never
    // stored are no entries).
    let mut evicted = 0u64;
    // Inactive entries (and use counters of keys never stored).
    for (h, n) in &nodes {
        if n.last_access.saturating_add(inactive) < now {
            remove(zone, h, n);
            evicted += u64::from(n.on_disk);
            pause(&mut removed);
        }
    }
    nodes.retain(|(_, n)| n.on_disk && n.last_access.saturating_add(inactive) >= now);
    // Over max_size or under min_free: least recently used first.
    nodes.sort_by_key(|(_, n)| n.last_access);
    let mut i = 0;
    while i < nodes.len() && over_limits(zone) {
        remove(zone, &nodes[i].0, &nodes[i].1);
        evicted += 1;
        pause(&mut removed);
        i += 1;
    }
    if evicted > 0 {
        crate::metrics::with_local(|m| m.evicted(zone.conf.metrics, evicted));
    }
}

fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

fn over_limits(zone: &Zone) -> bool {
    if let Some(max) = zone.conf.max_size
        && zone.disk_bytes.load(Ordering::Relaxed) > max
    {
        return true;
    }
    if let Some(min) = zone.conf.min_free
        && let Ok(st) = rustix::fs::statvfs(&zone.conf.path)
    {
        return st.f_bavail.saturating_mul(st.f_frsize) < min;
    }
    false
}

/// Removes an entry, or the index's record of a key that varies: a
/// variant's entry takes the key's link to it along, and so does the
/// record (a lookup without it would not look for the variants anyway).
fn remove(zone: &Zone, h: &Hash, n: &Node) {
    let path = zone.path_of(h);
    if n.on_disk {
        let id = super::store::file_id(&path);
        let _ = std::fs::remove_file(&path);
        if let (Some(main), Some(id)) = (n.main, id) {
            super::store::drop_link(zone, &main, id);
        }
    } else if n.vary.is_some() && super::store::holds_variant(&path) {
        let _ = std::fs::remove_file(&path);
    }
    zone.forget(h);
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_names_round_trip() {
        let h = super::super::zone::hash(b"k");
        assert_eq!(super::parse_hex(&super::super::zone::hex(&h)), Some(h));
        assert_eq!(super::parse_hex("zz"), None);
        assert_eq!(super::parse_hex(&"g".repeat(32)), None);
    }
}
