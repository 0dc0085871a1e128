//! Cutting the tracks' sample tables to `start`..`end` and writing the new
//! `moov`, after nginx's `ngx_http_mp4_process`: the time-to-sample table
//! (`stts`) finds each track's first and last sample, the sample-to-chunk
//! table (`stsc`) the chunks that hold them, the sample sizes (`stsz`) how
//! far into those chunks they lie, and the chunk offsets (`stco`/`co64`)
//! where in the file; the answer is `ftyp`, the new `moov`, and one `mdat`
//! holding the file's bytes from the earliest track's first sample to the
//! latest's last, the chunk offsets moved to match.
//!
//! Counts from the file are checked before they index anything; where
//! nginx's C arithmetic wraps on a nonsensical table and the result is
//! refused later anyway, this wraps too, and where it would read outside a
//! table this refuses the file (a 500) instead.

use super::atoms::{self, Fail, Movie, Params, Source, Stop, Trak, put_duration, scale};

/// What to send.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file as it is (no cut needed: `moov` first, no start or end).
    Whole,
    /// `head` (`ftyp`, `moov`, the `mdat` header), then `len` bytes of the
    /// file from `offset`.
    Cut { head: Vec<u8>, offset: u64, len: u64 },
}

/// Reads and cuts `src` (`name` is the path, for the log lines).
pub fn cut(src: &mut dyn Source, name: &str, p: Params) -> Result<Outcome, Fail> {
    let end = src.size();
    let mut m = match atoms::read(src, name, p) {
        Ok(m) => m,
        Err(Stop::Declined) => return Ok(Outcome::Whole),
        Err(Stop::Fail(f)) => return Err(f),
    };
    let c = Cutter { name, p, end };
    if m.traks.is_empty() {
        return Err(Fail::err(format!("no mp4 trak atoms were found in \"{name}\"")));
    }
    let Some((_, mdat_last)) = m.mdat else {
        return Err(Fail::err(format!("no mp4 mdat atom was found in \"{name}\"")));
    };
    let mut start_offset = end;
    let mut end_offset = 0;
    for t in &mut m.traks {
        c.stts(t)?;
        c.stss(t);
        c.ctts(t);
        c.stsc(t)?;
        c.stsz(t)?;
        c.stco(t, mdat_last)?;
        start_offset = start_offset.min(t.start_offset);
        end_offset = end_offset.max(t.end_offset);
    }
    if end_offset <= start_offset {
        return Err(Fail::err(format!("no data between start time and end time in \"{name}\"")));
    }
    let moov_size = moov(&m).len() as u64;
    if start_offset >= mdat_last {
        return Err(Fail::err(format!("start time is out mp4 mdat atom in \"{name}\"")));
    }
    let len = end_offset - start_offset;
    let mut mdat = Vec::with_capacity(16);
    if len > u64::from(u32::MAX) - 8 {
        mdat.extend_from_slice(&1u32.to_be_bytes());
        mdat.extend_from_slice(b"mdat");
        mdat.extend_from_slice(&(16 + len).to_be_bytes());
    } else {
        mdat.extend_from_slice(&((8 + len) as u32).to_be_bytes());
        mdat.extend_from_slice(b"mdat");
    }
    let ftyp_size = m.ftyp.as_ref().map_or(0, |f| f.len() as u64);
    // Where the first kept sample lands in the answer, less where it was.
    let adjustment = (ftyp_size + moov_size + mdat.len() as u64).wrapping_sub(start_offset);
    for t in &mut m.traks {
        if let Some(s) = &mut t.stco {
            let co64 = t.co64;
            for o in s.kept_mut() {
                *o = if co64 {
                    o.wrapping_add(adjustment)
                } else {
                    u64::from((*o as u32).wrapping_add(adjustment as u32))
                };
            }
        }
    }
    let mut head = m.ftyp.take().unwrap_or_default();
    head.extend_from_slice(&moov(&m));
    head.extend_from_slice(&mdat);
    Ok(Outcome::Cut { head, offset: start_offset, len })
}

struct Cutter<'a> {
    name: &'a str,
    p: Params,
    /// The file's size.
    end: u64,
}

