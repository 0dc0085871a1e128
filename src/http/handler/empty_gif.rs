//! `empty_gif`: the 1x1 transparent GIF nginx serves, byte for byte.

use std::borrow::Cow;

use super::ctx::ReqCtx;
use crate::http::request::Method;
use crate::http::response::{Body, Response};

/// The same 43 bytes as nginx's `ngx_empty_gif`.
pub static EMPTY_GIF: [u8; 43] = [
    b'G', b'I', b'F', b'8', b'9', b'a', // header
    0x01, 0x00, 0x01, 0x00, // 1x1 logical screen
    0x80, 0x01, 0x00, // global 1-bit colour table, background #1, no aspect ratio
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // graphic control: colour #1 transparent
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
    0x02, 0x02, 0x4c, 0x01, 0x00, // LZW data
    0x3b, // trailer
];

/// nginx sets this fixed Last-Modified (Mon, 28 Sep 1970 06:00:00 GMT).
const LAST_MODIFIED: u64 = 23_349_600;

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>) -> Response<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return super::error(ctx, 405);
    }
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("image/gif"));
    r.last_modified = Some(LAST_MODIFIED);
    r.body = Body::Static(&EMPTY_GIF);
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_43_bytes_of_gif() {
        assert_eq!(super::EMPTY_GIF.len(), 43);
        assert!(super::EMPTY_GIF.starts_with(b"GIF89a"));
        assert_eq!(super::EMPTY_GIF[42], 0x3b);
    }
}
