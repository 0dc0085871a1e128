"""bench/run's command line: every option, its default and its help text."""

import argparse


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Benchmark sluice against nginx with identical nginx-syntax configs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sluice", help="sluice binary (default: cargo build --release, then "
                                     "target/release/sluice, or $CARGO_TARGET_DIR/release/"
                                     "sluice when that is set)")
    ap.add_argument("--nginx", help="nginx binary (default: nginx on PATH or /usr/sbin/nginx)")
    ap.add_argument("--workloads", default="1,2,3,4,5,mem,tls1,tls2,tls3,tls4,px1",
                    help="comma-separated: 1 empty_gif keep-alive, 2 new connection per request, "
                         "3 static 0-100KB, 4 static 1MB/10MB, 5 access log, mem idle connections, "
                         "tls1 HTTPS empty_gif keep-alive, tls2 full TLS handshakes (TLS 1.3 and "
                         "1.2), tls3 HTTP/2+TLS 12-byte file c100 m100, tls4 HTTP/2+TLS 10 MB file, "
                         "px1 reverse proxy of 1 KB responses (origin: a separate nginx on the "
                         "client CPU), px2 overload fairness through the proxy (not in the "
                         "default set: its own 30 s runs, 2 per variant, take about 3.5 minutes; "
                         "see --px2-*); cache workloads (not in the default set): c1 1 KB hits "
                         "(+ varnish, + the same file static), c2 HTTP/2+TLS 12-byte hits c100 "
                         "m100 and c1000 m10, c3 100 KB disk-tier hits (+ varnish), c4 a 1 GB "
                         "object to 10 clients, c5 1,000 cold misses for one key with "
                         "proxy_cache_lock; also not in the default set: z1 gzip 6 and z2 "
                         "brotli 5 on the fly of a 100 KB HTML page, z3 its gzip_static copy, "
                         "k1/k2 the Kangle PHP blog via php-fpm with brotli 5 at c10/c500, "
                         "h1sec workload 1 with security headers and limit_req; tls5 "
                         "HTTP/2+TLS 12-byte file c1000 m10 and c10 m1, tls6 HTTP/2+TLS 100 KB "
                         "file c100 m100, h2c HTTP/2 without TLS 12-byte file c100 m100")
    ap.add_argument("--varnish", help="varnishd binary for the cache workloads c1 and c3 "
                                      "(default: varnishd on PATH or /usr/sbin/varnishd; "
                                      "installed with apt-get when missing)")
    ap.add_argument("--no-varnish", action="store_true",
                    help="cache workloads: nginx and sluice only")
    ap.add_argument("--peers", default="",
                    help="comma-separated peer servers measured as a third column where a "
                         "workload allows it; h2o: Debian's h2o 2.2.5 (num-threads 1, the same "
                         "files, certificate and port layout) on the static-file workloads 3, "
                         "4, tls3, tls4, tls5, tls6 and h2c. Default: none")
    ap.add_argument("--h2o", help="h2o binary for --peers h2o (default: h2o on PATH or "
                                  "/usr/bin/h2o, else Debian's h2o package downloaded with "
                                  "apt-get download and unpacked into the temp dir, not "
                                  "installed)")
    ap.add_argument("--runs", type=int, help="measured runs per server per row (default 3)")
    ap.add_argument("--duration", type=int, help="seconds per measured run (default 10)")
    ap.add_argument("--warmup", type=int,
                    help="seconds of warm-up per server per row, 0 for none (default 3)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: defaults become --duration 3 --warmup 1 --runs 3 "
                         "--mem-runs 1 --px2-duration 10 --px2-runs 1 (explicit options still "
                         "win)")
    ap.add_argument("--client", choices=("wrk", "ab"), default="wrk",
                    help="ab: ApacheBench for workload 2 (instead of wrk) and for tls2 (instead "
                         "of bench/hsload; ab verifies the server's signature and is then the "
                         "bottleneck). 1, 3, 4, 5, tls1 and px1 always use wrk, tls3 and tls4 "
                         "h2load")
    ap.add_argument("--ab-max-requests", type=int, default=1000000,
                    help="ab -n cap per run (ab also stops after --duration)")
    ap.add_argument("--h2load-requests", type=int,
                    help="fixed h2load -n for every measured run of the h2load rows (tls3-tls6, "
                         "h2c, c2); "
                         "default: sized from nginx's warm-up rate to last about --duration")
    ap.add_argument("--idle-conns", type=int, default=10000,
                    help="idle keep-alive connections for the mem workload")
    ap.add_argument("--idle-settle", type=float, default=5.0,
                    help="seconds to wait after the idle connections are set up")
    ap.add_argument("--mem-runs", type=int,
                    help="mem workload repetitions, each on freshly started servers (default 3, "
                         "1 with --quick)")
    ap.add_argument("--server-cpu", type=int, default=0, help="CPU the servers are pinned to")
    ap.add_argument("--client-cpu", type=int, default=1, help="CPU the load generator is pinned to")
    ap.add_argument("--port", type=int, default=18080,
                    help="first port tried; nginx gets the first free one, sluice the next "
                         "(and px1's origin the one after)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds of rest before each run")
    ap.add_argument("--px2-duration", type=int,
                    help="px2: seconds per measured run (default 30, 10 with --quick)")
    ap.add_argument("--px2-runs", type=int,
                    help="px2: measured runs per variant (default 2, 1 with --quick)")
    ap.add_argument("--px2-variants", default="nginx,sluice,nginx-nomax",
                    help="px2: proxy variants, in the order they alternate: nginx (max_conns=20), "
                         "sluice (max_conns=20 + queue 1000 timeout=10s), nginx-nomax (nginx "
                         "without max_conns)")
    ap.add_argument("--tmpdir", help="where the per-run temp dir is created")
    ap.add_argument("--keep-tmp", action="store_true", help="do not delete the temp dir")
    ap.add_argument("--no-sysctl", action="store_true",
                    help="never change sysctls (tcp_tw_reuse is set to 1 only if it is 0)")
    ap.add_argument("--json", help="also write all results to this JSON file")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/benchmarks.md")
    ap.add_argument("--docs-path", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    defaults = dict(duration=3, warmup=1, runs=3, mem_runs=1, px2_duration=10, px2_runs=1) \
        if args.quick else dict(duration=10, warmup=3, runs=3, mem_runs=3, px2_duration=30,
                                px2_runs=2)
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.runs < 1 or args.duration <= 0:
        ap.error("--runs must be >= 1 and --duration > 0")
    for p in (x for x in args.peers.split(",") if x):
        if p not in ("h2o",):
            ap.error("--peers: unknown peer %r (known: h2o)" % p)
    return args
