//! The streaming encoders: gzip (zlib-rs through `flate2`), brotli (the
//! reference C library through `brotlic`, the one ngx_brotli links: the
//! pure-Rust port took 1.2x its CPU per 100 KB page at quality 5) and
//! zstd, fed a piece of body at a time. Each writes into a buffer of its
//! own that is emptied into the caller's after every step, so what one
//! response holds is the encoder's state (its window) plus one step's
//! output, whatever the body's size.

use std::io::{self, Write};

use super::negotiate::Coding;

pub enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotlic::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    /// No encoding: the body goes out as fed (the sub filter alone).
    Identity,
}

impl Encoder {
    /// An encoder at `level` (brotli: with `window` bits); a known body
    /// length shrinks brotli's window to what the body needs, as ngx_brotli
    /// does.
    pub fn new(c: Coding, level: i32, window: u32, len: Option<u64>) -> io::Result<Encoder> {
        Ok(match c {
            Coding::Gzip => {
                let level = flate2::Compression::new(level.clamp(1, 9) as u32);
                // nginx's gzip header: no name, no time, OS "unix".
                Encoder::Gzip(flate2::GzBuilder::new().operating_system(3).write(Vec::new(), level))
            }
            Coding::Br => {
                let mut bits = window;
                if let Some(n) = len.filter(|&n| n > 0) {
                    bits = (10..bits).find(|b| n <= 1u64 << b).unwrap_or(bits);
                }
                let bad = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
                let quality = brotlic::Quality::new(level.clamp(0, 11) as u8).map_err(|e| bad(e.to_string()))?;
                let window = brotlic::WindowSize::new(bits.clamp(10, 24) as u8).map_err(|e| bad(e.to_string()))?;
                let mut opts = brotlic::BrotliEncoderOptions::new();
                opts.quality(quality).window_size(window);
                if let Some(n) = len.and_then(|n| u32::try_from(n).ok()) {
                    opts.size_hint(n);
                }
                let enc = opts.build().map_err(|e| bad(e.to_string()))?;
                Encoder::Br(Box::new(brotlic::CompressorWriter::with_encoder(enc, Vec::new())))
            }
            Coding::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), level)?),
        })
    }

    fn sink(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Encoder::Gzip(e) => Some(e.get_mut()),
            Encoder::Br(e) => Some(e.get_mut()),
            Encoder::Zstd(e) => Some(e.get_mut()),
            Encoder::Identity => None,
        }
    }

    /// Moves what the encoder has produced so far to `out`.
    fn drain(&mut self, out: &mut Vec<u8>) {
        let Some(sink) = self.sink() else { return };
        if out.is_empty() {
            std::mem::swap(out, sink);
        } else {
            out.extend_from_slice(sink);
            sink.clear();
        }
    }

    /// Feeds `input`; what the encoder emits goes to `out` (often nothing
    /// for a small piece: encoders keep a block before emitting it).
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(input)?,
            Encoder::Br(e) => e.write_all(input)?,
            Encoder::Zstd(e) => e.write_all(input)?,
            Encoder::Identity => out.extend_from_slice(input),
        }
        self.drain(out);
        Ok(())
    }

    /// Emits everything fed so far as decodable output (a sync flush), for
    /// an origin that streams: its client sees each piece as it comes.
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.flush()?,
            Encoder::Br(e) => e.flush()?,
            Encoder::Zstd(e) => e.flush()?,
            Encoder::Identity => {}
        }
        self.drain(out);
        Ok(())
    }

    /// Ends the stream (trailer, last block, frame end) into `out`.
    pub fn finish(self, out: &mut Vec<u8>) -> io::Result<()> {
        let rest = match self {
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Br(e) => e.into_inner().map_err(|e| io::Error::other(e.to_string()))?,
            Encoder::Zstd(e) => e.finish()?,
            Encoder::Identity => Vec::new(),
        };
        out.extend_from_slice(&rest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn roundtrip(c: Coding, data: &[u8], piece: usize, flush: bool) {
        let conf = crate::config::compress::CompressConf::default();
        let f = conf.filter(c);
        let mut e = Encoder::new(c, f.level, conf.brotli_window, Some(data.len() as u64)).unwrap();
        let mut out = Vec::new();
        for p in data.chunks(piece.max(1)) {
            e.write(p, &mut out).unwrap();
            if flush {
                e.flush(&mut out).unwrap();
            }
        }
        e.finish(&mut out).unwrap();
        let mut back = Vec::new();
        match c {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(&out[..]).read_to_end(&mut back).unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(&out[..], 4096).read_to_end(&mut back).unwrap();
            }
            Coding::Zstd => back = zstd::decode_all(&out[..]).unwrap(),
        }
        assert_eq!(back, data, "{c:?}");
    }

    #[test]
    fn every_coding_round_trips() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| format!("line {i} of some text\n").into_bytes()).collect();
        for c in Coding::ALL {
            roundtrip(c, b"", 1, false);
            roundtrip(c, b"x", 1, false);
            roundtrip(c, &text, 65536, false);
            roundtrip(c, &text[..5000], 100, true);
        }
    }
}
