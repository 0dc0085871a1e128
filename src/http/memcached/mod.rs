//! nginx's memcached module (`memcached_pass`): the response is the value
//! a memcached server holds for `$memcached_key`, fetched with `get KEY`
//! on the upstream core (`crate::http::proxy`) behind its protocol seam
//! (`crate::config::proxy::Protocol::Memcached`): peers, `upstream`
//! blocks, `keepalive` pools, `memcached_next_upstream` retries and the
//! timeouts are the core's. What is memcached's own:
//!
//! - [`request_head`]: `get KEY\r\n`, the key escaped as nginx's
//!   `NGX_ESCAPE_MEMCACHED` (controls, space and `%` as `%XX`); no key is
//!   nginx's 500;
//! - [`response`]: the `VALUE`/`END` line and the value's framing, whose
//!   `\r\nEND\r\n` trailer decides whether the connection is pooled;
//! - `END` is a 404 answered as nginx's own (`error_page` applies, as
//!   nginx's `intercept_404`), and a value's flags with
//!   `memcached_gzip_flag` set give `Content-Encoding: gzip`.
//!
//! As in nginx the response is not buffered, its type comes from the URI's
//! extension (`types`, `default_type`), and ranges are served from it.

pub mod response;

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::{NextUpstream, Pass, Protocol, UpstreamConf};
use crate::config::set_main::{arg, flag};
use crate::config::table::{Cmd, HSL, LIF, LOC, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

crate::upstream_directives!(up, memcached);

pub static DIRECTIVES: &[Cmd] = &[
    cmd("memcached_pass", LOC | LIF, 1, 1, Set::Loc(memcached_pass)),
    cmd("memcached_bind", HSL, 1, 2, Set::Loc(up::bind)),
    cmd("memcached_socket_keepalive", HSL, 1, 1, Set::Loc(socket_keepalive)),
    cmd("memcached_connect_timeout", HSL, 1, 1, Set::Loc(up::connect_timeout)),
    cmd("memcached_send_timeout", HSL, 1, 1, Set::Loc(up::send_timeout)),
    cmd("memcached_buffer_size", HSL, 1, 1, Set::Loc(up::buffer_size)),
    cmd("memcached_read_timeout", HSL, 1, 1, Set::Loc(up::read_timeout)),
    cmd("memcached_next_upstream", HSL, 1, 5, Set::Loc(next_upstream)),
    cmd("memcached_next_upstream_tries", HSL, 1, 1, Set::Loc(up::next_upstream_tries)),
    cmd("memcached_next_upstream_timeout", HSL, 1, 1, Set::Loc(up::next_upstream_timeout)),
    cmd("memcached_gzip_flag", HSL, 1, 1, Set::Loc(gzip_flag)),
];

/// The location's memcached settings.
#[derive(Clone)]
pub struct MemcachedConf {
    /// `memcached_pass`: the content handler, not inherited.
    pub pass: Option<Pass>,
    /// `$memcached_key` as the configuration defines it (`set`, `map`);
    /// None: never defined, so every request is nginx's 500.
    pub key: Option<Arc<Template>>,
    /// `memcached_gzip_flag` (0: off).
    pub gzip_flag: u32,
    /// What the upstream core reads: nginx's memcached values (not
    /// buffered, ranges served, 404 intercepted).
    pub up: UpstreamConf,
}

impl MemcachedConf {
    pub fn new(prefix: &std::path::Path) -> MemcachedConf {
        MemcachedConf {
            pass: None,
            key: None,
            gzip_flag: 0,
            up: UpstreamConf { buffering: false, force_ranges: true, ..UpstreamConf::new(prefix.join("proxy_temp")) },
        }
    }
}

/// `memcached_pass ADDRESS`: `host:port`, `unix:/path`, an upstream name
/// (or, as sluice's extension, any of these with variables).
fn memcached_pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    if c.memcached.pass.is_some() {
        return Err(ConfError::at("\"memcached_pass\" directive is duplicate", &d.span));
    }
    let raw = arg(d, 0);
    if raw.contains("://") && !raw.contains('$') {
        return Err(ConfError::at(format!("invalid host in upstream \"{raw}\""), &d.span));
    }
    let pass = crate::http::fastcgi::conf::parse_pass(raw, d, ctx, Protocol::Memcached)?;
    // Maps and `set` variables are known before any server is built.
    let defined = crate::http::rewrite::vars::slot("memcached_key").is_some()
        || crate::variables::block_var("memcached_key").is_some();
    c.memcached.key = if defined { Template::compile("$memcached_key").ok().map(Arc::new) } else { None };
    c.clear_handlers();
    c.memcached.pass = Some(pass);
    Ok(())
}

/// nginx's memcached list: `error`, `timeout`, `invalid_response`,
/// `not_found` (the 404 of `END`), `off`.
fn next_upstream(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut n = NextUpstream::OFF;
    for w in &d.args {
        match w.text.as_str() {
            "off" if d.args.len() == 1 => {}
            "error" => n.error = true,
            "timeout" => n.timeout = true,
            "invalid_response" => n.invalid_header = true,
            "not_found" => n.http_404 = true,
            // nginx's bitmask wording (no directive name).
            v => return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span)),
        }
    }
    c.memcached.up.next_upstream = n;
    Ok(())
}

fn gzip_flag(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = crate::config::value::parse_number(arg(d, 0))
        .ok_or_else(|| ConfError::at("\"memcached_gzip_flag\" directive invalid number", &d.span))?;
    c.memcached.gzip_flag = n as u32;
    Ok(())
}

/// nginx's SO_KEEPALIVE on memcached sockets; checked, left to the kernel.
fn socket_keepalive(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    flag(d).map(|_| ())
}

/// The key as sent: `NGX_ESCAPE_MEMCACHED` escapes bytes up to space and
/// `%` as `%XX`.
pub fn escape_key(key: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in key {
        if b <= b' ' || b == b'%' {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

/// `get KEY\r\n`, and the key as sent (the answer must name it); None
/// when `$memcached_key` is empty or was never set (logged; the caller
/// answers 500, as nginx does).
pub fn request_head(ctx: &mut ReqCtx<'_, '_>) -> Option<(Vec<u8>, Vec<u8>)> {
    let key = ctx.conf.memcached.key.as_ref().map(|t| t.render_to_vec(&crate::http::handler::ctx::Vars::request(ctx)));
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        log_req!(ctx, Level::Error, "the \"$memcached_key\" variable is not set");
        return None;
    };
    let mut escaped = Vec::with_capacity(key.len() + 8);
    escape_key(&key, &mut escaped);
    let mut out = Vec::with_capacity(escaped.len() + 6);
    out.extend_from_slice(b"get ");
    out.extend_from_slice(&escaped);
    out.extend_from_slice(b"\r\n");
    Some((out, escaped))
}

/// The key inside `get KEY\r\n`.
pub fn sent_key(head: &[u8]) -> &[u8] {
    head.strip_prefix(b"get ").and_then(|k| k.strip_suffix(b"\r\n")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_escaped_as_nginx() {
        let mut out = Vec::new();
        super::escape_key(b"/a b%c\x01\x7f\xff", &mut out);
        assert_eq!(out, b"/a%20b%25c%01\x7f\xff");
    }
}
