//! TLS to origins, as the `proxy_ssl_*`, `grpc_ssl_*` and `uwsgi_ssl_*`
//! directives set it: one settings type ([`UpstreamSsl`]) in each
//! module's location settings, one set of setters that find the module's
//! settings by the directive's prefix, and one table per module made by
//! [`upstream_ssl_directives!`]. Files are read when the configuration
//! loads, so `-t` reports a missing or bad one, and a client certificate
//! is paired with its key once the location is complete. A client
//! certificate or key with variables (nginx 1.21.0) is evaluated for each
//! connection to the origin instead ([`UpstreamSsl::client_key`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::tls::dynamic::Source;
use crate::variables::VarSource;

use super::build::Ctx;
use super::model::{LocConf, PemSource};
use super::parser::{ConfError, Directive, Span};
use super::proxy::Pass;
use super::set_main::{arg, flag, number};
use super::table::R;

/// One module's TLS-to-origin settings (nginx's defaults: no
/// verification, no SNI, the name of the pass target).
#[derive(Clone, Default, Debug)]
pub struct UpstreamSsl {
    pub verify: bool,
    pub trusted_certificate: Option<PathBuf>,
    /// `X_ssl_crl`: revoked origin certificates (PEM CRLs).
    pub crl: Option<PathBuf>,
    /// `X_ssl_verify_depth`; None: nginx's default, 1.
    pub verify_depth: Option<u32>,
    /// The certificate shown to an origin that asks, and its value as
    /// written for messages; None also for `""`, which cancels an
    /// inherited one, as in nginx.
    pub certificate: Option<(PemSource, Arc<str>)>,
    pub certificate_key: Option<PemSource>,
    /// `X_ssl_password_file`: passphrases tried in order on the key.
    pub passwords: Option<Arc<Vec<Vec<u8>>>>,
    pub server_name: bool,
    /// `X_ssl_name`, evaluated for each connection; None: the host of the
    /// pass target (`$proxy_host`).
    pub name: Option<crate::variables::Template>,
    /// `X_ssl_session_reuse off` (on by default, as in nginx).
    pub no_session_reuse: bool,
    /// `X_ssl_conf_command Certificate` / `PrivateKey`: they win over
    /// `X_ssl_certificate` / `X_ssl_certificate_key`, as OpenSSL applies
    /// the commands last.
    pub conf_certificate: Option<(PemSource, Arc<str>)>,
    pub conf_key: Option<PemSource>,
}

impl UpstreamSsl {
    /// The client certificate and key shown to origins, after the
    /// `X_ssl_conf_command`s.
    pub fn pair(&self) -> (&Option<(PemSource, Arc<str>)>, &Option<PemSource>) {
        (
            if self.conf_certificate.is_some() { &self.conf_certificate } else { &self.certificate },
            if self.conf_key.is_some() { &self.conf_key } else { &self.certificate_key },
        )
    }

    /// The client configuration's identity for a worker's cache, and
    /// whether its certificate was chosen by variables (evaluated with
    /// `vars`: an empty certificate value means none, as nginx's
    /// `ngx_http_upstream_ssl_certificate`).
    pub fn client_key(&self, alpn_h2: bool, vars: &dyn VarSource) -> (crate::tls::client::Key, bool) {
        let (client_cert, dynamic) = match self.pair() {
            (Some((cert, _)), Some(key)) => client_pair(cert, key, vars),
            _ => (None, false),
        };
        let key = crate::tls::client::Key {
            verify: self.verify,
            trusted: self.trusted_certificate.clone(),
            crl: self.crl.clone(),
            verify_depth: self.verify_depth.unwrap_or(1),
            sni: self.server_name,
            client_cert,
            passwords: self.passwords.clone(),
            alpn_h2,
            no_session_reuse: self.no_session_reuse,
        };
        (key, dynamic)
    }
}

/// A client certificate and key as sources to load, evaluated for a
/// connection when either has variables; whether one had.
pub fn client_pair(cert: &PemSource, key: &PemSource, vars: &dyn VarSource) -> (Option<(Source, Source)>, bool) {
    if !matches!(cert, PemSource::Vars(..)) && !matches!(key, PemSource::Vars(..)) {
        return (Some((crate::tls::dynamic::fixed(cert), crate::tls::dynamic::fixed(key))), false);
    }
    let Some(cert) = crate::tls::dynamic::evaluate_nonempty(cert, vars) else { return (None, true) };
    let key = crate::tls::dynamic::evaluate(key, vars);
    (Some((cert, key)), true)
}

/// The module's directive table: `X_ssl_*` for the prefix `$p` (a string
/// literal: `"proxy"`).
#[macro_export]
macro_rules! upstream_ssl_directives {
    ($p:literal) => {{
        use $crate::config::table::{HSL, MANY, Set, cmd};
        use $crate::config::upstream_ssl as s;
        &[
            cmd(concat!($p, "_ssl_verify"), HSL, 1, 1, Set::Loc(s::verify)),
            cmd(concat!($p, "_ssl_trusted_certificate"), HSL, 1, 1, Set::Loc(s::trusted_certificate)),
            cmd(concat!($p, "_ssl_crl"), HSL, 1, 1, Set::Loc(s::crl)),
            cmd(concat!($p, "_ssl_certificate"), HSL, 1, 1, Set::Loc(s::certificate)),
            cmd(concat!($p, "_ssl_certificate_key"), HSL, 1, 1, Set::Loc(s::certificate_key)),
            cmd(concat!($p, "_ssl_password_file"), HSL, 1, 1, Set::Loc(s::password_file)),
            cmd(concat!($p, "_ssl_server_name"), HSL, 1, 1, Set::Loc(s::server_name)),
            cmd(concat!($p, "_ssl_name"), HSL, 1, 1, Set::Loc(s::name)),
            // rustls's defaults: TLS 1.2 and 1.3 with its own suites, the
            // whole chain verified, sessions resumed.
            cmd(concat!($p, "_ssl_protocols"), HSL, 1, MANY, Set::Noop),
            cmd(concat!($p, "_ssl_ciphers"), HSL, 1, 1, Set::Noop),
            cmd(concat!($p, "_ssl_session_reuse"), HSL, 1, 1, Set::Loc(s::session_reuse)),
            cmd(concat!($p, "_ssl_verify_depth"), HSL, 1, 1, Set::Loc(s::verify_depth)),
            $crate::config::table::multi(cmd(concat!($p, "_ssl_conf_command"), HSL, 2, 2, Set::Loc(s::conf_command))),
        ]
    }};
}

