//! Keep-alive timers for idle connections, kept by the worker instead of a
//! tokio `Sleep` per connection. An idle connection is the most numerous
//! thing a server holds (10,000 of them in the memory benchmark); a slot
//! here costs 32 bytes instead of a timer entry and a notifier in every
//! connection's future, and one sweep per second both expires timeouts
//! (one-second resolution, as nginx's keepalive_timeout is used in
//! practice) and wakes idle connections when the worker drains.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

struct Slot {
    deadline: u64,
    /// When the connection should give up its task and be parked.
    park_at: u64,
    waker: Option<Waker>,
    fired: Option<Fired>,
}

/// Why an idle wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fired {
    Timeout,
    Park,
}

#[derive(Default)]
pub struct IdleTimers {
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<u32>>,
}

impl IdleTimers {
    /// Starts a timer that fires at unix second `deadline`, or earlier at
    /// `park_at` to move the connection to the parking lot.
    pub fn add(&self, deadline: u64, park_at: u64) -> u32 {
        let slot = Slot { deadline, park_at, waker: None, fired: None };
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(i) => {
                slots[i as usize] = Some(slot);
                i
            }
            None => {
                slots.push(Some(slot));
                (slots.len() - 1) as u32
            }
        }
    }

    pub fn remove(&self, i: u32) {
        if let Some(s) = self.slots.borrow_mut().get_mut(i as usize) {
            *s = None;
            self.free.borrow_mut().push(i);
        }
    }

    /// Fires timers due by `now`, visiting slots from `from` on, until
    /// `max` have fired; with `cap`, pulls later deadlines in to at most
    /// `cap` (draining: idle connections get a short grace). Returns where
    /// to go on, or None once every slot was visited.
    ///
    /// Why at most `max`: each fired timer wakes a connection task that
    /// then parks or closes its socket, and tokio runs woken tasks in the
    /// order they were woken. Thousands fired at once (a flood that went
    /// idle in the same second) would all run before any connection that
    /// became readable meanwhile; in batches, the worker's tick pauses
    /// between them (see `worker::sweep`), so those are served in between.
    pub fn sweep(&self, now: u64, cap: Option<u64>, from: usize, max: usize) -> Option<usize> {
        let mut wake = Vec::new();
        let mut next = None;
        {
            let mut slots = self.slots.borrow_mut();
            for (i, s) in slots.iter_mut().enumerate().skip(from) {
                if wake.len() >= max {
                    next = Some(i);
                    break;
                }
                let Some(s) = s else { continue };
                if let Some(c) = cap {
                    s.deadline = s.deadline.min(c);
                }
                if s.fired.is_some() {
                    continue;
                }
                s.fired = if s.deadline <= now {
                    Some(Fired::Timeout)
                } else if s.park_at <= now {
                    Some(Fired::Park)
                } else {
                    None
                };
                if s.fired.is_some()
                    && let Some(w) = s.waker.take()
                {
                    wake.push(w);
                }
            }
        }
        for w in wake {
            w.wake();
        }
        next
    }

    pub fn wait(&self, i: u32) -> Expired<'_> {
        Expired { timers: self, slot: i }
    }
}

/// Resolves when the slot's timer fires.
pub struct Expired<'a> {
    timers: &'a IdleTimers,
    slot: u32,
}

impl Future for Expired<'_> {
    type Output = Fired;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Fired> {
        let mut slots = self.timers.slots.borrow_mut();
        match slots.get_mut(self.slot as usize).and_then(|s| s.as_mut()) {
            Some(Slot { fired: Some(f), .. }) => Poll::Ready(*f),
            Some(s) => {
                match &s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => s.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            None => Poll::Ready(Fired::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn fires_at_deadline_and_on_drain() {
        let t = IdleTimers::default();
        let a = t.add(100, u64::MAX);
        let b = t.add(200, u64::MAX);
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fa = t.wait(a);
        assert!(Pin::new(&mut fa).poll(&mut cx).is_pending());
        t.sweep(99, None, 0, usize::MAX);
        assert!(!flag.0.load(std::sync::atomic::Ordering::SeqCst));
        t.sweep(100, None, 0, usize::MAX);
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(Pin::new(&mut fa).poll(&mut cx), Poll::Ready(Fired::Timeout));
        let mut fb = t.wait(b);
        assert!(Pin::new(&mut fb).poll(&mut cx).is_pending());
        t.sweep(101, Some(102), 0, usize::MAX);
        assert!(Pin::new(&mut fb).poll(&mut cx).is_pending());
        t.sweep(102, None, 0, usize::MAX);
        assert!(Pin::new(&mut fb).poll(&mut cx).is_ready());
        t.remove(a);
        t.remove(b);
        assert_eq!(t.add(5, 3), b);
        let mut fc = t.wait(b);
        assert!(Pin::new(&mut fc).poll(&mut cx).is_pending());
        t.sweep(3, None, 0, usize::MAX);
        assert_eq!(Pin::new(&mut fc).poll(&mut cx), Poll::Ready(Fired::Park));
    }

    #[test]
    fn fires_at_most_max_per_pass() {
        let t = IdleTimers::default();
        let slots: Vec<u32> = (0..5).map(|i| t.add(if i == 2 { 50 } else { 10 }, u64::MAX)).collect();
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waits: Vec<_> = slots.iter().map(|&i| t.wait(i)).collect();
        for f in waits.iter_mut() {
            assert!(Pin::new(f).poll(&mut cx).is_pending());
        }
        // Slots 0 and 1 fire; the pass stops before slot 2.
        assert_eq!(t.sweep(10, None, 0, 2), Some(2));
        fn fired(waits: &mut [Expired<'_>], cx: &mut Context<'_>) -> Vec<bool> {
            waits.iter_mut().map(|f| Pin::new(f).poll(cx).is_ready()).collect()
        }
        assert_eq!(fired(&mut waits, &mut cx), [true, true, false, false, false]);
        assert_eq!(t.sweep(10, None, 2, 2), None);
        assert_eq!(fired(&mut waits, &mut cx), [true, true, false, true, true]);
        // A second pass fires nothing twice.
        assert_eq!(t.sweep(10, None, 0, 1), None);
    }
}
