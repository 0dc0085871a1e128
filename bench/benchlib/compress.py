"""Compression workloads (z1-z3), the security-header workload (h1sec) and
the checks of compressed responses shared with the PHP workloads (k1, k2).

z1/z2 compress a ~100 KB HTML page on the fly (gzip level 6, brotli level 5),
z3 serves its precompressed copy (gzip_static). The page is generated here:
deterministic (a seeded PRNG over a word list, Zipf-like word frequencies,
blog-style markup), so it compresses like a real page (gzip -6 about 4-5x)
and not like repeated bytes."""

import gzip
import os
import random
import shutil
import socket
import subprocess
import time

from .common import BenchError
from .httpcheck import read_response

PAGE_NAME = "page.html"
PAGE_GZ_NAME = "page.html.gz"
PAGE_SIZE = 100 * 1024        # at least this many bytes
PAGE_SEED = 20261127

# nginx needs Debian's dynamic brotli module (libnginx-mod-http-brotli-filter);
# sluice has brotli built in (it would accept this line with a notice, but
# the configs load it for nginx only, see bench/conf/compress.conf).
BROTLI_MODULE = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so"
LOAD_BROTLI = "load_module %s;" % BROTLI_MODULE
NO_LOAD_BROTLI = "# brotli is built into sluice: no load_module"

# h1sec: headers every response must carry (add_header ... always).
SECURITY_HEADERS = ("x-frame-options", "x-content-type-options", "referrer-policy",
                    "content-security-policy", "strict-transport-security",
                    "permissions-policy")

WORDS = """the of and to in is that for it as was with be by on not he this are or his from
at which but have an they you were her she there been one all we their has would when if so no
what up out more about into them can only other time new some could these two may first then do
any like my now over such our man me even most made after also did many before must through back
years where much your way well down should because each just those people how too little state
good very make world still own see men work long get here between both life being under never day
same another know while last might us great old year off come since against go came right used
take three server request response cache proxy upstream connection header client memory config
module worker process socket buffer latency throughput benchmark kernel thread queue timeout
compression static file directory path location variable rewrite redirect error status page
content type length encoding body stream frame window session ticket certificate handshake cipher
protocol version release feature performance improvement documentation example tutorial guide
reference install package system service restart reload signal shutdown upgrade binary source
build compile test suite review patch commit branch merge issue report question answer community
forum article blog post comment author editor archive category tag search""".split()