impl Cutter<'_> {
    fn fail(&self, what: &str) -> Fail {
        Fail::err(format!("{what} in \"{}\"", self.name))
    }

    fn stts(&self, t: &mut Trak) -> Result<(), Fail> {
        if t.stts.is_none() {
            return Err(self.fail("no mp4 stts atoms were found"));
        }
        self.crop_stts(t, true)?;
        self.crop_stts(t, false)
    }

    /// Finds the sample at `start` (or at `end`) and narrows `stts` to it.
    /// With `mp4_start_key_frame` the start moves back to the key frame
    /// before it, and the samples between become the edit list's prefix.
    fn crop_stts(&self, t: &mut Trak, start: bool) -> Result<(), Fail> {
        let ms = if start {
            self.p.start
        } else if self.p.length > 0 {
            self.p.length
        } else {
            return Ok(());
        };
        let key_frames = self.p.start_key_frame;
        let mut time = scale(ms, t.timescale).saturating_add(t.prefix);
        let Some(stts) = &mut t.stts else { return Ok(()) };
        let mut i = stts.lo;
        let mut sample = 0u64;
        let mut found = None;
        while i < stts.hi {
            let [count, duration] = stts.rows[i];
            let span = u64::from(count) * u64::from(duration);
            if time < span {
                // duration > 0 here: span is not 0.
                let n = time / u64::from(duration);
                sample = sample.saturating_add(n);
                found = Some((count, duration, n));
                break;
            }
            sample = sample.saturating_add(u64::from(count));
            time -= span;
            i += 1;
        }
        let Some((mut count, mut duration, mut rest)) = found else {
            if start {
                return Err(self.fail("start time is out mp4 stts samples"));
            }
            t.end_sample = t.start_sample.saturating_add(sample);
            return Ok(());
        };
        if start {
            let mut key = match (key_frames, &t.stss) {
                (true, Some(s)) => seek_key_frame(s.kept(), sample).ok_or_else(|| self.fail("zero sync sample"))?,
                _ => 0,
            };
            key = key.min(sample);
            let stts = t.stts.as_mut().ok_or_else(|| self.fail("no mp4 stts atoms were found"))?;
            sample -= key;
            while rest < key {
                t.prefix = t.prefix.saturating_add(rest * u64::from(duration));
                key -= rest;
                if i == stts.lo {
                    return Err(self.fail("start time is out mp4 stts samples"));
                }
                i -= 1;
                [count, duration] = stts.rows[i];
                rest = u64::from(count);
            }
            t.prefix = t.prefix.saturating_add(key * u64::from(duration));
            t.duration = t.duration.saturating_add(t.prefix);
            rest -= key;
            stts.rows[i][0] = count.wrapping_sub(rest as u32);
            stts.lo = i;
            t.start_sample = sample;
        } else {
            let stts = t.stts.as_mut().ok_or_else(|| self.fail("no mp4 stts atoms were found"))?;
            stts.rows[i][0] = rest as u32;
            stts.hi = i + 1;
            t.end_sample = t.start_sample.saturating_add(sample);
        }
        Ok(())
    }

    /// Keeps the sync samples inside the cut, renumbered from its start.
    fn stss(&self, t: &mut Trak) {
        let (first, last) = (t.start_sample, t.end_sample);
        let Some(s) = &mut t.stss else { return };
        let crop = |s: &mut atoms::Table<u32>, from: u64, start: bool| {
            let at = s.kept().iter().position(|&x| u64::from(x) >= from).map_or(s.hi, |p| s.lo + p);
            if start { s.lo = at } else { s.hi = at }
        };
        crop(s, first.saturating_add(1), true);
        if self.p.length > 0 {
            crop(s, last.saturating_add(1), false);
        }
        for x in s.kept_mut() {
            *x = x.wrapping_sub(first as u32);
        }
    }

    /// Keeps the composition offsets of the cut's samples; none left drops
    /// the atom.
    fn ctts(&self, t: &mut Trak) {
        let (first, last) = (t.start_sample, t.end_sample);
        let Some(c) = &mut t.ctts else { return };
        let crop = |c: &mut atoms::Table<[u32; 2]>, mut sample: u64, start: bool| {
            for i in c.lo..c.hi {
                let count = u64::from(c.rows[i][0]);
                if sample <= count {
                    let rest = sample.saturating_sub(1);
                    if start {
                        c.rows[i][0] = (count - rest) as u32;
                        c.lo = i;
                    } else {
                        c.rows[i][0] = rest as u32;
                        c.hi = i + 1;
                    }
                    return;
                }
                sample -= count;
            }
            if start {
                c.lo = c.hi;
            }
        };
        crop(c, first.saturating_add(1), true);
        if self.p.length > 0 {
            crop(c, last.wrapping_sub(first).wrapping_add(1), false);
        }
        if c.lo >= c.hi {
            t.ctts = None;
        }
    }

    fn stsc(&self, t: &mut Trak) -> Result<(), Fail> {
        match &t.stsc {
            None => return Err(self.fail("no mp4 stsc atoms were found")),
            Some(s) if s.rows.is_empty() => return Err(self.fail("zero number of entries in stsc atom")),
            Some(_) => {}
        }
        self.crop_stsc(t, true)?;
        self.crop_stsc(t, false)?;
        let first = t.start_chunk as u32;
        if let Some(s) = &mut t.stsc {
            for row in s.kept_mut() {
                row[0] = row[0].wrapping_sub(first);
            }
        }
        Ok(())
    }

    /// Finds the chunk holding the first (or last) sample and how many of
    /// its samples lie before it; a partial chunk gets a row of its own.
    fn crop_stsc(&self, t: &mut Trak, start: bool) -> Result<(), Fail> {
        let mut target;
        if start {
            target = t.start_sample;
        } else if self.p.length > 0 {
            target = t.end_sample.wrapping_sub(t.start_sample);
            if let Some(first) = &mut t.stsc_start {
                let samples = u64::from(first[1]).min(target);
                first[1] = samples as u32;
                target -= samples;
            }
        } else {
            return Ok(());
        }
        let chunks = t.stco.as_ref().map_or(0, |s| s.rows.len() as u64);
        let Some(s) = &mut t.stsc else { return Ok(()) };
        let Some(&[c0, s0, id0]) = s.kept().first() else {
            return Err(self.fail("zero number of entries in stsc atom"));
        };
        let (mut chunk, mut samples, mut id) = (u64::from(c0), u64::from(s0), u64::from(id0));
        let mut prev_samples = 0u64;
        let mut i = s.lo + 1;
        let mut next_chunk;
        loop {
            if i >= s.hi {
                next_chunk = chunks + 1;
                if next_chunk < chunk {
                    return Err(self.fail("unordered mp4 stsc chunks"));
                }
                let n = (next_chunk - chunk) * samples;
                if target > n {
                    let which = if start { "start" } else { "end" };
                    return Err(self.fail(&format!("{which} time is out mp4 stsc chunks")));
                }
                break;
            }
            next_chunk = u64::from(s.rows[i][0]);
            if next_chunk < chunk {
                return Err(self.fail("unordered mp4 stsc chunks"));
            }
            let n = (next_chunk - chunk) * samples;
            if target < n {
                break;
            }
            target -= n;
            if next_chunk > chunk {
                prev_samples = samples;
            }
            chunk = next_chunk;
            [_, samples, id] = s.rows[i].map(u64::from);
            i += 1;
        }
        // The row whose run of chunks holds the sample.
        let row = i - 1;
        if samples == 0 {
            return Err(self.fail("zero number of samples"));
        }
        let Some(base) = chunk.checked_sub(1) else { return Err(self.fail("zero chunk")) };
        let target_chunk = base + target / samples;
        let chunk_samples = target % samples;
        let mut new_samples = samples;
        if start {
            s.lo = row;
            t.start_chunk = target_chunk;
            t.start_chunk_samples = chunk_samples;
            s.rows[row][0] = (target_chunk + 1) as u32;
            new_samples -= chunk_samples;
        } else {
            if target > 0 {
                s.hi = row + 1;
                t.end_chunk_samples = samples;
            } else {
                s.hi = row;
                t.end_chunk_samples = prev_samples;
            }
            if chunk_samples > 0 {
                t.end_chunk = target_chunk + 1;
                t.end_chunk_samples = chunk_samples;
            } else {
                t.end_chunk = target_chunk;
            }
            new_samples = chunk_samples;
            next_chunk = chunk + 1;
        }
        if chunk_samples > 0 && next_chunk.wrapping_sub(target_chunk) == 2 {
            s.rows[row][1] = new_samples as u32;
        } else if chunk_samples > 0 && start {
            t.stsc_start = Some([1, new_samples as u32, id as u32]);
            s.rows[row][0] = (t.start_chunk + 2) as u32;
        } else if chunk_samples > 0 {
            t.stsc_end = Some([t.end_chunk.wrapping_sub(t.start_chunk) as u32, new_samples as u32, id as u32]);
        }
        Ok(())
    }

    /// Keeps the sizes of the cut's samples, and adds up those of the
    /// samples in the first chunk before the start (and in the last chunk
    /// up to the end): the data's offsets inside those chunks.
    fn stsz(&self, t: &mut Trak) -> Result<(), Fail> {
        let (first, last) = (t.start_sample, t.end_sample);
        let Some((z, _)) = &mut t.stsz else { return Ok(()) };
        let count = u64::from(z.count);
        let sum = |z: &atoms::Stsz, upto: u64, n: u64| -> Option<u64> {
            if z.uniform != 0 {
                return u64::from(z.uniform).checked_mul(n);
            }
            let upto = usize::try_from(upto).ok()?;
            let from = upto.checked_sub(usize::try_from(n).ok()?)?;
            Some(z.sizes.rows.get(from..upto)?.iter().map(|&x| u64::from(x)).sum())
        };
        if z.uniform != 0 {
            // nginx leaves a table of one size as it was (the count too,
            // and the first chunk's offset at the chunk's start); this
            // counts the kept samples and where the first lies.
            let kept = if self.p.length > 0 { last } else { count }.saturating_sub(first);
            z.count = kept as u32;
            t.start_chunk_samples_size = sum(z, first, t.start_chunk_samples)
                .filter(|&n| n <= self.end)
                .ok_or_else(|| self.fail("too large mp4 start samples size"))?;
            t.end_chunk_samples_size = sum(z, last, t.end_chunk_samples)
                .filter(|&n| n <= self.end)
                .ok_or_else(|| self.fail("too large mp4 end samples size"))?;
            return Ok(());
        }
        if first >= count {
            return Err(self.fail("start time is out mp4 stsz samples"));
        }
        let mut kept = count - first;
        t.start_chunk_samples_size = sum(z, first, t.start_chunk_samples)
            .filter(|&n| n <= self.end)
            .ok_or_else(|| self.fail("too large mp4 start samples size"))?;
        if self.p.length > 0 {
            let n = last.checked_sub(first).filter(|&n| n <= kept);
            let Some(n) = n else { return Err(self.fail("end time is out mp4 stsz samples")) };
            kept = n;
            t.end_chunk_samples_size = sum(z, first + n, t.end_chunk_samples)
                .filter(|&n| n <= self.end)
                .ok_or_else(|| self.fail("too large mp4 end samples size"))?;
        }
        z.count = kept as u32;
        z.sizes.lo = first as usize;
        z.sizes.hi = (first + kept) as usize;
        Ok(())
    }

    /// Keeps the cut's chunks; the first one's offset moves to the first
    /// kept sample, and the track's data runs from there to the end of its
    /// last kept sample (or to the end of `mdat` without `end`).
    fn stco(&self, t: &mut Trak, mdat_last: u64) -> Result<(), Fail> {
        let co = if t.co64 { "co64" } else { "stco" };
        let Some(s) = &mut t.stco else { return Err(self.fail("no mp4 stco atoms were found")) };
        let chunks = s.rows.len() as u64;
        if t.start_chunk >= chunks {
            return Err(self.fail(&format!("start time is out mp4 {co} chunks")));
        }
        let lo = t.start_chunk as usize;
        let too_large = |offset: u64, size: u64| {
            self.end.checked_sub(size).is_none_or(|lim| offset > lim)
                || (!t.co64 && offset + size > u64::from(u32::MAX))
        };
        if let Some(&o) = s.rows.get(lo) {
            if too_large(o, t.start_chunk_samples_size) {
                return Err(self.fail("too large chunk offset"));
            }
            t.start_offset = o + t.start_chunk_samples_size;
            s.rows[lo] = t.start_offset;
        }
        s.lo = lo;
        let entries;
        if self.p.length > 0 {
            if t.end_chunk > chunks {
                return Err(self.fail(&format!("end time is out mp4 {co} chunks")));
            }
            let Some(n) = t.end_chunk.checked_sub(t.start_chunk) else {
                return Err(self.fail(&format!("end time is out mp4 {co} chunks")));
            };
            entries = n;
            s.hi = lo + n as usize;
            if n > 0 {
                let o = s.rows[s.hi - 1];
                if too_large(o, t.end_chunk_samples_size) {
                    return Err(self.fail("too large chunk offset"));
                }
                t.end_offset = o + t.end_chunk_samples_size;
            }
        } else {
            entries = chunks - t.start_chunk;
            t.end_offset = mdat_last;
        }
        if entries == 0 {
            t.start_offset = self.end;
            t.end_offset = 0;
        }
        Ok(())
    }
}

