//! ngx_http_geoip_module: `geoip_country`, `geoip_city`, `geoip_org`,
//! `geoip_proxy` and `geoip_proxy_recursive` at the http level, and the
//! `$geoip_*` variables (`crate::geoip`, shared with stream).
//!
//! The directives are read before any other of the http level
//! ([`read_main`], from `config::build`), so that every template of the
//! configuration, `map` blocks over `$geoip_country_code` included,
//! compiles its `$geoip_*` names bound to these databases. The client
//! address a variable looks up is the request's (after realip), replaced
//! by `X-Forwarded-For`'s when it is among `geoip_proxy`'s networks
//! ([`client`]).

use std::net::IpAddr;

use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{self, Cmd, HTTP, R, Set, cmd, multi};
use crate::geoip::GeoipConf;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("geoip_country", HTTP, 1, 2, Set::Ctx(read_early)),
    cmd("geoip_city", HTTP, 1, 2, Set::Ctx(read_early)),
    cmd("geoip_org", HTTP, 1, 2, Set::Ctx(read_early)),
    multi(cmd("geoip_proxy", HTTP, 1, 1, Set::Ctx(read_early))),
    cmd("geoip_proxy_recursive", HTTP, 1, 1, Set::Ctx(read_early)),
];

/// The rows' setter: the directives were applied by [`read_main`] before
/// the level's others, so the builder's pass over the level skips them.
fn read_early(_: &Directive, _: &mut Ctx) -> R {
    Ok(())
}

/// Whether the http level's builder leaves `name` to [`read_main`].
pub fn is_early(name: &str) -> bool {
    DIRECTIVES.iter().any(|c| c.name == name)
}

/// Reads the http level's `geoip_*` directives and publishes the
/// databases for the templates compiled after.
pub fn read_main(dirs: &[Directive], ctx: &mut Ctx) -> Result<(), ConfError> {
    let mut conf = GeoipConf::default();
    let mut recursive_set = false;
    for d in dirs.iter().filter(|d| is_early(&d.name)) {
        table::check_shape(table::lookup(&d.name).ok_or_else(|| table::unknown(d))?, d)?;
        match d.name.as_str() {
            "geoip_proxy" => crate::geoip::proxy(&mut conf, d, &mut ctx.warnings)?,
            "geoip_proxy_recursive" => {
                if recursive_set {
                    return Err(ConfError::at("\"geoip_proxy_recursive\" directive is duplicate", &d.span));
                }
                recursive_set = true;
                conf.proxy_recursive = crate::config::set_main::flag(d)?;
            }
            _ => crate::geoip::database(&mut conf, d)?,
        }
    }
    crate::geoip::set(conf);
    Ok(())
}

/// The address a request's `$geoip_*` look up: the client (None for a
/// unix-domain one), or with `geoip_proxy` and a client among those
/// networks, the address `X-Forwarded-For` names.
pub fn client(conf: &GeoipConf, client: Option<std::net::SocketAddr>, xff: &[&[u8]]) -> Option<IpAddr> {
    let client = client?;
    if !conf.proxies.is_empty()
        && !xff.is_empty()
        && let Some(a) = crate::http::realip::forwarded(client, xff, &conf.proxies, conf.proxy_recursive)
    {
        return Some(a.ip());
    }
    Some(client.ip())
}
