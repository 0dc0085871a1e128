//! Directory requests: autoindex beyond the default page
//! (`autoindex_format json|jsonp|xml`, `autoindex_exact_size off`, the
//! jsonp callback check, a POST to a listed directory), and the index
//! module's answers and error-log lines for a directory that is missing,
//! and `random_index`. The byte-exact layouts are unit-tested in
//! src/http/handler/autoindex/ against nginx's output; here a real server
//! answers real requests. With SLUICE_TEST_NGINX=1 the same checks run
//! against Debian's nginx.

mod common;

use std::time::{Duration, SystemTime};

use common::*;

/// 2026-11-22 14:06:00 UTC.
const T: u64 = 1_795_356_360;

fn server() -> TestServer {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root html;
                location /d/ { autoindex on; autoindex_exact_size off; }
                location /j/ { alias html/d/; autoindex on; autoindex_format json; }
                location /p/ { alias html/d/; autoindex on; autoindex_format jsonp; }
                location /x/ { alias html/d/; autoindex on; autoindex_format xml; }
            }"#,
        )
        .file("html/d/q\"uo\\te<&>.txt", "abc")
        .file("html/d/big.bin", vec![0u8; 20_000])
        .file("html/d/sub/x", "x")
        .file("html/d/.hidden", "h")
        .start();
    for f in ["q\"uo\\te<&>.txt", "big.bin", "sub", ".hidden"] {
        let file = std::fs::File::open(s.path(&format!("html/d/{f}"))).expect("open");
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(T)).expect("set mtime");
    }
    s
}

const GMT: &str = "Sun, 22 Nov 2026 14:06:00 GMT";

#[test]
fn json_lists_names_types_times_and_sizes() {
    let s = server();
    let r = s.get("/j/");
    assert_eq!((r.status, r.must("Content-Type")), (200, "application/json"));
    let want = format!(
        "[\r\n{{ \"name\":\"sub\", \"type\":\"directory\", \"mtime\":\"{GMT}\" }},\r\n\
         {{ \"name\":\"big.bin\", \"type\":\"file\", \"mtime\":\"{GMT}\", \"size\":20000 }},\r\n\
         {{ \"name\":\"q\\\"uo\\\\te<&>.txt\", \"type\":\"file\", \"mtime\":\"{GMT}\", \"size\":3 }}\r\n]"
    );
    assert_eq!(r.text(), want);
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("valid JSON");
    assert_eq!(v[2]["name"], "q\"uo\\te<&>.txt");
}

#[test]
fn jsonp_wraps_the_json_in_the_callback_and_checks_its_name() {
    let mut s = server();
    let json = s.get("/j/").text();
    let r = s.get("/p/?callback=my.cb_1");
    assert_eq!((r.status, r.must("Content-Type")), (200, "application/javascript"));
    assert_eq!(r.text(), format!("/* callback */\r\nmy.cb_1({json});"));
    // No callback: plain JSON.
    let r = s.get("/p/");
    assert_eq!((r.status, r.must("Content-Type"), r.text()), (200, "application/json", json.clone()));
    for bad in ["x-y", "%41", &"a".repeat(129)] {
        assert_eq!(s.get(&format!("/p/?callback={bad}")).status, 400, "callback={bad}");
    }
    assert!(s.quit().success());
    let log = s.error_log();
    assert!(log.contains("[info]") && log.contains("client sent invalid callback name: \"x-y\""), "{log}");
    assert!(log.contains("client sent too long callback name: \"aaaa"), "{log}");
}

#[test]
fn xml_lists_directories_and_files_with_utc_times() {
    let s = server();
    let r = s.get("/x/");
    assert_eq!((r.status, r.must("Content-Type")), (200, "text/xml; charset=utf-8"));
    assert_eq!(
        r.text(),
        "<?xml version=\"1.0\"?>\r\n<list>\r\n\
         <directory mtime=\"2026-11-22T14:06:00Z\">sub</directory>\r\n\
         <file mtime=\"2026-11-22T14:06:00Z\" size=\"20000\">big.bin</file>\r\n\
         <file mtime=\"2026-11-22T14:06:00Z\" size=\"3\">q&quot;uo\\te&lt;&amp;&gt;.txt</file>\r\n\
         </list>\r\n"
    );
}

