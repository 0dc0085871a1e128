//! Setters for the `ssl_*` and `http2*` directives (http and server
//! levels). They only record and check what is written; certificates are
//! loaded when the server is built (`tls::build_server`), so `-t` reports a
//! missing or bad file the way nginx does.

use super::build::Ctx;
use super::model::{CertCacheConf, LocConf, PemSource, SessionCache, SslConf, VerifyClient};
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid, number};
use super::table::R;
use super::value;

pub fn ssl_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.on = flag(d)?;
    Ok(())
}

pub fn reset_certificates(c: &mut LocConf) {
    reset_certificates_in(&mut c.ssl)
}

pub fn reset_certificates_in(c: &mut SslConf) {
    c.certificates.clear();
}

pub fn reset_keys(c: &mut LocConf) {
    reset_keys_in(&mut c.ssl)
}

pub fn reset_keys_in(c: &mut SslConf) {
    c.keys.clear();
}

pub fn reset_conf_commands(c: &mut LocConf) {
    super::ssl_conf_command::reset(&mut c.ssl)
}

pub fn conf_command(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    super::ssl_conf_command::server_in(&mut c.ssl, d, ctx)
}

pub fn reset_ticket_keys(c: &mut LocConf) {
    reset_ticket_keys_in(&mut c.ssl)
}

pub fn reset_ticket_keys_in(c: &mut SslConf) {
    c.ticket_keys.clear();
}

/// An `ssl_certificate` or `ssl_certificate_key` value: with variables,
/// compiled for evaluation at each handshake (nginx 1.15.9); `data:PEM`
/// (nginx 1.15.10); else a path under the configuration's directory.
pub fn pem_source(d: &Directive, ctx: &Ctx) -> Result<PemSource, ConfError> {
    let v = arg(d, 0);
    if v.contains('$') {
        let t = crate::variables::Template::compile(v).map_err(|m| ConfError::at(m, &d.span))?;
        return Ok(PemSource::Vars(t, ctx.conf_dir.clone(), v.into()));
    }
    if let Some(pem) = v.strip_prefix("data:") {
        return Ok(PemSource::Data(pem.as_bytes().into()));
    }
    Ok(PemSource::File(ctx.conf_path(v)))
}

pub fn certificate_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.certificates.push((pem_source(d, ctx)?, d.span.clone()));
    Ok(())
}

pub fn certificate_key_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.keys.push((pem_source(d, ctx)?, d.span.clone()));
    Ok(())
}

/// `ssl_password_file`: read now, as nginx does, so a missing or empty
/// file fails `-t`; the passphrases are tried in order on every encrypted
/// key of the level (also those loaded at handshake time).
pub fn password_file_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.passwords = Some(read_password_file(d, ctx)?);
    Ok(())
}

pub fn read_password_file(d: &Directive, ctx: &Ctx) -> Result<std::sync::Arc<Vec<Vec<u8>>>, ConfError> {
    let path = ctx.conf_path(arg(d, 0));
    let content = super::password_files::read(&path)
        .map_err(|e| ConfError::at(super::parser::failed("open", &path, &e), &d.span))?;
    let list = crate::tls::keyfile::parse_password_file(&content);
    if list.is_empty() {
        return Err(ConfError::at(format!("empty password file \"{}\"", path.display()), &d.span));
    }
    Ok(std::sync::Arc::new(list))
}

/// `ssl_certificate_cache off | max=N [inactive=time] [valid=time]`
/// (nginx 1.27.4).
pub fn certificate_cache_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.certificate_cache = parse_certificate_cache(d)?;
    Ok(())
}

pub fn parse_certificate_cache(d: &Directive) -> Result<Option<CertCacheConf>, ConfError> {
    if d.args.len() == 1 && arg(d, 0) == "off" {
        return Ok(None);
    }
    let mut conf = CertCacheConf {
        max: 0,
        inactive: std::time::Duration::from_secs(10),
        valid: std::time::Duration::from_secs(60),
    };
    let mut max = None;
    for w in &d.args {
        let v = w.text.as_str();
        let bad = || ConfError::at(format!("invalid parameter \"{v}\""), &d.span);
        if let Some(n) = v.strip_prefix("max=") {
            max = Some(value::parse_number(n).filter(|&n| n > 0).ok_or_else(bad)? as usize);
        } else if let Some(t) = v.strip_prefix("inactive=") {
            conf.inactive = value::parse_time(t).ok_or_else(bad)?;
        } else if let Some(t) = v.strip_prefix("valid=") {
            conf.valid = value::parse_time(t).ok_or_else(bad)?;
        } else {
            return Err(bad());
        }
    }
    conf.max = max.ok_or_else(|| ConfError::at(format!("\"{}\" must have \"max\" parameter", d.name), &d.span))?;
    Ok(Some(conf))
}

