//! Setters for the `ssl_*` and `http2*` directives (http and server
//! levels). They only record and check what is written; certificates are
//! loaded when the server is built (`tls::build_server`), so `-t` reports a
//! missing or bad file the way nginx does.

use super::build::Ctx;
use super::model::{LocConf, SessionCache, VerifyClient};
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid, number};
use super::table::R;
use super::value;

pub fn ssl(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.on = flag(d)?;
    Ok(())
}

pub fn reset_certificates(c: &mut LocConf) {
    c.ssl.certificates.clear();
}

pub fn reset_keys(c: &mut LocConf) {
    c.ssl.keys.clear();
}

pub fn reset_ticket_keys(c: &mut LocConf) {
    c.ssl.ticket_keys.clear();
}

pub fn certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ssl.certificates.push((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn certificate_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ssl.keys.push((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn protocols(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let (mut v12, mut v13) = (false, false);
    for w in &d.args {
        match w.text.as_str() {
            "TLSv1.2" => v12 = true,
            "TLSv1.3" => v13 = true,
            old @ ("SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1") => {
                return Err(ConfError::at(
                    format!(
                        "the \"{}\" protocol is not supported: it is obsolete and insecure, sluice speaks TLSv1.2 and \
                         TLSv1.3 only; remove it from \"ssl_protocols\"",
                        old
                    ),
                    &d.span,
                ));
            }
            other => return Err(invalid(d, other)),
        }
    }
    c.ssl.tls12 = v12;
    c.ssl.tls13 = v13;
    Ok(())
}

pub fn ciphers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.ciphers = Some((arg(d, 0).to_string(), d.span.clone()));
    Ok(())
}

pub fn prefer_server_ciphers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.prefer_server_ciphers = flag(d)?;
    Ok(())
}

pub fn ecdh_curve(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.ecdh_curve = Some((arg(d, 0).to_string(), d.span.clone()));
    Ok(())
}

/// nginx: "one megabyte of the cache contains about 4000 sessions".
const SESSIONS_PER_MB: u64 = 4000;

/// `off | none | [builtin[:size]] [shared:name:size]`. sluice has one cache
/// per server configuration, so `builtin` and `shared` together mean the
/// shared one (which every worker already sees).
pub fn session_cache(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut cache = None;
    for w in &d.args {
        let v = w.text.as_str();
        let parsed = match v {
            "off" => SessionCache::Off,
            "none" => SessionCache::None,
            "builtin" => SessionCache::Builtin(20480),
            _ => {
                if let Some(n) = v.strip_prefix("builtin:") {
                    match value::parse_number(n) {
                        Some(n) if n > 0 => SessionCache::Builtin(n as usize),
                        _ => return Err(ConfError::at(format!("invalid session cache \"{}\"", v), &d.span)),
                    }
                } else if let Some(rest) = v.strip_prefix("shared:") {
                    let (name, size) = rest
                        .rsplit_once(':')
                        .ok_or_else(|| ConfError::at(format!("invalid session cache \"{}\"", v), &d.span))?;
                    let bytes = value::parse_size(size)
                        .filter(|&b| b >= 8 * 4096 && !name.is_empty())
                        .ok_or_else(|| ConfError::at(format!("invalid zone size \"{}\"", v), &d.span))?;
                    SessionCache::Shared(name.to_string(), (bytes * SESSIONS_PER_MB / (1024 * 1024)) as usize)
                } else {
                    return Err(ConfError::at(format!("invalid session cache \"{}\"", v), &d.span));
                }
            }
        };
        if d.args.len() > 1 && matches!(parsed, SessionCache::Off | SessionCache::None) {
            return Err(ConfError::at(format!("invalid session cache \"{}\"", v), &d.span));
        }
        cache = Some(match (cache, parsed) {
            (Some(SessionCache::Shared(n, s)), _) | (_, SessionCache::Shared(n, s)) => SessionCache::Shared(n, s),
            (_, p) => p,
        });
    }
    c.ssl.session_cache = cache.unwrap_or_default();
    Ok(())
}

pub fn session_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.ssl.session_timeout = value::parse_time(v).ok_or_else(|| invalid(d, v))?;
    Ok(())
}

pub fn session_tickets(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.session_tickets = flag(d)?;
    Ok(())
}

pub fn session_ticket_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ssl.ticket_keys.push((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn early_data(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.early_data = flag(d)?;
    Ok(())
}

pub fn stapling(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.stapling = flag(d)?;
    Ok(())
}

pub fn stapling_file(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ssl.stapling_file = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn reject_handshake(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.reject_handshake = flag(d)?;
    Ok(())
}

pub fn client_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ssl.client_certificate = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn verify_client(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.verify_client = match arg(d, 0) {
        "off" => VerifyClient::Off,
        "on" => VerifyClient::On,
        "optional" => VerifyClient::Optional,
        "optional_no_ca" => VerifyClient::OptionalNoCa,
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

pub fn verify_depth(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.ssl.verify_depth = number(d, 0)?.min(100) as u32;
    Ok(())
}

pub fn http2(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.http2.on = flag(d)?;
    Ok(())
}

pub fn http2_max_concurrent_streams(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.http2.max_concurrent_streams = number(d, 0)?.min(u32::MAX as u64) as u32;
    Ok(())
}

/// Obsolete in nginx since 1.19.7, where it became `keepalive_requests`.
pub fn http2_max_requests(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.keepalive_requests = number(d, 0)?;
    Ok(())
}

fn size_arg(d: &Directive) -> Result<usize, ConfError> {
    let v = arg(d, 0);
    value::parse_size(v).filter(|&n| n > 0).map(|n| n as usize).ok_or_else(|| invalid(d, v))
}

pub fn http2_recv_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.http2.recv_buffer_size = size_arg(d)?.max(2 * 16384);
    Ok(())
}

pub fn http2_chunk_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.http2.chunk_size = size_arg(d)?;
    Ok(())
}

pub fn http2_body_preread_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.http2.body_preread_size = value::parse_size(v).ok_or_else(|| invalid(d, v))? as usize;
    Ok(())
}

/// Obsolete in nginx since 1.19.7, where it became `keepalive_timeout`.
pub fn http2_idle_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.keepalive_timeout = value::parse_time(v).ok_or_else(|| invalid(d, v))?;
    Ok(())
}
