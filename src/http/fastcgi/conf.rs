//! The FastCGI module's directives (`fastcgi_*`), with nginx's defaults and
//! messages. The settings the upstream core shares with the reverse proxy
//! (timeouts, retries, buffering, header filtering) live in
//! [`FastcgiConf::up`] and are parsed by the same code as their `proxy_*`
//! twins ([`crate::upstream_directives!`]).

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::{self, Pass, Protocol, ProxyPass, UpstreamConf};
use crate::config::set_main::{arg, flag, invalid};
use crate::config::table::{Cmd, HSL, LOC, R, Set, cmd, list};
use crate::variables::Template;

crate::upstream_directives!(up, fastcgi);

pub static DIRECTIVES: &[Cmd] = &[
    cmd("fastcgi_pass", LOC, 1, 1, Set::Loc(fastcgi_pass)),
    list(cmd("fastcgi_param", HSL, 2, 3, Set::Loc(fastcgi_param)), reset_params),
    cmd("fastcgi_index", HSL, 1, 1, Set::Loc(fastcgi_index)),
    cmd("fastcgi_split_path_info", LOC, 1, 1, Set::Loc(fastcgi_split_path_info)),
    cmd("fastcgi_keep_conn", HSL, 1, 1, Set::Loc(fastcgi_keep_conn)),
    cmd("fastcgi_pass_request_headers", HSL, 1, 1, Set::Loc(fastcgi_pass_request_headers)),
    cmd("fastcgi_pass_request_body", HSL, 1, 1, Set::Loc(fastcgi_pass_request_body)),
    list(cmd("fastcgi_catch_stderr", HSL, 1, 1, Set::Loc(fastcgi_catch_stderr)), reset_catch_stderr),
    cmd("fastcgi_connect_timeout", HSL, 1, 1, Set::Loc(up::connect_timeout)),
    cmd("fastcgi_send_timeout", HSL, 1, 1, Set::Loc(up::send_timeout)),
    cmd("fastcgi_read_timeout", HSL, 1, 1, Set::Loc(up::read_timeout)),
    cmd("fastcgi_next_upstream", HSL, 1, 12, Set::Loc(up::next_upstream)),
    cmd("fastcgi_next_upstream_tries", HSL, 1, 1, Set::Loc(up::next_upstream_tries)),
    cmd("fastcgi_next_upstream_timeout", HSL, 1, 1, Set::Loc(up::next_upstream_timeout)),
    cmd("fastcgi_buffering", HSL, 1, 1, Set::Loc(up::buffering)),
    cmd("fastcgi_request_buffering", HSL, 1, 1, Set::Loc(up::request_buffering)),
    cmd("fastcgi_buffer_size", HSL, 1, 1, Set::Loc(up::buffer_size)),
    cmd("fastcgi_buffers", HSL, 2, 2, Set::Loc(up::buffers)),
    cmd("fastcgi_busy_buffers_size", HSL, 1, 1, Set::Loc(up::busy_buffers_size)),
    cmd("fastcgi_temp_file_write_size", HSL, 1, 1, Set::Loc(up::temp_file_write_size)),
    cmd("fastcgi_max_temp_file_size", HSL, 1, 1, Set::Loc(up::max_temp_file_size)),
    cmd("fastcgi_temp_path", HSL, 1, 4, Set::Loc(up::temp_path)),
    cmd("fastcgi_intercept_errors", HSL, 1, 1, Set::Loc(up::intercept_errors)),
    cmd("fastcgi_force_ranges", HSL, 1, 1, Set::Loc(up::force_ranges)),
    cmd("fastcgi_bind", HSL, 1, 2, Set::Loc(up::bind)),
    cmd("fastcgi_limit_rate", HSL, 1, 1, Set::Loc(up::limit_rate)),
    cmd("fastcgi_ignore_client_abort", HSL, 1, 1, Set::Loc(up::ignore_client_abort)),
    list(cmd("fastcgi_hide_header", HSL, 1, 1, Set::Loc(up::hide_header)), up::reset_hide_headers),
    list(cmd("fastcgi_pass_header", HSL, 1, 1, Set::Loc(up::pass_header)), up::reset_pass_headers),
];

