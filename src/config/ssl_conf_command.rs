//! `ssl_conf_command NAME VALUE` (and `proxy_`, `grpc_`, `uwsgi_`
//! `ssl_conf_command`): nginx hands these to OpenSSL's SSL_CONF_cmd after
//! it has set up the context from the other `ssl_*` directives, so they
//! win over those. sluice's TLS is rustls, so the commands are read here
//! and mapped onto the same settings, then applied last, as nginx does.
//!
//! Server side: `Certificate FILE`, `PrivateKey FILE`, `Options` with
//! `SessionTicket` and `ServerPreference` (each may be negated with `-`,
//! several separated by commas), `CipherString` (as `ssl_ciphers`),
//! `Groups` / `Curves` (as `ssl_ecdh_curve`), `MinProtocol` and
//! `MaxProtocol` (`TLSv1.2`, `TLSv1.3`). Towards origins: `Certificate`
//! and `PrivateKey`. Any other command is refused by name, so a
//! configuration does not silently run without it.

use super::build::Ctx;
use super::model::{PemSource, SslConf};
use super::parser::{ConfError, Directive, Span};
use super::table::R;

/// The commands of a level, read and checked.
#[derive(Clone, Default)]
pub struct ConfCommands {
    pub certificate: Option<(PemSource, Span)>,
    pub key: Option<(PemSource, Span)>,
    pub session_tickets: Option<bool>,
    pub server_preference: Option<bool>,
    pub ciphers: Option<(String, Span)>,
    pub groups: Option<(String, Span)>,
    /// `MinProtocol` / `MaxProtocol`: 2 for TLSv1.2, 3 for TLSv1.3.
    pub min: Option<u8>,
    pub max: Option<u8>,
}

impl ConfCommands {
    pub fn is_empty(&self) -> bool {
        self.certificate.is_none()
            && self.key.is_none()
            && self.session_tickets.is_none()
            && self.server_preference.is_none()
            && self.ciphers.is_none()
            && self.groups.is_none()
            && self.min.is_none()
            && self.max.is_none()
    }
}

/// The directive with its value as the only argument, for the setters of
/// the directive a command stands for.
fn value_only(d: &Directive) -> Directive {
    let mut v = d.clone();
    v.args.remove(0);
    v
}

fn unsupported(d: &Directive, what: &str) -> ConfError {
    ConfError::at(
        format!("\"{}\" \"{what}\" is not supported by sluice (its TLS is rustls, not OpenSSL)", d.name),
        &d.span,
    )
}

fn protocol(d: &Directive, v: &str) -> Result<u8, ConfError> {
    match v {
        "TLSv1.2" => Ok(2),
        "TLSv1.3" => Ok(3),
        _ => Err(ConfError::at(
            format!("\"{}\": protocol \"{v}\" is not one sluice speaks (TLSv1.2, TLSv1.3)", d.name),
            &d.span,
        )),
    }
}

/// `ssl_conf_command` at the http, server, stream or mail level.
pub fn server_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    let name = d.args[0].text.as_str();
    let value = d.args[1].text.as_str();
    let cc = &mut c.conf_commands;
    match name {
        "Certificate" => cc.certificate = Some((super::set_ssl::pem_source(&value_only(d), ctx)?, d.span.clone())),
        "PrivateKey" => cc.key = Some((super::set_ssl::pem_source(&value_only(d), ctx)?, d.span.clone())),
        "Options" => {
            for opt in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                let (on, flag) = match opt.strip_prefix('-') {
                    Some(f) => (false, f),
                    None => (true, opt),
                };
                match flag {
                    "SessionTicket" => cc.session_tickets = Some(on),
                    "ServerPreference" => cc.server_preference = Some(on),
                    other => return Err(unsupported(d, &format!("Options {other}"))),
                }
            }
        }
        "CipherString" => {
            let mut scratch = SslConf::default();
            super::set_ssl::ciphers_in(&mut scratch, &value_only(d), ctx)?;
            c.conf_commands.ciphers = scratch.ciphers;
        }
        "Groups" | "Curves" => {
            let mut scratch = SslConf::default();
            super::set_ssl::ecdh_curve_in(&mut scratch, &value_only(d), ctx)?;
            c.conf_commands.groups = scratch.ecdh_curve;
        }
        "MinProtocol" => cc.min = Some(protocol(d, value)?),
        "MaxProtocol" => cc.max = Some(protocol(d, value)?),
        other => return Err(unsupported(d, other)),
    }
    Ok(())
}

/// The first `ssl_conf_command` of a level replaces the inherited ones.
pub fn reset(c: &mut SslConf) {
    c.conf_commands = ConfCommands::default();
}

/// `X_ssl_conf_command` towards an origin: the client certificate and key
/// it shows, instead of `X_ssl_certificate` and `X_ssl_certificate_key`.
pub fn client(d: &Directive, ctx: &Ctx) -> Result<(bool, PemSource), ConfError> {
    match d.args[0].text.as_str() {
        "Certificate" => Ok((true, super::set_ssl::pem_source(&value_only(d), ctx)?)),
        "PrivateKey" => Ok((false, super::set_ssl::pem_source(&value_only(d), ctx)?)),
        other => Err(unsupported(d, other)),
    }
}

impl SslConf {
    /// The settings with the level's `ssl_conf_command`s applied over the
    /// other directives, as OpenSSL applies them after nginx's set-up.
    pub fn with_conf_commands(&self) -> std::borrow::Cow<'_, SslConf> {
        let cc = &self.conf_commands;
        if cc.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut s = self.clone();
        if let Some(c) = &cc.certificate {
            s.certificates = vec![c.clone()];
        }
        if let Some(k) = &cc.key {
            s.keys = vec![k.clone()];
        }
        if let Some(on) = cc.session_tickets {
            s.session_tickets = on;
        }
        if let Some(on) = cc.server_preference {
            s.prefer_server_ciphers = on;
        }
        if cc.ciphers.is_some() {
            s.ciphers = cc.ciphers.clone();
        }
        if cc.groups.is_some() {
            s.ecdh_curve = cc.groups.clone();
        }
        if let Some(m) = cc.min {
            s.tls12 &= m <= 2;
        }
        if let Some(m) = cc.max {
            s.tls13 &= m >= 3;
        }
        std::borrow::Cow::Owned(s)
    }
}
