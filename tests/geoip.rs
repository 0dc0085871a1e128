//! nginx's GeoIP modules with databases built here in the legacy MaxMind
//! format (the layout nginx-tests' geoip.t writes, generalized: a binary
//! tree over address bits, then the records): the `$geoip_*` variables a
//! client sees in headers for several addresses (varied with
//! `geoip_proxy` and `X-Forwarded-For`, recursive or not), IPv4 and IPv6
//! editions, `utf8` names, a `map` over `$geoip_country_code`, the stream
//! module behind the PROXY protocol, and `-t` refusing a truncated or
//! wrong-kind database. Runs under nginx 1.22 too (`SLUICE_TEST_NGINX=1`,
//! Debian's libnginx-mod-http-geoip and libnginx-mod-stream-geoip).

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};

use common::*;

/// libGeoIP's segment of country editions.
const COUNTRY_BEGIN: u32 = 16_776_960;
/// Country ids in libGeoIP's table.
const RU: u32 = 185;
const US: u32 = 225;
const SE: u32 = 191;
const CW: u32 = 10;

/// A binary tree of `bits`-bit addresses: node i's children, each either a
/// node number or a leaf (`Leaf(n)`: record n, resolved once the node
/// count is known).
#[derive(Clone, Copy)]
enum Child {
    Node(usize),
    Leaf(usize),
    Default,
}

struct Tree {
    bits: u32,
    nodes: Vec<[Child; 2]>,
}

impl Tree {
    fn new(bits: u32) -> Tree {
        Tree { bits, nodes: vec![[Child::Default; 2]] }
    }

    /// Maps `addr/len` to record `leaf` (more specific prefixes first is
    /// not needed: a later, longer prefix splits an earlier leaf).
    fn insert(&mut self, addr: u128, len: u32, leaf: usize) {
        let mut n = 0;
        for i in 0..len {
            let bit = ((addr >> (self.bits - 1 - i)) & 1) as usize;
            if i + 1 == len {
                self.nodes[n][bit] = Child::Leaf(leaf);
                return;
            }
            n = match self.nodes[n][bit] {
                Child::Node(m) => m,
                old => {
                    self.nodes.push([old; 2]);
                    let m = self.nodes.len() - 1;
                    self.nodes[n][bit] = Child::Node(m);
                    m
                }
            };
        }
    }

    /// The tree with pointers `rl` bytes wide; `leaf(i)` and `default`
    /// are the pointers of records and of "not found".
    fn write(&self, rl: usize, leaf: impl Fn(usize) -> u32, default: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for n in &self.nodes {
            for c in n {
                let v = match *c {
                    Child::Node(m) => m as u32,
                    Child::Leaf(i) => leaf(i),
                    Child::Default => default,
                };
                out.extend_from_slice(&v.to_le_bytes()[..rl]);
            }
        }
        out
    }
}

fn v4(s: &str) -> u128 {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn v6(s: &str) -> u128 {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A country edition: (network, length, country id).
fn country_db(v6_edition: bool, nets: &[(&str, u32, u32)]) -> Vec<u8> {
    let mut t = Tree::new(if v6_edition { 128 } else { 32 });
    for (i, (a, len, _)) in nets.iter().enumerate() {
        t.insert(if v6_edition { v6(a) } else { v4(a) }, *len, i);
    }
    let mut d = t.write(3, |i| COUNTRY_BEGIN + nets[i].2, COUNTRY_BEGIN);
    if v6_edition {
        d.extend([0, 0, 0, 0xFF, 0xFF, 0xFF, 12]);
    }
    d
}

/// A city record: country id, region, city (ISO-8859-1), postal code,
/// latitude, longitude, metro and area code (read for US only).
struct City<'a> {
    country: u8,
    region: &'a str,
    city: &'a [u8],
    postal: &'a str,
    lat: f64,
    lon: f64,
    metro_area: u32,
}

fn int3(v: u32) -> [u8; 3] {
    let b = v.to_le_bytes();
    [b[0], b[1], b[2]]
}

/// Record-area editions: the tree, a dummy byte (the "not found"
/// pointer's target), the records, then the structure info.
fn record_db(v6_edition: bool, edition: u8, rl: usize, nets: &[(&str, u32, usize)], records: &[Vec<u8>]) -> Vec<u8> {
    let mut t = Tree::new(if v6_edition { 128 } else { 32 });
    for (a, len, rec) in nets {
        t.insert(if v6_edition { v6(a) } else { v4(a) }, *len, *rec);
    }
    let segment = t.nodes.len() as u32;
    let mut area = vec![42u8];
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(area.len() as u32);
        area.extend_from_slice(r);
    }
    let mut d = t.write(rl, |i| segment + offsets[i], segment);
    d.extend(area);
    d.extend([0xFF, 0xFF, 0xFF, edition]);
    d.extend(int3(segment));
    d
}

