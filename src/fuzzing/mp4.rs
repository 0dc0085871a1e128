//! The mp4 module's reading of untrusted files.

use crate::http::mp4::{Fail, Outcome, Params, Source, cut};

/// A file held in memory.
struct Bytes<'a>(&'a [u8]);

impl Source for Bytes<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Fail> {
        let from = usize::try_from(offset).expect("an offset inside the file");
        let src = self.0.get(from..from + buf.len()).expect("reads stay inside the file");
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// The first four bytes choose `start` and `end` (tenths of a second, 0
/// for none), `mp4_start_key_frame` and a small or a roomy buffer; the
/// rest is the file. Never panics, never reads outside the file, and a
/// cut is a well-formed answer: `ftyp`, `moov` and the `mdat` header
/// chained by their sizes, the `mdat` size covering exactly the file's
/// bytes sent, which lie inside the file.
pub fn mp4(data: &[u8]) {
    let Some((opts, file)) = data.split_first_chunk::<4>() else { return };
    let start = u64::from(opts[0] & 0x7f) * 100;
    let end = u64::from(opts[1]) * 100;
    let length = end.saturating_sub(start);
    let p = Params {
        start: if opts[0] & 0x80 != 0 && end == 0 { 0 } else { start },
        length,
        start_key_frame: opts[2] & 1 != 0,
        buffer_size: if opts[2] & 2 != 0 { 64 } else { 512 * 1024 },
        max_buffer_size: if opts[3] & 1 != 0 { 256 } else { 1 << 20 },
    };
    match cut(&mut Bytes(file), "fuzz.mp4", p) {
        Err(f) => assert!(!f.msg.is_empty()),
        Ok(Outcome::Whole) => {}
        Ok(Outcome::Cut { head, offset, len }) => {
            assert!(offset.checked_add(len).is_some_and(|e| e <= file.len() as u64), "{offset}+{len}");
            let mut at = 0usize;
            let mut names = Vec::new();
            while at < head.len() {
                let size = u32::from_be_bytes(head[at..at + 4].try_into().expect("4 bytes"));
                let name = &head[at + 4..at + 8];
                names.push(name.to_vec());
                if name == b"mdat" {
                    let total = if size == 1 {
                        u64::from_be_bytes(head[at + 8..at + 16].try_into().expect("8 bytes"))
                    } else {
                        u64::from(size)
                    };
                    assert_eq!(total, (head.len() - at) as u64 + len, "mdat covers the data sent");
                    break;
                }
                at += size as usize;
            }
            let want: &[&[u8]] = if names.len() == 3 { &[b"ftyp", b"moov", b"mdat"] } else { &[b"moov", b"mdat"] };
            assert_eq!(names, want, "the head's atoms");
        }
    }
}
