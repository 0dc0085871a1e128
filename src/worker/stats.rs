//! Connection and request counters for `stub_status` and the
//! `$connections_*` variables. Each worker owns one [`WorkerStats`] and is
//! its only writer, so a count is a plain load and store of a relaxed
//! atomic (no locked instruction, no cache line shared with another
//! worker on the request path); a status request sums every worker's,
//! old generations' included, so `accepts`, `handled` and `requests` keep
//! counting across reloads as nginx's shared-memory counters do.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// One worker's counters, on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
pub struct WorkerStats {
    accepts: AtomicU64,
    handled: AtomicU64,
    requests: AtomicU64,
    active: AtomicU64,
    reading: AtomicU64,
    writing: AtomicU64,
}

fn add(c: &AtomicU64, n: i64) {
    c.store(c.load(Relaxed).wrapping_add_signed(n), Relaxed);
}

impl WorkerStats {
    /// A connection was accepted and is being served.
    pub fn accepted(&self) {
        add(&self.accepts, 1);
        add(&self.handled, 1);
    }

    /// The worker's live connections (`worker_connections`' count).
    pub fn set_active(&self, n: usize) {
        self.active.store(n as u64, Relaxed);
    }

    /// Whether a request head is being read or a request answered.
    pub fn busy(&self) -> bool {
        self.reading.load(Relaxed) > 0 || self.writing.load(Relaxed) > 0
    }

    /// A request head is being read, until the guard becomes
    /// [`Phase::writing`] or is dropped.
    pub fn reading(&self) -> Phase<'_> {
        add(&self.reading, 1);
        Phase { stats: self, writing: false }
    }

    /// A request (an HTTP/2 stream) is being answered, until dropped.
    pub fn request(&self) -> Phase<'_> {
        add(&self.requests, 1);
        add(&self.writing, 1);
        Phase { stats: self, writing: true }
    }
}

/// Counts one connection as reading or one request as writing while held.
pub struct Phase<'s> {
    stats: &'s WorkerStats,
    writing: bool,
}

impl Phase<'_> {
    /// The head is read: the request counts and is being answered.
    pub fn writing(&mut self) {
        if !self.writing {
            add(&self.stats.reading, -1);
            add(&self.stats.requests, 1);
            add(&self.stats.writing, 1);
            self.writing = true;
        }
    }
}

impl Drop for Phase<'_> {
    fn drop(&mut self) {
        add(if self.writing { &self.stats.writing } else { &self.stats.reading }, -1);
    }
}

/// The live workers' counters, and what the workers that exited had
/// counted (so the list does not grow by a generation on every reload).
struct Registry {
    live: Vec<Arc<WorkerStats>>,
    accepts: u64,
    handled: u64,
    requests: u64,
}

static ALL: Mutex<Registry> = Mutex::new(Registry { live: Vec::new(), accepts: 0, handled: 0, requests: 0 });

/// A new worker's counters, known to every later [`totals`]. The counters
/// of workers that have exited (the registry holds their last reference)
/// are folded into the registry's sums here: their gauges are back to 0.
pub fn register() -> Arc<WorkerStats> {
    let s = Arc::new(WorkerStats::default());
    if let Ok(mut all) = ALL.lock() {
        let reg = &mut *all;
        reg.live.retain(|w| {
            if Arc::strong_count(w) > 1 {
                return true;
            }
            reg.accepts = reg.accepts.wrapping_add(w.accepts.load(Relaxed));
            reg.handled = reg.handled.wrapping_add(w.handled.load(Relaxed));
            reg.requests = reg.requests.wrapping_add(w.requests.load(Relaxed));
            false
        });
        reg.live.push(s.clone());
    }
    s
}

/// nginx's stub_status figures, summed over every worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub active: u64,
    pub accepts: u64,
    pub handled: u64,
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

pub fn totals() -> Totals {
    let mut t = Totals::default();
    let Ok(all) = ALL.lock() else { return t };
    (t.accepts, t.handled, t.requests) = (all.accepts, all.handled, all.requests);
    for s in all.live.iter() {
        t.active = t.active.wrapping_add(s.active.load(Relaxed));
        t.accepts = t.accepts.wrapping_add(s.accepts.load(Relaxed));
        t.handled = t.handled.wrapping_add(s.handled.load(Relaxed));
        t.requests = t.requests.wrapping_add(s.requests.load(Relaxed));
        // A gauge read while its worker moves it can be off by one.
        t.reading = t.reading.wrapping_add(s.reading.load(Relaxed));
        t.writing = t.writing.wrapping_add(s.writing.load(Relaxed));
    }
    // Counters read unsynchronized may momentarily disagree: clamp.
    t.reading = t.reading.min(t.active);
    t.writing = t.writing.min(t.active.saturating_sub(t.reading));
    t.waiting = t.active.saturating_sub(t.reading + t.writing);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_move_between_gauges() {
        let s = WorkerStats::default();
        s.accepted();
        s.set_active(1);
        {
            let mut p = s.reading();
            assert_eq!(s.reading.load(Relaxed), 1);
            p.writing();
            assert_eq!((s.reading.load(Relaxed), s.writing.load(Relaxed), s.requests.load(Relaxed)), (0, 1, 1));
        }
        assert_eq!(s.writing.load(Relaxed), 0);
        {
            let _p = s.reading();
        }
        assert_eq!((s.reading.load(Relaxed), s.requests.load(Relaxed)), (0, 1));
        drop(s.request());
        assert_eq!((s.requests.load(Relaxed), s.writing.load(Relaxed)), (2, 0));
    }

    /// A worker that exited leaves the list (the list no longer grows by
    /// a generation per reload), and its counts stay in the sums.
    #[test]
    fn exited_workers_fold_into_the_sums() {
        let before = totals();
        let w = register();
        w.accepted();
        drop(w.request());
        let gone = Arc::downgrade(&w);
        drop(w);
        let next = register();
        assert!(gone.upgrade().is_none(), "the exited worker's counters are still listed");
        let t = totals();
        assert!(t.accepts > before.accepts && t.requests > before.requests, "{before:?} -> {t:?}");
        drop(next);
    }
}
