//! The legacy MaxMind GeoIP database (`.dat`) as libGeoIP reads it with
//! `GEOIP_MEMORY_CACHE`, the mode nginx opens it in: the whole file in
//! memory, a binary tree over the address bits first (each node two
//! little-endian pointers of the record length, left for a 0 bit, right
//! for a 1), then the records. A pointer at or above the database's
//! segment ends the walk: for a country edition its distance from the
//! segment is the country id; for city and organization editions it
//! points into the record area at `pointer + (2 * record length - 1) *
//! segment`. The file ends with its structure info: three 0xFF bytes, the
//! edition, and for city and organization editions the segment (3 bytes),
//! found within the last 20 bytes; a file without it is a country
//! edition.
//!
//! Everything the file says is bounds-checked: a pointer outside the
//! file ends a lookup with no answer instead of libGeoIP's read past its
//! buffer, and a file whose tree cannot fit is refused at load.

use std::net::{IpAddr, Ipv6Addr};

/// libGeoIP's edition numbers that nginx's modules accept.
pub mod edition {
    pub const COUNTRY: u8 = 1;
    pub const CITY_REV1: u8 = 2;
    pub const ISP: u8 = 4;
    pub const ORG: u8 = 5;
    pub const CITY_REV0: u8 = 6;
    pub const ASNUM: u8 = 9;
    pub const DOMAIN: u8 = 11;
    pub const COUNTRY_V6: u8 = 12;
    pub const ASNUM_V6: u8 = 21;
    pub const ISP_V6: u8 = 22;
    pub const ORG_V6: u8 = 23;
    pub const DOMAIN_V6: u8 = 24;
    pub const CITY_REV1_V6: u8 = 30;
    pub const CITY_REV0_V6: u8 = 31;
}
use edition::*;

/// libGeoIP's `COUNTRY_BEGIN`: the segment of country editions.
const COUNTRY_BEGIN: u32 = 16_776_960;
/// `LARGE_COUNTRY_BEGIN` (editions 17 and 18).
const LARGE_COUNTRY_BEGIN: u32 = 16_515_072;
/// `STATE_BEGIN_REV0` and `_REV1` (region editions 7 and 3).
const STATE_BEGIN_REV0: u32 = 16_700_000;
const STATE_BEGIN_REV1: u32 = 16_000_000;
/// How far from the end libGeoIP looks for the structure info.
const STRUCTURE_INFO_MAX_SIZE: usize = 20;

/// What a database answers, by the `geoip_*` directive that loads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Country,
    City,
    Org,
}

/// An opened database.
pub struct Database {
    data: Vec<u8>,
    /// libGeoIP's `databaseType`.
    pub edition: u8,
    /// `databaseSegments[0]`.
    segment: u32,
    /// Bytes per tree pointer (3, or 4 for organization, ISP and domain).
    record_len: usize,
    /// `geoip_* FILE utf8`: names in UTF-8 instead of ISO-8859-1.
    pub utf8: bool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GeoIP database (edition {}, {} bytes)", self.edition, self.data.len())
    }
}

/// A city edition's record (libGeoIP's `GeoIPRecord`, the fields nginx
/// reads).
#[derive(Debug, PartialEq)]
pub struct CityRecord {
    pub country: u8,
    pub region: Vec<u8>,
    pub city: Vec<u8>,
    pub postal_code: Vec<u8>,
    /// As libGeoIP stores them: `float`.
    pub latitude: f32,
    pub longitude: f32,
    pub metro_code: i32,
    pub area_code: i32,
}

/// The address a lookup walks the tree with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Addr {
    /// For an IPv4 edition: 32 bits.
    V4(u32),
    /// For an IPv6 edition: 128 bits.
    V6(u128),
}

