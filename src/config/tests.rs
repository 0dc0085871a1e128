//! Directive validation and inheritance, checked through the public loader
//! with nginx's exact messages.

use super::{Config, LoadOptions, Source, load};

fn try_load(text: &str) -> Result<Config, String> {
    load(&LoadOptions {
        prefix: "/srv/p".into(),
        source: Source::Text { name: "/etc/t.conf".into(), text: text.into() },
        globals: None,
        error_log: None,
    })
    .map_err(|e| e.to_string())
}

fn err(text: &str) -> String {
    match try_load(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e,
    }
}

#[test]
fn nginx_wording_for_bad_directives() {
    assert_eq!(err("events {}\nfoo bar;\n"), "unknown directive \"foo\" in /etc/t.conf:2");
    assert_eq!(err("events {}\nlisten 80;"), "\"listen\" directive is not allowed here in /etc/t.conf:2");
    assert_eq!(
        err("events {} http { server { root; } }"),
        "invalid number of arguments in \"root\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { sendfile maybe; }"),
        "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\" in /etc/t.conf:1"
    );
    assert_eq!(err("events {}\nevents {}"), "\"events\" directive is duplicate in /etc/t.conf:2");
    assert_eq!(err("daemon off; daemon on; events {}"), "\"daemon\" directive is duplicate in /etc/t.conf:1");
    assert_eq!(err("http {}"), "no \"events\" section in configuration");
    assert_eq!(err("events {} http;"), "directive \"http\" has no opening \"{\" in /etc/t.conf:1");
    assert_eq!(err("events {} http { root x { } }"), "directive \"root\" is not terminated by \";\" in /etc/t.conf:1");
    assert!(
        err("events {} http { include_subdomains on; }")
            .starts_with("unknown directive \"include_subdomains\" (an nginx")
    );
    assert_eq!(
        err("events {} http { server { charset_map a b { } } }"),
        "\"charset_map\" directive is not allowed here in /etc/t.conf:1"
    );
    assert_eq!(err("events {} http { charset_map a b {\n 1 2 3; } }"), "invalid parameters number in /etc/t.conf:2");
    assert_eq!(
        err("events {} http { server { charset b; source_charset a; } charset_map a c { } }"),
        "no \"charset_map\" between the charsets \"a\" and \"b\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { proxy_pass http://x; }"),
        "\"proxy_pass\" directive is not allowed here in /etc/t.conf:1"
    );
    assert_eq!(err("events {} http { upstream u { } }"), "no servers are inside upstream in /etc/t.conf:1");
    assert_eq!(
        err("events {} http { upstream u { server 127.0.0.1:1 weight=x; } }"),
        "invalid value \"weight=x\" in \"server\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { location ~ /x { proxy_pass http://127.0.0.1:1/y; } } }"),
        "\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, or inside \"if\" statement, or inside \"limit_except\" block in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { listen 80 ssl; } }"),
        "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { listen 80 quic; } }"),
        "no \"ssl_certificate\" is defined for the \"listen ... quic\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { listen 80 quic http2; } }"),
        "\"http2\" parameter is incompatible with \"quic\" in /etc/t.conf:1"
    );
    assert!(
        err("events {} http { ssl_protocols TLSv1 TLSv1.1; }")
            .starts_with("no protocol in \"ssl_protocols\" is supported: TLSv1 TLSv1.1 not offered"),
    );
    assert_eq!(
        err(
            "events {} http { server { listen 443 ssl; ssl_certificate /nonexistent/c.pem; ssl_certificate_key /nonexistent/k.pem; } }"
        ),
        "cannot load certificate \"/nonexistent/c.pem\": No such file or directory (os error 2) in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { ssl_certificate /x.pem; server { listen 443 ssl; } }"),
        "no \"ssl_certificate_key\" is defined for certificate \"/x.pem\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { ssl_session_cache shared:SSL; }"),
        "invalid session cache \"shared:SSL\" in /etc/t.conf:1"
    );
}

#[test]
fn location_rules() {
    assert_eq!(
        err("events {} http { server { location /a { location /b { } } } }"),
        "location \"/b\" is outside location \"/a\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { location = /a { location /a/b { } } } }"),
        "location \"/a/b\" cannot be inside the exact location \"/a\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { location /a { location @n { } } } }"),
        "named location \"@n\" can be on the server level only in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { location /a { } location /a { } } }"),
        "duplicate location \"/a\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { location /a { root /x; alias /y; } } }"),
        "\"alias\" directive is duplicate, \"root\" directive was specified earlier in /etc/t.conf:1"
    );
}