/// One `fastcgi_param NAME VALUE [if_not_empty]`.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: Vec<u8>,
    pub value: Template,
    pub if_not_empty: bool,
}

/// The per-location FastCGI settings.
#[derive(Clone)]
pub struct FastcgiConf {
    /// `fastcgi_pass`: the content handler, not inherited. The target is
    /// the proxy's (an upstream and its peers), marked [`Protocol::FastCgi`].
    pub pass: Option<Pass>,
    pub params: Vec<Param>,
    /// `fastcgi_index`: appended to a `$fastcgi_script_name` ending in `/`.
    pub index: Option<Vec<u8>>,
    /// `fastcgi_split_path_info`: two captures, script name and path info.
    pub split_path_info: Option<Arc<regex::bytes::Regex>>,
    pub keep_conn: bool,
    pub pass_request_headers: bool,
    /// `fastcgi_pass_request_body off`: STDIN stays empty.
    pub pass_request_body: bool,
    /// `fastcgi_catch_stderr`: a response whose stderr holds one of these
    /// is a bad response (`invalid_header`).
    pub catch_stderr: Vec<Vec<u8>>,
    /// What the upstream core reads (shared with `proxy_*`).
    pub up: UpstreamConf,
}

impl FastcgiConf {
    /// nginx's defaults, temporary files under `PREFIX/fastcgi_temp`.
    pub fn new(prefix: &std::path::Path) -> FastcgiConf {
        FastcgiConf {
            pass: None,
            params: Vec::new(),
            index: None,
            split_path_info: None,
            keep_conn: false,
            pass_request_headers: true,
            pass_request_body: true,
            catch_stderr: Vec::new(),
            up: UpstreamConf { cache: fastcgi_cache(), ..UpstreamConf::new(prefix.join("fastcgi_temp")) },
        }
    }
}

/// `fastcgi_cache*`'s defaults: nginx has no `fastcgi_cache_convert_head`
/// (a HEAD reaches the application as HEAD) and no default key (one is
/// warned about at load time, see `crate::http::cache::conf::check_level`).
fn fastcgi_cache() -> crate::http::cache::conf::CacheConf {
    crate::http::cache::conf::CacheConf { convert_head: false, ..Default::default() }
}

impl Default for FastcgiConf {
    fn default() -> Self {
        FastcgiConf::new(std::path::Path::new(""))
    }
}

fn reset_params(c: &mut LocConf) {
    c.fastcgi.params.clear();
}

fn reset_catch_stderr(c: &mut LocConf) {
    c.fastcgi.catch_stderr.clear();
}

/// `fastcgi_pass ADDRESS`: `host:port`, `unix:/path`, an upstream name, or
/// any of these with variables (resolved per request, as nginx without a
/// `resolver`).
pub fn fastcgi_pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let raw = arg(d, 0);
    if c.fastcgi.pass.is_some() {
        return Err(ConfError::at("\"fastcgi_pass\" directive is duplicate", &d.span));
    }
    // nginx takes an address without a scheme; `fastcgi://` is none.
    if raw.contains("://") && !raw.contains('$') {
        return Err(ConfError::at(format!("invalid host in upstream \"{}\"", raw), &d.span));
    }
    let pass = parse_pass(raw, d, ctx, Protocol::FastCgi)?;
    c.clear_handlers();
    c.fastcgi.pass = Some(pass);
    Ok(())
}

