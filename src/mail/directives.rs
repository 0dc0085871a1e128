//! The mail family's directive table (nginx's `ngx_mail_*_commands`):
//! each directive with the levels it may appear at and its argument
//! counts, checked with nginx's messages, and the setters of the settings
//! both levels share. `server` and `listen` are handled by `build`.

use std::sync::Arc;

use super::conf::{AuthHttp, Protocol, SrvConf, StartTls, auth};
use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Directive};
use crate::config::set_main::{arg, flag, invalid};
use crate::config::set_ssl;
use crate::config::value;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Main,
    Server,
}

const M: u8 = 1;
const S: u8 = 2;
const MS: u8 = M | S;
const MANY: usize = usize::MAX;

/// (name, levels, min args, max args, block)
static TABLE: &[(&str, u8, usize, usize, bool)] = &[
    ("server", M, 0, 0, true),
    ("listen", S, 1, MANY, false),
    ("protocol", S, 1, 1, false),
    ("server_name", MS, 1, 1, false),
    ("error_log", MS, 1, 2, false),
    ("timeout", MS, 1, 1, false),
    ("max_errors", MS, 1, 1, false),
    ("resolver", MS, 1, MANY, false),
    ("resolver_timeout", MS, 1, 1, false),
    ("auth_http", MS, 1, 1, false),
    ("auth_http_header", MS, 2, 2, false),
    ("auth_http_timeout", MS, 1, 1, false),
    ("auth_http_pass_client_cert", MS, 1, 1, false),
    ("proxy", MS, 1, 1, false),
    ("proxy_buffer", MS, 1, 1, false),
    ("proxy_timeout", MS, 1, 1, false),
    ("proxy_pass_error_message", MS, 1, 1, false),
    ("proxy_protocol", MS, 1, 1, false),
    ("proxy_smtp_auth", MS, 1, 1, false),
    ("xclient", MS, 1, 1, false),
    ("smtp_auth", MS, 1, MANY, false),
    ("smtp_capabilities", MS, 1, MANY, false),
    ("smtp_client_buffer", MS, 1, 1, false),
    ("smtp_greeting_delay", MS, 1, 1, false),
    ("imap_auth", MS, 1, MANY, false),
    ("imap_capabilities", MS, 1, MANY, false),
    ("imap_client_buffer", MS, 1, 1, false),
    ("pop3_auth", MS, 1, MANY, false),
    ("pop3_capabilities", MS, 1, MANY, false),
    ("set_real_ip_from", MS, 1, 1, false),
    ("starttls", MS, 1, 1, false),
    ("ssl", MS, 1, 1, false),
    ("ssl_certificate", MS, 1, 1, false),
    ("ssl_certificate_key", MS, 1, 1, false),
    ("ssl_protocols", MS, 1, MANY, false),
    ("ssl_ciphers", MS, 1, 1, false),
    ("ssl_prefer_server_ciphers", MS, 1, 1, false),
    ("ssl_ecdh_curve", MS, 1, 1, false),
    ("ssl_session_cache", MS, 1, 2, false),
    ("ssl_session_timeout", MS, 1, 1, false),
    ("ssl_session_tickets", MS, 1, 1, false),
    ("ssl_session_ticket_key", MS, 1, 1, false),
    ("ssl_verify_client", MS, 1, 1, false),
    ("ssl_verify_depth", MS, 1, 1, false),
    ("ssl_client_certificate", MS, 1, 1, false),
    ("ssl_trusted_certificate", MS, 1, 1, false),
    ("ssl_crl", MS, 1, 1, false),
    ("ssl_dhparam", MS, 1, 1, false),
    ("ssl_password_file", MS, 1, 1, false),
    ("ssl_conf_command", MS, 2, 2, false),
];

/// Whether the mail family has a directive of this name (for `-V`).
pub fn knows(name: &str) -> bool {
    TABLE.iter().any(|(n, ..)| *n == name)
}

/// Known here, allowed at this level, with a valid shape (nginx's words).
pub fn check(d: &Directive, level: Level) -> Result<(), ConfError> {
    let Some(&(_, ctx, min, max, block)) = TABLE.iter().find(|(n, ..)| *n == d.name) else {
        return Err(crate::config::table::misplaced_or_unknown(d));
    };
    let bit = if level == Level::Main { M } else { S };
    if ctx & bit == 0 {
        return Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span));
    }
    if block && d.block.is_none() {
        return Err(ConfError::at(format!("directive \"{}\" has no opening \"{{\"", d.name), &d.span));
    }
    if !block && d.block.is_some() {
        return Err(ConfError::at(format!("directive \"{}\" is not terminated by \";\"", d.name), &d.span));
    }
    if d.args.len() < min || d.args.len() > max {
        return Err(ConfError::at(format!("invalid number of arguments in \"{}\" directive", d.name), &d.span));
    }
    Ok(())
}

