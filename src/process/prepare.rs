//! Checks and preparation of the file system before a configuration's
//! workers start (at startup and on reload), so that a problem is refused
//! up front instead of turning into per-request errors.

use std::collections::HashSet;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

use crate::config::Config;
use crate::config::model::{LocConf, Locations};
use crate::log::error::Level;
use crate::log_error;

/// Every server and location configuration, nested and named ones included.
fn loc_confs(cfg: &Config) -> Vec<&LocConf> {
    fn collect<'a>(locs: &'a Locations, out: &mut Vec<&'a LocConf>) {
        for l in locs.exact.iter().chain(&locs.prefix).chain(&locs.regex) {
            out.push(&l.conf);
            collect(&l.children, out);
        }
    }
    let mut confs = Vec::new();
    for s in &cfg.http.servers {
        confs.push(&*s.conf);
        collect(&s.locations, &mut confs);
        for l in s.named.values() {
            confs.push(&l.conf);
        }
    }
    confs
}

/// `-t`: every error and access log can be opened (created if missing),
/// as `nginx -t` checks by opening them, so a test that passes predicts a
/// start that does not fail on a log path.
pub fn log_files(cfg: &Config) -> Result<(), String> {
    let error_logs = cfg.error_log_files.iter().filter_map(|f| f.path());
    let access_logs = cfg.access_log_files.iter().map(|f| f.path.as_path());
    for p in error_logs.chain(access_logs) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| format!("open() \"{}\" failed ({})", p.display(), super::signal::os_error(&e)))?;
    }
    Ok(())
}

/// With `user`, the temporary directories (`client_body_temp_path`,
/// `proxy_temp_path`) and cache directories (`proxy_cache_path`) are
/// created now and handed to the worker user, as
/// nginx does: the workers could not create them under a root-owned prefix
/// themselves. Without `user` they are created on first use by whoever runs
/// sluice.
pub fn temp_dirs(cfg: &Config) -> Result<(), String> {
    let Some(user) = &cfg.main.user else { return Ok(()) };
    let mut seen = HashSet::new();
    let confs = loc_confs(cfg);
    let temps = confs.iter().flat_map(|c| {
        [
            &c.client_body_temp_path,
            &c.proxy.up.buffers.temp_path,
            &c.fastcgi.up.buffers.temp_path,
            &c.uwsgi.up.buffers.temp_path,
            &c.scgi.up.buffers.temp_path,
        ]
    });
    let dirs = temps.chain(cfg.http.cache_zones.iter().map(|z| &z.path));
    for dir in dirs {
        if !seen.insert(dir.clone()) {
            continue;
        }
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("mkdir() \"{}\" failed ({})", dir.display(), super::signal::os_error(&e)))?;
        }
        let owner = std::fs::metadata(dir)
            .map(|m| m.uid())
            .map_err(|e| format!("stat() \"{}\" failed ({})", dir.display(), super::signal::os_error(&e)))?;
        if owner != user.uid {
            std::os::unix::fs::chown(dir, Some(user.uid), None).map_err(|e| {
                format!("chown(\"{}\", {}) failed ({})", dir.display(), user.uid, super::signal::os_error(&e))
            })?;
        }
    }
    Ok(())
}

/// Every literal `root`/`alias` directory of the configuration, checked
/// before anything starts: one that exists but cannot be read is refused (a
/// server that would answer 403 to everything is a configuration error);
/// a missing one is only warned about, as nginx serves 404s from it.
pub fn check_roots(cfg: &Config) -> Result<(), String> {
    let mut seen = HashSet::new();
    for c in loc_confs(cfg) {
        let r = &c.root;
        if r.template.is_some() || !seen.insert(r.path.clone()) {
            continue;
        }
        let dir = if r.alias_len.is_some() && !r.path.ends_with('/') {
            // An alias may name a file; check the directory holding it.
            Path::new(&r.path).parent().map(|p| p.to_path_buf()).unwrap_or_default()
        } else {
            std::path::PathBuf::from(&r.path)
        };
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {
                if let Err(e) = std::fs::read_dir(&dir) {
                    return Err(format!(
                        "root directory \"{}\" is not readable ({})",
                        dir.display(),
                        super::signal::os_error(&e)
                    ));
                }
            }
            Ok(_) => return Err(format!("root \"{}\" is not a directory", dir.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                log_error!(Level::Warn, "root directory \"{}\" does not exist", dir.display());
            }
            Err(e) => {
                return Err(format!(
                    "root directory \"{}\" is not accessible ({})",
                    dir.display(),
                    super::signal::os_error(&e)
                ));
            }
        }
    }
    Ok(())
}
