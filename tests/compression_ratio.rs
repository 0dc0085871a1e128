//! `$gzip_ratio` in the access log: the original size over the compressed
//! one (the gzip stream the client got), two decimals rounded as nginx
//! rounds them; `-` for a response that was not compressed. With
//! SLUICE_TEST_NGINX=1 the same checks run against nginx (whose ratio is
//! of its own zlib's output).

mod common;

use common::codings::*;
use common::*;

#[test]
fn gzip_ratio_is_logged_for_compressed_responses() {
    let data = text(200_000, 7);
    let mut s = builder()
        .http(
            "log_format ratio '$request_uri $gzip_ratio';\n\
             server { listen 127.0.0.1:{port}; root html; access_log logs/access.log ratio;\n\
               gzip on; gzip_types text/plain; location / { } }",
        )
        .file("html/t.txt", &data)
        .start();
    let r = s.get_with("/t.txt?z", &["Accept-Encoding: gzip"]);
    assert_encoded(&r, "gzip", &data, "gzip");
    let plain = s.get("/t.txt?plain");
    assert_plain(&plain, &data, "identity");
    assert!(s.quit().success());
    let log = s.access_log();
    // The sizes the client saw: two decimals of their ratio (the rounding
    // itself is unit-tested beside the formatter).
    let ratio = data.len() as f64 / r.body.len() as f64;
    let line = line_with(&log, "/t.txt?z ");
    let logged: f64 = line.split(' ').nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    assert!((logged - ratio).abs() <= 0.0051 && ratio > 2.0, "logged {logged}, sizes give {ratio}: {line}");
    assert_eq!(line.split(' ').nth(1).map(|v| v.len() - v.find('.').unwrap_or(0)), Some(3), "two decimals: {line}");
    assert!(log.lines().any(|l| l == "/t.txt?plain -"), "{log}");
}
