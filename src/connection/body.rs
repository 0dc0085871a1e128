//! Request bodies. Every handler so far ignores them, so bodies are read and
//! dropped (nginx's discard), keeping the framing exact so the next request
//! on the connection starts where it should.

use std::time::Duration;

use super::h1::chunked::Decoder;
use super::h1::conn::Conn;
use crate::http::request::BodyKind;

/// Reads and drops the body that follows the head already consumed from
/// `c.rbuf`; on error the connection must close.
pub async fn discard(c: &mut Conn, kind: BodyKind, max: u64, timeout: Duration) -> Result<(), String> {
    match kind {
        BodyKind::None => Ok(()),
        BodyKind::Length(mut left) => loop {
            let take = (left.min(c.rbuf.len() as u64)) as usize;
            c.rbuf.drain(..take);
            left -= take as u64;
            if left == 0 {
                return Ok(());
            }
            read_more(c, timeout).await?;
        },
        BodyKind::Chunked => {
            let mut d = Decoder::default();
            loop {
                let used = d.feed(&c.rbuf, |_| {}).map_err(|_| "client sent invalid chunked body".to_string())?;
                c.rbuf.drain(..used);
                if max > 0 && d.total > max {
                    return Err(format!("client intended to send too large chunked body: {} bytes", d.total));
                }
                if d.is_done() {
                    return Ok(());
                }
                read_more(c, timeout).await?;
            }
        }
    }
}

async fn read_more(c: &mut Conn, timeout: Duration) -> Result<(), String> {
    if c.rbuf.capacity() - c.rbuf.len() < 1024 {
        c.rbuf.reserve(16 * 1024);
    }
    match tokio::time::timeout(timeout, c.stream.read_some(&mut c.rbuf)).await {
        Err(_) => Err("client timed out (110: Connection timed out)".into()),
        Ok(Ok(0)) => Err("client prematurely closed connection".into()),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("recv() failed ({e})")),
    }
}
