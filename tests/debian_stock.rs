//! Debian's stock configuration, as the nginx package installs it
//! (`/etc/nginx/nginx.conf`, `sites-available/default`, `mime.types` and
//! whatever `modules-enabled/*.conf` holds on this machine), copied into a
//! temporary prefix with only paths and ports changed. It must pass
//! `-t` and serve the default site, under sluice and under nginx 1.22.1
//! (`SLUICE_TEST_NGINX=1`).

mod common;

use std::fs;
use std::path::Path;

use common::*;

const ETC: &str = "/etc/nginx";

/// The `modules-enabled` file and module of each of Debian 12's
/// `libnginx-mod-*` packages that `nginx-full` and `nginx-extras` pull in,
/// and of the brotli packages that scripts/test-all installs.
const DEBIAN_MODULES: &[(&str, &str)] = &[
    ("10-mod-http-ndk.conf", "ndk_http_module"),
    ("50-mod-http-auth-pam.conf", "ngx_http_auth_pam_module"),
    ("50-mod-http-brotli-filter.conf", "ngx_http_brotli_filter_module"),
    ("50-mod-http-brotli-static.conf", "ngx_http_brotli_static_module"),
    ("50-mod-http-cache-purge.conf", "ngx_http_cache_purge_module"),
    ("50-mod-http-dav-ext.conf", "ngx_http_dav_ext_module"),
    ("50-mod-http-echo.conf", "ngx_http_echo_module"),
    ("50-mod-http-fancyindex.conf", "ngx_http_fancyindex_module"),
    ("50-mod-http-geoip.conf", "ngx_http_geoip_module"),
    ("50-mod-http-geoip2.conf", "ngx_http_geoip2_module"),
    ("50-mod-http-headers-more-filter.conf", "ngx_http_headers_more_filter_module"),
    ("50-mod-http-image-filter.conf", "ngx_http_image_filter_module"),
    ("50-mod-http-lua.conf", "ngx_http_lua_module"),
    ("50-mod-http-perl.conf", "ngx_http_perl_module"),
    ("50-mod-http-subs-filter.conf", "ngx_http_subs_filter_module"),
    ("50-mod-http-uploadprogress.conf", "ngx_http_uploadprogress_module"),
    ("50-mod-http-upstream-fair.conf", "ngx_http_upstream_fair_module"),
    ("50-mod-http-xslt-filter.conf", "ngx_http_xslt_filter_module"),
    ("50-mod-mail.conf", "ngx_mail_module"),
    ("50-mod-nchan.conf", "ngx_nchan_module"),
    ("50-mod-stream.conf", "ngx_stream_module"),
    ("70-mod-stream-geoip.conf", "ngx_stream_geoip_module"),
    ("70-mod-stream-geoip2.conf", "ngx_stream_geoip2_module"),
];

/// The modules of that list sluice has built in (a notice, not a warning).
const BUILT_IN: &[&str] = &[
    "ngx_http_brotli_filter_module",
    "ngx_http_brotli_static_module",
    "ngx_http_zstd_filter_module",
    "ngx_http_zstd_static_module",
    "ngx_http_cache_purge_module",
    "ngx_http_geoip_module",
    "ngx_stream_geoip_module",
    "ngx_http_geoip2_module",
    "ngx_stream_geoip2_module",
    "ngx_http_image_filter_module",
    "ngx_stream_module",
    "ngx_mail_module",
];

fn nginx_mode() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

fn read(p: &str) -> Option<String> {
    fs::read_to_string(p).ok()
}

