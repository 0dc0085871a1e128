//! nginx's SSI module (ngx_http_ssi_module): `ssi`, `ssi_types`,
//! `ssi_silent_errors`, `ssi_value_length`, `ssi_last_modified`,
//! `ssi_min_file_chunk`, and the commands `include`, `echo`, `set`,
//! `if`/`elif`/`else`/`endif`, `config` and `block`/`endblock` in the
//! pages the filter processes.
//!
//! The header filter ([`apply`]) puts an [`run::Ssi`] stage into the
//! response's streaming body (`compress::stream::Compressed`, after the
//! sub filter and before the encoder, nginx's body-filter order); the
//! stage parses the page as it streams (`parse`), runs the commands
//! (`run`, `expr` for `if` and the values' variables) and includes other
//! locations' answers through subrequests (`handler::subrequest`, the
//! pipeline every request runs, as nginx's subrequests do).

pub mod bufs;
pub mod expr;
pub mod parse;
pub mod run;

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, LIF, MANY, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};

pub static DIRECTIVES: &[Cmd] = &[
    cmd("ssi", HSL | LIF, 1, 1, Set::Loc(ssi)),
    cmd("ssi_types", HSL, 1, MANY, Set::Loc(ssi_types)),
    cmd("ssi_silent_errors", HSL, 1, 1, Set::Loc(ssi_silent_errors)),
    cmd("ssi_value_length", HSL, 1, 1, Set::Loc(ssi_value_length)),
    cmd("ssi_last_modified", HSL, 1, 1, Set::Loc(ssi_last_modified)),
    cmd("ssi_min_file_chunk", HSL, 1, 1, Set::Loc(ssi_min_file_chunk)),
];

#[derive(Clone, Debug)]
pub struct SsiConf {
    pub on: bool,
    /// Lowercase types (`text/html` always); `*` is any.
    pub types: Arc<Vec<String>>,
    pub silent_errors: bool,
    /// The longest parameter value a command may have (256).
    pub value_len: usize,
    pub last_modified: bool,
    /// Read and kept: sluice does not split a page's file parts off to
    /// send them with sendfile, so the size has no effect.
    pub min_file_chunk: u64,
    /// The `set` variables' slots by name (`rewrite::vars`), taken when
    /// `ssi` is read: commands name variables only while serving.
    pub slots: Arc<std::collections::HashMap<String, usize>>,
}

impl Default for SsiConf {
    fn default() -> Self {
        SsiConf {
            on: false,
            types: Arc::new(vec!["text/html".into()]),
            silent_errors: false,
            value_len: 256,
            last_modified: false,
            min_file_chunk: 1024,
            slots: Arc::default(),
        }
    }
}

fn ssi(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssi.on = crate::config::set_main::flag(d)?;
    c.ssi.slots = Arc::new(crate::http::rewrite::vars::snapshot());
    Ok(())
}

fn ssi_types(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssi.types = crate::http::filter::type_list(d);
    Ok(())
}

fn ssi_silent_errors(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssi.silent_errors = crate::config::set_main::flag(d)?;
    Ok(())
}

fn ssi_last_modified(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssi.last_modified = crate::config::set_main::flag(d)?;
    Ok(())
}

fn ssi_value_length(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    c.ssi.value_len = crate::config::value::parse_size(v)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| ConfError::at("invalid value", &d.span))?;
    Ok(())
}

fn ssi_min_file_chunk(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssi.min_file_chunk =
        crate::config::value::parse_size(&d.args[0].text).ok_or_else(|| ConfError::at("invalid value", &d.span))?;
    Ok(())
}

