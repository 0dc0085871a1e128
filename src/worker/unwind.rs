//! Panics inside a request, and the test hook that causes them.
//!
//! A bug that panics while one request runs must cost that request only:
//! [`Guarded`] polls a request's future inside `catch_unwind`, drops it at
//! once when it panics (so what it held across an await, an origin
//! connection or a `RefCell` borrow, is released then, not whenever the
//! connection ends) and hands the connection layer a [`Panic`] to answer
//! with 500 and log at `alert` with the request named.
//!
//! Why this is sound for the worker's shared state: a `RefMut` or `Ref`
//! dropped during unwinding releases its borrow (`RefCell` has no
//! poisoning), the counters the worker keeps per connection and request
//! (`ConnGuard`, `stub_status` phases, `limit_conn` holds, queue waits) are
//! released by `Drop`, the process-wide mutexes recover from poisoning
//! (`cache::zone::lock`, `limit::zone`, the TLS session stores), and an
//! origin body dropped before it was released leaves its peer's count with
//! [`crate::http::proxy::finish::settle_orphans`].
//!
//! The process's panic hook (`process::master`) asks [`stash`] first: a
//! panic under a guard is kept for the guard to log with its request; any
//! other (a spawned task's: tokio catches it and the worker's event loop
//! goes on) is logged at once.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo, catch_unwind};
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

thread_local! {
    /// How many guards are polling on this thread right now.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// A guard is dropping the future that panicked.
    static DISCARDING: Cell<bool> = const { Cell::new(false) };
    /// The message and place of the last panic under a guard.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// What a guarded request's panic said, and where.
pub struct Panic(pub String);

impl std::fmt::Display for Panic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn payload_text(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>")
}

/// Called by the panic hook: keeps the panic for the guard polling on this
/// thread and returns true, or returns false when no guard is (the hook
/// then logs it itself).
pub fn stash(info: &PanicHookInfo<'_>) -> bool {
    if DEPTH.try_with(Cell::get).unwrap_or(0) == 0 {
        return false;
    }
    let _ = LAST.try_with(|s| s.replace(Some(describe(info))));
    true
}

/// `message at file:line`.
pub fn describe(info: &PanicHookInfo<'_>) -> String {
    match info.location() {
        Some(l) => format!("\"{}\" at {}:{}", payload_text(info.payload()), l.file(), l.line()),
        None => format!("\"{}\"", payload_text(info.payload())),
    }
}

/// True while a panic unwinds or a guard drops what a panicked request
/// held: a `Drop` that would otherwise leave shared state behind (an origin
/// body not released) sees it is being abandoned.
pub fn abandoned() -> bool {
    std::thread::panicking() || DISCARDING.try_with(Cell::get).unwrap_or(false)
}

pin_project_lite::pin_project! {
    /// A future polled inside `catch_unwind`: `Ok` with its output, or
    /// `Err` with the panic once it panicked (it is dropped then).
    pub struct Guarded<F> {
        #[pin]
        inner: Option<F>,
    }
}

impl<F: Future> Guarded<F> {
    pub fn new(f: F) -> Guarded<F> {
        Guarded { inner: Some(f) }
    }
}

impl<F: Future> Future for Guarded<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(f) = this.inner.as_mut().as_pin_mut() else {
            // Polled again after it finished: nothing more will come.
            return Poll::Pending;
        };
        DEPTH.with(|d| d.set(d.get() + 1));
        let r = catch_unwind(AssertUnwindSafe(|| f.poll(cx)));
        let out = match r {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.inner.set(None);
                Poll::Ready(Ok(v))
            }
            Err(payload) => {
                let text =
                    LAST.with(|s| s.borrow_mut().take()).unwrap_or_else(|| format!("\"{}\"", payload_text(&*payload)));
                // What the future held is released now; a drop that panics
                // in turn is caught too (and logged with this one's text).
                DISCARDING.with(|d| d.set(true));
                let _ = catch_unwind(AssertUnwindSafe(|| this.inner.set(None)));
                DISCARDING.with(|d| d.set(false));
                let _ = LAST.with(|s| s.borrow_mut().take());
                Poll::Ready(Err(Panic(text)))
            }
        };
        DEPTH.with(|d| d.set(d.get() - 1));
        out
    }
}

/// `SLUICE_TEST_PANIC_HEADER`, read once at start-up (lowercased): a
/// request carrying this header panics in the handler, for the tests of
/// the guards. Unset (the normal case) it costs one load per request.
static PANIC_HEADER: OnceLock<Option<String>> = OnceLock::new();

