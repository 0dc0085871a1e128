//! The image filter (`image_filter` and its settings) as a client sees
//! it: `test` passing images and refusing the rest with 415, `size`'s
//! JSON (exact bytes, the head cleaned), `resize`, `crop` and `rotate`
//! (with variables, combined) giving images of the right dimensions in
//! the input's format, an image small enough going out byte for byte,
//! the headers nginx keeps, weakens or drops, HEAD, ranges turned off,
//! `image_filter_buffer`, `error_page 415`, a proxied image, the JPEG
//! quality, WebP headers, and `-t` on bad arguments. With
//! SLUICE_TEST_NGINX=1 the same expectations hold for Debian's nginx 1.22
//! and its libnginx-mod-http-image-filter.

mod common;

use std::io::Cursor;

use common::*;

const LOAD: &str = "load_module /usr/lib/nginx/modules/ngx_http_image_filter_module.so;";

/// A 100×120 picture: white with a black square, in each format.
fn picture() -> image::RgbaImage {
    image::RgbaImage::from_fn(100, 120, |x, y| {
        if (10..90).contains(&x) && (10..90).contains(&y) {
            image::Rgba([0, 0, 0, 255])
        } else {
            image::Rgba([255, 255, 255, 255])
        }
    })
}

fn encoded(format: image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    let img = image::DynamicImage::ImageRgba8(picture());
    let img = if format == image::ImageFormat::Jpeg { image::DynamicImage::ImageRgb8(img.to_rgb8()) } else { img };
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// nginx-tests' image_filter_webp.t 1×1 lossy WebP.
fn webp() -> Vec<u8> {
    let mut v = b"RIFF\x22\0\0\0WEBPVP8 ".to_vec();
    for n in [0x16000000u32, 0x3001009d, 0x012a0100, 0x01000ec0, 0xfe25a400, 0x03700000] {
        v.extend_from_slice(&n.to_be_bytes());
    }
    v.extend_from_slice(&[0, 0]);
    v
}

fn server() -> TestServer {
    builder()
        .main(LOAD)
        .file("html/i/p.gif", encoded(image::ImageFormat::Gif))
        .file("html/i/p.png", encoded(image::ImageFormat::Png))
        .file("html/i/p.jpg", encoded(image::ImageFormat::Jpeg))
        .file("html/i/p.webp", webp())
        .file("html/i/t.txt", "SEE-THIS\n")
        .file("html/fallback.txt", "fallback\n")
        .http(
            "include mime.types;
             map $arg_w $w { '' '-'; default $arg_w; }
             server {
                 listen 127.0.0.1:{port};
                 location /test/ { image_filter test; alias html/i/; add_header X-A a; }
                 location /size/ { image_filter size; alias html/i/; add_header X-A a; expires 1h; }
                 location /resize/ { image_filter resize 10 12; alias html/i/; }
                 location /big/ { image_filter resize 1000 1000; alias html/i/; }
                 location /resize_var/ { image_filter resize $w $arg_h; alias html/i/; }
                 location /crop/ { image_filter crop 60 80; alias html/i/; }
                 location /rotate/ {
                     image_filter rotate $arg_r;
                     alias html/i/;
                     location /rotate/off/ { image_filter off; alias html/i/; }
                 }
                 location /crop_rotate/ { image_filter crop $arg_w $arg_h; image_filter rotate $arg_r; alias html/i/; }
                 location /quality/ { image_filter resize 10 12; image_filter_jpeg_quality $arg_q; alias html/i/; }
                 location /buffer/ { image_filter test; image_filter_buffer 100; alias html/i/; }
                 location /fallback/ {
                     image_filter test; alias html/i/;
                     error_page 415 = /fallback.txt;
                 }
                 location = /fallback.txt { root html; }
                 location /proxied/ { proxy_pass http://127.0.0.1:{port}/plain/; image_filter resize 10 -; }
                 location /plain/ { alias html/i/; }
             }",
        )
        .start()
}

fn dims(body: &[u8]) -> (u32, u32, image::ImageFormat) {
    let f = image::guess_format(body).expect("an image");
    let img = image::load_from_memory(body).expect("decodes");
    (img.width(), img.height(), f)
}

#[test]
fn test_passes_images_and_refuses_the_rest() {
    let s = server();
    let r = s.get("/test/p.gif");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("image/gif"));
    assert_eq!(r.body, std::fs::read(s.path("html/i/p.gif")).unwrap());
    assert_eq!(r.header("x-a"), Some("a"), "add_header stays");
    assert!(r.header("etag").is_some_and(|e| !e.starts_with("W/")), "{:?}", r.header("etag"));
    assert!(r.header("last-modified").is_some());
    assert_eq!(r.header("accept-ranges"), None, "no ranges through the filter");
    // A range is ignored: the whole image.
    let r = s.get_with("/test/p.png", &["Range: bytes=0-9"]);
    assert_eq!((r.status, r.header("content-type")), (200, Some("image/png")));
    assert_eq!(r.body.len(), std::fs::metadata(s.path("html/i/p.png")).unwrap().len() as usize);
    let r = s.get("/test/p.webp");
    assert_eq!((r.status, r.header("content-type")), (200, Some("image/webp")));

    let r = s.get("/test/t.txt");
    assert_eq!(r.status, 415);
    assert!(String::from_utf8_lossy(&r.body).contains("415 Unsupported Media Type"));
    // A missing file's 404 page is no image either (nginx filters every
    // status but 304).
    assert_eq!(s.get("/test/none.gif").status, 415);
    // HEAD: the head the GET would have.
    let r = request(s.port, "HEAD /test/p.gif HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.header("content-type"), r.body.len()), (200, Some("image/gif"), 0));
    assert_eq!(s.get("/rotate/off/t.txt").body, b"SEE-THIS\n", "image_filter off");
}

#[test]
fn size_answers_nginxs_json() {
    let s = server();
    for (file, ty) in [("p.jpg", "jpeg"), ("p.gif", "gif"), ("p.png", "png")] {
        let r = s.get(&format!("/size/{file}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let want = format!("{{ \"img\" : {{ \"width\": 100, \"height\": 120, \"type\": \"{ty}\" }} }}\r\n");
        assert_eq!(String::from_utf8_lossy(&r.body), want);
        assert_eq!(r.header("content-length"), Some(want.len().to_string().as_str()));
        // nginx cleans the head: add_header, expires and the validators go.
        for h in ["x-a", "expires", "cache-control", "etag", "last-modified"] {
            assert_eq!(r.header(h), None, "{h}");
        }
    }
    let r = s.get("/size/p.webp");
    assert_eq!(r.body, b"{ \"img\" : { \"width\": 1, \"height\": 1, \"type\": \"webp\" } }\r\n");
    for path in ["/size/t.txt", "/size/none"] {
        let r = s.get(path);
        assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")), "{path}");
        assert_eq!(r.body, b"{}\r\n", "{path}");
    }
    let r = request(s.port, "HEAD /size/t.txt HTTP/1.0\r\n\r\n");
    assert_eq!(
        (r.status, r.header("content-type"), r.header("content-length")),
        (200, Some("application/json"), Some("4"))
    );
}

#[test]
fn resize_crop_and_rotate_keep_the_format() {
    let s = server();
    for (file, format) in
        [("p.gif", image::ImageFormat::Gif), ("p.png", image::ImageFormat::Png), ("p.jpg", image::ImageFormat::Jpeg)]
    {
        let r = s.get(&format!("/resize/{file}"));
        assert_eq!(r.status, 200, "{file}");
        assert_eq!(dims(&r.body), (10, 12, format), "{file}");
        assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
        assert!(r.header("etag").is_some_and(|e| e.starts_with("W/")), "a converted image's ETag is weak");
        assert!(r.header("last-modified").is_some(), "Last-Modified stays");
        assert_eq!(dims(&s.get(&format!("/crop/{file}")).body), (60, 80, format), "{file}");
        assert_eq!(dims(&s.get(&format!("/rotate/{file}?r=90")).body), (120, 100, format), "{file}");
        assert_eq!(dims(&s.get(&format!("/rotate/{file}?r=180")).body), (100, 120, format), "{file}");
    }
    // Small enough: the very bytes, with the strong ETag.
    let r = s.get("/big/p.png");
    assert_eq!(r.body, std::fs::read(s.path("html/i/p.png")).unwrap());
    assert!(r.header("etag").is_some_and(|e| !e.starts_with("W/")));
    // Variables: `-` is no limit; rotate before crop, as nginx orders them.
    assert_eq!(dims(&s.get("/resize_var/p.gif?w=10&h=12").body).0, 10);
    assert_eq!(dims(&s.get("/resize_var/p.gif?h=12").body).1, 12);
    assert_eq!(dims(&s.get("/crop_rotate/p.gif?w=5&h=6&r=90").body), (5, 5, image::ImageFormat::Gif));
    // A value that is no number or angle: 415.
    assert_eq!(s.get("/resize_var/p.gif?w=x&h=12").status, 415);
    assert_eq!(s.get("/rotate/p.gif?r=45").status, 415);
    assert_eq!(s.get("/resize/t.txt").status, 415);
    // Counter-clockwise: the picture's white bottom band (rows 90 to
    // 119) becomes the right of the 120×100 result.
    let r = s.get("/rotate/p.png?r=90");
    let img = image::load_from_memory(&r.body).unwrap().to_rgba8();
    assert_eq!(img.get_pixel(105, 50).0[0], 255);
    assert_eq!(img.get_pixel(15, 50).0[0], 0);
}

#[test]
fn jpeg_quality_buffer_error_page_and_proxy() {
    let s = server();
    let r = s.get("/quality/p.jpg?q=40");
    assert_eq!(r.status, 200);
    let text = String::from_utf8_lossy(&r.body);
    assert!(text.contains("quality = 40"), "libgd's comment names the quality");
    assert_eq!(s.get("/quality/p.jpg?q=").status, 415, "no quality");
    assert_eq!(s.get("/buffer/p.jpg").status, 415, "larger than image_filter_buffer");
    let r = s.get("/fallback/t.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"fallback\n"[..]), "error_page 415");
    let r = s.get("/proxied/p.png");
    assert_eq!(r.status, 200);
    assert_eq!(dims(&r.body), (10, 12, image::ImageFormat::Png));
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
}

#[test]
fn bad_arguments_are_refused_by_t() {
    for (conf, why) in [
        ("image_filter bogus;", "invalid parameter \"bogus\""),
        ("image_filter resize 0 10;", "invalid parameter \"0\""),
        ("image_filter rotate 45;", "invalid parameter \"45\""),
        ("image_filter crop 10;", "invalid parameter \"crop\""),
        ("image_filter_jpeg_quality 0;", "invalid value \"0\""),
    ] {
        let t = builder()
            .main(LOAD)
            .http(&format!("server {{ listen 127.0.0.1:{{port}}; location / {{ {conf} }} }}"))
            .prepare();
        let out = t.run(&["-t"]);
        let err = stderr_of(&out);
        assert!(!out.status.success() && err.contains(why), "{conf}\nwanted: {why}\ngot: {err}");
        assert!(err.contains(&format!("{}:", t.conf_path().display())), "{conf}: the file and line\n{err}");
    }
}

#[test]
fn http2_and_subrequests() {
    let s = builder()
        .main(LOAD)
        .file("html/i/p.gif", encoded(image::ImageFormat::Gif))
        .file("html/inc.html", "<!--#include virtual=\"/size/p.gif\" -->|")
        .ports(2)
        .http(
            "include mime.types;
             server {
                 listen 127.0.0.1:{port0} http2;
                 location /resize/ { image_filter resize 10 12; alias html/i/; }
                 location /size/ { image_filter size; alias html/i/; }
                 location /proxied/ { proxy_pass http://127.0.0.1:{port1}/; image_filter rotate 90; }
                 location = /inc.html { ssi on; root html; }
             }
             # The origin on HTTP/1 (nginx 1.22's `http2` port speaks
             # HTTP/2 only).
             server { listen 127.0.0.1:{port1}; root html/i; }",
        )
        .start();
    let h2 = |path: &str| curl(&["--http2-prior-knowledge", &s.url(path)]).stdout;
    assert_eq!(dims(&h2("/resize/p.gif")), (10, 12, image::ImageFormat::Gif));
    assert_eq!(dims(&h2("/proxied/p.gif")), (120, 100, image::ImageFormat::Gif));
    assert_eq!(h2("/size/p.gif"), b"{ \"img\" : { \"width\": 100, \"height\": 120, \"type\": \"gif\" } }\r\n");
    // An SSI include is a subrequest through the filter. nginx 1.22's
    // filter waits for the last buffer, which a subrequest's file never
    // has, and includes nothing.
    if prog() == "nginx" {
        return;
    }
    assert_eq!(
        String::from_utf8_lossy(&h2("/inc.html")),
        "{ \"img\" : { \"width\": 100, \"height\": 120, \"type\": \"gif\" } }\r\n|"
    );
}
