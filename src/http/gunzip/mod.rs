//! nginx's gunzip module (ngx_http_gunzip_filter_module): `gunzip on`
//! decompresses a response with `Content-Encoding: gzip` (from an origin,
//! a `gzip_static always` sibling, a cache) for a client that does not
//! take gzip, as the gzip filter's `ngx_http_gzip_ok` decides (Accept-
//! Encoding, `gzip_http_version`, `gzip_proxied`, `gzip_disable`).
//!
//! The header filter (`apply`, first of the filters after `add_header`)
//! drops Content-Encoding, Content-Length and Accept-Ranges, weakens the
//! ETag, and puts a `Gunzip` stage first in the streaming body
//! (`Compressed`): the sub filter, SSI and addition then see the plain
//! bytes, as nginx's body-filter order has it. A response it looks at,
//! decompressed or not, varies by Accept-Encoding (`Vary` with `gzip_vary
//! on`). Several gzip members in a row are all decompressed, as zlib's
//! `inflate` with nginx's restart does.

use std::io::Write;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::http::filter::compress::stream::Compressed;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};

pub static DIRECTIVES: &[Cmd] =
    &[cmd("gunzip", HSL, 1, 1, Set::Loc(gunzip)), cmd("gunzip_buffers", HSL, 2, 2, Set::Loc(gunzip_buffers))];

#[derive(Clone, Copy, Debug)]
pub struct GunzipConf {
    pub on: bool,
    /// `gunzip_buffers NUMBER SIZE` (32 4k by default): checked and kept;
    /// the stage writes into the body's own pieces instead.
    pub buffers: (usize, usize),
}

impl Default for GunzipConf {
    fn default() -> Self {
        GunzipConf { on: false, buffers: (32, 4096) }
    }
}

fn gunzip(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.gunzip.on = crate::config::set_main::flag(d)?;
    Ok(())
}

fn gunzip_buffers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = crate::config::value::parse_number(&d.args[0].text).filter(|&n| n > 0);
    let size = crate::config::value::parse_size(&d.args[1].text).filter(|&s| s > 0);
    match (n, size) {
        (Some(n), Some(s)) => {
            c.gunzip.buffers = (n as usize, s as usize);
            Ok(())
        }
        _ => Err(ConfError::at(format!("invalid value \"{}\"", d.args[0].text), &d.span)),
    }
}

/// The header filter. `ctx.vary_encoding` is set for a response it looks
/// at (the gzip filter then writes `Vary`).
pub fn apply<'c>(ctx: &mut ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    if !ctx.conf.gunzip.on || resp.header("content-encoding").is_none_or(|v| !v.eq_ignore_ascii_case(b"gzip")) {
        return;
    }
    ctx.vary_encoding = true;
    if client_takes_gzip(ctx) {
        return;
    }
    match &resp.body {
        Body::Empty | Body::Static(_) | Body::Owned(_) | Body::Shared(_) | Body::File { .. } | Body::Upstream(_) => {}
        _ => return,
    }
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.body = Body::Compressed(Box::new(Compressed::gunzipping(body)));
    resp.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("content-encoding") && !n.eq_ignore_ascii_case("accept-ranges"));
    resp.accept_ranges = false;
    crate::http::filter::compress::weaken_etag(resp);
}

/// nginx's `ngx_http_gzip_ok` for this request: gzip in Accept-Encoding
/// and the gzip filter's other conditions. A subrequest never takes it
/// (its body becomes part of the parent's, uncompressed).
fn client_takes_gzip(ctx: &ReqCtx<'_, '_>) -> bool {
    use crate::http::filter::compress::negotiate::Coding;
    if ctx.subrequest {
        return false;
    }
    let takes = crate::http::filter::compress::accepted(ctx).and_then(|a| a.choose(&[Coding::Gzip])).is_some();
    takes && crate::http::filter::compress::gzip_allowed(ctx, None, &ctx.conf.compress)
}

/// The decompressing stage of a streaming body.
pub struct Gunzip {
    dec: flate2::write::MultiGzDecoder<Vec<u8>>,
    /// Some compressed bytes came (an empty body is no error).
    fed: bool,
}

impl Default for Gunzip {
    fn default() -> Self {
        Gunzip { dec: flate2::write::MultiGzDecoder::new(Vec::new()), fed: false }
    }
}

impl Gunzip {
    /// Decompresses `input`, appending what it gives to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        self.fed |= !input.is_empty();
        self.dec.write_all(input)?;
        out.append(self.dec.get_mut());
        Ok(())
    }

    /// The end of the compressed bytes: what is left. An empty body
    /// decompresses to nothing.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> std::io::Result<()> {
        if !self.fed {
            return Ok(());
        }
        self.dec.try_finish()?;
        out.append(self.dec.get_mut());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn members_in_pieces() {
        let mut two = gz(b"hello ");
        two.extend(gz(b"world"));
        for step in [1, 3, 7, two.len()] {
            let mut g = Gunzip::default();
            let mut out = Vec::new();
            for piece in two.chunks(step) {
                g.feed(piece, &mut out).unwrap();
            }
            g.finish(&mut out).unwrap();
            assert_eq!(out, b"hello world", "pieces of {step}");
        }
    }

    #[test]
    fn nothing_is_nothing() {
        let mut out = Vec::new();
        Gunzip::default().finish(&mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        let mut g = Gunzip::default();
        let mut out = Vec::new();
        let r = g.feed(b"not gzip at all, not at all", &mut out).and_then(|()| g.finish(&mut out));
        assert!(r.is_err());
    }
}