/// The header filter: a response of a listed type with a body (of any
/// status, as nginx's) is processed; its length becomes unknown, ranges
/// are off and, as nginx does, Last-Modified and ETag go (or the ETag is
/// weakened with `ssi_last_modified on`).
pub fn apply<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    let conf = &ctx.conf.ssi;
    if !conf.on || resp.body.known_len() == Some(0) || !processes(ctx, resp.content_type.as_deref()) {
        return;
    }
    match &resp.body {
        Body::Static(_) | Body::Owned(_) | Body::Shared(_) | Body::File { .. } | Body::Upstream(_) => {}
        Body::Compressed(z) if z.coding.is_none() => {}
        _ => return,
    }
    if !read_plain_include(ctx, resp) {
        let stage = Box::new(run::Ssi::new(ctx));
        match &mut resp.body {
            Body::Compressed(z) => z.add_ssi(stage),
            _ => {
                let body = std::mem::replace(&mut resp.body, Body::Empty);
                resp.body =
                    Body::Compressed(Box::new(crate::http::filter::compress::stream::Compressed::ssi(body, stage)));
            }
        }
    }
    resp.accept_ranges = false;
    // One pass over the fields for the ones that go.
    let validators = !conf.last_modified;
    resp.headers.retain(|(n, _)| {
        !(n.eq_ignore_ascii_case("accept-ranges")
            || n.eq_ignore_ascii_case("content-length")
            || (validators && (n.eq_ignore_ascii_case("last-modified") || n.eq_ignore_ascii_case("etag"))))
    });
    if conf.last_modified {
        crate::http::filter::compress::weaken_etag(resp);
    } else {
        resp.last_modified = None;
        resp.etag = None;
    }
}

/// Above this, an included file goes through the SSI stage a piece at a
/// time.
const READ_WHOLE_MAX: u64 = 64 * 1024;

/// A subrequest's file (an `include`d page, most often a fragment without
/// commands) of `READ_WHOLE_MAX` at most, and within
/// `subrequest_output_buffer_size`, is read now: the subrequest gathers
/// it whole anyway. True when it holds no command: the stage would pass it
/// through unchanged, so none is built (its boxes, buffers and parser cost
/// more than the page). A page with commands goes through the stage from
/// memory; a failed read leaves the file to the stage, which reports it.
fn read_plain_include(ctx: &ReqCtx<'_, '_>, resp: &mut Response<'_>) -> bool {
    let Body::File { file, offset, len } = &resp.body else { return false };
    let (offset, len) = (*offset, *len);
    if !ctx.subrequest || len > READ_WHOLE_MAX || len > ctx.conf.subrequest_output_buffer_size as u64 {
        return false;
    }
    let mut page = bufs::bytes(len as usize);
    let read = match file.cached_bytes(offset, len) {
        Some(b) => {
            page.extend_from_slice(b);
            true
        }
        None => file
            .file
            .as_ref()
            .is_some_and(|f| crate::http::connection::io::pread_into(f, offset, len, &mut page).is_ok()),
    };
    if !read || page.len() as u64 != len {
        return false;
    }
    let plain = parse::plain(&page);
    resp.body = Body::Owned(page);
    plain
}

/// Whether the SSI module processes a response of this type here.
pub fn processes(ctx: &ReqCtx<'_, '_>, content_type: Option<&str>) -> bool {
    let conf = &ctx.conf.ssi;
    conf.on
        && content_type
            .is_some_and(|ct| crate::http::filter::type_listed(&conf.types, crate::http::filter::mime_of(ct)))
}

/// The variables `set` (and `include ... set=`) give: nginx keeps them in
/// the main request's SSI context, so an included page sees the ones its
/// includer set and the other way round. Subrequests carry the main
/// request's store (`ReqCtx::ssi`).
#[derive(Default, Debug)]
pub struct Shared {
    pub vars: std::cell::RefCell<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The main request's `$request_id` once some request of the page
    /// made it: the subrequests share it without one being made for
    /// every page (`ReqCtx::request_id`), most pages never reading it.
    pub request_id: std::cell::Cell<Option<[u8; 16]>>,
}

impl Shared {
    pub fn get(&self, name: &[u8]) -> Option<Vec<u8>> {
        self.vars.borrow().iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }

    pub fn set(&self, name: &[u8], value: Vec<u8>) {
        let mut vars = self.vars.borrow_mut();
        match vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => vars.push((name.to_vec(), value)),
        }
    }
}

/// The default `errmsg`.
pub const ERRMSG: &[u8] = b"[an error occurred while processing the directive]";
/// The default `timefmt`.
pub const TIMEFMT: &[u8] = b"%A, %d-%b-%Y %H:%M:%S %Z";
