//! Session persistence: NGINX Plus's `sticky` (the open-source nginx
//! 1.29 spelling is the same), a layer in front of whichever balancer the
//! upstream has (round robin, least_conn, hash, ip_hash, random).
//!
//! Every peer has a sticky id: its `route=` parameter, or the hex MD5 of
//! its address (`127.0.0.1:8080`, `[::1]:80`, `unix:/path`) as NGINX Plus
//! computes it ([`peer_id`]). A request brings an id (the cookie's value,
//! the first non-empty `sticky route` variable, or what the `learn` table
//! holds for its `lookup` value); [`choose`] finds the peer with that id
//! among those the request may use now (not `down`, not failed out by
//! `max_fails`, below `max_conns`, not yet tried by this request; a
//! drained peer stays usable, as in Plus). When it finds none the request
//! is balanced as if it carried nothing, and the balancer's own state (the
//! round robin's weights) is left untouched by sticky picks, as in nginx.
//!
//! * `conf`: the directive, with nginx's parameters and messages.
//! * `learn`: `sticky learn`'s session table, one per `zone=` name for the
//!   whole process (workers are threads), kept across reloads.
//!
//! The HTTP half (reading the request's variables, the `Set-Cookie` of the
//! cookie method, recording a learned session once the response is done)
//! is `crate::http::proxy::sticky`.

pub mod conf;
pub mod learn;

use std::sync::Arc;

use crate::config::proxy::PeerConf;
use crate::upstream::balance::{PeerInfo, PeerView, Selection};
use crate::variables::Template;

/// An upstream's `sticky` directive.
#[derive(Debug)]
pub enum Sticky {
    Cookie(CookieConf),
    /// `sticky route $a $b ...`: the first non-empty value is the id.
    Route(Vec<Template>),
    Learn(Learn),
}

/// `sticky cookie NAME [expires=] [domain=] [path=] [httponly] [secure]
/// [samesite=]`.
#[derive(Debug)]
pub struct CookieConf {
    pub name: String,
    pub expires: Option<Expires>,
    /// May hold variables; an empty value leaves the attribute out.
    pub domain: Option<Template>,
    pub path: Option<String>,
    pub httponly: bool,
    pub secure: bool,
    pub samesite: Option<SameSite>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expires {
    /// `expires=max`: "Thu, 31-Dec-37 23:55:55 GMT", max-age ten years.
    Max,
    Secs(u64),
}

#[derive(Debug)]
pub enum SameSite {
    Strict,
    Lax,
    None,
    /// `samesite=$var`: `strict`, `lax` or `none` (any case) as given,
    /// anything else is `strict`, empty leaves the attribute out.
    Var(Template),
}

/// `sticky learn create=$v lookup=$v zone=NAME:SIZE [timeout=T] [header]`
/// (`create=` and `lookup=` repeatable: the first non-empty value counts).
#[derive(Debug)]
pub struct Learn {
    pub create: Vec<Template>,
    pub lookup: Vec<Template>,
    pub table: Arc<learn::Table>,
    /// `header`: the session is learned when the response head arrives,
    /// not when the request is done.
    pub header: bool,
}

/// A peer's sticky id: its `route=`, or the lowercase hex MD5 of its
/// address as nginx prints it (`ngx_sock_ntop` with the port).
pub fn peer_id(p: &PeerConf) -> Arc<str> {
    if let Some(r) = &p.route {
        return r.clone();
    }
    let addr = match &p.unix {
        Some(path) => format!("unix:{}", path.display()),
        None => p.addr.to_string(),
    };
    use md5::Digest;
    let digest = md5::Md5::digest(addr.as_bytes());
    let mut hex = String::with_capacity(32);
    for b in digest.iter() {
        hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    hex.into()
}

/// The peer a request carrying sticky id `want` goes to: the first primary
/// with that id it may use; a backup with that id only when no primary is
/// usable at all (as the balancer would then use the backups). `views`
/// are the peers' states with a drained peer still usable (the caller
/// leaves `drain` out of them for this call); `ids` are [`peer_id`]s.
pub fn choose(peers: &[PeerInfo], views: &[PeerView], ids: &[Arc<str>], sel: &Selection, want: &[u8]) -> Option<usize> {
    if want.is_empty() {
        return None;
    }
    let avail =
        |i: usize| !sel.is_tried(i) && peers.get(i).is_some_and(|p| !p.down) && views.get(i).is_some_and(|v| v.usable);
    let matches = |i: usize| ids.get(i).is_some_and(|id| id.as_bytes() == want);
    let n = peers.len();
    if let Some(i) = (0..n).find(|&i| !peers[i].backup && matches(i) && avail(i)) {
        return Some(i);
    }
    if (0..n).any(|i| !peers[i].backup && avail(i)) {
        return None;
    }
    (0..n).find(|&i| peers[i].backup && matches(i) && avail(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(addr: &str) -> PeerConf {
        PeerConf::new(addr.parse().unwrap(), None, addr.into())
    }

    #[test]
    fn ids_are_route_or_md5_of_the_address() {
        // printf '127.0.0.1:8081' | md5sum
        assert_eq!(&*peer_id(&conf("127.0.0.1:8081")), "df2b80dc43705d28db9be6f29fe58da3");
        let mut c = conf("127.0.0.1:8081");
        c.route = Some("a".into());
        assert_eq!(&*peer_id(&c), "a");
        let u = PeerConf::new(conf("0.0.0.0:0").addr, Some("/run/app.sock".into()), "unix:/run/app.sock".into());
        assert_eq!(peer_id(&u).len(), 32);
        assert_ne!(peer_id(&u), peer_id(&conf("127.0.0.1:8081")));
    }

    fn infos(backup: &[bool]) -> Vec<PeerInfo> {
        backup.iter().enumerate().map(|(i, &b)| PeerInfo { backup: b, ..PeerInfo::new(format!("p{i}")) }).collect()
    }

    fn ids(v: &[&str]) -> Vec<Arc<str>> {
        v.iter().map(|s| Arc::from(*s)).collect()
    }

    #[test]
    fn primaries_first_backups_only_when_no_primary_is_usable() {
        let peers = infos(&[false, false, true, true]);
        let ids = ids(&["0", "1", "1", "2"]);
        let mut views = vec![PeerView { usable: true, conns: 0 }; 4];
        let sel = Selection::new();
        assert_eq!(choose(&peers, &views, &ids, &sel, b"1"), Some(1));
        assert_eq!(choose(&peers, &views, &ids, &sel, b"2"), None, "primaries alive: backup not by id");
        assert_eq!(choose(&peers, &views, &ids, &sel, b""), None);
        assert_eq!(choose(&peers, &views, &ids, &sel, b"9"), None);
        views[0].usable = false;
        views[1].usable = false;
        assert_eq!(choose(&peers, &views, &ids, &sel, b"2"), Some(3));
        assert_eq!(choose(&peers, &views, &ids, &sel, b"1"), Some(2), "same id: the live one");
        let mut sel = Selection::new();
        sel.mark_tried(3);
        assert_eq!(choose(&peers, &views, &ids, &sel, b"2"), None, "tried by this request");
        let mut down = infos(&[false, false]);
        down[1].down = true;
        assert_eq!(choose(&down, &views[..2], &ids[..2], &Selection::new(), b"1"), None);
    }
}
