//! The mp4 module (`mp4`): `?start=`/`?end=` answer a smaller MP4 whose
//! tables point at the right samples. The fixture is a synthetic file
//! built here (no ffmpeg needed): two tracks whose every sample is filled
//! with its own number, so reading the answer's tables and following its
//! chunk offsets proves which samples came back and that each one lies
//! where the new `moov` says. nginx-tests (mp4*.t, range_mp4.t) cover
//! ffmpeg's real files and ffprobe's view of them. With
//! SLUICE_TEST_NGINX=1 the same expectations hold for Debian's nginx.

mod common;

use common::*;

/// Video: 10 samples of 1 s (time scale 1000), 2 a chunk, 100 bytes of
/// byte `k`, key frames 1 and 6. Audio: 20 samples of 0.5 s (time scale
/// 500), 4 a chunk, 50 bytes of byte `100 + k`.
const V: Track =
    Track { handler: b"vide", timescale: 1000, delta: 1000, samples: 10, per_chunk: 2, size: 100, base: 0 };
const A: Track = Track { handler: b"soun", timescale: 500, delta: 250, samples: 20, per_chunk: 4, size: 50, base: 100 };

struct Track {
    handler: &'static [u8; 4],
    timescale: u32,
    delta: u32,
    samples: u32,
    per_chunk: u32,
    size: u32,
    base: u8,
}

impl Track {
    fn chunks(&self) -> u32 {
        self.samples / self.per_chunk
    }
    fn chunk(&self, c: u32) -> Vec<u8> {
        (c * self.per_chunk..(c + 1) * self.per_chunk)
            .flat_map(|k| vec![self.base + k as u8; self.size as usize])
            .collect()
    }
}

fn atom(name: &[u8; 4], parts: &[&[u8]]) -> Vec<u8> {
    let body = parts.concat();
    [&((8 + body.len()) as u32).to_be_bytes()[..], name, &body].concat()
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|n| n.to_be_bytes()).collect()
}

fn trak(t: &Track, id: u32, offsets: &[u32]) -> Vec<u8> {
    let secs = t.samples * t.delta / t.timescale;
    let tkhd = atom(b"tkhd", &[&words(&[3, 0, 0, id, 0, secs * 1000]), &[0; 60]]);
    let mdhd = atom(b"mdhd", &[&words(&[0, 0, 0, t.timescale, t.samples * t.delta, 0])]);
    let hdlr = atom(b"hdlr", &[&[0; 8], t.handler, &[0; 13]]);
    let dinf = atom(b"dinf", &[&atom(b"dref", &[&words(&[0, 0])])]);
    let stsd = atom(b"stsd", &[&words(&[0, 1, 16]), b"test", &[0; 8]]);
    let stts = atom(b"stts", &[&words(&[0, 1, t.samples, t.delta])]);
    let stsc = atom(b"stsc", &[&words(&[0, 1, 1, t.per_chunk, 1])]);
    let stsz = atom(b"stsz", &[&words(&[0, 0, t.samples]), &words(&vec![t.size; t.samples as usize])]);
    let stco = atom(b"stco", &[&words(&[0, offsets.len() as u32]), &words(offsets)]);
    let mut stbl = vec![stsd, stts];
    if t.handler == b"vide" {
        stbl.push(atom(b"stss", &[&words(&[0, 2, 1, 6])]));
    }
    stbl.extend([stsc, stsz, stco]);
    let stbl = atom(b"stbl", &stbl.iter().map(Vec::as_slice).collect::<Vec<_>>());
    let minf = atom(b"minf", &[&dinf, &stbl]);
    atom(b"trak", &[&tkhd, &atom(b"mdia", &[&mdhd, &hdlr, &minf])])
}

