//! nginx's GeoIP modules' shared half (ngx_http_geoip_module and
//! ngx_stream_geoip_module): the legacy MaxMind database reader (`db`),
//! libGeoIP's country and region tables (`countries`), the databases a
//! family's `geoip_country`, `geoip_city` and `geoip_org` load, and the
//! `$geoip_*` variables' values for an address.
//!
//! A family reads its main level's `geoip_*` directives first
//! ([`database`], [`proxy`]) and publishes them with [`set`] before any
//! template of the level is compiled, so every `$geoip_*` name (a `map`
//! over `$geoip_country_code` included) compiles to a [`GeoipVar`] bound
//! to that family's databases. The variables exist without a database,
//! as nginx's do, and are then not found. The family gives [`GeoipVar::
//! value`] the client address it means (http: after `geoip_proxy`'s
//! `X-Forwarded-For`; stream: after realip).

pub mod countries;
pub mod db;

use std::net::IpAddr;
use std::sync::Arc;

use crate::cidr::Cidr;
use crate::config::parser::{ConfError, Directive};
use db::{Database, Kind};

/// A family's `geoip_*` settings.
#[derive(Default, Debug)]
pub struct GeoipConf {
    pub country: Option<Arc<Database>>,
    pub city: Option<Arc<Database>>,
    pub org: Option<Arc<Database>>,
    /// `geoip_proxy` (http only).
    pub proxies: Vec<Cidr>,
    /// `geoip_proxy_recursive`.
    pub proxy_recursive: bool,
}

/// The value a `$geoip_*` variable reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    CountryCode,
    CountryCode3,
    CountryName,
    AreaCode,
    CityContinentCode,
    CityCountryCode,
    CityCountryCode3,
    CityCountryName,
    DmaCode,
    Latitude,
    Longitude,
    Region,
    RegionName,
    City,
    PostalCode,
    Org,
}

impl Field {
    /// The field of `$geoip_NAME`.
    pub fn from_name(name: &str) -> Option<Field> {
        use Field::*;
        Some(match name.to_ascii_lowercase().strip_prefix("geoip_")? {
            "country_code" => CountryCode,
            "country_code3" => CountryCode3,
            "country_name" => CountryName,
            "area_code" => AreaCode,
            "city_continent_code" => CityContinentCode,
            "city_country_code" => CityCountryCode,
            "city_country_code3" => CityCountryCode3,
            "city_country_name" => CityCountryName,
            // nginx's `$geoip_dma_code` is libGeoIP's metro code.
            "dma_code" => DmaCode,
            "latitude" => Latitude,
            "longitude" => Longitude,
            "region" => Region,
            "region_name" => RegionName,
            "city" => City,
            "postal_code" => PostalCode,
            "org" => Org,
            _ => return None,
        })
    }
}

/// A compiled `$geoip_*` variable: the family's databases and the field.
pub struct GeoipVar {
    pub conf: Arc<GeoipConf>,
    pub field: Field,
}

impl std::fmt::Debug for GeoipVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "geoip {:?}", self.field)
    }
}

impl PartialEq for GeoipVar {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.conf, &other.conf) && self.field == other.field
    }
}

impl GeoipVar {
    /// The value for a client (None: a unix-domain client, which nginx
    /// looks up as `INADDR_NONE`), appended to `out`; false when not
    /// found (no database, no answer, or no such field in the record).
    pub fn value(&self, client: Option<IpAddr>, out: &mut Vec<u8>) -> bool {
        use Field::*;
        let c = &self.conf;
        match self.field {
            CountryCode | CountryCode3 | CountryName => {
                let Some(db) = &c.country else { return false };
                let Some(id) = db.country_id(db.addr(client)) else { return false };
                let row = &countries::COUNTRIES[usize::from(id)];
                out.extend_from_slice(match self.field {
                    CountryCode => row.0,
                    CountryCode3 => row.1,
                    _ if db.utf8 => row.4,
                    _ => row.3,
                });
                true
            }
            Org => {
                let Some(db) = &c.org else { return false };
                let Some(name) = db.name(db.addr(client)) else { return false };
                if db.utf8 {
                    out.extend_from_slice(&db::latin1_to_utf8(name));
                } else {
                    out.extend_from_slice(name);
                }
                true
            }
            _ => {
                let Some(db) = &c.city else { return false };
                let Some(r) = db.city(db.addr(client)) else { return false };
                let row = &countries::COUNTRIES[usize::from(r.country)];
                // nginx: a string field libGeoIP left NULL (empty in the
                // file) is not found; numbers are always there.
                let text = |out: &mut Vec<u8>, s: &[u8]| {
                    out.extend_from_slice(s);
                    !s.is_empty()
                };
                match self.field {
                    CityContinentCode => text(out, row.2),
                    CityCountryCode => text(out, row.0),
                    CityCountryCode3 => text(out, row.1),
                    CityCountryName => text(out, if db.utf8 { row.4 } else { row.3 }),
                    Region => text(out, &r.region),
                    RegionName => match (r.region.is_empty(), countries::region_name(row.0, &r.region)) {
                        (false, Some(n)) => text(out, n.as_bytes()),
                        _ => false,
                    },
                    City if db.utf8 => text(out, &db::latin1_to_utf8(&r.city)),
                    City => text(out, &r.city),
                    PostalCode => text(out, &r.postal_code),
                    Latitude => text(out, db::format_coordinate(r.latitude).as_bytes()),
                    Longitude => text(out, db::format_coordinate(r.longitude).as_bytes()),
                    DmaCode => text(out, r.metro_code.to_string().as_bytes()),
                    AreaCode => text(out, r.area_code.to_string().as_bytes()),
                    CountryCode | CountryCode3 | CountryName | Org => false,
                }
            }
        }
    }
}

