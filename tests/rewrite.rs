//! The rewrite module: `rewrite` with its flags, captures and arguments,
//! `return`, `set`, `break`, `if` with every condition, the implicit
//! location an `if` makes (nginx's "if is evil" surprises), `rewrite_log`,
//! `uninitialized_variable_warn`, server-level directives and the
//! 10-change limit. Every expectation holds for nginx 1.22.1 too
//! (`SLUICE_TEST_NGINX=1`).

mod common;

use common::origin::{Origin, Reply};
use common::*;

/// What a case expects: status, then the Location and body when given.
struct Want<'a> {
    status: u16,
    location: Option<&'a str>,
    body: Option<&'a str>,
}

fn want(status: u16) -> Want<'static> {
    Want { status, location: None, body: None }
}

fn body(status: u16, body: &str) -> Want<'_> {
    Want { status, location: None, body: Some(body) }
}

fn redirect(status: u16, location: &str) -> Want<'_> {
    Want { status, location: Some(location), body: None }
}

fn check(c: &mut Checks, s: &TestServer, path: &str, headers: &[&str], w: Want<'_>) {
    let r = s.get_with(path, headers);
    c.run(path, || {
        assert_eq!(r.status, w.status, "status for {path}:\n{}\n{}", r.head, r.text());
        if let Some(l) = w.location {
            let l = l.replace("{port}", &s.port.to_string());
            assert_eq!(r.header("Location"), Some(l.as_str()), "Location for {path}:\n{}", r.head);
        }
        if let Some(b) = w.body {
            assert_eq!(r.text(), b, "body for {path}");
        }
    });
}

