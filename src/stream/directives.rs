//! The stream family's directive table (nginx's `ngx_stream_*_commands`):
//! each directive with the levels it may appear at and its argument
//! counts, checked with nginx's messages, and the setters of the settings
//! both levels share. Blocks (`server`, `upstream`, `map`...) and the
//! server-only content directives are handled by `build`.

use std::collections::HashMap;
use std::sync::Arc;

use super::conf::SrvConf;
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
    ("upstream", M, 1, 1, true),
    ("map", M, 2, 2, true),
    ("geo", M, 1, 2, true),
    ("split_clients", M, 2, 2, true),
    ("geoip_country", M, 1, 2, false),
    ("geoip_city", M, 1, 2, false),
    ("geoip_org", M, 1, 2, false),
    ("geoip2", M, 1, 1, true),
    ("log_format", M, 2, MANY, false),
    ("limit_conn_zone", M, 2, 2, false),
    ("variables_hash_max_size", M, 1, 1, false),
    ("variables_hash_bucket_size", M, 1, 1, false),
    ("server_names_hash_max_size", M, 1, 1, false),
    ("server_names_hash_bucket_size", M, 1, 1, false),
    ("listen", S, 1, MANY, false),
    ("server_name", S, 1, MANY, false),
    ("proxy_pass", S, 1, 1, false),
    ("pass", S, 1, 1, false),
    ("return", S, 1, 1, false),
    ("set", S, 2, 2, false),
    ("status_zone", S, 1, 1, false),
    ("error_log", MS, 1, 2, false),
    ("access_log", MS, 1, 6, false),
    ("allow", MS, 1, 1, false),
    ("deny", MS, 1, 1, false),
    ("tcp_nodelay", MS, 1, 1, false),
    ("resolver", MS, 1, MANY, false),
    ("resolver_timeout", MS, 1, 1, false),
    ("preread_buffer_size", MS, 1, 1, false),
    ("preread_timeout", MS, 1, 1, false),
    ("proxy_protocol_timeout", MS, 1, 1, false),
    ("proxy_connect_timeout", MS, 1, 1, false),
    ("proxy_timeout", MS, 1, 1, false),
    ("proxy_next_upstream", MS, 1, 1, false),
    ("proxy_next_upstream_tries", MS, 1, 1, false),
    ("proxy_next_upstream_timeout", MS, 1, 1, false),
    ("proxy_buffer_size", MS, 1, 1, false),
    ("proxy_download_rate", MS, 1, 1, false),
    ("proxy_upload_rate", MS, 1, 1, false),
    ("proxy_protocol", MS, 1, 1, false),
    ("proxy_half_close", MS, 1, 1, false),
    ("proxy_requests", MS, 1, 1, false),
    ("proxy_responses", MS, 1, 1, false),
    ("proxy_bind", MS, 1, 2, false),
    ("proxy_socket_keepalive", MS, 1, 1, false),
    ("proxy_ssl", MS, 1, 1, false),
    ("proxy_ssl_server_name", MS, 1, 1, false),
    ("proxy_ssl_name", MS, 1, 1, false),
    ("proxy_ssl_verify", MS, 1, 1, false),
    ("proxy_ssl_verify_depth", MS, 1, 1, false),
    ("proxy_ssl_trusted_certificate", MS, 1, 1, false),
    ("proxy_ssl_certificate", MS, 1, 1, false),
    ("proxy_ssl_conf_command", MS, 2, 2, false),
    ("proxy_ssl_certificate_key", MS, 1, 1, false),
    ("proxy_ssl_password_file", MS, 1, 1, false),
    ("proxy_ssl_protocols", MS, 1, MANY, false),
    ("proxy_ssl_ciphers", MS, 1, 1, false),
    ("proxy_ssl_session_reuse", MS, 1, 1, false),
    ("ssl_preread", MS, 1, 1, false),
    ("ssl_certificate", MS, 1, 1, false),
    ("ssl_certificate_key", MS, 1, 1, false),
    ("ssl_protocols", MS, 1, MANY, false),
    ("ssl_ciphers", MS, 1, 1, false),
    ("ssl_prefer_server_ciphers", MS, 1, 1, false),
    ("ssl_ecdh_curve", MS, 1, 1, false),
    ("ssl_session_cache", MS, 1, 2, false),
    ("ssl_session_timeout", MS, 1, 1, false),
    ("ssl_session_tickets", MS, 1, 1, false),
    ("ssl_conf_command", MS, 2, 2, false),
    ("ssl_session_ticket_key", MS, 1, 1, false),
    ("ssl_handshake_timeout", MS, 1, 1, false),
    ("ssl_reject_handshake", MS, 1, 1, false),
    ("ssl_verify_client", MS, 1, 1, false),
    ("ssl_verify_depth", MS, 1, 1, false),
    ("ssl_client_certificate", MS, 1, 1, false),
    ("ssl_crl", MS, 1, 1, false),
    ("ssl_ocsp", MS, 1, 1, false),
    ("ssl_ocsp_responder", MS, 1, 1, false),
    ("ssl_ocsp_cache", MS, 1, 1, false),
    ("ssl_alpn", MS, 1, MANY, false),
    ("ssl_dhparam", MS, 1, 1, false),
    ("ssl_password_file", MS, 1, 1, false),
    ("ssl_trusted_certificate", MS, 1, 1, false),
    ("set_real_ip_from", MS, 1, 1, false),
    ("limit_conn", MS, 2, 2, false),
    ("limit_conn_log_level", MS, 1, 1, false),
    ("limit_conn_dry_run", MS, 1, 1, false),
];

