//! Command line and configuration loading: `-t`, `-T`, `-g`, `-v`, `-V`,
//! `-s`, configuration errors worded like nginx's, start-up failures, the
//! Tengine benchmark config and the no-argument default.

mod common;

use std::fs;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A prefix with this whole config written, no server started.
fn prefix_with(conf: &str) -> TestServer {
    builder().whole(conf).prepare()
}

fn conf_abs(s: &TestServer) -> String {
    s.conf_path().display().to_string()
}

/// Runs `-t` and checks it failed with exactly nginx's two lines.
fn assert_test_fails(conf: &str, emerg: &str, line: u32) {
    let p = prog();
    let s = prefix_with(conf);
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    let abs = conf_abs(&s);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr:\n{err}");
    let emerg = emerg.replace("PREFIX", &s.prefix.display().to_string());
    let want = format!("{p}: [emerg] {emerg} in {abs}:{line}\n");
    assert!(err.contains(&want), "want {want:?} in stderr:\n{err}");
    assert!(err.ends_with(&format!("{p}: configuration file {abs} test failed\n")), "stderr:\n{err}");
    assert!(!err.contains("test is successful"), "stderr:\n{err}");
    assert!(out.stdout.is_empty(), "stdout: {}", stdout_of(&out));
}

#[test]
fn test_ok_prints_nginx_lines() {
    let p = prog();
    let s = builder().http("server { listen 127.0.0.1:{port}; }").prepare();
    let out = s.run(&["-t"]);
    let abs = conf_abs(&s);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        format!("{p}: the configuration file {abs} syntax is ok\n{p}: configuration file {abs} test is successful\n")
    );
    assert!(out.stdout.is_empty());
    // -t does not start anything: the port stays free.
    assert!(!port_accepts(s.port));
    // -q suppresses the success lines.
    let out = s.run(&["-t", "-q"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr_of(&out), "");
}

#[test]
fn unknown_directive() {
    assert_test_fails("events {}\nhttp {\n    foo bar;\n}\n", "unknown directive \"foo\"", 3);
}

#[test]
fn duplicate_listens() {
    let conf =
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:18555;\n    listen 127.0.0.1:18555 reuseport;\n  }\n}\n";
    assert_test_fails(conf, "a duplicate listen 127.0.0.1:18555", 5);
    let conf = "events {}\nhttp {\n  server { listen 127.0.0.1:18555 backlog=10; }\n  server { listen 127.0.0.1:18555 backlog=20; }\n}\n";
    assert_test_fails(conf, "duplicate listen options for 127.0.0.1:18555", 4);
}

#[test]
fn directive_not_allowed_here() {
    assert_test_fails("events {}\n\nlisten 80;\nhttp {}\n", "\"listen\" directive is not allowed here", 3);
    assert_test_fails(
        "events {}\nhttp {\n  server {\n    worker_processes 2;\n  }\n}\n",
        "\"worker_processes\" directive is not allowed here",
        4,
    );
}

#[test]
fn invalid_number_of_arguments() {
    assert_test_fails(
        "events {}\nhttp {\n  server {\n    root;\n  }\n}\n",
        "invalid number of arguments in \"root\" directive",
        4,
    );
    assert_test_fails(
        "events {}\nhttp {\n  server {\n    root a b;\n  }\n}\n",
        "invalid number of arguments in \"root\" directive",
        4,
    );
}

#[test]
fn invalid_flag_value() {
    assert_test_fails(
        "events {}\nhttp {\n  sendfile maybe;\n}\n",
        "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\"",
        3,
    );
}

#[test]
fn missing_events_section() {
    let p = prog();
    let s = prefix_with("http {\n}\n");
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    let abs = conf_abs(&s);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(err.contains(&format!("{p}: [emerg] no \"events\" section in configuration\n")), "stderr:\n{err}");
    assert!(err.ends_with(&format!("{p}: configuration file {abs} test failed\n")), "stderr:\n{err}");
}

#[test]
fn listen_ssl_without_certificate_refused() {
    let s = prefix_with("events {}\nhttp {\n  server {\n    listen 127.0.0.1:8443 ssl;\n  }\n}\n");
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    let line = line_with(&err, "[emerg]");
    assert!(
        line.contains("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"),
        "unclear message: {line}"
    );
    // nginx names the line of the server block.
    assert!(line.ends_with(&format!(" in {}:3", conf_abs(&s))), "no location: {line}");
}

