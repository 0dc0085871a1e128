//! The SSI module: `include` of static files, of proxied and cached
//! locations, `echo` with its encodings, `set`, `if` with regex captures,
//! blocks as stubs, `config`, the error text and its log line, nested
//! includes bounded, and the headers nginx leaves. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::codings;
use common::origin::*;
use common::*;

fn conf(origin: u16) -> String {
    format!(
        r#"include mime.types;
        proxy_cache_path {{prefix}}/cache keys_zone=ssi:1m;
        server {{
            listen 127.0.0.1:{{port}};
            root {{prefix}}/html;
            location / {{
                ssi on;
            }}
            location /origin/ {{
                proxy_pass http://127.0.0.1:{origin}/;
            }}
            location /cached/ {{
                proxy_pass http://127.0.0.1:{origin}/;
                proxy_cache ssi;
                proxy_cache_valid 200 1h;
            }}
            location /page/ {{
                ssi on;
                proxy_pass http://127.0.0.1:{origin}/;
            }}
            location /keep/ {{
                ssi on;
                ssi_last_modified on;
            }}
            location /quiet/ {{
                ssi on;
                ssi_silent_errors on;
            }}
            location /gz/ {{
                ssi on;
                gzip on;
                gzip_min_length 1;
            }}
            location = /hidden.html {{
                internal;
            }}
        }}"#
    )
}

