//! `worker_cpu_affinity`: pins the calling worker thread.

use crate::log::error::Level;
use crate::log_error;

pub fn pin(worker: usize, cpus: &[usize]) {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        if c < rustix::thread::CpuSet::MAX_CPU {
            set.set(c);
        }
    }
    // None: the calling thread.
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        log_error!(Level::Alert, "sched_setaffinity() failed for worker {} on CPUs {:?} ({})", worker, cpus, e);
    }
}

/// The CPUs for worker `i` under the configured policy (None: no pinning).
pub fn cpus_for(policy: &crate::config::model::CpuAffinity, i: usize) -> Option<Vec<usize>> {
    use crate::config::model::CpuAffinity;
    match policy {
        CpuAffinity::None => None,
        CpuAffinity::Auto(mask) => {
            let avail = crate::config::set_main::available_cpus();
            let allowed: Vec<usize> = match mask {
                Some(m) => avail.into_iter().filter(|c| m.contains(c)).collect(),
                None => avail,
            };
            if allowed.is_empty() { None } else { Some(vec![allowed[i % allowed.len()]]) }
        }
        CpuAffinity::Masks(masks) => masks.get(i).or(masks.last()).cloned(),
    }
}
