//! `limit_except METHOD ... { ... }`: inside a location, the settings a
//! request with any other method gets (nginx switches the request to the
//! block's configuration, built on the location's, when it chooses the
//! location). `GET` includes `HEAD`. The block takes the access module's
//! directives, `auth_basic*`, `access_log` and `proxy_pass`.

use std::sync::Arc;

use super::build::{Ctx, apply_if_level, inherit_if};
use super::model::{LocConf, MainConf};
use super::parser::{ConfError, Directive};
use super::table::LMT;
use crate::http::request::{Method, Request};

/// The methods nginx's `limit_except` knows.
const METHODS: [&str; 14] = [
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "MKCOL",
    "COPY",
    "MOVE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "LOCK",
    "UNLOCK",
    "PATCH",
];

#[derive(Clone)]
pub struct LimitExcept {
    /// The methods the block does not apply to.
    pub methods: Vec<&'static str>,
    pub conf: LocConf,
}

impl LimitExcept {
    /// The settings for `req`: the block's for a method not listed.
    pub fn applies_to(&self, req: &Request<'_>) -> bool {
        let m: &[u8] = match req.method {
            Method::Get => b"GET",
            Method::Head => b"HEAD",
            Method::Post => b"POST",
            Method::Put => b"PUT",
            Method::Delete => b"DELETE",
            Method::Options => b"OPTIONS",
            Method::Other => req.method_bytes(),
        };
        !self.methods.iter().any(|l| l.as_bytes() == m)
    }
}

/// Builds the block of `d` on the location's settings `loc`.
pub fn build(d: &Directive, loc: &LocConf, ctx: &mut Ctx, main: &mut MainConf) -> Result<Arc<LimitExcept>, ConfError> {
    let mut methods = Vec::new();
    for w in &d.args {
        let m = METHODS
            .iter()
            .find(|m| **m == w.text)
            .ok_or_else(|| ConfError::at(format!("invalid method \"{}\"", w.text), &d.span))?;
        methods.push(*m);
        if *m == "GET" {
            methods.push("HEAD");
        }
    }
    let mut conf = inherit_if(loc);
    conf.limit_except = None;
    apply_if_level(d.block.as_deref().unwrap_or(&[]), LMT, ctx, main, &mut conf)?;
    Ok(Arc::new(LimitExcept { methods, conf }))
}
