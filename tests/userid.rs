//! The userid module (`userid`, `userid_*`, `$uid_got`, `$uid_set`,
//! `$uid_reset`): the Set-Cookie bytes a client without a cookie gets,
//! the identifier inside it (service word, byte order of `on` and `v1`),
//! the cookie sent back, marks, resets and bad cookies with their
//! error-log lines, and configuration errors. With SLUICE_TEST_NGINX=1 the
//! same tests run against Debian's nginx.

mod common;

use common::*;

fn b64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let v: Vec<u8> = s.bytes().take_while(|&c| c != b'=').map(val).collect();
    let mut out = Vec::new();
    for ch in v.chunks(4) {
        if ch.len() > 1 {
            out.push(ch[0] << 2 | ch[1] >> 4);
        }
        if ch.len() > 2 {
            out.push(ch[1] << 4 | ch[2] >> 2);
        }
        if ch.len() > 3 {
            out.push(ch[2] << 6 | ch[3]);
        }
    }
    out
}

/// The identifier as nginx prints it: four host-order words in hex.
fn words(uid: &[u8]) -> String {
    uid.chunks(4).map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))).collect()
}

fn server() -> TestServer {
    builder()
        .file("html/index.html", "hi")
        .http(
            r#"map $arg_reset $uid_reset {
                default 0;
                yes 1;
                log log;
            }
            server {
                listen 127.0.0.1:{port};
                root html;
                add_header X-Got $uid_got;
                add_header X-Set $uid_set;
                userid on;
                location / { }
                location /v1/ {
                    userid v1;
                    userid_service 7;
                    alias html/;
                }
                location /svc/ {
                    userid_service 65534;
                    alias html/;
                }
                location /all/ {
                    userid_name sid;
                    userid_domain example.org;
                    userid_path /all/;
                    userid_expires max;
                    userid_mark t;
                    userid_p3p 'CP="NOI"';
                    userid_flags secure httponly samesite=lax;
                    alias html/;
                }
                location /exp/ {
                    userid_expires 1h;
                    add_header X-Msec $msec;
                    alias html/;
                }
                location /mark/ {
                    userid_mark 9;
                    alias html/;
                }
                location /log/ {
                    userid log;
                    alias html/;
                }
                location /off/ {
                    userid off;
                    alias html/;
                }
            }"#,
        )
        .start()
}

/// `uid=VALUE; rest` → (VALUE, rest).
fn split_cookie<'a>(sc: &'a str, name: &str) -> (&'a str, &'a str) {
    let v = sc.strip_prefix(&format!("{name}=")).unwrap_or_else(|| panic!("{sc}"));
    v.split_once(';').unwrap_or((v, ""))
}

#[test]
fn a_new_client_gets_a_cookie_with_the_servers_address() {
    let s = server();
    let r = s.get("/");
    assert_eq!(r.status, 200);
    let sc = r.must("Set-Cookie");
    let (value, rest) = split_cookie(sc, "uid");
    assert_eq!(rest, " path=/", "{sc}");
    assert_eq!(value.len(), 24);
    assert!(value.ends_with("=="), "{value}");
    let uid = b64_decode(value);
    assert_eq!(uid.len(), 16);
    assert_eq!(&uid[..4], &[127, 0, 0, 1], "the service word is the server's address");
    // `on` writes the time in network byte order.
    let t = u32::from_be_bytes([uid[4], uid[5], uid[6], uid[7]]) as i64;
    assert!((t - now_secs()).abs() < 5, "time {t}");
    assert_eq!(r.must("X-Set"), format!("uid={}", words(&uid)));
    assert!(r.must("X-Set").starts_with("uid=0100007F"), "{}", r.must("X-Set"));
    assert!(r.header("X-Got").is_none());

    // Sent back: the same identifier is read and none is set.
    let back = s.get_with("/", &[&format!("Cookie: a=b; uid={value}")]);
    assert_eq!(back.status, 200);
    assert!(back.header("Set-Cookie").is_none(), "{}", back.head);
    assert_eq!(back.must("X-Got"), format!("uid={}", words(&uid)));
    assert!(back.header("X-Set").is_none(), "{}", back.head);

    // Two new clients get different identifiers (the sequence word).
    let other = split_cookie(s.get("/").must("Set-Cookie"), "uid").0.to_string();
    assert_ne!(other, value);
}

#[test]
fn v1_and_service_set_the_first_word_and_byte_order() {
    let s = server();
    let r = s.get("/v1/");
    let uid = b64_decode(split_cookie(r.must("Set-Cookie"), "uid").0);
    assert_eq!(&uid[..4], &7u32.to_ne_bytes(), "v1 writes words in the host's order");
    let t = u32::from_ne_bytes([uid[4], uid[5], uid[6], uid[7]]) as i64;
    assert!((t - now_secs()).abs() < 5, "time {t}");
    assert!(r.must("X-Set").starts_with("uid=00000007"), "{}", r.must("X-Set"));

    let r = s.get("/svc/");
    let uid = b64_decode(split_cookie(r.must("Set-Cookie"), "uid").0);
    assert_eq!(&uid[..4], &[0, 0, 0xff, 0xfe]);
    assert!(r.must("X-Set").starts_with(&format!("uid={}", words(&[0, 0, 0xff, 0xfe]))));
}

