//! Reading an mp4 file's boxes ("atoms") the way nginx's mp4 module does:
//! the top level is walked on disk (`ftyp`, `moov`, `mdat`, the rest
//! skipped), the `moov` atom is read whole into memory and walked down to
//! the sample tables of each track. Only what the cut needs is kept, every
//! other atom is dropped from the answer, as nginx drops it.
//!
//! The file is the user's: every size and count read from it is checked
//! against what is really there before it is used, and a bad one ends the
//! request with nginx's log line (a 500), never a panic.

use crate::log::error::Level;

/// Where the file's bytes come from: the open file, or a fuzzer's input.
pub trait Source {
    fn size(&self) -> u64;
    /// Exactly `buf.len()` bytes at `offset` (inside `size`).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Fail>;
}

/// Why a file cannot be cut: nginx's log line, at its level. The request
/// then gets a 500, as nginx's `NGX_ERROR` from the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub level: Level,
    pub msg: String,
}

impl Fail {
    pub fn err(msg: String) -> Fail {
        Fail { level: Level::Error, msg }
    }
}

/// What a request asks for: `start` and the length (`end` - `start`, 0
/// for to the end), in milliseconds, and the settings that shape the walk.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub start: u64,
    pub length: u64,
    pub start_key_frame: bool,
    /// `mp4_buffer_size`: the reads of the top level, and the `moov`
    /// size that needs no more than that.
    pub buffer_size: usize,
    /// `mp4_max_buffer_size`: the largest `moov` read into memory.
    pub max_buffer_size: usize,
}

/// A sample table: its version and flags as they were, its rows, and the
/// window of them the answer keeps (`lo..hi`), narrowed by the cut.
#[derive(Debug, Clone, Default)]
pub struct Table<T> {
    pub vf: [u8; 4],
    pub rows: Vec<T>,
    pub lo: usize,
    pub hi: usize,
}

impl<T> Table<T> {
    fn new(vf: [u8; 4], rows: Vec<T>) -> Table<T> {
        let hi = rows.len();
        Table { vf, rows, lo: 0, hi }
    }

    pub fn kept(&self) -> &[T] {
        self.rows.get(self.lo..self.hi).unwrap_or(&[])
    }

    pub fn kept_mut(&mut self) -> &mut [T] {
        self.rows.get_mut(self.lo..self.hi).unwrap_or(&mut [])
    }
}

/// `stsz`: one size for every sample, or a size per sample.
#[derive(Debug, Clone, Default)]
pub struct Stsz {
    pub uniform: u32,
    pub count: u32,
    /// Per-sample sizes (empty when `uniform` is not 0).
    pub sizes: Table<u32>,
}

/// One `trak` and what the cut works out for it (nginx's
/// `ngx_http_mp4_trak_t`). The kept atoms are whole, 8-byte header first.
#[derive(Debug, Default)]
pub struct Trak {
    pub tkhd: Option<Vec<u8>>,
    pub mdia: bool,
    pub mdhd: Option<Vec<u8>>,
    pub hdlr: Option<Vec<u8>>,
    pub minf: bool,
    pub vmhd: Option<Vec<u8>>,
    pub smhd: Option<Vec<u8>>,
    pub dinf: Option<Vec<u8>>,
    pub stbl: bool,
    pub stsd: Option<Vec<u8>>,
    pub stts: Option<Table<[u32; 2]>>,
    pub stss: Option<Table<u32>>,
    pub ctts: Option<Table<[u32; 2]>>,
    pub stsc: Option<Table<[u32; 3]>>,
    pub stsz: Option<(Stsz, [u8; 4])>,
    /// `stco` or `co64` (`co64` true): the chunks' file offsets.
    pub stco: Option<Table<u64>>,
    pub co64: bool,

    /// The media time scale (`mdhd`).
    pub timescale: u32,
    /// The media duration (`mdhd`), cut; the start's key frame prefix is
    /// added back.
    pub duration: u64,
    /// The track's duration in the movie's time scale (`tkhd`), cut.
    pub movie_duration: u64,
    /// Media time before `start` that the answer keeps, up to the key
    /// frame (`mp4_start_key_frame`): an edit list skips it.
    pub prefix: u64,
    pub start_sample: u64,
    pub end_sample: u64,
    pub start_chunk: u64,
    pub end_chunk: u64,
    pub start_chunk_samples: u64,
    pub end_chunk_samples: u64,
    pub start_chunk_samples_size: u64,
    pub end_chunk_samples_size: u64,
    pub start_offset: u64,
    pub end_offset: u64,
    /// Extra `stsc` rows: the partial first chunk and the partial last.
    pub stsc_start: Option<[u32; 3]>,
    pub stsc_end: Option<[u32; 3]>,
}

