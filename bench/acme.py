#!/usr/bin/env python3
"""ACME and OCSP stapling: sluice against Debian's Caddy on one Pebble,
and sluice's handshakes with and without a stapled OCSP response.

  a1: time to a first certificate. Pebble (Let's Encrypt's test CA,
      target/tools from scripts/install-pebble) with pebble-challtestsrv
      as its DNS server (127.0.0.1 for every name), PEBBLE_VA_NOSLEEP=1 and
      PEBBLE_WFE_NONCEREJECT=0 (no random validation delay, no random
      badNonce refusals: both would only add noise). Then, taking turns
      run by run, sluice with an nginx-acme configuration (`acme_issuer`,
      `acme_certificate`, `ssl_certificate $acme_certificate`) and Caddy
      (a Caddyfile with `acme_ca`, `acme_ca_root`), each started with an
      empty state directory; the clock runs from just before the process
      is spawned until a TLS client (Python's ssl, SNI example.test,
      verifying against the root Pebble made at its start) completes a
      handshake, polled every 20 ms. Both listen on the same loopback
      ports (one at a time): Pebble's httpPort and tlsPort are those, so
      either challenge type (sluice: http-01, its default; Caddy: its own
      choice) validates.
  a2: renewal under load. Pebble restarted with profiles whose
      certificates last --validity seconds (48: "default", which Caddy 2.6
      gets, and "shortlived", which sluice asks for with `profile
      shortlived require`). Caddy renews at two thirds of the lifetime
      (`renew_interval 1s` and its default renewal window of a third), 32 s
      after issuance; sluice follows Pebble's renewal information (ARI),
      a random moment of the certificate's life after its first third.
      bench/hsload -c 50 --sni example.test
      runs for --renew-duration seconds (28) centred on that moment (a new
      connection and a full handshake per request, so every request gets
      the certificate of that moment; keep-alive or resumed connections
      would never see the new one; hsload verifies nothing), and from the
      first certificate on the harness does a verifying handshake every
      250 ms and records the serial. Reported: requests done and failed
      (any hsload error), verifying handshakes that failed (an expired or
      missing certificate), the serials seen and when the new one came.
  a3: handshakes per second with a stapled OCSP response and without: the
      same certificate (ECDSA P-256, from a CA made with `openssl ca`, with
      an OCSP URL in its Authority Information Access; `openssl ocsp` as
      the responder on loopback) served with `ssl_stapling on` and with
      `ssl_stapling off`, by sluice and by Debian's nginx (4 servers up at
      once, taking turns run by run), bench/hsload -c 100, TLSv1.3 and
      TLSv1.2. hsload's rustls client sends status_request in every
      ClientHello and counts the handshakes that carried a staple (its
      `ocsp:` line): a run with stapling on must have a staple on every
      handshake, a run with it off on none.

Servers (sluice with one worker, Caddy with GOMAXPROCS 1 from its
affinity, nginx with one worker) are pinned to CPU 0; Pebble, the DNS
server, the OCSP responder, hsload and the harness to CPU 1. Reported:
medians with the run-by-run range, and paired ratios (run i of one
against run i of the other) with their range.

    bench/acme.py --sluice target/release/sluice [--workloads a1,a2,a3]
                  [--runs 9] [--renew-runs 2] [--duration 5]

Loopback only, every run bounded (a1: 60 s per start; a2: --renew-duration,
at most 30; a3: --duration). Standard library only; needs caddy, nginx,
openssl (Debian packages), Pebble (scripts/install-pebble) and cargo for
bench/hsload. Run it as root (nginx's worker switches to nobody).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.common import (  # noqa: E402
    log, subst, write_text as write,
    CLK_TCK, HSLOAD_BIN, REPO_DIR, cpu_sample, pick_ports, process_tree, raise_nofile_preexec)
from benchlib.loadgen import hsload_cmd, parse_hsload  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
NAME = "example.test"
TOOLS = os.path.join(REPO_DIR, "target", "tools")
MINICA = os.path.join(TOOLS, "pebble", "pebble.minica.pem")
POLL = 0.02           # a1: seconds between handshake attempts
FIRST_LIMIT = 60      # a1: seconds a server has to get its first certificate
RENEW_POLL = 0.25     # a2: seconds between verifying handshakes
# Pebble's Retry-After on pending authorizations and orders: none. Pebble
# sends it as delta-seconds or, at random, as an HTTP-date (RFC 9110 allows
# both); Caddy 2.6's ACME library (acmez) accepts only delta-seconds, fails
# the order on an HTTP-date and tries again 60 s later, so with Pebble's
# Retry-After every other Caddy start would take a minute. Without it,
# each client polls at its own pace (sluice: once a second).
RETRY_AFTER = 0

SLUICE_ACME = """
daemon off; worker_processes 1; worker_rlimit_nofile 65535;
pid @PREFIX@/run.pid; error_log @PREFIX@/logs/error.log info;
events { worker_connections 20000; }
http {
    access_log off;
    keepalive_timeout 0;
    resolver 127.0.0.1:@DNS@;
    acme_issuer pebble {
        uri https://127.0.0.1:@PEBBLE@/dir;
        ssl_trusted_certificate @MINICA@;
        contact admin@example.test;
        state_path @PREFIX@/acme;
        accept_terms_of_service;
        @PROFILE@
    }
    server { listen 127.0.0.1:@HTTP@; server_name example.test; location / { return 404; } }
    server {
        listen 127.0.0.1:@HTTPS@ ssl backlog=4096;
        server_name example.test;
        acme_certificate pebble;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
        location / { return 200 "acme ok\\n"; }
    }
}
"""

CADDYFILE = """{
\tadmin off
\thttp_port @HTTP@
\thttps_port @HTTPS@
\tacme_ca https://127.0.0.1:@PEBBLE@/dir
\tacme_ca_root @MINICA@
\temail admin@example.test
\tstorage file_system {
\t\troot @PREFIX@/data
\t}
\trenew_interval 1s
\tskip_install_trust
}
example.test {
\tbind 127.0.0.1
\trespond "acme ok" 200
}
"""

STAPLE_CONF = """
daemon off; worker_processes 1; worker_rlimit_nofile 65535;
pid @PREFIX@/run.pid; error_log @PREFIX@/logs/error.log;
events { worker_connections 20000; }
http {
    default_type application/octet-stream;
    access_log off;
    server_tokens off;
    keepalive_timeout 0;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_stapling @STAPLING@;
    server {
        listen 127.0.0.1:@PORT@ ssl backlog=4096;
        server_name localhost;
        ssl_certificate @PKI@/leaf-chain.crt;
        ssl_certificate_key @PKI@/leaf.key;
        location = /empty.gif { empty_gif; }
    }
}
"""

CA_CNF = """[ca]
default_ca = myca
[myca]
new_certs_dir = .
database = ./index
default_md = sha256
policy = pol
serial = ./serial
default_days = 2
x509_extensions = leaf
copy_extensions = none
[pol]
commonName = supplied
[leaf]
basicConstraints = critical,CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
authorityInfoAccess = OCSP;URI:http://127.0.0.1:@OCSP@/
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
[req]
distinguished_name = dn
[dn]
"""


def wait_port(port, proc=None, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit("%s exited (%s)" % (" ".join(proc.args), proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("port %d never opened" % port)


def spawn(cmd, cpu, logfile, env=None):
    with open(logfile, "ab") as out:
        return subprocess.Popen(["taskset", "-c", str(cpu)] + cmd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=raise_nofile_preexec, env=env)


def stop(p, sig=signal.SIGTERM):
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, sig)
        p.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(5)
    except ProcessLookupError:
        pass


class Pebble:
    """pebble-challtestsrv (for the whole run) and Pebble (restarted with
    other profiles for a2)."""

    def __init__(self, top, ports):
        self.top = top
        self.port, self.mgmt, self.dns, self.dns_mgmt, self.http, self.https = ports
        self.proc = None
        self.dns_proc = spawn([os.path.join(TOOLS, "bin", "pebble-challtestsrv"),
                               "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
                               "-dnsserver", "127.0.0.1:%d" % self.dns,
                               "-management", "127.0.0.1:%d" % self.dns_mgmt,
                               "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""],
                              CLIENT_CPU, os.path.join(top, "challtestsrv.log"))
        wait_port(self.dns, self.dns_proc)

    def start(self, validity=None):
        stop(self.proc)
        conf = {"listenAddress": "127.0.0.1:%d" % self.port,
                "managementListenAddress": "127.0.0.1:%d" % self.mgmt,
                "certificate": os.path.join(TOOLS, "pebble", "cert.pem"),
                "privateKey": os.path.join(TOOLS, "pebble", "key.pem"),
                "httpPort": self.http, "tlsPort": self.https, "ocspResponderURL": "",
                "externalAccountBindingRequired": False,
                "retryAfter": {"authz": RETRY_AFTER, "order": RETRY_AFTER}, "keyAlgorithm": "ecdsa"}
        if validity:
            conf["profiles"] = {
                "default": {"description": "short", "validityPeriod": validity},
                "shortlived": {"description": "short", "validityPeriod": validity}}
        path = os.path.join(self.top, "pebble.json")
        write(path, json.dumps({"pebble": conf}))
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        env.pop("PEBBLE_VA_ALWAYS_VALID", None)
        self.proc = spawn([os.path.join(TOOLS, "bin", "pebble"), "-config", path,
                           "-dnsserver", "127.0.0.1:%d" % self.dns], CLIENT_CPU,
                          os.path.join(self.top, "pebble.log"), env=env)
        wait_port(self.port, self.proc)
        wait_port(self.mgmt, self.proc)
        # The root Pebble generated at this start: what a client verifies against.
        ctx = ssl.create_default_context(cafile=MINICA)
        root = urllib.request.urlopen("https://127.0.0.1:%d/roots/0" % self.mgmt,
                                      context=ctx, timeout=10).read()
        self.root = os.path.join(self.top, "root-%d.pem" % time.time_ns())
        with open(self.root, "wb") as f:
            f.write(root)
        self.client = ssl.create_default_context(cafile=self.root)

    def close(self):
        stop(self.proc)
        stop(self.dns_proc)


def served(pebble, port, timeout=2.0):
    """The serial of the certificate served for NAME if it verifies against
    Pebble's root (chain, name, dates), else None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as s:
            with pebble.client.wrap_socket(s, server_hostname=NAME) as t:
                return t.getpeercert()["serialNumber"]
    except (OSError, ssl.SSLError):
        return None


