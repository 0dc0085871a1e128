//! The background re-resolution of `server NAME resolve [service=...]`:
//! one thread per worker generation (started by `process::master` beside
//! the `check` thread), a `current_thread` runtime with one task per
//! resolvable server of every zone. Each task asks the `resolver` servers
//! (`resolver::query`), hands the addresses to the zone
//! ([`Zone::resolved`], which publishes a new list for the workers when
//! it changed), and asks again when the answer's TTL (or `valid=`) runs
//! out, as nginx's zone module does.
//!
//! As nginx: a name that does not exist (NXDOMAIN, or no address of the
//! families asked) empties the server's peers; any other failure (a
//! refusal, SERVFAIL, a timeout, a broken answer) keeps the last set and
//! is logged, and the question is asked again after `valid=` (or 10 s).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Found, ServerSpec, Zone};
use crate::log::error::Level;
use crate::log_error;
use crate::resolver::query;
use crate::resolver::wire::Failure;

/// How long a failed question waits before it is asked again when the
/// resolver has no `valid=`.
const RETRY: Duration = Duration::from_secs(10);

/// The running resolution of one generation; dropping it stops the thread
/// (its questions in flight are abandoned).
pub struct Resolver {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Resolver {
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.stop.take();
    }
}

/// Starts the resolution of every zone of `zones` that has a resolvable
/// server; None when there is none.
pub fn start(zones: Vec<Arc<Zone>>) -> Result<Option<Resolver>, String> {
    // Zones with a resolver: their configured names, and the names the
    // run-time API adds later.
    let zones: Vec<Arc<Zone>> = zones.into_iter().filter(|z| z.conf.resolver.is_some()).collect();
    if zones.is_empty() {
        return Ok(None);
    }
    let (tx, rx) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("sluice-resolve".into())
        .spawn(move || run(zones, rx))
        .map_err(|e| format!("could not start the upstream resolver thread ({e})"))?;
    Ok(Some(Resolver { stop: Some(tx), thread: Some(thread) }))
}

/// A task per resolvable server; once a second, a task for each one the
/// API added since (a removed one's task ends at its next answer).
fn run(zones: Vec<Arc<Zone>>, mut stop: oneshot::Receiver<()>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            log_error!(Level::Alert, "upstream resolver runtime failed ({})", e);
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut started: std::collections::HashSet<(usize, u64)> = std::collections::HashSet::new();
        loop {
            for (zi, z) in zones.iter().enumerate() {
                for (id, spec) in z.resolvable() {
                    if started.insert((zi, id)) {
                        tokio::task::spawn_local(server_loop(z.clone(), id, spec));
                    }
                }
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    });
}

async fn server_loop(z: Arc<Zone>, id: u64, spec: ServerSpec) {
    let Some(conf) = z.conf.resolver.clone() else { return };
    loop {
        let deadline = Instant::now() + z.conf.resolver_timeout;
        let answer = resolve_once(&conf, &spec, deadline).await;
        let wait = match answer {
            Ok((found, ttl)) => {
                match z.resolved(id, &found) {
                    None => return,
                    Some(true) => log_error!(
                        Level::Info,
                        "upstream \"{}\": \"{}\" resolved to {} peer(s)",
                        z.upstream,
                        spec.server,
                        found.len()
                    ),
                    Some(false) => {}
                }
                conf.valid.unwrap_or(Duration::from_secs(u64::from(ttl.max(1))))
            }
            Err(Failure::HostNotFound) => {
                if z.resolved(id, &[]).is_none() {
                    return;
                }
                log_error!(
                    Level::Error,
                    "{} could not be resolved (3: Host not found) in upstream \"{}\"",
                    spec.question(),
                    z.upstream
                );
                conf.valid.unwrap_or(RETRY)
            }
            Err(f) => {
                // The last good set stays.
                log_error!(
                    Level::Error,
                    "{} could not be resolved ({}) in upstream \"{}\", keeping its current peers",
                    spec.question(),
                    f.nginx_text(),
                    z.upstream
                );
                conf.valid.unwrap_or(RETRY)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One resolution of `spec`: the addresses found and their TTL.
pub async fn resolve_once(
    conf: &crate::resolver::ResolverConf,
    spec: &ServerSpec,
    deadline: Instant,
) -> Result<(Vec<Found>, u32), Failure> {
    match spec.srv_name() {
        None => {
            let (ips, ttl) = query::addresses(conf, &spec.host, deadline).await?;
            let port = spec.params.addr.port();
            let found = ips
                .into_iter()
                .map(|ip| Found {
                    addr: std::net::SocketAddr::new(ip, port),
                    target: None,
                    weight: None,
                    backup: false,
                })
                .collect();
            Ok((found, ttl))
        }
        Some(name) => {
            let svc = query::service(conf, &name, deadline).await?;
            for m in &svc.missing {
                log_error!(Level::Error, "{} could not be resolved (3: Host not found)", m);
            }
            // nginx: the records of the lowest priority are the primary
            // peers, the others backups.
            let lowest = svc.targets.iter().map(|t| t.priority).min().unwrap_or(0);
            let found = svc
                .targets
                .into_iter()
                .map(|t| Found {
                    addr: t.addr,
                    target: Some(t.name),
                    weight: Some(t.weight),
                    backup: t.priority > lowest,
                })
                .collect();
            Ok((found, svc.ttl))
        }
    }
}
