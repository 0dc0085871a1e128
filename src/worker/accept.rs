//! The accept loop of one listening socket in one worker, enforcing
//! `worker_connections`: when the worker is full it stops accepting (the
//! kernel queues, or another worker takes them) until a slot frees.

use std::rc::Rc;

use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::{ConnGuard, WorkerCtx};
use crate::log::error::Level;
use crate::log_error;

pub async fn run(listener: TcpListener, group: usize, w: Rc<WorkerCtx>, stop: Rc<Notify>) {
    let addr = w.cfg.http.listens[group].addr;
    let wildcard = addr.ip().is_unspecified();
    loop {
        while w.active.get() >= w.max_conns {
            log_error!(Level::Alert, "{} worker_connections are not enough", w.max_conns);
            tokio::select! {
                _ = w.slot.notified() => {}
                _ = stop.notified() => return,
            }
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.notified() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let local = if wildcard { stream.local_addr().unwrap_or(addr) } else { addr };
                // A wildcard socket also carries addresses that have their own
                // servers (`listen 127.0.0.1:80` beside `listen 80`).
                let group = if wildcard {
                    w.cfg.http.listens.iter().position(|g| g.addr == local).unwrap_or(group)
                } else {
                    group
                };
                let guard = ConnGuard::new(w.clone());
                let info = crate::handler::ctx::ConnInfo { peer, local, id: w.next_serial(), requests: 0 };
                tokio::task::spawn_local(crate::connection::h1::conn::serve(stream, info, group, guard));
            }
            Err(e) => {
                // EMFILE and friends: log, back off briefly, keep serving.
                log_error!(Level::Crit, "accept4() failed ({})", e);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