#[test]
fn include_glob_and_dump() {
    let s = builder()
        .whole("events {}\nhttp {\n    include sites/*.conf;\n}\n")
        .conf_file("conf/sites/a.conf", "server { listen 127.0.0.1:{port0}; return 200 a; }\n")
        .conf_file("conf/sites/b.conf", "server { listen 127.0.0.1:{port1}; return 200 b; }\n")
        .conf_file("conf/sites/ignored.txt", "this is not a config\n")
        .ports(2)
        .prepare();
    let abs = conf_abs(&s);
    let a = s.path("conf/sites/a.conf").display().to_string();
    let b = s.path("conf/sites/b.conf").display().to_string();

    let out = s.run(&["-t"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr_of(&out));

    let out = s.run(&["-T"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr_of(&out));
    assert!(stderr_of(&out).contains("test is successful"));
    let dump = stdout_of(&out);
    let want = format!(
        "# configuration file {abs}:\nevents {{}}\nhttp {{\n    include sites/*.conf;\n}}\n\n\
         # configuration file {a}:\nserver {{ listen 127.0.0.1:{p0}; return 200 a; }}\n\n\
         # configuration file {b}:\nserver {{ listen 127.0.0.1:{p1}; return 200 b; }}\n\n",
        p0 = s.ports[0],
        p1 = s.ports[1]
    );
    assert_eq!(dump, want);

    // And the included servers really serve.
    drop(s);
    let s = builder()
        .http("include sites/*.conf;")
        .conf_file("conf/sites/a.conf", "server { listen 127.0.0.1:{port0}; return 200 a; }\n")
        .conf_file("conf/sites/b.conf", "server { listen 127.0.0.1:{port1}; return 200 b; }\n")
        .conf_file("conf/sites/ignored.txt", "this is not a config\n")
        .ports(2)
        .start();
    assert_eq!(request(s.ports[0], "GET / HTTP/1.0\r\n\r\n").text(), "a");
    assert_eq!(request(s.ports[1], "GET / HTTP/1.0\r\n\r\n").text(), "b");
}

#[test]
fn include_error_names_included_file() {
    let p = prog();
    let s = builder()
        .whole("events {}\nhttp {\n    include sites/*.conf;\n}\n")
        .conf_file("conf/sites/a.conf", "server {\n    bogus_directive 1;\n}\n")
        .prepare();
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1));
    let inc = s.path("conf/sites/a.conf").display().to_string();
    assert!(err.contains(&format!("{p}: [emerg] unknown directive \"bogus_directive\" in {inc}:2\n")), "{err}");
}

#[test]
fn globals_from_command_line() {
    let p = prog();
    // -g adds main directives...
    let s = prefix_with("events {}\n");
    let out = s.run(&["-t", "-g", "worker_processes 2;"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr_of(&out));
    // ...and one that the file repeats is a duplicate, reported at the
    // file's line, as nginx does.
    let s = prefix_with("worker_rlimit_nofile 1024;\ndaemon off;\nevents {}\n");
    let out = s.run(&["-t", "-g", "daemon off;"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{p}: [emerg] \"daemon\" directive is duplicate in {}:2\n", conf_abs(&s))), "{err}");
}

#[test]
fn globals_daemon_off_runs_in_foreground() {
    // The config has no daemon directive; `-g "daemon off;"` keeps the
    // process in the foreground, so the child we spawned is the server.
    let mut s = builder()
        .whole(
            "pid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
             http { server { listen 127.0.0.1:{port}; return 200 fg; } }\n",
        )
        .arg("-g")
        .arg("daemon off;")
        .start();
    assert_eq!(request(s.port, "GET / HTTP/1.0\r\n\r\n").text(), "fg");
    let pid: u32 = read_lossy(&s.path("logs/sluice.pid")).trim().parse().unwrap();
    assert_eq!(pid, s.pid(), "pid file names the foreground process");
    assert!(s.is_running());
    s.kill("TERM");
    assert!(s.wait_exit(Duration::from_secs(10)).expect("did not exit on SIGTERM").success());
}

