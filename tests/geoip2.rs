//! The GeoIP2 module (leev/ngx_http_geoip2_module, Debian's
//! libnginx-mod-http-geoip2 and libnginx-mod-stream-geoip2) with MaxMind
//! DB files written here (`common::mmdb`): lookups by the client address
//! (127.0.0.1 is in the databases), by `source=` (`$arg_ip`,
//! `$http_x_real_ip`) and by `X-Forwarded-For` through `geoip2_proxy`;
//! defaults, array indexes, every value type as the module prints it, a
//! `map`, an access log and `proxy_set_header` over the variables, the
//! stream module's `return` and access log, `metadata`, `auto_reload` picking up a replaced file (and
//! keeping the old one when the new one is corrupt), and `-t` refusing
//! a corrupt file. Runs under nginx 1.22 too (`SLUICE_TEST_NGINX=1`).

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::mmdb::{V, Writer, map, s};
use common::*;

const LOAD_HTTP: &str = "load_module /usr/lib/nginx/modules/ngx_http_geoip2_module.so;";

fn nginx_mode() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// A city record: country code and name, city, latitude, subdivisions.
fn city(cc: &str, country: &str, town: &str, lat: f64, subs: &[&str]) -> V {
    map(&[
        ("country", map(&[("iso_code", s(cc)), ("names", map(&[("en", s(country))]))])),
        ("city", map(&[("names", map(&[("en", s(town))]))])),
        ("location", map(&[("latitude", V::F64(lat)), ("accuracy_radius", V::U16(100))])),
        ("subdivisions", V::Arr(subs.iter().map(|c| map(&[("iso_code", s(c))])).collect())),
    ])
}

/// 127.0.0.1 (the test client) is Moscow, with every value type the
/// module prints; 10.1.2.0/24 Mountain View; 2001:db8:1::/48 Sweden
/// without a city; 192.0.2.0/24 a record without a country.
fn city_db(v6: bool, record_size: u32, moscow_cc: &str) -> Vec<u8> {
    let mut moscow = match city(moscow_cc, "Russia", "Moscow", 55.7543, &["MOW", "X2"]) {
        V::Map(m) => m,
        _ => unreachable!(),
    };
    moscow.push(("is_anycast".into(), V::Bool(true)));
    moscow.push(("is_proxy".into(), V::Bool(false)));
    // libmaxminddb reads a number as a key inside a map.
    moscow.push(("tags".into(), map(&[("0", s("zero")), ("x", s("ex"))])));
    moscow.push((
        "extras".into(),
        map(&[
            ("i32", V::I32(-7)),
            ("u32", V::U32(4_000_000_000)),
            ("u64", V::U64(12_345_678_901)),
            ("u128", V::U128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10)),
            ("f32", V::F32(1.5)),
            ("bytes", V::Bytes(b"raw".to_vec())),
            ("empty", s("")),
        ]),
    ));
    let mut w = Writer::new(v6, record_size);
    w.insert("127.0.0.0/8", V::Map(moscow))
        .insert("10.1.2.0/24", city("US", "United States", "Mountain View", 37.386, &["CA"]))
        .insert("192.0.2.0/24", map(&[("city", map(&[("names", map(&[("en", s("Nowhere"))]))]))]));
    if v6 {
        w.insert("2001:db8:1::/48", map(&[("country", map(&[("iso_code", s("SE"))]))]));
    }
    w.build()
}

const VARS: &str = "
    $g_cc country iso_code;
    $g_country country names en;
    $g_city default=Unknown city names en;
    $g_lat location latitude;
    $g_radius location accuracy_radius;
    $g_sub0 subdivisions 0 iso_code;
    $g_sublast subdivisions -1 iso_code;
    $g_sub9 default=none subdivisions 9 iso_code;
    $g_anycast is_anycast;
    $g_proxy is_proxy;
    $g_tag0 tags 0;
    $g_i32 extras i32;
    $g_u32 extras u32;
    $g_u64 extras u64;
    $g_u128 extras u128;
    $g_f32 extras f32;
    $g_bytes extras bytes;
    $g_empty default=dflt extras empty;
    $g_empty_nd extras empty;
    $g_container country;
    $g_arg_cc default=none source=$arg_ip country iso_code;
    $g_real_cc default=ZZ source=$http_x_real_ip country iso_code;
    $g_epoch metadata build_epoch;