/// How many samples before `sample` (0-based) the key frame at or before
/// it is, from the sync sample table (1-based numbers).
/// None for a sync sample numbered 0.
fn seek_key_frame(stss: &[u32], sample: u64) -> Option<u64> {
    let s = sample.saturating_add(1);
    let mut prefix = 0;
    for &k in stss {
        if k == 0 {
            return None;
        }
        if u64::from(k) > s {
            break;
        }
        prefix = s - u64::from(k);
    }
    Some(prefix)
}

/// An atom written into `out`: the size is filled in once `body` wrote
/// the rest.
fn boxed(out: &mut Vec<u8>, name: &[u8; 4], body: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(name);
    body(out);
    let size = (out.len() - at) as u32;
    out[at..at + 4].copy_from_slice(&size.to_be_bytes());
}

/// A sample table atom: version and flags, the count, then the rows.
fn table<T: Copy>(out: &mut Vec<u8>, name: &[u8; 4], t: &atoms::Table<T>, put: fn(&mut Vec<u8>, T)) {
    boxed(out, name, |o| {
        o.extend_from_slice(&t.vf);
        o.extend_from_slice(&(t.kept().len() as u32).to_be_bytes());
        for &r in t.kept() {
            put(o, r);
        }
    });
}

fn put32(o: &mut Vec<u8>, v: u32) {
    o.extend_from_slice(&v.to_be_bytes());
}

