//! The gRPC module's directives (`grpc_*`), with nginx's defaults and
//! messages: `grpc_pass`, `grpc_set_header`, the `grpc_ssl_*` settings of
//! TLS to the origin, and the settings every upstream module shares
//! (through [`crate::upstream_directives!`]).

use std::path::PathBuf;
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
    pub ssl: GrpcSsl,
    /// What the upstream core reads (shared with `proxy_*`).
    pub up: UpstreamConf,
}

/// `grpc_ssl_*`: TLS to a `grpcs://` origin, as `proxy_ssl_*`.
#[derive(Clone, Default)]
pub struct GrpcSsl {
    pub verify: bool,
    pub trusted_certificate: Option<PathBuf>,
    pub crl: Option<PathBuf>,
    /// Resolved, and as written for messages.
    pub certificate: Option<(PathBuf, Arc<str>)>,
    pub certificate_key: Option<PathBuf>,
    pub server_name: bool,
    /// `grpc_ssl_name`; None: the host of `grpc_pass`.
    pub name: Option<String>,
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
        GrpcConf { pass: None, set_headers: Vec::new(), ssl: GrpcSsl::default(), up }
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
    cmd("grpc_ssl_verify", HSL, 1, 1, Set::Loc(ssl_verify)),
    cmd("grpc_ssl_trusted_certificate", HSL, 1, 1, Set::Loc(ssl_trusted_certificate)),
    cmd("grpc_ssl_crl", HSL, 1, 1, Set::Loc(ssl_crl)),
    cmd("grpc_ssl_certificate", HSL, 1, 1, Set::Loc(ssl_certificate)),
    cmd("grpc_ssl_certificate_key", HSL, 1, 1, Set::Loc(ssl_certificate_key)),
    cmd("grpc_ssl_server_name", HSL, 1, 1, Set::Loc(ssl_server_name)),
    cmd("grpc_ssl_name", HSL, 1, 1, Set::Loc(ssl_name)),
    // As their proxy_ssl_* twins: rustls negotiates TLS 1.2 and 1.3 with
    // its own suites, verifies the whole chain, and resumes sessions.
    cmd("grpc_ssl_protocols", HSL, 1, MANY, Set::Noop),
    cmd("grpc_ssl_ciphers", HSL, 1, 1, Set::Noop),
    cmd("grpc_ssl_session_reuse", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("grpc_ssl_verify_depth", HSL, 1, 1, Set::Noop),
    cmd("grpc_ssl_password_file", HSL, 1, 1, Set::Ctx(no_password_file)),
    cmd("grpc_ssl_conf_command", HSL, 2, 2, Set::Ctx(no_conf_command)),
];

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

fn no_password_file(d: &Directive, _: &mut Ctx) -> R {
    Err(ConfError::at("\"grpc_ssl_password_file\" is not supported: keys must be unencrypted", &d.span))
}

/// nginx passes these to OpenSSL's SSL_CONF_cmd; rustls has no such
/// interface, so a configuration relying on one is refused.
fn no_conf_command(d: &Directive, _: &mut Ctx) -> R {
    Err(ConfError::at("\"grpc_ssl_conf_command\" is not supported (sluice's TLS is rustls, not OpenSSL)", &d.span))
}

fn ssl_verify(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.grpc.ssl.verify = flag(d)?;
    Ok(())
}

fn ssl_server_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.grpc.ssl.server_name = flag(d)?;
    Ok(())
}

fn ssl_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') {
        return Err(ConfError::at("variables in \"grpc_ssl_name\" are not supported yet", &d.span));
    }
    c.grpc.ssl.name = Some(v.to_string());
    Ok(())
}

/// Loaded here so `-t` reports a missing or bad file.
fn ssl_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') {
        return Err(ConfError::at("variables in \"grpc_ssl_certificate\" are not supported yet", &d.span));
    }
    let p = ctx.conf_path(v);
    crate::tls::certs::load_chain(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.grpc.ssl.certificate = Some((p, Arc::from(v)));
    Ok(())
}

fn ssl_certificate_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') {
        return Err(ConfError::at("variables in \"grpc_ssl_certificate_key\" are not supported yet", &d.span));
    }
    c.grpc.ssl.certificate_key = Some(ctx.conf_path(v));
    Ok(())
}

fn ssl_crl(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_crls(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.grpc.ssl.crl = Some(p);
    Ok(())
}

fn ssl_trusted_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_chain(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.grpc.ssl.trusted_certificate = Some(p);
    Ok(())
}

/// A `grpcs://` location with a client certificate needs its key, and the
/// pair must load and match (as `proxy_ssl_certificate`).
pub fn check_client_certificate(c: &LocConf, at: &crate::config::parser::Span) -> R {
    let (Some(Pass::Fixed(p)), Some((cert, written))) = (&c.grpc.pass, &c.grpc.ssl.certificate) else {
        return Ok(());
    };
    if !p.tls {
        return Ok(());
    }
    let Some(key) = &c.grpc.ssl.certificate_key else {
        let why = format!("no \"grpc_ssl_certificate_key\" is defined for certificate \"{written}\"");
        return Err(ConfError::at(why, at));
    };
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    crate::tls::certs::load_pair(
        &provider,
        crate::tls::certs::Pem::File(cert),
        crate::tls::certs::Pem::File(key),
        &[],
        None,
    )
    .map_err(|m| ConfError::at(m, at))?;
    Ok(())
}
