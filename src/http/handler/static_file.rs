//! Static files: URI to path mapping (root/alias), MIME type, redirects for
//! directories, and the 200/206/304/412/416 responses with nginx's ETag,
//! Last-Modified and Accept-Ranges.

use std::borrow::Cow;
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

use super::ctx::{ReqCtx, Vars};
use super::open_cache::{self, OpenError, OpenFile};
use super::{Step, error};
use crate::config::model::{IfModifiedSince, LocConf};
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::http::{date, etag, range};
use crate::log::error::Level;
use crate::log_req;

/// `root` + URI, or `alias` + the URI past the location's path.
pub fn map_path(ctx: &ReqCtx<'_, '_>, uri: &[u8], out: &mut Vec<u8>) {
    let root = &ctx.conf.root;
    match &root.template {
        Some(t) => t.render(&Vars::request(ctx), out),
        None => out.extend_from_slice(root.path.as_bytes()),
    }
    match root.alias_len {
        Some(usize::MAX) if ctx.add_uri_to_alias => out.extend_from_slice(uri),
        Some(n) => out.extend_from_slice(uri.get(n..).unwrap_or(b"")),
        None => out.extend_from_slice(uri),
    }
}

/// Type by the URI's extension (as nginx's `r->exten`: past the last `.`
/// of the last segment), else default_type. An extension in lower case
/// (most) is looked up as it is, with no copy.
pub fn content_type<'c>(conf: &'c LocConf, uri: &[u8]) -> &'c str {
    let ext = match uri.iter().rposition(|&b| b == b'.' || b == b'/') {
        Some(i) if uri[i] == b'.' => &uri[i + 1..],
        _ => &[][..],
    };
    if !ext.is_empty() && ext.len() <= 16 {
        let found = if ext.iter().any(u8::is_ascii_uppercase) {
            let mut lower = [0u8; 16];
            lower[..ext.len()].copy_from_slice(ext);
            lower[..ext.len()].make_ascii_lowercase();
            conf.types.get(&lower[..ext.len()])
        } else {
            conf.types.get(ext)
        };
        if let Some(t) = found {
            return t;
        }
    }
    &conf.default_type
}

fn path_of(bytes: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(bytes))
}

/// Opens a mapped path, logging failures the way nginx does.
pub fn open_logged(ctx: &ReqCtx<'_, '_>, path: &[u8]) -> Result<Rc<OpenFile>, OpenError> {
    let r = open_cache::open_for(ctx, path_of(path));
    if let Err(e) = r {
        let level = if e.status() == 404 { Level::Error } else { Level::Crit };
        if e.status() != 404 || ctx.conf.log_not_found {
            log_open_failed(ctx, if e == OpenError::Forbidden { Level::Error } else { level }, path, e);
        }
    }
    r
}

/// nginx's `open() "PATH" failed (ERRNO: TEXT)` line for a request.
pub fn log_open_failed(ctx: &ReqCtx<'_, '_>, level: Level, path: &[u8], e: OpenError) {
    log_req!(
        ctx,
        level,
        "open() \"{}\" failed ({}: {})",
        String::from_utf8_lossy(path),
        e.errno(),
        crate::process::signal::strerror(e.errno())
    );
}

/// nginx's `ngx_http_map_uri_to_path` refuses `alias` once a rewrite
/// moved the URI out of the location (`rewrite ... break`): a 500.
pub fn alias_refused(ctx: &ReqCtx<'_, '_>) -> bool {
    if ctx.conf.root.alias_len.is_none() || ctx.valid_location {
        return false;
    }
    log_req!(
        ctx,
        Level::Alert,
        "\"alias\" cannot be used in location \"{}\" where URI was rewritten",
        ctx.conf.location_name
    );
    true
}

/// What a pseudo-streaming handler (`flv`, `mp4`) works on: the request's
/// file, opened as the static module opens it, and its path; or the answer
/// when there is none to cut: 405 for a method other than GET and HEAD,
/// the static module's for a directory (index, the redirect to the slash)
/// or a refused `alias`, as nginx's handlers decline those, and the open
/// error's status.
pub enum Streamable<'c> {
    File(Rc<OpenFile>, Vec<u8>),
    Answered(Step<'c>),
}

