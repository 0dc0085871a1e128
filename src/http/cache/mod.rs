//! The HTTP cache (`proxy_cache*`): nginx's directives and decisions, with
//! two tiers. Every stored response is one file under the zone's `levels`
//! directories (`store`, format in `entry`), indexed in memory (`zone`) and
//! kept within `inactive`, `max_size` and `min_free` by a background thread
//! (`manager`) that also rebuilds the index at start; small hot entries are
//! also held in memory (`memory`, TinyLFU admission). On a request, `serve`
//! answers hits before the proxy contacts the origin and decides, from the
//! origin's head (`policy`), whether the response is stored as it streams
//! to the client.

pub mod conf;
pub mod deliver;
pub mod entry;
pub mod manager;
pub mod memory;
pub mod policy;
pub mod purge;
pub mod serve;
pub mod store;
pub mod zone;