/// `ssl_protocols`: rustls speaks TLSv1.2 and TLSv1.3 only. Older ones
/// that nginx would enable are left out with one warning (clients that
/// speak only those fail their handshake, as with an OpenSSL that refuses
/// them); only a list with nothing usable is an error.
pub fn protocols_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    let (mut v12, mut v13) = (false, false);
    let mut dropped = Vec::new();
    for w in &d.args {
        match w.text.as_str() {
            "TLSv1.2" => v12 = true,
            "TLSv1.3" => v13 = true,
            old @ ("SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1") => dropped.push(old),
            other => return Err(invalid(d, other)),
        }
    }
    if !v12 && !v13 {
        return Err(ConfError::at(
            format!(
                "no protocol in \"ssl_protocols\" is supported: {} not offered by sluice, which speaks TLSv1.2 and \
                 TLSv1.3 only",
                dropped.join(" ")
            ),
            &d.span,
        ));
    }
    if !dropped.is_empty() {
        let kept =
            [(v12, "TLSv1.2"), (v13, "TLSv1.3")].iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect::<Vec<_>>();
        let msg = format!(
            "\"ssl_protocols\": {} not offered (sluice speaks TLSv1.2 and TLSv1.3 only), using {}",
            dropped.join(" "),
            kept.join(" ")
        );
        ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
    }
    c.tls12 = v12;
    c.tls13 = v13;
    Ok(())
}

/// `ssl_ciphers`: OpenSSL's list syntax. Suite names rustls implements
/// restrict TLS 1.2 to them (`tls::choose_suites`); names of suites it
/// lacks (CBC, DHE, RSA key exchange...) are left out with one warning;
/// aliases (`HIGH`, `ECDHE+AESGCM`) and exclusions select rustls's own
/// set. Only a list naming nothing usable is an error.
pub fn ciphers_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    let list = arg(d, 0);
    let class = crate::tls::classify_ciphers(list);
    if class.known == 0 && !class.alias {
        return Err(ConfError::at(format!("no cipher in \"{}\" is supported by sluice (rustls)", list), &d.span));
    }
    if !class.unknown.is_empty() {
        let msg = format!(
            "\"ssl_ciphers\": {} not offered (rustls does not implement {}), using the rest",
            class.unknown.join(":"),
            if class.unknown.len() == 1 { "it" } else { "them" }
        );
        ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
    }
    c.ciphers = Some((list.to_string(), d.span.clone()));
    Ok(())
}

pub fn prefer_server_ciphers_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.prefer_server_ciphers = flag(d)?;
    Ok(())
}

/// `ssl_ecdh_curve auto | name[:name...]`: curves rustls lacks (secp521r1,
/// X448, ffdhe...) are left out with one warning; only a list with nothing
/// usable is an error.
pub fn ecdh_curve_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    let list = arg(d, 0);
    if list != "auto" {
        let unknown: Vec<&str> = list.split(':').filter(|n| crate::tls::kx_group_by_name(n).is_none()).collect();
        if unknown.len() == list.split(':').count() {
            return Err(ConfError::at(
                format!(
                    "no curve in \"{}\" is supported by sluice (rustls offers X25519, prime256v1, secp384r1)",
                    list
                ),
                &d.span,
            ));
        }
        if !unknown.is_empty() {
            let msg = format!(
                "\"ssl_ecdh_curve\": {} not offered (rustls does not implement {}), using the rest",
                unknown.join(":"),
                if unknown.len() == 1 { "it" } else { "them" }
            );
            ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
        }
    }
    c.ecdh_curve = Some((list.to_string(), d.span.clone()));
    Ok(())
}

/// nginx: "one megabyte of the cache contains about 4000 sessions".
const SESSIONS_PER_MB: u64 = 4000;

/// `off | none | [builtin[:size]] [shared:name:size]`. sluice has one cache
/// per server configuration, so `builtin` and `shared` together mean the
/// shared one (which every worker already sees).
pub fn session_cache_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
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
    c.session_cache = cache.unwrap_or_default();
    Ok(())
}

pub fn session_timeout_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.session_timeout = value::parse_time(v).ok_or_else(|| invalid(d, v))?;
    Ok(())
}

pub fn session_tickets_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.session_tickets = flag(d)?;
    Ok(())
}

pub fn session_ticket_key_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.ticket_keys.push((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn early_data_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.early_data = flag(d)?;
    Ok(())
}

pub fn stapling_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.stapling = flag(d)?;
    Ok(())
}

pub fn stapling_file_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.stapling_file = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn stapling_responder_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    crate::tls::ocsp::http::Url::parse(v.as_bytes())
        .map_err(|why| ConfError::at(format!("{why} in \"{v}\""), &d.span))?;
    c.stapling_responder = Some(v.to_string());
    Ok(())
}

pub fn stapling_verify_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.stapling_verify = flag(d)?;
    Ok(())
}

