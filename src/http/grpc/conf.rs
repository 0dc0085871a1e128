//! The gRPC module's directives (`grpc_*`), with nginx's defaults and
//! messages: `grpc_pass`, `grpc_set_header`, the `grpc_ssl_*` settings of
//! TLS to the origin, and the settings every upstream module shares
//! (through [`crate::upstream_directives!`]).

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::{self, Pass, Protocol, ProxyPass, UpstreamConf};
use crate::config::set_main::{arg, flag};
use crate::config::table::{Cmd, HSL, LIF, LOC, MANY, R, Set, cmd, list};
use crate::variables::Template;

crate::upstream_directives!(up, grpc);

/// The per-location settings of the gRPC module.
#[derive(Clone)]
pub struct GrpcConf {
    /// `grpc_pass`: the content handler, not inherited.
    pub pass: Option<Pass>,
    /// `grpc_set_header`, on top of nginx's defaults ([`DEFAULT_HEADERS`]);
    /// an empty value removes the header.
    pub set_headers: Vec<(String, Template)>,
    /// `grpc_ssl_*`: TLS to a `grpcs://` origin, as `proxy_ssl_*`.
    pub ssl: crate::config::upstream_ssl::UpstreamSsl,
    /// What the upstream core reads (shared with `proxy_*`).
    pub up: UpstreamConf,
}

impl GrpcConf {
    /// nginx's defaults: gRPC responses are not buffered by default in
    /// nginx either way (its module streams them); `grpc_buffer_size`
    /// bounds the head.
    pub fn new(prefix: &std::path::Path) -> GrpcConf {
        let mut up = UpstreamConf::new(prefix.join("proxy_temp"));
        // nginx's grpc module has no request buffering directive: the
        // body is read as proxy's default does.
        up.buffering = false;
        up.cache = crate::http::cache::conf::CacheConf { convert_head: false, ..Default::default() };
        GrpcConf { pass: None, set_headers: Vec::new(), ssl: Default::default(), up }
    }
}

/// The headers nginx's grpc module sets by default (ngx_http_grpc_headers):
/// the client's Host becomes `:authority` only when set explicitly, the
/// hop-by-hop ones are dropped, `TE: trailers` is sent when the client
/// asked for trailers.
pub const DEFAULT_HEADERS: &[(&str, &str)] = &[
    ("Content-Length", "$content_length"),
    ("TE", ""),
    ("Host", ""),
    ("Connection", ""),
    ("Transfer-Encoding", ""),
    ("Keep-Alive", ""),
    ("Expect", ""),
    ("Upgrade", ""),
];

pub static DIRECTIVES: &[Cmd] = &[
    cmd("grpc_pass", LOC | LIF, 1, 1, Set::Loc(grpc_pass)),
    list(cmd("grpc_set_header", HSL, 2, 2, Set::Loc(grpc_set_header)), reset_set_headers),
    cmd("grpc_connect_timeout", HSL, 1, 1, Set::Loc(up::connect_timeout)),
    cmd("grpc_send_timeout", HSL, 1, 1, Set::Loc(up::send_timeout)),
    cmd("grpc_read_timeout", HSL, 1, 1, Set::Loc(up::read_timeout)),
    cmd("grpc_next_upstream", HSL, 1, 12, Set::Loc(up::next_upstream)),
    cmd("grpc_next_upstream_tries", HSL, 1, 1, Set::Loc(up::next_upstream_tries)),
    cmd("grpc_next_upstream_timeout", HSL, 1, 1, Set::Loc(up::next_upstream_timeout)),
    cmd("grpc_buffer_size", HSL, 1, 1, Set::Loc(up::buffer_size)),
    cmd("grpc_intercept_errors", HSL, 1, 1, Set::Loc(up::intercept_errors)),
    cmd("grpc_bind", HSL, 1, 2, Set::Loc(up::bind)),
    list(cmd("grpc_hide_header", HSL, 1, 1, Set::Loc(up::hide_header)), up::reset_hide_headers),
    list(cmd("grpc_pass_header", HSL, 1, 1, Set::Loc(up::pass_header)), up::reset_pass_headers),
    cmd("grpc_ignore_headers", HSL, 1, MANY, Set::Ctx(ignore_headers)),
    // nginx's SO_KEEPALIVE on origin sockets; sluice leaves it to the
    // kernel, as for proxy_socket_keepalive.
    cmd("grpc_socket_keepalive", HSL, 1, 1, Set::Ctx(on_off)),
];

