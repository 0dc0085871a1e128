//! nginx's request and connection limits: `limit_req` (`req`: a leaky
//! bucket per key), `limit_conn` (`conn`: requests in progress per key) and
//! their zones (`zone`: shared by every worker and kept across reloads),
//! with the directives in `conf`, and `limit_rate` (`rate`).
//!
//! They run in nginx's preaccess phase ([`preaccess`], called by the
//! handler once the location is final: after the rewrite phases, before
//! access checks, `try_files` and content, proxied locations included):
//! limit_req first, then limit_conn, as nginx orders their handlers. Each
//! applies once per request: a request that an internal redirect brings to
//! another location is not counted again (nginx's `r->main->limit_req_status`
//! and `limit_conn_status`).
//!
//! A delay cannot be slept inside the handler, which is synchronous (it
//! returns a `Response`); blocking there would stall the worker's event
//! loop and every connection on it. So `preaccess` records the wait in the
//! request's context and the handler returns at once; the connection layer
//! (or `proxy::accel` for an X-Accel-Redirect) sees [`Limits::delay`], and
//! [`wait`] sleeps on a tokio timer and resumes the pipeline where it
//! stopped, as nginx re-runs the phase handlers from the write event of
//! its timer: limit_req then passes (its status is set), limit_conn and the
//! rest of the location run.

pub mod conf;
pub mod conn;
pub mod rate;
pub mod req;
pub mod zone;

pub use conf::{DIRECTIVES, LimitConf};

use std::time::Duration;

use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::Response;
use crate::variables::Template;

/// `$limit_req_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ReqStatus {
    /// Not limited (no limit_req, or every key empty): the variable is
    /// not found, logged as `-`.
    #[default]
    None,
    Passed,
    Delayed,
    Rejected,
    DelayedDryRun,
    RejectedDryRun,
}

impl ReqStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReqStatus::None => "",
            ReqStatus::Passed => "PASSED",
            ReqStatus::Delayed => "DELAYED",
            ReqStatus::Rejected => "REJECTED",
            ReqStatus::DelayedDryRun => "DELAYED_DRY_RUN",
            ReqStatus::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// `$limit_conn_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ConnStatus {
    #[default]
    None,
    Passed,
    Rejected,
    RejectedDryRun,
}

impl ConnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnStatus::None => "",
            ConnStatus::Passed => "PASSED",
            ConnStatus::Rejected => "REJECTED",
            ConnStatus::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// A request's dealings with the limits (`ReqCtx::limit`).
#[derive(Default)]
pub struct Limits {
    pub req_status: ReqStatus,
    pub conn_status: ConnStatus,
    /// Set by limit_req: the pipeline stopped here and waits this long
    /// before going on ([`wait`]).
    pub delay: Option<Duration>,
    /// The request's places in limit_conn zones, given back when the
    /// request's context is dropped (after its access log line).
    pub holds: Vec<conn::Hold>,
    /// The origin's `X-Accel-Limit-Rate`: the response's rate from then
    /// on, over the location's `limit_rate` (also after an
    /// `X-Accel-Redirect`), as nginx's `r->limit_rate_set`.
    pub accel_rate: Option<u64>,
}

/// A zone's key for this request.
fn key_of(ctx: &ReqCtx<'_, '_>, key: &Template, out: &mut Vec<u8>) {
    key.render(&Vars::request(ctx), out);
}

/// nginx's preaccess phase for the location in `ctx.conf`: None to go on;
/// else the response to give (a refusal, or with [`Limits::delay`] set, a
/// stand-in the caller replaces after [`wait`]).
pub fn preaccess<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Response<'c>> {
    let conf = ctx.conf;
    let lc = &conf.limit;
    if !lc.req.is_empty() && ctx.limit.req_status == ReqStatus::None {
        match req::check(ctx, lc) {
            req::Verdict::Pass => {}
            req::Verdict::Reject(status) => return Some(crate::http::handler::error(ctx, status)),
            // An error page's own location does not wait: the error
            // response is already due (sluice's simplification).
            req::Verdict::Delay(_) if ctx.err_status.is_some() => {}
            req::Verdict::Delay(d) => {
                ctx.limit.delay = Some(d);
                return Some(Response::new(200));
            }
        }
    }
    if !lc.conn.is_empty()
        && ctx.limit.conn_status == ConnStatus::None
        && let Some(status) = conn::check(ctx, lc)
    {
        return Some(crate::http::handler::error(ctx, status));
    }
    None
}

/// Sleeps the delay limit_req asked for without holding up the worker (a
/// tokio timer; the connection's task simply is not polled meanwhile),
/// then runs the rest of the pipeline: the response that replaces
/// `resp`, the stand-in `preaccess` returned.
pub async fn wait<'c>(ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>) -> Response<'c> {
    while let Some(d) = ctx.limit.delay.take() {
        let at = crate::clock::mono() + d;
        tokio::time::sleep_until(at.into()).await;
        crate::clock::mono_stale();
        resp = crate::http::handler::resume(ctx);
    }
    resp
}