#[test]
fn inheritance_is_nginx_merge() {
    let cfg = try_load(
        "events {} http {
            add_header X-A a;
            root html;
            server {
                listen 127.0.0.1:1;
                location /inherits { }
                location /own { add_header X-B b; }
                # set after the location block, still applies to it (nginx merges)
                expires 1h;
            }
        }",
    )
    .unwrap();
    let s = &cfg.http.servers[0];
    let by = |p: &str| crate::http::routing::location::find(&s.locations, p.as_bytes()).unwrap();
    let names = |p: &str| by(p).conf.add_headers.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
    assert_eq!(names("/inherits"), ["X-A"]);
    // A level with its own add_header replaces the inherited list.
    assert_eq!(names("/own"), ["X-B"]);
    assert_eq!(by("/inherits").conf.expires, Some(super::model::Expires::Access(3600)));
    assert_eq!(by("/own").conf.root.path, "/srv/p/html");
}

#[test]
fn listen_grouping_and_defaults() {
    assert_eq!(
        err(
            "events {} http { server { listen 127.0.0.1:1 default_server; } server { listen 127.0.0.1:1 default_server; } }"
        ),
        "a duplicate default server for 127.0.0.1:1 in /etc/t.conf:1"
    );
    let cfg = try_load(
        "events { reuse_port on; } http { server { listen 127.0.0.1:1 backlog=100; } server { listen 127.0.0.1:1; server_name b; } }",
    )
    .unwrap();
    let g = &cfg.http.listens[0];
    assert_eq!((g.backlog, g.reuseport), (100, true));
    assert_eq!(g.notsent_lowat, 16 * 1024, "sluice's default");
    assert_eq!(cfg.http.listens.len(), 1);
}

#[test]
fn listen_notsent_lowat() {
    let lowat = |p: &str| {
        try_load(&format!("events {{}} http {{ server {{ listen 127.0.0.1:1 {p}; }} }}")).unwrap().http.listens[0]
            .notsent_lowat
    };
    assert_eq!(lowat("notsent_lowat=64k"), 64 * 1024);
    assert_eq!(lowat("notsent_lowat=off"), 0);
    assert_eq!(
        err("events {} http { server { listen 127.0.0.1:1 notsent_lowat=0; } }"),
        "invalid notsent_lowat \"notsent_lowat=0\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { server { listen 127.0.0.1:1 notsent_lowat=lots; } }"),
        "invalid notsent_lowat \"notsent_lowat=lots\" in /etc/t.conf:1"
    );
    // An option of the address: given once, like backlog.
    assert_eq!(
        err(
            "events {} http { server { listen 127.0.0.1:1 notsent_lowat=1m; } server { listen 127.0.0.1:1 backlog=9; server_name b; } }"
        ),
        "duplicate listen options for 127.0.0.1:1 in /etc/t.conf:1"
    );
}

