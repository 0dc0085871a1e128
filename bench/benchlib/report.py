"""Tables, failure lines and docs/benchmarks.md of bench/run."""

import os
import statistics

from .common import DOCS_PATH, SERVERS, fmt_cell, fmt_dur, fmt_opt, log, ratio, short


# Table metrics shown without a sluice/nginx ratio (diagnostics).
NO_RATIO = ("other_cpu_pct", "client_cpu_pct", "origin_open", "origin_req_per_req",
            "origin_cpu_us_per_req", "origin_cpu_pct", "cpu1_busy_pct", "fpm_cpu_pct")


def strip_px2_raw(res):
    """px2 results without wrk's raw output."""
    if not res:
        return res
    res = dict(res)
    res["runs"] = {k: [{f: v for f, v in r.items() if f != "raw"} for r in runs]
                   for k, runs in res["runs"].items()}
    return res


def strip_raw(results):
    out = []
    for r in results:
        r = dict(r)
        r["runs"] = {s: [{k: v for k, v in x.items() if k != "raw"} for x in runs]
                     for s, runs in r["runs"].items()}
        out.append(r)
    return out


class ReportMixin:
    """Harness methods that turn results into tables and docs."""

    def tables(self):
        """Markdown tables (list of lines)."""
        out = []
        results = [r for r in self.results if r.get("group") != "cache"]
        # --peers h2o: an h2o column before the ratios and a sluice/h2o ratio
        # after sluice/nginx; without it every line is as it always was.
        peer = "h2o" if getattr(self, "h2o_port", None) else None
        servers = SERVERS + ((peer,) if peer else ())

        def tail(rt, cell="", prt="", empty="| |"):
            """The end of a line from the ratio column on: "| RT |" (empty:
            the literal for an empty ratio cell), with the peer's cell before
            it and the sluice/peer ratio after it."""
            if peer:
                return "| %s | %s | %s |" % (cell, rt, prt)
            return "| %s |" % rt if rt or empty is None else empty

        if results:
            out.append("| workload | metric | nginx | sluice | %s" % (
                "h2o | sluice/nginx | sluice/h2o |" if peer else "sluice/nginx |"))
            out.append("|---|---|---:|---:|---:|" + ("---:|---:|" if peer else ""))
            for res in results:
                per = "handshake" if res.get("handshake") else "req"
                who = "proxy" if res.get("proxy") else "server"
                metrics = [("handshakes/s (= req/s)" if res.get("handshake") else "req/s",
                            "rps", "{:,.0f}"),
                           ("%s CPU µs/%s (utime+stime)" % (who, per), "cpu_us_per_req", "{:.2f}"),
                           ("of which kernel µs/%s (stime)" % per, "sys_us_per_req", "{:.2f}"),
                           ("%s CPU µs/%s (schedstat)" % (who, per), "sched_us_per_req", "{:.2f}"),
                           ("%s CPU %%" % who, "server_cpu_pct", "{:.1f}"),
                           ("mean request time ms (h2load)", "mean_ms", "{:.2f}")
                           if res["client"] == "h2load" else ("p99 latency ms", "p99_ms", "{:.2f}")]
                if res.get("handshake"):
                    # Is the server the bottleneck? (client CPU % near 100 = no)
                    metrics.append(("client CPU %% (load generator, CPU %d)" % self.args.client_cpu,
                                    "client_cpu_pct", "{:.1f}"))
                if res["throughput"]:
                    metrics.insert(1, ("MiB/s", "mib_per_s", "{:,.1f}"))
                if res["access_log"]:
                    metrics.append(("log lines/req", "log_lines_per_req", "{:.3f}"))
                if res.get("encoding"):
                    metrics.append(("bytes/response (wrk, headers + %s body)" % res["encoding"],
                                    "bytes_per_resp", "{:,.0f}"))
                if res.get("fpm"):
                    metrics[1:1] = [("2xx responses/s", "ok_rps", "{:,.0f}"),
                                    ("server CPU µs per 2xx response", "cpu_us_per_ok",
                                     "{:.2f}")]
                    # The php-fpm pools (one per server) run on the load
                    # generator's CPU: the pool's own cost, no ratio.
                    c = self.args.client_cpu
                    metrics += [
                        ("php-fpm CPU µs/req (its pool, CPU %d)" % c, "fpm_cpu_us_per_req",
                         "{:.0f}"),
                        ("php-fpm CPU %% (CPU %d)" % c, "fpm_cpu_pct", "{:.1f}"),
                        ("CPU %d busy %% (wrk + php-fpm + rest)" % c, "cpu1_busy_pct", "{:.1f}")]
                if res.get("proxy"):
                    # Diagnostics of the origin and of CPU 1 (load generator +
                    # origin): no ratios. "origin connections" per run is
                    # shown run by run below.
                    c = self.args.client_cpu
                    metrics += [
                        ("origin connections open after run", "origin_open", "{:,.0f}"),
                        ("origin requests / proxied request", "origin_req_per_req", "{:.3f}"),
                        ("origin CPU µs/req (nginx, CPU %d)" % c, "origin_cpu_us_per_req",
                         "{:.2f}"),
                        ("origin CPU %% (CPU %d)" % c, "origin_cpu_pct", "{:.1f}"),
                        ("wrk CPU %% (CPU %d)" % c, "client_cpu_pct", "{:.1f}"),
                        ("CPU %d busy %% (wrk + origin + rest)" % c, "cpu1_busy_pct", "{:.1f}")]
                metrics.append(("noise: other busy % on server CPU", "other_cpu_pct", "{:.1f}"))
                # Rows h2o does not apply to: "-" and no sluice/h2o ratio.
                here = peer if peer and (res["runs"].get(peer) or res["failed"].get(peer)) else None
                first = True
                for label, key, fmt in metrics:
                    vals = {}
                    for s in servers:
                        runs = res["runs"].get(s, [])
                        xs = [r[key] for r in runs if r.get(key) is not None]
                        vals[s] = statistics.median(xs) if xs else None
                    cells = [fmt_cell(vals[s], fmt, res["failed"].get(s)) for s in servers]
                    rts = ["" if key in NO_RATIO or not o else ratio(vals[o], vals["sluice"])
                           for o in ("nginx", here)][:len(servers)]
                    out.append("| %s | %s | %s | %s " % (
                        res["title"] if first else "", label, cells[0], cells[1])
                        + tail(rts[0], *(cells[2:] + rts[1:]), empty=None))
                    first = False
                med = {}
                for s in servers:
                    for key in ("sys_us_per_req", "cpu_us_per_req"):
                        xs = [r[key] for r in res["runs"].get(s, []) if r.get(key) is not None]
                        med[(s, key)] = statistics.median(xs) if xs else None

                def floor(o):
                    return ("%.2f" % (med[("sluice", "sys_us_per_req")] / med[(o, "cpu_us_per_req")])
                            if med[("sluice", "sys_us_per_req")] and med[(o, "cpu_us_per_req")]
                            else "")
                if floor("nginx") or (floor(here) if here else ""):
                    # The best CPU ratio sluice could reach with no user time
                    # at all while its kernel work stays what it is.
                    out.append("| | kernel floor: sluice stime / %s utime+stime | | "
                               % ("nginx's or h2o's" if here else "nginx")
                               + tail(floor("nginx"), "", floor(here) if here else ""))
                # Runs alternate nginx, sluice (, h2o): each pair ran seconds
                # apart, so the run-by-run ratio cancels most of the machine's
                # slow drifts (the same binary varies by +-15 % between runs).
                paired = {}
                for o in ("nginx", here):
                    if not o:
                        continue
                    for key in ("rps", "cpu_us_per_req"):
                        paired[(o, key)] = [b[key] / a[key] for a, b in zip(
                            res["runs"].get(o, []), res["runs"].get("sluice", []))
                            if a.get(key) and b.get(key) is not None]

                def pair(o, f):
                    p = (paired.get((o, "rps")), paired.get((o, "cpu_us_per_req")))
                    return f(*p) if p[0] and p[1] else ""
                med2 = lambda r, c: "%.2f; %.2f" % (statistics.median(r), statistics.median(c))
                # The spread says how far one measurement can be trusted:
                # on a noisy VM it is often wider than a target's margin.
                span = lambda r, c: "%.2f-%.2f; %.2f-%.2f" % (min(r), max(r), min(c), max(c))
                if pair("nginx", med2) or (pair(here, med2) if here else ""):
                    out.append("| | paired runs: median of run-by-run sluice/%s (req/s; CPU) | | "
                               % ("nginx, sluice/h2o" if here else "nginx")
                               + tail(pair("nginx", med2), "", pair(here, med2) if here else ""))
                    out.append("| | paired runs: lowest-highest run-by-run ratio (req/s; CPU) | | "
                               + tail(pair("nginx", span), "", pair(here, span) if here else ""))
                if res.get("proxy"):
                    cells = [", ".join("%d" % r["origin_conns"] for r in res["runs"].get(s, []))
                             or ("FAILED" if res["failed"].get(s) else "-") for s in servers]
                    out.append("| | origin connections (accepted during each run) | %s | %s "
                               % tuple(cells[:2]) + tail("", *cells[2:]))
                cells = []
                for s in servers:
                    runs = res["runs"].get(s, [])
                    if not runs:
                        cells.append("FAILED" if res["failed"].get(s) else "-")
                        continue
                    tot = sum(r["error_total"] for r in runs)
                    reqs = sum(r.get("requests_total", r["requests"]) for r in runs)
                    cells.append("{:,} / {:,}".format(tot, reqs))
                out.append("| | errors / requests (all %d runs) | %s | %s "
                           % (self.args.runs, cells[0], cells[1]) + tail("", *cells[2:]))
                if res.get("fpm"):
                    # k1, k2: wrk's error kinds, summed over the measured runs.
                    for label, kinds in (("wrk timeouts", ("timeout",)),
                                         ("non-2xx/3xx responses", ("non2xx3xx",)),
                                         ("socket errors connect/read/write",
                                          ("connect", "read", "write"))):
                        cells = []
                        for s in SERVERS:
                            runs = res["runs"].get(s, [])
                            cells.append("/".join("{:,}".format(sum(r["errors"].get(k, 0)
                                                                    for r in runs))
                                                  for k in kinds) if runs else
                                         ("FAILED" if res["failed"].get(s) else "-"))
                        out.append("| | %s (all %d runs) | %s | %s "
                                   % (label, self.args.runs, cells[0], cells[1])
                                   + tail("", "-" if peer else ""))
                if res.get("tls"):
                    cells = [res["tls"].get(s, "-") for s in servers]
                    out.append("| | TLS negotiated | %s | %s " % tuple(cells[:2])
                               + tail("", *cells[2:]))
        if self.mem_results:
            mr = self.mem_results
            if out:
                out.append("")
            out.append("| idle keep-alive connections: %d | nginx | sluice | sluice/nginx |"
                       % mr["conns"])
            out.append("|---|---:|---:|---:|")
            for label, key, fmt, scale in (
                    ("RSS before (MiB)", "rss_before", "{:.1f}", 1 / 1048576),
                    ("RSS with idle connections (MiB)", "rss_after", "{:.1f}", 1 / 1048576),
                    ("RSS bytes per idle connection", "rss_per_conn", "{:,.0f}", 1),
                    ("PSS bytes per idle connection", "pss_per_conn", "{:,.0f}", 1),
                    ("connections held (of %d)" % mr["conns"], "ok", "{:,.0f}", 1),
                    ("closed by server while idle", "closed_by_server", "{:,.0f}", 1)):
                vals = {}
                for s in SERVERS:
                    xs = [r[key] for r in mr["runs"].get(s, []) if r.get(key) is not None]
                    vals[s] = statistics.median(xs) * scale if xs else None
                cells = [fmt_cell(vals[s], fmt, mr["failed"].get(s)) for s in SERVERS]
                rt = ratio(vals["nginx"], vals["sluice"]) if key not in ("ok", "closed_by_server") else ""
                out.append("| %s | %s | %s | %s |" % (label, cells[0], cells[1], rt))
        cache = self.cache_tables()
        if cache:
            if out:
                out.append("")
            out += cache
        px2 = self.px2_table()
        if px2:
            if out:
                out.append("")
            out += px2 + [""] + ["- " + l for l in self.px2_lines()]
        return out

    def failure_lines(self):
        out = []
        for res in self.results:
            for s, why in res["failed"].items():
                out.append("%s: %s FAILED: %s" % (res["title"], s, short(why)))
            if res.get("errors_fail"):
                # TLS rows: any load generator error (h2load failed/errored/
                # timeout/not done/non-2xx, ab failed/non-2xx, wrk socket
                # errors/non-2xx) is a failure too; the figures are kept.
                for s in res["runs"]:
                    runs = res["runs"].get(s, [])
                    tot = sum(r["error_total"] for r in runs)
                    if tot:
                        kinds = {}
                        for r in runs:
                            for k, v in r["errors"].items():
                                kinds[k] = kinds.get(k, 0) + v
                        out.append("%s: %s: %d errors in %d measured runs (%s)" % (
                            res["title"], s, tot, len(runs),
                            ", ".join("%s %d" % kv for kv in kinds.items() if kv[1])))
        if self.mem_results:
            for s, why in self.mem_results["failed"].items():
                out.append("mem: %s FAILED: %s" % (s, short(why)))
        return out + self.px2_failures() + self.cache_failures()

    def write_docs(self, machine, command, started, finished, tables):
        a = self.args
        lines = ["# Benchmarks: sluice vs nginx", ""]
        if self.self_test:
            lines += ["> **Self-test run: the \"sluice\" column is nginx** (%s). These figures "
                      "only check the harness; they say nothing about sluice." % a.sluice, ""]
        lines += [
            "Generated by `bench/run` on %s (took %s). Re-create with:" % (
                finished.strftime("%Y-%m-%d %H:%M UTC"), fmt_dur(finished - started)),
            "", "```", command, "```", "",
            "Each figure is the median of %d measured runs of %g s (after a %g s warm-up per "
            "server), alternating nginx and sluice. Both servers read the same configuration "
            "text (bench/conf/), differing only in prefix directory and port. Each server runs "
            "as one worker pinned to CPU %d; the load generator (wrk, or ab/h2load/hsload where the "
            "load commands say so; one thread) is pinned to "
            "CPU %d. Server CPU is the change in utime+stime (and, second figure, in schedstat "
            "run time) summed over the server's whole process tree and all threads, divided by "
            "completed requests. `sluice/nginx` > 1 means sluice's figure is higher: better for "
            "req/s and MiB/s, worse for CPU, latency and memory. The memory table is the median "
            "of %d measurement(s), each on freshly started servers. See bench/README.md."
            % (a.runs, a.duration, a.warmup, a.server_cpu, a.client_cpu, a.mem_runs)
            + (" h2load rows run a fixed request count (-n, the same for both servers, sized "
               "from nginx's warm-up rate to last about %g s); their load commands show it."
               % a.duration if any(r["client"] == "h2load" for r in self.results) else "")
            + (" px rows measure nginx and sluice as reverse proxies in front of one origin (a "
               "separate nginx serving the file with keep-alive, pinned to CPU %d together "
               "with the load generator, identically for both proxies); the CPU figures are "
               "the proxy's own." % a.client_cpu
               if any(r.get("proxy") for r in self.results) else "")
            + (" With `--peers h2o`, h2o (%s) is a third server on the static-file rows, run "
               "after sluice in each round: one thread pinned like the others, the same files "
               "and certificate, its own YAML config (bench/README.md lists its settings)."
               % a.h2o if getattr(self, "h2o_port", None) else ""), "",
            "## Machine", ""]
        lines += ["| | |", "|---|---|"] + ["| %s | %s |" % (k, v.replace("|", "\\|"))
                                          for k, v in machine]
        lines += ["", "## Results", ""] + tables
        fl = self.failure_lines()
        if fl:
            lines += ["", "## Failures", ""] + ["- " + l for l in fl]
        if self.notes:
            lines += ["", "## Notes", ""] + ["- " + n for n in self.notes]
        lines += ["", "## Load commands", "",
                  "Shown for nginx's port; sluice's runs differ only in the port.", "", "```"]
        lines += ["# %s\n%s" % (t, c) for t, c in self.commands]
        lines += ["```", ""]
        lines += ["## Per-run values", "",
                  "req/s, server CPU µs/req (utime+stime), p99 ms, errors, CPU % on the server's "
                  "core used by anything else (noise); in run order." , ""]
        for res in self.results:
            for s in res["runs"]:
                runs = res["runs"].get(s, [])
                if runs:
                    lines.append("- %s, %s: %s" % (res["title"], s, "; ".join(
                        "%.0f, %.2f, %s, %d, %s%%" % (
                            r["rps"], r["cpu_us_per_req"] or 0,
                            fmt_opt(r["p99_ms"], "%.2f") if r.get("mean_ms") is None
                            else "mean " + fmt_opt(r["mean_ms"], "%.2f"),
                            r["error_total"], fmt_opt(r["other_cpu_pct"], "%.1f"))
                        for r in runs))
                        + ("; origin connections per run: %s" % ", ".join(
                            str(r["origin_conns"]) for r in runs) if res.get("proxy") else "")
                        + ("; origin requests per run: %s" % ", ".join(
                            str(r["origin_requests"]) for r in runs) if res.get("cache") else ""))
        if self.mem_results:
            for s in SERVERS:
                runs = self.mem_results["runs"].get(s, [])
                if runs:
                    lines.append("- mem, %s: RSS bytes/conn %s" % (
                        s, "; ".join("%.0f" % r["rss_per_conn"] for r in runs)))
        lines += self.px2_per_run()
        lines.append("")
        path = a.docs_path or DOCS_PATH
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines))
        log("Wrote %s" % path)
