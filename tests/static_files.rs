//! Static content and per-location behaviour: root/alias, index, directory
//! redirects, autoindex, errors, MIME types, validators and conditional
//! requests, ranges, URI normalisation, try_files, error_page, return,
//! add_header, expires, empty_gif, large files, server and location
//! selection. Expected answers were checked against nginx 1.22.1.

mod common;

use std::path::Path;

use common::*;

const AZ: &str = "abcdefghijklmnopqrstuvwxyz";

const HTTP: &str = r#"
    include mime.types;
    default_type application/x-default;
    server {
        listen 127.0.0.1:{port};
        root html;
        location /al/ { alias aliasdir/; }
        location /sub/ { index missing.htm home.htm; }
        location /auto/ { autoindex on; }
        location /typed/ { types { text/x-custom cst; } default_type text/x-fallback; }
        location /tf/ { try_files $uri $uri/ /fallback.html; }
        location /tf404/ { try_files $uri =404; }
        location /tfnamed/ { try_files $uri @fallback; }
        location @fallback { return 200 "named fallback\n"; }
        location /ep/ { error_page 404 /custom404.html; }
        location /ep200/ { error_page 404 =200 /custom404.html; }
        location /epurl/ { error_page 404 http://example.com/notfound; }
        location = /ret { return 201 "created\n"; }
        location = /moved { return 301 http://example.com/new; }
        location = /close { return 444; }
        location /hdr/ { add_header X-A a; add_header X-B b always; }
        location /exp/ { expires 1h; }
        location = /empty.gif { empty_gif; }
        location /sf-on/ { alias html/; sendfile on; }
        location /sf-off/ { alias html/; sendfile off; }
        location /sf-chunk/ { alias html/; sendfile on; sendfile_max_chunk 64k; }
        location = /r302 { return 302 /rel; }
        location = /r200 { return 200; }
        location = /r404 { return 404; }
        location = /rurl { return https://example.com/x; }
        location /emax/ { alias html/; expires max; }
        location /eepoch/ { alias html/; expires epoch; }
        location /eneg/ { alias html/; expires -1; }
        location /emod/ { alias html/; expires modified +1h; }
        location /noetag/ { alias html/; etag off; }
        location /imsb/ { alias html/; if_modified_since before; }
        location /epnamed/ { error_page 404 = @nf; }
        location @nf { return 200 "nf named\n"; }
        location /multi/ { error_page 403 404 /custom404.html; }
    }
"#;

fn server() -> TestServer {
    builder()
        .http(HTTP)
        .file("html/index.html", "root index\n")
        .file("html/az.txt", AZ)
        .file("html/x.json", "{}\n")
        .file("html/style.css", "a{}\n")
        .file("html/file.unknownext", "u\n")
        .file("html/dir/index.html", "dir index\n")
        .file("html/noidx/f.txt", "f\n")
        .file("html/sub/home.htm", "custom index\n")
        .file("html/auto/f.txt", "f\n")
        .file("html/auto/subdir/g.txt", "g\n")
        .file("html/auto/.env", "SECRET=1\n")
        .file("html/auto/.git/config", "[core]\n")
        .file("html/auto/a b&c<d>.txt", "x")
        .file(&format!("html/auto/{}.txt", "L".repeat(60)), "y")
        .file("html/multi/noidx/f.txt", "f")
        .file("html/UP.JSON", "{}")
        .file("html/typed/a.cst", "c\n")
        .file("html/typed/b.css", "b\n")
        .file("html/typed/d.cst/plain", "p\n")
        .file("html/typed/dot.", "d\n")
        .file("html/typed/c.CsT", "u\n")
        .file("html/tf/real.txt", "real\n")
        .file("html/tf/d/index.html", "tf dir index\n")
        .file("html/tf404/real.txt", "real\n")
        .file("html/fallback.html", "fallback\n")
        .file("html/custom404.html", "custom 404\n")
        .file("html/hdr/a.txt", "a\n")
        .file("html/exp/a.txt", "a\n")
        .file("aliasdir/a.txt", "aliased\n")
        .file("html/\u{e9}.txt", "utf8 name\n")
        .file("html/a b.txt", "space\n")
        .file("secret.txt", "TOP SECRET\n")
        .start()
}

fn status_body(r: &Response) -> (u16, String) {
    (r.status, r.text())
}

#[test]
fn root_and_alias() {
    let s = server();
    assert_eq!(status_body(&s.get("/az.txt")), (200, AZ.into()));
    assert_eq!(status_body(&s.get("/al/a.txt")), (200, "aliased\n".into()));
    // alias replaces the location prefix: the file is not under root
    assert_eq!(s.get("/aliasdir/a.txt").status, 404);
    assert_eq!(s.get("/al/missing.txt").status, 404);
}

#[test]
fn index_files() {
    let s = server();
    assert_eq!(status_body(&s.get("/")), (200, "root index\n".into()));
    assert_eq!(status_body(&s.get("/dir/")), (200, "dir index\n".into()));
    // custom list: the first is missing, the second exists
    let r = s.get("/sub/");
    assert_eq!(status_body(&r), (200, "custom index\n".into()));
    assert_eq!(r.must("Content-Type"), "text/html");
}

#[test]
fn directory_without_slash_redirects() {
    let s = server();
    let host = format!("127.0.0.1:{}", s.port);
    let r = request(s.port, &format!("GET /dir HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"));
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 301 Moved Permanently");
    assert_eq!(r.must("Location"), format!("http://{host}/dir/"));
    assert!(r.text().contains("<title>301 Moved Permanently</title>"));
    // With a query string: kept on the redirect.
    let r = request(s.port, &format!("GET /dir?a=1 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"));
    assert_eq!(r.must("Location"), format!("http://{host}/dir/?a=1"));
    // curl following the redirect ends at the index.
    let c = curl(&["-L", &s.url("/dir")]);
    assert_eq!(c.text(), "dir index\n", "{}", c.stderr);
}

#[test]
fn autoindex_lists_entries() {
    let s = server();
    let r = s.get("/auto/");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("Content-Type"), "text/html");
    let t = r.text();
    assert!(t.contains("<title>Index of /auto/</title>"), "{t}");
    assert!(t.contains("<h1>Index of /auto/</h1>"), "{t}");
    assert!(t.contains("<a href=\"../\">../</a>"), "{t}");
    assert!(t.contains("<a href=\"f.txt\">f.txt</a>"), "{t}");
    assert!(t.contains("<a href=\"subdir/\">subdir/</a>"), "{t}");
    // directories are listed before files, as nginx does
    assert!(t.find("subdir/").unwrap() < t.find("f.txt").unwrap(), "{t}");
    assert_eq!(status_body(&s.get("/auto/subdir/g.txt")), (200, "g\n".into()));
    // names are escaped in the href and in the text
    assert!(t.contains("<a href=\"a%20b%26c%3Cd%3E.txt\">a b&amp;c&lt;d&gt;.txt</a>"), "{t}");
    // long names are cut to 50 columns with "..>"
    let long = format!("<a href=\"{l}.txt\">{}..&gt;</a>", &"L".repeat(47), l = "L".repeat(60));
    assert!(t.contains(&long), "{t}");
    assert_eq!(s.get("/auto/a%20b&c%3Cd%3E.txt").text(), "x");
    // Dotfiles and dot-directories are never listed, as in nginx.
    assert!(t.contains("f.txt"));
    assert!(!t.contains(".env") && !t.contains(".git"), "{t}");
}

#[test]
fn directory_without_index_is_403() {
    let mut s = server();
    let r = s.get("/noidx/");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 403 Forbidden");
    assert!(r.text().contains("<title>403 Forbidden</title>"));
    assert!(s.quit().success());
    let dir = s.path("html/noidx/").display().to_string();
    let log = s.error_log();
    let line = line_with(&log, &format!("directory index of \"{dir}\" is forbidden"));
    assert!(line.contains("[error]"), "{line}");
}

#[test]
fn not_found_page_and_error_log() {
    let mut s = server();
    let r = s.get("/nothere.txt");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 404 Not Found");
    assert_eq!(r.must("Content-Type"), "text/html");
    assert_eq!(
        r.text(),
        "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n\
         <hr><center>sluice/0.1.0</center>\r\n</body>\r\n</html>\r\n"
    );
    assert_eq!(r.must("Content-Length"), r.body.len().to_string());
    assert!(s.quit().success());
    let file = s.path("html/nothere.txt").display().to_string();
    let log = s.error_log();
    let line = line_with(&log, &format!("open() \"{file}\" failed (2: No such file or directory)"));
    assert!(line.contains(" [error] "), "{line}");
    assert!(
        line.contains("client: 127.0.0.1, server: , request: \"GET /nothere.txt HTTP/1.1\", host: \"localhost\""),
        "{line}"
    );
}

#[test]
fn mime_types_and_default_type() {
    let s = server();
    let ct = |p: &str| s.get(p).must("Content-Type").to_string();
    assert_eq!(ct("/x.json"), "application/json");
    assert_eq!(ct("/style.css"), "text/css");
    assert_eq!(ct("/az.txt"), "text/plain");
    assert_eq!(ct("/index.html"), "text/html");
    assert_eq!(ct("/empty.gif"), "image/gif");
    assert_eq!(ct("/file.unknownext"), "application/x-default");
    // a location's own types{} replaces the inherited table
    assert_eq!(ct("/typed/a.cst"), "text/x-custom");
    assert_eq!(ct("/typed/b.css"), "text/x-fallback");
    // extensions are matched case-insensitively
    assert_eq!(ct("/UP.JSON"), "application/json");
    assert_eq!(ct("/typed/c.CsT"), "text/x-custom");
    // the extension is the last segment's: none past a dot in a directory
    assert_eq!(ct("/typed/d.cst/plain"), "text/x-fallback");
    assert_eq!(ct("/typed/dot."), "text/x-fallback");
}

#[test]
fn etag_and_last_modified() {
    let s = server();
    let r = s.get("/az.txt");
    let p = s.path("html/az.txt");
    assert_eq!(r.must("ETag"), nginx_etag(&p));
    assert_eq!(r.must("ETag"), format!("\"{:x}-1a\"", mtime(&p)));
    assert_eq!(r.must("Last-Modified"), http_date(mtime(&p)));
    assert_eq!(r.must("Accept-Ranges"), "bytes");
}

#[test]
fn conditional_requests() {
    let s = server();
    let p = s.path("html/az.txt");
    let etag = nginx_etag(&p);
    let lm = http_date(mtime(&p));

    let r = s.get_with("/az.txt", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 304 Not Modified");
    assert!(r.body.is_empty());
    assert_eq!(r.must("ETag"), etag);
    assert!(r.header("Content-Length").is_none(), "{}", r.head);

    let r = s.get_with("/az.txt", &["If-None-Match: *"]);
    assert_eq!(r.status, 304);
    let r = s.get_with("/az.txt", &[&format!("If-None-Match: \"other\", {etag}")]);
    assert_eq!(r.status, 304);
    let r = s.get_with("/az.txt", &[&format!("If-None-Match: W/{etag}")]);
    assert_eq!(r.status, 304);
    let r = s.get_with("/az.txt", &["If-None-Match: \"other\""]);
    assert_eq!(status_body(&r), (200, AZ.into()));

    let r = s.get_with("/az.txt", &[&format!("If-Modified-Since: {lm}")]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    // if_modified_since exact (default): a different date is not a match
    let r = s.get_with("/az.txt", &[&format!("If-Modified-Since: {}", http_date(mtime(&p) - 10))]);
    assert_eq!(r.status, 200);

    let r = s.get_with("/az.txt", &["If-Match: \"nope\""]);
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 412 Precondition Failed");
    let r = s.get_with("/az.txt", &[&format!("If-Match: {etag}")]);
    assert_eq!(r.status, 200);
    let r = s.get_with("/az.txt", &[&format!("If-Unmodified-Since: {}", http_date(mtime(&p) - 10))]);
    assert_eq!(r.status, 412);
    let r = s.get_with("/az.txt", &[&format!("If-Unmodified-Since: {lm}")]);
    assert_eq!(r.status, 200);

    // The 304 must not carry a body on a keep-alive connection either.
    let mut c = s.connect();
    c.send(format!(
        "GET /az.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\nGET /x.json HTTP/1.1\r\nHost: x\r\n\r\n"
    ));
    assert_eq!(c.read_response().status, 304);
    assert_eq!(c.read_response().text(), "{}\n");
}

#[test]
fn single_and_suffix_ranges() {
    let s = server();
    let r = s.get_with("/az.txt", &["Range: bytes=2-5"]);
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 206 Partial Content");
    assert_eq!(r.must("Content-Range"), "bytes 2-5/26");
    assert_eq!(r.must("Content-Length"), "4");
    assert_eq!(r.text(), "cdef");

    let r = s.get_with("/az.txt", &["Range: bytes=-3"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.must("Content-Range"), "bytes 23-25/26");
    assert_eq!(r.text(), "xyz");

    let r = s.get_with("/az.txt", &["Range: bytes=20-"]);
    assert_eq!(r.must("Content-Range"), "bytes 20-25/26");
    assert_eq!(r.text(), "uvwxyz");

    // end past the size is clamped
    let r = s.get_with("/az.txt", &["Range: bytes=24-1000"]);
    assert_eq!(r.must("Content-Range"), "bytes 24-25/26");
    assert_eq!(r.text(), "yz");
}

#[test]
fn multiple_ranges_are_multipart() {
    let s = server();
    let r = s.get_with("/az.txt", &["Range: bytes=0-1,5-6,-2"]);
    assert_eq!(r.status, 206);
    let ct = r.must("Content-Type");
    let boundary =
        ct.strip_prefix("multipart/byteranges; boundary=").unwrap_or_else(|| panic!("Content-Type {ct}")).to_string();
    assert_eq!(r.must("Content-Length"), r.body.len().to_string());
    let body = r.text();
    let delim = format!("--{boundary}");
    assert!(body.starts_with(&format!("\r\n{delim}\r\n")), "{body:?}");
    assert!(body.ends_with(&format!("\r\n{delim}--\r\n")), "{body:?}");
    let parts: Vec<&str> = body.split(&delim).collect();
    // "", part1, part2, part3, "--\r\n"
    assert_eq!(parts.len(), 5, "{body:?}");
    let want = [("bytes 0-1/26", "ab"), ("bytes 5-6/26", "fg"), ("bytes 24-25/26", "yz")];
    for (part, (range, data)) in parts[1..4].iter().zip(want) {
        let (head, content) = part.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("Content-Type: text/plain"), "{head:?}");
        assert!(head.contains(&format!("Content-Range: {range}")), "{head:?}");
        assert_eq!(content, format!("{data}\r\n"));
    }
}

#[test]
fn unsatisfiable_range_is_416() {
    let s = server();
    let r = s.get_with("/az.txt", &["Range: bytes=100-200"]);
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 416 Requested Range Not Satisfiable");
    assert_eq!(r.must("Content-Range"), "bytes */26");
    assert!(!r.text().contains(AZ));
}

#[test]
fn uri_normalisation_and_traversal() {
    let s = server();
    for p in ["/a/../index.html", "//index.html", "/%69ndex.html", "/./index.html", "/dir/../index.html"] {
        assert_eq!(status_body(&s.get(p)), (200, "root index\n".into()), "{p}");
    }
    // decoding
    assert_eq!(status_body(&s.get("/dir%2Findex.html")), (200, "dir index\n".into()));
    assert_eq!(status_body(&s.get("/%C3%A9.txt")), (200, "utf8 name\n".into()));
    assert_eq!(status_body(&s.get("/a%20b.txt")), (200, "space\n".into()));
    assert_eq!(status_body(&s.get("/index.html?../../secret.txt")), (200, "root index\n".into()));
    assert_eq!(s.get("/index.html/").status, 404);
    for bad in ["/%", "/%zz", "/a b.txt"] {
        assert_eq!(s.get(bad).status, 400, "{bad}");
    }
    let mut checks = Checks::new();
    for p in [
        "/../secret.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/dir/..%2F..%2Fsecret.txt",
        "/al/../../secret.txt",
        "/al/..%2f..%2fsecret.txt",
        "/al/..%2f..%2f..%2fetc/passwd",
        "/al..%2fsecret.txt",
        "/index.html%00.txt",
    ] {
        checks.run(p, || {
            let r = s.get(p);
            let body = r.text();
            assert!(!body.contains("TOP SECRET") && !body.contains("root:"), "{p} leaked a file: {body}");
            assert!(r.status == 400 || r.status == 404, "{p}: status {}", r.status);
        });
    }
    checks.finish();
}

#[test]
fn try_files() {
    let s = server();
    assert_eq!(status_body(&s.get("/tf/real.txt")), (200, "real\n".into()));
    // $uri/ matching a directory: nginx redirects to add the slash...
    let r = s.get("/tf/d");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.must("Location"), format!("http://localhost:{}/tf/d/", s.port));
    // ...and with the slash the index is served.
    assert_eq!(status_body(&s.get("/tf/d/")), (200, "tf dir index\n".into()));
    assert_eq!(status_body(&s.get("/tf/nothing")), (200, "fallback\n".into()));
    assert_eq!(status_body(&s.get("/tf404/real.txt")), (200, "real\n".into()));
    let r = s.get("/tf404/nothing");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<title>404 Not Found</title>"));
    assert_eq!(status_body(&s.get("/tfnamed/nothing")), (200, "named fallback\n".into()));
}

#[test]
fn error_page() {
    let s = server();
    let r = s.get("/ep/nothing");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 404 Not Found");
    assert_eq!(r.text(), "custom 404\n");
    let r = s.get("/ep200/nothing");
    assert_eq!(status_body(&r), (200, "custom 404\n".into()));
    let r = s.get("/epurl/nothing");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 302 Moved Temporarily");
    assert_eq!(r.must("Location"), "http://example.com/notfound");
}

#[test]
fn return_directive() {
    let s = server();
    let r = s.get("/ret");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 201 Created");
    assert_eq!(r.text(), "created\n");
    assert_eq!(r.must("Content-Type"), "application/x-default");
    let r = s.get("/moved");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 301 Moved Permanently");
    assert_eq!(r.must("Location"), "http://example.com/new");
    assert!(r.text().contains("<title>301 Moved Permanently</title>"));
    // 444 closes without any response
    let raw = request_to_close(s.port, b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(raw.is_empty(), "444 sent bytes: {:?}", String::from_utf8_lossy(&raw));
}

#[test]
fn add_header_and_always() {
    let s = server();
    let r = s.get("/hdr/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-A"), Some("a"));
    assert_eq!(r.header("X-B"), Some("b"));
    let r = s.get("/hdr/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("X-A"), None, "add_header without always on a 404");
    assert_eq!(r.header("X-B"), Some("b"));
    // not inherited into locations without it
    assert_eq!(s.get("/az.txt").header("X-A"), None);
}

#[test]
fn expires_sets_expires_and_cache_control() {
    let s = server();
    let r = s.get("/exp/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("Cache-Control"), "max-age=3600");
    let exp = parse_http_date(r.must("Expires")).expect("Expires is an HTTP-date");
    let date = parse_http_date(r.must("Date")).unwrap();
    assert_eq!(exp - date, 3600);
    assert_eq!(s.get("/az.txt").header("Expires"), None);
}

#[test]
fn empty_gif_is_nginx_gif() {
    let s = server();
    let r = s.get("/empty.gif");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("Content-Type"), "image/gif");
    assert_eq!(r.must("Content-Length"), "43");
    assert_eq!(r.body, EMPTY_GIF);
    if Path::new(NGINX).exists() {
        let n =
            builder().nginx().http("server { listen 127.0.0.1:{port}; location = /empty.gif { empty_gif; } }").start();
        assert_eq!(n.get("/empty.gif").body, r.body, "differs from nginx's empty_gif");
    }
}

#[test]
fn large_file_with_and_without_sendfile() {
    let data = pseudo_random(5 * 1024 * 1024 + 7, 42);
    let s = builder().http(HTTP).file("html/big.bin", &data).start();
    for p in ["/sf-on/big.bin", "/sf-off/big.bin", "/sf-chunk/big.bin"] {
        let r = s.get(p);
        assert_eq!(r.status, 200, "{p}");
        assert_eq!(r.must("Content-Length"), data.len().to_string(), "{p}");
        assert!(r.body == data, "{p}: body differs ({} bytes)", r.body.len());
    }
    // A range from the middle, both ways.
    for p in ["/sf-on/big.bin", "/sf-off/big.bin", "/sf-chunk/big.bin"] {
        let r = s.get_with(p, &["Range: bytes=1000000-3000000"]);
        assert_eq!(r.status, 206, "{p}");
        assert_eq!(r.must("Content-Range"), format!("bytes 1000000-3000000/{}", data.len()));
        assert!(r.body == data[1000000..=3000000], "{p}: range bytes differ");
    }
    // HEAD: no body
    let mut c = s.connect();
    c.send("HEAD /sf-on/big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /sf-on/x.json HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response_to("HEAD").must("Content-Length"), data.len().to_string());
    assert_eq!(c.read_response().status, 404);
    // Two in a row on one keep-alive connection, and via curl.
    let mut c = s.connect();
    c.send("GET /sf-on/big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /sf-off/big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(c.read_response().body == data);
    assert!(c.read_response().body == data);
    for p in ["/sf-on/big.bin", "/sf-chunk/big.bin"] {
        let out = s.path("dl.bin");
        let c = curl(&["--limit-rate", "4M", "-o", &out.display().to_string(), &s.url(p)]);
        assert!(c.status.success(), "{p}: {}", c.stderr);
        assert!(std::fs::read(&out).unwrap() == data, "{p}");
    }
}

#[test]
fn server_name_selection() {
    let http = r#"
        server { listen 127.0.0.1:{port}; server_name first.test; return 200 "first\n"; }
        server { listen 127.0.0.1:{port}; server_name exact.test alias.test; return 200 "exact\n"; }
        server { listen 127.0.0.1:{port}; server_name *.wild.test; return 200 "wild-front\n"; }
        server { listen 127.0.0.1:{port}; server_name www.back.*; return 200 "wild-back\n"; }
        server { listen 127.0.0.1:{port}; server_name ~\.wild\.test$ ~^RE(\d+)\.test$; return 200 "regex $server_name\n"; }
        server { listen 127.0.0.1:{port}; server_name .Dot.test; return 200 "dot $server_name\n"; }
        server { listen 127.0.0.1:{port} default_server; server_name def.test; return 200 "default\n"; }
    "#;
    let s = builder().http(http).start();
    let host = |h: Option<&str>| -> String {
        let raw = match h {
            Some(h) => format!("GET / HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"),
            None => "GET / HTTP/1.0\r\n\r\n".to_string(),
        };
        request(s.port, &raw).text()
    };
    assert_eq!(host(Some("exact.test")), "exact\n");
    assert_eq!(host(Some("alias.test")), "exact\n");
    assert_eq!(host(Some("EXACT.Test")), "exact\n");
    assert_eq!(host(Some("exact.test:8080")), "exact\n");
    assert_eq!(host(Some("exact.test.")), "exact\n");
    assert_eq!(host(Some("first.test")), "first\n");
    assert_eq!(host(Some("a.wild.test")), "wild-front\n", "wildcard beats regex");
    assert_eq!(host(Some("a.b.wild.test")), "wild-front\n");
    assert_eq!(host(Some("www.back.org")), "wild-back\n");
    // A regex is caseless; $server_name is the server's first name: a
    // regex as written, a ".name" without its dot, lowercase.
    assert_eq!(host(Some("re42.test")), "regex ~\\.wild\\.test$\n");
    assert_eq!(host(Some("a.dot.test")), "dot dot.test\n");
    assert_eq!(host(Some("dot.test")), "dot dot.test\n");
    assert_eq!(host(Some("unknown.test")), "default\n");
    assert_eq!(host(None), "default\n");
    // absolute-form request target overrides Host
    let r = request(s.port, "GET http://exact.test/ HTTP/1.1\r\nHost: unknown.test\r\nConnection: close\r\n\r\n");
    assert_eq!(r.text(), "exact\n");
}

#[test]
fn location_matching_order() {
    let http = r#"
        server {
            listen 127.0.0.1:{port};
            location = /exact { return 200 "exact\n"; }
            location /exact { return 200 "prefix-exact\n"; }
            location ^~ /static/ { return 200 "caret\n"; }
            location ~ \.php$ { return 200 "regex\n"; }
            location ~* \.jpg$ { return 200 "iregex\n"; }
            location ~ ^/dup/ { return 200 "first-regex\n"; }
            location ~ \.txt$ { return 200 "second-regex\n"; }
            location /static/deep/ { return 200 "longer-prefix\n"; }
            location /docs/ { return 200 "docs\n"; }
            location /docs/api/ { return 200 "docs-api\n"; }
            location /nest/ {
                location ~ \.html$ { return 200 "nested-regex\n"; }
                return 200 "nest\n";
            }
            location / { return 200 "root\n"; }
        }
    "#;
    let s = builder().http(http).start();
    let cases = [
        ("/exact", "exact"),
        ("/exact/more", "prefix-exact"),
        ("/exactly", "prefix-exact"),
        ("/static/x.php", "caret"),
        ("/static/deep/x.php", "regex"),
        ("/static/deep/x", "longer-prefix"),
        ("/docs/x.php", "regex"),
        ("/docs/api/v1", "docs-api"),
        ("/docs/other", "docs"),
        ("/img/A.JPG", "iregex"),
        ("/img/a.jpg", "iregex"),
        ("/x.PHP", "root"),
        ("/dup/a.txt", "first-regex"),
        ("/b.txt", "second-regex"),
        ("/nest/a.html", "nested-regex"),
        ("/nest/b", "nest"),
        ("/anything", "root"),
        ("/exact?q=1", "exact"),
    ];
    let mut checks = Checks::new();
    for (path, want) in cases {
        checks.run(path, || assert_eq!(s.get(path).text(), format!("{want}\n"), "{path}"));
    }
    checks.finish();
}

#[test]
fn return_variants() {
    let s = server();
    // a relative redirect is made absolute from Host and the listen port
    let r = s.get("/r302");
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 302 Moved Temporarily");
    assert_eq!(r.must("Location"), format!("http://localhost:{}/rel", s.port));
    let r = s.get("/r200");
    assert_eq!((r.status, r.must("Content-Length")), (200, "0"));
    assert!(r.body.is_empty());
    let r = s.get("/r404");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<title>404 Not Found</title>"));
    let r = s.get("/rurl");
    assert_eq!(r.status, 302);
    assert_eq!(r.must("Location"), "https://example.com/x");
}

#[test]
fn expires_variants() {
    let s = server();
    let r = s.get("/emax/az.txt");
    assert_eq!(r.must("Expires"), "Thu, 31 Dec 2037 23:55:55 GMT");
    assert_eq!(r.must("Cache-Control"), "max-age=315360000");
    let r = s.get("/eepoch/az.txt");
    assert_eq!(r.must("Expires"), "Thu, 01 Jan 1970 00:00:01 GMT");
    assert_eq!(r.must("Cache-Control"), "no-cache");
    let r = s.get("/eneg/az.txt");
    assert_eq!(r.must("Cache-Control"), "no-cache");
    let date = parse_http_date(r.must("Date")).unwrap();
    assert_eq!(parse_http_date(r.must("Expires")), Some(date - 1));
    // modified +1h: from the file's mtime
    let r = s.get("/emod/az.txt");
    let mt = mtime(&s.path("html/az.txt"));
    assert_eq!(r.must("Expires"), http_date(mt + 3600));
    let date = parse_http_date(r.must("Date")).unwrap();
    assert_eq!(r.must("Cache-Control"), format!("max-age={}", mt + 3600 - date));
}

#[test]
fn etag_off_and_if_modified_since_before() {
    let s = server();
    let r = s.get("/noetag/az.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ETag"), None);
    assert!(r.header("Last-Modified").is_some());
    let later = http_date(mtime(&s.path("html/az.txt")) + 100);
    // default (exact): a later date is not a match
    assert_eq!(s.get_with("/az.txt", &[&format!("If-Modified-Since: {later}")]).status, 200);
    // before: any date not earlier than mtime matches
    assert_eq!(s.get_with("/imsb/az.txt", &[&format!("If-Modified-Since: {later}")]).status, 304);
}

#[test]
fn range_details() {
    let s = server();
    let etag = nginx_etag(&s.path("html/az.txt"));
    // If-Range: a different validator gives the whole file
    let r = s.get_with("/az.txt", &["Range: bytes=2-3", "If-Range: \"nomatch\""]);
    assert_eq!(status_body(&r), (200, AZ.into()));
    let r = s.get_with("/az.txt", &["Range: bytes=2-3", &format!("If-Range: {etag}")]);
    assert_eq!(status_body(&r), (206, "cd".into()));
    // a unit other than bytes is ignored
    assert_eq!(status_body(&s.get_with("/az.txt", &["Range: items=0-1"])), (200, AZ.into()));
    // start after end
    assert_eq!(s.get_with("/az.txt", &["Range: bytes=5-2"]).status, 416);
    // HEAD with Range: 206 head only
    let mut c = s.connect();
    c.send("HEAD /az.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=2-3\r\n\r\nGET /x.json HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response_to("HEAD");
    assert_eq!(r.status, 206);
    assert_eq!(r.must("Content-Range"), "bytes 2-3/26");
    assert_eq!(c.read_response().text(), "{}\n");
}

#[test]
fn error_page_named_and_multiple_codes() {
    let s = server();
    assert_eq!(status_body(&s.get("/epnamed/zz")), (200, "nf named\n".into()));
    assert_eq!(status_body(&s.get("/multi/zz")), (404, "custom 404\n".into()));
    assert_eq!(status_body(&s.get("/multi/noidx/")), (403, "custom 404\n".into()));
}

#[test]
fn regex_captures_in_alias_root_and_return() {
    let s = builder()
        .http(
            "types { image/png png; }\n\
             server { listen 127.0.0.1:{port}; root html;\n\
               location ~ ^/img/(.+\\.png)$ { alias {prefix}/html/pictures/$1; }\n\
               location ~ ^/u/([a-z]+)/(\\d+)$ { return 200 \"user=$1 id=$2\"; }\n\
               location ~ ^/site/([a-z]+)/ { root {prefix}/sites/$1; }\n\
             }",
        )
        .file("html/pictures/a.png", "PNG-A")
        .file("sites/blue/site/blue/page.html", "blue page")
        .start();
    let r = s.get("/img/a.png");
    assert_eq!((r.status, r.text()), (200, "PNG-A".to_string()), "{}", r.head);
    assert_eq!(r.must("Content-Type"), "image/png");
    assert_eq!(s.get("/img/missing.png").status, 404);
    assert_eq!(s.get("/u/alice/42").text(), "user=alice id=42");
    let r = s.get("/site/blue/page.html");
    assert_eq!((r.status, r.text()), (200, "blue page".to_string()), "{}", r.head);
}

#[test]
fn named_captures_and_server_name_captures() {
    let s = builder()
        .http(
            "server { listen 127.0.0.1:{port} default_server; return 200 \"default\"; }\n\
             server { listen 127.0.0.1:{port};\n\
               server_name ~^(?<sub>[a-z]+)\\.(?P<zone>example|test)\\.com$;\n\
               location ~ ^/u/(?<user>[a-z]+)/(\\d+)$ { return 200 \"user=$user id=$2 sub=$sub zone=$zone\"; }\n\
               location /p/ { return 200 \"prefix sub=$sub one=$1 two=$2\"; }\n\
             }",
        )
        .start();
    let get = |path: &str, host: &str| get_with_host(s.port, path, host);
    // A regex location's captures: numbered and named; the server's named
    // captures stay available.
    assert_eq!(get("/u/alice/42", "blue.example.com"), "user=alice id=42 sub=blue zone=example");
    // A prefix location: $1, $2 are the server_name's.
    assert_eq!(get("/p/x", "red.test.com"), "prefix sub=red one=red two=test");
    assert_eq!(get("/p/x", "other.org"), "default");
}

#[test]
fn named_captures_can_be_used_above_the_regex_that_defines_them() {
    // nginx resolves variable names after reading the whole configuration:
    // a log_format at the top of http may use a capture of a later location.
    let s = builder()
        .http(
            "log_format who '$request_uri who=$who';\n\
             access_log logs/access.log who;\n\
             server { listen 127.0.0.1:{port};\n\
               location /first { return 200 \"who=[$who]\"; }\n\
               location ~ ^/u/(?<who>[a-z]+)$ { return 200 \"$who\"; }\n\
             }",
        )
        .start();
    assert_eq!(s.get("/u/bob").text(), "bob");
    assert_eq!(s.get("/first").text(), "who=[]");
    let log = wait_contains(&s.prefix.join("logs/access.log"), "/first who=", std::time::Duration::from_secs(5));
    assert!(log.contains("/u/bob who=bob\n"), "access log:\n{log}");
    assert!(log.contains("/first who=-\n"), "access log:\n{log}");
}

#[test]
fn map_regex_captures_in_values() {
    let s = builder()
        .http(
            "map $http_host $site {\n\
               default none;\n\
               ~^(?<name>[a-z]+)\\.example\\.com$ $name;\n\
               ~*^www\\.([a-z]+)\\.org$ org-$1;\n\
             }\n\
             server { listen 127.0.0.1:{port}; location / { return 200 \"site=$site\"; } }",
        )
        .start();
    let get = |host: &str| get_with_host(s.port, "/", host);
    assert_eq!(get("blue.example.com"), "site=blue");
    assert_eq!(get("WWW.Foo.org"), "site=org-Foo");
    assert_eq!(get("other.net"), "site=none");
}

/// As in nginx, a map's named captures become variables once the map's
/// own variable has been evaluated in the request.
#[test]
fn map_named_captures_are_variables_after_the_map() {
    let s = builder()
        .http(
            "map $http_host $site {\n\
               default none;\n\
               ~^(?<name>[a-z]+)\\.(?<zone>example|test)\\.com$ found;\n\
             }\n\
             server { listen 127.0.0.1:{port};\n\
               location /after { return 200 \"site=$site name=$name zone=$zone\"; }\n\
             }",
        )
        .start();
    let get = |path: &str, host: &str| get_with_host(s.port, path, host);
    assert_eq!(get("/after", "blue.example.com"), "site=found name=blue zone=example");
    assert_eq!(get("/after", "red.test.com"), "site=found name=red zone=test");
    assert_eq!(get("/after", "other.net"), "site=none name= zone=");
}

/// GET `path` with the given Host on a connection of its own; the body.
fn get_with_host(port: u16, path: &str, host: &str) -> String {
    request(port, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).text()
}