impl Database {
    /// Reads the structure info of a database file's bytes. `Err` says
    /// what is wrong with the file; an edition nginx does not take is not
    /// an error here (the directive names it).
    pub fn parse(data: Vec<u8>) -> Result<Database, String> {
        if data.is_empty() {
            return Err("empty file".into());
        }
        let mut edition = COUNTRY;
        let mut segment = None;
        let mut record_len = 3;
        let len = data.len();
        for i in 0..STRUCTURE_INFO_MAX_SIZE {
            let Some(p) = len.checked_sub(3 + i) else { break };
            if data[p..p + 3] != [0xFF, 0xFF, 0xFF] {
                continue;
            }
            let Some(&t) = data.get(p + 3) else { break };
            edition = if t >= 106 { t - 105 } else { t };
            if two_segments(edition) {
                // CITYCONFIDENCEDIST (16) has a 4-byte segment.
                let n = if edition == 16 { 4 } else { 3 };
                let bytes = data.get(p + 4..p + 4 + n).ok_or("truncated structure info")?;
                segment = Some(le(bytes));
                if matches!(edition, ORG | ORG_V6 | DOMAIN | DOMAIN_V6 | ISP | ISP_V6) {
                    record_len = 4;
                }
            }
            break;
        }
        let segment = match (segment, edition) {
            (Some(s), _) => s,
            (None, COUNTRY | 8 | 10 | COUNTRY_V6) => COUNTRY_BEGIN,
            (None, 17 | 18) => LARGE_COUNTRY_BEGIN,
            (None, 7) => STATE_BEGIN_REV0,
            (None, 3) => STATE_BEGIN_REV1,
            (None, t) => return Err(format!("unknown database type {t}")),
        };
        if len < 2 * record_len {
            return Err("truncated file".into());
        }
        if segment == 0 {
            return Err("empty search tree".into());
        }
        // City and organization editions: the tree of `segment` nodes
        // comes before the records.
        if segment != COUNTRY_BEGIN && (segment as usize).saturating_mul(2 * record_len) > len {
            return Err("truncated search tree".into());
        }
        Ok(Database { data, edition, segment, record_len, utf8: false })
    }

    /// Whether the edition is looked up by IPv6 address.
    pub fn is_v6(&self) -> bool {
        matches!(self.edition, COUNTRY_V6 | 18 | ASNUM_V6 | ISP_V6 | ORG_V6 | DOMAIN_V6 | CITY_REV1_V6 | CITY_REV0_V6)
    }

    /// The edition's kind if nginx's `geoip_country`, `geoip_city` or
    /// `geoip_org` accepts it.
    pub fn kind(&self) -> Option<Kind> {
        match self.edition {
            COUNTRY | COUNTRY_V6 => Some(Kind::Country),
            CITY_REV0 | CITY_REV1 | CITY_REV0_V6 | CITY_REV1_V6 => Some(Kind::City),
            ISP | ORG | DOMAIN | ASNUM | ISP_V6 | ORG_V6 | DOMAIN_V6 | ASNUM_V6 => Some(Kind::Org),
            _ => None,
        }
    }

    /// The address nginx looks a client up by in this database: an IPv4
    /// edition takes an IPv4-mapped IPv6 address as its IPv4 address and
    /// any other IPv6 address (or none, a unix socket's client) as
    /// `INADDR_NONE`; an IPv6 edition takes an IPv4 address mapped.
    pub fn addr(&self, ip: Option<IpAddr>) -> Addr {
        if self.is_v6() {
            Addr::V6(match ip {
                Some(IpAddr::V4(a)) => u128::from(a.to_ipv6_mapped()),
                Some(IpAddr::V6(a)) => u128::from(a),
                None => u128::from(Ipv6Addr::UNSPECIFIED),
            })
        } else {
            Addr::V4(match ip {
                Some(IpAddr::V4(a)) => u32::from(a),
                Some(IpAddr::V6(a)) => a.to_ipv4_mapped().map_or(u32::MAX, u32::from),
                None => u32::MAX,
            })
        }
    }

    /// libGeoIP's `_GeoIP_seek_record`: the pointer the walk ends at.
    fn seek(&self, addr: Addr) -> Option<u32> {
        let (bits, depth) = match addr {
            Addr::V4(a) => (u128::from(a), 32),
            Addr::V6(mut a) => {
                // libGeoIP (Teredo handling on by default): an address in
                // 2001::/32 is looked up as its client's IPv4 address,
                // the last 32 bits inverted, after 96 zero bits.
                if a >> 96 == 0x2001_0000 {
                    a = (a & 0xFFFF_FFFF) ^ 0xFFFF_FFFF;
                }
                (a, 128)
            }
        };
        let rl = self.record_len;
        let mut offset = 0usize;
        for depth in (0..depth).rev() {
            let node = offset.checked_mul(2 * rl)?;
            let side = if (bits >> depth) & 1 == 1 { rl } else { 0 };
            let x = le(self.data.get(node + side..node + side + rl)?);
            if x >= self.segment {
                return Some(x);
            }
            offset = x as usize;
        }
        None
    }

