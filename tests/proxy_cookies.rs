//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags`:
//! the origin's Set-Cookie headers as the client gets them. Every expected
//! header is what nginx 1.22.1 sent for the same origin and configuration
//! (SLUICE_TEST_NGINX=1 runs the same checks against it).

mod common;

use common::origin::*;
use common::*;

/// What the origin sets, in this order, on every response.
const COOKIES: [&str; 7] = [
    "a=1; Domain=.backend.local; Path=/two/x; HttpOnly",
    "b=2; path=/two/; domain=other.local",
    "c=3",
    "d=4; Secure; SameSite=None",
    "e=5;Path=/two;Domain=BACKEND.local;secure",
    "g=7 ; Path = /two/y ; samesite=Lax; HTTPONLY",
    "j=10; domain=a.b.backend.local",
];

fn start() -> (Origin, TestServer) {
    let o = Origin::start(|_| {
        let headers: Vec<String> = COOKIES.iter().map(|c| format!("Set-Cookie: {c}")).collect();
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        Reply::http(200, &headers, "ok")
    });
    let s = proxy(
        r#"
        server {
            listen 127.0.0.1:{port};
            proxy_cookie_domain backend.local srv.example;
            location /plain/ {
                proxy_pass http://127.0.0.1:%O%;
                proxy_cookie_domain backend.local example.org;
                proxy_cookie_path /two/ /;
            }
            location /regex/ {
                proxy_pass http://127.0.0.1:%O%;
                proxy_cookie_domain ~\.?([a-z]+)\.local $1.example.net;
                proxy_cookie_path ~*^/TWO(.*)$ /2$1;
            }
            location /flags/ {
                proxy_pass http://127.0.0.1:%O%;
                proxy_cookie_flags a httponly nosecure samesite=lax;
                proxy_cookie_flags d nosamesite nosecure;
                proxy_cookie_flags $arg_c secure;
                proxy_cookie_flags ~^[g] nohttponly samesite=none;
            }
            location /all/ { proxy_pass http://127.0.0.1:%O%; proxy_cookie_flags ~ secure samesite=strict; }
            location /inherited/ { proxy_pass http://127.0.0.1:%O%; }
            location /off/ { proxy_pass http://127.0.0.1:%O%; proxy_cookie_domain off; }
        }"#,
        &[("%O%", o.port)],
    );
    (o, s)
}

fn cookies(s: &TestServer, path: &str) -> Vec<String> {
    let r = s.get(path);
    assert_eq!(r.status, 200, "{path}");
    r.headers_named("Set-Cookie").into_iter().map(str::to_string).collect()
}

#[test]
fn domains_and_paths_are_rewritten_as_nginx_does() {
    let (_o, s) = start();
    let mut checks = Checks::new();
    checks.run("plain rules: exact domain in any case, path prefix", || {
        assert_eq!(
            cookies(&s, "/plain/"),
            [
                "a=1; Domain=.example.org; Path=/x; HttpOnly",
                "b=2; path=/; domain=other.local",
                "c=3",
                "d=4; Secure; SameSite=None",
                "e=5; Path=/two; Domain=example.org; secure",
                "g=7; Path=/y; samesite=Lax; HTTPONLY",
                "j=10; domain=a.b.backend.local",
            ]
        );
    });
    checks.run("regexes replace the whole value, with captures", || {
        assert_eq!(
            cookies(&s, "/regex/"),
            [
                "a=1; Domain=backend.example.net; Path=/2/x; HttpOnly",
                "b=2; path=/2/; domain=other.example.net",
                "c=3",
                "d=4; Secure; SameSite=None",
                "e=5; Path=/2; Domain=BACKEND.example.net; secure",
                "g=7; Path=/2/y; samesite=Lax; HTTPONLY",
                "j=10; domain=backend.example.net",
            ]
        );
    });
    checks.run("inherited from the server; untouched cookies keep their bytes", || {
        let got = cookies(&s, "/inherited/");
        assert_eq!(got[0], "a=1; Domain=.srv.example; Path=/two/x; HttpOnly");
        assert_eq!(got[4], "e=5; Path=/two; Domain=srv.example; secure");
        assert_eq!(got[5], COOKIES[5]);
    });
    checks.run("off cancels the inherited rules", || assert_eq!(cookies(&s, "/off/"), COOKIES));
    checks.finish();
}

#[test]
fn flags_are_added_replaced_and_removed_as_nginx_does() {
    let (_o, s) = start();
    assert_eq!(
        cookies(&s, "/flags/?c=C"),
        [
            "a=1; Domain=.srv.example; Path=/two/x; HttpOnly; SameSite=Lax",
            "b=2; path=/two/; domain=other.local",
            "c=3; Secure",
            "d=4",
            "e=5; Path=/two; Domain=srv.example; secure",
            "g=7; Path=/two/y; SameSite=None",
            "j=10; domain=a.b.backend.local",
        ]
    );
    assert_eq!(
        cookies(&s, "/all/"),
        [
            "a=1; Domain=.srv.example; Path=/two/x; HttpOnly; Secure; SameSite=Strict",
            "b=2; path=/two/; domain=other.local; Secure; SameSite=Strict",
            "c=3; Secure; SameSite=Strict",
            "d=4; Secure; SameSite=Strict",
            "e=5; Path=/two; Domain=srv.example; secure; SameSite=Strict",
            "g=7; Path=/two/y; SameSite=Strict; HTTPONLY; Secure",
            "j=10; domain=a.b.backend.local; Secure; SameSite=Strict",
        ]
    );
}

#[test]
fn configuration_errors_as_nginx_words_them() {
    for (conf, why) in [
        ("proxy_cookie_domain a;", "invalid parameter \"a\""),
        ("proxy_cookie_flags a;", "invalid parameter \"a\""),
        ("proxy_cookie_path off; proxy_cookie_path a b;", "\"proxy_cookie_path\" directive is duplicate"),
        ("proxy_cookie_path a b; proxy_cookie_path off;", "\"proxy_cookie_path\" directive is duplicate"),
        ("proxy_cookie_flags a 1 2 3 4 5 6 7 8 9;", "invalid number of arguments in \"proxy_cookie_flags\" directive"),
    ] {
        assert_refused(&format!("server {{ listen 127.0.0.1:{{port}}; location / {{ {conf} }} }}"), why);
    }
}