/// What the walk found.
#[derive(Debug, Default)]
pub struct Movie {
    pub ftyp: Option<Vec<u8>>,
    pub mvhd: Option<Vec<u8>>,
    pub timescale: u32,
    pub traks: Vec<Trak>,
    pub moov: bool,
    /// The `mdat` atom's data: from, to (file offsets).
    pub mdat: Option<(u64, u64)>,
}

/// How a walk stops early: nginx's `NGX_DECLINED` (a track that ends
/// before `start` is left out; a `moov` before any `mdat` with no
/// `start` or `end` means the file is sent as it is) or an error.
#[derive(Debug)]
pub enum Stop {
    Declined,
    Fail(Fail),
}

impl From<Fail> for Stop {
    fn from(f: Fail) -> Stop {
        Stop::Fail(f)
    }
}

pub fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub fn be64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => u64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        None => 0,
    }
}

/// `ms` milliseconds in a time scale (nginx's `start * timescale / 1000`).
pub fn scale(ms: u64, timescale: u32) -> u64 {
    u64::try_from(u128::from(ms) * u128::from(timescale) / 1000).unwrap_or(u64::MAX)
}

/// An atom rebuilt with an 8-byte header (nginx writes every kept atom's
/// size back as 32 bits).
fn whole(name: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + body.len());
    v.extend_from_slice(&((8 + body.len()) as u32).to_be_bytes());
    v.extend_from_slice(name);
    v.extend_from_slice(body);
    v
}

/// The file's top level, read through a buffer of `mp4_buffer_size` as
/// nginx reads it (a header costs no system call of its own).
struct Reader<'s> {
    src: &'s mut dyn Source,
    buf: Vec<u8>,
    at: u64,
    chunk: usize,
}

impl Reader<'_> {
    fn get(&mut self, off: u64, n: usize, name: &str) -> Result<&[u8], Fail> {
        let end = self.src.size();
        if off.checked_add(n as u64).is_none_or(|e| e > end) {
            return Err(Fail::err(format!("\"{name}\" mp4 file truncated")));
        }
        let have = off >= self.at && off + n as u64 <= self.at + self.buf.len() as u64;
        if !have {
            let want = (self.chunk.max(n) as u64).min(end - off) as usize;
            self.buf.resize(want, 0);
            self.at = off;
            if let Err(e) = self.src.read_at(off, &mut self.buf) {
                self.buf.clear();
                return Err(e);
            }
        }
        let from = (off - self.at) as usize;
        Ok(&self.buf[from..from + n])
    }
}

struct Walk<'a> {
    name: &'a str,
    p: Params,
    m: Movie,
}

/// Walks the file. `Err(Stop::Declined)`: send it whole.
pub fn read(src: &mut dyn Source, name: &str, p: Params) -> Result<Movie, Stop> {
    let end = src.size();
    let chunk = p.buffer_size.clamp(16, 1 << 20);
    let mut r = Reader { src, buf: Vec::new(), at: 0, chunk };
    let mut w = Walk { name, p, m: Movie::default() };
    let mut off = 0u64;
    while off < end {
        let size32 = u64::from(be32(r.get(off, 4, name)?, 0));
        if size32 == 0 {
            break;
        }
        let (size, hdr) = if size32 == 1 {
            let s = be64(r.get(off, 16, name)?, 8);
            if s < 16 {
                return Err(Fail::err(format!("\"{name}\" mp4 atom is too small:{s}")).into());
            }
            (s, 16u64)
        } else if size32 < 8 {
            return Err(Fail::err(format!("\"{name}\" mp4 atom is too small:{size32}")).into());
        } else {
            (size32, 8u64)
        };
        let h = r.get(off, 8, name)?;
        let kind = [h[4], h[5], h[6], h[7]];
        if size > end - off {
            return Err(Fail::err(format!("\"{name}\" mp4 atom too large:{size}")).into());
        }
        let data = off + hdr;
        let data_size = size - hdr;
        match &kind {
            b"ftyp" => {
                if data_size > 1024 {
                    return Err(Fail::err(format!("\"{name}\" mp4 ftyp atom is too large:{data_size}")).into());
                }
                if w.m.ftyp.is_some() {
                    return Err(Fail::err(format!("duplicate mp4 ftyp atom in \"{name}\"")).into());
                }
                let body = r.get(data, data_size as usize, name)?;
                w.m.ftyp = Some(whole(b"ftyp", body));
            }
            b"moov" => {
                let no_mdat = w.m.mdat.is_none();
                if no_mdat && p.start == 0 && p.length == 0 {
                    return Err(Stop::Declined);
                }
                if w.m.moov {
                    return Err(Fail::err(format!("duplicate mp4 moov atom in \"{name}\"")).into());
                }
                if data_size > p.buffer_size as u64 && data_size > p.max_buffer_size as u64 {
                    return Err(Fail::err(format!(
                        "\"{name}\" mp4 moov atom is too large:{data_size}, you may want to increase mp4_max_buffer_size"
                    ))
                    .into());
                }
                let mut body = vec![0u8; data_size as usize];
                r.src.read_at(data, &mut body)?;
                w.m.moov = true;
                match w.children(&body, Level0::Moov) {
                    Ok(()) | Err(Stop::Declined) => {}
                    Err(e) => return Err(e),
                }
                if !no_mdat {
                    break;
                }
            }
            b"mdat" => {
                if w.m.mdat.is_some() {
                    return Err(Fail::err(format!("duplicate mp4 mdat atom in \"{name}\"")).into());
                }
                w.m.mdat = Some((data, off + size));
                if !w.m.traks.is_empty() {
                    break;
                }
            }
            _ => {}
        }
        off += size;
    }
    Ok(w.m)
}

