//! ngx_http_geoip2_module: `geoip2 FILE { ... }`, `geoip2_proxy` and
//! `geoip2_proxy_recursive` at the http level (`crate::geoip2`, shared
//! with stream).
//!
//! Read before any other directive of the level ([`read_main`], from
//! `config::build`, after the legacy GeoIP module's), so every template,
//! `map` blocks included, compiles a geoip2 variable bound to its
//! database. Without `source=`, a variable looks up the request's client
//! (after realip), replaced by `X-Forwarded-For`'s address when the
//! client is among `geoip2_proxy`'s networks ([`address`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{self, Cmd, HTTP, R, Set, cmd, multi};
use crate::geoip2::Geoip2Conf;

pub static DIRECTIVES: &[Cmd] = &[
    Cmd { block: true, multi: true, ..cmd("geoip2", HTTP, 1, 1, Set::Ctx(read_early)) },
    multi(cmd("geoip2_proxy", HTTP, 1, 1, Set::Ctx(read_early))),
    cmd("geoip2_proxy_recursive", HTTP, 1, 1, Set::Ctx(read_early)),
];

/// The rows' setter: [`read_main`] applied them before the level's other
/// directives, so the builder's pass over the level skips them.
fn read_early(_: &Directive, _: &mut Ctx) -> R {
    Ok(())
}

/// Whether the http level's builder leaves `name` to [`read_main`].
pub fn is_early(name: &str) -> bool {
    DIRECTIVES.iter().any(|c| c.name == name)
}

/// Reads the http level's geoip2 directives (the proxies first: every
/// variable of the level reads them) and publishes the variables.
pub fn read_main(dirs: &[Directive], ctx: &mut Ctx) -> Result<(), ConfError> {
    crate::geoip2::reset();
    let mut conf = Geoip2Conf::default();
    let mut recursive_set = false;
    let ours = || dirs.iter().filter(|d| is_early(&d.name));
    for d in ours() {
        table::check_shape(table::lookup(&d.name).ok_or_else(|| table::unknown(d))?, d)?;
        match d.name.as_str() {
            "geoip2_proxy" => conf.proxies.push(crate::geoip::proxy_cidr(d, &mut ctx.warnings)?),
            "geoip2_proxy_recursive" => {
                if recursive_set {
                    return Err(ConfError::at("\"geoip2_proxy_recursive\" directive is duplicate", &d.span));
                }
                recursive_set = true;
                conf.proxy_recursive = crate::config::set_main::flag(d)?;
            }
            _ => {}
        }
    }
    let conf = Arc::new(conf);
    let mut seen = Vec::new();
    for d in ours().filter(|d| d.name == "geoip2") {
        let path = ctx.path(&d.args[0].text);
        crate::geoip2::block(d, path, &conf, &mut seen, &mut ctx.warnings)?;
    }
    Ok(())
}

/// The address a variable without `source=` looks up: the client (None
/// for a unix-domain one), or with `geoip2_proxy` and a client among
/// those networks, the address `X-Forwarded-For` names.
pub fn address(conf: &Geoip2Conf, client: Option<SocketAddr>, xff: &[&[u8]]) -> Option<IpAddr> {
    let client = client?;
    if !conf.proxies.is_empty()
        && !xff.is_empty()
        && let Some(a) = crate::http::realip::forwarded(client, xff, &conf.proxies, conf.proxy_recursive)
    {
        return Some(a.ip());
    }
    Some(client.ip())
}