/// The target of `fastcgi_pass` or `uwsgi_pass` (`raw` without a scheme):
/// with variables, a template resolved per request; else an upstream
/// block, or an address made into an implicit upstream.
pub fn parse_pass(raw: &str, d: &Directive, ctx: &mut Ctx, protocol: Protocol) -> Result<Pass, ConfError> {
    if raw.contains('$') {
        let tpl = Template::compile(raw).map_err(|e| ConfError::at(e, &d.span))?;
        return Ok(Pass::Vars(Arc::new(tpl)));
    }
    let upstream = match ctx.upstreams.get(raw) {
        Some(u) => u.clone(),
        None => {
            if raw.is_empty() || raw == "unix:" {
                return Err(ConfError::at(format!("no host in \"{}\" of the \"{}\" directive", raw, d.name), &d.span));
            }
            if !raw.starts_with("unix:") && !has_port(raw) {
                // nginx: a name without a port must be an upstream block
                // (defined later in the file, or missing).
                return Err(ConfError::at(format!("no port in upstream \"{}\"", raw), &d.span));
            }
            let u =
                proxy::implicit_upstream(raw, false, ctx.upstream_list.len()).map_err(|m| ConfError::at(m, &d.span))?;
            let u = Arc::new(u);
            ctx.upstream_list.push(u.clone());
            u
        }
    };
    Ok(Pass::Fixed(Arc::new(target(upstream, protocol))))
}

/// Whether `host:port` (or `[v6]:port`) names a port.
pub(crate) fn has_port(a: &str) -> bool {
    match a.rsplit_once(':') {
        Some((h, p)) => p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']')),
        None => false,
    }
}

/// A FastCGI (or uwsgi) target on `upstream`.
pub fn target(upstream: Arc<proxy::Upstream>, protocol: Protocol) -> ProxyPass {
    ProxyPass {
        upstream,
        uri: None,
        uri_whole: false,
        tls: false,
        proxy_host: String::new(),
        location_len: 0,
        protocol,
    }
}

pub fn fastcgi_param(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = parse_param(d, ctx)?;
    c.fastcgi.params.push(p);
    Ok(())
}

/// `fastcgi_param` / `uwsgi_param NAME VALUE [if_not_empty]`.
pub fn parse_param(d: &Directive, _: &mut Ctx) -> Result<Param, ConfError> {
    let if_not_empty = match d.args.get(2).map(|w| w.text.as_str()) {
        None => false,
        Some("if_not_empty") => true,
        Some(v) => return Err(invalid(d, v)),
    };
    let value = Template::compile(arg(d, 1)).map_err(|e| ConfError::at(e, &d.span))?;
    Ok(Param { name: arg(d, 0).as_bytes().to_vec(), value, if_not_empty })
}

pub fn fastcgi_index(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.fastcgi.index = Some(arg(d, 0).as_bytes().to_vec());
    Ok(())
}

pub fn fastcgi_split_path_info(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let pat = arg(d, 0);
    let re = regex::bytes::Regex::new(pat)
        .map_err(|e| ConfError::at(format!("invalid regex \"{}\": {}", pat, e), &d.span))?;
    if re.captures_len() < 3 {
        return Err(ConfError::at(format!("pattern \"{}\" must have 2 captures", pat), &d.span));
    }
    c.fastcgi.split_path_info = Some(Arc::new(re));
    Ok(())
}

pub fn fastcgi_keep_conn(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.fastcgi.keep_conn = flag(d)?;
    Ok(())
}

pub fn fastcgi_pass_request_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.fastcgi.pass_request_body = flag(d)?;
    Ok(())
}

pub fn fastcgi_pass_request_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.fastcgi.pass_request_headers = flag(d)?;
    Ok(())
}

pub fn fastcgi_catch_stderr(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.fastcgi.catch_stderr.push(arg(d, 0).as_bytes().to_vec());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        assert!(has_port("127.0.0.1:9000"));
        assert!(has_port("[::1]:9000"));
        assert!(has_port("php:9000"));
        assert!(!has_port("php"));
        assert!(!has_port("::1"));
    }
}
