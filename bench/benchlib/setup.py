"""Setting up a bench/run run: tools, hsload, the sluice binary, the machine
table, the TLS certificate, the static files."""

import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile

from .compress import BROTLI_MODULE, make_page_files
from .fpm import FPM_BIN, PHP_SCRIPT
from .common import (
    BenchError, CERT_NAME, CERT_SAN, CERT_SUBJ, HELLO_BODY, HSLOAD_BIN, HSLOAD_DIR, HUGE_SIZE,
    HSLOAD_TARGET, KEY_NAME, LARGE_SIZES, REPO_DIR, STATIC_SIZES, log, read_file, set_sysctl,
    sysctl)


class SetupMixin:
    """Harness methods that prepare a run."""

    def ensure_tools(self, keys):
        need = []
        tls = [k for k in keys if k.startswith("tls")]
        h2 = [k for k in keys if k in ("tls3", "tls4", "tls5", "tls6", "h2c")]
        if not (self.args.nginx and os.path.exists(self.args.nginx)) and not shutil.which("nginx") \
                and not os.path.exists("/usr/sbin/nginx"):
            need.append("nginx")
        if not shutil.which("wrk"):
            need.append("wrk")
        if self.args.client == "ab" and ("2" in keys or "tls2" in keys) and not shutil.which("ab"):
            need.append("apache2-utils")
        if h2 and not shutil.which("h2load"):
            need.append("nghttp2-client")
        if h2 and not shutil.which("curl"):
            need.append("curl")
        if tls and not shutil.which("openssl"):
            need.append("openssl")
        if not os.path.exists("/etc/nginx/mime.types") and "nginx" not in need:
            need.append("nginx")   # mime.types comes with nginx-common
        if "px2" in keys and not shutil.which("ss"):
            need.append("iproute2")     # px2 samples wrk's connections with ss
        if not shutil.which("taskset"):
            need.append("util-linux")
        # Cache workloads c1 and c3 also run Debian's varnish.
        varnish = ("c1" in keys or "c3" in keys) and not self.args.no_varnish
        if varnish and not (self.args.varnish and os.path.exists(self.args.varnish)) \
                and not shutil.which("varnishd") and not os.path.exists("/usr/sbin/varnishd"):
            need.append("varnish")
        # z1-z3, k1, k2: Debian's brotli filter module for nginx (sluice has
        # brotli built in) and, to check brotli bodies without the Python
        # module, the brotli CLI; k1, k2: php-fpm.
        if any(k in ("z2", "k1", "k2") for k in keys):
            if not os.path.exists(BROTLI_MODULE):
                need.append("libnginx-mod-http-brotli-filter")
            if not shutil.which("brotli") and not have_brotli_module():
                need.append("brotli")
        if any(k in ("z1", "z3") for k in keys) and not os.path.exists(BROTLI_MODULE):
            need.append("libnginx-mod-http-brotli-filter")   # compress.conf loads it
        if any(k in ("k1", "k2") for k in keys) and not os.path.exists(FPM_BIN):
            need.append("php8.2-fpm")
        if need:
            log("Installing missing tools: %s" % " ".join(need))
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "update"], check=True, env=env)
            subprocess.run(["apt-get", "install", "-y"] + need, check=True, env=env)
        if not self.args.nginx:
            self.args.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not self.args.varnish:
            self.args.varnish = shutil.which("varnishd") or "/usr/sbin/varnishd"

    def ensure_hsload(self, keys):
        """Build bench/hsload (tls2's load generator) into bench/hsload/target."""
        if "tls2" not in keys or self.args.client == "ab":
            return
        if not shutil.which("cargo"):
            raise BenchError("workload tls2 needs cargo to build bench/hsload "
                             "(or use --client ab)")
        cmd = ["cargo", "build", "--release", "--locked", "--manifest-path",
               os.path.join(HSLOAD_DIR, "Cargo.toml"), "--target-dir", HSLOAD_TARGET]
        log("Building hsload: %s" % " ".join(cmd))
        r = subprocess.run(cmd, cwd=HSLOAD_DIR)
        if r.returncode != 0:
            raise BenchError("building bench/hsload failed (exit %d): %s"
                             % (r.returncode, " ".join(cmd)))
        if not os.access(HSLOAD_BIN, os.X_OK):
            raise BenchError("%s missing after the build" % HSLOAD_BIN)

    def ensure_sluice(self):
        if self.args.sluice:
            self.args.sluice = os.path.abspath(self.args.sluice)
        else:
            log("Building sluice: cargo build --release (in %s)" % REPO_DIR)
            r = subprocess.run(["cargo", "build", "--release"], cwd=REPO_DIR)
            if r.returncode != 0:
                raise BenchError("cargo build --release failed (exit %d)" % r.returncode)
            # cargo puts it under CARGO_TARGET_DIR when that is set (relative
            # to where cargo runs).
            target = os.path.join(REPO_DIR, os.environ.get("CARGO_TARGET_DIR") or "target")
            self.args.sluice = os.path.join(target, "release", "sluice")
        if not os.access(self.args.sluice, os.X_OK):
            raise BenchError("sluice binary %s is not executable" % self.args.sluice)

    def version(self, cmd):
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
            lines = [l for l in r.stdout.decode(errors="replace").splitlines() if l.strip()]
            return lines[0].strip() if lines else "(no output, exit %d)" % r.returncode
        except (OSError, subprocess.TimeoutExpired) as e:
            return "(unavailable: %s)" % e

    def machine(self):
        cpuinfo = read_file("/proc/cpuinfo", "")
        m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        mem = re.search(r"^MemTotal:\s+(\d+) kB", read_file("/proc/meminfo", ""), re.M)
        git = self.version(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"])
        if not re.fullmatch(r"[0-9a-f]{4,40}", git):
            git = "(no commit)"
        else:
            st = subprocess.run(["git", "-C", REPO_DIR, "status", "--porcelain", "--", "src",
                                 "Cargo.toml", "Cargo.lock"], stdout=subprocess.PIPE)
            if st.stdout.strip():
                git += " (src modified)"
        h2o_port = getattr(self, "h2o_port", None)     # --peers h2o
        fs = "?"
        try:
            r = subprocess.run(["df", "-T", self.tmp or tempfile.gettempdir()],
                               stdout=subprocess.PIPE, timeout=10)
            fs = r.stdout.decode().splitlines()[1].split()[1]
        except Exception:
            pass
        info = [
            ("CPU", "%s, %d logical cores" % (m.group(1).strip() if m else platform.processor(),
                                              os.cpu_count())),
            ("Memory", "%.1f GiB" % (int(mem.group(1)) / 1048576) if mem else "?"),
            ("Kernel", platform.release()),
            ("OS", self.os_release()),
            ("nginx", "%s (%s)" % (self.version([self.args.nginx, "-v"]), self.args.nginx)),
            ("sluice", "%s (%s, repo commit %s)" % (self.version([self.args.sluice, "-v"]),
                                                    self.args.sluice, git)),
            ("varnish", "%s (%s)" % (self.version([self.args.varnish, "-V"]), self.args.varnish)
             if os.path.exists(self.args.varnish or "") else "(not installed)"),
        ] + ([("h2o", "%s (%s%s)" % (self.version([self.args.h2o, "--version"]), self.args.h2o,
                                     ", unpacked from %s" % self.h2o_deb
                                     if getattr(self, "h2o_deb", None) else ""))]
             if h2o_port else []) + [
            ("wrk", self.version(["wrk", "-v"])),
            ("ab", self.version(["ab", "-V"]) if shutil.which("ab") else "(not installed)"),
            ("hsload", "%s (%s)" % (self.version([HSLOAD_BIN, "--version"]), HSLOAD_BIN)
             if os.access(HSLOAD_BIN, os.X_OK) else "(not built)"),
            ("h2load", self.version(["h2load", "--version"]) if shutil.which("h2load")
             else "(not installed)"),
            ("openssl", self.version(["openssl", "version"]) if shutil.which("openssl")
             else "(not installed)"),
            ("php-fpm", "%s (%s)" % (self.version([FPM_BIN, "-v"]), FPM_BIN)
             if os.path.exists(FPM_BIN) else "(not installed)"),
            ("brotli module", "%s%s" % (BROTLI_MODULE, "" if os.path.exists(BROTLI_MODULE)
                                        else " (not installed)")),
            ("Python", platform.python_version()),
            ("Pinning", "servers on CPU %d (taskset -c %d), load generator on CPU %d "
                        "(taskset -c %d)%s" % (
                            self.args.server_cpu, self.args.server_cpu, self.args.client_cpu,
                            self.args.client_cpu,
                            "; px origin (px1: nginx, px2: bench/slot_origin.py) on CPU %d "
                            "with the load generator" % self.args.client_cpu if self.px else "")),
            ("Ports", "nginx 127.0.0.1:%d, sluice 127.0.0.1:%d%s" % (
                self.ports[0], self.ports[1],
                ", px origin 127.0.0.1:%d" % self.ports[2] if self.px else "")
             + (", varnish 127.0.0.1:%d" % self.ports[3]
                if len(self.ports) > 3 and self.ports[3] != h2o_port else "")
             + (", h2o 127.0.0.1:%d" % h2o_port if h2o_port else "")),
            ("Temp dir", "%s (%s)" % (self.tmp, fs)),
            ("sysctl", ", ".join("%s=%s" % (n, sysctl(n)) for n in (
                "net.ipv4.tcp_tw_reuse", "net.ipv4.ip_local_port_range", "net.core.somaxconn",
                "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_max_tw_buckets"))),
            ("Load at start", " ".join(read_file("/proc/loadavg", "? ? ?").split()[:3])
             + " (1/5/15 min load average)"),
        ]
        if self.cert_info:
            info.append(("TLS cert", self.cert_info))
        return info

    def make_cert(self):
        """ECDSA P-256 self-signed certificate and key for the TLS workloads,
        generated once per run with the openssl CLI and copied into every
        prefix's conf/ (the same files for nginx and sluice)."""
        d = os.path.join(self.tmp, "tls")
        os.makedirs(d, exist_ok=True)
        self.cert, self.key = os.path.join(d, CERT_NAME), os.path.join(d, KEY_NAME)
        cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
               "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", self.key, "-out", self.cert,
               "-days", "30", "-subj", CERT_SUBJ, "-addext", CERT_SAN]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if r.returncode != 0:
            raise BenchError("generating the TLS certificate failed (%s, exit %d):\n%s"
                             % (" ".join(cmd), r.returncode, r.stdout.decode(errors="replace")))
        fp = subprocess.run(["openssl", "x509", "-in", self.cert, "-noout", "-fingerprint",
                             "-sha256"], stdout=subprocess.PIPE, timeout=60)
        self.cert_info = ("ECDSA P-256 self-signed, %s, SAN DNS:localhost IP:127.0.0.1, "
                          "PKCS#8 key; generated by `%s`; %s" % (
                              CERT_SUBJ, " ".join(shlex.quote(x) for x in [
                                  "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                  "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "key.pem",
                                  "-out", "cert.pem", "-days", "30", "-subj", CERT_SUBJ,
                                  "-addext", CERT_SAN]),
                              fp.stdout.decode(errors="replace").strip() or "?"))

    def os_release(self):
        t = read_file("/etc/os-release", "")
        m = re.search(r'^PRETTY_NAME="?([^"\n]+)', t, re.M)
        return m.group(1) if m else platform.platform()

    def check_tw_reuse(self):
        v = sysctl("net.ipv4.tcp_tw_reuse")
        if v == "0":
            if self.args.no_sysctl:
                self.notes.append("net.ipv4.tcp_tw_reuse=0 (left unchanged because of "
                                  "--no-sysctl); workload 2 may run out of ephemeral ports.")
                return
            set_sysctl("net.ipv4.tcp_tw_reuse", 1)
            self.sysctl_restore.append(("net.ipv4.tcp_tw_reuse", v))
            msg = ("Set net.ipv4.tcp_tw_reuse=1 (was 0) for workloads 2/tls2; restored at "
                   "exit.")
            log(msg)
            self.notes.append(msg)

    def digest(self, name):
        """SHA-256 of one generated file (computed once)."""
        if not hasattr(self, "digests"):
            self.digests = {}
        if name not in self.digests:
            from .cache import sha256_file
            self.digests[name] = sha256_file(self.files[name])
        return self.digests[name]

    def make_files(self, huge=False):
        d = os.path.join(self.tmp, "files")
        os.makedirs(d, exist_ok=True)
        self.files = {}
        seed = hashlib.sha256(b"sluice-bench").digest()
        path = os.path.join(d, "helloworld")
        with open(path, "wb") as f:
            f.write(HELLO_BODY)
        self.files["helloworld"] = path
        self.files.update(make_page_files(d))            # z1-z3: page.html, page.html.gz
        self.files["index.php"] = PHP_SCRIPT             # k1, k2
        for name, size in STATIC_SIZES + LARGE_SIZES + ([HUGE_SIZE] if huge else []):
            path = os.path.join(d, "%s.bin" % name)
            with open(path, "wb") as f:
                block = b""
                h = seed
                while len(block) < min(size, 1 << 20):
                    h = hashlib.sha256(h).digest()
                    block += h * 32
                block = block[:min(size, 1 << 20)]
                left = size
                while left > 0:
                    f.write(block[:left])
                    left -= len(block[:left])
            self.files["%s.bin" % name] = path


def have_brotli_module():
    try:
        import brotli  # noqa: F401
        return True
    except ImportError:
        return False
