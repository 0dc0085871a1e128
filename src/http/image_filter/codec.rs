//! The image half of the image filter, free of requests: recognising the
//! type from the first bytes and reading the dimensions from the header
//! as nginx's `ngx_http_image_test` and `ngx_http_image_size` do, then
//! decoding, resizing, cropping, rotating, sharpening and encoding again
//! (nginx's `ngx_http_image_resize` over libgd, here over the `image` and
//! `gif` crates).
//!
//! Everything here takes bytes from a client, an origin or a file, so it
//! returns errors and never panics on its input; the decoders get a bound
//! on the pixels they may allocate ([`MAX_PIXELS`]) before they allocate
//! any, and the caller also runs [`transform`] under `catch_unwind`.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, RgbaImage};

/// The most pixels a decoded image may have: 32 Mi (128 MiB as RGBA,
/// e.g. 8192 × 4096). nginx bounds the encoded size only
/// (`image_filter_buffer`); a small file can declare a huge canvas, so the
/// decoded size is bounded too and a larger image is unsupported (415).
pub const MAX_PIXELS: u64 = 32 * 1024 * 1024;

/// The most any one decoder allocation may take (the pixels and the
/// decoder's own buffers).
const MAX_ALLOC: u64 = 256 * 1024 * 1024;

/// The types nginx recognises, in its order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Jpeg,
    Gif,
    Png,
    Webp,
}

impl Kind {
    /// The Content-Type nginx sets for it.
    pub fn mime(self) -> &'static str {
        match self {
            Kind::Jpeg => "image/jpeg",
            Kind::Gif => "image/gif",
            Kind::Png => "image/png",
            Kind::Webp => "image/webp",
        }
    }

    /// The name in the `size` JSON (the type without `image/`).
    pub fn name(self) -> &'static str {
        &self.mime()[6..]
    }

    fn format(self) -> ImageFormat {
        match self {
            Kind::Jpeg => ImageFormat::Jpeg,
            Kind::Gif => ImageFormat::Gif,
            Kind::Png => ImageFormat::Png,
            Kind::Webp => ImageFormat::WebP,
        }
    }
}

/// nginx's `ngx_http_image_test`: the type from the first bytes; fewer
/// than 16 bytes is no image.
pub fn sniff(p: &[u8]) -> Option<Kind> {
    if p.len() < 16 {
        return None;
    }
    if p[0] == 0xff && p[1] == 0xd8 {
        Some(Kind::Jpeg)
    } else if &p[..4] == b"GIF8" && p[5] == b'a' {
        matches!(p[4], b'9' | b'7').then_some(Kind::Gif)
    } else if p[..8] == *b"\x89PNG\r\n\x1a\n" {
        Some(Kind::Png)
    } else if &p[..4] == b"RIFF" && &p[8..12] == b"WEBP" {
        Some(Kind::Webp)
    } else {
        None
    }
}

/// What the header says, as nginx reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Size {
    pub width: u64,
    pub height: u64,
    /// A JPEG whose application segments (EXIF, XMP...) take more than 5%
    /// of it: nginx converts it even when it is small enough, to drop them.
    pub force: bool,
}

