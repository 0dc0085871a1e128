//! `geo` and `split_clients`: variables chosen by the client address and
//! by a hash of a string. With SLUICE_TEST_NGINX=1 the same tests run
//! against Debian's nginx, so the buckets are nginx's.

mod common;

use common::*;

fn get(port: u16, path: &str, headers: &[&str]) -> String {
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n"));
    assert_eq!(r.status, 200, "{}", r.head);
    r.text().trim_end().to_string()
}

#[test]
fn geo_by_client_variable_proxy_and_ranges() {
    let s = builder()
        .http(
            r#"geo $net {
                default       world;
                10.0.0.0/8    private;
                10.1.0.0/16   lab;
                10.1.2.3      desk;
                2001:db8::/32 docs6;
                delete        10.1.0.0/16;
            }
            geo $arg_ip $by_arg {
                default none;
                192.0.2.0/24 test-net;
            }
            geo $via_proxy {
                proxy 127.0.0.1;
                default far;
                198.51.100.0/24 near;
            }
            geo $range {
                ranges;
                default out;
                10.0.0.0-10.0.0.255 low;
                10.0.0.10-10.0.0.20 mid;
            }
            geo $range_del {
                ranges;
                default out;
                10.0.0.0-10.0.0.255 low;
                10.0.0.1-10.0.0.1 one;
                delete 10.0.0.0-10.0.0.0;
                delete 10.0.0.2-10.0.0.255;
            }
            server {
                listen 127.0.0.1:{port};
                set_real_ip_from 127.0.0.1;
                location /net { return 200 "$net\n"; }
                location /arg { return 200 "$by_arg\n"; }
                location /proxy { return 200 "$via_proxy\n"; }
                location /range { return 200 "$range\n"; }
                location /rdel { return 200 "$range_del\n"; }
            }"#,
        )
        .start();
    let p = s.port;
    // The realip module's address is the client's.
    assert_eq!(get(p, "/net", &["X-Real-IP: 10.9.9.9"]), "private");
    assert_eq!(get(p, "/net", &["X-Real-IP: 10.1.9.9"]), "private");
    assert_eq!(get(p, "/net", &["X-Real-IP: 10.1.2.3"]), "desk");
    assert_eq!(get(p, "/net", &["X-Real-IP: 2001:db8::1"]), "docs6");
    assert_eq!(get(p, "/net", &["X-Real-IP: 203.0.113.1"]), "world");
    assert_eq!(get(p, "/net", &[]), "world");
    assert_eq!(get(p, "/arg?ip=192.0.2.77", &[]), "test-net");
    assert_eq!(get(p, "/arg?ip=nonsense", &[]), "none");
    assert_eq!(get(p, "/proxy", &["X-Forwarded-For: 198.51.100.4"]), "near");
    assert_eq!(get(p, "/proxy", &["X-Forwarded-For: 198.51.100.4, 192.0.2.1"]), "far");
    assert_eq!(get(p, "/proxy", &[]), "far");
    assert_eq!(get(p, "/range", &["X-Real-IP: 10.0.0.15"]), "mid");
    assert_eq!(get(p, "/range", &["X-Real-IP: 10.0.0.200"]), "low");
    assert_eq!(get(p, "/range", &["X-Real-IP: 10.0.1.1"]), "out");
    // A later range splits the one it overlaps; `delete` removes pieces.
    assert_eq!(get(p, "/rdel", &["X-Real-IP: 10.0.0.1"]), "one");
    assert_eq!(get(p, "/rdel", &["X-Real-IP: 10.0.0.9"]), "out");
}

