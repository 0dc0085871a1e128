//! The GeoIP2 module's database reading (`geoip2::db`, `geoip2::value`):
//! the bytes of a `.mmdb` file as a `geoip2` block would load it, then
//! lookups of a few addresses and paths as its variables make them.

use std::net::IpAddr;

use crate::geoip2::{db, value};

/// The paths looked up in each record: keys, indexes (from the start and
/// the end, out of range), numbers read as keys, empty paths.
const PATHS: &[&[&str]] = &[
    &[],
    &["country", "iso_code"],
    &["city", "names", "en"],
    &["location", "latitude"],
    &["subdivisions", "0", "iso_code"],
    &["subdivisions", "-1", "iso_code"],
    &["subdivisions", "99"],
    &["tags", "0"],
    &["0", "1", "2"],
    &[""],
];

/// Never panics (the maxminddb crate is fed the file as is: `db::parse`
/// is what `geoip2` opens with); a file that loads loads again with the
/// same metadata; every lookup ends, gives the same answer twice, and a
/// value not found writes nothing.
pub fn geoip2(data: &[u8]) {
    let Ok(reader) = db::parse(data.to_vec()) else { return };
    let again = db::parse(data.to_vec()).expect("a file that loads loads again");
    assert_eq!(reader.metadata().build_epoch, again.metadata().build_epoch);
    assert_eq!(reader.metadata().node_count, again.metadata().node_count);
    let mut addrs: Vec<IpAddr> = ["127.0.0.1", "10.1.2.3", "0.0.0.0", "255.255.255.255", "::", "2001:db8:1::5", "::1"]
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut tail = [0u8; 16];
    let n = data.len().min(16);
    tail[..n].copy_from_slice(&data[data.len() - n..]);
    addrs.push(IpAddr::from(tail));
    addrs.push(IpAddr::from([tail[0], tail[1], tail[2], tail[3]]));
    for a in addrs {
        for p in PATHS {
            let path: Vec<String> = p.iter().map(|s| s.to_string()).collect();
            let (mut one, mut two) = (Vec::new(), Vec::new());
            let found = value::find(&reader, a, &path, &mut one);
            assert_eq!(found, value::find(&reader, a, &path, &mut two));
            assert_eq!(one, two);
            assert!(found || one.is_empty(), "a value not found writes nothing");
        }
    }
}