/// The stock files with paths pointed into the prefix and the listen ports
/// replaced; None when this machine has no Debian nginx package.
fn stock() -> Option<ServerBuilder> {
    let main = read(&format!("{ETC}/nginx.conf"))?;
    let site = read(&format!("{ETC}/sites-available/default"))?;
    let mime = read(&format!("{ETC}/mime.types"))?;
    let paths = |t: &str| {
        t.replace("/etc/nginx", "{prefix}/etc/nginx")
            .replace("/var/log/nginx", "{prefix}/logs")
            .replace("/run/nginx.pid", "{prefix}/logs/nginx.pid")
            .replace("/var/www/html", "{prefix}/html")
            // load_module's relative path is against nginx's own prefix.
            .replace("load_module modules/", "load_module /usr/lib/nginx/modules/")
    };
    let main = paths(&main);
    let site = paths(&site)
        .replace("listen 80 default_server;", "listen {port} default_server;")
        .replace("listen [::]:80 default_server;", "listen [::]:{port} default_server;");
    let index = read("/var/www/html/index.nginx-debian.html")
        .or_else(|| read("/usr/share/nginx/html/index.html"))
        .unwrap_or_else(|| "<html>Welcome to nginx!</html>\n".into());
    let mut b = builder()
        .whole(&main)
        // The stock file daemonizes; the test keeps the server in the
        // foreground from the command line, as a service manager would.
        .arg("-g")
        .arg("daemon off;")
        .conf_file("etc/nginx/sites-enabled/default", &site)
        .conf_file("etc/nginx/mime.types", &mime)
        .file("etc/nginx/conf.d/.keep", "")
        .file("html/index.nginx-debian.html", index);
    // Every module package's modules-enabled line, as on a machine with
    // nginx-full and nginx-extras, whatever this machine has installed.
    // nginx can only start with the ones whose file is here.
    for (file, module) in DEBIAN_MODULES {
        let so = format!("/usr/lib/nginx/modules/{module}.so");
        if nginx_mode() && !Path::new(&so).exists() {
            continue;
        }
        b = b.conf_file(&format!("etc/nginx/modules-enabled/{file}"), &format!("load_module {so};\n"));
    }
    let b = b.file("etc/nginx/modules-enabled/.keep", "");
    Some(b)
}

#[test]
fn stock_config_passes_t_and_serves_the_default_site() {
    let Some(b) = stock() else {
        println!("note: skipped: no Debian nginx configuration in {ETC}");
        return;
    };
    let t = b.prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "-t failed:\n{err}");
    assert!(err.contains("test is successful"), "{err}");
    if !nginx_mode() {
        // Debian's `ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3` warns
        // once; each module sluice lacks warns once, naming it; each
        // built-in one gets a notice.
        let warns: Vec<&str> = err.lines().filter(|l| l.contains("[warn]")).collect();
        let missing: Vec<&str> = DEBIAN_MODULES.iter().map(|(_, m)| *m).filter(|m| !BUILT_IN.contains(m)).collect();
        assert_eq!(warns.len(), 1 + missing.len(), "{err}");
        assert!(warns.iter().any(|w| w.contains("\"ssl_protocols\": TLSv1 TLSv1.1 not offered")), "{err}");
        for m in &missing {
            let w = line_with(&err, &format!("sluice has no module \"{m}\""));
            assert!(w.contains("[warn] load_module \"/usr/lib/nginx/modules/"), "{w}");
            assert!(w.contains("; not loaded, its directives") && w.contains("modules-enabled/"), "{w}");
        }
        let notices = err.lines().filter(|l| l.contains("[notice] load_module")).count();
        assert_eq!(notices, DEBIAN_MODULES.len() - missing.len(), "{err}");
    }
    drop(t);

    let s = b.start();
    let index = fs::read(s.path("html/index.nginx-debian.html")).unwrap();
    let r = s.get("/");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.body, index);
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    let r = s.get("/index.nginx-debian.html");
    assert_eq!((r.status, r.body.len()), (200, index.len()));
    assert_eq!(s.get("/missing").status, 404);
    assert_eq!(s.get("/dir-missing/").status, 404);
    // The IPv6 listener, where the machine has IPv6 loopback.
    let v6 = std::net::TcpStream::connect(("::1", s.port)).is_ok();
    if v6 {
        let r = request_v6(s.port);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    }
    // Workers log after the response is sent, so two workers' lines can
    // land in either order (as with nginx's workers).
    // The IPv6 request's line says ::1, so look for the IPv4 one.
    let lines = s.wait_access_lines(if v6 { 5 } else { 4 });
    let root = lines.iter().any(|l| l.starts_with("127.0.0.1 - - [") && l.contains("\"GET / HTTP/1.1\" 200 "));
    assert!(root, "{lines:?}");
    assert!(Path::new(&s.path("logs/error.log")).exists());
}

