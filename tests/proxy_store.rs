//! `proxy_store` and `proxy_store_access`: an origin's 200 response kept
//! as a file under `root` (or a path with variables) once it came whole,
//! with the access bits asked and the origin's Last-Modified as its time;
//! nothing stored for other statuses, HEAD, or a body cut short, and no
//! temporary file left behind. With SLUICE_TEST_NGINX=1 the same test runs
//! against Debian's nginx.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::origin::*;
use common::*;

/// The file once it is in place: the response may reach the client
/// just before its store is renamed into place.
fn stored(p: &std::path::Path) -> Vec<u8> {
    for _ in 0..100 {
        if let Ok(b) = std::fs::read(p) {
            return b;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} was not stored", p.display());
}

#[test]
fn stores_whole_200_responses_only() {
    let big = pseudo_random(300 << 10, 5);
    let big2 = big.clone();
    let o = Origin::start(move |r| match r.target().split('?').next().unwrap_or("") {
        "/f/a.txt" | "/f/h.txt" | "/x/n.txt" => {
            Reply::http(200, &["Content-Type: text/plain", "Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT"], "hello")
        }
        "/f/sub/dir/b.txt" => Reply::ok("deep"),
        "/f/big" => Reply::http(200, &[], &big2),
        "/f/missing" => Reply::http(404, &[], "nope"),
        "/f/empty" => Reply::http(200, &[], ""),
        // Says 100 bytes, sends 5, closes: cut short.
        "/f/short" => Reply::raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello").close(),
        _ => Reply::http(404, &[], ""),
    });
    let s = builder()
        .file("mirror/.keep", "")
        .file("named/.keep", "")
        .file("ptemp/.keep", "")
        .http(&sub(
            r#"
        proxy_temp_path {prefix}/ptemp;
        server {
            listen 127.0.0.1:{port};
            root {prefix}/mirror;
            location /f/ {
                proxy_pass http://127.0.0.1:%O%;
                proxy_store on;
                proxy_store_access user:rw group:rw all:r;
            }
            location /x/ {
                proxy_pass http://127.0.0.1:%O%;
                proxy_store {prefix}/named/$arg_as;
            }
        }"#,
            &[("%O%", o.port)],
        ))
        .start();
    for d in ["mirror", "named", "ptemp"] {
        let st = std::process::Command::new("chmod").args(["-R", "a+rwX"]).arg(s.path(d)).status().unwrap();
        assert!(st.success());
    }
    let mut checks = Checks::new();
    checks.run("a 200 is stored under root, with its access and time", || {
        let r = s.get("/f/a.txt");
        assert_eq!((r.status, r.text().as_str()), (200, "hello"));
        let p = s.path("mirror/f/a.txt");
        assert_eq!(stored(&p), b"hello");
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o664);
        assert_eq!(m.mtime(), parse_http_date("Mon, 28 Sep 1970 06:00:00 GMT").unwrap());
    });
    checks.run("the directories it needs are made", || {
        assert_eq!(s.get("/f/sub/dir/b.txt").status, 200);
        assert_eq!(stored(&s.path("mirror/f/sub/dir/b.txt")), b"deep");
    });
    checks.run("a body larger than the buffers is stored whole", || {
        let r = s.get("/f/big");
        assert_eq!(r.body.len(), big.len());
        assert!(stored(&s.path("mirror/f/big")) == big);
    });
    checks.run("an empty 200 is stored as an empty file", || {
        assert_eq!(s.get("/f/empty").status, 200);
        assert_eq!(stored(&s.path("mirror/f/empty")).len(), 0);
    });
    checks.run("a path with variables", || {
        assert_eq!(s.get("/x/n.txt?as=given.txt").status, 200);
        assert_eq!(stored(&s.path("named/given.txt")), b"hello");
    });
    checks.run("not a 404, not a HEAD, not a body cut short", || {
        assert_eq!(s.get("/f/missing").status, 404);
        let head = req(&s, "HEAD", "/f/h.txt", &[], b"");
        assert_eq!(head.status, 200);
        // The client gets the 5 bytes and the close; only the file matters.
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        std::io::Write::write_all(&mut c, b"GET /f/short HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = std::io::Read::read_to_end(&mut c, &mut Vec::new());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!s.path("mirror/f/missing").exists());
        assert!(!s.path("mirror/f/h.txt").exists());
        assert!(!s.path("mirror/f/short").exists());
    });
    checks.run("no temporary file is left", || {
        let left: Vec<_> = std::fs::read_dir(s.path("ptemp"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".keep")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    });
    checks.finish();
}
