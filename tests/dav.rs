//! WebDAV (`dav_methods`, `dav_access`, `create_full_put_path`,
//! `min_delete_depth`): PUT, DELETE, MKCOL, COPY and MOVE with curl as
//! the client, asserting the statuses and headers nginx gives and what
//! reached the disk. With SLUICE_TEST_NGINX=1 the same tests run against
//! Debian's nginx.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::*;

const DAV: &str = "dav_methods PUT DELETE MKCOL COPY MOVE;";

fn server() -> TestServer {
    let s = builder()
        .file("html/.keep", "")
        .http(&format!(
            "client_body_temp_path {{prefix}}/body_temp;
            client_max_body_size 10m;
            server {{
                listen 127.0.0.1:{{port}};
                root html;
                location / {{ {DAV} dav_access group:rw all:r; create_full_put_path on; }}
                location /strict/ {{ {DAV} }}
                location /deep/ {{ dav_methods DELETE; min_delete_depth 4; }}
                location /ro/ {{ }}
                location /small/ {{ {DAV} client_max_body_size 10; }}
            }}"
        ))
        .start();
    open_up(&s);
    s
}

/// The workers run as an unprivileged user (nginx's and sluice's default
/// under root): the tree the tests prepare must be theirs to change.
fn open_up(s: &TestServer) {
    let st = std::process::Command::new("chmod").args(["-R", "a+rwX"]).arg(s.path("html")).status().unwrap();
    assert!(st.success());
}

/// `METHOD path` with `headers` and `body`: the response.
fn call(s: &TestServer, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Response {
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let mut c = s.connect();
    c.send(format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    c.send(body);
    c.read_response_to(method)
}

#[test]
fn put_creates_replaces_and_writes_through_a_temp_file() {
    let s = server();
    let big = pseudo_random(3 << 20, 11);
    let mut checks = Checks::new();
    checks.run("PUT of a new file: 201, Location, the bytes on disk, dav_access's mode", || {
        let r = call(&s, "PUT", "/a/b/new%20file.bin", &[], &big);
        assert_eq!(r.status, 201, "{}", r.head);
        assert_eq!(r.must("Content-Length"), "0");
        assert_eq!(r.must("Location"), format!("http://localhost:{}/a/b/new%20file.bin", s.port));
        let p = s.path("html/a/b/new file.bin");
        assert!(std::fs::read(&p).unwrap() == big, "the file's bytes");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o664);
    });
    checks.run("PUT over it: 204, no Content-Length, replaced", || {
        let r = call(&s, "PUT", "/a/b/new%20file.bin", &["Date: Sun, 06 Nov 1994 08:49:37 GMT"], b"second");
        assert_eq!(r.status, 204, "{}", r.head);
        assert_eq!(r.header("Content-Length"), None);
        let p = s.path("html/a/b/new file.bin");
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        assert_eq!(std::fs::metadata(&p).unwrap().mtime(), 784111777, "the request's Date is the file's time");
    });
    checks.run("an empty PUT makes an empty file", || {
        assert_eq!(call(&s, "PUT", "/empty", &[], b"").status, 201);
        assert_eq!(std::fs::read(s.path("html/empty")).unwrap(), b"");
    });
    checks.run("PUT through curl with a chunked body", || {
        let file = s.path("upload.src");
        std::fs::write(&file, b"chunked body\n").unwrap();
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-T",
            file.to_str().unwrap(),
            "-H",
            "Transfer-Encoding: chunked",
            &s.url("/chunked.txt"),
        ]);
        assert_eq!(out.text(), "201");
        assert_eq!(std::fs::read(s.path("html/chunked.txt")).unwrap(), b"chunked body\n");
    });
    checks.run("no temporary file is left", || {
        let left: Vec<_> = std::fs::read_dir(s.path("body_temp")).map(|d| d.flatten().collect()).unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    });
    checks.run("PUT to a collection: 409", || assert_eq!(call(&s, "PUT", "/a/", &[], b"x").status, 409));
    checks.run("PUT onto a directory: 409", || assert_eq!(call(&s, "PUT", "/a/b", &[], b"x").status, 409));
    checks.run("PUT with Content-Range: 501", || {
        assert_eq!(call(&s, "PUT", "/r", &["Content-Range: bytes 0-0/1"], b"x").status, 501);
    });
    checks.run("without create_full_put_path a missing directory is a 500", || {
        assert_eq!(call(&s, "PUT", "/strict/x/y", &[], b"x").status, 500);
        assert!(!s.path("html/strict/x").exists());
        assert!(s.wait_error_log("rename()").contains("failed (2: No such file or directory)"));
    });
    checks.run("PUT where dav is off: 405", || assert_eq!(call(&s, "PUT", "/ro/x", &[], b"x").status, 405));
    checks.run("client_max_body_size: 413, nothing written", || {
        assert_eq!(call(&s, "PUT", "/small/x", &[], b"more than ten bytes").status, 413);
        assert!(!s.path("html/small/x").exists());
    });
    checks.finish();
}

