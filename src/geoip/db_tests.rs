//! The databases nginx-tests' geoip.t writes, looked up as libGeoIP
//! 1.6.12 answers (checked against the library through its C API).

use super::*;

fn node(v: u32) -> Vec<u8> {
    v.to_le_bytes()[..3].to_vec()
}

/// geoip.t's country.dat (IPv6 edition): 10.0.0.1 is RU, 2001:db8:: US.
pub fn country_v6() -> Vec<u8> {
    let mut d = Vec::new();
    for i in 0..157u32 {
        let (l, r) = match i {
            2 => (i + 1, 32),
            31 => (0xffffb9, 0xffff00),
            44 | 49 | 50 | 52 | 53 | 55 | 56 | 57 => (0xffff00, i + 1),
            156 => (0xffffe1, 0xffff00),
            _ => (i + 1, 0xffff00),
        };
        d.extend(node(l));
        d.extend(node(r));
    }
    d.extend([0, 0, 0, 0xFF, 0xFF, 0xFF, 12]);
    d
}

/// geoip.t's city.dat: 10.0.0.1 in Moscow.
pub fn city() -> Vec<u8> {
    let mut d = Vec::new();
    for i in 0..32u32 {
        let (l, r) = match i {
            4 | 6 => (32, i + 1),
            31 => (32, i + 2),
            _ => (i + 1, 32),
        };
        d.extend(node(l));
        d.extend(node(r));
    }
    d.extend([42, 185]);
    d.extend(b"48\x00Moscow\x00119034\x00");
    d.extend(node(2357543));
    d.extend(node(2176202));
    d.extend([0, 0, 0, 0xFF, 0xFF, 0xFF, 2]);
    d.extend(node(32));
    d
}

/// geoip.t's org.dat: 10.0.0.1 is "Nginx" (4-byte pointers).
pub fn org() -> Vec<u8> {
    let mut d = Vec::new();
    for i in 0..32u32 {
        let (l, r) = match i {
            4 | 6 => (32, i + 1),
            31 => (32, i + 2),
            _ => (i + 1, 32),
        };
        d.extend(l.to_le_bytes());
        d.extend(r.to_le_bytes());
    }
    d.push(42);
    d.extend(b"Nginx\0");
    d.extend([0xFF, 0xFF, 0xFF, 5]);
    d.extend(node(32));
    d
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

fn code(db: &Database, s: &str) -> Option<&'static [u8]> {
    db.country_id(db.addr(ip(s))).map(|id| super::super::countries::COUNTRIES[usize::from(id)].0)
}

#[test]
fn country_v6_lookups() {
    let db = Database::parse(country_v6()).unwrap();
    assert_eq!(db.edition, COUNTRY_V6);
    assert_eq!(db.kind(), Some(Kind::Country));
    assert!(db.is_v6());
    for (a, want) in [
        ("10.0.0.1", Some(&b"RU"[..])),
        ("::ffff:10.0.0.1", Some(b"RU")),
        ("2001:db8::", Some(b"US")),
        ("2001:db8::1", None),
        ("2001:db9::", None),
        // Teredo: the client's address inverted in the last 32 bits.
        ("2001::f5ff:fffe", Some(b"RU")),
        ("::", Some(b"RU")),
        ("::10.0.0.1", Some(b"RU")),
    ] {
        assert_eq!(code(&db, a), want, "{a}");
    }
}

#[test]
fn country_v4_without_structure_info() {
    // No structure info: a country edition of 32 nodes, every right
    // branch RU and the all-zero path US.
    let mut d = Vec::new();
    for i in 0..32u32 {
        d.extend(node(if i < 31 { i + 1 } else { COUNTRY_BEGIN + 225 }));
        d.extend(node(COUNTRY_BEGIN + 185));
    }
    let db = Database::parse(d).unwrap();
    assert_eq!(db.edition, COUNTRY);
    assert!(!db.is_v6());
    assert_eq!(code(&db, "0.0.0.1"), Some(&b"RU"[..]));
    assert_eq!(code(&db, "255.255.255.255"), Some(&b"RU"[..]));
    // libGeoIP answers nothing for 0.0.0.0.
    assert_eq!(code(&db, "0.0.0.0"), None);
    // An IPv6 client of an IPv4 edition is INADDR_NONE.
    assert_eq!(db.addr(ip("2001:db8::")), Addr::V4(u32::MAX));
    assert_eq!(db.addr(ip("::ffff:1.2.3.4")), Addr::V4(0x01020304));
}

#[test]
fn city_record() {
    let db = Database::parse(city()).unwrap();
    assert_eq!(db.kind(), Some(Kind::City));
    let r = db.city(db.addr(ip("10.0.0.1"))).unwrap();
    assert_eq!(r.country, 185);
    assert_eq!(r.region, b"48");
    assert_eq!(r.city, b"Moscow");
    assert_eq!(r.postal_code, b"119034");
    assert_eq!(format_coordinate(r.latitude), "55.7543");
    assert_eq!(format_coordinate(r.longitude), "37.6202");
    assert_eq!((r.metro_code, r.area_code), (0, 0));
    assert_eq!(db.city(db.addr(ip("10.0.0.2"))), None);
    assert_eq!(db.city(db.addr(ip("::ffff:10.0.0.1"))).map(|r| r.country), Some(185));
}

#[test]
fn org_name() {
    let db = Database::parse(org()).unwrap();
    assert_eq!(db.kind(), Some(Kind::Org));
    assert_eq!(db.name(db.addr(ip("10.0.0.1"))), Some(&b"Nginx"[..]));
    assert_eq!(db.name(db.addr(ip("10.0.0.3"))), None);
}

#[test]
fn corrupt_files_are_refused_or_answer_nothing() {
    // libGeoIP refuses these too ("Error reading file ... -- corrupt").
    assert!(Database::parse(Vec::new()).is_err());
    assert!(Database::parse(vec![1, 2]).is_err());
    let mut t = city()[..100].to_vec();
    t.extend([0xFF, 0xFF, 0xFF, 2]);
    t.extend(node(32));
    assert!(Database::parse(t).is_err());
    // Structure info cut after the edition.
    assert!(Database::parse(vec![0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 2, 1]).is_err());
    // Every prefix and a pointer loop: no panic, and lookups end.
    for db in [country_v6(), city(), org()] {
        for n in 0..db.len() {
            if let Ok(d) = Database::parse(db[..n].to_vec()) {
                for a in ["10.0.0.1", "2001:db8::", "255.255.255.255"] {
                    let a = d.addr(ip(a));
                    let _ = (d.country_id(a), d.city(a), d.name(a));
                }
            }
        }
    }
}

#[test]
fn coordinates_as_nginx_prints_them() {
    assert_eq!(format_coordinate(-33.8688), "-33.8688");
    assert_eq!(format_coordinate(0.0), "0.0000");
    assert_eq!(format_coordinate(-0.00004), "-0.0000");
    assert_eq!(format_coordinate(179.99999), "180.0000");
    assert_eq!(latin1_to_utf8(b"Cura\xe7ao"), "Curaçao".as_bytes());
}
