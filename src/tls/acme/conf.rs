//! nginx-acme's directives: `acme_issuer NAME { ... }` and
//! `acme_shared_zone` in `http`, `acme_certificate` in a server. Checked
//! offline (`-t` never contacts the CA): the URI's form, the account key,
//! the trusted certificates, the identifiers. Messages follow nginx-acme's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::jws::KeyType;
use super::state::StateDir;
use super::{AccountKey, CertSlot, Issuer, Order};
use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HTTP, R, SRV, Set, block, cmd};

pub static DIRECTIVES: &[Cmd] = &[
    // Built by `config::build` before the servers (`issuer`).
    block("acme_issuer", HTTP, 1, 1),
    cmd("acme_shared_zone", HTTP, 1, 1, Set::Ctx(shared_zone)),
    // Kept by the server's build and resolved once its names are known.
    cmd(
        "acme_certificate",
        SRV,
        1,
        usize::MAX,
        Set::Server(|s, d, _| {
            s.acme = Some(d.clone());
            Ok(())
        }),
    ),
];

/// The issuers and orders of the configuration being built.
#[derive(Default)]
pub struct Build {
    issuers: HashMap<String, Arc<Issuer>>,
    /// One order per issuer, names and key, however many servers use it.
    orders: HashMap<(String, Vec<String>, KeyType), Arc<Order>>,
    pub list: Vec<Arc<Order>>,
}

fn err(msg: impl Into<String>, d: &Directive) -> ConfError {
    ConfError::at(msg, &d.span)
}

/// `acme_shared_zone zone=NAME:SIZE`: checked as nginx-acme does; the
/// certificates live in the process (workers are threads), so the size
/// limits nothing.
fn shared_zone(d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    let Some(zone) = v.strip_prefix("zone=") else {
        return Err(err(format!("\"{}\" must have \"zone\" parameter", d.name), d));
    };
    let Some((name, size)) = zone.rsplit_once(':') else {
        return Err(err(format!("invalid zone size \"{zone}\""), d));
    };
    if name.is_empty() {
        return Err(err(format!("invalid zone name \"{zone}\""), d));
    }
    if crate::config::value::parse_size(size).is_none_or(|s| s < 8192) {
        return Err(err(format!("invalid zone size \"{size}\""), d));
    }
    Ok(())
}