/// The settings the directive `d` sets, by its module prefix.
fn of<'a>(c: &'a mut LocConf, d: &Directive) -> &'a mut UpstreamSsl {
    if d.name.starts_with("grpc_") {
        &mut c.grpc.ssl
    } else if d.name.starts_with("uwsgi_") {
        &mut c.uwsgi.ssl
    } else {
        &mut c.proxy.ssl
    }
}

pub fn session_reuse(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    of(c, d).no_session_reuse = !flag(d)?;
    Ok(())
}

pub fn verify(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    of(c, d).verify = flag(d)?;
    Ok(())
}

pub fn verify_depth(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    of(c, d).verify_depth = Some(number(d, 0)?.min(100) as u32);
    Ok(())
}

pub fn server_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    of(c, d).server_name = flag(d)?;
    Ok(())
}

/// `X_ssl_name`: `$proxy_host` is the default spelled out.
pub fn name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v == "$proxy_host" {
        of(c, d).name = None;
        return Ok(());
    }
    let t = crate::variables::Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?;
    of(c, d).name = Some(t);
    Ok(())
}

/// A file is loaded here so `-t` reports a missing or bad one (paired
/// with its key once the location is complete: [`check_client_certificate`]);
/// a value with variables is evaluated for each connection; `""` cancels
/// an inherited certificate.
pub fn certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.is_empty() {
        of(c, d).certificate = None;
        return Ok(());
    }
    let src = super::set_ssl::pem_source(d, ctx)?;
    if let PemSource::File(p) = &src {
        crate::tls::certs::load_chain(p).map_err(|m| ConfError::at(m, &d.span))?;
    }
    of(c, d).certificate = Some((src, Arc::from(v)));
    Ok(())
}

pub fn certificate_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    of(c, d).certificate_key = if v.is_empty() { None } else { Some(super::set_ssl::pem_source(d, ctx)?) };
    Ok(())
}

/// Read now, as nginx does: a missing or empty file fails `-t`.
pub fn password_file(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    of(c, d).passwords = Some(super::set_ssl::read_password_file(d, ctx)?);
    Ok(())
}

pub fn crl(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_crls(&p).map_err(|m| ConfError::at(m, &d.span))?;
    of(c, d).crl = Some(p);
    Ok(())
}

pub fn trusted_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_chain(&p).map_err(|m| ConfError::at(m, &d.span))?;
    of(c, d).trusted_certificate = Some(p);
    Ok(())
}

/// `X_ssl_conf_command Certificate|PrivateKey FILE` (other commands are
/// refused by name: `config::ssl_conf_command`).
pub fn conf_command(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let (is_cert, src) = super::ssl_conf_command::client(d, ctx)?;
    let ssl = of(c, d);
    if is_cert {
        ssl.conf_certificate = Some((src, arg(d, 1).into()));
    } else {
        ssl.conf_key = Some(src);
    }
    Ok(())
}

/// A location passing to a TLS origin with a client certificate needs its
/// key, and the pair must load (with the password file) and match; nginx
/// checks at the same point, for TLS origins only.
pub fn check_client_certificate(c: &LocConf, at: &Span) -> R {
    let targets = [
        ("proxy", &c.proxy.pass, &c.proxy.ssl),
        ("grpc", &c.grpc.pass, &c.grpc.ssl),
        ("uwsgi", &c.uwsgi.pass, &c.uwsgi.ssl),
    ];
    for (p, pass, ssl) in targets {
        let (certificate, certificate_key) = ssl.pair();
        let (Some(Pass::Fixed(pass)), Some((cert, written))) = (pass, certificate) else { continue };
        if !pass.tls {
            continue;
        }
        let Some(key) = certificate_key else {
            let why = format!("no \"{p}_ssl_certificate_key\" is defined for certificate \"{written}\"");
            return Err(ConfError::at(why, at));
        };
        // With variables: evaluated, and loaded, for each connection.
        let (Some(cert), Some(key)) = (static_pem(cert), static_pem(key)) else { continue };
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let passwords = ssl.passwords.as_deref().map_or(&[][..], |v| v.as_slice());
        crate::tls::certs::load_pair(&provider, cert, key, passwords, None).map_err(|m| ConfError::at(m, at))?;
    }
    Ok(())
}

/// A file or `data:` value, None with variables.
pub fn static_pem(v: &PemSource) -> Option<crate::tls::certs::Pem<'_>> {
    match v {
        PemSource::File(p) => Some(crate::tls::certs::Pem::File(p)),
        PemSource::Data(d) => Some(crate::tls::certs::Pem::Data(d)),
        PemSource::Vars(..) => None,
    }
}