/// The new `moov`: `mvhd`, then each track with the atoms nginx keeps, in
/// its order.
fn moov(m: &Movie) -> Vec<u8> {
    let mut out = Vec::new();
    boxed(&mut out, b"moov", |o| {
        if let Some(a) = &m.mvhd {
            o.extend_from_slice(a);
        }
        for t in &m.traks {
            boxed(o, b"trak", |o| trak(o, t));
        }
    });
    out
}

fn trak(o: &mut Vec<u8>, t: &Trak) {
    if let Some(a) = &t.tkhd {
        o.extend_from_slice(a);
    }
    if t.prefix > 0 {
        // One edit: play from the prefix on (the key frame's samples
        // before `start` are decoded, not shown).
        boxed(o, b"edts", |o| {
            boxed(o, b"elst", |o| {
                o.extend_from_slice(&[1, 0, 0, 0]);
                put32(o, 1);
                o.extend_from_slice(&t.movie_duration.to_be_bytes());
                o.extend_from_slice(&t.prefix.to_be_bytes());
                o.extend_from_slice(&[0, 1, 0, 0]);
            })
        });
    }
    if !t.mdia {
        return;
    }
    boxed(o, b"mdia", |o| {
        if let Some(a) = &t.mdhd {
            let mut a = a.clone();
            let v1 = a.get(8).is_some_and(|&v| v != 0);
            put_duration(&mut a, if v1 { 32 } else { 24 }, v1, t.duration);
            o.extend_from_slice(&a);
        }
        if let Some(a) = &t.hdlr {
            o.extend_from_slice(a);
        }
        if !t.minf {
            return;
        }
        boxed(o, b"minf", |o| {
            for a in [&t.vmhd, &t.smhd, &t.dinf].into_iter().flatten() {
                o.extend_from_slice(a);
            }
            if t.stbl {
                boxed(o, b"stbl", |o| stbl(o, t));
            }
        });
    });
}