pub fn ocsp_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    use crate::tls::ocsp::client::Depth;
    c.ocsp = match arg(d, 0) {
        "off" => None,
        "on" => Some(Depth::Chain),
        "leaf" => Some(Depth::Leaf),
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

pub fn ocsp_responder_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    // nginx: only http:// responders, checked at load.
    if !(v.len() > 7 && v[..7].eq_ignore_ascii_case("http://")) {
        return Err(ConfError::at(
            format!("invalid URL prefix in OCSP responder \"{v}\" in \"ssl_ocsp_responder\""),
            &d.span,
        ));
    }
    crate::tls::ocsp::http::Url::parse(v.as_bytes())
        .map_err(|why| ConfError::at(format!("{why} in OCSP responder \"{v}\" in \"ssl_ocsp_responder\""), &d.span))?;
    c.ocsp_responder = Some(v.to_string());
    Ok(())
}

/// `ssl_ocsp_cache off | shared:NAME:SIZE` (nginx takes only a shared
/// zone).
pub fn ocsp_cache_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v == "off" {
        c.ocsp_cache = None;
        return Ok(());
    }
    let bad = || ConfError::at(format!("invalid \"ssl_ocsp_cache\" parameter \"{v}\""), &d.span);
    let rest = v.strip_prefix("shared:").ok_or_else(bad)?;
    let (name, size) = rest.rsplit_once(':').ok_or_else(bad)?;
    let bytes = value::parse_size(size)
        .filter(|&b| b >= 8 * 4096 && !name.is_empty())
        .ok_or_else(|| ConfError::at(format!("invalid zone size \"{v}\""), &d.span))?;
    c.ocsp_cache = Some((name.to_string(), bytes as usize));
    Ok(())
}

pub fn trusted_certificate_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.trusted_certificate = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn reject_handshake_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.reject_handshake = flag(d)?;
    Ok(())
}

pub fn crl_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.crl = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn client_certificate_in(c: &mut SslConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.client_certificate = Some((ctx.conf_path(arg(d, 0)), d.span.clone()));
    Ok(())
}

pub fn verify_client_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.verify_client = match arg(d, 0) {
        "off" => VerifyClient::Off,
        "on" => VerifyClient::On,
        "optional" => VerifyClient::Optional,
        "optional_no_ca" => VerifyClient::OptionalNoCa,
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

pub fn verify_depth_in(c: &mut SslConf, d: &Directive, _: &mut Ctx) -> R {
    c.verify_depth = number(d, 0)?.min(100) as u32;
    Ok(())
}

/// The `ssl_*` setters on a level's `LocConf` (the table's rows); the
/// `_in` forms take the `SslConf` alone, for the families that keep one
/// outside a `LocConf` (stream).
macro_rules! on_loc {
    ($($name:ident => $inner:ident),* $(,)?) => {
        $(pub fn $name(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
            $inner(&mut c.ssl, d, ctx)
        })*
    };
}
on_loc!(ssl => ssl_in, password_file => password_file_in, certificate_cache => certificate_cache_in, certificate => certificate_in, certificate_key => certificate_key_in, protocols => protocols_in, ciphers => ciphers_in, prefer_server_ciphers => prefer_server_ciphers_in, ecdh_curve => ecdh_curve_in, session_cache => session_cache_in, session_timeout => session_timeout_in, session_tickets => session_tickets_in, session_ticket_key => session_ticket_key_in, early_data => early_data_in, stapling => stapling_in, stapling_file => stapling_file_in, stapling_responder => stapling_responder_in, stapling_verify => stapling_verify_in, trusted_certificate => trusted_certificate_in, reject_handshake => reject_handshake_in, crl => crl_in, client_certificate => client_certificate_in, verify_client => verify_client_in, verify_depth => verify_depth_in, ocsp => ocsp_in, ocsp_responder => ocsp_responder_in, ocsp_cache => ocsp_cache_in);

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

/// HTTP/2 directives nginx keeps only to warn about: ignored with its
/// warning. Server push is gone from browsers and from nginx 1.25.1,
/// whose wording `http2_push` and `http2_push_preload` get; the header
/// size limits and `http2_recv_timeout` were replaced in nginx 1.19.7.
pub fn http2_obsolete(d: &Directive, ctx: &mut Ctx) -> R {
    if d.name == "http2_max_concurrent_pushes" && super::value::parse_number(arg(d, 0)).is_none() {
        return Err(ConfError::at(format!("\"{}\" directive invalid number", d.name), &d.span));
    }
    let instead = match d.name.as_str() {
        "http2_max_field_size" | "http2_max_header_size" => Some("large_client_header_buffers"),
        "http2_recv_timeout" => Some("client_header_timeout"),
        _ => None,
    };
    let why = match instead {
        Some(new) => format!("the \"{}\" directive is obsolete, use the \"{new}\" directive instead", d.name),
        None => format!("the \"{}\" directive is obsolete, ignored", d.name),
    };
    ctx.warnings.push(ConfError::at(why, &d.span).to_string());
    Ok(())
}

/// Obsolete in nginx since 1.19.7, where it became `keepalive_timeout`.
pub fn http2_idle_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.keepalive_timeout = value::parse_time(v).ok_or_else(|| invalid(d, v))?;
    Ok(())
}