/// An `acme_issuer` block, with the http level's `resolver`.
pub fn issuer(d: &Directive, ctx: &mut Ctx, resolver: &crate::resolver::Conf) -> R {
    let name = d.args[0].text.clone();
    if ctx.acme.issuers.contains_key(&name) {
        return Err(err(format!("duplicate acme_issuer \"{name}\""), d));
    }
    let mut uri = None;
    let mut account_key = AccountKey::Generate(KeyType::P256);
    let mut contact = Vec::new();
    let mut challenge = "http-01";
    let mut eab = None;
    let mut profile = None;
    let mut preferred_chain = None;
    let mut trusted: Option<PathBuf> = None;
    let mut verify = true;
    let mut state = Some(ctx.path(&format!("acme_{name}")));
    let mut accept_terms = false;
    let mut seen = std::collections::HashSet::new();
    for c in d.block.as_deref().unwrap_or(&[]) {
        let a: Vec<&str> = c.args.iter().map(|w| w.text.as_str()).collect();
        let (min, max, multi) = match c.name.as_str() {
            "uri" | "account_key" | "challenge" | "ssl_trusted_certificate" | "ssl_verify" | "state_path" => {
                (1, 1, false)
            }
            "contact" => (1, 1, true),
            "accept_terms_of_service" => (0, 0, false),
            "external_account_key" => (2, 2, false),
            "profile" => (1, 2, false),
            "preferred_chain" => (1, 1, false),
            _ => return Err(err(format!("unknown directive \"{}\"", c.name), c)),
        };
        if c.block.is_some() {
            return Err(err(format!("directive \"{}\" is not terminated by \";\"", c.name), c));
        }
        if a.len() < min || a.len() > max {
            return Err(err(format!("invalid number of arguments in \"{}\" directive", c.name), c));
        }
        if !seen.insert(c.name.as_str()) && !multi {
            return Err(err(format!("\"{}\" directive is duplicate", c.name), c));
        }
        match c.name.as_str() {
            "uri" => {
                super::http::Url::parse(a[0]).map_err(|e| err(e, c))?;
                uri = Some(a[0].to_string());
            }
            "account_key" => {
                account_key = if a[0].starts_with("ecdsa") || a[0].starts_with("rsa") {
                    AccountKey::Generate(KeyType::parse(a[0]).map_err(|e| err(e, c))?)
                } else {
                    let p = ctx.conf_path(a[0]);
                    let pem =
                        std::fs::read(&p).map_err(|e| err(format!("cannot load key \"{}\": {e}", p.display()), c))?;
                    super::jws::Key::from_pem(&pem)
                        .map_err(|e| err(format!("cannot load key \"{}\": {e}", p.display()), c))?;
                    AccountKey::File(pem)
                };
            }
            "challenge" => {
                challenge = match a[0].to_ascii_lowercase().as_str() {
                    "http" | "http-01" => "http-01",
                    "tls-alpn" | "tls-alpn-01" => "tls-alpn-01",
                    _ => return Err(err(format!("unsupported challenge \"{}\"", a[0]), c)),
                }
            }
            "contact" => contact.push(a[0].to_string()),
            "ssl_trusted_certificate" => trusted = Some(ctx.conf_path(a[0])),
            "ssl_verify" => {
                verify = crate::config::value::parse_flag(a[0]).ok_or_else(|| {
                    err(
                        format!("invalid value \"{}\" in \"ssl_verify\" directive, it must be \"on\" or \"off\"", a[0]),
                        c,
                    )
                })?;
            }
            "state_path" => state = if a[0] == "off" { None } else { Some(ctx.path(a[0])) },
            "external_account_key" => {
                // nginx-acme: a file, or `data:KEY`, holding the MAC key in
                // base64url.
                let text = match a[1].strip_prefix("data:") {
                    Some(k) => k.to_string(),
                    None => {
                        let p = ctx.conf_path(a[1]);
                        std::fs::read_to_string(&p)
                            .map_err(|e| err(format!("cannot load key \"{}\": {e}", p.display()), c))?
                    }
                };
                let key = super::jws::b64u_decode(&text)
                    .ok_or_else(|| err(format!("invalid external account key \"{}\"", a[1]), c))?;
                eab = Some((a[0].to_string(), key));
            }
            "profile" => {
                let require = match a.get(1) {
                    None => false,
                    Some(&"require") => true,
                    Some(v) => return Err(err(format!("invalid parameter \"{v}\""), c)),
                };
                profile = Some((a[0].to_string(), require));
            }
            "preferred_chain" => preferred_chain = Some(a[0].to_string()),
            _ => accept_terms = true,
        }
    }
    let uri = uri.ok_or_else(|| err(format!("\"uri\" is missing in acme_issuer \"{name}\""), d))?;
    let Some(r) = resolver.resolver.clone() else {
        return Err(err(format!("\"resolver\" is not defined for acme_issuer \"{name}\""), d));
    };
    let tls = if verify {
        let trusted = trusted.unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
        super::verify::client_config(&trusted)
    } else {
        let key = crate::tls::client::Key {
            verify: false,
            trusted: None,
            crl: None,
            verify_depth: 1,
            sni: true,
            client_cert: None,
            passwords: None,
            alpn_h2: false,
            no_session_reuse: false,
        };
        crate::tls::client::client_config(&key)
    };
    let tls = tls.map_err(|e| err(e, d))?;
    let http = super::http::Client { tls, resolver: Some(r), timeout: resolver.timeout };
    let issuer = Issuer {
        name: name.clone(),
        uri,
        account_key,
        contact,
        accept_terms,
        challenge,
        eab,
        profile,
        preferred_chain,
        state: StateDir(state),
        http,
    };
    ctx.acme.issuers.insert(name, Arc::new(issuer));
    Ok(())
}

/// The certificate of a server's `acme_certificate` (its identifiers:
/// the arguments, else the server's names), shared by every server that
/// asks for the same one.
pub fn certificate(d: &Directive, server_names: &[String], ctx: &mut Ctx) -> Result<Arc<CertSlot>, ConfError> {
    let issuer_name = &d.args[0].text;
    let issuer = ctx
        .acme
        .issuers
        .get(issuer_name)
        .cloned()
        .ok_or_else(|| err(format!("issuer \"{issuer_name}\" is missing"), d))?;
    let mut key_type = KeyType::P256;
    let mut names: Vec<String> = Vec::new();
    let mut explicit = false;
    for w in &d.args[1..] {
        if let Some(k) = w.text.strip_prefix("key=") {
            key_type = KeyType::parse(k).map_err(|e| err(e, d))?;
        } else {
            explicit = true;
            add_identifier(&mut names, &w.text).map_err(|e| err(e, d))?;
        }
    }
    if !explicit {
        for n in server_names.iter().filter(|n| !n.is_empty()) {
            add_identifier(&mut names, n).map_err(|e| err(e, d))?;
        }
    }
    if names.is_empty() {
        return Err(err("no identifiers in \"acme_certificate\"", d));
    }
    let key = (issuer_name.clone(), names.clone(), key_type);
    if let Some(o) = ctx.acme.orders.get(&key) {
        return Ok(o.slot.clone());
    }
    let id = order_id(&names, key_type);
    let slot = Arc::new(CertSlot::new(format!("{issuer_name}/{id}")));
    let order = Arc::new(Order { issuer, names, key_type, id, slot: slot.clone() });
    ctx.acme.orders.insert(key, order.clone());
    ctx.acme.list.push(order);
    Ok(slot)
}