class AcmeServer:
    """One start of sluice or Caddy with a fresh state directory."""

    def __init__(self, kind, binary, top, pebble, profile=False):
        self.kind = kind
        self.prefix = tempfile.mkdtemp(prefix=kind + "-", dir=top)
        os.chmod(self.prefix, 0o755)
        subs = {"@PREFIX@": self.prefix, "@DNS@": pebble.dns, "@PEBBLE@": pebble.port,
                "@MINICA@": MINICA, "@HTTP@": pebble.http, "@HTTPS@": pebble.https,
                "@PROFILE@": "profile shortlived require;" if profile else ""}
        self.env = None
        if kind == "sluice":
            os.makedirs(os.path.join(self.prefix, "logs"))
            conf = os.path.join(self.prefix, "nginx.conf")
            write(conf, subst(SLUICE_ACME, subs))
            self.cmd = [binary, "-p", self.prefix, "-c", conf]
            self.log = os.path.join(self.prefix, "logs", "error.log")
        else:
            conf = os.path.join(self.prefix, "Caddyfile")
            write(conf, subst(CADDYFILE, subs))
            self.cmd = [binary, "run", "--config", conf, "--adapter", "caddyfile"]
            self.log = os.path.join(self.prefix, "caddy.log")
            # Caddy's autosave.json and data directory, away from $HOME.
            self.env = dict(os.environ, XDG_CONFIG_HOME=self.prefix, XDG_DATA_HOME=self.prefix,
                            HOME=self.prefix)
        self.proc = None

    def start(self):
        self.proc = spawn(self.cmd, SERVER_CPU, os.path.join(self.prefix, "stdout.log"), env=self.env)

    def tail(self, n=2000):
        out = ""
        for p in (self.log, os.path.join(self.prefix, "stdout.log")):
            try:
                out += open(p, errors="replace").read()[-n:]
            except OSError:
                pass
        return out

    def wait_first(self, pebble, limit=FIRST_LIMIT):
        """Seconds from just before the spawn until a verified handshake."""
        t0 = time.monotonic()
        self.start()
        deadline = t0 + limit
        while time.monotonic() < deadline:
            serial = served(pebble, pebble.https, timeout=1.0)
            if serial:
                return time.monotonic() - t0, serial
            if self.proc.poll() is not None:
                raise SystemExit("%s exited (%s):\n%s" % (self.kind, self.proc.returncode, self.tail()))
            time.sleep(POLL)
        raise SystemExit("%s: no certificate within %ds:\n%s" % (self.kind, limit, self.tail()))

    def stop(self):
        stop(self.proc)


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def wait_closed(ports, timeout=10):
    deadline = time.monotonic() + timeout
    while any(listening(p) for p in ports):
        if time.monotonic() > deadline:
            raise SystemExit("ports %s still open after the server stopped" % (ports,))
        time.sleep(0.05)