fn time(d: &Directive) -> Result<std::time::Duration, ConfError> {
    value::parse_time(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))
}

fn size(d: &Directive) -> Result<usize, ConfError> {
    value::parse_size(arg(d, 0)).map(|n| n as usize).ok_or_else(|| invalid(d, arg(d, 0)))
}

/// An `*_auth` method list (nginx's bitmask slot: an unknown word is
/// "invalid value").
fn methods(d: &Directive, allowed: &[(&str, u8)]) -> Result<u8, ConfError> {
    let mut m = 0;
    for w in &d.args {
        let Some((_, bit)) = allowed.iter().find(|(n, _)| n.eq_ignore_ascii_case(&w.text)) else {
            return Err(ConfError::at(format!("invalid value \"{}\"", w.text), &d.span));
        };
        m |= bit;
    }
    Ok(m)
}

/// `auth_http [http://]HOST[:PORT][/URI]` (a host name is resolved when
/// the configuration is read, as nginx's `ngx_parse_url` does).
fn auth_http(d: &Directive) -> Result<AuthHttp, ConfError> {
    let raw = arg(d, 0);
    let rest = raw.strip_prefix("http://").unwrap_or(raw);
    if rest.starts_with("unix:") {
        return Err(ConfError::at(
            format!("\"auth_http\" to a UNIX-domain socket is not supported in \"{raw}\""),
            &d.span,
        ));
    }
    let (authority, uri) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(ConfError::at(format!("no host in auth_http \"{rest}\""), &d.span));
    }
    let with_port = if crate::config::upstream_block::has_port(authority) {
        authority.to_string()
    } else if authority.starts_with('[') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        format!("[{authority}]:80")
    };
    let addr = crate::config::proxy::resolve(&with_port)
        .map_err(|m| ConfError::at(format!("{m} in auth_http \"{rest}\""), &d.span))?;
    Ok(AuthHttp { addr, host: authority.to_string(), uri: uri.to_string() })
}