#[test]
fn includes_static_proxied_and_cached_answers() {
    let o = Origin::start(|r| match r.target() {
        "/page.html" => Reply::http(
            200,
            &["Content-Type: text/html", "Last-Modified: Mon, 02 Jan 2023 00:00:00 GMT"],
            "<p><!--#include virtual=\"/part.html?x=1\" --></p>",
        ),
        t => Reply::http(200, &["Content-Type: text/plain"], format!("origin{t}")),
    });
    let s = builder()
        .http(&conf(o.port))
        .file("html/echo.html", "X<!--#echo var=\"arg_test\" -->X")
        .file("html/part.html", "[<!--#echo var=\"arg_x\" default=\"none\" -->]")
        .file(
            "html/index.html",
            "a<!--#include virtual=\"/echo.html?test=tu\" -->\
             b<!--#include virtual=\"/origin/one?q=1\" -->\
             c<!--#include virtual=\"/cached/two\" -->\
             d<!--#include file=\"part.html\" -->\
             e<!--#include virtual=\"/hidden.html\" -->f\n",
        )
        .file("html/hidden.html", "HIDDEN")
        .start();
    let r = s.get("/index.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "aXtuXborigin/one?q=1corigin/twod[none]eHIDDENf\n");
    // The length is unknown, the validators and ranges are gone.
    for h in ["Content-Length", "Last-Modified", "ETag", "Accept-Ranges"] {
        assert_eq!(r.header(h), None, "{h}: {}", r.head);
    }
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
    // The cached location answers from its cache the second time.
    assert_eq!(s.get("/index.html").text(), "aXtuXborigin/one?q=1corigin/twod[none]eHIDDENf\n");
    let seen: Vec<String> = o.requests().iter().map(|r| r.target().to_string()).collect();
    assert_eq!(seen.iter().filter(|t| *t == "/two").count(), 1, "{seen:?}");
    assert_eq!(seen.iter().filter(|t| *t == "/one?q=1").count(), 2, "{seen:?}");
    // A proxied page is processed as it streams; its include goes to a
    // static file with the arguments written in it.
    let r = s.get("/page/page.html");
    assert_eq!(r.text(), "<p>[1]</p>");
    assert_eq!((r.header("Last-Modified"), r.header("Content-Length")), (None, None), "{}", r.head);
    // A client asking for ranges or with validators gets the whole page.
    let r = s.get_with("/echo.html?test=1", &["Range: bytes=0-1"]);
    assert_eq!((r.status, r.text()), (200, "X1X".to_string()));
}

#[test]
fn echo_set_if_blocks_and_config() {
    let s = builder()
        .http(&conf(1))
        .file(
            "html/cmd.html",
            "<!--#set var=\"v\" value=\"<$arg_a>\" -->\
             1<!--#echo var=\"v\" -->\
             2<!--#echo var=\"v\" encoding=\"url\" -->\
             3<!--#echo var=\"v\" encoding=\"none\" -->\
             4<!--#echo var=\"nothing_here_x\" -->\
             5<!--#if expr=\"$arg_a = /^(\\w)(\\w+)/\" -->[$1=<!--#echo var=\"1\" -->,<!--#echo var=\"2\" -->]\
             <!--#elif expr=\"$arg_a\" -->[elif]<!--#else -->[else]<!--#endif -->\
             6<!--#if expr=\"$arg_a != b\" -->[ne]<!--#endif -->\
             <!--#block name=\"st\" -->(stub <!--#echo var=\"v\" encoding=\"none\" -->)<!--#endblock -->\
             7<!--#include virtual=\"/missing.html\" stub=\"st\" -->\
             8<!--#include virtual=\"/echo.html\" set=\"got\" --><!--#echo var=\"got\" -->\
             9<!--#config timefmt=\"%Y\" --><!--#echo var=\"date_gmt\" -->\n",
        )
        .file("html/echo.html", "in-echo")
        .start();
    let year = {
        let out = std::process::Command::new("date").args(["-u", "+%Y"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let r = s.get("/cmd.html?a=xyz");
    assert_eq!(r.text(), format!("1&lt;xyz&gt;2%3Cxyz%3E3<xyz>4(none)5[$1=x,yz]6[ne]7(stub <xyz>)8in-echo9{year}\n"));
    let r = s.get("/cmd.html?a=b!");
    assert!(r.text().starts_with("1&lt;b!&gt;2%3Cb!%3E3<b!>4(none)5[elif]6[ne]7"), "{}", r.text());
    let r = s.get("/cmd.html");
    assert!(r.text().contains("5[else]6[ne]7(stub <>)"), "{}", r.text());
}

#[test]
fn a_bad_command_gets_the_error_text_and_a_log_line() {
    let s = builder()
        .http(&conf(1))
        .file(
            "html/bad.html",
            "a<!--#nosuch x=\"1\" -->b<!--#echo -->c<!--#echo var=x -->d\
             <!--#config errmsg=\"[oops]\" --><!--#include nothing=\"1\" -->e\n",
        )
        .file("html/quiet/bad.html", "a<!--#nosuch -->b\n")
        .file("html/self.html", "S<!--#include virtual=\"/self.html\" -->")
        .start();
    let err = "[an error occurred while processing the directive]";
    let r = s.get("/bad.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), format!("a{err}b{err}c{err}d[oops]e\n"));
    s.wait_error_log("invalid SSI command: \"nosuch\"");
    s.wait_error_log("mandatory \"var\" parameter is absent in \"echo\" SSI command");
    s.wait_error_log("unexpected \"x\" symbol before value of \"var\" parameter in \"echo\" SSI command");
    assert_eq!(s.get("/quiet/bad.html").text(), "ab\n");
    // An include of itself: nested until nginx's limit of subrequests,
    // then the error text; the worker goes on serving.
    let r = s.get("/self.html");
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.starts_with("SSSS") && text.ends_with(err), "{text}");
    assert!((40..=60).contains(&text.matches('S').count()), "{text}");
    s.wait_error_log("subrequests cycle while processing \"/self.html\"");
    assert_eq!(s.get("/quiet/bad.html").status, 200);
}

#[test]
fn last_modified_kept_on_request_and_gzip_after_ssi() {
    let big: String = (0..300).map(|i| format!("<p>{i} <!--#echo var=\"arg_w\" --></p>\n")).collect();
    let s = builder()
        .http(&conf(1))
        .file("html/keep/a.html", "k<!--#echo var=\"arg_k\" -->")
        .file("html/gz/big.html", &big)
        .start();
    let r = s.get("/keep/a.html?k=1");
    assert_eq!(r.text(), "k1");
    assert!(r.header("Last-Modified").is_some(), "{}", r.head);
    assert!(r.header("ETag").is_some_and(|e| e.starts_with("W/")), "{}", r.head);
    let r = s.get_with("/gz/big.html?w=word", &["Accept-Encoding: gzip"]);
    let want: String = (0..300).map(|i| format!("<p>{i} word</p>\n")).collect();
    codings::assert_encoded(&r, "gzip", want.as_bytes(), "ssi then gzip");
    // HEAD: the headers, no body, no subrequest.
    let r = request(s.port, "HEAD /keep/a.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.body.len()), (200, 0));
}

#[test]
fn included_pages_with_comments_and_past_64k() {
    // An HTML comment is no command; a page past 64 KiB goes through the
    // SSI stage in pieces, with or without a command.
    let big_plain = "p".repeat(70 * 1024);
    let big_head = "c".repeat(70 * 1024);
    let s = builder()
        .http(&conf(1))
        .file("html/comment.html", "<!-- not a command -->x")
        .file("html/big_plain.html", &big_plain)
        .file("html/big_cmd.html", format!("{big_head}<!--#echo var=\"arg_v\" -->"))
        .file(
            "html/outer.html",
            "1<!--#include virtual=\"/comment.html\" -->\
             2<!--#include virtual=\"/big_plain.html\" -->\
             3<!--#include virtual=\"/big_cmd.html?v=V\" -->4",
        )
        .start();
    let r = s.get("/outer.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), format!("1<!-- not a command -->x2{big_plain}3{big_head}V4"));
}

#[test]
fn many_includes_and_a_stub_with_its_own_include_keep_page_order() {
    // Five includes in one piece, one of them failing to a stub block
    // that includes a page itself: each answer lands at its own place.
    let s = builder()
        .http(&conf(1))
        .file("html/p1.html", "P1")
        .file("html/p2.html", "P2")
        .file(
            "html/many.html",
            "<!--#block name=\"b\" -->{<!--#include virtual=\"/p1.html\" -->}<!--#endblock -->\
             1<!--#include virtual=\"/p1.html\" -->\
             2<!--#include virtual=\"/nope.html\" stub=\"b\" -->\
             3<!--#include virtual=\"p2.html\" -->\
             4<!--#include virtual=\"/p1.html\" -->\
             5<!--#include virtual=\"/p2.html\" -->6\n",
        )
        .start();
    let r = s.get("/many.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "1P12{P1}3P24P15P26\n");
    // The same page again (the worker's spare buffers reused).
    assert_eq!(s.get("/many.html").text(), "1P12{P1}3P24P15P26\n");
}

/// nginx's subrequests share the main request's `$request_id`: one id on
/// the page, in its includes (files and generated answers, nested, set
/// into a variable) and in the access log, whichever request reads it
/// first; another page gets another.
#[test]
fn a_page_and_its_includes_share_one_request_id() {
    let s = builder()
        .http(
            r#"log_format ids '$request_id';
            server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                access_log logs/ids.log ids;
                location / { ssi on; }
                location = /id { return 200 "<$request_id>"; }
            }"#,
        )
        .file(
            "html/first.html",
            "a<!--#include virtual=\"/id\" -->b<!--#include virtual=\"/nested.html\" -->\
             c<!--#include virtual=\"/id\" set=\"v\" --><!--#echo var=\"v\" encoding=\"none\" -->\
             d<!--#echo var=\"request_id\" -->\n",
        )
        .file("html/nested.html", "[<!--#include virtual=\"/id\" -->]")
        .file("html/echo_first.html", "<!--#echo var=\"request_id\" -->|<!--#include virtual=\"/id\" -->\n")
        .start();
    let a = s.get("/first.html").text();
    let id = a[2..34].to_string();
    assert_eq!(a, format!("a<{id}>b[<{id}>]c<{id}>d{id}\n"));
    assert!(id.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    let b = s.get("/echo_first.html").text();
    let id2 = b[..32].to_string();
    assert_eq!(b, format!("{id2}|<{id2}>\n"));
    assert_ne!(id, id2);
    // Subrequests are not logged (`log_subrequest off`).
    let lines = common::wait_lines(&s.path("logs/ids.log"), 2, common::LOG_WAIT);
    assert_eq!(lines, [id, id2]);
}