def span(xs, fmt="%.2f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


# --------------------------------------------------------------------------- a1

def run_a1(a, top, pebble, binaries):
    log("\n== a1 time to a first certificate: %d runs each, taking turns" % a.runs)
    pebble.start()
    times = {"sluice": [], "caddy": []}
    for run in range(a.runs):
        order = ["sluice", "caddy"] if run % 2 == 0 else ["caddy", "sluice"]
        for kind in order:
            srv = AcmeServer(kind, binaries[kind], top, pebble)
            try:
                t, serial = srv.wait_first(pebble)
            finally:
                srv.stop()
                wait_closed((pebble.http, pebble.https))
            times[kind].append(t)
            log("  run %d %-6s %6.3f s  serial %s" % (run + 1, kind, t, serial))
            shutil.rmtree(srv.prefix, ignore_errors=True)
            time.sleep(a.pause)
    ratios = [s / c for s, c in zip(times["sluice"], times["caddy"])]
    res = {"times": times, "ratios": ratios}
    log("\na1 time to a first certificate (s): median (range)")
    for kind in ("sluice", "caddy"):
        log("  %-6s %s" % (kind, span(times[kind], "%.3f")))
    log("  sluice/caddy paired: %s" % span(ratios))
    return res


# --------------------------------------------------------------------------- a2

def run_a2(a, top, pebble, binaries):
    log("\n== a2 renewal under load: certificates of %d s, hsload -c 50 for %d s, %d runs each"
        % (a.validity, a.renew_duration, a.renew_runs))
    pebble.start(validity=a.validity)
    rows = {"sluice": [], "caddy": []}
    for run in range(a.renew_runs):
        order = ["sluice", "caddy"] if run % 2 == 0 else ["caddy", "sluice"]
        for kind in order:
            srv = AcmeServer(kind, binaries[kind], top, pebble, profile=(kind == "sluice"))
            try:
                first, serial0 = srv.wait_first(pebble)
                issued = time.monotonic()
                seen, stats = [serial0], {"probes": 0, "probe_failed": 0, "renewed_at": None}
                done = threading.Event()

                def poller():
                    while not done.is_set():
                        s = served(pebble, pebble.https, timeout=2.0)
                        stats["probes"] += 1
                        if s is None:
                            stats["probe_failed"] += 1
                        elif s != seen[-1]:
                            seen.append(s)
                            if stats["renewed_at"] is None:
                                stats["renewed_at"] = time.monotonic() - issued
                        done.wait(RENEW_POLL)

                th = threading.Thread(target=poller)
                th.start()
                # Caddy renews at two thirds of the lifetime: the load is
                # centred on that moment.
                lead = a.validity * 2 / 3 - a.renew_duration / 2
                time.sleep(max(0.0, issued + lead - time.monotonic()))
                load_from = time.monotonic() - issued
                cmd = hsload_cmd(CLIENT_CPU, "https://127.0.0.1:%d/" % pebble.https, 50,
                                 a.renew_duration, "TLSv1.3")
                cmd[-1:-1] = ["--sni", NAME]    # Caddy has no certificate without it
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.renew_duration + 30,
                                   preexec_fn=raise_nofile_preexec)
                done.set()
                th.join()
                if srv.proc.poll() is not None:
                    raise SystemExit("%s died during the load:\n%s" % (kind, srv.tail()))
                h = parse_hsload(p.stdout)
                errs = sum(h["errors"].values())
                row = {"first_s": first, "ok": h["requests"], "errors": errs, "error_kinds": h["errors"],
                       "probes": stats["probes"], "probe_failed": stats["probe_failed"],
                       "serials": seen, "renewed_at": stats["renewed_at"], "rps": h["rps"],
                       "load_from": load_from}
                rows[kind].append(row)
                log("  run %d %-6s %7d ok, %d failed (%s), %d/%d verifying handshakes failed, "
                    "serials %d (renewed %s s after the first was served; load from %.1f s), %.0f req/s"
                    % (run + 1, kind, row["ok"], errs,
                       ", ".join("%s %d" % kv for kv in h["errors"].items() if kv[1]) or "-",
                       row["probe_failed"], row["probes"], len(seen),
                       "%.1f" % row["renewed_at"] if row["renewed_at"] is not None else "never",
                       load_from, row["rps"]))
                if errs and p.stderr:
                    log("    hsload: " + p.stderr.strip().replace("\n", "\n    hsload: ")[:1500])
            finally:
                srv.stop()
                wait_closed((pebble.http, pebble.https))
            if not a.keep_tmp:
                shutil.rmtree(srv.prefix, ignore_errors=True)
            time.sleep(a.pause)
    log("\na2 renewal under load (sum over runs)")
    for kind in ("sluice", "caddy"):
        rs = rows[kind]
        log("  %-6s %d requests ok, %d failed; %d verifying handshakes, %d failed; renewed in %d of %d runs"
            % (kind, sum(r["ok"] for r in rs), sum(r["errors"] for r in rs),
               sum(r["probes"] for r in rs), sum(r["probe_failed"] for r in rs),
               sum(1 for r in rs if len(r["serials"]) > 1), len(rs)))
    return rows