#[test]
fn version_flags() {
    let dir = temp_dir("ver");
    let out = sluice(&["-v"], &dir);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr_of(&out), "sluice version: sluice/0.1.0\nnginx version: nginx/1.26.3\n");
    let out = sluice(&["-V"], &dir);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr_of(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines[0], "sluice version: sluice/0.1.0", "{err}");
    assert_eq!(lines[1], "nginx version: nginx/1.26.3", "{err}");
    assert!(lines[2].starts_with("built by rustc "), "{err}");
    assert!(lines[3].starts_with("built with OpenSSL 1.1.1 (compatible; AWS-LC"), "{err}");
    assert_eq!(lines[4], "TLS SNI support enabled", "{err}");
    let args = lines[5].strip_prefix("configure arguments: ").unwrap_or_else(|| panic!("{err}"));
    let args: Vec<&str> = args.split(' ').collect();
    // Modules sluice has, named with nginx's flags; default modules it
    // lacks, named as left out; nothing it lacks as present.
    for want in [
        "--with-http_ssl_module",
        "--with-http_v2_module",
        "--with-http_v3_module",
        "--with-http_realip_module",
        "--with-http_sub_module",
        "--with-http_auth_request_module",
        "--with-http_gzip_static_module",
        "--with-http_secure_link_module",
        "--with-http_stub_status_module",
        // The stream family and the stream modules it has.
        "--with-mail",
        "--with-mail_ssl_module",
        "--with-stream",
        "--with-stream_ssl_module",
        "--with-stream_realip_module",
        "--with-stream_ssl_preread_module",
        "--with-http_geoip_module",
        "--with-stream_geoip_module",
    ] {
        assert!(args.contains(&want), "{want} missing: {err}");
    }
    for present in ["--with-http_slice_module", "--with-http_dav_module", "--with-http_gunzip_module"] {
        assert!(args.contains(&present), "{present} missing: {err}");
    }
    for lacking in [
        "--without-stream_map_module",
        "--without-stream_pass_module",
        "--without-stream_upstream_hash_module",
        "--without-http_ssi_module",
        "--without-http_grpc_module",
    ] {
        assert!(!args.contains(&lacking), "{lacking} named: {err}");
    }
    // A default module sluice lacks is named as nginx's configure would.
    assert!(args.contains(&"--without-http_browser_module"), "--without-http_browser_module missing: {err}");
    // memcached_pass and userid are there: built in, as in nginx.
    assert!(!args.contains(&"--without-http_memcached_module"), "{err}");
    assert!(!args.contains(&"--without-http_userid_module"), "{err}");
    // grpc_pass is there: the module is built in.
    assert!(!args.contains(&"--without-http_grpc_module"), "{err}");
    assert!(!args.iter().any(|a| a.starts_with("--without-http_proxy")), "{err}");
    assert_eq!(lines.len(), 6, "{err}");
    let _ = fs::remove_dir_all(dir);
}

