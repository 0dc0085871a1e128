//! The `sluice_status` page: every worker's counters summed at scrape time
//! (the scrape pays for the sums, the request path never does), as JSON
//! (the default), in Prometheus' text exposition format 0.0.4, or as the
//! HTML dashboard ([`super::dashboard`], what a browser's `Accept` gets)
//! that polls the JSON. `?format=` picks one unless the directive fixed it
//! (`sluice_status format=prometheus;`). GET and HEAD only (else 405).

use std::borrow::Cow;
use std::sync::Arc;

pub use super::json::json;
pub use super::prometheus::prometheus;
pub use super::snapshot::{Snapshot, snapshot};
use crate::config::proxy::Upstream;
use crate::http::cache::conf::ZoneConf;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Prometheus,
    Html,
}

impl Format {
    pub fn parse(v: &str) -> Option<Format> {
        match v {
            "json" => Some(Format::Json),
            "prometheus" => Some(Format::Prometheus),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Prometheus => "text/plain; version=0.0.4",
            Format::Html => "text/html; charset=utf-8",
        }
    }
}

/// A `sluice_status` location: its fixed format, if any, and the
/// configuration's upstream blocks and cache zones (built before any
/// server), by name.
#[derive(Debug)]
pub struct Page {
    pub fixed: Option<Format>,
    pub upstreams: Vec<Arc<Upstream>>,
    pub caches: Vec<Arc<ZoneConf>>,
}

/// nginx's `ngx_http_arg`: the first `name=` argument's value.
fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    args.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = kv.split_at(kv.iter().position(|&b| b == b'=')?);
        k.eq_ignore_ascii_case(name).then(|| &v[1..])
    })
}

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>, page: &Page) -> Response<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return crate::http::handler::error(ctx, 405);
    }
    let mut format = Format::Json;
    let query = ctx.req.args.as_deref().and_then(|a| arg(a, b"format"));
    // Neither the directive nor the query chose: Accept does.
    let negotiated = page.fixed.is_none() && query.is_none();
    if let Some(f) = page.fixed {
        // A fixed dashboard still answers its own polls.
        format = if f == Format::Html && query == Some(b"json") { Format::Json } else { f };
    } else if let Some(v) = query {
        match std::str::from_utf8(v).ok().and_then(Format::parse) {
            Some(f) => format = f,
            None => {
                log_req!(ctx, Level::Error, "sluice_status, bad format: \"{}\"", String::from_utf8_lossy(v));
                return crate::http::handler::error(ctx, 400);
            }
        }
    } else if ctx.req.header("accept").is_some_and(super::dashboard::prefers_html) {
        format = Format::Html;
    }
    let text = match format {
        Format::Html => return super::dashboard::response(negotiated),
        Format::Json => json(&snapshot(page)),
        Format::Prometheus => prometheus(&snapshot(page)),
    };
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed(format.content_type()));
    if negotiated {
        r.headers.push((Cow::Borrowed("Vary"), FieldValue::from_static(b"Accept")));
    }
    r.body = Body::Owned(text.into_bytes());
    r
}