/// nginx's socket options of `listen`, with the values and error lines
/// nginx 1.22 gives for the same text.
#[test]
fn listen_socket_options() {
    use super::model::SockOpts;
    let conf = |p: &str| format!("events {{}} http {{ server {{ listen 127.0.0.1:1 {p}; }} }}");
    let opts = |p: &str| try_load(&conf(p)).unwrap().http.listens[0].sock;
    assert_eq!(opts(""), SockOpts::default());
    assert_eq!(
        opts("rcvbuf=64k sndbuf=2047m fastopen=256 so_keepalive=off"),
        SockOpts {
            rcvbuf: Some(64 * 1024),
            sndbuf: Some(2047 << 20),
            fastopen: Some(256),
            keepalive: Some(false),
            ..SockOpts::default()
        }
    );
    assert_eq!(opts("rcvbuf=0").rcvbuf, Some(0));
    assert_eq!(opts("rcvbuf=4096m").rcvbuf, Some(i32::MAX), "the kernel's maximum");
    assert_eq!(opts("fastopen=2147483648").fastopen, Some(i32::MAX), "nginx takes it into an int");
    assert_eq!(opts("so_keepalive=on").keepalive, Some(true));
    let k = opts("so_keepalive=1h30m::10");
    assert_eq!((k.keepalive, k.keep_idle, k.keep_intvl, k.keep_cnt), (Some(true), 5400, 0, 10));
    let k = opts("so_keepalive=:5s:");
    assert_eq!((k.keepalive, k.keep_idle, k.keep_intvl, k.keep_cnt), (Some(true), 0, 5, 0));
    for (p, e) in [
        ("rcvbuf=abc", "invalid rcvbuf \"rcvbuf=abc\""),
        ("rcvbuf=1g", "invalid rcvbuf \"rcvbuf=1g\""),
        ("sndbuf=1q", "invalid sndbuf \"sndbuf=1q\""),
        ("fastopen=x", "invalid fastopen \"fastopen=x\""),
        ("fastopen=-1", "invalid fastopen \"fastopen=-1\""),
        ("so_keepalive=x", "invalid so_keepalive value: \"x\""),
        ("so_keepalive=ON", "invalid so_keepalive value: \"ON\""),
        ("so_keepalive=0::", "invalid so_keepalive value: \"0::\""),
        ("so_keepalive=::", "invalid so_keepalive value: \"::\""),
        ("so_keepalive=1ms::", "invalid so_keepalive value: \"1ms::\""),
        ("so_keepalive=1:2:3:4", "invalid so_keepalive value: \"1:2:3:4\""),
        ("backlog=x", "invalid backlog \"backlog=x\""),
        ("setfib=1", "invalid parameter \"setfib=1\""),
        (
            "accept_filter=dataready",
            "accept filters \"accept_filter=dataready\" are not supported on this platform, ignored",
        ),
    ] {
        assert_eq!(err(&conf(p)), format!("{e} in /etc/t.conf:1"), "{p}");
    }
    // Options of the address: given once.
    assert_eq!(
        err(
            "events {} http { server { listen 127.0.0.1:1 rcvbuf=1m; } server { listen 127.0.0.1:1 so_keepalive=on; server_name b; } }"
        ),
        "duplicate listen options for 127.0.0.1:1 in /etc/t.conf:1"
    );
}

#[test]
fn expires_values_and_nginx_errors() {
    use super::model::Expires;
    let conf = |v: &str| format!("events {{}} http {{ server {{ listen 127.0.0.1:1; expires {v}; }} }}");
    let e = |v: &str| try_load(&conf(v)).unwrap().http.listens[0].default_server.conf.expires;
    assert_eq!(e("@10h30m"), Some(Expires::Daily(37800)));
    assert_eq!(e("@24h"), Some(Expires::Daily(86400)));
    assert_eq!(e("-1h"), Some(Expires::Access(-3600)));
    assert_eq!(e("modified +1d"), Some(Expires::Modified(86400)));
    for (v, why) in [
        ("@25h", "daily time value must be less than 24 hours"),
        ("modified @10h", "daily time cannot be used with \"modified\" parameter"),
        ("@x", "invalid value"),
        ("+@10h", "invalid value"),
        ("junk", "invalid value"),
    ] {
        assert_eq!(err(&conf(v)), format!("\"expires\" directive {why} in /etc/t.conf:1"), "{v}");
    }
}

/// Tuning directives nginx has that change nothing here: checked with
/// nginx's messages; the obsolete HTTP/2 ones warn as nginx does.
#[test]
fn checked_tuning_and_obsolete_http2_directives() {
    let conf = |d: &str| format!("events {{}} http {{ server {{ listen 127.0.0.1:1; {d} }} }}");
    for ok in
        ["gzip_window 32k;", "gzip_hash 512;", "gzip_no_buffer on;", "postpone_gzipping 1k;", "keepalive_time 10m;"]
    {
        assert!(try_load(&conf(ok)).is_ok(), "{ok}");
    }
    for (bad, why) in [
        ("gzip_window 15;", "\"gzip_window\" directive must be 512, 1k, 2k, 4k, 8k, 16k, or 32k"),
        ("gzip_hash 256k;", "\"gzip_hash\" directive must be 512, 1k, 2k, 4k, 8k, 16k, 32k, 64k, or 128k"),
        (
            "gzip_no_buffer maybe;",
            "invalid value \"maybe\" in \"gzip_no_buffer\" directive, it must be \"on\" or \"off\"",
        ),
        ("postpone_gzipping x;", "\"postpone_gzipping\" directive invalid value"),
        ("keepalive_time x;", "\"keepalive_time\" directive invalid value"),
    ] {
        assert_eq!(err(&conf(bad)), format!("{why} in /etc/t.conf:1"), "{bad}");
    }
    let cfg =
        try_load(&conf("http2_push_preload on; http2_push /a.css; http2_max_field_size 8k; http2_recv_timeout 3s;"))
            .unwrap();
    assert_eq!(
        cfg.warnings,
        [
            "the \"http2_push_preload\" directive is obsolete, ignored in /etc/t.conf:1",
            "the \"http2_push\" directive is obsolete, ignored in /etc/t.conf:1",
            "the \"http2_max_field_size\" directive is obsolete, use the \"large_client_header_buffers\" directive instead in /etc/t.conf:1",
            "the \"http2_recv_timeout\" directive is obsolete, use the \"client_header_timeout\" directive instead in /etc/t.conf:1",
        ]
    );
}

