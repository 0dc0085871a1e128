//! The reverse proxy's upstream side: `upstream` blocks and the choice of a peer for each request.

pub mod balance;
pub mod bind;
pub mod check;
pub mod peers;
pub mod queue;
pub mod sticky;
pub mod traffic;
pub mod zone;
