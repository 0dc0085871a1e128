//! The run-time API's JSON bodies (`upstream::zone::api`): any bytes as a
//! POST (into a server of a zone without a resolver, http and stream) and
//! as a PATCH. Properties: no panic; an error is one of Plus's 400/415
//! answers; an accepted server has a weight of at least 1 and, for a
//! stream zone, a port or a socket.

use std::time::Duration;

use crate::config::proxy::PeerConf;
use crate::upstream::zone::{Zone, ZoneConf, api};

fn zone(l4: bool) -> Zone {
    let conf = ZoneConf {
        family: if l4 { "stream" } else { "http" },
        name: "z".into(),
        resolver: None,
        resolver_timeout: Duration::from_secs(1),
        backups: true,
        check: None,
        state: None,
        l4,
    };
    Zone::new("u", conf, Vec::new())
}

pub fn upstream_api(data: &[u8]) {
    for l4 in [false, true] {
        match api::post_body(&zone(l4), data) {
            Ok(spec) => {
                assert!(spec.params.weight >= 1);
                assert!(!spec.server.is_empty());
                assert!(!l4 || spec.resolve || spec.params.unix.is_some() || spec.params.addr.port() != 0);
            }
            Err(e) => assert!(matches!(e.status, 400 | 415), "{e:?}"),
        }
    }
    let mut p = PeerConf::new("127.0.0.1:80".parse().expect("addr"), None, "127.0.0.1:80".into());
    match api::patch_body(data, &mut p) {
        Ok(()) => assert!(p.weight >= 1),
        Err(e) => assert!(matches!(e.status, 400 | 415), "{e:?}"),
    }
}