fn request_v6(port: u16) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("::1", port)).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `sluice -t` / `nginx -t` with these main-context lines; returns
/// (success, stderr).
fn test_main(main: &str) -> (bool, String) {
    let t = builder().main(main).http("server { listen 127.0.0.1:{port}; }").prepare();
    let out = t.run(&["-t"]);
    (out.status.success(), stderr_of(&out))
}

#[test]
fn load_module_built_in_or_a_warning() {
    if nginx_mode() {
        println!("note: skipped in nginx mode: nginx loads the shared objects themselves");
        return;
    }
    // nginx's own module that sluice lacks: one warning naming it.
    let (ok, err) = test_main("load_module /usr/lib/nginx/modules/ngx_http_xslt_filter_module.so;");
    assert!(ok, "{err}");
    let w = line_with(&err, "load_module");
    assert!(
        w.contains("[warn] load_module \"/usr/lib/nginx/modules/ngx_http_xslt_filter_module.so\": sluice has no module \"ngx_http_xslt_filter_module\" (the XSLT filter, libnginx-mod-http-xslt-filter); not loaded, its directives and variables are refused in "),
        "{w}"
    );
    let (ok, err) = test_main("load_module modules/ngx_foo_module.so;");
    assert!(ok && err.contains("[warn] load_module \"modules/ngx_foo_module.so\": sluice has no module \"ngx_foo_module\"; not loaded, its directives are unknown to sluice in "), "{err}");
    // Built in: accepted with a notice, whether or not the file exists.
    for m in BUILT_IN {
        let (ok, err) = test_main(&format!("load_module modules/{m}.so;"));
        assert!(ok, "{m}: {err}");
        let line = line_with(&err, "load_module");
        assert!(line.contains("[notice]") && line.contains(&format!("{m} is built into sluice")), "{line}");
    }
}

/// `-t` of a configuration that loads `modules` and has `http` as its http
/// block; returns (success, stderr, the config's path).
fn test_loaded(modules: &[&str], http: &str) -> (bool, String, String) {
    let main: String = modules.iter().map(|m| format!("load_module /usr/lib/nginx/modules/{m}.so;\n")).collect();
    let t = builder().main(&main).http(http).prepare();
    let out = t.run(&["-t"]);
    (out.status.success(), stderr_of(&out), t.conf_path().display().to_string())
}

