//! nginx's image filter (ngx_http_image_filter_module): `image_filter
//! test | size | rotate | resize | crop` and its settings. It filters any
//! response of its location (a file, an origin's answer, an error page)
//! but a 304, as nginx's: the body is read whole (at most
//! `image_filter_buffer`), its type recognised from its first bytes
//! (JPEG, GIF, PNG, WebP), then passed as it is (`test`), described as
//! JSON (`size`), or decoded, transformed and encoded again in the same
//! format (`codec`). What is not an image, is too large or does not
//! decode becomes nginx's 415 (`size` answers `{}`), which `error_page`
//! may replace.
//!
//! The filter must see the whole body before the head can go out (the
//! status, type and length change), so its header filter ([`apply`], from
//! `handler::finish` and `finish_proxied` after the sub filter, where
//! nginx's filter order puts it) only marks the request ([`State::Pending`],
//! one of the pipeline's `suspended` reasons); [`run`] then reads the body
//! from the connection layer's `handler::complete` or `proxy::respond`,
//! decodes off the event loop (`spawn_blocking`, under `catch_unwind`)
//! and hands the new response to the filters after it (SSI, addition,
//! compression).

pub mod codec;

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, LOC, R, Set, cmd, multi};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;
use crate::worker::WorkerCtx;
use codec::{Kind, Op, Outcome, Params, UNLIMITED};

pub static DIRECTIVES: &[Cmd] = &[
    multi(cmd("image_filter", LOC, 1, 3, Set::Loc(image_filter))),
    cmd("image_filter_buffer", HSL, 1, 1, Set::Loc(image_filter_buffer)),
    // nginx's own handlers for these three: a repeat is no error, the
    // last one counts.
    multi(cmd("image_filter_jpeg_quality", HSL, 1, 1, Set::Loc(jpeg_quality))),
    multi(cmd("image_filter_webp_quality", HSL, 1, 1, Set::Loc(webp_quality))),
    multi(cmd("image_filter_sharpen", HSL, 1, 1, Set::Loc(sharpen))),
    cmd("image_filter_transparency", HSL, 1, 1, Set::Loc(transparency)),
    cmd("image_filter_interlace", HSL, 1, 1, Set::Loc(interlace)),
];

/// What `image_filter` asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Filter {
    #[default]
    Off,
    Test,
    Size,
    Rotate,
    Resize,
    Crop,
}

/// A number that may come from variables (a width, an angle, a quality).
#[derive(Clone, Debug)]
pub enum Value {
    Fixed(u64),
    Var(Arc<Template>),
}

impl Value {
    /// nginx's `ngx_http_image_filter_get_value`: `-` is no limit, a
    /// positive number itself, anything else 0.
    fn get(&self, ctx: &ReqCtx<'_, '_>) -> u64 {
        match self {
            Value::Fixed(n) => *n,
            Value::Var(t) => number(&t.render_to_vec(&Vars::request(ctx))),
        }
    }
}

/// nginx's `ngx_http_image_filter_value`.
fn number(v: &[u8]) -> u64 {
    if v == b"-" {
        return UNLIMITED;
    }
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    std::str::from_utf8(v).ok().and_then(|s| s.parse::<u64>().ok()).filter(|&n| n <= i64::MAX as u64).unwrap_or(0)
}

#[derive(Clone, Debug)]
pub struct ImageFilterConf {
    pub filter: Filter,
    pub width: Value,
    pub height: Value,
    /// `image_filter rotate`'s angle (None: no rotation).
    pub angle: Option<Value>,
    /// An `image_filter` line was given at this level: the first one here
    /// replaces what the enclosing level said (nginx merges the filter,
    /// its sizes and angle as one unit).
    pub own: bool,
    pub buffer: usize,
    pub jpeg_quality: Value,
    pub webp_quality: Value,
    pub sharpen: Value,
    pub transparency: bool,
    pub interlace: bool,
}

impl Default for ImageFilterConf {
    fn default() -> Self {
        ImageFilterConf {
            filter: Filter::Off,
            width: Value::Fixed(0),
            height: Value::Fixed(0),
            angle: None,
            own: false,
            buffer: 1024 * 1024,
            jpeg_quality: Value::Fixed(75),
            webp_quality: Value::Fixed(80),
            sharpen: Value::Fixed(0),
            transparency: true,
            interlace: false,
        }
    }
}

/// The request's progress through the filter.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum State {
    #[default]
    Idle,
    /// The header filter took the response; [`run`] is due.
    Pending,
    /// The filter answered with its own error page: the header filters
    /// let that one pass (nginx's module context left on the request).
    Done,
}

fn invalid(d: &Directive, w: &str) -> ConfError {
    ConfError::at(format!("invalid parameter \"{w}\""), &d.span)
}

/// A size or angle argument: a literal must be a positive number or `-`.
fn value(d: &Directive, text: &str) -> Result<Value, ConfError> {
    let t = Template::compile(text).map_err(|e| ConfError::at(e, &d.span))?;
    if t.as_literal().is_some() {
        match number(text.as_bytes()) {
            0 => Err(invalid(d, text)),
            n => Ok(Value::Fixed(n)),
        }
    } else {
        Ok(Value::Var(Arc::new(t)))
    }
}