fn city_record(c: &City) -> Vec<u8> {
    let mut r = vec![c.country];
    for s in [c.region.as_bytes(), c.city, c.postal.as_bytes()] {
        r.extend_from_slice(s);
        r.push(0);
    }
    r.extend(int3(((c.lat + 180.0) * 10000.0).round() as u32));
    r.extend(int3(((c.lon + 180.0) * 10000.0).round() as u32));
    r.extend(int3(c.metro_area));
    r
}

fn city_db(v6_edition: bool) -> Vec<u8> {
    let moscow = City {
        country: 185,
        region: "48",
        city: b"Moscow",
        postal: "119034",
        lat: 55.7543,
        lon: 37.6202,
        metro_area: 0,
    };
    let mv = City {
        country: 225,
        region: "CA",
        city: b"Mountain View",
        postal: "94043",
        lat: 37.386,
        lon: -122.0838,
        metro_area: 807_650,
    };
    // No city or postal code: those variables are not found.
    let se = City { country: 191, region: "", city: b"", postal: "", lat: 62.0, lon: 15.0, metro_area: 0 };
    let cw = City { country: 10, region: "", city: b"Cura\xe7ao", postal: "", lat: 12.1, lon: -68.9, metro_area: 0 };
    let recs: Vec<Vec<u8>> = [moscow, mv, se, cw].iter().map(city_record).collect();
    let nets: &[(&str, u32, usize)] = if v6_edition {
        &[("2001:db8:1::", 48, 0), ("2001:db8:2::", 48, 1), ("::ffff:10.1.2.3", 128, 0)]
    } else {
        &[("10.1.2.3", 32, 0), ("192.0.2.0", 24, 1), ("198.51.100.0", 24, 2), ("203.0.113.7", 32, 3)]
    };
    record_db(v6_edition, if v6_edition { 30 } else { 2 }, 3, nets, &recs)
}

fn org_db(v6_edition: bool) -> Vec<u8> {
    let recs = vec![b"Nginx\0".to_vec(), b"Example Org\0".to_vec(), b"Cura\xe7ao Telecom\0".to_vec()];
    let nets: &[(&str, u32, usize)] = if v6_edition {
        &[("2001:db8:1::", 48, 0), ("2001:db8:2::", 48, 1)]
    } else {
        &[("10.0.0.0", 8, 0), ("192.0.2.0", 24, 1), ("203.0.113.7", 32, 2)]
    };
    record_db(v6_edition, if v6_edition { 23 } else { 5 }, 4, nets, &recs)
}

const HEADERS: &[(&str, &str)] = &[
    ("X-Country-Code", "geoip_country_code"),
    ("X-Country-Code3", "geoip_country_code3"),
    ("X-Country-Name", "geoip_country_name"),
    ("X-Area-Code", "geoip_area_code"),
    ("X-C-Continent-Code", "geoip_city_continent_code"),
    ("X-C-Country-Code", "geoip_city_country_code"),
    ("X-C-Country-Code3", "geoip_city_country_code3"),
    ("X-C-Country-Name", "geoip_city_country_name"),
    ("X-Dma-Code", "geoip_dma_code"),
    ("X-Latitude", "geoip_latitude"),
    ("X-Longitude", "geoip_longitude"),
    ("X-Region", "geoip_region"),
    ("X-Region-Name", "geoip_region_name"),
    ("X-City", "geoip_city"),
    ("X-Postal-Code", "geoip_postal_code"),
    ("X-Org", "geoip_org"),
    ("X-Allowed", "allowed"),
];

const LOAD_HTTP: &str = "load_module /usr/lib/nginx/modules/ngx_http_geoip_module.so;";