pub fn streamable<'c>(ctx: &mut ReqCtx<'c, '_>) -> Streamable<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return Streamable::Answered(Step::Done(error(ctx, 405)));
    }
    if ctx.req.path.ends_with(b"/") || alias_refused(ctx) {
        return Streamable::Answered(serve(ctx));
    }
    let mut path = Vec::with_capacity(ctx.conf.root.path.len() + ctx.req.path.len());
    map_path(ctx, &ctx.req.path, &mut path);
    match open_logged(ctx, &path) {
        Ok(f) if f.is_dir => Streamable::Answered(serve(ctx)),
        Ok(f) => Streamable::File(f, path),
        Err(e) => Streamable::Answered(Step::Done(error(ctx, e.status()))),
    }
}

pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    let method = ctx.req.method();
    if !matches!(method, Method::Get | Method::Head | Method::Post) {
        return Step::Done(error(ctx, 405));
    }
    if ctx.req.path.ends_with(b"/") {
        return super::directory::serve(ctx);
    }
    if alias_refused(ctx) {
        return Step::Done(error(ctx, 500));
    }
    let mut path = Vec::with_capacity(ctx.conf.root.path.len() + ctx.req.path.len());
    map_path(ctx, &ctx.req.path, &mut path);
    // gzip_static and its kin: a precompressed sibling, when one fits.
    if method != Method::Post
        && let Some(r) = crate::http::filter::compress::precompressed::serve(ctx, &path)
    {
        ctx.filename = Some(path);
        return Step::Done(r);
    }
    let file = match open_logged(ctx, &path) {
        Ok(f) => f,
        Err(e) => return Step::Done(error(ctx, e.status())),
    };
    ctx.filename = Some(path);
    if file.is_dir {
        // nginx escapes the decoded URI again ("/a dir" -> "/a%20dir/").
        let mut loc = Vec::with_capacity(ctx.req.path.len() + 1);
        crate::http::uri::escape_uri(&ctx.req.path, &mut loc);
        loc.push(b'/');
        if let Some(a) = &ctx.req.args {
            loc.push(b'?');
            loc.extend_from_slice(a);
        }
        return Step::Done(super::ret::redirect(ctx, 301, &loc));
    }
    if method == Method::Post {
        return Step::Done(error(ctx, 405));
    }
    Step::Done(file_response(ctx, file, &[], 0))
}

thread_local! {
    static BOUNDARY: Cell<u64> = const { Cell::new(1) };
}

/// The 200/206/304/412/416 answer for a file's bytes from `offset` on,
/// after `head` (bytes a handler puts first: the flv module's header). The
/// two are one representation: its length, ETag and byte ranges count
/// `head` in, as nginx's range filter sees the handler's buffers.
pub(crate) fn file_response<'c>(ctx: &ReqCtx<'c, '_>, file: Rc<OpenFile>, head: &[u8], offset: u64) -> Response<'c> {
    let len = file.size.saturating_sub(offset);
    part_response(ctx, file, head, offset, len, false)
}