#[test]
fn error_log_per_level() {
    use crate::log::error::{ErrorLog, Level};
    fn targets(l: &ErrorLog) -> Vec<(String, Level)> {
        l.targets().map(|(p, lv)| (p.map_or("stderr".into(), |p| p.display().to_string()), lv)).collect()
    }
    let t = |p: &str, l: Level| (p.to_string(), l);

    // Nothing at main: nginx's compiled-in logs/error.log, inherited below.
    let cfg = try_load("events {} http { server { listen 127.0.0.1:1; location /a { } } }").unwrap();
    assert_eq!(targets(&cfg.main.error_log), [t("/srv/p/logs/error.log", Level::Error)]);
    let s = &cfg.http.servers[0];
    assert!(std::sync::Arc::ptr_eq(&s.conf.error_log, &cfg.main.error_log));

    let cfg = try_load(
        "error_log logs/main.log warn;
        events {}
        http {
            error_log logs/http.log;
            server {
                listen 127.0.0.1:1;
                location /inherits { }
                location /two { error_log logs/a.log crit; error_log logs/http.log info; }
                location /nested { location /nested/in { } error_log stderr debug; }
            }
            server { listen 127.0.0.1:2; error_log logs/main.log notice; }
        }",
    )
    .unwrap();
    assert_eq!(targets(&cfg.main.error_log), [t("/srv/p/logs/main.log", Level::Warn)]);
    let s = &cfg.http.servers[0];
    let by = |p: &str| crate::http::routing::location::find(&s.locations, p.as_bytes()).unwrap();
    assert_eq!(targets(&s.conf.error_log), [t("/srv/p/logs/http.log", Level::Error)]);
    assert_eq!(targets(&by("/inherits").conf.error_log), [t("/srv/p/logs/http.log", Level::Error)]);
    assert_eq!(
        targets(&by("/two").conf.error_log),
        [t("/srv/p/logs/a.log", Level::Crit), t("/srv/p/logs/http.log", Level::Info)]
    );
    // A directive after the nested block still reaches it (nginx merges).
    assert_eq!(targets(&by("/nested/in").conf.error_log), [t("stderr", Level::Debug)]);
    assert_eq!(targets(&cfg.http.servers[1].conf.error_log), [t("/srv/p/logs/main.log", Level::Notice)]);
    // One file per path, however many levels name it.
    let mut paths: Vec<_> = cfg.error_log_files.iter().map(|f| f.path().map(|p| p.display().to_string())).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            None,
            Some("/srv/p/logs/a.log".into()),
            Some("/srv/p/logs/http.log".into()),
            Some("/srv/p/logs/main.log".into())
        ]
    );

    assert_eq!(err("error_log x.log loud; events {}"), "invalid log level \"loud\" in /etc/t.conf:1");
    assert_eq!(
        err("events {} http { server { error_log syslog:server=1.2.3.4,facility=x; } }"),
        "unknown syslog facility \"x\" in /etc/t.conf:1"
    );
    // A syslog target is no file.
    let cfg = try_load("events {} http { server { error_log syslog:server=1.2.3.4 warn; } }").unwrap();
    assert!(targets(&cfg.http.servers[0].conf.error_log).is_empty());
    assert!(cfg.http.servers[0].conf.error_log.enabled(Level::Warn));
    assert_eq!(
        err("events {} http { server { location / { error_log memory:1m debug; } } }"),
        "error_log target \"memory:1m\" is not supported yet in /etc/t.conf:1"
    );
}

