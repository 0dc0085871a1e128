//! The cache's parsers: entry files read back from disk (anything may be in
//! a cache directory) and the origin's caching headers.

use crate::http::cache::conf::{CacheConf, Valid};
use crate::http::cache::entry;
use crate::http::cache::policy;

/// An entry header: decoding never panics, never reads past the input, and
/// what decodes re-encodes to the same bytes (the format has one spelling,
/// so a damaged file cannot decode to something else than it says).
pub fn cache_entry(data: &[u8]) {
    check_entry(data);
    // The checksum stops almost every mutation at the door: a second pass
    // with the length and checksum fields made right lets the fuzzer reach
    // the field parsers behind them.
    if data.len() >= 16 && data.len() <= entry::MAX_HEADER {
        let mut fixed = data.to_vec();
        fixed[..8].copy_from_slice(entry::MAGIC);
        fixed[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        let crc = crate::upstream::balance::hash::crc32(&fixed[16..]);
        fixed[12..16].copy_from_slice(&crc.to_le_bytes());
        check_entry(&fixed);
    }
}

fn check_entry(data: &[u8]) {
    if let Ok((meta, len)) = entry::decode(data) {
        assert!(len <= data.len());
        assert_eq!(entry::encode(&meta), &data[..len], "decoded header re-encodes differently");
        assert!((100..=999).contains(&meta.status));
    }
    let _ = entry::header_len(data);
}

/// Caching headers (`Cache-Control`, `Expires`, `X-Accel-Expires`,
/// `Set-Cookie`, `Vary`) cut from the input: the verdict never panics, a
/// validity is never in the past, and ignoring every header leaves only
/// `proxy_cache_valid`'s answer.
pub fn cache_control(data: &[u8]) {
    const NOW: i64 = 1_700_000_000;
    let names = ["Cache-Control", "Expires", "Set-Cookie", "Vary", "X-Other"];
    let mut parts = data.split(|&b| b == b'\n');
    let accel = parts.next();
    let headers: Vec<(&str, &[u8])> = parts.enumerate().map(|(i, v)| (names[i % names.len()], v)).collect();
    let mut conf = CacheConf {
        valid: vec![Valid { codes: vec![200], time: std::time::Duration::from_secs(60) }],
        ..CacheConf::default()
    };
    let v = policy::decide(200, &headers, accel, &conf, NOW);
    if let Some(t) = v.valid_until
        && accel.is_none_or(|a| !a.starts_with(b"@"))
    {
        assert!(t >= NOW, "valid until {t}, before now");
    }
    conf.ignore.cache_control = true;
    conf.ignore.expires = true;
    conf.ignore.set_cookie = true;
    conf.ignore.vary = true;
    conf.ignore.x_accel_expires = true;
    let v = policy::decide(200, &headers, accel, &conf, NOW);
    assert_eq!(v.valid_until, Some(NOW + 60));
}

/// `Accept-Encoding`: the chosen coding is one that was offered.
pub fn accept_encoding(data: &[u8]) {
    use crate::http::filter::compress::negotiate::{Coding, negotiate};
    for offered in [&Coding::ALL[..], &[Coding::Gzip], &[Coding::Br, Coding::Gzip], &[]] {
        if let Some(c) = negotiate(data, offered) {
            assert!(offered.contains(&c), "{c:?} was not offered");
        }
    }
    // The same bytes as an Accept field (sluice_status's choice of the
    // dashboard): a quality is a qvalue, and the choice follows from it.
    use crate::metrics::dashboard::{prefers_html, quality};
    let (html, json) = (quality(data, "text/html"), quality(data, "application/json"));
    assert!(html <= 1000 && json <= 1000, "q out of range: {html} {json}");
    assert_eq!(prefers_html(data), html > json);
}
