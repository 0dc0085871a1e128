//! Answering from a stored entry (a hit, or a stale entry when the origin
//! fails): the entry's status and headers, then what nginx's filters do to
//! a cached response: `If-None-Match`/`If-Modified-Since` give 304 and
//! `If-Match`/`If-Unmodified-Since` 412 against the stored `ETag` and
//! `Last-Modified`, and `Range` is served from the whole stored body (the
//! origin was asked for the whole representation).

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;

use super::entry::Meta;
use super::memory::MemEntry;
use super::store::Found;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::handler::open_cache::OpenFile;
use crate::http::range::{self, RangeResult};
use crate::http::response::{Body, Response};

/// Where the stored body is.
enum Stored {
    /// The entry file, with the body at this offset.
    File(Rc<OpenFile>, u64),
    Memory(Bytes),
}

/// Header names entries usually hold, so a hit allocates no name.
fn static_name(n: &str) -> Cow<'static, str> {
    const NAMES: [&str; 12] = [
        "ETag",
        "Last-Modified",
        "Cache-Control",
        "Expires",
        "Vary",
        "Accept-Ranges",
        "Content-Encoding",
        "Location",
        "Content-Language",
        "Content-Disposition",
        "Link",
        "Age",
    ];
    match NAMES.iter().find(|k| **k == n) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(n.to_string()),
    }
}

/// The stored response; the stored `X-Accel-Charset` goes to the
/// charset filter.
fn head<'c>(ctx: &mut ReqCtx<'c, '_>, meta: &Meta) -> Response<'c> {
    ctx.override_charset = None;
    let mut r = Response::new(meta.status);
    r.content_type = meta.content_type.clone().map(Cow::Owned);
    r.headers = Vec::with_capacity(meta.headers.len());
    for (n, v) in &meta.headers {
        if n == super::serve::ACCEL_CHARSET {
            ctx.override_charset = Some(String::from_utf8_lossy(v).into_owned());
        } else {
            r.headers.push((static_name(n), FieldValue::copy_from(v)));
        }
    }
    r
}

pub fn from_memory<'c>(ctx: &mut ReqCtx<'c, '_>, e: Arc<MemEntry>) -> Response<'c> {
    answer(ctx, &e.meta, Stored::Memory(e.body.clone()))
}

/// An entry read from disk, its body sent from the file (sendfile on plain
/// connections).
pub fn from_file<'c>(ctx: &mut ReqCtx<'c, '_>, found: Found) -> Response<'c> {
    let mtime = (found.meta.stored.max(0) / 1_000_000) as u64;
    let file = Rc::new(OpenFile::from_file(found.file, found.file_len, mtime));
    answer(ctx, &found.meta, Stored::File(file, found.body_at))
}

/// An entry file this worker keeps open (see `serve::open_entry`).
pub fn from_open<'c>(ctx: &mut ReqCtx<'c, '_>, file: Rc<OpenFile>, meta: &Meta, body_at: u64) -> Response<'c> {
    answer(ctx, meta, Stored::File(file, body_at))
}

fn answer<'c>(ctx: &mut ReqCtx<'c, '_>, meta: &Meta, stored: Stored) -> Response<'c> {
    let mut r = head(ctx, meta);
    let len = meta.body_len;
    let ranges_ok = allow_ranges(&mut r, force_ranges(ctx));
    if r.status == 200 && ctx.err_status.is_none() && !ctx.subrequest {
        let (etag, modified) = match conditions(ctx, &mut r) {
            Ok(v) => v,
            Err(304) => return crate::http::handler::finish_proxied(ctx, r),
            Err(status) => return crate::http::handler::finish_error(ctx, status),
        };
        if ranges_ok
            && let Some(h) = ctx.req.header("range")
            && crate::http::handler::static_file::if_range_ok(ctx, etag.as_deref(), modified)
            && !crate::http::charset::filter::changes_length(ctx, &r)
        {
            match range::parse_range(h, len, ctx.conf.core.max_ranges) {
                RangeResult::Ignore => {}
                RangeResult::Unsatisfiable => {
                    let mut e = crate::http::handler::error(ctx, 416);
                    let mut cr = Vec::with_capacity(24);
                    range::unsatisfied_range(len, &mut cr);
                    e.content_range = Some(cr);
                    return crate::http::handler::finish_proxied(ctx, e);
                }
                RangeResult::Satisfiable(ranges) => {
                    ranged(ctx, &mut r, &ranges, len, &stored);
                    return crate::http::handler::finish_proxied(ctx, r);
                }
            }
        }
    }
    r.body = match stored {
        Stored::File(file, at) => Body::File { file, offset: at, len },
        Stored::Memory(b) => Body::Shared(b),
    };
    crate::http::handler::finish_proxied(ctx, r)
}