/// A server with the three databases at the http level and `extra`
/// directives (charset, proxies) before them.
fn server(country: Vec<u8>, city: Vec<u8>, org: Vec<u8>, extra: &str, utf8: &str) -> TestServer {
    let adds: String = HEADERS.iter().map(|(h, v)| format!("add_header {h} ${v};\n")).collect();
    builder()
        .main(LOAD_HTTP)
        .file("geo/country.dat", country)
        .file("geo/city.dat", city)
        .file("geo/org.dat", org)
        .http(&format!(
            "{extra}
             geoip_country {{prefix}}/geo/country.dat {utf8};
             geoip_city {{prefix}}/geo/city.dat {utf8};
             geoip_org {{prefix}}/geo/org.dat {utf8};
             map $geoip_country_code $allowed {{ default no; RU yes; }}
             server {{
                 listen 127.0.0.1:{{port}};
                 location / {{ {adds} return 200 ok; }}
             }}"
        ))
        .start()
}

/// The geoip headers of a GET with `X-Forwarded-For` values.
fn seen(srv: &TestServer, xff: &[&str]) -> Vec<(String, Option<String>)> {
    let hdrs: Vec<String> = xff.iter().map(|x| format!("X-Forwarded-For: {x}")).collect();
    let refs: Vec<&str> = hdrs.iter().map(String::as_str).collect();
    let r = srv.get_with("/", &refs);
    assert_eq!(r.status, 200);
    HEADERS.iter().map(|(h, _)| (h.to_string(), r.header(h).map(str::to_string))).collect()
}

fn check(got: &[(String, Option<String>)], want: &[(&str, &str)], label: &str) {
    for (h, v) in got {
        let w = want.iter().find(|(n, _)| n == h).map(|(_, v)| *v);
        assert_eq!(v.as_deref(), w, "{label}: {h}");
    }
}

const MOSCOW: &[(&str, &str)] = &[
    ("X-Country-Code", "RU"),
    ("X-Country-Code3", "RUS"),
    ("X-Country-Name", "Russian Federation"),
    ("X-Area-Code", "0"),
    ("X-C-Continent-Code", "EU"),
    ("X-C-Country-Code", "RU"),
    ("X-C-Country-Code3", "RUS"),
    ("X-C-Country-Name", "Russian Federation"),
    ("X-Dma-Code", "0"),
    ("X-Latitude", "55.7543"),
    ("X-Longitude", "37.6202"),
    ("X-Region", "48"),
    ("X-Region-Name", "Moscow City"),
    ("X-City", "Moscow"),
    ("X-Postal-Code", "119034"),
    ("X-Org", "Nginx"),
    ("X-Allowed", "yes"),
];

const MOUNTAIN_VIEW: &[(&str, &str)] = &[
    ("X-Country-Code", "US"),
    ("X-Country-Code3", "USA"),
    ("X-Country-Name", "United States"),
    ("X-Area-Code", "650"),
    ("X-C-Continent-Code", "NA"),
    ("X-C-Country-Code", "US"),
    ("X-C-Country-Code3", "USA"),
    ("X-C-Country-Name", "United States"),
    ("X-Dma-Code", "807"),
    ("X-Latitude", "37.3860"),
    ("X-Longitude", "-122.0838"),
    ("X-Region", "CA"),
    ("X-Region-Name", "California"),
    ("X-City", "Mountain View"),
    ("X-Postal-Code", "94043"),
    ("X-Org", "Example Org"),
    ("X-Allowed", "no"),
];

/// Nothing known: every geoip header left out (not found), the map's
/// default.
const NOWHERE: &[(&str, &str)] = &[("X-Allowed", "no")];

