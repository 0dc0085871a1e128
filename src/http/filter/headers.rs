//! nginx's headers filter: `expires` and `add_header`, applied to the
//! statuses nginx applies them to unless `always` is given.

use std::borrow::Cow;

use crate::config::model::Expires;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::{ReqCtx, Vars, push_u64};
use crate::http::response::Response;

fn applies(status: u16) -> bool {
    matches!(status, 200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308)
}

fn http_date(secs: u64) -> [u8; 29] {
    let mut d = [0u8; 29];
    crate::http::date::http_date(secs, &mut d);
    d
}

fn expires<'c>(e: Expires, resp: &mut Response<'c>) {
    let now = crate::clock::now_secs() as i64;
    let (expires_at, secs) = match e {
        Expires::Off => return,
        Expires::Epoch => {
            set(resp, FieldValue::from_static(b"Thu, 01 Jan 1970 00:00:01 GMT"), FieldValue::from_static(b"no-cache"));
            return;
        }
        Expires::Max => {
            set(
                resp,
                FieldValue::from_static(b"Thu, 31 Dec 2037 23:55:55 GMT"),
                FieldValue::from_static(b"max-age=315360000"),
            );
            return;
        }
        Expires::Access(t) => (now + t, t),
        Expires::Daily(t) => {
            let Some(at) = next_time(now, t) else { return };
            (at, at - now)
        }
        Expires::Modified(t) => {
            // A proxied response's Last-Modified is one of its headers.
            let lm = resp
                .last_modified
                .or_else(|| resp.header("last-modified").and_then(crate::http::date::parse_http_date));
            let Some(lm) = lm else { return };
            let at = lm as i64 + t;
            (at, if t < 0 { t } else { at - now })
        }
    };
    let cc = if secs < 0 {
        b"no-cache".to_vec()
    } else {
        let mut v = b"max-age=".to_vec();
        push_u64(&mut v, secs as u64);
        v
    };
    set(resp, FieldValue::copy_from(&http_date(expires_at.max(0) as u64)), cc.into());
}

/// nginx's ngx_http_set_expires replaces the response's own Expires and
/// Cache-Control (an origin's), keeping none of them.
fn set(resp: &mut Response<'_>, expires: FieldValue, cache_control: FieldValue) {
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("expires") && !n.eq_ignore_ascii_case("cache-control"));
    resp.headers.push((Cow::Borrowed("Expires"), expires));
    resp.headers.push((Cow::Borrowed("Cache-Control"), cache_control));
}

/// nginx's `ngx_next_time`: today at `secs` after local midnight if that
/// is still ahead of `now`, else the same time tomorrow (in local time,
/// so across a DST change the day is 23 or 25 hours long).
fn next_time(now: i64, secs: i64) -> Option<i64> {
    use chrono::{Duration, Local, TimeZone};
    let today = Local.timestamp_opt(now, 0).single()?.date_naive();
    let at = |day: chrono::NaiveDate| {
        let t = day.and_hms_opt(0, 0, 0)? + Duration::seconds(secs);
        Local.from_local_datetime(&t).earliest().map(|d| d.timestamp())
    };
    match at(today)? {
        t if t > now => Some(t),
        _ => at(today.succ_opt()?),
    }
}

pub fn apply<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    let conf = ctx.conf;
    let ok = applies(resp.status);
    if ok && let Some(e) = conf.expires {
        expires(e, resp);
    }
    if ok && let Some((t, modified)) = &conf.expires_var {
        let v = t.render_to_vec(&Vars { resp: Some(resp), ..Vars::request(ctx) });
        let text = String::from_utf8_lossy(&v);
        // A value this build cannot parse (nginx: an error) sets nothing.
        match crate::config::set_loc::parse_expires(text.trim(), *modified) {
            Ok(e) => expires(e, resp),
            Err(_) => crate::log_req!(ctx, crate::log::error::Level::Error, "invalid \"expires\" value \"{}\"", text),
        }
    }
    if conf.add_headers.is_empty() {
        return;
    }
    // Each field is added before the next is rendered: a later one may
    // read it (`$sent_http_NAME`).
    for h in &conf.add_headers {
        if !(ok || h.always) {
            continue;
        }
        let in_flight = matches!(resp.body, crate::http::response::Body::Upstream(_));
        let v = h.value.render_to_vec(&Vars { resp: Some(resp), in_flight, ..Vars::request(ctx) });
        if replaces(resp, &h.name, &v) {
            continue;
        }
        if !v.is_empty() {
            resp.headers.push((Cow::Borrowed(h.name.as_str()), v.into()));
        }
    }
}