#[test]
fn html_with_rounded_sizes_and_a_post_to_a_listed_directory() {
    let mut s = server();
    let r = s.get("/d/");
    assert_eq!((r.status, r.must("Content-Type")), (200, "text/html"));
    let t = r.text();
    let pad = |shown: &str| " ".repeat(50 - shown.len());
    assert!(t.contains(&format!("<a href=\"sub/\">sub/</a>{} 22-Nov-2026 14:06       -\r\n", pad("sub/"))), "{t}");
    assert!(
        t.contains(&format!("<a href=\"big.bin\">big.bin</a>{} 22-Nov-2026 14:06     20K\r\n", pad("big.bin"))),
        "{t}"
    );
    assert!(t.contains(" 22-Nov-2026 14:06       3\r\n"), "{t}");
    // nginx's autoindex declines a POST: the directory is forbidden.
    let r = request(s.port, "POST /d/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 403);
    let r = request(s.port, "DELETE /d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 405);
    assert!(s.quit().success());
    assert!(s.error_log().contains("is forbidden"), "{}", s.error_log());
}

/// nginx's index module tests the directory at the first missing index
/// file and reports a missing one under that file's name.
#[test]
fn a_missing_directory_is_reported_under_its_first_index_file() {
    let mut s = builder()
        .http(
            "access_log off;\n\
             server { listen 127.0.0.1:{port}; root html;\n\
               location /q/ { log_not_found off; }\n\
               location /two/ { index a.html b.html; } }",
        )
        .file("html/file.txt", "f")
        .file("html/empty/.keep", "")
        .start();
    for (path, status) in [("/missing/", 404), ("/file.txt/", 404), ("/empty/", 403), ("/q/", 404), ("/two/", 404)] {
        assert_eq!(s.get(path).status, status, "{path}");
    }
    assert!(s.quit().success());
    let log = s.error_log();
    let html = s.path("html").display().to_string();
    for (line, request) in [
        (format!("\"{html}/missing/index.html\" is not found (2: No such file or directory)"), "/missing/"),
        (format!("\"{html}/file.txt/index.html\" is not found (20: Not a directory)"), "/file.txt/"),
        (format!("directory index of \"{html}/empty/\" is forbidden"), "/empty/"),
        (format!("\"{html}/two/a.html\" is not found (2: No such file or directory)"), "/two/"),
    ] {
        let l = line_with(&log, &line);
        assert!(l.contains("[error]") && l.contains(&format!("request: \"GET {request} HTTP/1.1\"")), "{l}");
    }
    assert!(!log.contains("GET /q/"), "log_not_found off: {log}");
}

/// `random_index on`: a random regular file of the directory (no dotfile,
/// no subdirectory, a symbolic link by its target), the request's
/// arguments kept; nothing to pick leaves the directory to the index
/// module; a missing directory is nginx's `opendir()` 404.
#[test]
fn random_index_picks_a_file_of_the_directory() {
    let s = builder()
        .http(
            "server { listen 127.0.0.1:{port}; root html;\n\
               location /r/ { random_index on; }\n\
               location /e/ { random_index on; }\n\
               location /lnk/ { random_index on; }\n\
               location /nope/ { random_index on; }\n\
               location = /r/a.txt { return 200 \"a $args\\n\"; }\n}",
        )
        .file("html/r/a.txt", "unused")
        .file("html/r/b.txt", "b\n")
        .file("html/r/.hidden", "hidden\n")
        .file("html/r/d/x", "in a subdirectory\n")
        .file("html/e/.dot", "x\n")
        .file("html/e/sub/f", "x\n")
        .start();
    std::fs::create_dir_all(s.path("html/lnk")).expect("dir");
    std::os::unix::fs::symlink("/nonexistent-target", s.path("html/lnk/dangling")).expect("link");
    std::os::unix::fs::symlink(s.path("html/r/b.txt"), s.path("html/lnk/good")).expect("link");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let r = s.get("/r/?k=v");
        assert_eq!(r.status, 200);
        seen.insert(r.text());
    }
    let want: std::collections::BTreeSet<String> = ["a k=v\n".to_string(), "b\n".to_string()].into();
    assert_eq!(seen, want);
    // Only a dotfile and a subdirectory: the index module, then 403.
    assert_eq!(s.get("/e/").status, 403);
    assert_eq!(s.get("/lnk/").text(), "b\n");
    assert_eq!(s.get("/nope/").status, 404);
    let log = s.wait_error_log("opendir()");
    let root = s.path("html").display().to_string();
    assert!(log.contains(&format!("opendir() \"{root}/nope\" failed (2: No such file or directory)")), "{log}");
}