/// nginx's `ngx_http_image_size`: the dimensions from the header (None
/// where nginx declines: no frame header, a short file, a bad WebP chunk).
/// nginx reads two bytes of each 4-byte PNG dimension; so does this.
pub fn size(kind: Kind, p: &[u8]) -> Option<Size> {
    let at = |i: usize| u64::from(p.get(i).copied().unwrap_or(0));
    let (width, height, force) = match kind {
        Kind::Jpeg => {
            let last = p.len().checked_sub(10)?;
            let (mut i, mut w, mut h, mut app) = (2usize, 0u64, 0u64, 0u64);
            while i < last {
                if p[i] == 0xff && p[i + 1] != 0xff {
                    i += 1;
                    let m = p[i];
                    if matches!(m, 0xc0..=0xc3 | 0xc9..=0xcb) && (w == 0 || h == 0) {
                        w = at(i + 6) * 256 + at(i + 7);
                        h = at(i + 4) * 256 + at(i + 5);
                    }
                    let len = at(i + 1) * 256 + at(i + 2);
                    if (0xe1..=0xef).contains(&m) {
                        app += len;
                    }
                    i = i.saturating_add(len as usize);
                    continue;
                }
                i += 1;
            }
            if w == 0 || h == 0 {
                return None;
            }
            (w, h, (p.len() as u64) / 20 < app)
        }
        Kind::Gif => {
            if p.len() < 10 {
                return None;
            }
            (at(7) * 256 + at(6), at(9) * 256 + at(8), false)
        }
        Kind::Png => {
            if p.len() < 24 {
                return None;
            }
            (at(18) * 256 + at(19), at(22) * 256 + at(23), false)
        }
        Kind::Webp => {
            if p.len() < 30 || &p[12..15] != b"VP8" {
                return None;
            }
            match p[15] {
                b' ' => {
                    // A key frame with its start code.
                    if p[20] & 1 != 0 || p[23..26] != [0x9d, 0x01, 0x2a] {
                        return None;
                    }
                    ((at(26) | at(27) << 8) & 0x3fff, (at(28) | at(29) << 8) & 0x3fff, false)
                }
                b'L' => {
                    if p[20] != 0x2f {
                        return None;
                    }
                    let w = ((at(21) | at(22) << 8) & 0x3fff) + 1;
                    let h = ((at(22) >> 6 | at(23) << 2 | at(24) << 10) & 0x3fff) + 1;
                    (w, h, false)
                }
                b'X' => ((at(24) | at(25) << 8 | at(26) << 16) + 1, (at(27) | at(28) << 8 | at(29) << 16) + 1, false),
                _ => return None,
            }
        }
    };
    Some(Size { width, height, force })
}

/// nginx's `size` answer: `{}` when the header could not be read.
pub fn json(kind: Kind, size: Option<Size>) -> Vec<u8> {
    match size {
        Some(s) => format!(
            "{{ \"img\" : {{ \"width\": {}, \"height\": {}, \"type\": \"{}\" }} }}\r\n",
            s.width,
            s.height,
            kind.name()
        )
        .into_bytes(),
        None => b"{}\r\n".to_vec(),
    }
}

/// "No limit" for a width or height given as `-`.
pub const UNLIMITED: u64 = u64::MAX;

/// The operation, with the values of its variables for this request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Rotate,
    Resize,
    Crop,
}

/// Everything [`transform`] needs.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub op: Op,
    pub max_width: u64,
    pub max_height: u64,
    /// 0 for none; nginx only turns by 90, 180 or 270 (counter-clockwise)
    /// but re-encodes for any other non-zero value.
    pub angle: u64,
    pub jpeg_quality: u64,
    pub sharpen: u64,
    pub transparency: bool,
    pub interlace: bool,
}

/// What [`transform`] made of an image.
#[derive(Debug)]
pub enum Outcome {
    /// Small enough already: the original bytes go out.
    AsIs,
    /// The new image, in the input's format.
    Image(Vec<u8>),
    /// Not decodable, too large or not encodable: nginx's 415 (the reason
    /// is for the error log).
    Failed(String),
}

