//! SCGI (`scgi_pass`), as nginx's ngx_http_scgi_module, on the upstream
//! core (`crate::http::proxy`) behind its protocol seam
//! (`crate::config::proxy::Protocol::Scgi`). The request is a netstring
//! of NUL-separated names and values (nginx's `CONTENT_LENGTH` first, then
//! the `scgi_param`s, then the request's headers as `HTTP_*`), then the
//! body; the answer is read as uwsgi's ([`crate::http::uwsgi::response`]): CGI
//! lines with `Status:` (or a status line), the body to its length or to
//! the close of a connection that carries one request.

pub mod conf;

use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::request_body::ReqBody;

/// The request's netstring, as [`ngx_http_scgi_create_request`] writes
/// it: `LEN:CONTENT_LENGTH\0N\0...,` where N is the body to be sent (0
/// without one), whatever the client's header said.
pub fn request_head(ctx: &mut ReqCtx<'_, '_>, body: &ReqBody) -> Vec<u8> {
    crate::http::fastcgi::note_body_len(ctx, body);
    let ctx = &*ctx;
    let conf = &ctx.conf.scgi;
    let sent = match body {
        _ if !conf.pass_request_body => 0,
        ReqBody::Buffered(b) => b.len(),
        ReqBody::Streamed(c) => match c.framing() {
            crate::http::proxy::request_body::SendFraming::Length(n) => n,
            _ => 0,
        },
    };
    let mut fields = Vec::with_capacity(1024);
    push_pair(&mut fields, b"CONTENT_LENGTH", sent.to_string().as_bytes());
    crate::http::fastcgi::each_param(ctx, &conf.params, conf.pass_request_headers, |name, value| {
        push_pair(&mut fields, name, value)
    });
    let mut out = Vec::with_capacity(fields.len() + 12);
    out.extend_from_slice(fields.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(&fields);
    out.push(b',');
    out
}

fn push_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.push(0);
    out.extend_from_slice(value);
    out.push(0);
}

#[cfg(test)]
mod tests {
    #[test]
    fn pairs_are_nul_terminated() {
        let mut out = Vec::new();
        super::push_pair(&mut out, b"SCGI", b"1");
        assert_eq!(out, b"SCGI\x001\x00");
    }
}
