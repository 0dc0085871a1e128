//! `X-Accel-Redirect` from an origin (HTTP or FastCGI), as nginx's upstream
//! module handles it: the origin's response is dropped (its connection
//! closed), the request is redirected internally to the URI or named
//! location the header gives (usually an `internal` location serving a
//! protected file), and the few fields nginx carries over from the origin's
//! response (`Content-Type`, which wins over the file's, `Set-Cookie`,
//! `Content-Disposition`, `Cache-Control`, `Expires`, `Accept-Ranges`) are added to whatever
//! that location answers. Off with
//! `proxy_ignore_headers X-Accel-Redirect` (or the fastcgi_ spelling).

use std::borrow::Cow;

use super::request_body::Client;
use super::response_head::ResponseHead;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};
use crate::worker::WorkerCtx;

/// The fields nginx copies onto the redirected request's response (its
/// upstream header table's `redirect` flag).
const CARRIED: [&str; 5] = ["set-cookie", "content-disposition", "cache-control", "expires", "accept-ranges"];

pub struct Carried {
    content_type: Option<Cow<'static, str>>,
    fields: Vec<(Cow<'static, str>, FieldValue)>,
}

/// The origin's fields, and its X-Accel-Redirect, for `$upstream_http_*`.
pub fn remember(ctx: &mut ReqCtx<'_, '_>, head: &ResponseHead, to: &[u8]) {
    let mut fields = head.headers.clone();
    fields.push((Cow::Borrowed("X-Accel-Redirect"), FieldValue::copy_from(to)));
    if let Some(t) = &head.content_type {
        fields.push((Cow::Borrowed("Content-Type"), FieldValue::copy_from(t.as_bytes())));
    }
    ctx.upstream.redirected_by = Some(fields);
}

pub fn carried(head: &ResponseHead) -> Carried {
    Carried {
        content_type: head.content_type.clone(),
        fields: head
            .headers
            .iter()
            .filter(|(n, _)| CARRIED.iter().any(|c| n.eq_ignore_ascii_case(c)))
            .cloned()
            .collect(),
    }
}

/// Runs the redirect; a location that proxies again goes back through
/// [`super::respond`].
pub async fn redirect<'c>(
    w: &WorkerCtx,
    ctx: &mut ReqCtx<'c, '_>,
    client: &mut Client<'_>,
    to: &[u8],
    carried: Carried,
) -> Response<'c> {
    // The first origin's cache state and target do not carry over.
    ctx.cache = None;
    ctx.cache_status = None;
    ctx.proxy_pass = None;
    let mut r = crate::http::handler::internal_redirect(ctx, to);
    if crate::http::handler::suspended(ctx) {
        r = crate::http::handler::complete(w, ctx, r).await;
    }
    if matches!(r.body, Body::Proxy) {
        r = Box::pin(super::respond(w, ctx, client)).await;
    }
    if carried.content_type.is_some() && r.content_type.is_some() {
        r.content_type = carried.content_type;
    }
    // The origin's Accept-Ranges replaces the page's own.
    if carried.fields.iter().any(|(n, _)| n.eq_ignore_ascii_case("accept-ranges")) {
        r.accept_ranges = false;
    }
    r.headers.extend(carried.fields);
    r
}