/// Applies a directive of the mail or server level. `seen` holds the list
/// directives already met at this level: the first one replaces the
/// inherited list (nginx does not merge lists across levels).
pub fn apply(c: &mut SrvConf, d: &Directive, ctx: &mut Ctx, seen: &mut Vec<&'static str>) -> Result<(), ConfError> {
    let name: &'static str = TABLE.iter().find(|(n, ..)| *n == d.name).map_or("", |(n, ..)| n);
    let first = !seen.contains(&name);
    let lists = [
        "error_log",
        "auth_http_header",
        "set_real_ip_from",
        "ssl_certificate",
        "ssl_certificate_key",
        "ssl_session_ticket_key",
        "ssl_conf_command",
    ];
    if !first && !lists.contains(&name) {
        return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
    }
    seen.push(name);
    match name {
        "protocol" => {
            c.protocol = Some(match arg(d, 0) {
                "imap" => Protocol::Imap,
                "pop3" => Protocol::Pop3,
                "smtp" => Protocol::Smtp,
                v => return Err(ConfError::at(format!("unknown protocol \"{v}\""), &d.span)),
            })
        }
        "server_name" => c.server_name = arg(d, 0).to_string(),
        "error_log" => {
            if first {
                c.error_log = Arc::default();
            }
            crate::config::set_main::error_log_into(&mut c.error_log, d, ctx)?;
        }
        "timeout" => c.timeout = time(d)?,
        "max_errors" => c.max_errors = value::parse_number(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))? as u32,
        "resolver" => {
            c.resolver = if arg(d, 0) == "off" && d.args.len() == 1 { None } else { Some(crate::resolver::parse(d)?) };
        }
        "resolver_timeout" => c.resolver_timeout = time(d)?,
        "auth_http" => c.auth_http = Some(auth_http(d)?),
        "auth_http_header" => {
            if first {
                c.auth_http_headers.clear();
            }
            c.auth_http_headers.push((arg(d, 0).to_string(), arg(d, 1).to_string()));
        }
        "auth_http_timeout" => c.auth_http_timeout = time(d)?,
        "auth_http_pass_client_cert" => c.auth_http_pass_client_cert = flag(d)?,
        "proxy" => {
            flag(d)?;
        }
        "proxy_buffer" => c.proxy_buffer = size(d)?.max(1),
        "proxy_timeout" => c.proxy_timeout = time(d)?,
        "proxy_pass_error_message" => c.proxy_pass_error_message = flag(d)?,
        "proxy_protocol" => c.proxy_protocol = flag(d)?,
        "proxy_smtp_auth" => c.proxy_smtp_auth = flag(d)?,
        "xclient" => c.xclient = flag(d)?,
        "smtp_auth" => {
            c.smtp_auth = methods(
                d,
                &[
                    ("plain", auth::PLAIN),
                    ("login", auth::LOGIN),
                    ("cram-md5", auth::CRAM_MD5),
                    ("external", auth::EXTERNAL),
                    ("none", auth::NONE),
                ],
            )?
        }
        "imap_auth" => {
            c.imap_auth = methods(
                d,
                &[
                    ("plain", auth::PLAIN),
                    ("login", auth::LOGIN),
                    ("cram-md5", auth::CRAM_MD5),
                    ("external", auth::EXTERNAL),
                ],
            )?
        }
        "pop3_auth" => {
            c.pop3_auth = methods(
                d,
                &[
                    ("plain", auth::PLAIN),
                    ("apop", auth::APOP),
                    ("cram-md5", auth::CRAM_MD5),
                    ("external", auth::EXTERNAL),
                ],
            )?
        }
        "smtp_capabilities" => c.smtp_capabilities = d.args.iter().map(|w| w.text.clone()).collect(),
        "imap_capabilities" => c.imap_capabilities = d.args.iter().map(|w| w.text.clone()).collect(),
        "pop3_capabilities" => c.pop3_capabilities = d.args.iter().map(|w| w.text.clone()).collect(),
        "smtp_client_buffer" => c.smtp_client_buffer = size(d)?.max(1),
        "imap_client_buffer" => c.imap_client_buffer = size(d)?.max(1),
        "smtp_greeting_delay" => c.smtp_greeting_delay = time(d)?,
        "set_real_ip_from" => {
            if first {
                c.real_ip_from.clear();
            }
            let text = arg(d, 0);
            let parsed = crate::cidr::Cidr::parse(text)
                .ok_or_else(|| ConfError::at(format!("\"{text}\" is not a valid address"), &d.span))?;
            c.real_ip_from.push(parsed.cidr);
        }
        "starttls" => {
            c.starttls_at = format!("{}:{}", d.span.file.display(), d.span.line);
            c.starttls = match arg(d, 0) {
                "on" => StartTls::On,
                "off" => StartTls::Off,
                "only" => StartTls::Only,
                v => return Err(invalid(d, v)),
            }
        }
        "ssl" => {
            let on = flag(d)?;
            let msg = "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead";
            ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
            c.ssl.on = on;
        }
        "ssl_certificate" => {
            if first {
                c.ssl.certificates.clear();
            }
            set_ssl::certificate_in(&mut c.ssl, d, ctx)?
        }
        "ssl_certificate_key" => {
            if first {
                c.ssl.keys.clear();
            }
            set_ssl::certificate_key_in(&mut c.ssl, d, ctx)?
        }
        "ssl_protocols" => set_ssl::protocols_in(&mut c.ssl, d, ctx)?,
        "ssl_ciphers" => set_ssl::ciphers_in(&mut c.ssl, d, ctx)?,
        "ssl_prefer_server_ciphers" => set_ssl::prefer_server_ciphers_in(&mut c.ssl, d, ctx)?,
        "ssl_ecdh_curve" => set_ssl::ecdh_curve_in(&mut c.ssl, d, ctx)?,
        "ssl_session_cache" => set_ssl::session_cache_in(&mut c.ssl, d, ctx)?,
        "ssl_session_timeout" => set_ssl::session_timeout_in(&mut c.ssl, d, ctx)?,
        "ssl_session_tickets" => set_ssl::session_tickets_in(&mut c.ssl, d, ctx)?,
        "ssl_session_ticket_key" => {
            if first {
                c.ssl.ticket_keys.clear();
            }
            set_ssl::session_ticket_key_in(&mut c.ssl, d, ctx)?
        }
        "ssl_verify_client" => set_ssl::verify_client_in(&mut c.ssl, d, ctx)?,
        "ssl_verify_depth" => set_ssl::verify_depth_in(&mut c.ssl, d, ctx)?,
        "ssl_client_certificate" => set_ssl::client_certificate_in(&mut c.ssl, d, ctx)?,
        "ssl_crl" => set_ssl::crl_in(&mut c.ssl, d, ctx)?,
        // OpenSSL's knobs with no rustls counterpart, as in http and stream.
        "ssl_trusted_certificate" => set_ssl::trusted_certificate_in(&mut c.ssl, d, ctx)?,
        "ssl_dhparam" => {}
        "ssl_conf_command" => {
            if first {
                crate::config::ssl_conf_command::reset(&mut c.ssl);
            }
            crate::config::ssl_conf_command::server_in(&mut c.ssl, d, ctx)?
        }
        "ssl_password_file" => set_ssl::password_file_in(&mut c.ssl, d, ctx)?,
        _ => {}
    }
    Ok(())
}
