//! The charset module's header filter, nginx's
//! ngx_http_charset_header_filter: which charset a response is sent in
//! (`charset`, an origin's `X-Accel-Charset`), which one its body is in
//! (the charset its Content-Type names, else `source_charset`), and when
//! they differ and a `charset_map` joins them, a [`Recoder`] stage in the
//! body. A byte-for-byte recoding keeps the length (and so Content-Length
//! and ranges); one to or from UTF-8 does not, so the length goes and
//! ranges with it, as nginx's `ngx_http_clear_content_length`.

use std::borrow::Cow;

use super::Name;
use super::map::Recode;
use super::recode::Recoder;
use crate::http::filter::compress::stream::Compressed;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_to;

/// What the filter does to a response.
pub struct Decision {
    /// The Content-Type to send.
    pub content_type: String,
    pub recode: Option<Recode>,
}

/// A Content-Type's part before its `charset=` parameter, and the
/// parameter's value (quotes off), as nginx's upstream module splits it.
pub fn split_charset(ct: &str) -> (&str, Option<&str>) {
    let b = ct.as_bytes();
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b';') {
        let semi = i + off;
        let mut p = semi + 1;
        while p < b.len() && b[p] == b' ' {
            p += 1;
        }
        if b.len() - p >= 8 && b[p..p + 8].eq_ignore_ascii_case(b"charset=") {
            let mut v = &ct[p + 8..];
            v = v.strip_prefix('"').unwrap_or(v);
            v = v.strip_suffix('"').unwrap_or(v);
            return (&ct[..semi], Some(v));
        }
        i = semi + 1;
    }
    (ct, None)
}

fn render(name: &Name, ctx: &ReqCtx<'_, '_>, resp: &Response<'_>) -> Option<String> {
    match name {
        Name::Fixed(n) => Some(n.to_string()),
        Name::Var(t) => {
            let vars = Vars { resp: Some(resp), ..Vars::request(ctx) };
            let v = String::from_utf8_lossy(&t.render_to_vec(&vars)).into_owned();
            (!v.is_empty()).then_some(v)
        }
    }
}

/// The filter's decision for `resp` (None: it is left alone). `log`:
/// write nginx's error-log lines for a charset with no map or an unknown
/// one (once per response: the range code asks ahead without).
pub fn decide(ctx: &ReqCtx<'_, '_>, resp: &Response<'_>, log: bool) -> Option<Decision> {
    let conf = &ctx.conf.charset;
    // nginx's subrequests take the main request's charset; sluice leaves
    // their responses alone (see docs/configuration.md).
    if ctx.subrequest {
        return None;
    }
    let ct = resp.content_type.as_deref().filter(|c| !c.is_empty())?;
    // A multipart/byteranges answer was decided when its parts were made
    // (nginx's range filter runs after this one).
    // (Bytes: an origin's type may hold any character.)
    if resp.status == 206 && ct.as_bytes().get(..20).is_some_and(|p| p.eq_ignore_ascii_case(b"multipart/byteranges")) {
        return None;
    }
    let (base, named) = split_charset(ct);
    let dst = match ctx.override_charset.as_deref().filter(|o| !o.is_empty()) {
        Some(o) => {
            if !conf.known(o) {
                if log {
                    log_to!(ctx.conf.error_log, Level::Error, "*{} unknown charset \"{}\" to override", ctx.conn.id, o);
                }
                return None;
            }
            o.to_string()
        }
        None => {
            let name = conf.charset.as_ref()?;
            if named.is_some() {
                if !conf.override_charset {
                    return None;
                }
            } else if !crate::http::filter::type_listed(&conf.types, ct.split(';').next().unwrap_or("").trim()) {
                return None;
            }
            render(name, ctx, resp)?
        }
    };
    // nginx names no charset on a 301 or 302 (old browsers took it for
    // the next page's).
    let content_type =
        if matches!(resp.status, 301 | 302) { base.to_string() } else { format!("{base}; charset={dst}") };
    let src = match named {
        Some(s) => s.to_string(),
        None => match &conf.source {
            // `source_charset off`: the charset is only named.
            None => return Some(Decision { content_type, recode: None }),
            Some(n) => render(n, ctx, resp)?,
        },
    };
    if src.eq_ignore_ascii_case(&dst) {
        return Some(Decision { content_type, recode: None });
    }
    let Some(table) = conf.maps.recode(&src, &dst) else {
        if log {
            log_to!(
                ctx.conf.error_log,
                Level::Error,
                "*{} no \"charset_map\" between the charsets \"{}\" and \"{}\"",
                ctx.conn.id,
                src,
                dst
            );
        }
        return None;
    };
    // An encoded body cannot be recoded: it goes as it is.
    if resp.header("content-encoding").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    Some(Decision { content_type, recode: Some(table) })
}

/// The header filter (from `handler::finish` and `finish_proxied`, after
/// gunzip and before the sub filter).
pub fn apply(ctx: &ReqCtx<'_, '_>, resp: &mut Response<'_>) {
    let Some(d) = decide(ctx, resp, true) else { return };
    resp.content_type = Some(Cow::Owned(d.content_type));
    if let Some(r) = d.recode {
        install(resp, r);
    }
}

/// Puts the recoding stage in the body: a byte-for-byte one keeps the
/// length, one to or from UTF-8 drops it, and ranges with it.
pub fn install(resp: &mut Response<'_>, r: Recode) {
    let changes = r.changes_length();
    let stage = Box::new(Recoder::new(r));
    let len = resp.body.known_len();
    match &mut resp.body {
        Body::Static(_)
        | Body::Owned(_)
        | Body::Shared(_)
        | Body::File { .. }
        | Body::Upstream(_)
        | Body::Multipart { .. } => {
            let inner = std::mem::replace(&mut resp.body, Body::Empty);
            let mut z = Compressed::recoding(inner, stage);
            z.declared_len = if changes { None } else { len };
            resp.body = Body::Compressed(Box::new(z));
        }
        // The gunzip module's or the slice module's stream.
        Body::Compressed(z) if z.coding.is_none() => {
            z.add_charset(stage);
            if changes {
                z.declared_len = None;
            }
        }
        _ => {}
    }
    if changes {
        resp.accept_ranges = false;
        resp.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges") && !n.eq_ignore_ascii_case("content-length"));
    }
}

/// Whether the filter will recode this response to or from UTF-8 (its
/// length then is unknown, so no range can be served: nginx's range filter
/// runs after this one).
pub fn changes_length(ctx: &ReqCtx<'_, '_>, resp: &Response<'_>) -> bool {
    decide(ctx, resp, false).and_then(|d| d.recode).is_some_and(|r| r.changes_length())
}

#[cfg(test)]
mod tests {
    use super::split_charset;

    #[test]
    fn the_charset_parameter_is_found_as_nginx_does() {
        assert_eq!(split_charset("text/html"), ("text/html", None));
        assert_eq!(split_charset("text/html; charset=B"), ("text/html", Some("B")));
        assert_eq!(split_charset("text/html;charset=\"koi8-r\""), ("text/html", Some("koi8-r")));
        assert_eq!(split_charset("text/html; q=1;  Charset=x"), ("text/html; q=1", Some("x")));
        assert_eq!(split_charset("text/html; q=1"), ("text/html; q=1", None));
        assert_eq!(split_charset("текст/html;charset="), ("текст/html", Some("")));
    }
}