/// `file_response` for `len` bytes of the file from `offset` (the mp4
/// module's cut: its new header, then the kept samples). `single_range`
/// is nginx's flag of that name: a request for several ranges gets the
/// whole representation.
pub(crate) fn part_response<'c>(
    ctx: &ReqCtx<'c, '_>,
    file: Rc<OpenFile>,
    head: &[u8],
    offset: u64,
    len: u64,
    single_range: bool,
) -> Response<'c> {
    let conf = ctx.conf;
    let size = head.len() as u64 + len;
    let mut r = Response::new(ctx.err_status.filter(|s| *s != 0).unwrap_or(200));
    r.content_type = Some(Cow::Borrowed(content_type(conf, &ctx.req.path)));
    r.last_modified = Some(file.mtime);
    // An answer whose headers nobody reads has no ETag made.
    if conf.etag && !ctx.body_only {
        let mut e = Vec::with_capacity(24);
        etag::etag(file.mtime, size, &mut e);
        r.etag = Some(e);
    }
    // A subrequest is answered whole: nginx's not_modified and range
    // filters leave subrequests alone.
    if ctx.err_status.is_some() || ctx.subrequest {
        r.body = whole(file, head, offset, size);
        return r;
    }
    if let Some(status) = precondition(ctx, r.etag.as_deref(), Some(file.mtime)) {
        if status == 304 {
            r.status = 304;
            r.content_type = None;
            return r;
        }
        return error(ctx, status);
    }
    // `max_ranges 0` turns ranges off, Accept-Ranges with them.
    r.accept_ranges = ctx.conf.core.max_ranges != Some(0);
    // A page the SSI or addition module will change has no ranges
    // (nginx's range filter runs after them, on a body of unknown length).
    if let Some(h) = ctx.req.header("range")
        && if_range_ok(ctx, r.etag.as_deref(), Some(file.mtime))
        && !(size > 0 && crate::http::ssi::processes(ctx, r.content_type.as_deref()))
        && !crate::http::addition::applies(ctx, r.content_type.as_deref())
        && !crate::http::image_filter::applies(ctx)
        && !crate::http::charset::filter::changes_length(ctx, &r)
    {
        let max_ranges = match ctx.conf.core.max_ranges {
            Some(0) => Some(0),
            _ if single_range => Some(1),
            m => m,
        };
        match range::parse_range(h, size, max_ranges) {
            range::RangeResult::Ignore => {}
            range::RangeResult::Unsatisfiable => {
                let mut e = error(ctx, 416);
                let mut cr = Vec::with_capacity(24);
                range::unsatisfied_range(size, &mut cr);
                e.content_range = Some(cr);
                return e;
            }
            range::RangeResult::Satisfiable(ranges) if ranges.len() == 1 => {
                let br = ranges[0];
                let mut cr = Vec::with_capacity(40);
                range::content_range(br, size, &mut cr);
                r.status = 206;
                r.content_range = Some(cr);
                r.accept_ranges = false;
                r.body = one_range(file, head, offset, br);
                return r;
            }
            range::RangeResult::Satisfiable(ranges) => {
                let boundary = BOUNDARY.with(|b| {
                    let n = b.get();
                    b.set(n + 1);
                    format!("{n:020}")
                });
                // The parts name the charset the charset filter sends
                // (nginx's range filter runs after it); a byte-for-byte
                // recoding recodes them with the ranges.
                let charset = crate::http::charset::decide(ctx, &r, true);
                let ct = match &charset {
                    Some(d) => d.content_type.as_bytes().to_vec(),
                    None => r.content_type.as_deref().unwrap_or("").as_bytes().to_vec(),
                };
                let parts = ranges
                    .iter()
                    .map(|br| {
                        let mut h = Vec::with_capacity(96);
                        range::multipart_part_header(&boundary, &ct, *br, size, &mut h);
                        (h, *br)
                    })
                    .collect();
                let mut trailer = Vec::with_capacity(32);
                range::multipart_trailer(&boundary, &mut trailer);
                r.status = 206;
                r.accept_ranges = false;
                r.content_type = Some(Cow::Owned(format!("multipart/byteranges; boundary={boundary}")));
                r.body = splice(file, head, offset, parts, trailer);
                if let Some(rec) = charset.and_then(|d| d.recode) {
                    crate::http::charset::install(&mut r, rec);
                }
                return r;
            }
        }
    }
    r.body = whole(file, head, offset, size);
    r
}

/// The whole representation of `file_response`: `size` bytes.
fn whole(file: Rc<OpenFile>, head: &[u8], offset: u64, size: u64) -> Body {
    if size == 0 {
        return Body::File { file, offset, len: 0 };
    }
    one_range(file, head, offset, range::ByteRange { start: 0, end: size - 1 })
}