/// The ETag and Last-Modified a 200 response will carry once add_header
/// has run: nginx's range filter runs after the headers filter, so
/// `If-Range` is compared with them. Each is `None` when add_header does
/// not set it (the response's own stays).
#[allow(clippy::type_complexity)]
pub fn validators_added(ctx: &ReqCtx<'_, '_>) -> (Option<Option<Vec<u8>>>, Option<Option<u64>>) {
    let (mut etag, mut modified) = (None, None);
    for h in &ctx.conf.add_headers {
        let is_etag = h.name.eq_ignore_ascii_case("etag");
        if !is_etag && !h.name.eq_ignore_ascii_case("last-modified") {
            continue;
        }
        let v = h.value.render_to_vec(&Vars::request(ctx));
        if is_etag {
            etag = Some((!v.is_empty()).then_some(v));
        } else {
            modified = Some(crate::http::date::parse_http_date(&v));
        }
    }
    (etag, modified)
}

/// nginx's add_header sets ETag and Last-Modified in place of the
/// response's own (ngx_http_set_response_header): the last one given wins,
/// and an empty value removes the header. Returns false for other names.
fn replaces(resp: &mut Response<'_>, name: &str, v: &[u8]) -> bool {
    let etag = name.eq_ignore_ascii_case("etag");
    if !etag && !name.eq_ignore_ascii_case("last-modified") {
        return false;
    }
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    if etag {
        resp.etag = None;
    } else {
        resp.last_modified = None;
    }
    if v.is_empty() {
        return true;
    }
    // The writer sends the response's own validators on 200/206/304 only;
    // on other statuses (with `always`) the value goes out as given.
    let validators = matches!(resp.status, 200 | 206 | 304);
    let time = if etag || !validators { None } else { crate::http::date::parse_http_date(v) };
    if etag && validators {
        resp.etag = Some(v.to_vec());
    } else if time.is_some() {
        resp.last_modified = time;
    } else {
        resp.headers.push((Cow::Owned(name.to_string()), v.to_vec().into()));
    }
    true
}

/// Whether add_trailer gives this response trailers (nginx's
/// `r->expect_trailers`): a field applies to the status, or is `always`.
/// The connection layer then frames the body so trailers can follow
/// (chunked on HTTP/1.1) and calls `trailers` once the body has ended.
pub fn expects_trailers(ctx: &ReqCtx<'_, '_>, status: u16) -> bool {
    let ok = applies(status);
    ctx.conf.add_trailers.iter().any(|t| ok || t.always)
}

/// add_trailer's fields, rendered after the body (so `$msec` or
/// `$upstream_response_length` are the final ones) in order: each may read
/// the ones before through `$sent_trailer_NAME`. Empty values are left out.
pub fn trailers<'c>(ctx: &mut ReqCtx<'c, '_>, resp: &Response<'c>) {
    let ok = applies(resp.status);
    let conf = ctx.conf;
    for t in &conf.add_trailers {
        if !(ok || t.always) {
            continue;
        }
        let v = t.value.render_to_vec(&Vars { resp: Some(resp), ..Vars::request(ctx) });
        // A line break from a variable would end the field early.
        if !v.is_empty() && !v.iter().any(|&b| b == b'\r' || b == b'\n') {
            ctx.trailers.push((t.name.clone(), v));
        }
    }
}

/// An origin's trailers (gRPC's `grpc-status`) go out first, ahead of
/// add_trailer's own, when add_trailer ends the body.
pub fn origin_trailers(ctx: &mut ReqCtx<'_, '_>, body: &mut crate::http::response::Body) {
    if let crate::http::response::Body::Upstream(up) = body
        && let Some(map) = up.trailers.take()
    {
        for (n, v) in map.iter() {
            ctx.trailers.push((String::from_utf8_lossy(n).into_owned(), v.to_vec()));
        }
    }
}

/// The end of a chunked body with its trailer section: the last chunk,
/// each field, the blank line.
pub fn chunked_end(ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (n, v) in &ctx.trailers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}