#[test]
fn ipv4_databases_by_forwarded_address() {
    let country = country_db(false, &[("10.0.0.0", 8, RU), ("192.0.2.0", 24, US), ("198.51.100.0", 24, SE)]);
    let srv = server(country, city_db(false), org_db(false), "geoip_proxy 127.0.0.1/32;", "");
    check(&seen(&srv, &["10.1.2.3"]), MOSCOW, "10.1.2.3");
    check(&seen(&srv, &["192.0.2.77"]), MOUNTAIN_VIEW, "192.0.2.77");
    // The IPv4-mapped form of an address is the address.
    check(&seen(&srv, &["::ffff:192.0.2.77"]), MOUNTAIN_VIEW, "mapped");
    // Not recursive: the last address of the last header.
    check(&seen(&srv, &["1.1.1.1", "203.0.113.9, 10.1.2.3"]), MOSCOW, "last of several");
    // A city record without city or postal code: those are not found; a
    // country other than US has no metro or area code (0).
    let se = seen(&srv, &["198.51.100.1"]);
    let want: &[(&str, &str)] = &[
        ("X-Country-Code", "SE"),
        ("X-Country-Code3", "SWE"),
        ("X-Country-Name", "Sweden"),
        ("X-Area-Code", "0"),
        ("X-C-Continent-Code", "EU"),
        ("X-C-Country-Code", "SE"),
        ("X-C-Country-Code3", "SWE"),
        ("X-C-Country-Name", "Sweden"),
        ("X-Dma-Code", "0"),
        ("X-Latitude", "62.0000"),
        ("X-Longitude", "15.0000"),
        ("X-Allowed", "no"),
    ];
    check(&se, want, "198.51.100.1");
    // Unknown addresses, an IPv6 address in IPv4 editions, no header (the
    // client, 127.0.0.1, is in none of the databases).
    check(&seen(&srv, &["8.8.8.8"]), NOWHERE, "8.8.8.8");
    check(&seen(&srv, &["2001:db8::1"]), NOWHERE, "ipv6 in ipv4 editions");
    check(&seen(&srv, &[]), NOWHERE, "no X-Forwarded-For");
}

#[test]
fn ipv6_databases_and_recursive_proxies() {
    let country = country_db(true, &[("2001:db8:1::", 48, RU), ("2001:db8:2::", 48, US), ("::ffff:10.0.0.0", 104, RU)]);
    let srv = server(
        country,
        city_db(true),
        org_db(true),
        "geoip_proxy 127.0.0.0/8; geoip_proxy 192.0.2.0/24; geoip_proxy_recursive on;",
        "",
    );
    check(&seen(&srv, &["2001:db8:1::5"]), MOSCOW, "2001:db8:1::5");
    check(&seen(&srv, &["2001:db8:2::5"]), MOUNTAIN_VIEW, "2001:db8:2::5");
    // Recursive: trusted addresses are walked past, right to left.
    check(&seen(&srv, &["2001:db8:1::7, 192.0.2.1, 127.0.0.5"]), MOSCOW, "recursive");
    // An IPv4 address is looked up IPv4-mapped (city and country have
    // ::ffff:10.x; org has no entry for it).
    let mut want: Vec<(&str, &str)> = MOSCOW.iter().copied().filter(|(h, _)| *h != "X-Org").collect();
    check(&seen(&srv, &["10.1.2.3"]), &want, "ipv4 in ipv6 editions");
    want.retain(|(h, _)| h.starts_with("X-Country") || *h == "X-Allowed");
    check(&seen(&srv, &["10.9.9.9"]), &want, "country only");
    check(&seen(&srv, &["2001:db8:3::1"]), NOWHERE, "unknown");
}

#[test]
fn utf8_names() {
    let country = country_db(false, &[("203.0.113.0", 24, CW)]);
    let plain = server(country.clone(), city_db(false), org_db(false), "geoip_proxy 127.0.0.1;", "");
    let utf8 = server(country, city_db(false), org_db(false), "geoip_proxy 127.0.0.1;", "utf8");
    let get = |srv: &TestServer| {
        let r = srv.get_with("/", &["X-Forwarded-For: 203.0.113.7"]);
        let h = |n: &str| r.header(n).map(|v| v.as_bytes().to_vec());
        (h("X-Country-Name"), h("X-City"), h("X-Org"), h("X-C-Country-Name"))
    };
    let (name, city, org, cname) = get(&plain);
    assert_eq!(name.as_deref(), Some(&b"Curacao"[..]));
    assert_eq!(cname.as_deref(), Some(&b"Curacao"[..]));
    // ISO-8859-1 as stored (the test client shows the byte as U+FFFD).
    let (c, o) = (city.unwrap_or_default(), org.unwrap_or_default());
    assert!(c.starts_with(b"Cura") && c.ends_with(b"ao") && c != "Curaçao".as_bytes(), "{c:?}");
    assert!(o.starts_with(b"Cura") && o.ends_with(b"ao Telecom") && o != "Curaçao Telecom".as_bytes(), "{o:?}");
    let (name, city, org, cname) = get(&utf8);
    assert_eq!(name.as_deref(), Some("Curaçao".as_bytes()));
    assert_eq!(cname.as_deref(), Some("Curaçao".as_bytes()));
    assert_eq!(city.as_deref(), Some("Curaçao".as_bytes()));
    assert_eq!(org.as_deref(), Some("Curaçao Telecom".as_bytes()));
}

