//! The uwsgi module's directives (`uwsgi_*`), with nginx's defaults and
//! messages. The target is parsed as `fastcgi_pass` parses its own (an
//! address or an upstream, no scheme); the settings shared with the
//! reverse proxy live in [`UwsgiConf::up`] ([`crate::upstream_directives!`]).

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::{Pass, Protocol, UpstreamConf};
use crate::config::set_main::{arg, flag};
use crate::config::table::{Cmd, HSL, LOC, R, Set, cmd, list};
use crate::fastcgi::conf::Param;

crate::upstream_directives!(up, uwsgi);

pub static DIRECTIVES: &[Cmd] = &[
    cmd("uwsgi_pass", LOC, 1, 1, Set::Loc(uwsgi_pass)),
    list(cmd("uwsgi_param", HSL, 2, 3, Set::Loc(uwsgi_param)), reset_params),
    cmd("uwsgi_modifier1", HSL, 1, 1, Set::Loc(uwsgi_modifier1)),
    cmd("uwsgi_modifier2", HSL, 1, 1, Set::Loc(uwsgi_modifier2)),
    cmd("uwsgi_pass_request_headers", HSL, 1, 1, Set::Loc(uwsgi_pass_request_headers)),
    cmd("uwsgi_pass_request_body", HSL, 1, 1, Set::Loc(uwsgi_pass_request_body)),
    cmd("uwsgi_connect_timeout", HSL, 1, 1, Set::Loc(up::connect_timeout)),
    cmd("uwsgi_send_timeout", HSL, 1, 1, Set::Loc(up::send_timeout)),
    cmd("uwsgi_read_timeout", HSL, 1, 1, Set::Loc(up::read_timeout)),
    cmd("uwsgi_next_upstream", HSL, 1, 12, Set::Loc(up::next_upstream)),
    cmd("uwsgi_next_upstream_tries", HSL, 1, 1, Set::Loc(up::next_upstream_tries)),
    cmd("uwsgi_next_upstream_timeout", HSL, 1, 1, Set::Loc(up::next_upstream_timeout)),
    cmd("uwsgi_buffering", HSL, 1, 1, Set::Loc(up::buffering)),
    cmd("uwsgi_request_buffering", HSL, 1, 1, Set::Loc(up::request_buffering)),
    cmd("uwsgi_buffer_size", HSL, 1, 1, Set::Loc(up::buffer_size)),
    cmd("uwsgi_buffers", HSL, 2, 2, Set::Loc(up::buffers)),
    cmd("uwsgi_busy_buffers_size", HSL, 1, 1, Set::Loc(up::busy_buffers_size)),
    cmd("uwsgi_temp_file_write_size", HSL, 1, 1, Set::Loc(up::temp_file_write_size)),
    cmd("uwsgi_max_temp_file_size", HSL, 1, 1, Set::Loc(up::max_temp_file_size)),
    cmd("uwsgi_temp_path", HSL, 1, 4, Set::Loc(up::temp_path)),
    cmd("uwsgi_intercept_errors", HSL, 1, 1, Set::Loc(up::intercept_errors)),
    cmd("uwsgi_bind", HSL, 1, 2, Set::Loc(up::bind)),
    cmd("uwsgi_limit_rate", HSL, 1, 1, Set::Loc(up::limit_rate)),
    cmd("uwsgi_ignore_client_abort", HSL, 1, 1, Set::Loc(up::ignore_client_abort)),
    list(cmd("uwsgi_hide_header", HSL, 1, 1, Set::Loc(up::hide_header)), up::reset_hide_headers),
    list(cmd("uwsgi_pass_header", HSL, 1, 1, Set::Loc(up::pass_header)), up::reset_pass_headers),
    // nginx's SO_KEEPALIVE on origin sockets; sluice leaves it to the kernel.
    cmd("uwsgi_socket_keepalive", HSL, 1, 1, Set::Ctx(socket_keepalive)),
];

/// The per-location uwsgi settings.
#[derive(Clone)]
pub struct UwsgiConf {
    /// `uwsgi_pass`: the content handler, not inherited.
    pub pass: Option<Pass>,
    pub params: Vec<Param>,
    /// The packet header's two modifiers (0 and 0: a WSGI request).
    pub modifier1: u8,
    pub modifier2: u8,
    pub pass_request_headers: bool,
    pub pass_request_body: bool,
    /// What the upstream core reads (shared with `proxy_*`).
    pub up: UpstreamConf,
}

impl UwsgiConf {
    /// nginx's defaults, temporary files under `PREFIX/uwsgi_temp`.
    pub fn new(prefix: &std::path::Path) -> UwsgiConf {
        UwsgiConf {
            pass: None,
            params: Vec::new(),
            modifier1: 0,
            modifier2: 0,
            pass_request_headers: true,
            pass_request_body: true,
            up: UpstreamConf::new(prefix.join("uwsgi_temp")),
        }
    }
}

impl Default for UwsgiConf {
    fn default() -> Self {
        UwsgiConf::new(std::path::Path::new(""))
    }
}

fn reset_params(c: &mut LocConf) {
    c.uwsgi.params.clear();
}

/// `uwsgi_pass ADDRESS`: `host:port`, `unix:/path`, an upstream name, or
/// any of these with variables; `uwsgi://` may prefix it, as in nginx.
fn uwsgi_pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    if c.uwsgi.pass.is_some() {
        return Err(ConfError::at("\"uwsgi_pass\" directive is duplicate", &d.span));
    }
    let written = arg(d, 0);
    if written.starts_with("suwsgi://") {
        return Err(ConfError::at("\"suwsgi://\" (uwsgi over TLS) is not supported yet", &d.span));
    }
    let raw = written.strip_prefix("uwsgi://").unwrap_or(written);
    if raw.contains("://") && !raw.contains('$') {
        return Err(ConfError::at(format!("invalid host in upstream \"{written}\""), &d.span));
    }
    let pass = crate::fastcgi::conf::parse_pass(raw, d, ctx, Protocol::Uwsgi)?;
    c.uwsgi.pass = Some(pass);
    c.proxy.pass = None;
    c.fastcgi.pass = None;
    Ok(())
}

fn uwsgi_param(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = crate::fastcgi::conf::parse_param(d, ctx)?;
    c.uwsgi.params.push(p);
    Ok(())
}

/// nginx's `ngx_conf_set_num_slot` bounded to a byte, as its post handler
/// bounds it.
fn modifier(d: &Directive) -> Result<u8, ConfError> {
    let v = arg(d, 0);
    let n = crate::config::value::parse_number(v)
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid number", d.name), &d.span))?;
    u8::try_from(n).map_err(|_| ConfError::at("value must be between 0 and 255", &d.span))
}

fn uwsgi_modifier1(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.modifier1 = modifier(d)?;
    Ok(())
}

fn uwsgi_modifier2(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.modifier2 = modifier(d)?;
    Ok(())
}

fn uwsgi_pass_request_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.pass_request_headers = flag(d)?;
    Ok(())
}

fn uwsgi_pass_request_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.pass_request_body = flag(d)?;
    Ok(())
}

fn socket_keepalive(d: &Directive, _: &mut Ctx) -> R {
    flag(d).map(|_| ())
}