def make_page():
    """The z workloads' HTML page (bytes): a blog archive page with a header,
    navigation, posts (title, date, author, category, paragraphs, tags) and
    a sidebar, at least PAGE_SIZE bytes, identical on every run."""
    r = random.Random(PAGE_SEED)
    weights = [1.0 / (i + 1) ** 1.1 for i in range(len(WORDS))]

    def words(lo, hi):
        return r.choices(WORDS, weights, k=r.randint(lo, hi))

    def sentence(lo=6, hi=18):
        s = " ".join(words(lo, hi))
        return s[0].upper() + s[1:] + r.choice(".....?!")

    def slug():
        return "-".join(words(3, 5))

    head = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<title>Archive - The Sluice Blog</title>\n'
            '<link rel="stylesheet" href="/assets/css/main.css?v=3">\n'
            '<link rel="alternate" type="application/rss+xml" href="/feed.xml">\n'
            '</head>\n<body class="archive">\n<header class="site-header">\n'
            '<a class="logo" href="/">The Sluice Blog</a>\n<nav class="main-nav"><ul>\n']
    for c in ("Home", "Releases", "Tutorials", "Benchmarks", "Community", "About"):
        head.append('<li class="nav-item"><a class="nav-link" href="/%s/">%s</a></li>\n'
                    % (c.lower(), c))
    head.append('</ul></nav>\n</header>\n<main class="content">\n')
    side = ['<aside class="sidebar">\n<section class="widget"><h3>Recent posts</h3><ul>\n']
    for _ in range(12):
        side.append('<li><a href="/2026/%02d/%s.html">%s</a></li>\n'
                    % (r.randint(1, 12), slug(), sentence(3, 7)))
    side.append('</ul></section>\n<section class="widget"><h3>Tags</h3><p class="tags">\n')
    for w in sorted(set(WORDS[40:140])):
        side.append('<a class="tag" href="/tag/%s/">%s</a>\n' % (w, w))
    side.append('</p></section>\n</aside>\n</main>\n<footer class="site-footer">'
                '<p>&copy; 2026 The Sluice Blog. Text licensed CC BY-SA.</p></footer>\n'
                '</body>\n</html>\n')
    tail = "".join(side)
    posts = []
    size = len("".join(head)) + len(tail)
    i = 0
    while size < PAGE_SIZE:
        i += 1
        month, day = r.randint(1, 12), r.randint(1, 28)
        paras = "\n".join('<p>%s</p>' % " ".join(sentence() for _ in range(r.randint(2, 6)))
                          for _ in range(r.randint(2, 4)))
        tags = " ".join('<a class="tag" href="/tag/%s/">%s</a>' % (w, w) for w in words(2, 4))
        p = ('<article class="post" id="post-%d">\n<header class="post-header">\n'
             '<h2 class="post-title"><a href="/2026/%02d/%s.html">%s</a></h2>\n'
             '<p class="post-meta">Posted on <time datetime="2026-%02d-%02d">2026-%02d-%02d'
             '</time> by <a class="author" href="/author/%s/">%s</a> in '
             '<a class="category" href="/category/%s/">%s</a></p>\n</header>\n'
             '<div class="post-body">\n%s\n</div>\n<footer class="post-footer">'
             '<span class="tags">%s</span> <a class="comments" href="/2026/%02d/post-%d.html'
             '#comments">%d comments</a></footer>\n</article>\n'
             % (i, month, slug(), sentence(3, 8), month, day, month, day, r.choice(WORDS),
                r.choice(WORDS).title(), r.choice(WORDS), r.choice(WORDS).title(), paras, tags,
                month, i, r.randint(0, 99)))
        posts.append(p)
        size += len(p)
    return ("".join(head) + "".join(posts) + tail).encode()


def make_page_files(d):
    """Writes page.html and page.html.gz (gzip -9, no name, mtime 0: what
    `gzip -9 -n` gives) into d; returns {name: path}."""
    page = make_page()
    out = {}
    for name, data in ((PAGE_NAME, page),
                       (PAGE_GZ_NAME, gzip.compress(page, compresslevel=9, mtime=0))):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        out[name] = path
    return out


# --------------------------------------------------------------------------
# Decoding and checking compressed responses
# --------------------------------------------------------------------------

def brotli_decode(data):
    """brotli-decoded bytes: the Python brotli module if importable, else the
    brotli CLI (Debian's brotli package)."""
    try:
        import brotli
        return brotli.decompress(data)
    except ImportError:
        pass
    if not shutil.which("brotli"):
        raise BenchError("cannot decode brotli: neither the Python brotli module nor the "
                         "brotli CLI is installed (apt-get install brotli)")
    r = subprocess.run(["brotli", "-d", "-c"], input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise BenchError("brotli -d failed (exit %d): %s"
                         % (r.returncode, r.stderr.decode(errors="replace").strip()[:300]))
    return r.stdout


def decode(encoding, data):
    try:
        if encoding == "gzip":
            return gzip.decompress(data)
        if encoding == "br":
            return brotli_decode(data)
    except (OSError, EOFError, ValueError) as e:
        raise BenchError("%s body does not decode: %s: %s" % (encoding, type(e).__name__, e))
    raise BenchError("unknown encoding %r" % encoding)


def request_bytes(row, port):
    hdrs = "".join("%s\r\n" % h for h in row.headers)
    return ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-bench-verify\r\n"
            "Accept: */*\r\n%s\r\n" % (row.path, port, hdrs)).encode()