fn image_filter(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let f = &mut c.image_filter;
    if !f.own {
        f.own = true;
        f.filter = Filter::Off;
        f.width = Value::Fixed(0);
        f.height = Value::Fixed(0);
        f.angle = None;
    }
    let a: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
    match a.as_slice() {
        [one] => {
            f.filter = match *one {
                "off" => Filter::Off,
                "test" => Filter::Test,
                "size" => Filter::Size,
                other => return Err(invalid(d, other)),
            };
        }
        ["rotate", angle] => {
            if !matches!(f.filter, Filter::Resize | Filter::Crop) {
                f.filter = Filter::Rotate;
            }
            let v = value(d, angle)?;
            if let Value::Fixed(n) = v
                && !matches!(n, 90 | 180 | 270)
            {
                return Err(invalid(d, angle));
            }
            f.angle = Some(v);
        }
        [op, w, h] if *op == "resize" || *op == "crop" => {
            f.filter = if *op == "resize" { Filter::Resize } else { Filter::Crop };
            f.width = value(d, w)?;
            f.height = value(d, h)?;
        }
        [first, ..] => return Err(invalid(d, first)),
        [] => return Err(invalid(d, "")),
    }
    Ok(())
}

fn image_filter_buffer(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = crate::config::value::parse_size(&d.args[0].text)
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span))?;
    c.image_filter.buffer = usize::try_from(n).unwrap_or(usize::MAX);
    Ok(())
}

/// A quality or sharpening value, or variables. As nginx: `-` is refused,
/// so is a quality that is no positive number; a sharpening that is no
/// number is 0.
fn setting(d: &Directive, positive: bool) -> Result<Value, ConfError> {
    let text = d.args[0].text.as_str();
    let t = Template::compile(text).map_err(|e| ConfError::at(e, &d.span))?;
    if t.as_literal().is_none() {
        return Ok(Value::Var(Arc::new(t)));
    }
    match number(text.as_bytes()) {
        UNLIMITED => Err(ConfError::at(format!("invalid value \"{text}\""), &d.span)),
        0 if positive => Err(ConfError::at(format!("invalid value \"{text}\""), &d.span)),
        n => Ok(Value::Fixed(n)),
    }
}

fn jpeg_quality(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.image_filter.jpeg_quality = setting(d, true)?;
    Ok(())
}

fn webp_quality(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.image_filter.webp_quality = setting(d, true)?;
    Ok(())
}

fn sharpen(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.image_filter.sharpen = setting(d, false)?;
    Ok(())
}

fn transparency(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.image_filter.transparency = crate::config::set_main::flag(d)?;
    Ok(())
}

fn interlace(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.image_filter.interlace = crate::config::set_main::flag(d)?;
    Ok(())
}

/// Whether the filter will take this request's response (so the content
/// handler answers without ranges, as nginx's filter turns them off
/// before the range filter runs).
pub fn applies(ctx: &ReqCtx<'_, '_>) -> bool {
    ctx.conf.image_filter.filter != Filter::Off && ctx.image != State::Done
}

/// The header filter: true when it took the response (the request is
/// then [`State::Pending`] and the filters after it wait for [`run`]).
pub fn apply<'c>(ctx: &mut ReqCtx<'c, '_>, resp: &mut Response<'c>) -> bool {
    if resp.status == 304 {
        return false;
    }
    if ctx.image == State::Done {
        ctx.image = State::Idle;
        return false;
    }
    if ctx.conf.image_filter.filter == Filter::Off || matches!(resp.body, Body::Proxy) {
        return false;
    }
    let ct = resp.content_type.as_deref().unwrap_or("");
    if ct.len() >= 25 && ct[..25].eq_ignore_ascii_case("multipart/x-mixed-replace") {
        log_req!(ctx, Level::Error, "image filter: multipart/x-mixed-replace response");
        return false;
    }
    resp.accept_ranges = false;
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges") && !n.eq_ignore_ascii_case("refresh"));
    ctx.image = State::Pending;
    true
}

/// nginx's `ngx_http_filter_finalize_request` with 415: the error page
/// (and `error_page`), which the filter then lets through.
fn unsupported<'c>(ctx: &mut ReqCtx<'c, '_>) -> Response<'c> {
    ctx.image = State::Done;
    let r = crate::http::handler::error(ctx, 415);
    crate::http::handler::finish_filtered(ctx, r)
}

