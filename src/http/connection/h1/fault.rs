//! A request whose handling panicked, on HTTP/1: see `worker::unwind`.

use super::conn::Conn;
use crate::config::model::ListenGroup;
use crate::log::error::Level;
use crate::log_to;

/// A request whose handling panicked (caught by `worker::unwind::Guarded`):
/// an `alert` line naming it; then nginx's 500 page with Connection: close
/// when no response head was written yet, or just the close (what was
/// written stays unsent, so a response cut short never looks complete).
pub(super) async fn panicked(
    c: &mut Conn,
    g: &ListenGroup,
    w: &crate::worker::WorkerCtx,
    p: &crate::worker::unwind::Panic,
) {
    log_to!(
        g.default_server.conf.error_log,
        Level::Alert,
        "*{} request processing panicked: {}, {}",
        c.info.id,
        p,
        super::conn::partial_suffix(&c.rbuf, &c.info, g)
    );
    crate::http::proxy::settle_orphans(w);
    if c.answered {
        c.wbuf.clear();
        c.linger = true;
        return;
    }
    super::conn::send_error(c, g, w, 500, crate::clock::mono()).await;
}
