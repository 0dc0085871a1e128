//! `gzip_static`, `brotli_static` and `zstd_static`: a request for `/a.css`
//! is answered with `a.css.gz`, `a.css.br` or `a.css.zst` from disk when the
//! client takes that encoding (`on`) or in any case (`always`), as nginx's
//! gzip_static and its brotli and zstd counterparts do.
//!
//! As in nginx: only GET and HEAD and URIs not ending in `/`; the sibling
//! need not have an original beside it; the response has the original's
//! type, the sibling's length, Last-Modified and ETag (strong: these bytes
//! do not change), no Accept-Ranges (ranges are not served from it), and
//! conditional requests are answered against the sibling. With `on`, a
//! sibling that exists makes the response vary by Accept-Encoding even
//! when it is not the one sent. Where several are enabled, the client's
//! q-values choose, then `compress_preference`; `always` siblings are the
//! fallback when nothing the client accepts exists.

use std::borrow::Cow;
use std::path::Path;
use std::rc::Rc;

use super::negotiate::Coding;
use crate::config::compress::StaticMode;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::handler::open_cache::{self, OpenError, OpenFile};
use crate::http::response::{Body, Response};
use crate::log::error::Level;

/// Opens `path` + the coding's suffix; None when it is not there (or not a
/// regular file), logging what nginx logs.
fn open(ctx: &ReqCtx<'_, '_>, path: &[u8], c: Coding) -> Option<Rc<OpenFile>> {
    use std::os::unix::ffi::OsStrExt;
    let mut p = Vec::with_capacity(path.len() + 4);
    p.extend_from_slice(path);
    p.extend_from_slice(c.suffix().as_bytes());
    match open_cache::open_for(ctx, Path::new(std::ffi::OsStr::from_bytes(&p))) {
        Ok(f) if !f.is_dir => Some(f),
        Ok(_) => None,
        Err(OpenError::NotFound | OpenError::NotDir) => None,
        Err(e) => {
            let level = if e == OpenError::Forbidden { Level::Error } else { Level::Crit };
            crate::http::handler::static_file::log_open_failed(ctx, level, &p, e);
            None
        }
    }
}

/// The precompressed answer for the file at `path` (the URI mapped to the
/// file system), if the location serves one.
pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>, path: &[u8]) -> Option<Response<'c>> {
    let lc = ctx.conf;
    let conf = &lc.compress;
    if !conf.any_static() || ctx.req.path.ends_with(b"/") {
        return None;
    }
    let enabled: Vec<(Coding, StaticMode)> = conf
        .preference
        .iter()
        .map(|&c| (c, conf.filter(c).precompressed))
        .filter(|&(_, m)| m != StaticMode::Off)
        .collect();
    let accepted = super::accepted(ctx);
    // Each `on` sibling the client may take (gzip also needs gzip_ok's
    // other tests); `always` ones compete on the client's q-values too.
    let takes =
        |c: Coding, m: StaticMode| m == StaticMode::Always || c != Coding::Gzip || super::gzip_allowed(ctx, None, conf);
    let candidates: Vec<Coding> = enabled.iter().filter(|&&(c, m)| takes(c, m)).map(|&(c, _)| c).collect();
    let ranked = accepted.map(|a| a.rank(&candidates)).unwrap_or_default();
    let mut found = None;
    for &c in &ranked {
        if let Some(f) = open(ctx, path, c) {
            found = Some((c, f));
            break;
        }
    }
    if found.is_none() {
        found = enabled
            .iter()
            .filter(|&&(c, m)| m == StaticMode::Always && !ranked.contains(&c))
            .find_map(|&(c, _)| open(ctx, path, c).map(|f| (c, f)));
    }
    // nginx's `r->gzip_vary` for `on`: the sibling exists, sent or not
    // (looked for only when gzip_vary would print it).
    let on_sent = found.as_ref().is_some_and(|(c, _)| enabled.iter().any(|&(e, m)| e == *c && m == StaticMode::On));
    if on_sent
        || (conf.vary
            && enabled
                .iter()
                .any(|&(c, m)| m == StaticMode::On && !ranked.contains(&c) && open(ctx, path, c).is_some()))
    {
        ctx.vary_encoding = true;
    }
    let (c, file) = found?;
    Some(respond(ctx, c, file))
}

fn respond<'c>(ctx: &ReqCtx<'c, '_>, c: Coding, file: Rc<OpenFile>) -> Response<'c> {
    let mut r = Response::new(ctx.err_status.filter(|s| *s != 0).unwrap_or(200));
    r.content_type = Some(Cow::Borrowed(crate::http::handler::static_file::content_type(ctx.conf, &ctx.req.path)));
    r.last_modified = Some(file.mtime);
    if ctx.conf.etag {
        let mut e = Vec::with_capacity(24);
        crate::http::etag::etag(file.mtime, file.size, &mut e);
        r.etag = Some(e);
    }
    if ctx.err_status.is_none()
        && let Some(status) = crate::http::handler::static_file::precondition(ctx, r.etag.as_deref(), Some(file.mtime))
    {
        if status == 304 {
            r.status = 304;
            r.content_type = None;
            return r;
        }
        return crate::http::handler::error(ctx, status);
    }
    r.headers.push((Cow::Borrowed("Content-Encoding"), FieldValue::from_static(c.name().as_bytes())));
    let size = file.size;
    r.body = Body::File { file, offset: 0, len: size };
    r
}