/// `grpc_ssl_*`.
pub static SSL_DIRECTIVES: &[Cmd] = crate::upstream_ssl_directives!("grpc");

fn reset_set_headers(c: &mut LocConf) {
    c.grpc.set_headers.clear();
}

/// `grpc_pass [grpc://|grpcs://]ADDRESS`: `host:port`, `unix:/path`, an
/// upstream name, or any of these with variables.
fn grpc_pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    if c.grpc.pass.is_some() {
        return Err(ConfError::at("\"grpc_pass\" directive is duplicate", &d.span));
    }
    let written = arg(d, 0);
    let (raw, tls) = if let Some(r) = written.strip_prefix("grpc://") {
        (r, false)
    } else if let Some(r) = written.strip_prefix("grpcs://") {
        (r, true)
    } else {
        (written, false)
    };
    if written.contains('$') {
        // The scheme, if any, is read from the value per request, as nginx
        // does (`grpc_pass $arg_b` with `grpc://u`).
        let tpl = Template::compile(written).map_err(|e| ConfError::at(e, &d.span))?;
        c.clear_handlers();
        c.grpc.pass = Some(Pass::Vars(Arc::new(tpl)));
        return Ok(());
    }
    if raw.is_empty() || raw == "unix:" || raw.contains('/') && !raw.starts_with("unix:") {
        return Err(ConfError::at(format!("invalid host in upstream \"{written}\""), &d.span));
    }
    if tls && raw.starts_with("unix:") {
        return Err(ConfError::at(format!("TLS to a unix socket is not supported in \"{written}\""), &d.span));
    }
    let upstream = match ctx.upstreams.get(raw) {
        Some(u) => u.clone(),
        None => {
            let u =
                proxy::implicit_upstream(raw, tls, ctx.upstream_list.len()).map_err(|m| ConfError::at(m, &d.span))?;
            let u = Arc::new(u);
            ctx.upstream_list.push(u.clone());
            u
        }
    };
    c.clear_handlers();
    c.grpc.pass = Some(Pass::Fixed(Arc::new(ProxyPass {
        upstream,
        uri: None,
        uri_whole: false,
        tls,
        proxy_host: authority(raw),
        location_len: ctx.location_len,
        protocol: Protocol::Grpc,
    })));
    Ok(())
}

/// `:authority` as nginx's grpc module sends it: the address as written
/// (`localhost` for a unix socket).
pub fn authority(raw: &str) -> String {
    if raw.starts_with("unix:") { "localhost".to_string() } else { raw.to_string() }
}

fn grpc_set_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let name = arg(d, 0).to_string();
    let value = Template::compile(arg(d, 1)).map_err(|e| ConfError::at(e, &d.span))?;
    c.grpc.set_headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
    c.grpc.set_headers.push((name, value));
    Ok(())
}

/// `grpc_ignore_headers`: checked as nginx's (its names: X-Accel-*,
/// Expires, Cache-Control, Set-Cookie, Vary); gRPC responses are never
/// cached or redirected by sluice, so there is nothing to ignore.
fn ignore_headers(d: &Directive, _: &mut Ctx) -> R {
    const KNOWN: &[&str] = &[
        "X-Accel-Redirect",
        "X-Accel-Expires",
        "X-Accel-Limit-Rate",
        "X-Accel-Buffering",
        "X-Accel-Charset",
        "Expires",
        "Cache-Control",
        "Set-Cookie",
        "Vary",
    ];
    for a in &d.args {
        if !KNOWN.iter().any(|k| k.eq_ignore_ascii_case(&a.text)) {
            return Err(ConfError::at(format!("invalid value \"{}\" in \"{}\" directive", a.text, d.name), &d.span));
        }
    }
    Ok(())
}

fn on_off(d: &Directive, _: &mut Ctx) -> R {
    flag(d).map(|_| ())
}
