//! The HTTP family, as nginx's `src/http`: the request pipeline
//! (`connection` for HTTP/1 and HTTP/2 -> `routing` -> `handler` with its
//! phases: `rewrite`, `access`, `limit` -> content: static files, `proxy`
//! and the application-server protocols `fastcgi`, `uwsgi`, `scgi` on the
//! shared upstream core -> `cache` -> `filter` -> log), the modules that
//! plug into it (`realip`), and the protocol-neutral pieces every
//! connection type shares: the request view, the response, and the RFC
//! and nginx rules for URIs, ranges, dates, entity tags and error pages.

pub mod access;
pub mod acme_challenge;
pub mod addition;
pub mod api;
pub mod cache;
pub mod charset;
pub mod connection;
pub mod dav;
pub mod fastcgi;
pub mod filter;
pub mod flv;
pub mod geoip;
pub mod geoip2;
pub mod grpc;
pub mod gunzip;
pub mod handler;
pub mod image_filter;
pub mod limit;
pub mod memcached;
pub mod mp4;
pub mod proxy;
pub mod realip;
pub mod rewrite;
pub mod routing;
pub mod scgi;
pub mod slice;
pub mod ssi;
pub mod userid;
pub mod uwsgi;

pub mod date;
pub mod error_html;
pub mod etag;
pub mod field_value;
pub mod fields;
pub mod range;
pub mod request;
pub mod response;
pub mod uri;
pub mod user_agent;