#[test]
fn a_missing_modules_directives_and_variables_are_refused_by_name() {
    if nginx_mode() {
        println!("note: skipped in nginx mode: nginx has these modules");
        return;
    }
    let xslt = "ngx_http_xslt_filter_module";
    let image = "ngx_http_image_filter_module";
    // The builder's main context starts with daemon, pid and error_log:
    // the first load_module is on line 4.
    let at = |conf: &str| format!("(load_module in {conf}:4)");
    // A directive of a loaded module: refused at its line, naming the
    // module and where it was loaded.
    let (ok, err, conf) = test_loaded(&[xslt], "xslt_stylesheet /x.xslt;\nserver { listen 127.0.0.1:{port}; }");
    assert!(!ok, "{err}");
    let want = format!(
        "[emerg] unknown directive \"xslt_stylesheet\": a directive of module \"{xslt}\" (the XSLT filter, libnginx-mod-http-xslt-filter), which sluice does not have {} in {conf}:",
        at(&conf)
    );
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
    assert!(err.contains("test failed"), "{err}");
    // A module sluice has built in (the image filter) loads and works.
    let (ok, err, _) =
        test_loaded(&[image], "server { listen 127.0.0.1:{port}; location /img/ { image_filter resize 100 100; } }");
    assert!(ok, "{err}");
    // Not loaded: nginx's plain message.
    let (ok, err, _) = test_loaded(&[], "xslt_stylesheet /x.xslt;\nserver { listen 127.0.0.1:{port}; }");
    assert!(!ok && err.contains("[emerg] unknown directive \"xslt_stylesheet\" in "), "{err}");
    // A third-party module's directive: sluice cannot tell which loaded
    // module owns it, so it names the candidates.
    let (ok, err, conf) = test_loaded(
        &["ngx_http_headers_more_filter_module"],
        "more_set_headers 'X: y';\nserver { listen 127.0.0.1:{port}; }",
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains(&format!("unknown directive \"more_set_headers\" (perhaps of a module sluice does not have: \"ngx_http_headers_more_filter_module\" {})", at(&conf))),
        "{err}"
    );
}

#[test]
fn process_directives_are_accepted() {
    let (ok, err) = test_main(
        "master_process on;\nworker_shutdown_timeout 10s;\nenv TZ;\nenv SLUICE_X=1;\npcre_jit on;\n\
         timer_resolution 100ms;\nworker_priority 5;\n",
    );
    assert!(ok, "{err}");
    for (line, msg) in [
        ("worker_priority x;", "\"worker_priority\" directive invalid number"),
        ("master_process maybe;", "invalid value \"maybe\" in \"master_process\" directive"),
        ("worker_shutdown_timeout soon;", "invalid value \"soon\""),
        ("pcre_jit on;\npcre_jit off;", "\"pcre_jit\" directive is duplicate"),
    ] {
        let (ok, err) = test_main(line);
        assert!(!ok, "{line}: accepted");
        if std::env::var_os("SLUICE_TEST_NGINX").is_none() {
            assert!(err.contains(msg), "{line}: expected {msg:?} in:\n{err}");
        }
    }
}

#[test]
fn worker_priority_sets_the_workers_nice_value() {
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() {
        println!("note: skipped in nginx mode: sluice's workers are threads");
        return;
    }
    let s = builder().main("worker_priority 5;").http("server { listen 127.0.0.1:{port}; }").start();
    // Answered: a worker thread is running.
    assert!(s.get("/").status > 0);
    let tasks = fs::read_dir(format!("/proc/{}/task", s.serving_pid())).unwrap();
    let mut workers = 0;
    for t in tasks.flatten() {
        let stat = fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        if !stat.contains("(sluice-w") {
            continue;
        }
        // Fields after the ")" of the name: state is field 3, nice 19.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let nice: i32 = rest.split_whitespace().nth(16).and_then(|v| v.parse().ok()).unwrap_or(99);
        assert_eq!(nice, 5, "{stat}");
        workers += 1;
    }
    assert!(workers > 0, "no worker thread found");
}

#[test]
fn worker_shutdown_timeout_closes_what_is_left() {
    use common::origin::{Origin, Reply};
    use std::io::Write;
    use std::time::{Duration, Instant};
    let o = Origin::start(|_| Reply::ok("late\n").after(Duration::from_secs(20)));
    let mut s = builder()
        .main("worker_shutdown_timeout 1s;")
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
            o.port
        ))
        .start();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while o.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(o.count(), 1, "the request did not reach the origin");
    let t = Instant::now();
    s.signal("quit");
    assert!(s.wait_exit(Duration::from_secs(10)).is_some(), "still running 10 s after quit");
    assert!(t.elapsed() < Duration::from_secs(8), "quit took {:?}", t.elapsed());
}