#[test]
fn split_clients_buckets_are_nginxs() {
    let s = builder()
        .http(
            r#"split_clients "$arg_id" $variant {
                50%   a;
                30%   b;
                *     c;
            }
            split_clients "${arg_id}x" $small {
                0.5%  tiny;
                *     "";
            }
            server {
                listen 127.0.0.1:{port};
                location / { return 200 "$variant[$small]\n"; }
            }"#,
        )
        .start();
    let want = ["a", "a", "a", "c", "a", "b", "b", "c", "a", "b", "a", "a"];
    for (i, w) in want.iter().enumerate() {
        let got = get(s.port, &format!("/?id=user{i}"), &[]);
        assert_eq!(got.split('[').next(), Some(*w), "user{i}: {got}");
    }
    // Over many ids the shares come out near the percentages.
    let mut counts = [0usize; 3];
    for i in 0..300 {
        let got = get(s.port, &format!("/?id=id-{i}"), &[]);
        counts[["a", "b", "c"].iter().position(|v| got.starts_with(v)).unwrap()] += 1;
    }
    assert!(counts[0] > 110 && counts[0] < 190 && counts[1] > 55 && counts[1] < 125, "{counts:?}");
}

#[test]
fn config_errors() {
    for (conf, msg) in [
        ("split_clients $arg_x $v { 60% a; 50% b; }", "percent total is greater than 100%"),
        ("split_clients $arg_x $v { abc% a; }", "invalid percent value \"abc%\""),
        ("split_clients $arg_x v { * a; }", "invalid variable name \"v\""),
        ("geo $g { 10.0.0.0/40 a; }", "invalid network \"10.0.0.0/40\""),
    ] {
        assert_refused(&format!("{conf} server {{ listen 127.0.0.1:{{port}}; }}"), msg);
    }
}

/// `map`: a value may use a variable a later `map` defines, and
/// `hostnames` maps match wildcard keys (as nginx-tests' map.t and
/// map_complex.t check).
#[test]
fn map_forward_variables_and_hostnames() {
    let s = builder()
        .http(
            r#"map $arg_k $x {
                var      foo:$y;
                default  x-$y;
            }
            map $arg_h $host_kind {
                hostnames;
                default           none;
                example.com       exact;
                example.*         tail;
                *.example.com     head;
                .dot.example.com  dot;
                \include          include;
            }
            map $arg_k $y {
                default  bar;
                same     baz;
            }
            server {
                listen 127.0.0.1:{port};
                location /x { return 200 "$x\n"; }
                location /h { return 200 "$host_kind\n"; }
            }"#,
        )
        .start();
    let p = s.port;
    assert_eq!(get(p, "/x?k=var", &[]), "foo:bar");
    assert_eq!(get(p, "/x?k=same", &[]), "x-baz");
    assert_eq!(get(p, "/h?h=example.com", &[]), "exact");
    assert_eq!(get(p, "/h?h=EXAMPLE.COM.", &[]), "exact");
    assert_eq!(get(p, "/h?h=example.org", &[]), "tail");
    assert_eq!(get(p, "/h?h=www.example.com", &[]), "head");
    assert_eq!(get(p, "/h?h=www.example.com.", &[]), "head");
    assert_eq!(get(p, "/h?h=dot.example.com", &[]), "dot");
    assert_eq!(get(p, "/h?h=a.dot.example.com", &[]), "dot");
    assert_eq!(get(p, "/h?h=include", &[]), "include");
    assert_eq!(get(p, "/h?h=other.org", &[]), "none");
}

/// A `map` keeps its first value for the whole request, across internal
/// redirects, unless it is `volatile` (nginx-tests' map_volatile.t).
#[test]
fn map_values_last_the_request_unless_volatile() {
    let s = builder()
        .http(
            r#"map $uri $kept {
                /c/a     first;
                default  again;
            }
            map $uri $fresh {
                volatile;
                /v/a     first;
                default  again;
            }
            server {
                listen 127.0.0.1:{port};
                location /c/a { set $seen $kept; rewrite ^ /c/b last; }
                location /c/b { return 200 "$kept\n"; }
                location /v/a { set $seen $fresh; rewrite ^ /v/b last; }
                location /v/b { return 200 "$fresh\n"; }
            }"#,
        )
        .start();
    assert_eq!(get(s.port, "/c/a", &[]), "first");
    assert_eq!(get(s.port, "/c/b", &[]), "again");
    assert_eq!(get(s.port, "/v/a", &[]), "again");
}
