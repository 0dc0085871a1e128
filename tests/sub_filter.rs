//! `sub_filter`: strings replaced in response bodies (static, proxied,
//! compressed after replacing), ignoring case, once or everywhere. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::codings;
use common::origin::*;
use common::*;
use std::time::Duration;

#[test]
fn replaces_in_static_proxied_and_compressed_bodies() {
    let page = "<html><head></head><body>see HTTP://old.example/a and http://old.example/b</body></html>\n";
    // A body the origin sends in several pieces, the string cut between them.
    let o = Origin::start(|r| {
        if r.target() == "/untyped" {
            return Reply::http(200, &[], "http://old.example/u");
        }
        Reply::raw(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n\
             b\r\n<p>http://o\r\n13\r\nld.example/x</p>   \r\n0\r\n\r\n",
        )
    });
    let big: String = (0..400).map(|i| format!("<p>line {i} http://old.example/{i}</p>\n")).collect();
    let s = builder()
        .http(&format!(
            r#"include mime.types;
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location / {{
                    sub_filter 'http://old.example' 'https://$host';
                    sub_filter '</head>' '<meta name="x"></head>';
                }}
                location /all/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_once off;
                }}
                location /css/ {{
                    sub_filter 'red' 'blue';
                    sub_filter_types text/css;
                    sub_filter_last_modified on;
                }}
                location /up/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /any/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_types *;
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /gz/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_once off;
                    gzip on;
                    gzip_min_length 1;
                }}
            }}"#,
            p = o.port
        ))
        .file("html/page.html", page)
        .file("html/all/page.html", page)
        .file("html/all/a.txt", "http://old.example\n")
        .file("html/css/a.css", "p{color:RED}\n")
        .file("html/gz/big.html", &big)
        .start();
    let r = request(s.port, "GET /page.html HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "<html><head><meta name=\"x\"></head><body>see https://site.test/a and http://old.example/b</body></html>\n"
    );
    assert_eq!((r.header("Last-Modified"), r.header("ETag"), r.header("Content-Length")), (None, None, None));
    let r = s.get("/all/page.html");
    assert_eq!(
        r.text(),
        "<html><head></head><body>see https://new.example/a and https://new.example/b</body></html>\n"
    );
    // Other types are left alone unless listed.
    assert_eq!(s.get("/all/a.txt").text(), "http://old.example\n");
    let r = s.get("/css/a.css");
    assert_eq!(r.text(), "p{color:blue}\n");
    assert!(r.header("Last-Modified").is_some(), "{}", r.head);
    assert!(r.header("ETag").is_some_and(|e| e.starts_with("W/")), "{}", r.head);
    assert_eq!(s.get("/up/").text(), "<p>https://new.example/x</p>   ");
    // `*` takes a response without Content-Type too.
    let r = s.get("/any/untyped");
    assert_eq!((r.text().as_str(), r.header("Content-Length")), ("https://new.example/u", None), "{}", r.head);
    let r = s.get_with("/gz/big.html", &["Accept-Encoding: gzip"]);
    let want = big.replace("http://old.example", "https://new.example");
    codings::assert_encoded(&r, "gzip", want.as_bytes(), "sub_filter then gzip");
}

