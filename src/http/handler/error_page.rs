//! `error_page`: replaces a generated error response by an internal
//! redirect (URI or named location) or an external redirect. With nginx's
//! default `recursive_error_pages off`, an error while serving the error
//! page is sent as is; with `on`, the location that produced it may
//! redirect it again (within the 10 internal redirects nginx allows).

use std::borrow::Cow;

use super::ctx::{ReqCtx, Vars};
use super::try_files::split_uri;
use super::{Step, ret};
use crate::config::model::ErrorTarget;
use crate::http::request::Method;
use crate::http::response::Response;

pub fn apply<'c>(ctx: &mut ReqCtx<'c, '_>, resp: Response<'c>) -> Response<'c> {
    let status = resp.status;
    let Some(ep) = ctx.conf.error_pages.iter().find(|e| e.codes.contains(&status)) else {
        return resp;
    };
    let step = match &ep.target {
        ErrorTarget::Redirect(t) => {
            let url = t.render_to_vec(&Vars::request(ctx));
            let code = ep.overwrite.unwrap_or(302);
            let mut r = ret::redirect(ctx, code, &url);
            r.is_error_page = false;
            return r;
        }
        ErrorTarget::Uri(t) => {
            let uri = t.render_to_vec(&Vars::request(ctx));
            // nginx decides on the value: one that is not a path (`error_page
            // 502 redirect;`, a variable holding a URL) is sent as a redirect,
            // 302 unless `=` names another redirect status.
            if !uri.starts_with(b"/") {
                let code = ep.overwrite.filter(|c| matches!(c, 301 | 302 | 303 | 307 | 308)).unwrap_or(302);
                let mut r = ret::redirect(ctx, code, &uri);
                r.is_error_page = false;
                return r;
            }
            split_uri(uri)
        }
        ErrorTarget::Named(n) => Step::Named(n),
    };
    // `=` alone keeps whatever the error page returns; `=code` forces it.
    let forced = match ep.overwrite {
        None => Some(status),
        Some(0) => None,
        Some(c) => Some(c),
    };
    ctx.err_status = Some(forced.unwrap_or(0));
    // A page by URI is fetched with GET (HEAD stays HEAD); a named location
    // gets the request as it came, method and all, as in nginx.
    if matches!(step, Step::Redirect(..)) && ctx.req.method != Method::Head {
        ctx.req.method = Method::Get;
    }
    ctx.redirects += 1;
    if ctx.redirects > super::MAX_REDIRECTS {
        crate::log_req!(
            ctx,
            crate::log::error::Level::Error,
            "rewrite or internal redirection cycle while processing error_page for \"{}\"",
            String::from_utf8_lossy(&ctx.req.path)
        );
        return super::error(ctx, 500);
    }
    if !matches!(step, Step::Done(_)) {
        // An internal redirect clears the modules' request state (nginx
        // zeroes r->ctx): the new location's auth_request asks again.
        ctx.auth = Default::default();
    }
    let mut r = match step {
        Step::Redirect(uri, args) => {
            ctx.req.path = Cow::Owned(uri);
            // nginx: the error page's own arguments, or none.
            ctx.req.args = args.map(Cow::Owned);
            ctx.filename = None;
            super::route(ctx, None)
        }
        Step::Named(n) => super::route(ctx, Some(n)),
        Step::Done(r) => r,
    };
    if r.is_error_page && ctx.conf.core.recursive_error_pages {
        // The error page failed: the new location's error_page decides,
        // and the status is its.
        let close = resp.close;
        let mut again = apply(ctx, r);
        again.close |= close;
        return again;
    }
    // A generated error on the way (a `deny` in the page's location, a
    // missing page) is nginx's new r->err_status: it is what goes out.
    if let Some(s) = forced
        && !r.is_error_page
    {
        r.status = s;
    }
    r.close |= resp.close;
    keep_www_authenticate(&resp, &mut r);
    // Likewise the Location of a `return 3xx` (r->headers_out.location).
    if r.location.is_none() {
        r.location = resp.location;
    }
    r
}

/// nginx keeps the response headers set so far across the error page's
/// internal redirect: auth_basic's `WWW-Authenticate` goes out with the
/// page a 401 was redirected to.
pub fn keep_www_authenticate<'c>(from: &Response<'c>, to: &mut Response<'c>) {
    if to.header("www-authenticate").is_some() {
        return;
    }
    let all = from.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"));
    to.headers.extend(all.cloned());
}