/// Reads the test hook's environment variable; called once by the master
/// before any worker starts.
pub fn init_test_hook() {
    let v = std::env::var("SLUICE_TEST_PANIC_HEADER").ok().filter(|s| !s.is_empty()).map(|s| s.to_ascii_lowercase());
    let _ = PANIC_HEADER.set(v);
}

thread_local! {
    /// The test hook asked the accept loop to panic on its next accept.
    static ACCEPT_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// Called by the accept loop after each accept: panics when the test hook
/// (value `accept`) asked for it, once; otherwise one thread-local read.
pub fn accept_hook() {
    if ACCEPT_PANIC.with(|a| a.replace(false)) {
        panic!("test hook: panic in the accept loop");
    }
}

/// Where the test hook may fire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// In the handler, before any response exists (header value anything
    /// but the names below and `task`).
    Handler,
    /// An origin's body on HTTP/1, once a piece of it went out (`body`).
    Body,
    /// After the response was sent (`after`).
    After,
}

/// The test hook: panics when the request carries the configured header
/// and its value names this stage; value `task` instead spawns a task that
/// panics on its own (outside any guard) and lets the request go on, value
/// `accept` makes the worker's accept loop panic on its next accept, and
/// `abort` and `segv` end the process as a C library's fault would.
pub fn test_hook(req: &crate::http::request::Request<'_>, stage: Stage) {
    let Some(Some(name)) = PANIC_HEADER.get() else { return };
    let Some(v) = req.header(name) else { return };
    let want = match v {
        b"after" => Stage::After,
        b"body" => Stage::Body,
        b"accept" => {
            if stage == Stage::Handler {
                ACCEPT_PANIC.with(|a| a.set(true));
            }
            return;
        }
        b"task" => {
            if stage == Stage::Handler {
                tokio::task::spawn_local(async { panic!("test hook: panic in a spawned task") });
            }
            return;
        }
        // Faults no unwinding catches, as a C library's would end the
        // process: the master's tests (`process::supervisor`).
        b"abort" if stage == Stage::Handler => std::process::abort(),
        b"segv" if stage == Stage::Handler => fatal_segv(),
        _ => Stage::Handler,
    };
    if want == stage {
        panic!("test hook: request carried {name}");
    }
}

/// Ends the process with SIGSEGV, as a fault in a C library would. Rust's
/// runtime handles SIGSEGV to report stack overflows, and a SIGSEGV sent
/// with kill() is not a fault it re-raises, so the default action is put
/// back first.
fn fatal_segv() -> ! {
    // SAFETY: plain libc calls with constant arguments; SIG_DFL is a valid
    // disposition for SIGSEGV, and raise() only sends a signal to this
    // thread, whose default action ends the process.
    unsafe {
        libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        libc::raise(libc::SIGSEGV);
    }
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_borrow_held_by_a_panicking_future_is_released() {
        let cell = RefCell::new(0u32);
        // Borrowed on the panicking poll's stack: released by unwinding.
        let mut g = std::pin::pin!(Guarded::new(async {
            let mut b = cell.borrow_mut();
            *b += 1;
            if *b == 1 {
                panic!("boom");
            }
        }));
        match poll_once(g.as_mut()) {
            Poll::Ready(Err(p)) => assert_eq!(p.0, "\"boom\""),
            _ => panic!("the panic was not caught"),
        }
        assert_eq!(*cell.borrow_mut(), 1);
        // Polled again after it finished: pending, not a second panic.
        assert!(poll_once(g.as_mut()).is_pending());
    }

    #[test]
    // The borrow across the await is the case under test.
    #[allow(clippy::await_holding_refcell_ref)]
    fn a_borrow_held_across_an_await_is_released_when_it_panics_later() {
        let cell = RefCell::new(0u32);
        let gate = Cell::new(false);
        let mut g = std::pin::pin!(Guarded::new(async {
            // Held in the future's state, not on a stack: only dropping
            // the future releases it, which the guard does at once.
            let _b = cell.borrow_mut();
            std::future::poll_fn(|_| if gate.get() { Poll::Ready(()) } else { Poll::Pending }).await;
            panic!("later");
        }));
        assert!(poll_once(g.as_mut()).is_pending());
        assert!(cell.try_borrow_mut().is_err());
        gate.set(true);
        assert!(matches!(poll_once(g.as_mut()), Poll::Ready(Err(_))));
        assert!(cell.try_borrow_mut().is_ok());
        assert!(!abandoned());
    }
}