#[test]
fn proxy_buffer_sizes_are_checked_as_nginx_merges_them() {
    let http = |body: &str| format!("events {{}} http {{ server {{ location / {{ {body} }} }} }}");
    let at = " in /etc/t.conf:1";
    let of = "the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"";
    for (body, want) in [
        ("proxy_buffers 1 4k;", "there must be at least 2 \"proxy_buffers\"".to_string()),
        (
            "proxy_buffers 2 4k;",
            "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer".into(),
        ),
        (
            "proxy_buffer_size 16k;",
            "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer".into(),
        ),
        ("proxy_busy_buffers_size 2k;", format!("\"proxy_busy_buffers_size\" must be equal to or greater than {of}")),
        (
            "proxy_temp_file_write_size 1k;",
            format!("\"proxy_temp_file_write_size\" must be equal to or greater than {of}"),
        ),
        (
            "proxy_max_temp_file_size 1k;",
            format!(
                "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal \
                 to or greater than {of}"
            ),
        ),
        ("proxy_buffers 8 0;", "invalid value \"0\" in \"proxy_buffers\" directive".into()),
        ("proxy_temp_path t 0;", "invalid value \"0\" in \"proxy_temp_path\" directive".into()),
        ("proxy_temp_path t 1 2 3 4;", "invalid number of arguments in \"proxy_temp_path\" directive".into()),
    ] {
        assert_eq!(err(&http(body)), format!("{want}{at}"), "{body}");
    }
    let cfg = try_load(&http(
        "proxy_buffers 2 4k; proxy_busy_buffers_size 4k; proxy_max_temp_file_size 0; proxy_temp_path /t 1 2 3;",
    ))
    .expect("valid");
    let b = &cfg.http.servers[0].locations.prefix[0].conf.proxy.up.buffers;
    assert_eq!((b.number, b.size, b.busy, b.max_temp_file), (2, 4096, Some(4096), 0));
    assert_eq!(b.temp_path, std::path::Path::new("/t"));
    // nginx's defaults: 8 4k, 1024m, proxy_temp under the prefix.
    let cfg = try_load(&http("")).expect("valid");
    let b = &cfg.http.servers[0].conf.proxy.up.buffers;
    assert_eq!((b.number, b.size, b.memory(), b.temp_write(4096)), (8, 4096, 32768, 8192));
    assert_eq!((b.max_temp_file, b.temp_path.as_path()), (1 << 30, std::path::Path::new("/srv/p/proxy_temp")));
    // Set at http, checked there and inherited.
    assert!(err("events {} http { proxy_buffers 2 8k; server { } }").starts_with("\"proxy_busy_buffers_size\""));
}

#[test]
fn compression_directives() {
    use crate::config::compress::{MimeTypes, StaticMode, proxied};
    use crate::http::filter::compress::negotiate::Coding;
    let c = try_load(
        "events {} http {
            gzip on; gzip_comp_level 6; gzip_types text/css; gzip_types application/json;
            gzip_proxied expired auth; gzip_disable msie6 \"^Bot\"; gzip_vary on; gzip_http_version 1.0;
            gzip_buffers 16 8k; brotli on; brotli_window 1m; zstd_comp_level -5; zstd_types *;
            gzip_static always; compress_preference gzip;
            server { listen 127.0.0.1:8080;
                location /a { gzip off; gzip_types text/plain; gzip_proxied any; gzip_disable \"^X\"; }
            }
        }",
    )
    .unwrap();
    let s = &c.http.servers[0];
    let z = &s.conf.compress;
    assert!(z.gzip.on && z.brotli.on && !z.zstd.on);
    assert_eq!(z.gzip.level, 6);
    assert_eq!(
        z.gzip.types,
        MimeTypes::List(std::sync::Arc::new(vec!["text/html".into(), "text/css".into(), "application/json".into()]))
    );
    assert_eq!(z.zstd.types, MimeTypes::Any);
    assert_eq!(z.proxied, proxied::EXPIRED | proxied::AUTH);
    assert!(z.disable.msie6 && z.disable.regexes.len() == 1 && z.vary && z.http10);
    assert_eq!(z.brotli_window, 20);
    assert_eq!(z.zstd.level, -5);
    assert_eq!(z.gzip.precompressed, StaticMode::Always);
    assert_eq!(z.preference, [Coding::Gzip, Coding::Zstd, Coding::Br]);
    let l = &s.locations.prefix[0].conf.compress;
    assert!(!l.gzip.on && l.brotli.on, "inherited and overridden");
    assert_eq!(l.gzip.types, MimeTypes::List(std::sync::Arc::new(vec!["text/html".into(), "text/plain".into()])));
    assert_eq!(l.proxied, proxied::ANY);
    assert!(l.disable.msie6 && l.disable.regexes.len() == 1, "regexes replaced, msie6 inherited");
    assert!(l.disable.regexes[0].is_match(b"x-agent"), "case-insensitive");

    let d = try_load("events {} http { server { listen 127.0.0.1:8080; } }").unwrap();
    let z = &d.http.servers[0].conf.compress;
    assert!(!z.gzip.on && z.gzip.level == 1 && z.brotli.level == 6 && z.zstd.level == 1);
    assert_eq!((z.gzip.min_length, z.brotli_window, z.proxied), (20, 19, proxied::OFF));
    assert_eq!(z.preference, [Coding::Zstd, Coding::Br, Coding::Gzip]);
}