fn stbl(o: &mut Vec<u8>, t: &Trak) {
    if let Some(a) = &t.stsd {
        o.extend_from_slice(a);
    }
    let pair = |o: &mut Vec<u8>, [a, b]: [u32; 2]| {
        put32(o, a);
        put32(o, b);
    };
    if let Some(s) = &t.stts {
        table(o, b"stts", s, pair);
    }
    if let Some(s) = &t.stss {
        table(o, b"stss", s, put32);
    }
    if let Some(s) = &t.ctts {
        table(o, b"ctts", s, pair);
    }
    if let Some(s) = &t.stsc {
        boxed(o, b"stsc", |o| {
            o.extend_from_slice(&s.vf);
            let n = s.kept().len() + usize::from(t.stsc_start.is_some()) + usize::from(t.stsc_end.is_some());
            put32(o, n as u32);
            let rows = t.stsc_start.iter().chain(s.kept()).chain(t.stsc_end.iter());
            for r in rows {
                r.iter().for_each(|&v| put32(o, v));
            }
        });
    }
    if let Some((z, vf)) = &t.stsz {
        boxed(o, b"stsz", |o| {
            o.extend_from_slice(vf);
            put32(o, z.uniform);
            put32(o, z.count);
            for &v in z.sizes.kept() {
                put32(o, v);
            }
        });
    }
    if let Some(s) = &t.stco {
        if t.co64 {
            table(o, b"co64", s, |o, v| o.extend_from_slice(&v.to_be_bytes()));
        } else {
            table(o, b"stco", s, |o, v| put32(o, v as u32));
        }
    }
}