/// The orders to run, once the configuration is built.
pub fn take_orders(ctx: &mut Ctx) -> Vec<Arc<Order>> {
    std::mem::take(&mut ctx.acme.list)
}

/// nginx-acme's identifiers: an IP address in its canonical form, a DNS
/// name (lowercased; `*.` wildcard allowed), and `.example.com` for both
/// `example.com` and `www.example.com`.
fn add_identifier(out: &mut Vec<String>, v: &str) -> Result<(), String> {
    let mut push = |n: String| {
        if !out.contains(&n) {
            out.push(n);
        }
    };
    if let Ok(ip) = v.parse::<std::net::IpAddr>() {
        push(ip.to_string());
        return Ok(());
    }
    valid_dns(v).map_err(|why| format!("invalid server name: \"{v}\" {why}"))?;
    let v = v.to_ascii_lowercase();
    match v.strip_prefix('.') {
        Some(host) => {
            push(format!("www.{host}"));
            push(host.to_string());
        }
        None => push(v),
    }
    Ok(())
}

/// A name an ACME server can be asked for: printable ASCII, dot-separated
/// non-empty labels, an optional leading dot or `*.`, no trailing dot.
fn valid_dns(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    let body = name.strip_prefix("*.").or_else(|| name.strip_prefix('.')).unwrap_or(name);
    if let Some(i) = b.iter().position(|&c| c <= b' ' || c >= 0x7f) {
        return Err(format!("(invalid character {:x} at position {i})", b[i]));
    }
    if body.is_empty() || body.ends_with('.') {
        return Err("(does not end with a label)".into());
    }
    for label in body.split('.') {
        if label.is_empty() {
            return Err("(empty label)".into());
        }
        if let Some(c) = label.bytes().find(|c| !(c.is_ascii_alphanumeric() || b"-_~%!$&'()+,;=".contains(c))) {
            return Err(format!("(unexpected character '{}')", c as char));
        }
    }
    Ok(())
}

/// The state files' stem: the first DNS name (else the first address, an
/// IPv6 one with its colons, as nginx-acme names it) and a hash of the
/// names and key type (FNV-1a), stable across restarts.
fn order_id(names: &[String], key_type: KeyType) -> String {
    let first = names.iter().find(|n| n.parse::<std::net::IpAddr>().is_err()).or(names.first());
    let mut h: u64 = 0xcbf29ce484222325;
    let key = format!("{names:?}{key_type:?}");
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    let stem: String = first
        .map_or("", |s| s.as_str())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':') { c } else { '_' })
        .collect();
    format!("{stem}-{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_as_nginx_acme() {
        let mut v = Vec::new();
        add_identifier(&mut v, ".Example.test").unwrap();
        add_identifier(&mut v, "::0001").unwrap();
        add_identifier(&mut v, "*.example.test").unwrap();
        assert_eq!(v, ["www.example.test", "example.test", "::1", "*.example.test"]);
        assert!(add_identifier(&mut v, "www.example.*").is_err());
        assert!(add_identifier(&mut v, ".example..test").is_err());
        assert!(add_identifier(&mut v, "example.test.").is_err());
    }

    #[test]
    fn order_ids_are_stable_file_names() {
        let id = order_id(&["example.test".into()], KeyType::P256);
        assert!(id.starts_with("example.test-"));
        assert_eq!(id, order_id(&["example.test".into()], KeyType::P256));
        assert_ne!(id, order_id(&["example.test".into()], KeyType::P384));
        assert!(order_id(&["*.a".into()], KeyType::P256).starts_with("_.a-"));
        assert!(order_id(&["::1".into()], KeyType::P256).starts_with("::1-"));
    }
}