/// The file: `ftyp`, `mdat` (video and audio chunks interleaved), `moov`;
/// or with the `moov` before the `mdat` ("faststart").
fn movie(moov_first: bool) -> Vec<u8> {
    let ftyp = atom(b"ftyp", &[b"isom\0\0\x02\0isommp41"]);
    let moov = |data_at: u32| {
        let step = V.per_chunk * V.size + A.per_chunk * A.size;
        let v: Vec<u32> = (0..V.chunks()).map(|c| data_at + c * step).collect();
        let a: Vec<u32> = (0..A.chunks()).map(|c| data_at + c * step + V.per_chunk * V.size).collect();
        let mvhd = atom(b"mvhd", &[&words(&[0, 0, 0, 1000, 10_000, 0x10000]), &[0; 72], &words(&[3])]);
        atom(b"moov", &[&mvhd, &trak(&V, 1, &v), &trak(&A, 2, &a)])
    };
    let data: Vec<u8> = (0..V.chunks()).flat_map(|c| [V.chunk(c), A.chunk(c)].concat()).collect();
    let mdat = atom(b"mdat", &[&data]);
    if moov_first {
        let at = (ftyp.len() + moov(0).len() + 8) as u32;
        [ftyp, moov(at), mdat].concat()
    } else {
        let at = (ftyp.len() + 8) as u32;
        [ftyp, mdat, moov(at)].concat()
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// The atoms directly inside `b`, by name.
fn children(b: &[u8]) -> Vec<(String, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= b.len() {
        let size = be32(b, at) as usize;
        assert!(size >= 8 && at + size <= b.len(), "atom sizes chain ({size} at {at} of {})", b.len());
        out.push((String::from_utf8_lossy(&b[at + 4..at + 8]).into_owned(), &b[at + 8..at + size]));
        at += size;
    }
    assert_eq!(at, b.len(), "no bytes after the last atom");
    out
}

fn find<'a>(b: &'a [u8], path: &str) -> Option<&'a [u8]> {
    let (name, rest) = path.split_once('/').unwrap_or((path, ""));
    let (_, body) = children(b).into_iter().find(|(n, _)| n == name)?;
    if rest.is_empty() { Some(body) } else { find(body, rest) }
}

/// What an answer holds for each track: its durations and the number of
/// every sample, read where the answer's tables say it is.
#[derive(Debug, PartialEq)]
struct Seen {
    mdhd_duration: u32,
    stts_duration: u64,
    samples: Vec<u8>,
    edit_media_time: Option<u64>,
}

fn read(file: &[u8]) -> (u32, Vec<Seen>) {
    let top = children(file);
    let names: Vec<&str> = top.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names == ["ftyp", "moov", "mdat"] || names == ["ftyp", "mdat", "moov"], "{names:?}");
    let moov = find(file, "moov").unwrap();
    let mvhd = find(moov, "mvhd").unwrap();
    let traks = children(moov).into_iter().filter(|(n, _)| n == "trak").map(|(_, b)| b);
    let seen = traks
        .map(|t| {
            let stbl = find(t, "mdia/minf/stbl").unwrap();
            let stts = find(stbl, "stts").unwrap();
            let stts_duration = (0..be32(stts, 4) as usize)
                .map(|i| u64::from(be32(stts, 8 + i * 8)) * u64::from(be32(stts, 12 + i * 8)))
                .sum();
            let stsc = find(stbl, "stsc").unwrap();
            let stsc: Vec<[u32; 3]> =
                (0..be32(stsc, 4) as usize).map(|i| [0, 4, 8].map(|o| be32(stsc, 8 + i * 12 + o))).collect();
            let stsz = find(stbl, "stsz").unwrap();
            let sizes: Vec<u32> = (0..be32(stsz, 8) as usize).map(|i| be32(stsz, 12 + i * 4)).collect();
            let stco = find(stbl, "stco").unwrap();
            let mut samples = Vec::new();
            for c in 0..be32(stco, 4) as usize {
                let mut at = be32(stco, 8 + c * 4) as usize;
                let per = stsc.iter().rev().find(|e| e[0] as usize <= c + 1).expect("an stsc row")[1];
                for _ in 0..per {
                    let Some(&size) = sizes.get(samples.len()) else { break };
                    let bytes = &file[at..at + size as usize];
                    assert!(bytes.iter().all(|&b| b == bytes[0]), "a sample's bytes at {at}");
                    samples.push(bytes[0]);
                    at += size as usize;
                }
            }
            assert_eq!(samples.len(), sizes.len(), "every sample found in a chunk");
            let edit_media_time = find(t, "edts/elst").map(|e| u64::from_be_bytes(e[16..24].try_into().unwrap()));
            Seen { mdhd_duration: be32(find(t, "mdia/mdhd").unwrap(), 16), stts_duration, samples, edit_media_time }
        })
        .collect();
    (be32(mvhd, 16), seen)
}

fn server() -> TestServer {
    builder()
        .file("html/m/t.mp4", movie(false))
        .file("html/m/fast.mp4", movie(true))
        .file("html/m/bad.mp4", b"\0\0\0\x08ftyp\0\0\0\x10moovjunkjunk")
        .http(
            "include mime.types; server { listen 127.0.0.1:{port}; root html;
             location /m/ { mp4; }
             location /k/ { mp4; mp4_start_key_frame on; alias html/m/; }
             location /tiny/ { mp4; mp4_buffer_size 64; mp4_max_buffer_size 128; alias html/m/; } }",
        )
        .start()
}