/// Whether the stream family has a directive of this name (for `-V`).
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

fn size(d: &Directive) -> Result<u64, ConfError> {
    value::parse_size(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))
}

/// A rate: a size, or a value with variables.
fn rate(d: &Directive) -> Result<super::conf::Rate, ConfError> {
    let v = arg(d, 0);
    if v.contains('$') {
        return Ok(super::conf::Rate::Vars(Arc::new(super::build::compile(d, v)?)));
    }
    Ok(super::conf::Rate::Fixed(size(d)?))
}

/// Applies a directive of the stream or server level. `seen` holds the
/// list directives already met at this level: the first one replaces the
/// inherited list (nginx does not merge lists across levels).
pub fn apply(
    c: &mut SrvConf,
    d: &Directive,
    ctx: &mut Ctx,
    zones: &HashMap<String, Arc<super::limit::Zone>>,
    seen: &mut Vec<&'static str>,
) -> Result<(), ConfError> {
    let name: &'static str = TABLE.iter().find(|(n, ..)| *n == d.name).map_or("", |(n, ..)| n);
    let first = !seen.contains(&name);
    let lists = [
        "error_log",
        "access_log",
        "allow",
        "deny",
        "set_real_ip_from",
        "limit_conn",
        "ssl_certificate",
        "ssl_certificate_key",
        "ssl_session_ticket_key",
        "ssl_conf_command",
        "proxy_ssl_conf_command",
    ];
    if !first && !lists.contains(&name) {
        return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
    }
    seen.push(name);
    let reset_rules =
        (name == "allow" || name == "deny") && !seen[..seen.len() - 1].iter().any(|n| *n == "allow" || *n == "deny");
    let p = &mut c.proxy;
    match name {
        "error_log" => {
            if first {
                c.error_log = Arc::default();
            }
            crate::config::set_main::error_log_into(&mut c.error_log, d, ctx)?;
        }
        "access_log" => {
            if first {
                c.access_log.clear();
            }
            if d.args.len() == 1 && arg(d, 0) != "off" {
                return Err(ConfError::at("invalid number of arguments in \"access_log\" directive", &d.span));
            }
            if let Some(r) = crate::config::set_loc::access_log_entry(d, ctx)? {
                c.access_log.push(r);
            }
        }
        "allow" | "deny" => {
            let text = arg(d, 0);
            let parsed = crate::access_rules::parse(text)
                .ok_or_else(|| ConfError::at(format!("invalid parameter \"{text}\""), &d.span))?;
            if parsed.low_bits_set {
                let msg = format!("low address bits of {text} are meaningless");
                ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
            }
            let mut rules = if reset_rules { Default::default() } else { (*c.access).clone() };
            rules.push(parsed.target, name == "deny");
            c.access = Arc::new(rules);
        }
        "tcp_nodelay" => c.tcp_nodelay = flag(d)?,
        "resolver" => c.resolver.resolver = Some(crate::resolver::parse(d)?),
        "resolver_timeout" => c.resolver.timeout = time(d)?,
        "preread_buffer_size" => c.preread_buffer_size = size(d)? as usize,
        "preread_timeout" => c.preread_timeout = time(d)?,
        "proxy_protocol_timeout" => c.proxy_protocol_timeout = time(d)?,
        "proxy_connect_timeout" => p.connect_timeout = time(d)?,
        "proxy_timeout" => p.timeout = time(d)?,
        "proxy_next_upstream" => p.next_upstream = flag(d)?,
        "proxy_next_upstream_tries" => {
            p.next_upstream_tries = value::parse_number(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))? as usize
        }
        "proxy_next_upstream_timeout" => p.next_upstream_timeout = time(d)?,
        "proxy_buffer_size" => p.buffer_size = (size(d)? as usize).max(1),
        "proxy_download_rate" => p.download_rate = rate(d)?,
        "proxy_upload_rate" => p.upload_rate = rate(d)?,
        "proxy_protocol" => p.proxy_protocol = flag(d)?,
        "proxy_half_close" => p.half_close = flag(d)?,
        "proxy_requests" => p.requests = value::parse_number(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))?,
        "proxy_responses" => p.responses = Some(value::parse_number(arg(d, 0)).ok_or_else(|| invalid(d, arg(d, 0)))?),
        "proxy_bind" => {
            p.bind = match arg(d, 0) {
                "off" => None,
                a => {
                    if d.args.len() == 2 {
                        let msg = "\"proxy_bind ... transparent\" is not supported yet";
                        return Err(ConfError::at(msg, &d.span));
                    }
                    Some(Arc::new(super::build::compile(d, a)?))
                }
            }
        }
        "proxy_socket_keepalive" => {
            flag(d)?;
        }
        "proxy_ssl" => p.ssl = flag(d)?,
        "proxy_ssl_server_name" => p.ssl_server_name = flag(d)?,
        "proxy_ssl_name" => p.ssl_name = Some(Arc::new(super::build::compile(d, arg(d, 0))?)),
        "proxy_ssl_verify" => p.ssl_verify = flag(d)?,
        "proxy_ssl_trusted_certificate" => p.ssl_trusted_certificate = Some(ctx.conf_path(arg(d, 0))),
        // `""` cancels an inherited certificate, as in nginx.
        "proxy_ssl_certificate" => {
            let v = arg(d, 0);
            p.ssl_certificate =
                if v.is_empty() { None } else { Some((set_ssl::pem_source(d, ctx)?, std::sync::Arc::from(v))) }
        }
        "proxy_ssl_conf_command" => match crate::config::ssl_conf_command::client(d, ctx)? {
            (true, src) => p.ssl_conf_certificate = Some((src, std::sync::Arc::from(arg(d, 1)))),
            (false, src) => p.ssl_conf_key = Some(src),
        },
        "proxy_ssl_certificate_key" => {
            p.ssl_certificate_key = if arg(d, 0).is_empty() { None } else { Some(set_ssl::pem_source(d, ctx)?) }
        }
        "proxy_ssl_password_file" => p.ssl_passwords = Some(crate::config::set_ssl::read_password_file(d, ctx)?),
        // rustls's own choices (TLS 1.2 and 1.3, its suites, resumption).
        "proxy_ssl_session_reuse" => p.ssl_session_reuse = flag(d)?,
        "proxy_ssl_verify_depth" => p.ssl_verify_depth = crate::config::set_main::number(d, 0)?.min(100) as u32,
        "proxy_ssl_protocols" | "proxy_ssl_ciphers" => {}
        "ssl_preread" => c.ssl_preread = flag(d)?,
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
        "ssl_conf_command" => {
            if first {
                crate::config::ssl_conf_command::reset(&mut c.ssl);
            }
            crate::config::ssl_conf_command::server_in(&mut c.ssl, d, ctx)?
        }
        "ssl_session_ticket_key" => {
            if first {
                c.ssl.ticket_keys.clear();
            }
            set_ssl::session_ticket_key_in(&mut c.ssl, d, ctx)?
        }
        "ssl_handshake_timeout" => c.ssl_handshake_timeout = time(d)?,
        "ssl_reject_handshake" => set_ssl::reject_handshake_in(&mut c.ssl, d, ctx)?,
        "ssl_verify_client" => set_ssl::verify_client_in(&mut c.ssl, d, ctx)?,
        "ssl_verify_depth" => set_ssl::verify_depth_in(&mut c.ssl, d, ctx)?,
        "ssl_client_certificate" => set_ssl::client_certificate_in(&mut c.ssl, d, ctx)?,
        "ssl_crl" => set_ssl::crl_in(&mut c.ssl, d, ctx)?,
        "ssl_ocsp" => set_ssl::ocsp_in(&mut c.ssl, d, ctx)?,
        "ssl_ocsp_responder" => set_ssl::ocsp_responder_in(&mut c.ssl, d, ctx)?,
        "ssl_ocsp_cache" => set_ssl::ocsp_cache_in(&mut c.ssl, d, ctx)?,
        "ssl_alpn" => c.ssl_alpn = d.args.iter().map(|w| w.text.as_bytes().to_vec()).collect(),
        // OpenSSL's knobs with no rustls counterpart, as in http.
        "ssl_trusted_certificate" => set_ssl::trusted_certificate_in(&mut c.ssl, d, ctx)?,
        "ssl_dhparam" => {}
        "ssl_password_file" => set_ssl::password_file_in(&mut c.ssl, d, ctx)?,
        "set_real_ip_from" => {
            if first {
                c.real_ip_from.clear();
            }
            let text = arg(d, 0);
            let (cidrs, low_bits_set) = crate::cidr::parse_or_resolve(text).map_err(|m| ConfError::at(m, &d.span))?;
            if low_bits_set {
                let msg = format!("low address bits of {text} are meaningless");
                ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
            }
            c.real_ip_from.extend(cidrs);
        }
        "limit_conn" => {
            if first {
                c.limit_conn.clear();
            }
            let zone = zones
                .get(arg(d, 0))
                .cloned()
                .ok_or_else(|| ConfError::at(format!("unknown limit_conn_zone \"{}\"", arg(d, 0)), &d.span))?;
            let n = match value::parse_number(arg(d, 1)) {
                Some(n) if n > 0 && n <= 65535 => n as u32,
                Some(0) => {
                    return Err(ConfError::at(format!("invalid number of connections \"{}\"", arg(d, 1)), &d.span));
                }
                _ => return Err(ConfError::at("connection limit must be less 65536", &d.span)),
            };
            if c.limit_conn.iter().any(|(z, _)| Arc::ptr_eq(z, &zone)) {
                return Err(ConfError::at("same zone is already used", &d.span));
            }
            c.limit_conn.push((zone, n));
        }
        "limit_conn_log_level" => {
            c.limit_conn_log_level = match arg(d, 0) {
                "info" => crate::log::error::Level::Info,
                "notice" => crate::log::error::Level::Notice,
                "warn" => crate::log::error::Level::Warn,
                "error" => crate::log::error::Level::Error,
                v => return Err(invalid(d, v)),
            }
        }
        "limit_conn_dry_run" => c.limit_conn_dry_run = flag(d)?,
        // nginx's hash sizing; sluice's tables need none.
        _ => {}
    }
    Ok(())
}
