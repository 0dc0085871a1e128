//! `auth_request` and `auth_request_set`: access decided by a subrequest
//! to a location that asks an authentication service, as oauth2-proxy and
//! Authelia are deployed. With SLUICE_TEST_NGINX=1 the same tests run
//! against Debian's nginx.

mod common;

use common::origin::*;
use common::*;

/// The authentication service: the bearer token decides.
fn auth_service() -> Origin {
    Origin::start(|r| match r.header("Authorization").unwrap_or("") {
        "Bearer good" => Reply::http(200, &["X-User: alice", &format!("X-Where: {}", r.target())], "ok"),
        "Bearer bad" => Reply::http(401, &["WWW-Authenticate: Bearer realm=\"app\""], "no"),
        "Bearer forbidden" => Reply::http(403, &[], "no"),
        _ => Reply::http(418, &[], "teapot"),
    })
}

/// The application: names the request and the user it was told.
fn app() -> Origin {
    Origin::start(|r| {
        Reply::ok(format!(
            "{} {} user={} body={}",
            r.method(),
            r.target(),
            r.header("X-User").unwrap_or("-"),
            String::from_utf8_lossy(&r.body)
        ))
    })
}

fn server(auth: &Origin, app: &Origin) -> TestServer {
    builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location = /auth {{
                    internal;
                    proxy_pass http://127.0.0.1:{a}/verify;
                    proxy_pass_request_body off;
                    proxy_set_header Content-Length "";
                    proxy_set_header X-Original-URI $request_uri;
                }}
                location /app/ {{
                    auth_request /auth;
                    auth_request_set $user $upstream_http_x_user;
                    proxy_set_header X-User $user;
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /static/ {{
                    auth_request /auth;
                }}
                location = /auth2 {{
                    internal;
                    proxy_pass http://127.0.0.1:{a}/verify2;
                    proxy_pass_request_body off;
                }}
                location /ep/ {{
                    auth_request /auth;
                    error_page 404 = /ep2;
                }}
                location = /ep2 {{
                    auth_request /auth2;
                    auth_request_set $where $upstream_http_x_where;
                    add_header X-Where $where;
                }}
                location /args/ {{
                    auth_request /auth;
                    auth_request_set $args "user=$upstream_http_x_user";
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /any/ {{
                    satisfy any;
                    allow 127.0.0.1;
                    deny all;
                    auth_request /auth;
                }}
            }}"#,
            a = auth.port,
            p = app.port
        ))
        .file("html/static/a.txt", "static\n")
        .file("html/any/a.txt", "any\n")
        .file("html/ep2", "ep2\n")
        .start()
}

fn req(s: &TestServer, method: &str, path: &str, token: &str, body: &str) -> Response {
    request(
        s.port,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn the_subrequest_decides_and_sets_variables() {
    let (a, p) = (auth_service(), app());
    let s = server(&a, &p);
    let r = req(&s, "GET", "/app/x?y=1", "good", "");
    assert_eq!((r.status, r.text().as_str()), (200, "GET /app/x?y=1 user=alice body="), "{}", r.head);
    // The service saw a GET of its URI with the client's headers, no body.
    let seen = a.last();
    assert_eq!(seen.line(), "GET /verify HTTP/1.0");
    assert_eq!(seen.header("X-Original-URI"), Some("/app/x?y=1"));
    assert_eq!(seen.header("Authorization"), Some("Bearer good"));
    // A POST keeps its body for the application.
    let r = req(&s, "POST", "/app/form", "good", "field=1");
    assert_eq!(r.text(), "POST /app/form user=alice body=field=1");
    assert!(a.last().body.is_empty());
    assert_eq!(s.get("/static/a.txt").status, 500, "no token: the service's 418 is a 500");
    let r = req(&s, "GET", "/static/a.txt", "good", "");
    assert_eq!((r.status, r.text().as_str()), (200, "static\n"));
    // After an internal redirect, the new location's auth_request asks
    // its own service (nginx clears the module's state).
    let r = req(&s, "GET", "/ep/missing", "good", "");
    assert_eq!((r.status, r.text().as_str(), r.header("X-Where")), (200, "ep2\n", Some("/verify2")));
    // `$args` has a setter in nginx: auth_request_set replaces the arguments.
    let r = req(&s, "GET", "/args/x?y=1", "good", "");
    assert_eq!(r.text(), "GET /args/x?user=alice user=- body=");
}

#[test]
fn refusals_and_failures() {
    let (a, p) = (auth_service(), app());
    let s = server(&a, &p);
    let before = p.count();
    let r = req(&s, "GET", "/app/x", "bad", "");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("WWW-Authenticate"), Some("Bearer realm=\"app\""));
    assert_eq!(req(&s, "GET", "/app/x", "forbidden", "").status, 403);
    assert_eq!(req(&s, "GET", "/app/x", "weird", "").status, 500);
    assert_eq!(p.count(), before, "the application saw none of them");
    let log = s.wait_error_log("auth request unexpected status");
    assert!(log.contains("auth request unexpected status: 418"), "{log}");
    // The auth location itself is internal.
    assert_eq!(s.get("/auth").status, 404);
    // satisfy any: the address rule admits without asking the service.
    let asked = a.count();
    let r = req(&s, "GET", "/any/a.txt", "bad", "");
    assert_eq!((r.status, r.text().as_str()), (200, "any\n"));
    assert_eq!(a.count(), asked);
}