#[test]
fn compression_directive_errors() {
    let e = |d: &str| err(&format!("events {{}} http {{ {d} }}"));
    assert_eq!(e("gzip_comp_level 10;"), "value must be between 1 and 9 in /etc/t.conf:1");
    assert_eq!(e("gzip_comp_level x;"), "\"gzip_comp_level\" directive invalid number in /etc/t.conf:1");
    assert_eq!(e("brotli_comp_level 12;"), "value must be between 0 and 11 in /etc/t.conf:1");
    assert_eq!(e("zstd_comp_level 0;"), "zstd compress level must between -131072 and 22 excluding 0 in /etc/t.conf:1");
    assert!(e("brotli_window 3k;").starts_with("\"brotli_window\" directive must be 1k, 2k"));
    assert_eq!(e("gzip_static maybe;"), "invalid value \"maybe\" in /etc/t.conf:1");
    assert_eq!(e("gzip_proxied sometimes;"), "invalid value \"sometimes\" in /etc/t.conf:1");
    assert_eq!(e("gzip_http_version 2.0;"), "invalid value \"2.0\" in /etc/t.conf:1");
    assert_eq!(
        e("gzip maybe;"),
        "invalid value \"maybe\" in \"gzip\" directive, it must be \"on\" or \"off\" in /etc/t.conf:1"
    );
    assert_eq!(e("gzip on; gzip off;"), "\"gzip\" directive is duplicate in /etc/t.conf:1");
    assert_eq!(
        e("compress_preference br lz4;"),
        "unknown encoding \"lz4\" in \"compress_preference\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        e("compress_preference br br;"),
        "duplicate encoding \"br\" in \"compress_preference\" directive in /etc/t.conf:1"
    );
    assert!(e("gzip_disable \"(\";").contains("in /etc/t.conf:1"));
}

#[test]
fn fastcgi_directives_share_the_proxy_rules_with_their_own_names() {
    let c = try_load(
        "events {} http { fastcgi_read_timeout 5s; fastcgi_buffers 4 8k; \
         server { location ~ \\.php$ { fastcgi_pass unix:/run/php.sock; fastcgi_param A $uri; \
         fastcgi_param B $args if_not_empty; fastcgi_keep_conn on; fastcgi_next_upstream error http_500; } } }",
    )
    .expect("valid");
    let loc = &c.http.servers[0].locations.regex[0].conf;
    assert_eq!(loc.fastcgi.up.read_timeout, std::time::Duration::from_secs(5));
    assert_eq!((loc.fastcgi.up.buffers.number, loc.fastcgi.up.buffers.size), (4, 8192));
    assert_eq!(loc.proxy.up.read_timeout, std::time::Duration::from_secs(60), "the proxy's own");
    assert_eq!(loc.fastcgi.params.len(), 2);
    assert!(loc.fastcgi.params[1].if_not_empty && loc.fastcgi.keep_conn);
    assert!(loc.fastcgi.up.next_upstream.http_500 && !loc.fastcgi.up.next_upstream.timeout);
    assert!(loc.fastcgi.pass.is_some() && loc.proxy.pass.is_none());
    assert_eq!(
        err("events {} http { fastcgi_buffers 1 4k; }"),
        "there must be at least 2 \"fastcgi_buffers\" in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { fastcgi_next_upstream http_502; }"),
        "invalid value \"http_502\" in \"fastcgi_next_upstream\" directive in /etc/t.conf:1"
    );
    assert_eq!(
        err("events {} http { fastcgi_param A b maybe; }"),
        "invalid value \"maybe\" in \"fastcgi_param\" directive in /etc/t.conf:1"
    );
    assert!(err("events {} http { server { location / { fastcgi_split_path_info ^(.+)$; } } }").contains("2 captures"));
    assert!(err("events {} http { server { location / { fastcgi_pass php; } } }").contains("no port in upstream"));
    assert!(err("events {} http { fastcgi_pass 127.0.0.1:9000; }").contains("not allowed here"));
    // An upstream block by name.
    try_load("events {} http { upstream php { server 127.0.0.1:9000; } server { location / { fastcgi_pass php; } } }")
        .expect("upstream name");
}

