//! nginx's `stub_status`: the server's connection and request counts in
//! nginx's exact text, so existing scrapers (the nginx Prometheus
//! exporter, monitoring plugins) read sluice unchanged. The counts are the
//! sum of every worker's ([`crate::worker::stats`]).

use std::borrow::Cow;

use super::ctx::ReqCtx;
use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::Directive;
use crate::config::table::{Cmd, LOC, R, SRV, Set, cmd};
use crate::http::request::Method;
use crate::http::response::{Body, Response};

/// `stub_status;` (the old `stub_status on;` spelling too).
pub static DIRECTIVES: &[Cmd] = &[cmd("stub_status", SRV | LOC, 0, 1, Set::Loc(stub_status))];

fn stub_status(c: &mut LocConf, _: &Directive, _: &mut Ctx) -> R {
    c.stub_status = true;
    Ok(())
}

/// nginx's text, trailing spaces included.
pub fn text(t: &crate::worker::stats::Totals) -> String {
    format!(
        "Active connections: {} \nserver accepts handled requests\n {} {} {} \nReading: {} Writing: {} Waiting: {} \n",
        t.active, t.accepts, t.handled, t.requests, t.reading, t.writing, t.waiting
    )
}

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>) -> Response<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return super::error(ctx, 405);
    }
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/plain"));
    r.body = Body::Owned(text(&crate::worker::stats::totals()).into_bytes());
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn nginx_text() {
        let t = crate::worker::stats::Totals {
            active: 291,
            accepts: 16630948,
            handled: 16630948,
            requests: 31070465,
            reading: 6,
            writing: 179,
            waiting: 106,
        };
        assert_eq!(
            super::text(&t),
            "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n"
        );
    }
}