def verify_encoded(port, row, page, encoded=None):
    """Rows with row.encoding (z1-z3, k1, k2): two GETs on one keep-alive
    connection, with the row's request headers (Accept-Encoding); each must
    be 200 with Content-Encoding row.encoding and a body that decodes to
    page (when given; else the two decoded bodies must be equal), and for
    z3 a body equal to the precompressed file (encoded). Returns
    (description, decoded body)."""
    deadline = time.monotonic() + 60
    req = request_bytes(row, port)
    bodies = []
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            for _ in range(2):
                s.sendall(req)
                status, headers, body, head_len = read_response(s, deadline, chunked_ok=True)
                if status != 200:
                    raise BenchError("GET %s: status %d, expected 200" % (row.path, status))
                ce = headers.get("content-encoding", "-")
                if ce != row.encoding:
                    raise BenchError("GET %s (%s): Content-Encoding %s, expected %s"
                                     % (row.path, "; ".join(row.headers), ce, row.encoding))
                if headers.get("connection", "").lower() == "close":
                    raise BenchError("GET %s: Connection: close on a keep-alive workload"
                                     % row.path)
                if encoded is not None and body != encoded:
                    raise BenchError("GET %s: body (%d bytes) differs from the precompressed "
                                     "file (%d bytes)" % (row.path, len(body), len(encoded)))
                plain = decode(row.encoding, body)
                if page is not None and plain != page:
                    raise BenchError("GET %s: decoded body (%d bytes) differs from the page "
                                     "(%d bytes)" % (row.path, len(plain), len(page)))
                bodies.append(plain)
                framing = ("chunked" if "chunked" in headers.get("transfer-encoding", "")
                           else "Content-Length")
    except (OSError, ValueError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    if bodies[0] != bodies[1]:
        raise BenchError("GET %s: two requests gave different decoded bodies" % row.path)
    missing = [h for h in row.expect_headers if h not in headers]
    if missing:
        raise BenchError("GET %s: missing header(s) %s" % (row.path, ", ".join(missing)))
    desc = ("200, Content-Encoding: %s (%s), %d bytes -> %d decoded (%.1fx)%s, %s, "
            "keep-alive reused" % (row.encoding, framing, len(body), len(plain),
                                   len(plain) / max(1, len(body)),
                                   " = the page" if page is not None else "",
                                   "body = the .gz file" if encoded is not None
                                   else "Server: %s" % headers.get("server", "-")))
    return desc, plain


def verify_headers(port, row):
    """h1sec: one GET must carry every header of row.expect_headers."""
    deadline = time.monotonic() + 30
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(request_bytes(row, port))
            status, headers, _, _ = read_response(s, deadline)
    except (OSError, ValueError) as e:
        raise BenchError("GET %s: %s: %s" % (row.path, type(e).__name__, e))
    missing = [h for h in row.expect_headers if h not in headers]
    if missing:
        raise BenchError("GET %s: status %d, missing header(s) %s"
                         % (row.path, status, ", ".join(missing)))
    return "%d headers present (%s)" % (len(row.expect_headers), ", ".join(
        "%s: %.20s" % (h, headers[h]) for h in row.expect_headers[:2]))


class CompressMixin:
    """Harness method: verification of the rows with an encoding."""

    def verify_encoded_row(self, srv, row):
        """z rows: the decoded body must be the page (z3: the raw body the
        .gz file too); k rows (no body_file): the decoded body must be the
        same for every server (the first verified one is the reference)."""
        page = encoded = None
        if row.body_file:
            with open(self.files[row.body_file], "rb") as f:
                page = f.read()
        if row.encoded_file:
            with open(self.files[row.encoded_file], "rb") as f:
                encoded = f.read()
        desc, plain = verify_encoded(srv.port, row, page, encoded)
        if page is None:
            refs = self.__dict__.setdefault("decoded_refs", {})
            ref = refs.get(row.key)
            if ref is None:
                refs[row.key] = (srv.name, plain)
                desc += ", decoded body: the reference for the other server"
            elif ref[1] != plain:
                raise BenchError("GET %s: decoded body (%d bytes) differs from %s's (%d bytes)"
                                 % (row.path, len(plain), ref[0], len(ref[1])))
            else:
                desc += ", decoded body = %s's" % ref[0]
        return desc
