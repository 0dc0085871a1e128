//! Fuzzing entry points: one function per parser that takes arbitrary
//! bytes, runs the parser and asserts its properties, panicking on a
//! violation. The cargo-fuzz targets in `fuzz/` are one-line wrappers
//! around these, and `tests/fuzz_replay.rs` (stable Rust, every CI run)
//! feeds every file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` through the same functions, so a corpus
//! file that once found a bug keeps guarding the fix without a nightly
//! toolchain. `fuzz/README.md` says how to run and add targets.
//!
//! The functions are always compiled (no feature, no `cfg(fuzzing)`): the
//! replay test links the ordinary library, and keeping them in the crate
//! lets them reach `pub(crate)` pieces of the parsers.

mod access;
mod cache;
mod config;
mod conn;
mod dav;
mod fastcgi;
mod filter;
mod geoip;
mod geoip2;
mod grpc;
mod h1;
mod h2;
mod h2conn;
mod http;
mod image;
mod mail;
mod modules;
mod mp4;
mod proxy;
mod quic;
mod realip;
mod stream;
mod tls;
mod upstream;

pub use access::{access_rule, authorization, htpasswd};
pub use cache::{accept_encoding, cache_control, cache_entry};
pub use config::config;
pub use conn::h1_conn;
pub use dav::dav_headers;
pub use fastcgi::fastcgi;
pub use filter::{charset_recode, ssi, sub_filter};
pub use geoip::geoip;
pub use geoip2::geoip2;
pub use grpc::grpc_session;
pub use h1::{chunked, h1_head};
pub use h2::{h2_frame, hpack};
pub use h2conn::h2_conn;
pub use http::{range, slice_content_range, uri};
pub use image::image_filter;
pub use mail::{auth_http_response, mail_command};
pub use modules::{memcached_response, userid_cookie};
pub use mp4::mp4;
pub use proxy::head_scan;
pub use quic::{client_hello, qpack_decoder, quic_cid};
pub use realip::{dns_answer, forwarded, proxy_protocol};
pub use stream::ssl_preread;
pub use tls::{acme_response, crl, encrypted_key, ocsp_response};
pub use upstream::upstream_api;

/// An entry point: runs one input, panics on a violated property.
pub type Entry = fn(&[u8]);

/// Every target: its name (the `fuzz/fuzz_targets/<name>.rs` file and the
/// `fuzz/corpus/<name>/` directory) and its entry point. The replay test
/// walks this table and fails on a corpus directory missing from it.
pub const TARGETS: &[(&str, Entry)] = &[
    ("config", config),
    ("h1_head", h1_head),
    ("chunked", chunked),
    ("uri", uri),
    ("range", range),
    ("slice_content_range", slice_content_range),
    ("head_scan", head_scan),
    ("cache_entry", cache_entry),
    ("cache_control", cache_control),
    ("accept_encoding", accept_encoding),
    ("proxy_protocol", proxy_protocol),
    ("forwarded", forwarded),
    ("userid_cookie", userid_cookie),
    ("memcached_response", memcached_response),
    ("dns_answer", dns_answer),
    ("sub_filter", sub_filter),
    ("charset_recode", charset_recode),
    ("ssi", ssi),
    ("authorization", authorization),
    ("htpasswd", htpasswd),
    ("access_rule", access_rule),
    ("fastcgi", fastcgi),
    ("h1_conn", h1_conn),
    ("client_hello", client_hello),
    ("quic_cid", quic_cid),
    ("qpack_decoder", qpack_decoder),
    ("ssl_preread", ssl_preread),
    ("mail_command", mail_command),
    ("auth_http_response", auth_http_response),
    ("hpack", hpack),
    ("h2_frame", h2_frame),
    ("upstream_api", upstream_api),
    ("dav_headers", dav_headers),
    ("encrypted_key", encrypted_key),
    ("ocsp_response", ocsp_response),
    ("crl", crl),
    ("acme_response", acme_response),
    ("h2_conn", h2_conn),
    ("geoip", geoip),
    ("geoip2", geoip2),
    ("image_filter", image_filter),
    ("grpc_session", grpc_session),
    ("mp4", mp4),
];

/// A deterministic stream of numbers seeded from the input, for choosing
/// split points and sizes: the same input always makes the same choices,
/// so a crash reproduces from its file alone.
struct Picks(u64);

impl Picks {
    fn new(data: &[u8]) -> Picks {
        // FNV-1a; never zero, which xorshift could not leave.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Picks(h | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Ascending cut points strictly inside 0..len, at most `max`.
    fn cuts(&mut self, len: usize, max: usize) -> Vec<usize> {
        if len < 2 {
            return Vec::new();
        }
        let n = self.below(max + 1);
        let mut v: Vec<usize> = (0..n).map(|_| 1 + self.below(len - 1)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// `data` cut at `cuts` (ascending, inside the slice).
fn pieces<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for &c in cuts {
        out.push(&data[at..c]);
        at = c;
    }
    out.push(&data[at..]);
    out
}

/// For a failure message: the input as escaped ASCII, cut to a readable
/// length.
fn show(data: &[u8]) -> String {
    let s = data.escape_ascii().to_string();
    if s.len() > 600 { format!("{}... ({} bytes)", &s[..600], data.len()) } else { s }
}