/// One range of the representation: a plain file body when it lies past
/// `head` (every static file's case: no allocation on that path), else
/// spliced.
fn one_range(file: Rc<OpenFile>, head: &[u8], offset: u64, r: range::ByteRange) -> Body {
    let hl = head.len() as u64;
    if r.start >= hl {
        return Body::File { file, offset: offset + r.start - hl, len: r.end - r.start + 1 };
    }
    splice(file, head, offset, vec![(Vec::new(), r)], Vec::new())
}

/// Pieces of the representation `head` + the file from `offset` (each
/// after its own bytes: a multipart part's header), then `trailer`, as a
/// body: the file's ranges go out with sendfile, the bytes around them as
/// they are. Without `head` a single range is a plain file body, as
/// before; the ranges were checked against the representation's length.
fn splice(
    file: Rc<OpenFile>,
    head: &[u8],
    offset: u64,
    pieces: Vec<(Vec<u8>, range::ByteRange)>,
    trailer: Vec<u8>,
) -> Body {
    let hl = head.len() as u64;
    let mut parts = Vec::with_capacity(pieces.len());
    let mut pending: Vec<u8> = Vec::new();
    for (before, r) in pieces {
        pending.extend_from_slice(&before);
        if r.start < hl {
            let end = r.end.min(hl - 1);
            pending.extend_from_slice(&head[r.start as usize..=end as usize]);
        }
        if r.end >= hl {
            let start = offset + r.start.max(hl) - hl;
            parts.push((std::mem::take(&mut pending), range::ByteRange { start, end: offset + r.end - hl }));
        }
    }
    pending.extend_from_slice(&trailer);
    match parts.len() {
        0 => Body::Owned(pending),
        1 if pending.is_empty() && parts[0].0.is_empty() => {
            let r = parts[0].1;
            Body::File { file, offset: r.start, len: r.end - r.start + 1 }
        }
        _ => Body::Multipart { file, parts, trailer: pending },
    }
}

/// RFC 9110 §13.2.2 order, as nginx's not_modified filter: If-Match /
/// If-Unmodified-Since (412), then If-None-Match, else If-Modified-Since (304).
/// `mtime` is the representation's Last-Modified (a cached response may
/// have none: then dates never match).
pub(crate) fn precondition(ctx: &ReqCtx<'_, '_>, etag: Option<&[u8]>, mtime: Option<u64>) -> Option<u16> {
    if let Some(h) = ctx.req.header("if-match") {
        if !etag.is_some_and(|e| etag::if_match_matches(h, e)) {
            return Some(412);
        }
    } else if let Some(h) = ctx.req.header("if-unmodified-since")
        && let Some(t) = date::parse_http_date(h)
        && mtime.is_none_or(|m| m > t)
    {
        return Some(412);
    }
    if let Some(h) = ctx.req.header("if-none-match") {
        return etag.is_some_and(|e| etag::if_none_match_matches(h, e)).then_some(304);
    }
    if ctx.conf.if_modified_since != IfModifiedSince::Off
        && let Some(h) = ctx.req.header("if-modified-since")
        && let Some(t) = date::parse_http_date(h)
        && let Some(mtime) = mtime
    {
        let not_modified = match ctx.conf.if_modified_since {
            IfModifiedSince::Exact => t == mtime,
            _ => t >= mtime,
        };
        return not_modified.then_some(304);
    }
    None
}

/// If-Range: an entity tag must match strongly, a date exactly.
pub(crate) fn if_range_ok(ctx: &ReqCtx<'_, '_>, etag: Option<&[u8]>, mtime: Option<u64>) -> bool {
    let Some(h) = ctx.req.header("if-range") else { return true };
    let (added_etag, added_modified) = crate::http::filter::headers::validators_added(ctx);
    let etag = match &added_etag {
        Some(e) => e.as_deref(),
        None => etag,
    };
    let mtime = added_modified.unwrap_or(mtime);
    if h.starts_with(b"\"") || h.starts_with(b"W/") {
        return etag == Some(h);
    }
    mtime.is_some() && date::parse_http_date(h) == mtime
}