/// Which container's children are being walked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level0 {
    Moov,
    Trak,
    Mdia,
    Minf,
    Stbl,
}

impl Walk<'_> {
    fn fail(&self, what: &str) -> Stop {
        Stop::Fail(Fail::err(format!("\"{}\" mp4 {what}", self.name)))
    }

    fn duplicate(&self, atom: &str) -> Stop {
        Stop::Fail(Fail::err(format!("duplicate mp4 {atom} atom in \"{}\"", self.name)))
    }

    fn trak(&mut self) -> &mut Trak {
        if self.m.traks.is_empty() {
            self.m.traks.push(Trak::default());
        }
        let n = self.m.traks.len() - 1;
        &mut self.m.traks[n]
    }

    /// The atoms inside a container held in memory.
    fn children(&mut self, data: &[u8], level: Level0) -> Result<(), Stop> {
        let mut pos = 0usize;
        while pos < data.len() {
            let rest = &data[pos..];
            if rest.len() < 4 {
                return Err(self.fail("file truncated"));
            }
            let size32 = be32(rest, 0);
            if size32 == 0 {
                return Ok(());
            }
            let (size, hdr) = if size32 == 1 {
                if rest.len() < 16 {
                    return Err(self.fail("file truncated"));
                }
                let s = be64(rest, 8);
                if s < 16 {
                    return Err(self.fail(&format!("atom is too small:{s}")));
                }
                (s, 16usize)
            } else if size32 < 8 {
                return Err(self.fail(&format!("atom is too small:{size32}")));
            } else if rest.len() < 8 {
                return Err(self.fail("file truncated"));
            } else {
                (u64::from(size32), 8usize)
            };
            if size > rest.len() as u64 {
                return Err(self.fail(&format!("atom too large:{size}")));
            }
            let size = size as usize;
            let kind = [rest[4], rest[5], rest[6], rest[7]];
            self.atom(level, &kind, &rest[hdr..size])?;
            pos += size;
        }
        Ok(())
    }

    fn atom(&mut self, level: Level0, kind: &[u8; 4], body: &[u8]) -> Result<(), Stop> {
        match (level, kind) {
            (Level0::Moov, b"mvhd") => self.mvhd(body),
            (Level0::Moov, b"trak") => {
                self.m.traks.push(Trak::default());
                match self.children(body, Level0::Trak) {
                    Err(Stop::Declined) => {
                        self.m.traks.pop();
                        Ok(())
                    }
                    r => r,
                }
            }
            (Level0::Moov, b"cmov") => Err(self.fail("compressed moov atom (cmov) is not supported")),
            (Level0::Trak, b"tkhd") => self.tkhd(body),
            (Level0::Trak, b"mdia") => {
                if std::mem::replace(&mut self.trak().mdia, true) {
                    return Err(self.duplicate("mdia"));
                }
                self.children(body, Level0::Mdia)
            }
            (Level0::Mdia, b"mdhd") => self.mdhd(body),
            (Level0::Mdia, b"hdlr") => self.keep(body, *kind, |t| &mut t.hdlr, "hdlr"),
            (Level0::Mdia, b"minf") => {
                if std::mem::replace(&mut self.trak().minf, true) {
                    return Err(self.duplicate("minf"));
                }
                self.children(body, Level0::Minf)
            }
            (Level0::Minf, b"vmhd" | b"smhd") => {
                let t = self.trak();
                if t.vmhd.is_some() || t.smhd.is_some() {
                    return Err(self.duplicate("vmhd/smhd"));
                }
                let a = Some(whole(kind, body));
                let t = self.trak();
                if kind == b"vmhd" {
                    t.vmhd = a
                } else {
                    t.smhd = a
                }
                Ok(())
            }
            (Level0::Minf, b"dinf") => self.keep(body, *kind, |t| &mut t.dinf, "dinf"),
            (Level0::Minf, b"stbl") => {
                if std::mem::replace(&mut self.trak().stbl, true) {
                    return Err(self.duplicate("stbl"));
                }
                self.children(body, Level0::Stbl)
            }
            (Level0::Stbl, b"stsd") => {
                if body.len() < 16 {
                    return Err(self.fail("stsd atom too small"));
                }
                self.keep(body, *kind, |t| &mut t.stsd, "stsd")
            }
            (Level0::Stbl, b"stts") => {
                let t = self.table(body, "stts", 8, |b, i| [be32(b, i), be32(b, i + 4)])?;
                self.set(t, |tr| &mut tr.stts, "stts")
            }
            (Level0::Stbl, b"stss") => {
                let t = self.table(body, "stss", 4, be32)?;
                self.set(t, |tr| &mut tr.stss, "stss")
            }
            (Level0::Stbl, b"ctts") => {
                let t = self.table(body, "ctts", 8, |b, i| [be32(b, i), be32(b, i + 4)])?;
                self.set(t, |tr| &mut tr.ctts, "ctts")
            }
            (Level0::Stbl, b"stsc") => {
                let t = self.table(body, "stsc", 12, |b, i| [be32(b, i), be32(b, i + 4), be32(b, i + 8)])?;
                self.set(t, |tr| &mut tr.stsc, "stsc")
            }
            (Level0::Stbl, b"stsz") => self.stsz(body),
            (Level0::Stbl, b"stco" | b"co64") => {
                let co64 = kind == b"co64";
                let t = if co64 {
                    self.table(body, "co64", 8, be64)?
                } else {
                    self.table(body, "stco", 4, |b, i| u64::from(be32(b, i)))?
                };
                if self.trak().stco.is_some() {
                    return Err(self.duplicate("stco/co64"));
                }
                let tr = self.trak();
                tr.stco = Some(t);
                tr.co64 = co64;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn keep(
        &mut self,
        body: &[u8],
        kind: [u8; 4],
        slot: fn(&mut Trak) -> &mut Option<Vec<u8>>,
        atom: &str,
    ) -> Result<(), Stop> {
        if slot(self.trak()).is_some() {
            return Err(self.duplicate(atom));
        }
        *slot(self.trak()) = Some(whole(&kind, body));
        Ok(())
    }

    fn set<T>(&mut self, t: Table<T>, slot: fn(&mut Trak) -> &mut Option<Table<T>>, atom: &str) -> Result<(), Stop> {
        if slot(self.trak()).is_some() {
            return Err(self.duplicate(atom));
        }
        *slot(self.trak()) = Some(t);
        Ok(())
    }

    /// A full atom holding a count and that many rows of `row` bytes.
    fn table<T>(&self, body: &[u8], atom: &str, row: usize, get: fn(&[u8], usize) -> T) -> Result<Table<T>, Stop> {
        if body.len() < 8 {
            return Err(self.fail(&format!("{atom} atom too small")));
        }
        let n = be32(body, 4) as usize;
        if n.checked_mul(row).is_none_or(|b| b > body.len() - 8) {
            return Err(self.fail(&format!("{atom} atom too small")));
        }
        let rows = (0..n).map(|i| get(body, 8 + i * row)).collect();
        Ok(Table::new([body[0], body[1], body[2], body[3]], rows))
    }

    fn stsz(&mut self, body: &[u8]) -> Result<(), Stop> {
        if body.len() < 12 {
            return Err(self.fail("stsz atom too small"));
        }
        let uniform = be32(body, 4);
        let count = be32(body, 8);
        if self.trak().stsz.is_some() {
            return Err(self.duplicate("stsz"));
        }
        let mut sizes = Table::default();
        if uniform == 0 {
            let n = count as usize;
            if n.checked_mul(4).is_none_or(|b| b > body.len() - 12) {
                return Err(self.fail("stsz atom too small"));
            }
            sizes = Table::new([0; 4], (0..n).map(|i| be32(body, 12 + i * 4)).collect());
        }
        let vf = [body[0], body[1], body[2], body[3]];
        self.trak().stsz = Some((Stsz { uniform, count, sizes }, vf));
        Ok(())
    }

    /// `mvhd`: the movie's time scale; its duration is cut here (`start`
    /// past it is an error, nginx's 500).
    fn mvhd(&mut self, body: &[u8]) -> Result<(), Stop> {
        if self.m.mvhd.is_some() {
            return Err(self.duplicate("mvhd"));
        }
        let v1 = body.first().is_some_and(|&v| v != 0);
        if body.len() < if v1 { 112 } else { 100 } {
            return Err(self.fail("mvhd atom too small"));
        }
        let (ts_at, dur_at) = if v1 { (20, 24) } else { (12, 16) };
        let timescale = be32(body, ts_at);
        let duration = if v1 { be64(body, dur_at) } else { u64::from(be32(body, dur_at)) };
        self.m.timescale = timescale;
        let start = scale(self.p.start, timescale);
        if duration < start {
            return Err(self.fail("start time exceeds file duration"));
        }
        let mut d = duration - start;
        if self.p.length > 0 {
            d = d.min(scale(self.p.length, timescale));
        }
        let mut a = whole(b"mvhd", body);
        put_duration(&mut a, 8 + dur_at, v1, d);
        self.m.mvhd = Some(a);
        Ok(())
    }

    /// `tkhd`: a track that ends before `start` is left out.
    fn tkhd(&mut self, body: &[u8]) -> Result<(), Stop> {
        let v1 = body.first().is_some_and(|&v| v != 0);
        if body.len() < if v1 { 96 } else { 84 } {
            return Err(self.fail("tkhd atom too small"));
        }
        let dur_at = if v1 { 28 } else { 20 };
        let duration = if v1 { be64(body, dur_at) } else { u64::from(be32(body, dur_at)) };
        let start = scale(self.p.start, self.m.timescale);
        if duration <= start {
            return Err(Stop::Declined);
        }
        let mut d = duration - start;
        if self.p.length > 0 {
            d = d.min(scale(self.p.length, self.m.timescale));
        }
        if self.trak().tkhd.is_some() {
            return Err(self.duplicate("tkhd"));
        }
        let mut a = whole(b"tkhd", body);
        put_duration(&mut a, 8 + dur_at, v1, d);
        let t = self.trak();
        t.movie_duration = d;
        t.tkhd = Some(a);
        Ok(())
    }

    /// `mdhd`: the media time scale; a track whose media ends before
    /// `start` is left out. The duration is written at the end.
    fn mdhd(&mut self, body: &[u8]) -> Result<(), Stop> {
        let v1 = body.first().is_some_and(|&v| v != 0);
        if body.len() < if v1 { 36 } else { 24 } {
            return Err(self.fail("mdhd atom too small"));
        }
        let (ts_at, dur_at) = if v1 { (20, 24) } else { (12, 16) };
        let timescale = be32(body, ts_at);
        let duration = if v1 { be64(body, dur_at) } else { u64::from(be32(body, dur_at)) };
        let start = scale(self.p.start, timescale);
        if duration <= start {
            return Err(Stop::Declined);
        }
        let mut d = duration - start;
        if self.p.length > 0 {
            d = d.min(scale(self.p.length, timescale));
        }
        if self.trak().mdhd.is_some() {
            return Err(self.duplicate("mdhd"));
        }
        let t = self.trak();
        t.mdhd = Some(whole(b"mdhd", body));
        t.timescale = timescale;
        t.duration = d;
        Ok(())
    }
}

/// A duration field of an `mvhd`, `tkhd` or `mdhd` (whole atom, `at`
/// counted from its header): 32 bits in version 0, 64 in version 1.
pub fn put_duration(a: &mut [u8], at: usize, v1: bool, d: u64) {
    if v1 {
        if let Some(s) = a.get_mut(at..at + 8) {
            s.copy_from_slice(&d.to_be_bytes());
        }
    } else if let Some(s) = a.get_mut(at..at + 4) {
        s.copy_from_slice(&(d as u32).to_be_bytes());
    }
}