#[test]
fn every_attribute_in_nginx_order() {
    let s = server();
    let r = s.get("/all/");
    let sc = r.must("Set-Cookie");
    let (value, rest) = split_cookie(sc, "sid");
    assert_eq!(value.len(), 24);
    assert!(value.ends_with("t="), "the mark replaces the first padding: {value}");
    assert_eq!(
        rest,
        " expires=Thu, 31-Dec-37 23:55:55 GMT; domain=example.org; path=/all/; secure; httponly; samesite=lax"
    );
    assert_eq!(r.must("P3P"), "CP=\"NOI\"");
    assert!(r.must("X-Set").starts_with("sid="));

    // A client whose cookie lacks the mark gets its own identifier back,
    // marked.
    let plain = format!("{}==", &value[..22]);
    let r = s.get_with("/all/", &[&format!("Cookie: sid={plain}")]);
    let (again, _) = split_cookie(r.must("Set-Cookie"), "sid");
    assert_eq!(again, format!("{}t=", &value[..22]));
    // Marked already: nothing to set.
    let r = s.get_with("/all/", &[&format!("Cookie: sid={value}")]);
    assert!(r.header("Set-Cookie").is_none(), "{}", r.head);

    let r = s.get("/exp/");
    let msec: f64 = r.must("X-Msec").parse().unwrap();
    let (_, rest) = split_cookie(r.must("Set-Cookie"), "uid");
    let exp = rest.trim_start().strip_prefix("expires=").unwrap().split(';').next().unwrap();
    // `Sun, 29-Nov-26 13:22:53 GMT`: a two-digit year, dashes.
    let parts: Vec<&str> = exp.split([' ', '-', ':']).collect();
    assert_eq!((parts.len(), parts[3].len(), parts[7]), (8, 2, "GMT"), "{exp}");
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let mon = months.iter().position(|m| *m == parts[2]).unwrap() as i64 + 1;
    let t = civil_to_epoch(
        2000 + parts[3].parse::<i64>().unwrap(),
        mon,
        parts[1].parse().unwrap(),
        parts[4].parse().unwrap(),
        parts[5].parse().unwrap(),
        parts[6].parse().unwrap(),
    );
    assert_eq!(t, msec as i64 + 3600, "{exp}");

    let r = s.get("/mark/");
    assert!(split_cookie(r.must("Set-Cookie"), "uid").0.ends_with("9="));
}

#[test]
fn log_reads_off_ignores() {
    let s = server();
    let value = split_cookie(s.get("/").must("Set-Cookie"), "uid").0.to_string();
    let r = s.get_with("/log/", &[&format!("Cookie: uid={value}")]);
    assert!(r.header("Set-Cookie").is_none());
    assert_eq!(r.must("X-Got"), format!("uid={}", words(&b64_decode(&value))));
    assert!(r.header("X-Set").is_none(), "{}", r.head);
    assert!(s.get("/log/").header("Set-Cookie").is_none());
    let r = s.get_with("/off/", &[&format!("Cookie: uid={value}")]);
    assert!(r.header("Set-Cookie").is_none() && r.header("X-Got").is_none(), "{}", r.head);
}

#[test]
fn uid_reset_replaces_and_logs() {
    let s = server();
    let value = split_cookie(s.get("/").must("Set-Cookie"), "uid").0.to_string();
    let old = words(&b64_decode(&value));
    let r = s.get_with("/?reset=yes", &[&format!("Cookie: uid={value}")]);
    let new = split_cookie(r.must("Set-Cookie"), "uid").0.to_string();
    assert_ne!(new, value);
    assert_eq!(r.must("X-Got"), format!("uid={old}"));
    assert_eq!(r.must("X-Set"), format!("uid={}", words(&b64_decode(&new))));
    let r = s.get_with("/?reset=log", &[&format!("Cookie: uid={value}")]);
    assert!(r.header("Set-Cookie").is_some());
    let log = s.wait_error_log("was reset");
    assert!(log.contains("[notice]") && log.contains(&format!("userid cookie \"uid={old}\" was reset")), "{log}");
}

#[test]
fn bad_cookies_are_logged_and_replaced() {
    let s = server();
    let r = s.get_with("/", &["Cookie: uid=tooshort"]);
    assert!(r.header("Set-Cookie").is_some());
    assert!(r.header("X-Got").is_none());
    s.wait_error_log("client sent too short userid cookie \"uid=tooshort\"");
    let r = s.get_with("/", &["Cookie: x=1; uid=AAAA*AAAAAAAAAAAAAAAAAAAAA"]);
    assert!(r.header("Set-Cookie").is_some());
    let log = s.wait_error_log("client sent invalid userid cookie \"x=1; uid=AAAA*AAAAAAAAAAAAAAAAAAAAA\"");
    assert!(log.contains("[error]"), "{log}");
}

#[test]
fn bad_configuration_is_refused() {
    for (conf, msg) in [
        ("userid maybe;", "invalid value \"maybe\""),
        ("userid_mark xy;", "\"userid_mark\" directive value must be \"off\" or a single letter, digit or \"=\""),
        ("userid_flags secure bogus;", "invalid value \"bogus\""),
        ("userid_service abc;", "\"userid_service\" directive invalid number"),
    ] {
        let srv = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; {conf} }}")).prepare();
        let out = srv.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{conf}");
        assert!(err.contains(msg) && err.contains(".conf:"), "{conf}: {err}");
    }
}