#[test]
fn stream_variables_by_proxy_protocol_address() {
    let load = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n\
                load_module /usr/lib/nginx/modules/ngx_stream_geoip_module.so;\n";
    let conf = format!(
        "{load}daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\nstream {{
            set_real_ip_from 127.0.0.1/32;
            geoip_country {{prefix}}/geo/country.dat;
            geoip_city {{prefix}}/geo/city.dat;
            geoip_org {{prefix}}/geo/org.dat;
            server {{
                listen 127.0.0.1:{{port}} proxy_protocol;
                return \"cc=$geoip_country_code cc3=$geoip_country_code3 city=$geoip_city \
                         region=$geoip_region_name lat=$geoip_latitude lon=$geoip_longitude \
                         dma=$geoip_dma_code area=$geoip_area_code org=$geoip_org\";
            }}
        }}\n"
    );
    let country = country_db(false, &[("10.0.0.0", 8, RU), ("192.0.2.0", 24, US)]);
    let srv = builder()
        .whole(&conf)
        .file("geo/country.dat", country)
        .file("geo/city.dat", city_db(false))
        .file("geo/org.dat", org_db(false))
        .start();
    let ask = |ip: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let fam = if ip.contains(':') { "TCP6" } else { "TCP4" };
        let dst = if ip.contains(':') { "::1" } else { "127.0.0.1" };
        s.write_all(format!("PROXY {fam} {ip} {dst} 5000 {}\r\n", srv.port).as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert_eq!(
        ask("192.0.2.10"),
        "cc=US cc3=USA city=Mountain View region=California lat=37.3860 lon=-122.0838 dma=807 area=650 org=Example Org"
    );
    assert_eq!(
        ask("10.1.2.3"),
        "cc=RU cc3=RUS city=Moscow region=Moscow City lat=55.7543 lon=37.6202 dma=0 area=0 org=Nginx"
    );
    assert_eq!(ask("::ffff:10.1.2.3"), ask("10.1.2.3"));
    assert_eq!(ask("8.8.8.8"), "cc= cc3= city= region= lat= lon= dma= area= org=");
}

#[test]
fn bad_databases_are_refused_by_config_test() {
    let t = |file: Vec<u8>, directive: &str| {
        let srv = builder()
            .main(LOAD_HTTP)
            .file("geo/x.dat", file)
            .http(&format!("{directive} {{prefix}}/geo/x.dat;\nserver {{ listen 127.0.0.1:{{port}}; }}"))
            .prepare();
        let out = srv.run(&["-t"]);
        (out.status.success(), stderr_of(&out), srv.path("geo/x.dat").display().to_string(), srv.conf_path())
    };
    // A city database cut inside its tree; an empty file; a missing one.
    let city = city_db(false);
    let mut cut = city[..40].to_vec();
    cut.extend_from_slice(&city[city.len() - 7..]);
    for (bytes, what) in [(cut, "truncated"), (Vec::new(), "empty")] {
        let (ok, err, path, conf) = t(bytes, "geoip_city");
        let want = format!("[emerg] GeoIP_open(\"{path}\") failed");
        assert!(!ok && err.contains(&want), "{what}: {err}");
        assert!(err.contains(&format!("in {}:", conf.display())), "{what}: {err}");
    }
    // The wrong kind: a country database given to geoip_city.
    let (ok, err, path, _) = t(country_db(false, &[("10.0.0.0", 8, RU)]), "geoip_city");
    assert!(!ok && err.contains(&format!("invalid GeoIP City database \"{path}\" type:1")), "{err}");
    let (ok, err, path, _) = t(city_db(false), "geoip_org");
    assert!(!ok && err.contains(&format!("invalid GeoIP database \"{path}\" type:2")), "{err}");
    // Only at the http level.
    let srv = builder()
        .main(LOAD_HTTP)
        .file("geo/c.dat", country_db(false, &[("10.0.0.0", 8, RU)]))
        .http("server { listen 127.0.0.1:{port}; geoip_country {prefix}/geo/c.dat; }")
        .prepare();
    let err = stderr_of(&srv.run(&["-t"]));
    assert!(err.contains("\"geoip_country\" directive is not allowed here"), "{err}");
}