/// `-e FILE`: nginx's early error log, and the main level's log when the
/// configuration names none (nginx's test suite starts every server with
/// `-e error.log`).
#[test]
fn dash_e_sets_the_error_log() {
    let conf =
        "daemon off;\npid logs/sluice.pid;\nevents {}\nhttp { server { listen 127.0.0.1:{port}; root html; } }\n";
    let s = builder().whole(conf).arg("-e").arg("early.log").start();
    assert_eq!(s.get("/missing.html").status, 404);
    let log = wait_contains(&s.path("early.log"), "missing.html", LOG_WAIT);
    assert!(log.contains("[error]") && log.contains("open() \"") && log.contains("No such file"), "{log}");
    assert!(!s.path("logs/error.log").exists(), "the compiled-in default was opened as well");
    drop(s);
    // A refused configuration's [emerg] goes to stderr and to the -e file.
    let t = builder().whole("events {}\nhttp { bogus_directive; }\n").prepare();
    let out = t.run(&["-t", "-e", "logs/early.log"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("[emerg] unknown directive \"bogus_directive\""), "{}", stderr_of(&out));
    let log = read_lossy(&t.path("logs/early.log"));
    let line = line_with(&log, "bogus_directive");
    assert!(line.contains(" [emerg] ") && line.contains("#"), "{log}");
    // `-e stderr`, and `-e` without a file name.
    let out = t.run(&["-t", "-e", "stderr"]);
    assert_eq!(out.status.code(), Some(1));
    let out = t.run(&["-e"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).starts_with(&format!("{}: option \"-e\" requires file name\n", prog())),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn invalid_option() {
    let dir = temp_dir("opt");
    let out = sluice(&["-x"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).starts_with("sluice: invalid option: \"x\"\n"), "{}", stderr_of(&out));
    let out = sluice(&["-s", "bogus"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).starts_with("sluice: invalid option: \"-s bogus\"\n"), "{}", stderr_of(&out));
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn signal_without_pid_file() {
    let p = prog();
    let s = prefix_with("pid logs/sluice.pid;\nevents {}\n");
    let out = s.run(&["-s", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    let pid = s.path("logs/sluice.pid").display().to_string();
    assert_eq!(stderr_of(&out), format!("{p}: [error] open() \"{pid}\" failed (2: No such file or directory)\n"));
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(cmd) = fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmd).contains(needle)
        {
            v.push(pid);
        }
    }
    v
}

#[test]
fn bind_in_use_fails_cleanly() {
    let p = prog();
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    // daemon on (the default): the failure must still reach the terminal
    // and leave no background process behind.
    let conf = format!(
        "pid logs/sluice.pid;\nerror_log logs/error.log;\nevents {{}}\n\
         http {{ server {{ listen 127.0.0.1:{port}; }} }}\n"
    );
    let s = prefix_with(&conf);
    let out = s.run(&[]);
    let err = stderr_of(&out);
    let leftovers = processes_mentioning(&s.prefix.display().to_string());
    for pid in &leftovers {
        let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
    }
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert_eq!(err, format!("{p}: [emerg] bind() to 127.0.0.1:{port} failed (98: Address already in use)\n"));
    assert!(leftovers.is_empty(), "processes left running: {leftovers:?}");
    assert!(!s.path("logs/sluice.pid").exists(), "pid file left behind");
    drop(holder);
}

/// Tengine's published benchmark configuration, with the port changed.
#[test]
fn tengine_benchmark_config_serves() {
    let masks: Vec<String> = (0..32).map(|i| format!("{:032b}", 1u64 << i)).collect();
    let conf = format!(
        "daemon off;\nworker_processes 32;\nworker_cpu_affinity {};\nworker_rlimit_nofile 65535;\n\
         pid logs/sluice.pid;\nerror_log logs/error.log;\n\
         events {{\n    use epoll;\n    worker_connections 65535;\n    reuse_port on;\n    accept_mutex off;\n}}\n\
         http {{\n    include mime.types;\n    default_type application/octet-stream;\n    access_log off;\n\
         sendfile on;\n    tcp_nopush on;\n    tcp_nodelay on;\n    keepalive_timeout 0;\n    server_tokens off;\n\
         server {{\n        listen {{port}} backlog=65535;\n        server_name localhost;\n\
         location = /empty.gif {{\n            empty_gif;\n        }}\n    }}\n}}\n",
        masks.join(" ")
    );
    let s = builder().whole(&conf).start();
    let out = s.run(&["-t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for _ in 0..3 {
        let r = s.get("/empty.gif");
        assert_eq!(r.status, 200);
        assert_eq!(r.must("Content-Type"), "image/gif");
        assert_eq!(r.body, EMPTY_GIF);
        assert_eq!(r.must("Connection"), "close");
        assert_eq!(r.must("Server"), "sluice");
    }
    let c = curl(&["-o", "/dev/null", "-w", "%{http_code} %{size_download}", &s.url("/empty.gif")]);
    assert_eq!(c.text(), "200 43", "{}", c.stderr);
}

#[test]
fn no_arguments_serves_current_directory_on_8080() {
    if std::path::Path::new("/usr/local/sluice/conf/sluice.conf").exists() {
        println!("note: skipped, /usr/local/sluice/conf/sluice.conf exists");
        return;
    }
    if TcpListener::bind("127.0.0.1:8080").is_err() {
        println!("note: skipped, 127.0.0.1:8080 is in use");
        return;
    }
    let dir = temp_dir("noargs");
    fs::write(dir.join("hello.txt"), "hello from cwd\n").unwrap();
    let mut child = Command::new(BIN)
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut exited = None;
    while !port_accepts(8080) {
        if let Some(st) = child.try_wait().unwrap() {
            exited = Some(st);
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let result = std::panic::catch_unwind(|| {
        assert!(exited.is_none(), "sluice exited: {exited:?}");
        let r = request(8080, "GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "hello from cwd\n");
        assert_eq!(r.must("Content-Type"), "text/plain");
        let r = request(8080, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(r.status, 200);
        assert!(r.text().contains("<a href=\"hello.txt\">hello.txt</a>"), "{}", r.text());
    });
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = fs::remove_dir_all(&dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn signal_with_stale_or_garbage_pid_file() {
    let p = prog();
    let s = prefix_with("pid logs/sluice.pid;\nevents {}\n");
    // a pid that certainly exited: a child we started and reaped
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    fs::write(s.path("logs/sluice.pid"), format!("{dead}\n")).unwrap();
    let out = s.run(&["-s", "quit"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_of(&out), format!("{p}: [alert] kill({dead}, 3) failed (3: No such process)\n"));

    fs::write(s.path("logs/sluice.pid"), "garbage\n").unwrap();
    let out = s.run(&["-s", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    let pid = s.path("logs/sluice.pid").display().to_string();
    assert_eq!(stderr_of(&out), format!("{p}: [error] invalid PID number \"garbage\" in \"{pid}\"\n"));
}

#[test]
fn errors_inside_nested_blocks_and_includes_report_the_right_line() {
    assert_test_fails(
        "events {}\nhttp {\n  server {\n    location / {\n      location /a {\n        index;\n      }\n    }\n  }\n}\n",
        "invalid number of arguments in \"index\" directive",
        6,
    );
    assert_test_fails(
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:1;\n",
        "unexpected end of file, expecting \"}\"",
        5,
    );
    assert_test_fails("events {}\nhttp {\n}\n}\n", "unexpected \"}\"", 4);
    assert_test_fails(
        "events {}\nhttp {\n  include missing.conf;\n}\n",
        &format!("open() \"{}\" failed (2: No such file or directory)", "PREFIX/conf/missing.conf"),
        3,
    );
}

#[test]
fn daemon_on_by_default_and_quit_stops_it() {
    let s = builder()
        .whole(
            "pid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
             http { server { listen 127.0.0.1:{port}; return 200 bg; } }\n",
        )
        .prepare();
    let out = s.run(&[]);
    let pid_path = s.path("logs/sluice.pid");
    // wait for the background server's pid file and port
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(pid_path.exists() && port_accepts(s.port)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: Option<u32> = read_lossy(&pid_path).trim().parse().ok();
    let result = std::panic::catch_unwind(|| {
        assert_eq!(out.status.code(), Some(0), "foreground part failed: {}", stderr_of(&out));
        let pid = pid.expect("no pid file from the daemon");
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "daemon {pid} not running");
        assert_eq!(request(s.port, "GET / HTTP/1.0\r\n\r\n").text(), "bg");
        let out = s.run(&["-s", "quit"]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            // a zombie is gone for our purposes once the port is closed
            let stat = read_lossy(std::path::Path::new(&format!("/proc/{pid}/stat")));
            if stat.contains(") Z ") {
                break;
            }
            assert!(Instant::now() < deadline, "daemon {pid} still running 10 s after -s quit");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!port_accepts(s.port));
    });
    if let Err(e) = result {
        // the test failed: make sure the daemon we started does not linger
        if let Some(pid) = pid {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        std::panic::resume_unwind(e);
    }
}

#[test]
fn root_that_is_a_file_is_refused_at_startup() {
    // A root that cannot serve anything is a configuration error caught
    // before anything starts: one line naming it, exit 1.
    let prefix = std::env::temp_dir().join(format!("sluice-root-{}", std::process::id()));
    std::fs::create_dir_all(prefix.join("conf")).unwrap();
    std::fs::create_dir_all(prefix.join("logs")).unwrap();
    std::fs::write(prefix.join("notadir"), "x").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        prefix.join("conf/sluice.conf"),
        format!(
            "daemon off; pid logs/sluice.pid; error_log logs/error.log; events {{}}\n\
             http {{ server {{ listen 127.0.0.1:{port}; root notadir; }} }}\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg("conf/sluice.conf")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("sluice: [emerg] root \"{}\" is not a directory", prefix.join("notadir").display())),
        "{err}"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "something is listening after a failed start");
    assert!(!prefix.join("logs/sluice.pid").exists(), "pid file written by a failed start");
    let _ = std::fs::remove_dir_all(&prefix);
}

#[test]
fn test_opens_log_files_as_nginx_does() {
    // `-t` opens every log as nginx -t does: a path that cannot be opened
    // fails the test after the syntax verdict, in nginx's words.
    for conf in [
        "error_log /nonexistent-sluice-dir/e.log;\nevents {}\nhttp { server { listen 127.0.0.1:1; } }\n",
        "events {}\nhttp { access_log /nonexistent-sluice-dir/a.log; server { listen 127.0.0.1:1; } }\n",
    ] {
        let s = prefix_with(conf);
        let out = s.run(&["-t"]);
        let err = stderr_of(&out);
        let abs = conf_abs(&s);
        let p = prog();
        let file = if conf.starts_with("error_log") { "e.log" } else { "a.log" };
        let want = format!(
            "{p}: the configuration file {abs} syntax is ok\n\
             {p}: [emerg] open() \"/nonexistent-sluice-dir/{file}\" failed (2: No such file or directory)\n\
             {p}: configuration file {abs} test failed\n"
        );
        assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
        assert!(err.ends_with(&want), "want {want:?} at the end of:\n{err}");
    }
    // Logs that can be created are created, and the test passes.
    let s = prefix_with("events {}\nhttp { access_log logs/new.log; server { listen 127.0.0.1:1; } }\n");
    let out = s.run(&["-t"]);
    assert!(out.status.success(), "stderr:\n{}", stderr_of(&out));
    assert!(s.prefix.join("logs/new.log").exists());
}