# --------------------------------------------------------------------------- a3

def make_pki(d, ocsp_port):
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    write(os.path.join(d, "ca.cnf"), subst(CA_CNF, {"@OCSP@": ocsp_port}))
    write(os.path.join(d, "index"), "")
    write(os.path.join(d, "serial"), "1000\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ossl("req", "-x509", "-new", "-subj", "/CN=bench ocsp root/", "-keyout", "root.key", "-out",
         "root.crt", *ec, "-config", "ca.cnf", "-extensions", "ca_ext", "-days", "2")
    ossl("req", "-new", "-subj", "/CN=localhost/", "-keyout", "leaf.key", "-out", "leaf.csr", *ec,
         "-config", "ca.cnf")
    ossl("ca", "-batch", "-config", "ca.cnf", "-keyfile", "root.key", "-cert", "root.crt",
         "-in", "leaf.csr", "-out", "leaf.crt")
    with open(os.path.join(d, "leaf-chain.crt"), "wb") as f:
        for n in ("leaf.crt", "root.crt"):
            f.write(open(os.path.join(d, n), "rb").read())


def staple_status(port):
    """'good' etc. when `openssl s_client -status` got a staple, else None."""
    out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                          "-servername", "localhost", "-status"],
                         input=b"", capture_output=True, timeout=15).stdout.decode(errors="replace")
    if "OCSP response: no response sent" in out or "Cert Status:" not in out:
        return None
    return next(l.split(":", 1)[1].strip() for l in out.splitlines() if "Cert Status:" in l)