/// nginx's `ngx_http_image_resize` from the decode on: `size` is what the
/// header said (for the `force` flag).
pub fn transform(kind: Kind, data: &[u8], size: Option<Size>, p: &Params) -> Outcome {
    let force = size.is_some_and(|s| s.force);
    let (mut img, palette) = match decode(kind, data) {
        Ok(v) => v,
        Err(e) => return Outcome::Failed(e),
    };
    let (sx, sy) = (u64::from(img.width()), u64::from(img.height()));
    if !force && p.angle == 0 && sx <= p.max_width && sy <= p.max_height {
        return Outcome::AsIs;
    }
    // A palette image's transparent colour is kept unless
    // `image_filter_transparency off`, which makes it its plain colour; a
    // true-colour image keeps its alpha channel either way, as libgd.
    if palette && !p.transparency {
        for px in img.pixels_mut() {
            px.0[3] = 255;
        }
    }
    let (mut dx, mut dy) = (sx, sy);
    let resize = match p.op {
        Op::Resize => {
            if dx > p.max_width {
                dy = (dy * p.max_width / dx).max(1);
                dx = p.max_width;
            }
            if dy > p.max_height {
                dx = (dx * p.max_height / dy).max(1);
                dy = p.max_height;
            }
            true
        }
        Op::Rotate => false,
        Op::Crop => {
            let mut resize = false;
            if (dx as f64 / dy as f64) < (p.max_width as f64 / p.max_height as f64) {
                if dx > p.max_width {
                    dy = (dy * p.max_width / dx).max(1);
                    dx = p.max_width;
                    resize = true;
                }
            } else if dy > p.max_height {
                dx = (dx * p.max_height / dy).max(1);
                dy = p.max_height;
                resize = true;
            }
            resize
        }
    };
    if resize && (dx, dy) != (sx, sy) {
        // Both fit in u32: each is at most the source's.
        img = image::imageops::resize(&img, dx as u32, dy as u32, image::imageops::FilterType::Triangle);
    }
    match p.angle {
        90 => img = image::imageops::rotate270(&img),
        180 => img = image::imageops::rotate180(&img),
        270 => img = image::imageops::rotate90(&img),
        _ => {}
    }
    let (dx, dy) = (u64::from(img.width()), u64::from(img.height()));
    if p.op == Op::Crop {
        let ox = dx.saturating_sub(p.max_width);
        let oy = dy.saturating_sub(p.max_height);
        if ox > 0 || oy > 0 {
            img = image::imageops::crop_imm(&img, (ox / 2) as u32, (oy / 2) as u32, (dx - ox) as u32, (dy - oy) as u32)
                .to_image();
        }
    }
    if p.sharpen > 0 {
        img = sharpen(&img, p.sharpen);
    }
    match encode(kind, &img, p) {
        Ok(out) => Outcome::Image(out),
        Err(e) => Outcome::Failed(e),
    }
}

/// Decodes within the bounds; also says whether the source had a palette
/// (GIF, indexed PNG), which decides what `image_filter_transparency`
/// does.
pub fn decode(kind: Kind, data: &[u8]) -> Result<(RgbaImage, bool), String> {
    let mut reader = image::ImageReader::with_format(Cursor::new(data), kind.format());
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_ALLOC);
    reader.limits(limits);
    let (w, h) = reader.into_dimensions().map_err(|e| format!("{} decoding failed: {e}", kind.name()))?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS || w == 0 || h == 0 {
        return Err(format!("{} of {w}x{h} pixels is too large", kind.name()));
    }
    let mut reader = image::ImageReader::with_format(Cursor::new(data), kind.format());
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_ALLOC);
    limits.max_image_width = Some(w);
    limits.max_image_height = Some(h);
    reader.limits(limits);
    let img: DynamicImage = reader.decode().map_err(|e| format!("{} decoding failed: {e}", kind.name()))?;
    let palette = match kind {
        Kind::Gif => true,
        // IHDR's colour type 3: indexed.
        Kind::Png => data.get(25) == Some(&3),
        _ => false,
    };
    Ok((img.into_rgba8(), palette))
}

/// libgd's `gdImageSharpen`: each pixel moved away from the mean of its
/// four neighbours by `pct` percent of the difference.
fn sharpen(img: &RgbaImage, pct: u64) -> RgbaImage {
    let k = pct.min(10_000) as f32 / 100.0;
    let (w, h) = img.dimensions();
    let mut out = img.clone();
    for y in 0..h {
        for x in 0..w {
            let c = img.get_pixel(x, y).0;
            let n = [
                img.get_pixel(x.saturating_sub(1), y).0,
                img.get_pixel((x + 1).min(w - 1), y).0,
                img.get_pixel(x, y.saturating_sub(1)).0,
                img.get_pixel(x, (y + 1).min(h - 1)).0,
            ];
            let px = out.get_pixel_mut(x, y);
            for ch in 0..3 {
                let mean = n.iter().map(|p| f32::from(p[ch])).sum::<f32>() / 4.0;
                let v = f32::from(c[ch]) + k * (f32::from(c[ch]) - mean);
                px.0[ch] = v.round().clamp(0.0, 255.0) as u8;
            }
        }
    }
    out
}

