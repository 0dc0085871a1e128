//! The uwsgi server's answer: an HTTP status line and header fields, read
//! as the proxy reads an origin's (`crate::http::proxy::response_head`), or,
//! when it does not start with `HTTP/`, CGI header lines (`Status:`) as
//! FastCGI's are read, as nginx's uwsgi module falls back. The connection
//! is never reused: the body runs to its Content-Length or to the close.

use crate::config::proxy::UpstreamConf;
use crate::http::proxy::response_head::{Framing, HeadError, ResponseHead};

pub fn parse(buf: &[u8], head_request: bool, conf: &UpstreamConf) -> Result<Option<ResponseHead>, HeadError> {
    const HTTP: &[u8] = b"HTTP/";
    if buf.len() < HTTP.len() && HTTP.starts_with(buf) {
        return Ok(None);
    }
    let mut h = if buf.starts_with(HTTP) {
        match crate::http::proxy::response_head::parse_response(buf, head_request, conf)? {
            Some(h) => h,
            None => return Ok(None),
        }
    } else {
        match crate::http::fastcgi::response::parse_cgi_head(buf, conf)? {
            Some((len, mut h)) => {
                h.head_len = len;
                h.framing = match h.framing {
                    _ if head_request => Framing::None(None),
                    Framing::Length(n) => Framing::Length(n),
                    _ => Framing::Close,
                };
                h
            }
            None => return Ok(None),
        }
    };
    h.keep_alive = false;
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> UpstreamConf {
        UpstreamConf::new(std::path::PathBuf::from("/tmp"))
    }

    #[test]
    fn status_line_or_cgi_head_never_kept_alive() {
        let h = parse(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", false, &conf()).unwrap().unwrap();
        assert_eq!((h.status, h.keep_alive), (201, false));
        assert!(matches!(h.framing, Framing::Length(2)));
        let h = parse(b"Status: 404 Nope\r\nX-A: b\r\n\r\nbody", false, &conf()).unwrap().unwrap();
        assert_eq!((h.status, h.head_len, h.keep_alive), (404, 28, false));
        assert!(matches!(h.framing, Framing::Close));
        assert!(parse(b"HTT", false, &conf()).unwrap().is_none(), "may still be a status line");
        assert!(parse(b"Status: 200\r\n", false, &conf()).unwrap().is_none(), "head not ended");
        assert!(parse(b"\x01garbage\r\n\r\n", false, &conf()).is_err());
    }
}