def run_a3(a, top, binaries, ports):
    pki = os.path.join(top, "pki")
    os.makedirs(pki)
    os.chmod(top, 0o755)
    os.chmod(pki, 0o755)
    ocsp_port = ports[0]
    make_pki(pki, ocsp_port)
    responder = subprocess.Popen(["taskset", "-c", str(CLIENT_CPU), "openssl", "ocsp", "-index", "index",
                                  "-port", str(ocsp_port), "-CA", "root.crt", "-rsigner", "root.crt",
                                  "-rkey", "root.key", "-ndays", "1"], cwd=pki,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    # Probed with a real query (as tests/common/tls.rs does): a bare
    # connect-and-close leaves `openssl ocsp` stuck on that connection.
    deadline = time.monotonic() + 10
    while True:
        q = subprocess.run(["openssl", "ocsp", "-issuer", "root.crt", "-cert", "leaf.crt", "-url",
                            "http://127.0.0.1:%d/" % ocsp_port, "-timeout", "2", "-noverify"],
                           cwd=pki, capture_output=True, text=True, timeout=10)
        if "leaf.crt: good" in q.stdout:
            break
        if time.monotonic() > deadline or responder.poll() is not None:
            raise SystemExit("the OCSP responder did not start: " + q.stdout + q.stderr)
        time.sleep(0.1)
    names = ["sluice-off", "sluice-on"] + ([] if a.no_nginx else ["nginx-off", "nginx-on"])
    servers = {}
    try:
        for i, name in enumerate(names):
            kind, stapling = name.split("-")
            prefix = os.path.join(top, name)
            os.makedirs(os.path.join(prefix, "logs"))
            os.chmod(prefix, 0o755)
            port = ports[1 + i]
            conf = os.path.join(prefix, "nginx.conf")
            write(conf, subst(STAPLE_CONF, {"@PREFIX@": prefix, "@PORT@": port, "@PKI@": pki,
                                            "@STAPLING@": stapling}))
            p = spawn([binaries[kind], "-p", prefix, "-c", conf], SERVER_CPU,
                      os.path.join(prefix, "stdout.log"))
            wait_port(port, p)
            servers[name] = (p, port, prefix)
        # The staples are fetched in the background (nginx: at the first
        # handshake, stapled from a later one).
        for name, (p, port, prefix) in servers.items():
            want = "good" if name.endswith("-on") else None
            deadline = time.monotonic() + 15
            got = staple_status(port)
            while got != want and time.monotonic() < deadline:
                time.sleep(0.3)
                got = staple_status(port)
            if got != want:
                raise SystemExit("%s: staple %r, want %r" % (name, got, want))
            log("  %s: openssl s_client -status: %s" % (name, got or "no response sent"))
        results = {}
        for tls in ("TLSv1.3", "TLSv1.2"):
            log("\n== a3 %s: hsload -c 100 -d %g, %d runs, order rotating" % (tls, a.duration, a.runs))
            for name in names:
                results[(name, tls)] = []
            for name, (p, port, _) in servers.items():   # warm-up, not recorded
                subprocess.run(hsload_cmd(CLIENT_CPU, "https://127.0.0.1:%d/empty.gif" % port, 100, 1, tls),
                               capture_output=True, timeout=40)
            for run in range(a.runs):
                order = names[run % len(names):] + names[:run % len(names)]
                for name in order:
                    p, port, _ = servers[name]
                    time.sleep(a.pause)
                    before = cpu_sample(process_tree(p.pid))[0]
                    out = subprocess.run(hsload_cmd(CLIENT_CPU, "https://127.0.0.1:%d/empty.gif" % port, 100,
                                                    a.duration, tls),
                                         capture_output=True, text=True, timeout=a.duration + 30,
                                         preexec_fn=raise_nofile_preexec)
                    after = cpu_sample(process_tree(p.pid))[0]
                    if p.poll() is not None:
                        raise SystemExit("%s died" % name)
                    h = parse_hsload(out.stdout)
                    stapled = int(out.stdout.split("ocsp: ", 1)[1].split()[0])
                    errs = sum(h["errors"].values())
                    if errs or h["tls"] is None or tls not in out.stdout:
                        raise SystemExit("%s %s: errors %s\n%s" % (name, tls, h["errors"], out.stdout))
                    want_all = name.endswith("-on")
                    if (want_all and stapled < h["requests"]) or (not want_all and stapled):
                        raise SystemExit("%s %s: %d of %d handshakes stapled" % (name, tls, stapled, h["requests"]))
                    cpu_s = (after - before) / CLK_TCK
                    r = {"rps": h["rps"], "us": cpu_s * 1e6 / max(1, h["requests"]), "ok": h["requests"],
                         "stapled": stapled}
                    results[(name, tls)].append(r)
                    log("  run %d %-10s %7.0f handshakes/s  %6.1f us CPU/handshake  stapled %d/%d"
                        % (run + 1, name, r["rps"], r["us"], stapled, h["requests"]))
        log("\na3 handshakes with and without a staple: median (range)")
        for tls in ("TLSv1.3", "TLSv1.2"):
            for kind in ("sluice", "nginx"):
                if kind + "-on" not in servers:
                    continue
                off, on = results[(kind + "-off", tls)], results[(kind + "-on", tls)]
                log("  %s %s" % (tls, kind))
                for name, rs in ((kind + "-off", off), (kind + "-on", on)):
                    log("    %-10s %s handshakes/s, %s us CPU/handshake" % (
                        name, span([r["rps"] for r in rs], "%.0f"), span([r["us"] for r in rs], "%.1f")))
                log("    on/off paired: handshakes/s %s, CPU/handshake %s" % (
                    span([b["rps"] / x["rps"] for x, b in zip(off, on)]),
                    span([b["us"] / x["us"] for x, b in zip(off, on)])))
        return {"%s %s" % k: v for k, v in results.items()}
    finally:
        for p, _, _ in servers.values():
            stop(p, signal.SIGQUIT)
        stop(responder)


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    def ver(cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (r.stdout + r.stderr).strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    return {"nproc": os.cpu_count(), "cpu": cpu, "caddy": ver(["caddy", "version"]),
            "nginx": ver(["nginx", "-v"]), "pebble": ver([os.path.join(TOOLS, "bin", "pebble"), "-version"]),
            "openssl": ver(["openssl", "version"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", default=os.path.join(REPO_DIR, "target", "release", "sluice"))
    ap.add_argument("--caddy", default="caddy")
    ap.add_argument("--nginx", default="nginx")
    ap.add_argument("--workloads", default="a1,a2,a3")
    ap.add_argument("--runs", type=int, default=9, help="a1 and a3 runs per server (default 9)")
    ap.add_argument("--renew-runs", type=int, default=2, help="a2 runs per server (default 2)")
    ap.add_argument("--validity", type=int, default=48, help="a2 certificate lifetime, s (default 48)")
    ap.add_argument("--renew-duration", type=int, default=28, help="a2 load, s (default 28, at most 30)")
    ap.add_argument("--duration", type=float, default=4, help="a3 run length, s (default 4)")
    ap.add_argument("--pause", type=float, default=0.5)
    ap.add_argument("--no-nginx", action="store_true", help="a3 without nginx")
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--json", help="write every figure to this file")
    a = ap.parse_args()
    if a.renew_duration > 30:
        raise SystemExit("--renew-duration is at most 30")
    if a.validity * 2 / 3 + a.renew_duration / 2 >= a.validity:
        raise SystemExit("--validity too short for --renew-duration: the load would outlast the certificate")
    a.sluice = os.path.abspath(a.sluice)
    binaries = {"sluice": a.sluice, "caddy": shutil.which(a.caddy) or a.caddy,
                "nginx": shutil.which(a.nginx) or a.nginx}
    wl = a.workloads.split(",")
    need = ["openssl", "taskset"] + (["caddy"] if ("a1" in wl or "a2" in wl) else []) \
        + (["nginx"] if ("a3" in wl and not a.no_nginx) else [])
    for tool in need:
        path = binaries.get(tool, tool)
        if not (shutil.which(path) or os.access(path, os.X_OK)):
            raise SystemExit("%s not found: apt-get install -y %s (and stop the packaged service)"
                             % (tool, {"taskset": "util-linux"}.get(tool, tool)))
    if not os.access(HSLOAD_BIN, os.X_OK):
        raise SystemExit("bench/hsload is not built: cargo build --release --locked --manifest-path "
                         "bench/hsload/Cargo.toml --target-dir bench/hsload/target")
    if ("a1" in wl or "a2" in wl):
        subprocess.run([os.path.join(REPO_DIR, "scripts", "install-pebble")], check=True,
                       stdout=subprocess.DEVNULL)
    os.sched_setaffinity(0, {CLIENT_CPU})
    m = machine()
    log("machine: nproc %s, %s; %s; %s; pebble %s; %s; sluice %s"
        % (m["nproc"], m["cpu"], m["caddy"], m["nginx"], m["pebble"], m["openssl"], a.sluice))
    top = tempfile.mkdtemp(prefix="sluice-acme-")
    os.chmod(top, 0o755)
    ports = pick_ports(25000, 12)
    out = {"machine": m, "args": vars(a)}
    pebble = None
    try:
        if "a1" in wl or "a2" in wl:
            pebble = Pebble(top, ports[:6])
        if "a1" in wl:
            out["a1"] = run_a1(a, top, pebble, binaries)
        if "a2" in wl:
            out["a2"] = run_a2(a, top, pebble, binaries)
        if pebble:
            pebble.close()
            pebble = None
        if "a3" in wl:
            out["a3"] = run_a3(a, top, binaries, ports[6:])
    finally:
        if pebble:
            pebble.close()
        if not a.keep_tmp:
            shutil.rmtree(top, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