#[test]
fn mkcol_delete_and_their_errors() {
    let s = server();
    let mut checks = Checks::new();
    checks.run("MKCOL: 201 with Location, a directory", || {
        let r = call(&s, "MKCOL", "/col/", &[], b"");
        assert_eq!(r.status, 201, "{}", r.head);
        assert_eq!(r.must("Location"), format!("http://localhost:{}/col/", s.port));
        assert!(s.path("html/col").is_dir());
    });
    checks.run("MKCOL again: 405", || assert_eq!(call(&s, "MKCOL", "/col/", &[], b"").status, 405));
    checks.run("MKCOL without the slash: 409", || assert_eq!(call(&s, "MKCOL", "/col2", &[], b"").status, 409));
    checks
        .run("MKCOL under a missing parent: 409", || assert_eq!(call(&s, "MKCOL", "/none/col/", &[], b"").status, 409));
    checks.run("MKCOL with a body: 415", || assert_eq!(call(&s, "MKCOL", "/c3/", &[], b"x").status, 415));
    std::fs::create_dir_all(s.path("html/col/sub/deeper")).unwrap();
    std::fs::write(s.path("html/col/sub/deeper/f"), "f").unwrap();
    std::fs::write(s.path("html/file"), "f").unwrap();
    open_up(&s);
    checks.run("DELETE of a directory without the slash: 409", || {
        assert_eq!(call(&s, "DELETE", "/col", &[], b"").status, 409);
        assert!(s.path("html/col").exists());
    });
    checks.run("DELETE of a directory with Depth 0: 400", || {
        assert_eq!(call(&s, "DELETE", "/col/", &["Depth: 0"], b"").status, 400);
    });
    checks.run("DELETE of a tree: 204, gone", || {
        let r = call(&s, "DELETE", "/col/", &[], b"");
        assert_eq!(r.status, 204);
        assert_eq!(r.header("Content-Length"), None);
        assert!(!s.path("html/col").exists());
    });
    checks.run("DELETE of a file with Depth 1: 400", || {
        assert_eq!(call(&s, "DELETE", "/file", &["Depth: 1"], b"").status, 400);
    });
    checks.run("DELETE of a file", || {
        assert_eq!(call(&s, "DELETE", "/file", &[], b"").status, 204);
        assert!(!s.path("html/file").exists());
    });
    checks.run("DELETE of nothing: 404", || assert_eq!(call(&s, "DELETE", "/file", &[], b"").status, 404));
    checks.run("DELETE with a body: 415", || assert_eq!(call(&s, "DELETE", "/x", &[], b"x").status, 415));
    std::fs::create_dir_all(s.path("html/deep/a/b")).unwrap();
    std::fs::write(s.path("html/deep/a/b/f"), "f").unwrap();
    std::fs::write(s.path("html/deep/a/g"), "g").unwrap();
    open_up(&s);
    checks.run("min_delete_depth 4: /deep/a/g is too shallow", || {
        assert_eq!(call(&s, "DELETE", "/deep/a/g", &[], b"").status, 409);
        assert!(s.path("html/deep/a/g").exists());
        assert!(s.wait_error_log("insufficient URI depth").contains("insufficient URI depth:3 to DELETE"));
    });
    checks.run("min_delete_depth 4: /deep/a/b/f may go", || {
        assert_eq!(call(&s, "DELETE", "/deep/a/b/f", &[], b"").status, 204);
    });
    checks.finish();
}