/// The modules' settings (`Shared`) of `a` that `b` does not share.
fn unshared(a: &super::model::LocConf, b: &super::model::LocConf) -> Vec<&'static str> {
    use super::model::Shared;
    let pairs = [
        ("access", Shared::ptr_eq(&a.access, &b.access)),
        ("ssl", Shared::ptr_eq(&a.ssl, &b.ssl)),
        ("proxy", Shared::ptr_eq(&a.proxy, &b.proxy)),
        ("compress", Shared::ptr_eq(&a.compress, &b.compress)),
        ("fastcgi", Shared::ptr_eq(&a.fastcgi, &b.fastcgi)),
        ("uwsgi", Shared::ptr_eq(&a.uwsgi, &b.uwsgi)),
        ("scgi", Shared::ptr_eq(&a.scgi, &b.scgi)),
        ("grpc", Shared::ptr_eq(&a.grpc, &b.grpc)),
        ("charset", Shared::ptr_eq(&a.charset, &b.charset)),
        ("memcached", Shared::ptr_eq(&a.memcached, &b.memcached)),
        ("userid", Shared::ptr_eq(&a.userid, &b.userid)),
        ("limit", Shared::ptr_eq(&a.limit, &b.limit)),
    ];
    pairs.into_iter().filter(|(_, same)| !same).map(|(n, _)| n).collect()
}

/// A level shares every module's settings with its parent until it sets
/// one of that module's directives (what keeps 10,000 servers small), and
/// a setting made in one level reaches only that level and its children.
#[test]
fn levels_share_module_settings_they_do_not_change() {
    let c = try_load(
        "events {} http { proxy_read_timeout 5s; gzip on;
         server { listen 8001; server_name a;
             location / { return 200 a; }
             location /static/ { root /srv/static; expires 1h; }
             location /api/ { proxy_pass http://127.0.0.1:9000; location /api/v2/ { } }
             location /php/ { fastcgi_pass 127.0.0.1:9001; fastcgi_read_timeout 7s; }
             location /gz/ { gzip off; }
         }
         server { listen 8001; server_name b; location / { return 200 b; } } }",
    )
    .expect("valid");
    let (a, b) = (&c.http.servers[0], &c.http.servers[1]);
    assert_eq!(unshared(&a.conf, &b.conf), Vec::<&str>::new(), "two servers that set nothing");
    let loc =
        |p: &str| a.locations.prefix.iter().find(|l| l.conf.location_name.as_ref() == p).map(|l| &l.conf).expect(p);
    for p in ["/", "/static/"] {
        assert_eq!(unshared(&a.conf, loc(p)), Vec::<&str>::new(), "location {p}");
    }
    assert_eq!(unshared(&a.conf, loc("/api/")), vec!["proxy"]);
    assert_eq!(unshared(&a.conf, loc("/php/")), vec!["fastcgi"]);
    assert_eq!(unshared(&a.conf, loc("/gz/")), vec!["compress"]);
    // The handler is not inherited: the nested location drops it, and
    // with it the sharing; the timeout set in http still reaches it.
    let api = a.locations.prefix.iter().find(|l| l.conf.location_name.as_ref() == "/api/").expect("/api/");
    let v2 = &api.children.prefix[0].conf;
    assert!(v2.proxy.pass.is_none() && api.conf.proxy.pass.is_some());
    assert_eq!(v2.proxy.up.read_timeout, std::time::Duration::from_secs(5));
    assert_eq!(unshared(&api.conf, v2), vec!["proxy"]);
    assert_eq!(loc("/php/").fastcgi.up.read_timeout, std::time::Duration::from_secs(7));
    assert_eq!(a.conf.fastcgi.up.read_timeout, std::time::Duration::from_secs(60), "the server keeps its own");
    assert!(a.conf.compress.gzip.on && !loc("/gz/").compress.gzip.on);
}
