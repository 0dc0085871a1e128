//! Picking the virtual server (by listen address and Host) and then the
//! location (nginx's exact / prefix / regex algorithm).

pub mod location;
pub mod server;
