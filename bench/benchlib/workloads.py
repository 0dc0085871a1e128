"""The workload table of bench/run: one Row per table row."""

from .compress import (
    LOAD_BROTLI, NO_LOAD_BROTLI, PAGE_GZ_NAME, PAGE_NAME, SECURITY_HEADERS)
from .fpm import FPM_CHILDREN
from .common import EMPTY_GIF_LEN, HELLO_BODY, HUGE_SIZE, LARGE_SIZES, STATIC_SIZES


class Row:
    """One table row: one URL under one load shape."""

    def __init__(self, key, title, path, conns, keepalive, body_len=None,
                 body_file=None, close_expected=False, throughput=False,
                 access_log=False, client="wrk", tls=None, h2=False, streams=1,
                 handshake=False, default_rate=None, proxy=False, cache=False, group=None,
                 servers=None, large=False, rss=False, wrk_timeout=None, headers=(),
                 encoding=None, encoded_file=None, expect_headers=(), fpm=False,
                 errors_fail=None):
        self.key = key
        self.title = title
        self.path = path
        self.conns = conns
        self.keepalive = keepalive
        self.body_len = body_len
        self.body_file = body_file      # file name under html/ to compare with
        self.close_expected = close_expected
        self.throughput = throughput
        self.access_log = access_log
        self.client = client
        # TLS rows: tls is the TLS version the row expects to negotiate
        # ("TLSv1.3" or "TLSv1.2"); None means plain HTTP.
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.h2 = h2                    # HTTP/2 (ALPN h2) instead of HTTP/1.1
        self.streams = streams          # h2load -m
        self.handshake = handshake      # one full TLS handshake per request
        # h2load rows: req/s assumed for sizing -n when no warm-up rate is known.
        self.default_rate = default_rate
        # Reverse proxy rows (px1): the server under test proxies to an
        # origin that bench/run starts once per workload (see Origin below).
        self.proxy = proxy
        # Cache rows (c1-c4): every measured request must be a hit; the cache
        # is filled and checked before measuring (benchlib/cache.py).
        self.cache = cache
        self.group = group              # "cache": shown in the cache table
        self.servers = servers          # None: every server of the workload
        self.large = large              # verify by streaming and hashing (c4)
        self.rss = rss                  # sample the server's RSS during runs (c4)
        self.wrk_timeout = wrk_timeout  # wrk --timeout (seconds)
        # Request headers sent by the load generator and the verification
        # ("Accept-Encoding: gzip"); encoding: the Content-Encoding every
        # response must have (z1-z3, k1, k2), checked by decoding the body
        # (benchlib/compress.py); encoded_file: z3's precompressed file, which
        # the raw body must equal.
        self.headers = tuple(headers)
        self.encoding = encoding
        self.encoded_file = encoded_file
        self.expect_headers = tuple(expect_headers)   # h1sec: lower-case names
        self.fpm = fpm                  # k1, k2: behind a php-fpm pool per server
        # TLS and proxy rows: load generator errors are failures (exit status 1).
        self.errors_fail = bool(tls) or proxy if errors_fail is None else errors_fail


