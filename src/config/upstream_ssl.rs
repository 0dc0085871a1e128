//! The `proxy_ssl_*` location directives: TLS to the origin (verification,
//! the name sent and checked, the client certificate), checked when the
//! configuration loads.

use std::sync::Arc;

use super::build::Ctx;
use super::model::LocConf;
use super::parser::{ConfError, Directive};
use super::proxy::Pass;
use super::set_main::{arg, flag};
use super::table::R;

pub fn proxy_ssl_verify(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.ssl_verify = flag(d)?;
    Ok(())
}

pub fn proxy_ssl_server_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.ssl_server_name = flag(d)?;
    Ok(())
}

pub fn proxy_ssl_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') && v != "$proxy_host" {
        return Err(ConfError::at("variables in \"proxy_ssl_name\" are not supported yet", &d.span));
    }
    c.proxy.ssl_name = (v != "$proxy_host").then(|| v.to_string());
    Ok(())
}

/// `proxy_ssl_certificate`: loaded here so `-t` reports a missing or bad
/// file; paired with its key once the location is complete
/// (`check_client_certificate`).
pub fn proxy_ssl_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') {
        return Err(ConfError::at("variables in \"proxy_ssl_certificate\" are not supported yet", &d.span));
    }
    let p = ctx.conf_path(v);
    crate::tls::certs::load_chain(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.proxy.ssl_certificate = Some((p, Arc::from(v)));
    Ok(())
}

pub fn proxy_ssl_certificate_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.contains('$') {
        return Err(ConfError::at("variables in \"proxy_ssl_certificate_key\" are not supported yet", &d.span));
    }
    c.proxy.ssl_certificate_key = Some(ctx.conf_path(v));
    Ok(())
}

/// A location proxying to `https://` with a client certificate needs its
/// key, and the pair must load and match (nginx checks at the same point,
/// for TLS origins only).
pub fn check_client_certificate(c: &LocConf, at: &crate::config::parser::Span) -> R {
    let (Some(Pass::Fixed(p)), Some(cert)) = (&c.proxy.pass, &c.proxy.ssl_certificate) else { return Ok(()) };
    if !p.tls {
        return Ok(());
    }
    let (cert, written) = cert;
    let Some(key) = &c.proxy.ssl_certificate_key else {
        let why = format!("no \"proxy_ssl_certificate_key\" is defined for certificate \"{written}\"");
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

/// Loaded here too, so `-t` reports a missing or bad file.
pub fn proxy_ssl_crl(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_crls(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.proxy.ssl_crl = Some(p);
    Ok(())
}

pub fn proxy_ssl_trusted_certificate(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let p = ctx.conf_path(arg(d, 0));
    crate::tls::certs::load_chain(&p).map_err(|m| ConfError::at(m, &d.span))?;
    c.proxy.ssl_trusted_certificate = Some(p);
    Ok(())
}
