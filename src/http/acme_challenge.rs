//! The HTTP-01 responder of the ACME client (`tls::acme`): a plain-HTTP
//! request for `/.well-known/acme-challenge/TOKEN` whose token belongs to
//! a challenge in progress is answered with its key authorization before
//! any location of the configuration runs (nginx-acme answers it in the
//! same phase), on any server of the address, as the CA may reach any.
//! Other tokens go on to the configuration's locations as usual.

use std::borrow::Cow;

use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;

const PREFIX: &[u8] = b"/.well-known/acme-challenge/";

pub fn respond<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Response<'c>> {
    if ctx.conn.tls.is_some() {
        return None;
    }
    let token = ctx.req.path.strip_prefix(PREFIX)?;
    let token = std::str::from_utf8(token).ok()?;
    let key_auth = crate::tls::acme::challenge(token)?;
    log_req!(ctx, Level::Info, "acme: answering http-01 challenge \"{}\"", token);
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/plain"));
    r.body = Body::Owned(key_auth.into_bytes());
    Some(r)
}
