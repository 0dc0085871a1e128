//! uwsgi (`uwsgi_pass`), as nginx's ngx_http_uwsgi_module: the uWSGI
//! server's own binary protocol, on the upstream core (`crate::http::proxy`)
//! behind its protocol seam (`crate::config::proxy::Protocol::Uwsgi`).
//! What is uwsgi's own:
//!
//! - [`request_head`]: one packet, a 4-byte header (modifier1, the size of
//!   what follows as 16-bit little-endian, modifier2) and the variables
//!   as length-prefixed key/value pairs: the `uwsgi_param`s, then the
//!   request's headers as `HTTP_*`; the body follows as it is;
//! - [`response::parse`]: the answer is an HTTP status line and header
//!   fields (or, without a status line, CGI header lines with `Status:`),
//!   and the body runs to its Content-Length or to the connection's end:
//!   a uwsgi connection carries one request, as in nginx.

pub mod conf;
pub mod response;

use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::request_body::ReqBody;
use crate::log::error::Level;
use crate::log_req;

/// The variables block must fit the header's 16-bit size.
const MAX_VARS: usize = u16::MAX as usize;

/// The request's packet (header and variables); None when the variables
/// do not fit 64 KB (logged at `alert` as nginx does; the caller answers
/// 500).
pub fn request_head(ctx: &mut ReqCtx<'_, '_>, body: &ReqBody) -> Option<Vec<u8>> {
    crate::http::fastcgi::note_body_len(ctx, body);
    let ctx = &*ctx;
    let conf = &ctx.conf.uwsgi;
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(&[conf.modifier1, 0, 0, conf.modifier2]);
    crate::http::fastcgi::each_param(ctx, &conf.params, conf.pass_request_headers, |name, value| {
        push_var(&mut out, name, value)
    });
    let size = out.len() - 4;
    if size > MAX_VARS {
        log_req!(ctx, Level::Alert, "uwsgi request is too big: {}", size);
        return None;
    }
    out[1..3].copy_from_slice(&(size as u16).to_le_bytes());
    Some(out)
}

/// One variable: 16-bit little-endian lengths before key and value. A
/// length past 16 bits is cut here, but then the block is past the limit
/// too and [`request_head`] refuses it (the sizes of the block count the
/// real lengths).
fn push_var(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::push_var;

    #[test]
    fn variables_are_length_prefixed_little_endian() {
        let mut out = Vec::new();
        push_var(&mut out, b"REQUEST_METHOD", b"GET");
        assert_eq!(out, b"\x0e\x00REQUEST_METHOD\x03\x00GET");
        let mut big = Vec::new();
        push_var(&mut big, b"K", &vec![b'x'; 70_000]);
        assert!(big.len() > super::MAX_VARS, "an oversized value makes the block too big");
    }
}
