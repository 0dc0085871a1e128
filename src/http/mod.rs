//! Protocol-neutral HTTP pieces shared by every connection type: the
//! request view, the response, and the RFC and nginx rules for URIs, ranges,
//! dates, entity tags and error pages.

pub mod date;
pub mod error_html;
pub mod etag;
pub mod field_value;
pub mod range;
pub mod request;
pub mod response;
pub mod uri;
pub mod user_agent;
