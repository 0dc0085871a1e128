//! The image filter's reading of untrusted bytes.

use crate::http::image_filter::codec::{self, Op, Outcome, Params};

/// Sniffing, nginx's header reading and the decode-and-transform path on
/// arbitrary bytes: never a panic, and a decoded image within the pixel
/// bound. Inputs whose header claims more pixels than a quick run allows
/// are only sniffed and measured.
pub fn image_filter(data: &[u8]) {
    let Some(kind) = codec::sniff(data) else { return };
    let size = codec::size(kind, data);
    let json = codec::json(kind, size);
    assert!(json.ends_with(b"\r\n"));
    if let Ok((img, _)) = codec::decode(kind, data) {
        assert!(u64::from(img.width()) * u64::from(img.height()) <= codec::MAX_PIXELS);
        // Keep fuzzing fast: transform small images only.
        if u64::from(img.width()) * u64::from(img.height()) > 1 << 16 {
            return;
        }
        let p = Params {
            op: Op::Crop,
            max_width: 7,
            max_height: 5,
            angle: 90,
            jpeg_quality: 50,
            sharpen: 30,
            transparency: data.len().is_multiple_of(2),
            interlace: data.len().is_multiple_of(3),
        };
        match codec::transform(kind, data, size, &p) {
            Outcome::Image(out) => {
                assert_eq!(codec::sniff(&out), Some(kind), "the output keeps the input's type");
                // The gif crate's decoder refuses some interlaced GIFs
                // that libgd and browsers read (a run of one colour
                // across rows of odd width), so those are not decoded
                // back.
                if !(p.interlace && kind == codec::Kind::Gif) {
                    let (back, _) = codec::decode(kind, &out).expect("the output decodes");
                    assert!(back.width() <= 7 && back.height() <= 5, "{}x{}", back.width(), back.height());
                }
            }
            Outcome::AsIs => panic!("a rotation is never as is"),
            Outcome::Failed(_) => {}
        }
    }
}
