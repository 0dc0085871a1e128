//! QUIC transport pieces shared by whoever serves over QUIC (today HTTP/3,
//! `crate::http::connection::h3`): connection IDs that name the endpoint
//! owning a connection (`cid`), the in-process forwarding of datagrams to
//! that endpoint (`route`), and the process's keys for stateless resets
//! and address-validation tokens (`keys`).
//!
//! Each worker runs its own quinn endpoint per `listen ... quic` address,
//! on its own SO_REUSEPORT socket (or on the one socket all share without
//! `reuseport`). The kernel picks the socket by the datagram's addresses,
//! which changes when a client's port or address changes (NAT rebinding,
//! migration) or when a reload changes the socket group; the connection ID
//! does not, so every endpoint looks at the destination connection ID of
//! what it reads and hands a datagram that belongs to another endpoint
//! over to it. Workers are threads of one process, so the hand-over is a
//! queue, with no BPF program and no second socket.

pub mod cid;
pub mod keys;
pub mod route;