def build_workloads(client2):
    w = {}
    w["1"] = dict(
        title="empty_gif, keep-alive",
        template="empty_gif.conf",
        rows=[Row("1", "1 empty_gif keep-alive c50", "/empty.gif", 50, True,
                  body_len=EMPTY_GIF_LEN)])
    w["1z"] = dict(
        title="empty_gif, keep-alive, the server in a status_zone (sluice's metrics on); "
              "run with --nginx SLUICE to compare sluice with and without",
        template="empty_gif_zone.conf",
        subst={"@STATUS_ZONE@": "# no status_zone"},
        sluice_subst={"@STATUS_ZONE@": "status_zone bench;"},
        rows=[Row("1z", "1z empty_gif keep-alive c50, status_zone", "/empty.gif", 50, True,
                  body_len=EMPTY_GIF_LEN)])
    w["2"] = dict(
        title="empty_gif, keepalive_timeout 0 (new connection per request)",
        template="empty_gif_close.conf",
        rows=[Row("2a", "2 empty_gif new conn/req c100 (%s)" % client2, "/empty.gif", 100,
                  False, body_len=EMPTY_GIF_LEN, close_expected=True, client=client2),
              Row("2b", "2 empty_gif new conn/req c1000 (%s)" % client2, "/empty.gif", 1000,
                  False, body_len=EMPTY_GIF_LEN, close_expected=True, client=client2)])
    w["3"] = dict(
        title="static files, keep-alive, sendfile + open_file_cache",
        template="static.conf", h2o=True,
        files=["%s.bin" % name for name, _ in STATIC_SIZES],
        rows=[Row("3-" + name, "3 static %s keep-alive c50" % name.upper(), "/%s.bin" % name,
                  50, True, body_len=size, body_file="%s.bin" % name)
              for name, size in STATIC_SIZES])
    w["4"] = dict(
        title="large static files, keep-alive, sendfile + open_file_cache",
        template="static.conf", h2o=True,
        files=["%s.bin" % name for name, _ in LARGE_SIZES],
        rows=[Row("4-" + name, "4 static %s keep-alive c10" % name.upper(), "/%s.bin" % name,
                  10, True, body_len=size, body_file="%s.bin" % name, throughput=True)
              for name, size in LARGE_SIZES])
    w["5"] = dict(
        title="empty_gif, keep-alive, access_log combined",
        template="access_log.conf",
        rows=[Row("5", "5 empty_gif + access_log c50", "/empty.gif", 50, True,
                  body_len=EMPTY_GIF_LEN, access_log=True)])
    w["mem"] = dict(
        title="resident memory with idle keep-alive connections",
        template="idle.conf",
        rows=[])
    w["tls1"] = dict(
        title="HTTPS (HTTP/1.1 over TLS) empty_gif, keep-alive",
        template="tls_empty_gif.conf", tls=True,
        rows=[Row("tls1", "tls1 https empty_gif keep-alive c50", "/empty.gif", 50, True,
                  body_len=EMPTY_GIF_LEN, tls="TLSv1.3")])
    # tls2: bench/hsload (a client that skips certificate and signature
    # verification, so the server is the bottleneck), or ab with --client ab.
    client_tls2 = "ab" if client2 == "ab" else "hsload"
    w["tls2"] = dict(
        title="full TLS handshakes, a new connection per request (keepalive_timeout 0)",
        template="tls_handshake.conf", tls=True,
        rows=[Row("tls2-%s" % v[-3:].replace(".", ""),
                  "tls2 %s full handshake/req c100 (%s)" % (v, client_tls2), "/empty.gif", 100,
                  False, body_len=EMPTY_GIF_LEN, close_expected=True, client=client_tls2, tls=v,
                  handshake=True)
              for v in ("TLSv1.3", "TLSv1.2")])
    w["tls3"] = dict(
        title="HTTP/2 over TLS, 12-byte /helloworld (nuster's h2load, scaled down)",
        template="tls_h2.conf", tls=True, files=["helloworld"], h2o=True,
        rows=[Row("tls3", "tls3 h2 helloworld 12B c100 m100", "/helloworld", 100, True,
                  body_len=len(HELLO_BODY), body_file="helloworld", client="h2load",
                  tls="TLSv1.3", h2=True, streams=100, default_rate=20000)])
    w["tls4"] = dict(
        title="HTTP/2 over TLS, 10 MB static file",
        template="tls_h2.conf", tls=True, files=["10m.bin"], h2o=True,
        rows=[Row("tls4-10m", "tls4 h2 static 10M c1 m1", "/10m.bin", 1, True,
                  body_len=10 * 1024 * 1024, body_file="10m.bin", throughput=True,
                  client="h2load", tls="TLSv1.3", h2=True, streams=1, default_rate=30)])
    # tls5, tls6, h2c: more HTTP/2 load shapes of the static-file setup, not
    # in the default set: many connections with few streams each, few
    # connections with one stream each (latency-bound), a 100 KB file, and
    # HTTP/2 without TLS (the same directives minus TLS).
    w["tls5"] = dict(
        title="HTTP/2 over TLS, 12-byte /helloworld, 1,000 and 10 connections",
        template="tls_h2.conf", tls=True, files=["helloworld"], h2o=True,
        rows=[Row("tls5-c%d" % c, "tls5 h2 helloworld 12B c%d m%d" % (c, m), "/helloworld", c,
                  True, body_len=len(HELLO_BODY), body_file="helloworld", client="h2load",
                  tls="TLSv1.3", h2=True, streams=m, default_rate=rate)
              for c, m, rate in ((1000, 10, 20000), (10, 1, 10000))])
    w["tls6"] = dict(
        title="HTTP/2 over TLS, 100 KB static file",
        template="tls_h2.conf", tls=True, files=["100k.bin"], h2o=True,
        rows=[Row("tls6-100k", "tls6 h2 static 100K c100 m100", "/100k.bin", 100, True,
                  body_len=100 * 1024, body_file="100k.bin", client="h2load", tls="TLSv1.3",
                  h2=True, streams=100, default_rate=3000)])
    w["h2c"] = dict(
        title="HTTP/2 without TLS (h2c, prior knowledge), 12-byte /helloworld",
        template="h2c.conf", files=["helloworld"], h2o=True,
        rows=[Row("h2c", "h2c helloworld 12B c100 m100", "/helloworld", 100, True,
                  body_len=len(HELLO_BODY), body_file="helloworld", client="h2load",
                  h2=True, streams=100, default_rate=20000, errors_fail=True)])
    # px1: nginx and sluice as reverse proxies (keep-alive to the client and
    # to the origin) in front of one origin, a separate Debian nginx serving
    # the 1 KB file, shared by both and pinned to the load generator's CPU.
    w["px1"] = dict(
        title="reverse proxy, 1 KB responses, keep-alive to client and origin",
        template="proxy.conf", origin="proxy_origin.conf", origin_files=["1k.bin"],
        rows=[Row("px1", "px1 proxy 1K keep-alive c50", "/1k.bin", 50, True,
                  body_len=1024, body_file="1k.bin", proxy=True)])
    # px2: overload fairness, see benchlib/px2.py (its own runs, variants and
    # table; not in the default set).
    w["px2"] = dict(
        title="overload fairness: 500 connections through the proxy to an origin that "
              "serves 20 requests at once, 50 ms each",
        template="proxy_overload.conf", origin="slot_origin.py", px2=True, rows=[])
    # Cache workloads (benchlib/cache.py): proxy_cache hits in front of px1's
    # origin nginx, sluice against nginx and (c1, c3) varnish with
    # cache.vcl; not in the default set.
    w["c1"] = dict(
        title="proxy_cache hits, 1 KB, keep-alive (and the same 1 KB as a static file)",
        template="cache.conf", origin="proxy_origin.conf", origin_files=["1k.bin"],
        files=["1k.bin"], varnish="cache.vcl", group="cache",
        rows=[Row("c1", "c1 cache hit 1K keep-alive c50", "/1k.bin", 50, True,
                  body_len=1024, body_file="1k.bin", proxy=True, cache=True, group="cache"),
              Row("c1-static", "c1 static 1K keep-alive c50 (no cache)", "/static/1k.bin", 50,
                  True, body_len=1024, body_file="1k.bin", group="cache",
                  servers=("nginx", "sluice"))])
    w["c2"] = dict(
        title="proxy_cache hits over HTTP/2 and TLS, 12-byte /helloworld (nuster's workload)",
        template="cache_tls_h2.conf", tls=True, origin="proxy_origin.conf",
        origin_files=["helloworld"], group="cache",
        rows=[Row("c2-%d" % c, "c2 h2 cache hit 12B c%d m%d" % (c, m), "/helloworld", c, True,
                  body_len=len(HELLO_BODY), body_file="helloworld", client="h2load",
                  tls="TLSv1.3", h2=True, streams=m, default_rate=20000, proxy=True,
                  cache=True, group="cache")
              for c, m in ((100, 100), (1000, 10))])
    w["c3"] = dict(
        title="proxy_cache hits from the disk tier, 100 KB, keep-alive (sluice memory=0)",
        template="cache.conf", origin="proxy_origin.conf", origin_files=["100k.bin"],
        varnish="cache.vcl", group="cache", sluice_subst={"@CACHE_MEMORY@": " memory=0"},
        rows=[Row("c3", "c3 cache hit 100K disk c50", "/100k.bin", 50, True,
                  body_len=100 * 1024, body_file="100k.bin", proxy=True, cache=True,
                  group="cache")])
    w["c4"] = dict(
        title="a 1 GB object from the cache to 10 clients",
        template="cache.conf", origin="proxy_origin.conf", origin_files=["1g.bin"],
        group="cache",
        rows=[Row("c4", "c4 cache hit 1G c10", "/1g.bin", 10, True,
                  body_len=HUGE_SIZE[1], body_file="1g.bin", proxy=True, cache=True,
                  group="cache", throughput=True, large=True, rss=True, wrk_timeout=60)])
    w.update(extra_workloads())
    w["c5"] = dict(
        title="cold misses: 1,000 clients at once for one key, origin answering after 200 ms",
        template="cache_lock.conf", c5=True, rows=[])
    return w


