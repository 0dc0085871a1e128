//! Process-wide settings nginx gives each worker process when it starts
//! (`worker_rlimit_nofile`, `worker_rlimit_core`, `working_directory`).
//! sluice's workers are threads of one process, so these are applied to
//! the process before each generation of workers starts: at start and at
//! every reload, where nginx's new workers would apply them.

use crate::config::model::MainConf;
use crate::log::error::Level;
use crate::log_error;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

pub fn apply(main: &MainConf) {
    if let Some(n) = main.rlimit_nofile {
        raise_nofile(n);
    }
    if let Some(n) = main.rlimit_core {
        set_core(n);
    }
    if let Some(dir) = &main.working_directory
        && let Err(e) = rustix::process::chdir(dir)
    {
        // nginx's worker exits here and is started again, in a loop; the
        // process goes on serving from where it was instead.
        log_error!(Level::Alert, "chdir(\"{}\") failed ({})", dir.display(), e);
    }
}

/// Sets both limits; a hard limit the process may not raise (not root)
/// leaves the soft limit as high as the hard one allows.
fn raise_nofile(n: u64) {
    let lim = Rlimit { current: Some(n), maximum: Some(n) };
    if setrlimit(Resource::Nofile, lim).is_err() {
        let cur = getrlimit(Resource::Nofile);
        let soft = Rlimit { current: Some(n.min(cur.maximum.unwrap_or(n))), maximum: cur.maximum };
        if let Err(e) = setrlimit(Resource::Nofile, soft) {
            log_error!(Level::Alert, "setrlimit(RLIMIT_NOFILE, {}) failed ({})", n, e);
        }
    }
}

/// The soft limit, which decides a core file's size; the hard limit
/// stays (raised if it is lower and the process may), so a later reload
/// can raise the soft one again: nginx lowers both, but in a worker
/// process that a reload replaces, never in its master.
fn set_core(n: u64) {
    let cur = getrlimit(Resource::Core);
    let hard = match cur.maximum {
        Some(max) if max < n => Some(n),
        other => other,
    };
    if let Err(e) = setrlimit(Resource::Core, Rlimit { current: Some(n), maximum: hard }) {
        log_error!(Level::Alert, "setrlimit(RLIMIT_CORE, {}) failed ({})", n, e);
    }
}

/// After a worker thread dropped to `user`, the kernel stops writing core
/// files for the process; with `worker_rlimit_core` set, they are asked
/// for, turned back on, as nginx does for its workers after setuid().
pub fn allow_core_dumps(main: &MainConf) {
    if main.rlimit_core.is_some()
        && let Err(e) = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
    {
        log_error!(Level::Alert, "prctl(PR_SET_DUMPABLE) failed ({})", e);
    }
}