fn range(from: u8, to: u8) -> Vec<u8> {
    (from..to).collect()
}

#[test]
fn start_and_end_cut_both_tracks() {
    let s = server();
    for name in ["t.mp4", "fast.mp4"] {
        let whole = s.get(&format!("/m/{name}"));
        assert_eq!(whole.status, 200);
        assert_eq!(whole.body, movie(name == "fast.mp4"), "no argument: the file as it is");
        assert_eq!(whole.header("content-type"), Some("video/mp4"));

        let r = s.get(&format!("/m/{name}?start=3"));
        assert_eq!(r.status, 200, "{name}");
        assert_eq!(r.header("content-length").and_then(|v| v.parse().ok()), Some(r.body.len()));
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        let (movie_duration, t) = read(&r.body);
        assert_eq!(movie_duration, 7000, "{name}: mvhd");
        assert_eq!(
            t[0],
            Seen { mdhd_duration: 7000, stts_duration: 7000, samples: range(3, 10), edit_media_time: None }
        );
        assert_eq!(
            t[1],
            Seen { mdhd_duration: 3500, stts_duration: 3500, samples: range(106, 120), edit_media_time: None }
        );

        let r = s.get(&format!("/m/{name}?start=3&end=7.5"));
        let (movie_duration, t) = read(&r.body);
        assert_eq!(movie_duration, 4500);
        assert_eq!((t[0].mdhd_duration, t[0].samples.clone()), (4500, range(3, 7)), "{name}");
        assert_eq!((t[1].mdhd_duration, t[1].samples.clone()), (2250, range(106, 115)), "{name}");

        let r = s.get(&format!("/m/{name}?end=2.25"));
        let (_, t) = read(&r.body);
        assert_eq!(t[0].samples, range(0, 2), "{name}: end alone starts at 0");
        assert_eq!(t[1].samples, range(100, 104), "{name}");
    }
}

#[test]
fn key_frames_edits_ranges_and_etags() {
    let s = server();
    // 2.5 s lies in sample 3; its key frame is sample 1: the answer starts
    // there, and an edit list hides the 2 s before the start.
    let r = s.get("/k/t.mp4?start=2.5");
    let (_, t) = read(&r.body);
    assert_eq!(t[0].samples, range(0, 10));
    assert_eq!((t[0].edit_media_time, t[0].mdhd_duration), (Some(2000), 9500));
    assert_eq!(t[1].samples, range(105, 120), "no sync table: no key frame search");
    let plain = s.get("/m/t.mp4?start=2.5");
    assert_eq!(read(&plain.body).1[0].samples, range(2, 10));

    // One range of the cut file; several get it whole (nginx's
    // single_range).
    let cut = s.get("/m/t.mp4?start=1");
    let size = cut.body.len();
    let r = s.get_with("/m/t.mp4?start=1", &["Range: bytes=0-9"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some(format!("bytes 0-9/{size}").as_str()));
    assert_eq!(r.body, cut.body[..10]);
    let r = s.get_with("/m/t.mp4?start=1", &["Range: bytes=-10"]);
    assert_eq!(r.body, cut.body[size - 10..]);
    let r = s.get_with("/m/t.mp4?start=1", &["Range: bytes=0-10,11-99"]);
    assert_eq!((r.status, r.body.len()), (200, size));

    // The ETag is the length sent, so it differs from the whole file's.
    let whole = s.get("/m/t.mp4");
    assert_ne!(whole.header("etag"), cut.header("etag"));
    let etag = cut.header("etag").unwrap().to_string();
    let r = s.get_with("/m/t.mp4?start=1", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);

    let r = request(s.port, "HEAD /m/t.mp4?start=1 HTTP/1.0\r\n\r\n");
    assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
    assert!(r.body.is_empty());
}

#[test]
fn what_cannot_be_cut_is_a_500() {
    let s = server();
    for (uri, log) in [
        ("/m/t.mp4?start=11", "mp4 start time exceeds file duration"),
        ("/m/bad.mp4?start=1", "mp4 atom too large"),
        ("/tiny/t.mp4?start=1", "mp4 moov atom is too large:"),
    ] {
        assert_eq!(s.get(uri).status, 500, "{uri}");
        s.wait_error_log(log);
    }
    // Arguments that are no times are no cut.
    for q in ["start=x", "start=-1", "end=0", "start=1.2.3"] {
        let r = s.get(&format!("/m/fast.mp4?{q}"));
        assert_eq!((r.status, r.body.len()), (200, movie(true).len()), "{q}");
    }
    let r = request(s.port, "POST /m/t.mp4 HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(s.get("/m/none.mp4?start=1").status, 404);
}
