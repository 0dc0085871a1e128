//! The legacy GeoIP database reader (`geoip::db`): the bytes of a `.dat`
//! file as `geoip_country`, `geoip_city` or `geoip_org` would load it.

use std::net::IpAddr;
use std::sync::Arc;

use crate::geoip::db::{Database, Kind};
use crate::geoip::{Field, GeoipConf, GeoipVar};

/// First byte: bit 0 `utf8`; the rest is the file. Never panics; a file
/// that loads loads the same again; every lookup (fixed addresses and
/// ones taken from the input's last bytes) ends, a name is a NUL-free
/// slice of the file, a country id is never 0, and every `$geoip_*`
/// value of the kind the file is renders without a NUL.
pub fn geoip(data: &[u8]) {
    let Some((&flags, file)) = data.split_first() else { return };
    let Ok(mut db) = Database::parse(file.to_vec()) else { return };
    let again = Database::parse(file.to_vec()).expect("a file that loads loads again");
    assert_eq!((db.edition, db.is_v6(), db.kind()), (again.edition, again.is_v6(), again.kind()));
    db.utf8 = flags & 1 == 1;
    let mut addrs: Vec<Option<IpAddr>> = ["10.0.0.1", "0.0.0.0", "255.255.255.255", "::", "2001:db8::", "2001::1"]
        .iter()
        .map(|a| a.parse().ok())
        .collect();
    addrs.push(None);
    let mut tail = [0u8; 16];
    let n = file.len().min(16);
    tail[..n].copy_from_slice(&file[file.len() - n..]);
    addrs.push(Some(IpAddr::from(tail)));
    addrs.push(Some(IpAddr::from([tail[0], tail[1], tail[2], tail[3]])));
    for a in &addrs {
        let at = db.addr(*a);
        assert_ne!(db.country_id(at), Some(0));
        if let Some(name) = db.name(at) {
            assert!(!name.contains(&0));
            assert!(name.len() < file.len(), "a name is part of the file");
        }
        if let Some(r) = db.city(at) {
            assert!(!r.region.contains(&0) && !r.city.contains(&0) && !r.postal_code.contains(&0));
        }
    }
    let Some(kind) = db.kind() else { return };
    let db = Arc::new(db);
    let mut conf = GeoipConf::default();
    match kind {
        Kind::Country => conf.country = Some(db),
        Kind::City => conf.city = Some(db),
        Kind::Org => conf.org = Some(db),
    }
    let conf = Arc::new(conf);
    for name in [
        "country_code",
        "country_code3",
        "country_name",
        "area_code",
        "city_continent_code",
        "city_country_code",
        "city_country_code3",
        "city_country_name",
        "dma_code",
        "latitude",
        "longitude",
        "region",
        "region_name",
        "city",
        "postal_code",
        "org",
    ] {
        let field = Field::from_name(&format!("geoip_{name}")).expect("a geoip field");
        let var = GeoipVar { conf: conf.clone(), field };
        for a in &addrs {
            let mut out = Vec::new();
            let found = var.value(*a, &mut out);
            assert!(found || out.is_empty(), "{name}: a value not found is empty");
            assert!(!out.contains(&0), "{name}: {out:?}");
        }
    }
}