#[test]
fn copy_and_move_with_destination_depth_and_overwrite() {
    let s = server();
    std::fs::create_dir_all(s.path("html/src/in")).unwrap();
    std::fs::write(s.path("html/src/in/f"), "tree file").unwrap();
    std::fs::write(s.path("html/one"), "one").unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options().write(true).open(s.path("html/one")).unwrap().set_modified(old).unwrap();
    open_up(&s);
    let dest = |p: &str| format!("Destination: http://localhost:{}{p}", s.port);
    let mut checks = Checks::new();
    checks.run("COPY of a file: 204, same bytes and time", || {
        let r = call(&s, "COPY", "/one", &[&dest("/two")], b"");
        assert_eq!(r.status, 204, "{}", r.head);
        assert_eq!(std::fs::read(s.path("html/two")).unwrap(), b"one");
        assert_eq!(std::fs::metadata(s.path("html/two")).unwrap().mtime(), 1_000_000_000);
    });
    checks.run("COPY onto it with Overwrite: F: 412", || {
        assert_eq!(call(&s, "COPY", "/one", &[&dest("/two"), "Overwrite: F"], b"").status, 412);
    });
    checks.run("a path as Destination", || {
        assert_eq!(call(&s, "COPY", "/one", &["Destination: /three"], b"").status, 204);
        assert!(s.path("html/three").exists());
    });
    checks.run("COPY of a tree: 201, copied", || {
        let r = call(&s, "COPY", "/src/", &[&dest("/copy/")], b"");
        assert_eq!(r.status, 201, "{}", r.head);
        assert_eq!(r.header("Location"), None);
        assert_eq!(std::fs::read(s.path("html/copy/in/f")).unwrap(), b"tree file");
        assert!(s.path("html/src/in/f").exists());
    });
    checks.run("MOVE of a tree: 201, moved", || {
        assert_eq!(call(&s, "MOVE", "/copy/", &[&dest("/moved/")], b"").status, 201);
        assert!(!s.path("html/copy").exists());
        assert_eq!(std::fs::read(s.path("html/moved/in/f")).unwrap(), b"tree file");
    });
    checks.run("MOVE over an existing tree replaces it", || {
        assert_eq!(call(&s, "MOVE", "/moved/", &[&dest("/src/")], b"").status, 201);
        assert!(!s.path("html/moved").exists());
        assert!(s.path("html/src/in/f").exists());
    });
    checks.run("MOVE of a file into missing directories: 204", || {
        assert_eq!(call(&s, "MOVE", "/three", &[&dest("/x/y/three")], b"").status, 204);
        assert!(!s.path("html/three").exists());
        assert_eq!(std::fs::read(s.path("html/x/y/three")).unwrap(), b"one");
    });
    checks.run("no Destination: 400", || assert_eq!(call(&s, "COPY", "/one", &[], b"").status, 400));
    checks.run("another host: 400", || {
        assert_eq!(call(&s, "COPY", "/one", &["Destination: http://elsewhere/x"], b"").status, 400);
        assert!(s.wait_error_log("different repository").contains("is handled by different repository"));
    });
    checks.run("https Destination over http: 400", || {
        assert_eq!(call(&s, "COPY", "/one", &["Destination: https://localhost/x"], b"").status, 400);
    });
    checks.run("an unsafe Destination: 400", || {
        assert_eq!(call(&s, "COPY", "/one", &["Destination: /a/../../etc"], b"").status, 400);
    });
    checks.run("collection to non-collection: 409", || {
        assert_eq!(call(&s, "COPY", "/src/", &[&dest("/file")], b"").status, 409);
    });
    checks.run("a directory copied without the slash: 409", || {
        assert_eq!(call(&s, "COPY", "/one", &[&dest("/src")], b"").status, 409);
    });
    checks.run("Depth 1 on COPY, Depth 0 on MOVE: 400", || {
        assert_eq!(call(&s, "COPY", "/src/", &[&dest("/d1/"), "Depth: 1"], b"").status, 400);
        assert_eq!(call(&s, "MOVE", "/src/", &[&dest("/d1/"), "Depth: 0"], b"").status, 400);
    });
    checks.run("an invalid Overwrite: 400", || {
        assert_eq!(call(&s, "COPY", "/one", &[&dest("/four"), "Overwrite: yes"], b"").status, 400);
    });
    checks.run("COPY of nothing: 404", || assert_eq!(call(&s, "COPY", "/none", &[&dest("/five")], b"").status, 404));
    checks.finish();
}

#[test]
fn bad_dav_directives_are_refused() {
    assert_refused("dav_methods GET;", "invalid value \"GET\"");
    assert_refused("dav_access user:x;", "invalid value \"user:x\"");
    assert_refused("dav_access other:rw;", "invalid value \"other:rw\"");
}