/// nginx serves ranges of a proxied response (cached or being cached)
/// only when the origin said `Accept-Ranges` or `*_force_ranges` is on;
/// the header then comes from the range filter (`Accept-Ranges: bytes`,
/// unless a range is answered).
fn allow_ranges(r: &mut Response<'_>, force: bool) -> bool {
    let before = r.headers.len();
    r.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    r.accept_ranges = force || r.headers.len() != before;
    r.accept_ranges
}

fn force_ranges(ctx: &ReqCtx<'_, '_>) -> bool {
    crate::http::proxy::up_conf(ctx.conf).force_ranges
}

/// The stored validators, after the client's conditions: Err(304) with
/// `r` turned into the 304 (no type, no Accept-Ranges), Err(412).
fn conditions(ctx: &ReqCtx<'_, '_>, r: &mut Response<'_>) -> Result<(Option<Vec<u8>>, Option<u64>), u16> {
    // The usual hit has no condition: then the stored validators are not
    // needed, and the Last-Modified date is not parsed.
    // (One pass over the names: every conditional header starts "If-".)
    if !ctx.req.headers().any(|(n, _)| n.len() > 3 && n[..3].eq_ignore_ascii_case(b"if-")) {
        return Ok((None, None));
    }
    let etag = r.header("etag").map(<[u8]>::to_vec);
    let modified = r.header("last-modified").and_then(crate::http::date::parse_http_date);
    match crate::http::handler::static_file::precondition(ctx, etag.as_deref(), modified) {
        Some(304) => {
            r.status = 304;
            r.content_type = None;
            r.accept_ranges = false;
            Err(304)
        }
        Some(status) => Err(status),
        None => Ok((etag, modified)),
    }
}

/// A 206 of one range, or multipart/byteranges of several.
fn ranged(ctx: &ReqCtx<'_, '_>, r: &mut Response<'_>, ranges: &[range::ByteRange], len: u64, stored: &Stored) {
    r.status = 206;
    r.accept_ranges = false;
    // The origin's own Content-Range (stored with the entry) is not the
    // range answered: nginx's range filter replaces it.
    r.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-range"));
    if let [br] = ranges {
        let mut cr = Vec::with_capacity(40);
        range::content_range(*br, len, &mut cr);
        r.content_range = Some(cr);
        r.body = match stored {
            Stored::File(file, at) => {
                Body::File { file: file.clone(), offset: at + br.start, len: br.end - br.start + 1 }
            }
            Stored::Memory(b) => Body::Shared(b.slice(br.start as usize..=br.end as usize)),
        };
        return;
    }
    let boundary = range::Boundary::new(crate::clock::unix_now_ms()).as_str().to_string();
    // The parts name the charset the charset filter sends (nginx's range
    // filter runs after it), and are recoded with the ranges.
    let charset = crate::http::charset::decide(ctx, r, true);
    let ct = match &charset {
        Some(d) => d.content_type.as_bytes().to_vec(),
        None => r.content_type.as_deref().unwrap_or("").as_bytes().to_vec(),
    };
    let parts: Vec<(Vec<u8>, range::ByteRange)> = ranges
        .iter()
        .map(|br| {
            let mut h = Vec::with_capacity(96);
            range::multipart_part_header(&boundary, &ct, *br, len, &mut h);
            (h, *br)
        })
        .collect();
    let mut trailer = Vec::with_capacity(32);
    range::multipart_trailer(&boundary, &mut trailer);
    r.content_type = Some(Cow::Owned(format!("multipart/byteranges; boundary={boundary}")));
    r.body = match stored {
        Stored::File(file, at) => Body::Multipart {
            file: file.clone(),
            parts: parts
                .into_iter()
                .map(|(h, br)| (h, range::ByteRange { start: br.start + at, end: br.end + at }))
                .collect(),
            trailer,
        },
        Stored::Memory(b) => {
            let mut out = Vec::new();
            for (h, br) in parts {
                out.extend_from_slice(&h);
                out.extend_from_slice(&b[br.start as usize..=br.end as usize]);
            }
            out.extend_from_slice(&trailer);
            Body::Owned(out)
        }
    };
    if let Some(rec) = charset.and_then(|d| d.recode) {
        crate::http::charset::install(r, rec);
    }
}