/// Reads the body of a [`State::Pending`] response and answers what the
/// location's `image_filter` makes of it.
pub async fn run<'c>(w: &WorkerCtx, ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>) -> Response<'c> {
    ctx.image = State::Idle;
    let conf: &'c ImageFilterConf = &ctx.conf.image_filter;
    if let Some(len) = resp.body.known_len().filter(|&l| l > conf.buffer as u64) {
        log_req!(ctx, Level::Error, "image filter: too big response: {}", len);
        drop_body(w, std::mem::replace(&mut resp.body, Body::Empty));
        return unsupported(ctx);
    }
    let mut data = Vec::new();
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    match Box::pin(crate::http::handler::subrequest::gather(w, ctx, body, &mut data, conf.buffer)).await {
        Ok(()) => {}
        Err(Some(_)) if data.len() > conf.buffer => {
            log_req!(ctx, Level::Error, "image filter: too big response");
            return unsupported(ctx);
        }
        Err(Some(msg)) => {
            log_req!(ctx, Level::Error, "{}", msg);
            return unsupported(ctx);
        }
        Err(None) => return unsupported(ctx),
    }
    let Some(kind) = codec::sniff(&data) else {
        if conf.filter == Filter::Size {
            return json(ctx, resp, codec::json(Kind::Jpeg, None));
        }
        return unsupported(ctx);
    };
    resp.content_type = Some(kind.mime().into());
    if conf.filter == Filter::Test {
        return passed(ctx, resp, data, false);
    }
    let size = codec::size(kind, &data);
    if conf.filter == Filter::Size {
        return json(ctx, resp, codec::json(kind, size));
    }
    let angle = conf.angle.as_ref().map_or(0, |a| a.get(ctx));
    let (op, max_width, max_height) = match conf.filter {
        Filter::Rotate => {
            if !matches!(angle, 90 | 180 | 270) {
                return unsupported(ctx);
            }
            (Op::Rotate, 0, 0)
        }
        f => {
            let mw = conf.width.get(ctx);
            let mh = if mw == 0 { 0 } else { conf.height.get(ctx) };
            if mw == 0 || mh == 0 {
                return unsupported(ctx);
            }
            if let Some(s) = size
                && s.width <= mw
                && s.height <= mh
                && angle == 0
                && !s.force
            {
                return passed(ctx, resp, data, false);
            }
            (if f == Filter::Crop { Op::Crop } else { Op::Resize }, mw, mh)
        }
    };
    let quality = match kind {
        Kind::Jpeg => conf.jpeg_quality.get(ctx),
        Kind::Webp => conf.webp_quality.get(ctx),
        _ => 1,
    };
    if quality == 0 || quality == UNLIMITED {
        return unsupported(ctx);
    }
    let sharpen = match conf.sharpen.get(ctx) {
        UNLIMITED => 0,
        n => n,
    };
    let params = Params {
        op,
        max_width,
        max_height,
        angle,
        jpeg_quality: quality,
        sharpen,
        transparency: conf.transparency,
        interlace: conf.interlace,
    };
    let (data, outcome) = convert(kind, data, size, params).await;
    match outcome {
        Outcome::AsIs => passed(ctx, resp, data, false),
        Outcome::Image(out) => passed(ctx, resp, out, true),
        Outcome::Failed(why) => {
            log_req!(ctx, Level::Error, "image filter: {}", why);
            unsupported(ctx)
        }
    }
}

/// A body not read: an origin's connection is closed, not pooled.
fn drop_body(w: &WorkerCtx, body: Body) {
    match body {
        Body::Upstream(mut up) => crate::http::proxy::release_as(w, &mut up, true),
        Body::Compressed(mut z) => {
            if let Some(up) = z.upstream_mut() {
                crate::http::proxy::release_as(w, up, true);
            }
        }
        _ => {}
    }
}

/// Runs the decoding and encoding on tokio's blocking threads, so a large
/// image never stalls the worker's other connections; a panic in a
/// decoder is caught there and is a failed image.
async fn convert(kind: Kind, data: Vec<u8>, size: Option<codec::Size>, p: Params) -> (Vec<u8>, Outcome) {
    let job = tokio::task::spawn_blocking(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| codec::transform(kind, &data, size, &p)))
            .unwrap_or_else(|_| Outcome::Failed("the decoder panicked".into()));
        (data, out)
    });
    match job.await {
        Ok(v) => v,
        Err(e) => (Vec::new(), Outcome::Failed(format!("image task failed: {e}"))),
    }
}

/// The image (the original bytes, or `converted` ones with a weak ETag, as
/// nginx's), then the filters after this one.
fn passed<'c>(ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>, body: Vec<u8>, converted: bool) -> Response<'c> {
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("content-type"));
    resp.body = Body::Owned(body);
    if converted {
        crate::http::filter::compress::weaken_etag(&mut resp);
    }
    crate::http::handler::finish_after_image(ctx, resp)
}

/// `size`'s answer: nginx cleans the head first (`ngx_http_clean_header`:
/// every header the response had goes, `add_header`'s and the validators
/// too), then a 200 of `application/json`.
fn json<'c>(ctx: &mut ReqCtx<'c, '_>, old: Response<'c>, body: Vec<u8>) -> Response<'c> {
    let mut r = Response::new(200);
    r.close = old.close;
    r.content_type = Some("application/json".into());
    r.body = Body::Owned(body);
    crate::http::handler::finish_after_image(ctx, r)
}
