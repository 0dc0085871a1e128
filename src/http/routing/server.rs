//! Virtual server selection by Host, in nginx's order: exact name, longest
//! leading wildcard, longest trailing wildcard, first matching regex, then
//! the default server of the listening address.

use std::sync::Arc;

use crate::config::model::{ListenGroup, Server};

pub use crate::config::server_names::validate_host;

pub fn select<'a>(group: &'a ListenGroup, host: &[u8]) -> &'a Arc<Server> {
    group.names.find(host).map_or(&group.default_server, |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, Source, load};

    #[test]
    fn host_validation() {
        assert_eq!(validate_host(b"Example.COM:8080").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(validate_host(b"example.com.").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(validate_host(b"[::1]:80").as_deref(), Some(&b"[::1]"[..]));
        assert!(validate_host(b"a..b").is_none());
        assert!(validate_host(b"a/b").is_none());
        assert!(validate_host(b"").is_none());
        assert!(validate_host(b":80").is_none());
    }

    #[test]
    fn selection_order() {
        let text = r#"events {} http {
            server { listen 127.0.0.1:1; server_name first; return 200 default; }
            server { listen 127.0.0.1:1; server_name www.example.com; return 200 exact; }
            server { listen 127.0.0.1:1; server_name *.example.com; return 200 front; }
            server { listen 127.0.0.1:1; server_name *.a.example.com; return 200 front-longer; }
            server { listen 127.0.0.1:1; server_name mail.*; return 200 back; }
            server { listen 127.0.0.1:1; server_name ~^api\d+\.test$; return 200 regex; }
            server { listen 127.0.0.1:1 default_server; server_name dflt; return 200 marked; }
        }"#;
        let cfg = load(&LoadOptions {
            prefix: "/tmp".into(),
            source: Source::Text { name: "/tmp/t.conf".into(), text: text.into() },
            globals: None,
            error_log: None,
        })
        .unwrap();
        let g = &cfg.http.listens[0];
        let pick = |h: &str| {
            let s = select(g, h.as_bytes());
            let t = s
                .rewrite
                .as_ref()
                .and_then(|s| s.first_return())
                .and_then(|r| r.text.as_ref())
                .and_then(|t| t.as_literal())
                .unwrap_or(b"?");
            String::from_utf8_lossy(t).into_owned()
        };
        assert_eq!(pick("www.example.com"), "exact");
        assert_eq!(pick("x.example.com"), "front");
        assert_eq!(pick("x.a.example.com"), "front-longer");
        assert_eq!(pick("mail.example.org"), "back");
        assert_eq!(pick("api12.test"), "regex");
        assert_eq!(pick("nothing.here"), "marked");
        assert_eq!(pick("first"), "default");
    }
}