/// The same filters for a response that is being stored as it streams (a
/// miss): 304 keeps the origin body flowing into the entry behind an empty
/// answer, and a single range of a body of known length is cut out of the
/// stream (several ranges get the whole body). Some(status) for a 412/416.
pub fn on_miss(
    ctx: &ReqCtx<'_, '_>,
    r: &mut Response<'_>,
    body: &mut crate::http::proxy::body::UpstreamBody,
) -> Option<u16> {
    if r.status != 200 || ctx.err_status.is_some() {
        return None;
    }
    let ranges_ok = allow_ranges(r, force_ranges(ctx));
    let (etag, modified) = match conditions(ctx, r) {
        Ok(v) => v,
        Err(304) => return None,
        Err(status) => return Some(status),
    };
    if !ranges_ok {
        return None;
    }
    window(ctx, r, body, etag.as_deref(), modified)
}

/// `*_force_ranges` on a response that is not cached: the range filter
/// cuts one range out of the origin's 200 (several ranges get the whole
/// body), after `If-Range`; no 304 (nginx's not-modified filter skips
/// uncacheable upstream answers). Some(416) for a range past the end.
pub fn forced(
    ctx: &ReqCtx<'_, '_>,
    r: &mut Response<'_>,
    body: &mut crate::http::proxy::body::UpstreamBody,
) -> Option<u16> {
    if r.status != 200 || ctx.err_status.is_some() || ctx.subrequest || !force_ranges(ctx) {
        return None;
    }
    allow_ranges(r, true);
    ctx.req.header("range")?;
    let etag = r.header("etag").map(<[u8]>::to_vec);
    let modified = r.header("last-modified").and_then(crate::http::date::parse_http_date);
    window(ctx, r, body, etag.as_deref(), modified)
}

/// One satisfiable range of a streamed body of known length becomes the
/// body's window and a 206.
fn window(
    ctx: &ReqCtx<'_, '_>,
    r: &mut Response<'_>,
    body: &mut crate::http::proxy::body::UpstreamBody,
    etag: Option<&[u8]>,
    modified: Option<u64>,
) -> Option<u16> {
    let len = body.known_len()?;
    let h = ctx.req.header("range")?;
    if !crate::http::handler::static_file::if_range_ok(ctx, etag, modified)
        || crate::http::charset::filter::changes_length(ctx, r)
    {
        return None;
    }
    match range::parse_range(h, len, ctx.conf.core.max_ranges) {
        RangeResult::Ignore => None,
        RangeResult::Unsatisfiable => Some(416),
        RangeResult::Satisfiable(ranges) => {
            if let [br] = ranges[..] {
                r.status = 206;
                r.accept_ranges = false;
                r.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-range"));
                let mut cr = Vec::with_capacity(40);
                range::content_range(br, len, &mut cr);
                r.content_range = Some(cr);
                body.window = Some((br.start, br.end - br.start + 1));
            }
            None
        }
    }
}