    /// The byte offset of the record a walk ended at, for city and
    /// organization editions.
    fn record_at(&self, addr: Addr) -> Option<usize> {
        let x = self.seek(addr)?;
        if x == self.segment {
            return None;
        }
        let p = (x as usize).checked_add((2 * self.record_len - 1).checked_mul(self.segment as usize)?)?;
        (p < self.data.len()).then_some(p)
    }

    /// The country id (`GeoIP_id_by_ipnum`); None for id 0 ("--", not
    /// found) and ids past the table.
    pub fn country_id(&self, addr: Addr) -> Option<u8> {
        // `GeoIP_id_by_ipnum` answers nothing for 0.0.0.0.
        if addr == Addr::V4(0) {
            return None;
        }
        let id = self.seek(addr)?.checked_sub(self.segment)?;
        u8::try_from(id).ok().filter(|id| *id > 0)
    }

    /// The city record (`GeoIP_record_by_ipnum`).
    pub fn city(&self, addr: Addr) -> Option<CityRecord> {
        let mut p = self.record_at(addr)?;
        let byte = |i: usize| self.data.get(i).copied().unwrap_or(0);
        let country = byte(p);
        p += 1;
        let string = |p: &mut usize| {
            let s = self.cstr(*p);
            *p += s.len() + 1;
            s.to_vec()
        };
        let region = string(&mut p);
        let city = string(&mut p);
        let postal_code = string(&mut p);
        let int3 = |p: usize| (0..3).fold(0u32, |acc, j| acc | u32::from(byte(p + j)) << (8 * j));
        // libGeoIP computes in double and stores a float.
        let latitude = (f64::from(int3(p)) / 10000.0 - 180.0) as f32;
        let longitude = (f64::from(int3(p + 3)) / 10000.0 - 180.0) as f32;
        let (mut metro_code, mut area_code) = (0, 0);
        if matches!(self.edition, CITY_REV1 | CITY_REV1_V6)
            && super::countries::COUNTRIES[usize::from(country)].0 == b"US"
        {
            let combo = int3(p + 6) as i32;
            metro_code = combo / 1000;
            area_code = combo % 1000;
        }
        Some(CityRecord { country, region, city, postal_code, latitude, longitude, metro_code, area_code })
    }

    /// The organization, ISP, domain or AS name (`GeoIP_name_by_ipnum`).
    pub fn name(&self, addr: Addr) -> Option<&[u8]> {
        Some(self.cstr(self.record_at(addr)?))
    }

    /// The NUL-terminated string at `p`, cut at the end of the file.
    fn cstr(&self, p: usize) -> &[u8] {
        let rest = self.data.get(p..).unwrap_or(&[]);
        &rest[..rest.iter().position(|b| *b == 0).unwrap_or(rest.len())]
    }
}

/// Editions whose structure info carries a segment.
fn two_segments(t: u8) -> bool {
    matches!(t, 2 | 4 | 5 | 6 | 9 | 11 | 13 | 14 | 15 | 16 | 21..=33 | 38)
}

/// A little-endian number of 3 or 4 bytes.
fn le(b: &[u8]) -> u32 {
    b.iter().rev().fold(0, |acc, x| acc << 8 | u32::from(*x))
}

/// ISO-8859-1 to UTF-8 (libGeoIP's `_GeoIP_iso_8859_1__utf8`), for
/// `utf8` databases' city and organization names.
pub fn latin1_to_utf8(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        if b < 0x80 {
            out.push(b);
        } else {
            out.push(0xC0 | b >> 6);
            out.push(0x80 | (b & 0x3F));
        }
    }
    out
}

/// nginx's `ngx_sprintf("%.4f")`: the integer part, then four digits of
/// the fraction rounded half up.
pub fn format_coordinate(v: f32) -> String {
    let mut f = f64::from(v);
    let sign = if f < 0.0 { "-" } else { "" };
    f = f.abs();
    let mut int = f as i64 as u64;
    let mut frac = ((f - int as f64) * 10000.0 + 0.5) as u64;
    if frac == 10000 {
        int += 1;
        frac = 0;
    }
    format!("{sign}{int}.{frac:04}")
}

#[cfg(test)]
#[path = "db_tests.rs"]
mod tests;