";

const BODY: &str = "cc=$g_cc|country=$g_country|city=$g_city|lat=$g_lat|radius=$g_radius|sub0=$g_sub0|\
                    sublast=$g_sublast|sub9=$g_sub9|anycast=$g_anycast|proxy=$g_proxy|tag0=$g_tag0|\
                    i32=$g_i32|u32=$g_u32|u64=$g_u64|u128=$g_u128|f32=$g_f32|bytes=$g_bytes|empty=$g_empty|\
                    container=$g_container|arg=$g_arg_cc|real=$g_real_cc|epoch=$g_epoch|allowed=$allowed";

fn http_server(db: Vec<u8>, extra: &str) -> TestServer {
    builder()
        .main(LOAD_HTTP)
        .file("geo/city.mmdb", db)
        .http(&format!(
            "{extra}
             geoip2 geo/city.mmdb {{ {VARS} }}
             map $g_cc $allowed {{ default no; RU yes; }}
             log_format geo '$g_cc $g_container $g_city [$g_bytes] [$g_empty_nd]';
             server {{
                 listen 127.0.0.1:{{port}};
                 access_log logs/geo.log geo;
                 location / {{ add_header X-Country $g_country; return 200 \"{BODY}\"; }}
             }}"
        ))
        .start()
}

/// The body's `name=value` fields.
fn fields(body: &str) -> Vec<(String, String)> {
    body.split('|').filter_map(|f| f.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn field(got: &[(String, String)], name: &str) -> String {
    got.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {name} in {got:?}"))
}

fn ask(srv: &TestServer, path: &str, headers: &[&str]) -> Vec<(String, String)> {
    let r = srv.get_with(path, headers);
    assert_eq!(r.status, 200, "{}", r.text());
    fields(&r.text())
}

const MOSCOW: &[(&str, &str)] = &[
    ("cc", "RU"),
    ("country", "Russia"),
    ("city", "Moscow"),
    ("lat", "55.75430"),
    ("radius", "100"),
    ("sub0", "MOW"),
    ("sublast", "X2"),
    ("sub9", "none"),
    ("anycast", "1"),
    ("proxy", "0"),
    ("tag0", "zero"),
    ("i32", "-7"),
    ("u32", "4000000000"),
    ("u64", "12345678901"),
    ("u128", "0x0102030405060708090a0b0c0d0e0f10"),
    ("f32", "1.50000"),
    ("bytes", "raw"),
    // An empty string is a value: not the default.
    ("empty", ""),
    // A map is not a value: not found, empty in a body.
    ("container", ""),
    ("arg", "none"),
    ("real", "ZZ"),
    ("epoch", "1700000000"),
    ("allowed", "yes"),
];

fn check(got: &[(String, String)], want: &[(&str, &str)], label: &str) {
    for (k, v) in want {
        // The module prints a uint128 (34 bytes) into a buffer of
        // NGX_OFF_T_LEN (20) bytes: nginx's value is overwritten by the
        // next allocation (or worse); sluice prints it whole.
        if *k == "u128" && nginx_mode() {
            continue;
        }
        assert_eq!(field(got, k), *v, "{label}: {k} in {got:?}");
    }
}

#[test]
fn client_address_lookups_in_each_record_size() {
    for (v6, size) in [(true, 28), (false, 24), (true, 32)] {
        let srv = http_server(city_db(v6, size, "RU"), "");
        let label = format!("v6={v6} record_size={size}");
        let r = srv.get("/");
        assert_eq!(r.header("X-Country"), Some("Russia"), "{label}");
        check(&fields(&r.text()), MOSCOW, &label);
        // The log: not found is `-`.
        let line = wait_lines(&srv.path("logs/geo.log"), 1, LOG_WAIT);
        assert_eq!(line.first().map(String::as_str), Some("RU - Moscow [raw] []"), "{label}");
    }
}

#[test]
fn source_variables_and_defaults() {
    let srv = http_server(city_db(true, 28, "RU"), "");
    let got = ask(&srv, "/?ip=10.1.2.3", &["X-Real-IP: 2001:db8:1::9"]);
    check(&got, &[("arg", "US"), ("real", "SE"), ("cc", "RU")], "arg and header");
    // A source value that is not an address, or none: the default.
    let got = ask(&srv, "/?ip=not-an-address", &["X-Real-IP: 10.1.2.300"]);
    check(&got, &[("arg", "none"), ("real", "ZZ")], "not addresses");
    // An address without a record, and one whose record lacks the path.
    let got = ask(&srv, "/?ip=8.8.8.8", &["X-Real-IP: 192.0.2.1"]);
    check(&got, &[("arg", "none"), ("real", "ZZ")], "no record, no path");
    // An IPv6 address in an IPv4 database: not found.
    let v4 = http_server(city_db(false, 24, "RU"), "");
    let got = ask(&v4, "/?ip=2001:db8:1::9", &["X-Real-IP: 10.1.2.3"]);
    check(&got, &[("arg", "none"), ("real", "US")], "ipv6 in an ipv4 database");
}

#[test]
fn forwarded_addresses_through_geoip2_proxy() {
    let srv = http_server(city_db(true, 28, "RU"), "geoip2_proxy 127.0.0.0/8;");
    let got = ask(&srv, "/", &["X-Forwarded-For: 10.1.2.3"]);
    check(
        &got,
        &[("cc", "US"), ("city", "Mountain View"), ("lat", "37.38600"), ("sub9", "none"), ("allowed", "no")],
        "xff",
    );
    // Not recursive: the last address of the last header.
    let got = ask(&srv, "/", &["X-Forwarded-For: 10.1.2.3, 2001:db8:1::5"]);
    check(&got, &[("cc", "SE"), ("city", "Unknown"), ("country", "")], "last address");
    // `source=` ignores X-Forwarded-For.
    let got = ask(&srv, "/?ip=10.1.2.3", &["X-Forwarded-For: 2001:db8:1::5"]);
    check(&got, &[("arg", "US"), ("cc", "SE")], "source");
    // Without the header: the client.
    check(&ask(&srv, "/", &[]), &[("cc", "RU")], "no header");

    let rec = http_server(
        city_db(true, 28, "RU"),
        "geoip2_proxy 127.0.0.1; geoip2_proxy 10.1.2.0/24; geoip2_proxy_recursive on;",
    );
    let got = ask(&rec, "/", &["X-Forwarded-For: 2001:db8:1::7, 10.1.2.9"]);
    check(&got, &[("cc", "SE")], "recursive");
    // A client outside geoip2_proxy's networks is looked up itself.
    let other = http_server(city_db(true, 28, "RU"), "geoip2_proxy 10.0.0.0/8;");
    check(&ask(&other, "/", &["X-Forwarded-For: 10.1.2.3"]), &[("cc", "RU")], "untrusted client");
}

#[test]
fn stream_return_and_metadata() {
    let load = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n\
                load_module /usr/lib/nginx/modules/ngx_stream_geoip2_module.so;\n";
    let conf = format!(
        "{load}daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\nstream {{
            geoip2 {{prefix}}/geo/city.mmdb {{
                $g_cc default=XX country iso_code;
                $g_city city names en;
                $g_sub subdivisions -1 iso_code;
                $g_lat location latitude;
                $g_set_cc default=none source=$ip country iso_code;
                $g_epoch metadata build_epoch;
                $g_change metadata last_change;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                set $ip 10.1.2.3;
                return \"cc=$g_cc city=$g_city sub=$g_sub lat=$g_lat set=$g_set_cc epoch=$g_epoch change=$g_change\";
            }}
        }}\n"
    );
    let started = now_secs();
    // A build time of its own, read back by `metadata build_epoch`.
    let mut writer = Writer::new(true, 24);
    writer.build_epoch = 1_234_567_890;
    writer.insert("127.0.0.1/32", city("RU", "Russia", "Moscow", 55.7543, &["MOW"]));
    writer.insert("10.1.2.0/24", city("US", "United States", "Mountain View", 37.386, &["CA"]));
    let w = writer.build();
    let srv = builder().whole(&conf).file("geo/city.mmdb", w).start();
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, change) = out.rsplit_once(" change=").unwrap_or((&out, ""));
    assert_eq!(head, "cc=RU city=Moscow sub=MOW lat=55.75430 set=US epoch=1234567890");
    // last_change starts as the load time.
    let change: i64 = change.parse().unwrap_or(0);
    assert!((started - 5..=now_secs()).contains(&change), "{change} vs {started}");
}

/// Waits until `GET /` gives `cc` (requests drive nginx's checks).
fn wait_cc(srv: &TestServer, cc: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if field(&ask(srv, "/", &[]), "cc") == cc {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Replaces the file the way an updater does: a new file renamed over it.
fn replace(srv: &TestServer, bytes: &[u8]) {
    srv.write("geo/new.mmdb", bytes);
    std::fs::rename(srv.path("geo/new.mmdb"), srv.path("geo/city.mmdb")).unwrap();
}

#[test]
fn auto_reload_picks_up_a_replaced_file_and_keeps_the_old_on_error() {
    let srv = builder()
        .main(LOAD_HTTP)
        .file("geo/city.mmdb", city_db(true, 28, "RU"))
        .http(
            "geoip2 geo/city.mmdb {
                 auto_reload 1s;
                 $g_cc default=none country iso_code;
                 $g_change metadata last_change;
             }
             server { listen 127.0.0.1:{port}; location / { return 200 \"cc=$g_cc|change=$g_change\"; } }",
        )
        .start();
    assert_eq!(field(&ask(&srv, "/", &[]), "cc"), "RU");
    // nginx compares the file's mtime in seconds with the load time.
    std::thread::sleep(Duration::from_millis(1100));
    replace(&srv, &city_db(true, 28, "DE"));
    assert!(wait_cc(&srv, "DE"), "the new file was not read");
    wait_contains(&srv.path("logs/error.log"), "Reload MMDB", LOG_WAIT);
    let change: i64 = field(&ask(&srv, "/", &[]), "change").parse().unwrap_or(0);
    assert_eq!(change, mtime(&srv.path("geo/city.mmdb")), "last_change is the file's mtime");
    // A corrupt replacement: logged, the old database kept.
    std::thread::sleep(Duration::from_millis(1100));
    replace(&srv, b"not a MaxMind database");
    let deadline = Instant::now() + Duration::from_secs(10);
    let path = srv.path("geo/city.mmdb").display().to_string();
    let want = format!("MMDB_open(\"{path}\") failed to reload");
    while Instant::now() < deadline && !srv.error_log().contains(&want) {
        assert_eq!(field(&ask(&srv, "/", &[]), "cc"), "DE");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(srv.error_log().contains(&want), "{}", srv.error_log());
    assert_eq!(field(&ask(&srv, "/", &[]), "cc"), "DE");
}

#[test]
fn config_test_refuses_bad_databases() {
    let t = |file: &[u8], block: &str| {
        let srv = builder()
            .main(LOAD_HTTP)
            .file("geo/x.mmdb", file)
            .http(&format!("geoip2 {{prefix}}/geo/x.mmdb {{ {block} }}\nserver {{ listen 127.0.0.1:{{port}}; }}"))
            .prepare();
        let out = srv.run(&["-t"]);
        (out.status.success(), stderr_of(&out), srv.path("geo/x.mmdb").display().to_string(), srv.conf_path())
    };
    let good = city_db(true, 28, "RU");
    let half = &good[..good.len() / 2];
    for (bytes, what) in [(half, "truncated"), (&b"garbage"[..], "garbage"), (&b""[..], "empty")] {
        let (ok, err, path, conf) = t(bytes, "$g_cc country iso_code;");
        assert!(!ok && err.contains(&format!("[emerg] MMDB_open(\"{path}\") failed - ")), "{what}: {err}");
        assert!(err.contains(&format!("in {}:", conf.display())), "{what}: {err}");
    }
    // A missing file.
    let srv = builder()
        .main(LOAD_HTTP)
        .http("geoip2 {prefix}/geo/none.mmdb { $g country iso_code; }\nserver { listen 127.0.0.1:{port}; }")
        .prepare();
    let err = stderr_of(&srv.run(&["-t"]));
    assert!(err.contains("failed - Error opening the specified MaxMind DB file"), "{err}");
    // The block's own errors.
    let (ok, err, _, _) = t(&good, "$g default=a default=b country iso_code;");
    assert!(!ok && err.contains("default has already been declared for  \"$g\""), "{err}");
    let (ok, err, _, _) = t(&good, "$g other=x country;");
    assert!(!ok && err.contains("invalid setting \"other=x\" for \"$g\""), "{err}");
    let (ok, err, _, _) = t(&good, "$g source=arg_ip country;");
    assert!(!ok && err.contains("invalid source variable name \"arg_ip\""), "{err}");
    let (ok, err, _, _) = t(&good, "bogus 1;");
    assert!(!ok && err.contains("invalid setting \"bogus\""), "{err}");
    let (ok, err, _, _) = t(&good, "auto_reload 1s 2s;");
    assert!(!ok && err.contains("invalid number of arguments for auto_reload"), "{err}");
    // Only at the http level.
    let srv = builder()
        .main(LOAD_HTTP)
        .file("geo/c.mmdb", good.clone())
        .http("server { listen 127.0.0.1:{port}; geoip2 {prefix}/geo/c.mmdb { $g country iso_code; } }")
        .prepare();
    let err = stderr_of(&srv.run(&["-t"]));
    assert!(err.contains("\"geoip2\" directive is not allowed here"), "{err}");
    // The same file twice.
    let srv = builder()
        .main(LOAD_HTTP)
        .file("geo/c.mmdb", good)
        .http(
            "geoip2 {prefix}/geo/c.mmdb { $a country iso_code; }
             geoip2 {prefix}/geo/c.mmdb { $b country iso_code; }
             server { listen 127.0.0.1:{port}; }",
        )
        .prepare();
    let err = stderr_of(&srv.run(&["-t"]));
    assert!(err.contains("Duplicate GeoIP2 mmdb - "), "{err}");
}

/// Writes the geoip2 fuzz target's seeds (`fuzz/corpus/geoip2/`): the
/// databases these tests use, in each record size. Run by hand:
/// `cargo test --release --test geoip2 -- --ignored write_fuzz_seeds`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/geoip2");
    std::fs::create_dir_all(&dir).unwrap();
    for (v6, size) in [(true, 28), (false, 24), (true, 32)] {
        let name = format!("city_v{}_{size}.mmdb", if v6 { 6 } else { 4 });
        std::fs::write(dir.join(name), city_db(v6, size, "RU")).unwrap();
    }
    let mut small = Writer::new(false, 24);
    small.insert("127.0.0.1/32", map(&[("country", map(&[("iso_code", s("RU"))]))]));
    std::fs::write(dir.join("country_v4_24.mmdb"), small.build()).unwrap();
}

#[test]
fn proxy_set_header_and_stream_log() {
    let o = common::origin::Origin::start(|req| {
        common::origin::Reply::ok(format!("origin saw {}", req.header("x-geo").unwrap_or("-")))
    });
    let srv = builder()
        .main(LOAD_HTTP)
        .file("geo/city.mmdb", city_db(true, 28, "RU"))
        .http(&format!(
            "geoip2 geo/city.mmdb {{ $g_cc country iso_code; $g_city city names en; }}
             server {{
                 listen 127.0.0.1:{{port}};
                 location / {{ proxy_set_header X-Geo \"$g_cc/$g_city\"; proxy_pass http://{}; }}
             }}",
            o.addr()
        ))
        .start();
    assert_eq!(srv.get("/").text(), "origin saw RU/Moscow");

    let load = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n\
                load_module /usr/lib/nginx/modules/ngx_stream_geoip2_module.so;\n";
    let conf = format!(
        "{load}daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\nstream {{
            geoip2 geo/city.mmdb {{ $g_cc country iso_code; $g_none default=- nothing; $g_lost lost; }}
            log_format geo '$g_cc $g_none $g_lost';
            server {{
                listen 127.0.0.1:{{port}};
                access_log logs/stream.log geo;
                return ok;
            }}
        }}\n"
    );
    let st = builder().whole(&conf).file("geo/city.mmdb", city_db(true, 28, "RU")).start();
    let mut s = TcpStream::connect(("127.0.0.1", st.port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert_eq!(out, "ok");
    let lines = wait_lines(&st.path("logs/stream.log"), 1, LOG_WAIT);
    assert_eq!(lines.first().map(String::as_str), Some("RU - -"));
}