/// libgd's comment in every JPEG it writes, which tools (and nginx's
/// tests) read the quality from.
fn gd_comment(quality: u64) -> Vec<u8> {
    format!("CREATOR: gd-jpeg v1.0 (using IJG JPEG v62), quality = {quality}\n").into_bytes()
}

/// Encodes in the input's format.
fn encode(kind: Kind, img: &RgbaImage, p: &Params) -> Result<Vec<u8>, String> {
    use image::ImageEncoder;
    let (w, h) = img.dimensions();
    let mut out = Vec::new();
    let opaque = img.pixels().all(|px| px.0[3] == 255);
    match kind {
        Kind::Jpeg => {
            let rgb = DynamicImage::ImageRgba8(img.clone()).into_rgb8();
            let q = p.jpeg_quality.clamp(1, 100) as u8;
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, q)
                .write_image(rgb.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(|e| format!("jpeg encoding failed: {e}"))?;
            // A COM segment right after SOI.
            let c = gd_comment(p.jpeg_quality);
            let len = (c.len() + 2) as u16;
            let mut seg = vec![0xff, 0xfe];
            seg.extend_from_slice(&len.to_be_bytes());
            seg.extend_from_slice(&c);
            if out.len() >= 2 {
                let rest = out.split_off(2);
                out.extend_from_slice(&seg);
                out.extend_from_slice(&rest);
            }
        }
        Kind::Png => {
            let enc = image::codecs::png::PngEncoder::new(&mut out);
            let r = if opaque {
                let rgb = DynamicImage::ImageRgba8(img.clone()).into_rgb8();
                enc.write_image(rgb.as_raw(), w, h, image::ExtendedColorType::Rgb8)
            } else {
                enc.write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
            };
            r.map_err(|e| format!("png encoding failed: {e}"))?;
        }
        Kind::Webp => {
            image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
                .map_err(|e| format!("webp encoding failed: {e}"))?;
        }
        Kind::Gif => out = gif(img, p.interlace)?,
    }
    Ok(out)
}