const REWRITE: &str = r#"
    server {
        listen 127.0.0.1:{port};
        server_name localhost;
        root html;

        # server level: before location matching, in order
        rewrite ^/srv-old/(.*)$ /new/$1 last;
        rewrite ^/srv-perm$ /new/perm permanent;
        set $srvvar from-server;
        if ($http_x_block) { return 403; }

        location /echo { return 200 "uri=$uri args=$args\n"; }
        location /new/ { return 200 "new $uri srvvar=$srvvar\n"; }
        location /cap/ { rewrite ^/cap/(\w+)/(\w+)$ /echo/$2/$1 last; }
        location /named/ { rewrite "^/named/(?<first>[a-z]+)-(?P<second>[a-z]+)$" /echo/$second/$first last; }
        location /keepargs/ { rewrite ^ /echo/kept last; }
        location /dropargs/ { rewrite ^ /echo/dropped? last; }
        location /newargs/ { rewrite ^/newargs/(.*)$ /echo?x=$1 last; }
        location /redir/ { rewrite ^/redir/(.*)$ http://example.com/$1; }
        location /redirq/ { rewrite ^/redirq/(.*)$ http://example.com/?p=$1 redirect; }
        location /redirdrop/ { rewrite ^ https://example.com/d? permanent; }
        location /perm/ { rewrite ^/perm/(.*)$ /target/$1 permanent; }
        location /rel/ { rewrite ^ /target redirect; }
        location /scheme/ { rewrite ^ $scheme://example.com/s; }
        location /brk/ { rewrite ^/brk/(.*)$ /files/$1 break; return 500; }
        location /flagless/ { rewrite ^/flagless/(.*)$ /echo/$1; set $after yes; }
        location /flagret/ { rewrite ^ /echo/x; return 200 "still here uri=$uri\n"; }
        location /chain/ {
            rewrite ^/chain/a$ /chain/b;
            rewrite ^/chain/b$ /chain/c;
            rewrite ^/chain/c$ /echo/chained last;
        }
        location /nomatch/ { rewrite ^/elsewhere /echo/x last; return 200 "no match\n"; }
        location /hop/ { rewrite ^/hop/x(x*)$ /hop/$1 last; return 200 "done $uri\n"; }
        location /loop { rewrite ^ /loop last; }
        location /empty/ { rewrite ^/empty/(.*)$ $1 last; }
        location /caseful/ { rewrite ^/caseful/ABC$ /echo/matched last; return 200 "case\n"; }
        location /icase/ { rewrite (?i)^/icase/abc$ /echo/imatched last; }
        location /keepcap/ { rewrite ^/keepcap/(.*)$ /capout last; }
        location /capout { return 200 "cap=[$1]\n"; }
        location ~ ^/recap/(.*)$ { rewrite ^ /echo; return 200 "after=[$1]\n"; }
        location /plus/ { rewrite ^/plus/(.*)$ /echo?q=$1 last; }
        location /rdesc/ { rewrite ^/rdesc/(.*)$ http://example.com/$1?z=1 redirect; }
        location /sete/ { set $e $uri; rewrite ^/sete/(.*)$ /echo/$1 last; }

        location /setv { set $a "A"; set $b "$a-B"; return 200 "$a $b $srvvar\n"; }
        location /setover { set $o first; set $o second; return 200 "$o\n"; }
        location /setargs { set $args forced=1; rewrite ^ /echo/sa last; }
        location /uninit { return 200 "[$neverset]\n"; }
        location /nowarn { uninitialized_variable_warn off; return 200 "[$quiet]\n"; }
        location /never { set $neverset x; set $quiet y; }
        location /scset/ { set $sv fromset; rewrite "^/scset/(?<sv>\w+)$" /scout last; }
        location /scout { return 200 "sv=$sv\n"; }
        location /scset2/ { rewrite "^/scset2/(?<sv>\w+)$" /scout2; set $sv fromset; }
        location /scout2 { return 200 "sv=$sv\n"; }
        location /lostcap/ { if ($uri ~ ^/lostcap/(\w+)$) { rewrite ^ /echo/$1 last; } }
        location /sethdr { set $http_x_thing overridden; return 200 "$http_x_thing\n"; }
        location = /brk2 { break; return 500; }
        location /brkafter/ { rewrite ^/brkafter/(.*)$ /files/$1; break; return 500; }
        location /ret302 { return 302 /somewhere; }
        location /ret404 { return 404; }
        location /rettext { return 201 "made $uri\n"; }
        location /retfirst { return 200 "first\n"; return 200 "second\n"; }
        location /rlog { rewrite_log on; rewrite ^/rlog$ /echo/logged last; }
        location /rlogno { rewrite_log on; rewrite ^/nope$ /x last; return 200 "rlogno\n"; }
        # PCRE features: look-around, backreferences, (?'name')
        location ~ /\.(?!well-known) { return 403; }
        location ~ ^/dup/(\w+)/\1$ { return 200 "dup $1\n"; }
        location ~ "^/n1/(?<a>\w+)$" { return 200 "n1 $a\n"; }
        location ~ "^/n2/(?P<b>\w+)$" { return 200 "n2 $b\n"; }
        location ~ "^/n3/(?'c'\w+)$" { return 200 "n3 $c\n"; }
        location /lb/ { rewrite "(?<=/lb/)x$" /echo/lookbehind last; return 200 "lb no\n"; }
        location /la/ { if ($uri ~ "^/la/(?!skip)(\w+)") { return 200 "la $1\n"; } return 200 "la skipped\n"; }
        location /atomic/ { if ($uri ~ "^/atomic/(?>a+)b$") { return 200 "atomic\n"; } return 200 "no\n"; }
        location /poss/ { if ($uri ~ "^/poss/a++a$") { return 200 "poss\n"; } return 200 "no poss\n"; }
        location @named { return 200 "named uri=$uri\n"; }
        location /tonamed { try_files /nonexistent @named; }
        location /namedrw { error_page 404 = @nrw; return 404; }
        location @nrw { rewrite ^ /echo/fromnamed last; }
    }
"#;

fn rewrite_server() -> TestServer {
    builder().http(REWRITE).file("html/files/f.txt", "file f\n").file("html/brk2", "brk2 static\n").start()
}

#[test]
fn rewrite_flags_captures_and_arguments() {
    let s = rewrite_server();
    let mut c = Checks::new();
    check(&mut c, &s, "/cap/one/two", &[], body(200, "uri=/echo/two/one args=\n"));
    check(&mut c, &s, "/named/ab-cd", &[], body(200, "uri=/echo/cd/ab args=\n"));
    check(&mut c, &s, "/keepargs/x?a=1&b=2", &[], body(200, "uri=/echo/kept args=a=1&b=2\n"));
    check(&mut c, &s, "/dropargs/x?a=1", &[], body(200, "uri=/echo/dropped args=\n"));
    check(&mut c, &s, "/newargs/v?a=1", &[], body(200, "uri=/echo args=x=v&a=1\n"));
    check(&mut c, &s, "/newargs/v", &[], body(200, "uri=/echo args=x=v\n"));
    check(&mut c, &s, "/redir/p/q?a=1", &[], redirect(302, "http://example.com/p/q?a=1"));
    check(&mut c, &s, "/redirq/v?a=1", &[], redirect(302, "http://example.com/?p=v&a=1"));
    check(&mut c, &s, "/redirdrop/x?a=1", &[], redirect(301, "https://example.com/d"));
    check(&mut c, &s, "/perm/x", &[], redirect(301, "http://localhost:{port}/target/x"));
    check(&mut c, &s, "/rel/x", &[], redirect(302, "http://localhost:{port}/target"));
    check(&mut c, &s, "/scheme/x", &[], redirect(302, "http://example.com/s"));
    check(&mut c, &s, "/brk/f.txt", &[], body(200, "file f\n"));
    check(&mut c, &s, "/brkafter/f.txt", &[], body(200, "file f\n"));
    check(&mut c, &s, "/flagless/y?k=v", &[], body(200, "uri=/echo/y args=k=v\n"));
    check(&mut c, &s, "/flagret/y", &[], body(200, "still here uri=/echo/x\n"));
    check(&mut c, &s, "/chain/a", &[], body(200, "uri=/echo/chained args=\n"));
    check(&mut c, &s, "/nomatch/x", &[], body(200, "no match\n"));
    check(&mut c, &s, "/caseful/abc", &[], body(200, "case\n"));
    check(&mut c, &s, "/icase/ABC", &[], body(200, "uri=/echo/imatched args=\n"));
    // $1 of a rewrite lasts into the next location...
    check(&mut c, &s, "/keepcap/zz", &[], body(200, "cap=[zz]\n"));
    // ... and a later regex, even one without groups, replaces it.
    check(&mut c, &s, "/recap/zz", &[], body(200, "after=[]\n"));
    // So an `if` regex's $1 is gone once the rewrite's own regex matched.
    check(&mut c, &s, "/lostcap/abc", &[], body(200, "uri=/echo/ args=\n"));
    // The client's escaping: captures copied into a query are escaped again
    // (a `+` or `%XX` in the URI), and a redirect keeps `%20` but not `%26`.
    check(&mut c, &s, "/plus/a+b", &[], body(200, "uri=/echo args=q=a%2Bb\n"));
    check(&mut c, &s, "/plus/a%20b", &[], body(200, "uri=/echo args=q=a%20b\n"));
    check(&mut c, &s, "/plus/ab", &[], body(200, "uri=/echo args=q=ab\n"));
    check(&mut c, &s, "/rdesc/a%20b%26c?x=y", &[], redirect(302, "http://example.com/a%20b&c?z=1&x=y"));
    check(&mut c, &s, "/ret302", &[], redirect(302, "http://localhost:{port}/somewhere"));
    check(&mut c, &s, "/ret404", &[], want(404));
    check(&mut c, &s, "/rettext", &[], body(201, "made /rettext\n"));
    check(&mut c, &s, "/retfirst", &[], body(200, "first\n"));
    check(&mut c, &s, "/brk2", &[], body(200, "brk2 static\n"));
    check(&mut c, &s, "/tonamed", &[], body(200, "named uri=/tonamed\n"));
    check(&mut c, &s, "/namedrw", &[], body(200, "uri=/echo/fromnamed args=\n"));
    c.finish();
}

#[test]
fn pcre_regexes() {
    let s = builder().http(REWRITE).file("html/.well-known/acme", "acme\n").start();
    let mut c = Checks::new();
    check(&mut c, &s, "/.git/config", &[], want(403));
    check(&mut c, &s, "/.well-known/acme", &[], body(200, "acme\n"));
    check(&mut c, &s, "/dup/ab/ab", &[], body(200, "dup ab\n"));
    check(&mut c, &s, "/dup/ab/cd", &[], want(404));
    check(&mut c, &s, "/n1/x1", &[], body(200, "n1 x1\n"));
    check(&mut c, &s, "/n2/x2", &[], body(200, "n2 x2\n"));
    check(&mut c, &s, "/n3/x3", &[], body(200, "n3 x3\n"));
    check(&mut c, &s, "/lb/x", &[], body(200, "uri=/echo/lookbehind args=\n"));
    check(&mut c, &s, "/lb/yx", &[], body(200, "lb no\n"));
    check(&mut c, &s, "/la/go", &[], body(200, "la go\n"));
    check(&mut c, &s, "/la/skip", &[], body(200, "la skipped\n"));
    check(&mut c, &s, "/atomic/aab", &[], body(200, "atomic\n"));
    check(&mut c, &s, "/poss/aaa", &[], body(200, "no poss\n"));
    c.finish();
}

#[test]
fn server_level_directives_run_before_location_matching() {
    let s = rewrite_server();
    let mut c = Checks::new();
    check(&mut c, &s, "/srv-old/x", &[], body(200, "new /new/x srvvar=\n"));
    check(&mut c, &s, "/srv-perm", &[], redirect(301, "http://localhost:{port}/new/perm"));
    check(&mut c, &s, "/echo", &["X-Block: 1"], want(403));
    check(&mut c, &s, "/setv", &[], body(200, "A A-B from-server\n"));
    c.finish();
}

#[test]
fn set_variables() {
    let s = rewrite_server();
    let mut c = Checks::new();
    check(&mut c, &s, "/setover", &[], body(200, "second\n"));
    // A variable both `set` and captured has one value: the last written.
    check(&mut c, &s, "/scset/abc", &[], body(200, "sv=abc\n"));
    check(&mut c, &s, "/scset2/abc", &[], body(200, "sv=fromset\n"));
    check(&mut c, &s, "/setargs?orig=1", &[], body(200, "uri=/echo/sa args=forced=1\n"));
    // set shadows the header variable of the same name everywhere.
    check(&mut c, &s, "/sethdr", &["X-Thing: from-client"], body(200, "overridden\n"));
    check(&mut c, &s, "/uninit", &[], body(200, "[]\n"));
    check(&mut c, &s, "/nowarn", &[], body(200, "[]\n"));
    // The flagless rewrite runs the rest of the location's directives
    // before matching again: $after is set, $e saw the old URI.
    check(&mut c, &s, "/sete/q", &[], body(200, "uri=/echo/q args=\n"));
    c.finish();
    let log = s.wait_error_log("using uninitialized \"neverset\" variable");
    assert!(line_with(&log, "\"neverset\"").contains("[warn]"), "{log}");
    assert!(line_with(&log, "\"neverset\"").contains("request: \"GET /uninit HTTP/1.1\""), "{log}");
    assert!(!log.contains("\"quiet\""), "uninitialized_variable_warn off still warned:\n{log}");
}

#[test]
fn ten_uri_changes_then_500() {
    let s = rewrite_server();
    let mut c = Checks::new();
    check(&mut c, &s, &format!("/hop/{}", "x".repeat(10)), &[], body(200, "done /hop/\n"));
    check(&mut c, &s, &format!("/hop/{}", "x".repeat(11)), &[], want(500));
    check(&mut c, &s, "/loop", &[], want(500));
    check(&mut c, &s, "/empty/", &[], want(500));
    c.finish();
    let log = s.wait_error_log("while processing \"/loop\"");
    let line = line_with(&log, "while processing \"/loop\"");
    assert!(line.contains("[error]") && line.contains("rewrite or internal redirection cycle"), "{line}");
    let log = s.wait_error_log("the rewritten URI has a zero length");
    assert!(line_with(&log, "zero length").contains("[error]"), "{log}");
}

#[test]
fn rewrite_log_lines() {
    let s = rewrite_server();
    let r = s.get("/rlog");
    assert_eq!(r.text(), "uri=/echo/logged args=\n");
    let r = s.get("/rlogno");
    assert_eq!(r.text(), "rlogno\n");
    let log = s.wait_error_log("rewritten data");
    let m = line_with(&log, "\"^/rlog$\" matches \"/rlog\"");
    assert!(m.contains("[notice]") && m.contains("request: \"GET /rlog HTTP/1.1\""), "{m}");
    assert!(line_with(&log, "rewritten data: \"/echo/logged\", args: \"\"").contains("[notice]"), "{log}");
    let log = s.wait_error_log("does not match");
    assert!(line_with(&log, "\"^/nope$\" does not match \"/rlogno\"").contains("[notice]"), "{log}");
    // Only where rewrite_log is on.
    assert!(!log.contains("\"/cap/"), "{log}");
}

const IF: &str = r#"
    server {
        listen 127.0.0.1:{port};
        server_name localhost;
        root html;

        location /if-var { if ($arg_v) { return 200 "true\n"; } return 200 "false\n"; }
        location /if-eq { if ($arg_s = yes) { return 200 "eq\n"; } return 200 "ne\n"; }
        location /if-eqq { if ($arg_s = "two words") { return 200 "eq\n"; } return 200 "ne\n"; }
        location /if-empty { if ($arg_s = "") { return 200 "empty\n"; } return 200 "set\n"; }
        location /if-neq { if ( $arg_s != "yes" ) { return 200 "neq\n"; } return 200 "eq\n"; }
        location /if-var2 { if ($arg_a = $arg_b) { return 200 "same\n"; } return 200 "differ\n"; }
        location /if-re { if ($http_x_agent ~ Moz(\w+)) { return 200 "re $1\n"; } return 200 "nore [$1]\n"; }
        location /if-rei { if ($http_x_agent ~* ^mozilla) { return 200 "rei\n"; } return 200 "norei\n"; }
        location /if-nre { if ($http_x_agent !~ curl) { return 200 "nre\n"; } return 200 "curl\n"; }
        location /if-nrei { if ($http_x_agent !~* CURL) { return 200 "nrei\n"; } return 200 "curl\n"; }
        location /if-named { if ($uri ~ "^/if-named/(?<who>[a-z]+)$") { return 200 "who=$who\n"; } return 200 "none\n"; }
        location /if-paren { if ($uri ~ ^/if-paren/(a|b)$) { return 200 "paren $1\n"; } return 200 "none\n"; }
        location /iff/ {
            if (-f $request_filename) { return 200 "f\n"; }
            if (-d $request_filename) { return 200 "d\n"; }
            return 200 "none\n";
        }
        location /ifn/ {
            if (!-e $request_filename) { return 200 "!e\n"; }
            if (!-f $request_filename) { return 200 "!f\n"; }
            if (!-d $request_filename) { return 200 "!d\n"; }
            return 200 "?\n";
        }
        location /ife/ { if (-e $request_filename) { return 200 "e\n"; } return 200 "none\n"; }
        location /ifx/ {
            if (-x $request_filename) { return 200 "x\n"; }
            if (!-x $request_filename) { return 200 "!x\n"; }
        }
        location /if-rewrite { if ($arg_go) { rewrite ^ /dest last; } return 200 "stayed\n"; }
        location /dest { return 200 "dest args=$args\n"; }
        location /if-break { set $v before; if ($arg_b) { set $v inside; break; } set $v after; return 200 "$v\n"; }

        # the implicit location: only the last `if` that held counts
        location /only-one-if {
            set $true 1;
            if ($true) { add_header X-First 1; }
            if ($true) { add_header X-Second 2; }
            return 204;
        }
        # try_files does not run in an `if` location
        location /if-try-files {
            try_files /nonexistent /a.txt;
            set $true 1;
            if ($true) { }
        }
        location /plain-try-files { try_files /nonexistent /a.txt; }
        location /if-root/ {
            root html/main;
            if ($arg_alt) { root html/alt; }
        }
        location /if-hdr/ {
            add_header X-Loc loc;
            if ($arg_h) { add_header X-If if; }
            return 200 "hdr\n";
        }
        location /if-expires/ {
            alias html/;
            if ($arg_e) { expires 1h; }
        }
        location /if-errpage {
            if ($arg_e) { error_page 404 =200 /a.txt; }
            return 404;
        }
        location /if-empty-gif { empty_gif; if ($arg_x) { add_header X-Gif 1; } }
    }
    server {
        listen 127.0.0.1:{port};
        server_name srvif;
        if ($arg_deny) { return 403; }
        if ($request_method = POST) { return 405; }
        if ($http_x_to ~ ^(\w+)$) { set $to $1; rewrite ^ /to/$to last; }
        location / { return 200 "srvif uri=$uri\n"; }
    }
    server {
        listen 127.0.0.1:{port};
        server_name "~^(?!www\.)(?<sub>[a-z]+)\.example\.com$";
        return 200 "sub=$sub\n";
    }
"#;

fn if_server() -> TestServer {
    builder()
        .http(IF)
        .file("html/a.txt", "a file\n")
        .file("html/iff/file", "x")
        .file("html/iff/dir/.keep", "")
        .file("html/ifn/file", "x")
        .file("html/ifn/dir/.keep", "")
        .file("html/ife/file", "x")
        .file("html/ifx/run", "#!/bin/sh\n")
        .file("html/ifx/plain", "x")
        .file("html/main/if-root/r.txt", "main root\n")
        .file("html/alt/if-root/r.txt", "alt root\n")
        .file("html/e.txt", "e\n")
        .start()
}

#[test]
fn if_conditions() {
    let s = if_server();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(s.path("html/ifx/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = Checks::new();
    check(&mut c, &s, "/if-var?v=1", &[], body(200, "true\n"));
    check(&mut c, &s, "/if-var?v=0", &[], body(200, "false\n"));
    check(&mut c, &s, "/if-var?v=", &[], body(200, "false\n"));
    check(&mut c, &s, "/if-var?v=00", &[], body(200, "true\n"));
    check(&mut c, &s, "/if-var", &[], body(200, "false\n"));
    check(&mut c, &s, "/if-eq?s=yes", &[], body(200, "eq\n"));
    check(&mut c, &s, "/if-eq?s=YES", &[], body(200, "ne\n"));
    check(&mut c, &s, "/if-eqq?s=two%20words", &[], body(200, "ne\n"));
    check(&mut c, &s, "/if-empty", &[], body(200, "empty\n"));
    check(&mut c, &s, "/if-empty?s=1", &[], body(200, "set\n"));
    check(&mut c, &s, "/if-neq?s=no", &[], body(200, "neq\n"));
    check(&mut c, &s, "/if-neq?s=yes", &[], body(200, "eq\n"));
    check(&mut c, &s, "/if-var2?a=1&b=1", &[], body(200, "same\n"));
    check(&mut c, &s, "/if-var2?a=1&b=2", &[], body(200, "differ\n"));
    check(&mut c, &s, "/if-re", &["X-Agent: Mozilla/5"], body(200, "re illa\n"));
    check(&mut c, &s, "/if-re", &["X-Agent: curl"], body(200, "nore []\n"));
    check(&mut c, &s, "/if-rei", &["X-Agent: MOZILLA"], body(200, "rei\n"));
    check(&mut c, &s, "/if-rei", &["X-Agent: xmozilla"], body(200, "norei\n"));
    check(&mut c, &s, "/if-nre", &["X-Agent: wget"], body(200, "nre\n"));
    check(&mut c, &s, "/if-nre", &["X-Agent: curl/8"], body(200, "curl\n"));
    check(&mut c, &s, "/if-nrei", &["X-Agent: Curl/8"], body(200, "curl\n"));
    check(&mut c, &s, "/if-nrei", &["X-Agent: wget"], body(200, "nrei\n"));
    check(&mut c, &s, "/if-named/abc", &[], body(200, "who=abc\n"));
    check(&mut c, &s, "/if-paren/b", &[], body(200, "paren b\n"));
    check(&mut c, &s, "/if-paren/c", &[], body(200, "none\n"));
    check(&mut c, &s, "/iff/file", &[], body(200, "f\n"));
    check(&mut c, &s, "/iff/dir", &[], body(200, "d\n"));
    check(&mut c, &s, "/iff/missing", &[], body(200, "none\n"));
    check(&mut c, &s, "/ifn/missing", &[], body(200, "!e\n"));
    check(&mut c, &s, "/ifn/dir", &[], body(200, "!f\n"));
    check(&mut c, &s, "/ifn/file", &[], body(200, "!d\n"));
    check(&mut c, &s, "/ife/file", &[], body(200, "e\n"));
    check(&mut c, &s, "/ife/", &[], body(200, "e\n"));
    check(&mut c, &s, "/ife/missing", &[], body(200, "none\n"));
    check(&mut c, &s, "/ifx/run", &[], body(200, "x\n"));
    check(&mut c, &s, "/ifx/plain", &[], body(200, "!x\n"));
    check(&mut c, &s, "/if-rewrite?go=1", &[], body(200, "dest args=go=1\n"));
    check(&mut c, &s, "/if-rewrite", &[], body(200, "stayed\n"));
    check(&mut c, &s, "/if-break?b=1", &[], want(404));
    check(&mut c, &s, "/if-break", &[], body(200, "after\n"));
    c.finish();
}

#[test]
fn if_is_an_implicit_location() {
    let s = if_server();
    let mut c = Checks::new();
    let r = s.get("/only-one-if");
    c.run("only-one-if", || {
        assert_eq!(r.status, 204);
        assert_eq!(r.header("Content-Type"), None, "{}", r.head);
        assert_eq!(r.header("X-First"), None, "{}", r.head);
        assert_eq!(r.header("X-Second"), Some("2"), "{}", r.head);
    });
    // try_files is per location: the `if` location has none, so the URI
    // itself is served (404), while the same location without `if` works.
    check(&mut c, &s, "/if-try-files", &[], want(404));
    check(&mut c, &s, "/plain-try-files", &[], body(200, "a file\n"));
    check(&mut c, &s, "/if-root/r.txt", &[], body(200, "main root\n"));
    check(&mut c, &s, "/if-root/r.txt?alt=1", &[], body(200, "alt root\n"));
    let r = s.get("/if-hdr/?h=1");
    c.run("if-hdr with h", || {
        assert_eq!(r.header("X-If"), Some("if"), "{}", r.head);
        assert_eq!(r.header("X-Loc"), None, "the if block's add_header replaces the location's:\n{}", r.head);
    });
    let r = s.get("/if-hdr/");
    c.run("if-hdr without h", || {
        assert_eq!(r.header("X-Loc"), Some("loc"), "{}", r.head);
        assert_eq!(r.header("X-If"), None, "{}", r.head);
    });
    let r = s.get("/if-expires/e.txt?e=1");
    c.run("if-expires", || {
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Cache-Control"), Some("max-age=3600"), "{}", r.head);
    });
    let r = s.get("/if-expires/e.txt");
    c.run("no if-expires", || assert_eq!(r.header("Cache-Control"), None, "{}", r.head));
    check(&mut c, &s, "/if-errpage?e=1", &[], body(200, "a file\n"));
    check(&mut c, &s, "/if-errpage", &[], want(404));
    // The location's content handler stays in an `if` without one.
    let r = s.get("/if-empty-gif?x=1");
    c.run("if keeps empty_gif", || {
        assert_eq!(r.body, EMPTY_GIF.to_vec());
        assert_eq!(r.header("X-Gif"), Some("1"), "{}", r.head);
    });
    c.finish();
}

#[test]
fn server_level_if() {
    let s = if_server();
    let host = ["Host: srvif"];
    let get = |path: &str, extra: &[&str]| {
        let mut r = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        for h in host.iter().chain(extra) {
            r.push_str(h);
            r.push_str("\r\n");
        }
        r.push_str("\r\n");
        request(s.port, &r)
    };
    assert_eq!(get("/x?deny=1", &[]).status, 403);
    assert_eq!(get("/x", &[]).text(), "srvif uri=/x\n");
    assert_eq!(get("/x", &["X-To: abc"]).text(), "srvif uri=/to/abc\n");
    let r = request(s.port, "POST /x HTTP/1.1\r\nHost: srvif\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 405);
    // A server_name regex with a look-ahead (PCRE), caseless as in nginx.
    let host = |h: &str| request(s.port, &format!("GET /x HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"));
    assert_eq!(host("Shop.Example.com").text(), "sub=shop\n");
    assert_ne!(host("www.example.com").text(), "sub=www\n");
}

const PROXY: &str = r#"
    server {
        listen 127.0.0.1:{port};
        server_name localhost;
        location /px/ { proxy_pass http://127.0.0.1:%O%/up/; set $t 1; if ($t) { } }
        location /pxbrk/ { rewrite ^/pxbrk/(.*)$ /other/$1 break; proxy_pass http://127.0.0.1:%O%/up/; }
        location /pxlast/ { rewrite ^/pxlast/(.*)$ /px/$1 last; }
        location /pxargs/ { rewrite ^/pxargs/(.*)$ /q?a=$1 break; proxy_pass http://127.0.0.1:%O%; }
        location /pxnouri/ { rewrite ^/pxnouri/(.*)$ /n/$1 break; proxy_pass http://127.0.0.1:%O%; }
        location /pxsetargs/ { set $args "s=1"; proxy_pass http://127.0.0.1:%O%; }
        location /pxif/ {
            proxy_pass http://127.0.0.1:%O%;
            if ($arg_two) { proxy_pass http://127.0.0.1:%P%; }
        }
        location /pxpct/ { rewrite ^ /p%41b break; proxy_pass http://127.0.0.1:%O%; }
        location /pxenc/ { rewrite ^/pxenc/(.*)$ /enc/$1 break; proxy_pass http://127.0.0.1:%O%; }
        location /pxhdr/ {
            proxy_pass http://127.0.0.1:%O%;
            if ($arg_h) { add_header X-If yes; }
        }
    }
"#;

#[test]
fn proxied_requests_after_rewrites() {
    let o = Origin::start(|r| Reply::ok(format!("one {}\n", r.target())));
    let o2 = Origin::start(|r| Reply::ok(format!("two {}\n", r.target())));
    let s = common::origin::proxy(PROXY, &[("%O%", o.port), ("%P%", o2.port)]);
    let mut c = Checks::new();
    // An `if` location keeps the location's proxy_pass and its URI part.
    check(&mut c, &s, "/px/a?x=1", &[], body(200, "one /up/a?x=1\n"));
    // After `rewrite ... break` the URI no longer belongs to the location:
    // proxy_pass's URI part is not substituted, the whole new URI goes.
    check(&mut c, &s, "/pxbrk/b", &[], body(200, "one /other/b\n"));
    check(&mut c, &s, "/pxlast/c?k=v", &[], body(200, "one /up/c?k=v\n"));
    check(&mut c, &s, "/pxargs/d?k=v", &[], body(200, "one /q?a=d&k=v\n"));
    check(&mut c, &s, "/pxnouri/e?k=v", &[], body(200, "one /n/e?k=v\n"));
    check(&mut c, &s, "/pxsetargs/f?k=v", &[], body(200, "one /pxsetargs/f?s=1\n"));
    check(&mut c, &s, "/pxif/g", &[], body(200, "one /pxif/g\n"));
    check(&mut c, &s, "/pxif/g?two=1", &[], body(200, "two /pxif/g?two=1\n"));
    // A rewritten URI goes out escaped as nginx's NGX_ESCAPE_URI does: a
    // literal `%` becomes `%25`, `[` stays, a decoded space is `%20`.
    check(&mut c, &s, "/pxpct/x", &[], body(200, "one /p%2541b\n"));
    check(&mut c, &s, "/pxenc/a%5Bb%20c", &[], body(200, "one /enc/a[b%20c\n"));
    let r = s.get("/pxhdr/h?h=1");
    c.run("proxied if add_header", || {
        assert_eq!(r.text(), "one /pxhdr/h?h=1\n");
        assert_eq!(r.header("X-If"), Some("yes"), "{}", r.head);
    });
    c.finish();
}

#[test]
fn alias_after_break_is_refused() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location /al/ { alias html/; rewrite ^/al/(.*)$ /al/$1 break; }
                location /al2/ { alias html/; }
            }"#,
        )
        .file("html/a.txt", "a\n")
        .start();
    assert_eq!(s.get("/al2/a.txt").text(), "a\n");
    assert_eq!(s.get("/al/a.txt").status, 500);
    let log = s.wait_error_log("where URI was rewritten");
    let line = line_with(&log, "where URI was rewritten");
    assert!(line.contains("[alert]") && line.contains("\"alias\" cannot be used in location \"/al/\""), "{line}");
}

/// `sluice -t` / `nginx -t` on a server body; returns stderr.
fn test_config(server: &str) -> (bool, String) {
    let s = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; {server} }}")).prepare();
    let out = s.run(&["-t"]);
    (out.status.success(), stderr_of(&out))
}

#[test]
fn configuration_errors() {
    let cases: &[(&str, &str)] = &[
        ("location / { rewrite ^ \"\"; }", "empty replacement"),
        ("location / { rewrite ^ /x bogus; }", "invalid parameter \"bogus\""),
        ("location / { set foo bar; }", "invalid variable name \"foo\""),
        ("location / { set $uri /x; }", "the duplicate \"uri\" variable"),
        ("location / { if ($a) { } }", "unknown \"a\" variable"),
        ("location / { if $arg_a { } }", "invalid condition \"$arg_a\""),
        ("location / { if ($arg_a = ) { } }", "invalid condition \"$arg_a\""),
        ("location / { if ($arg_a ^ b) { } }", "unexpected \"^\" in condition"),
        ("location / { if (-q /x) { } }", "invalid condition \"-q\""),
        ("location / { if ($arg_a) { if ($arg_b) { } } }", "\"if\" directive is not allowed here"),
        ("location / { if ($arg_a) { index x; } }", "\"index\" directive is not allowed here"),
        ("if ($arg_a) { root /x; }", "\"root\" directive is not allowed here"),
        ("location / { if ($arg_a) { proxy_pass http://127.0.0.1:1/x; } }", "cannot have URI part"),
        ("location / { return 1000; }", "invalid return code \"1000\""),
        ("location / { break x; }", "invalid number of arguments in \"break\" directive"),
        ("location / { if ($arg_a) return 403; }", "directive \"if\" has no opening \"{\""),
    ];
    for (conf, msg) in cases {
        let (ok, err) = test_config(conf);
        assert!(!ok, "{conf}: accepted");
        assert!(err.contains(msg), "{conf}: expected {msg:?} in:\n{err}");
    }
    for conf in [
        "location / { if ($arg_a) { rewrite_log on; uninitialized_variable_warn off; } }",
        "if ($arg_a) { rewrite_log on; set $x 1; break; }",
        "location / { set $args a=b; set $http_x y; set $limit_rate 1k; }",
        "location / { if ( $arg_a = \"b\" ) { return 200; } }",
        "location / { if ($x) { } } location /y { set $x 1; }",
    ] {
        let (ok, err) = test_config(conf);
        assert!(ok, "{conf}: refused:\n{err}");
    }
}

/// Snippets found in real configurations.
const COMMON: &str = r#"
    server {
        listen 127.0.0.1:{port};
        server_name localhost www.localhost;
        root html;
        if ($host = 'www.localhost') { rewrite ^/(.*)$ http://localhost/$1 permanent; }
        if ($request_method !~ ^(GET|HEAD|POST)$ ) { return 405; }
        location /https { rewrite ^ https://$host$request_uri? permanent; }
        location /sch { if ($scheme = http) { return 301 https://$host$request_uri; } }
        location /bot { if ($http_user_agent ~* (bot|crawler)) { return 403; } return 200 "human\n"; }
        location /cb {
            set $cache_bypass 0;
            if ($request_uri ~* "/cb/admin/") { set $cache_bypass 1; }
            return 200 "cb=$cache_bypass\n";
        }
        location ~ ^/(?<app>[a-z]+)/app/ { rewrite ^/[a-z]+/app/(.*)$ /$1 break; root html/$app; }
        location /ep/ { error_page 404 /ep404; return 404; }
        location = /ep404 { rewrite ^ /echo/from404 last; }
        location /echo { return 200 "uri=$uri args=$args\n"; }
        location /todir { rewrite ^ /dir/ last; }
        location /wp/ { try_files $uri $uri/ /echo/index.php?$args; }
    }
"#;

#[test]
fn common_snippets() {
    let s =
        builder().http(COMMON).file("html/dir/index.html", "dir index\n").file("html/shop/x.txt", "shop x\n").start();
    let mut c = Checks::new();
    let www = |path: &str| {
        request(s.port, &format!("GET {path} HTTP/1.1\r\nHost: www.localhost\r\nConnection: close\r\n\r\n"))
    };
    let r = www("/x/y?z=1");
    c.run("www redirect", || {
        assert_eq!(r.status, 301);
        assert_eq!(r.header("Location"), Some("http://localhost/x/y?z=1"));
    });
    check(&mut c, &s, "/https/a?b=1", &[], redirect(301, "https://localhost/https/a?b=1"));
    check(&mut c, &s, "/sch/a?b=1", &[], redirect(301, "https://localhost/sch/a?b=1"));
    check(&mut c, &s, "/bot", &["User-Agent: GoogleBot/2"], want(403));
    check(&mut c, &s, "/bot", &["User-Agent: Mozilla/5"], body(200, "human\n"));
    check(&mut c, &s, "/cb/admin/x", &[], body(200, "cb=1\n"));
    check(&mut c, &s, "/cb/user", &[], body(200, "cb=0\n"));
    check(&mut c, &s, "/shop/app/x.txt", &[], body(200, "shop x\n"));
    // The error page's location rewrites; the response keeps the 404.
    check(&mut c, &s, "/ep/x", &[], body(404, "uri=/echo/from404 args=\n"));
    check(&mut c, &s, "/todir", &[], body(200, "dir index\n"));
    check(&mut c, &s, "/wp/post?p=1", &[], body(200, "uri=/echo/index.php args=p=1\n"));
    let r = request(s.port, "DELETE /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    c.run("method filter", || assert_eq!(r.status, 405));
    c.finish();
}