#[test]
fn an_empty_pattern_is_refused() {
    let t = builder().http("server { listen 127.0.0.1:{port}; sub_filter '' x; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains("empty search pattern"), "{err}");
}

/// An origin answering `?b=PIECE~PIECE~...` with the pieces as its body
/// (Content-Length), written one at a time 10 ms apart, so each piece
/// reaches the filter in its own buffer and a search string may be cut
/// anywhere.
fn pieces_origin() -> Origin {
    Origin::start(|r| {
        let query = r.target().split_once('?').map_or("", |(_, q)| q);
        let body = query.split('&').find_map(|kv| kv.strip_prefix("b=")).unwrap_or("");
        let len = body.bytes().filter(|&b| b != b'~').count();
        let mut reply =
            Reply::raw(format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len}\r\n\r\n"));
        for piece in body.split('~') {
            reply = reply.then_sleep(Duration::from_millis(10)).then_write(piece);
        }
        reply
    })
}

/// `body` cut in two at every place, and (when short) in three at every
/// pair of places, as `~`-separated pieces for [`pieces_origin`].
fn cuts(body: &str) -> Vec<String> {
    let n = body.len();
    let mut out = vec![body.to_string()];
    for i in 1..n {
        out.push(format!("{}~{}", &body[..i], &body[i..]));
        for j in (i + 1..n).filter(|_| n <= 10) {
            out.push(format!("{}~{}~{}", &body[..i], &body[i..j], &body[j..]));
        }
    }
    out
}

/// What nginx's test files sub_filter.t and sub_filter_multi2.t check,
/// with the proxied body cut at every place: search strings whose prefix
/// repeats in the body, search strings with variables (lowercased, an
/// empty one left out), patterns whose prefixes overlap, and what wins
/// where several match.
#[test]
fn complex_strings_cut_anywhere_as_nginx() {
    let o = pieces_origin();
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                sub_filter_types *;
                proxy_buffering off;
                location /abac {{ sub_filter abac _R; proxy_pass http://127.0.0.1:{p}; }}
                location /ababx {{ sub_filter ababX _R; proxy_pass http://127.0.0.1:{p}; }}
                location /aab {{ sub_filter aab _R; sub_filter_once off; proxy_pass http://127.0.0.1:{p}; }}
                location /var {{ sub_filter X$arg_a _R; proxy_pass http://127.0.0.1:{p}; }}
                location /two {{
                    sub_filter_once off;
                    sub_filter '${{arg_a}}' '${{arg_a}}+';
                    sub_filter '${{arg_c}}' '${{arg_c}}-';
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /vars {{
                    sub_filter_once off;
                    sub_filter '${{arg_a}}A${{arg_c}}' +;
                    sub_filter '${{arg_d}}AA${{arg_e}}' -;
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /order {{
                    sub_filter_once off;
                    sub_filter zy 1;
                    sub_filter z 2;
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /overlap {{
                    sub_filter_once off;
                    sub_filter abcd X;
                    sub_filter bc Y;
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /once {{
                    sub_filter ab 1;
                    sub_filter ba 2;
                    proxy_pass http://127.0.0.1:{p};
                }}
            }}"#,
            p = o.port
        ))
        .start();
    // (path and arguments before `b=`, body, what the client gets)
    let cases: &[(&str, &str, &str)] = &[
        ("/abac?", "abaabac", "aba_R"),
        ("/abac?", "ababac", "ab_R"),
        ("/ababx?", "abababX", "ab_R"),
        ("/aab?", "aaaab-aab", "aa_R-_R"),
        ("/var?a=foo&", "Xfoo", "_R"),
        ("/var?a=foo&", "xFOO.", "_R."),
        ("/var?a=FOO&", "<Xfoo>", "<_R>"),
        ("/var?a=abcdefghijklmnopq&", "Xabcdefghijklmnopq", "_R"),
        ("/two?a=a&c=b&", "abXYaXbZ", "a+b-XYa+Xb-Z"),
        ("/two?a=a&c=b&", "ABXYAXBZ", "a+b-XYa+Xb-Z"),
        ("/two?a=patt&c=abyz&", "pattabyzXYpattXabyzZpatt", "patt+abyz-XYpatt+Xabyz-Zpatt+"),
        ("/two?c=b&", "abXYaXbZ", "ab-XYaXb-Z"),
        ("/vars?a=aaa&c=bbb&d=yy&e=zz&", "AaaaAbbbZyyAAzzY", "A+Z-Y"),
        ("/vars?c=bbb&d=yy&", "AAbbbZyyAAY", "A+Z-Y"),
        // The first listed string wins where several begin; one still
        // matching when the body ends keeps the rest as it is.
        ("/order?", "a|Zy|z|zzy", "a|1|2|21"),
        ("/order?", "azyzz", "a12z"),
        ("/overlap?", "abcd-zbc-abc", "X-zY-abc"),
        ("/once?", "abba-ab-ba", "12-ab-ba"),
    ];
    for (path, body, want) in cases {
        for cut in cuts(body) {
            let r = s.get(&format!("{path}b={cut}"));
            assert_eq!((r.status, r.text().as_str()), (200, *want), "{path}b={cut}\n{}", r.head);
            assert_eq!(r.header("Content-Length"), None, "{path}b={cut}\n{}", r.head);
        }
    }
    // Every search string empty: the response passes untouched, its
    // length kept.
    let r = s.get("/two?b=abXY~aXbZ");
    assert_eq!((r.text().as_str(), r.header("Content-Length")), ("abXYaXbZ", Some("8")), "{}", r.head);
}

#[test]
fn more_than_255_search_strings_are_refused() {
    let many: String = (0..256).map(|i| format!("sub_filter s{i} r;\n")).collect();
    let t = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; {many} }}")).prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains("number of search patterns exceeds 255"), "{err}");
    let ok: String = (0..255).map(|i| format!("sub_filter s{i} r;\n")).collect();
    let t = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; {ok} }}")).prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}
