//! The client side of a gRPC origin connection (`http::grpc::session`):
//! arbitrary origin bytes, fed in pieces of input-chosen sizes, on a
//! connection with a request stream open whose body goes as the windows
//! allow. Properties: no panic; a DATA frame never exceeds the frame size
//! or the windows; once broken, the connection stays broken and is never
//! reusable.

use super::Picks;
use crate::http::grpc::session::{FRAME_SIZE, Session};

pub fn grpc_session(data: &[u8]) {
    let mut picks = Picks::new(data);
    let mut s = Session::new();
    // :method POST, :scheme http, :path /.
    assert!(s.start(b"\x83\x86\x84", false, 4096).is_ok());
    let mut rest = data;
    let mut broken = false;
    while !rest.is_empty() {
        let n = (picks.next() as usize % 64 + 1).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        s.receive(piece);
        let room = s.send_room();
        assert!(room <= FRAME_SIZE);
        if room > 0 && s.error().is_none() {
            s.push_data(&vec![0u8; room.min(7)], false);
        }
        while s.take_data().is_some() {}
        let _ = s.take_head();
        let _ = s.take_trailers();
        if broken {
            assert!(s.error().is_some() && !s.reusable());
        }
        broken = s.error().is_some();
    }
}