/// A one-frame GIF: an exact palette when the image has at most 256
/// colours (else NeuQuant's), transparent pixels as the transparent
/// index, rows in the four-pass order when interlaced.
fn gif(img: &RgbaImage, interlace: bool) -> Result<Vec<u8>, String> {
    let (w, h) = img.dimensions();
    let (w16, h16) = match (u16::try_from(w), u16::try_from(h)) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return Err("gif dimensions out of range".into()),
    };
    let mut rgba = img.as_raw().clone();
    // Transparent pixels all alike, so that they share one index.
    for px in rgba.chunks_exact_mut(4) {
        if px[3] < 128 {
            px.copy_from_slice(&[0, 0, 0, 0]);
        } else {
            px[3] = 255;
        }
    }
    let mut frame = gif::Frame::from_rgba_speed(w16, h16, &mut rgba, 10);
    if interlace {
        let row = usize::from(w16);
        let src = frame.buffer.to_vec();
        let mut order = Vec::with_capacity(src.len());
        for (start, step) in [(0, 8), (4, 8), (2, 4), (1, 2)] {
            for y in (start..usize::from(h16)).step_by(step) {
                order.extend_from_slice(&src[y * row..(y + 1) * row]);
            }
        }
        frame.buffer = order.into();
        frame.interlaced = true;
    }
    let failed = |e: gif::EncodingError| format!("gif encoding failed: {e}");
    let mut enc = gif::Encoder::new(Vec::new(), w16, h16, &[]).map_err(failed)?;
    enc.write_frame(&frame).map_err(failed)?;
    enc.into_inner().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_as_nginx() {
        assert_eq!(sniff(b"\xff\xd8\xff\xe0rest of a jpeg.."), Some(Kind::Jpeg));
        assert_eq!(sniff(b"GIF89a.........."), Some(Kind::Gif));
        assert_eq!(sniff(b"GIF88a.........."), None);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n........"), Some(Kind::Png));
        assert_eq!(sniff(b"RIFF....WEBPVP8 "), Some(Kind::Webp));
        assert_eq!(sniff(b"GIF89a"), None, "fewer than 16 bytes");
    }

    #[test]
    fn json_as_nginx_writes_it() {
        let s = Size { width: 100, height: 120, force: false };
        assert_eq!(
            json(Kind::Jpeg, Some(s)),
            b"{ \"img\" : { \"width\": 100, \"height\": 120, \"type\": \"jpeg\" } }\r\n"
        );
        assert_eq!(json(Kind::Png, None), b"{}\r\n");
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = RgbaImage::from_fn(w, h, |x, _| image::Rgba([(x % 256) as u8, 0, 0, 255]));
        let mut out = Vec::new();
        image::codecs::png::PngEncoder::new(&mut out)
            .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
            .unwrap();
        out
    }

    fn params(op: Op, max_width: u64, max_height: u64, angle: u64) -> Params {
        Params { op, max_width, max_height, angle, jpeg_quality: 75, sharpen: 0, transparency: true, interlace: false }
    }

    fn dims(out: Outcome) -> (u32, u32) {
        match out {
            Outcome::Image(b) => {
                let (img, _) = decode(Kind::Png, &b).unwrap();
                img.dimensions()
            }
            other => panic!("{other:?}"),
        }
    }

    use image::ImageEncoder;

    #[test]
    fn nginxs_arithmetic() {
        // nginx-tests' image_filter.t expectations on a 100x120 image.
        let src = png(100, 120);
        let size = size(Kind::Png, &src);
        assert_eq!(size, Some(Size { width: 100, height: 120, force: false }));
        let t = |op, w, h, a| dims(transform(Kind::Png, &src, size, &params(op, w, h, a)));
        assert_eq!(t(Op::Resize, 10, 12, 0), (10, 12));
        assert_eq!(t(Op::Resize, 10, UNLIMITED, 0), (10, 12));
        assert_eq!(t(Op::Resize, UNLIMITED, 12, 0), (10, 12));
        assert_eq!(t(Op::Crop, 60, 80, 0), (60, 80));
        assert_eq!(t(Op::Rotate, 0, 0, 90), (120, 100));
        assert_eq!(t(Op::Crop, 5, 6, 90), (5, 5), "rotate before crop");
        assert_eq!(t(Op::Resize, 5, 6, 90), (6, 5), "rotate after resize");
        assert!(matches!(transform(Kind::Png, &src, size, &params(Op::Resize, 100, 120, 0)), Outcome::AsIs));
    }

    #[test]
    fn a_huge_canvas_is_refused_before_decoding() {
        let mut p = png(2, 2);
        // IHDR's width: 2^20.
        p[16..20].copy_from_slice(&(1u32 << 20).to_be_bytes());
        p[20..24].copy_from_slice(&(1u32 << 20).to_be_bytes());
        assert!(decode(Kind::Png, &p).is_err());
    }

    #[test]
    fn webp_headers() {
        // nginx-tests' image_filter_webp.t lossy 1x1 image.
        let mut v = b"RIFF\x22\0\0\0WEBPVP8 ".to_vec();
        for n in [0x16000000u32, 0x3001009d, 0x012a0100, 0x01000ec0, 0xfe25a400, 0x03700000] {
            v.extend_from_slice(&n.to_be_bytes());
        }
        v.extend_from_slice(&[0, 0]);
        assert_eq!(size(Kind::Webp, &v), Some(Size { width: 1, height: 1, force: false }));
        assert_eq!(size(Kind::Webp, &v[..29]), None);
    }
}