def extra_workloads():
    """Compression (z1-z3), the Kangle PHP benchmark (k1, k2) and workload 1
    with security headers and limit_req (h1sec); none is in the default set.
    nginx loads Debian's brotli module (@LOAD_MODULES@); sluice has brotli
    built in."""
    w = {}
    brotli = dict(subst={"@LOAD_MODULES@": LOAD_BROTLI},
                  sluice_subst={"@LOAD_MODULES@": NO_LOAD_BROTLI})
    w["z1"] = dict(
        title="gzip on the fly (level 6) of a 100 KB HTML page, keep-alive",
        template="compress.conf", files=[PAGE_NAME], **brotli,
        rows=[Row("z1", "z1 gzip 6 100K HTML c50", "/gzip/" + PAGE_NAME, 50, True,
                  body_file=PAGE_NAME, headers=["Accept-Encoding: gzip"], encoding="gzip")])
    w["z2"] = dict(
        title="brotli on the fly (level 5) of a 100 KB HTML page, keep-alive",
        template="compress.conf", files=[PAGE_NAME], **brotli,
        rows=[Row("z2", "z2 brotli 5 100K HTML c50", "/br/" + PAGE_NAME, 50, True,
                  body_file=PAGE_NAME, headers=["Accept-Encoding: br"], encoding="br")])
    w["z3"] = dict(
        title="gzip_static hits: the 100 KB page's precompressed page.html.gz, keep-alive",
        template="compress.conf", files=[PAGE_NAME, PAGE_GZ_NAME], **brotli,
        rows=[Row("z3", "z3 gzip_static 100K HTML c50", "/static/" + PAGE_NAME, 50, True,
                  body_file=PAGE_NAME, headers=["Accept-Encoding: gzip"], encoding="gzip",
                  encoded_file=PAGE_GZ_NAME)])
    # k1, k2: the Kangle article's PHP blog front page through FastCGI with
    # brotli 5, each server in front of its own php-fpm pool (benchlib/fpm.py).
    # sluice's upstream has max_conns + queue (NGINX Plus syntax); nginx's
    # cannot (open-source nginx has no queue).
    php = dict(template="php.conf", fpm=True, files=["index.php"],
               conf_files=[("fastcgi_params", "/etc/nginx/fastcgi_params")],
               subst={"@LOAD_MODULES@": LOAD_BROTLI, "@PHP_MAX_CONNS@": "",
                      "@PHP_QUEUE@": "# no queue: open-source nginx does not have it"},
               sluice_subst={"@LOAD_MODULES@": NO_LOAD_BROTLI,
                             "@PHP_MAX_CONNS@": " max_conns=%d" % FPM_CHILDREN,
                             "@PHP_QUEUE@": "queue 1000 timeout=30s;"})
    w["k1"] = dict(
        title="PHP blog front page via FastCGI + brotli 5, 10 connections (Kangle's low load)",
        rows=[Row("k1", "k1 PHP blog brotli 5 c10", "/", 10, True, fpm=True,
                  headers=["Accept-Encoding: br"], encoding="br", errors_fail=False)], **php)
    w["k2"] = dict(
        title="PHP blog front page via FastCGI + brotli 5, 500 connections (Kangle's high load)",
        rows=[Row("k2", "k2 PHP blog brotli 5 c500", "/", 500, True, fpm=True,
                  headers=["Accept-Encoding: br"], encoding="br", wrk_timeout=10,
                  errors_fail=False)], **php)
    w["h1sec"] = dict(
        title="empty_gif, keep-alive, with security headers (maps + add_header always) "
              "and a limit_req zone that never rejects",
        template="security.conf",
        rows=[Row("h1sec", "h1sec empty_gif + 6 headers + limit_req c50", "/empty.gif", 50,
                  True, body_len=EMPTY_GIF_LEN, expect_headers=SECURITY_HEADERS,
                  errors_fail=True)])
    return w