thread_local! {
    /// The family being built's databases (a configuration is built on
    /// one thread; each family's build calls [`set`] first).
    static CURRENT: std::cell::RefCell<Arc<GeoipConf>> = std::cell::RefCell::new(Arc::default());
}

/// Publishes a family's databases for the templates it compiles next.
pub fn set(conf: GeoipConf) {
    CURRENT.with(|c| *c.borrow_mut() = Arc::new(conf));
}

/// `$geoip_*` for `Template::compile`.
pub fn lookup_var(name: &str) -> Option<Arc<GeoipVar>> {
    let field = Field::from_name(name)?;
    Some(Arc::new(GeoipVar { conf: CURRENT.with(|c| c.borrow().clone()), field }))
}

/// Whether a directive is one of a family's database directives.
pub fn is_database_directive(name: &str) -> bool {
    matches!(name, "geoip_country" | "geoip_city" | "geoip_org")
}

/// `geoip_country`, `geoip_city` or `geoip_org FILE [utf8]` into `conf`,
/// with nginx's messages. nginx opens the file as written (relative to
/// the working directory, not the prefix).
pub fn database(conf: &mut GeoipConf, d: &Directive) -> Result<(), ConfError> {
    let (slot, want) = match d.name.as_str() {
        "geoip_country" => (&mut conf.country, Kind::Country),
        "geoip_city" => (&mut conf.city, Kind::City),
        _ => (&mut conf.org, Kind::Org),
    };
    if slot.is_some() {
        return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
    }
    let file = d.args[0].text.as_str();
    let utf8 = match d.args.get(1).map(|a| a.text.as_str()) {
        None => false,
        Some("utf8") => true,
        Some(other) => return Err(ConfError::at(format!("invalid parameter \"{other}\""), &d.span)),
    };
    let opened = std::fs::read(file).map_err(|e| e.to_string()).and_then(Database::parse);
    let mut db = opened.map_err(|e| ConfError::at(format!("GeoIP_open(\"{file}\") failed ({e})"), &d.span))?;
    if db.kind() != Some(want) {
        // nginx's words: the city directive names its kind.
        let what = if want == Kind::City { "GeoIP City" } else { "GeoIP" };
        return Err(ConfError::at(format!("invalid {what} database \"{file}\" type:{}", db.edition), &d.span));
    }
    db.utf8 = utf8;
    *slot = Some(Arc::new(db));
    Ok(())
}

/// `geoip_proxy CIDR`: nginx's `ngx_http_geoip_cidr_value`, which takes
/// `255.255.255.255` as a host.
pub fn proxy(conf: &mut GeoipConf, d: &Directive, warnings: &mut Vec<String>) -> Result<(), ConfError> {
    conf.proxies.push(proxy_cidr(d, warnings)?);
    Ok(())
}

/// The network of a `geoip_proxy` or `geoip2_proxy` (the GeoIP2 module
/// copies the legacy one's parser, messages included).
pub fn proxy_cidr(d: &Directive, warnings: &mut Vec<String>) -> Result<Cidr, ConfError> {
    let text = d.args[0].text.as_str();
    if text == "255.255.255.255" {
        return Ok(Cidr::V4 { addr: u32::MAX, mask: u32::MAX });
    }
    let p = Cidr::parse(text)
        .filter(|p| p.cidr != Cidr::Unix)
        .ok_or_else(|| ConfError::at(format!("invalid network \"{text}\""), &d.span))?;
    if p.low_bits_set {
        warnings.push(ConfError::at(format!("low address bits of {text} are meaningless"), &d.span).to_string());
    }
    Ok(p.cidr)
}
