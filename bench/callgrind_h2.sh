#!/bin/bash
# User-space instructions per small HTTP/2 request over TLS, with callgrind:
# sluice, nginx and h2o serve the same 12-byte file (ECDSA P-256 certificate,
# open-file caching on), h2load -c100 -m100 loads them.
#
# For each server, two runs under valgrind --tool=callgrind:
#   A: 20,000 requests of warm-up, then SMALL requests (100 new connections);
#   B: the same warm-up, then BIG requests (100 new connections);
# instructions per request = (Ir of B - Ir of A) / (BIG - SMALL), so start-up,
# handshakes and shutdown cancel out. h2o does not dump its profile on
# SIGTERM, so it is dumped with callgrind_control first.
# Servers on CPU 0, h2load on CPU 1, loopback only.
#
#   bench/callgrind_h2.sh --sluice target/release/sluice [--nginx /usr/sbin/nginx]
#                         [--h2o PATH] [--small 10000] [--big 60000] [--keep DIR]
#                         [--servers "sluice nginx h2o"]
#
# Without --h2o, Debian's h2o package is downloaded and unpacked (not
# installed) into the work directory. Prints one line per server.
set -euo pipefail
sluice=target/release/sluice nginx=$(command -v nginx || echo /usr/sbin/nginx) h2o="" small=10000 big=60000 keep="" servers="sluice nginx h2o"
while [ $# -gt 0 ]; do
  case $1 in
    --sluice) sluice=$2; shift 2;; --nginx) nginx=$2; shift 2;; --h2o) h2o=$2; shift 2;;
    --small) small=$2; shift 2;; --big) big=$2; shift 2;; --keep) keep=$2; shift 2;;
    --servers) servers=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
for tool in valgrind h2load curl openssl; do
  command -v $tool >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind nghttp2-client curl openssl >/dev/null; break; }
done
sluice=$(realpath "$sluice")
w=${keep:-$(mktemp -d /tmp/callgrind-h2.XXXXXX)}
# Workers that drop privileges write their profile here too.
mkdir -p "$w/www" && chmod 777 "$w" && chmod 755 "$w/www"
printf 'hello world\n' > "$w/www/12.txt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$w/key.pem" \
  -out "$w/cert.pem" -days 30 -subj /CN=localhost 2>/dev/null
chmod 644 "$w/key.pem"
if [ -z "$h2o" ] && [[ " $servers " == *" h2o "* ]]; then
  (cd "$w" && apt-get download h2o >/dev/null 2>&1 && dpkg -x h2o_*.deb h2o-pkg)
  h2o=$w/h2o-pkg/usr/bin/h2o
fi
nginx_conf() { # $1 port
  cat <<C
worker_processes 1;
error_log $w/error-$1.log;
pid $w/pid-$1;
events { worker_connections 4096; }
http {
  access_log off;
  open_file_cache max=100;
  server {
    # The spelling nginx 1.22 (Debian 12) knows too.
    listen 127.0.0.1:$1 ssl http2;
    ssl_certificate $w/cert.pem;
    ssl_certificate_key $w/key.pem;
    root $w/www;
  }
}
C
}
nginx_conf 19443 > "$w/sluice.conf"
nginx_conf 19444 > "$w/nginx.conf"
cat > "$w/h2o.conf" <<C
num-threads: 1
user: root
pid-file: $w/pid-19445
error-log: $w/error-19445.log
listen: {host: 127.0.0.1, port: 19445, ssl: {certificate-file: $w/cert.pem, key-file: $w/key.pem}}
hosts: {default: {paths: {/: {file.dir: $w/www}}}}
C

run() { # name port n dump cmd...
  local name=$1 port=$2 n=$3 dump=$4; shift 4
  local out=$w/cg.$name.$n
  # vgdb (callgrind_control) only for h2o: a process that drops root
  # privileges cannot open the FIFO it made as root, and dies.
  taskset -c 0 valgrind --tool=callgrind --vgdb=$dump --trace-children=yes --callgrind-out-file=$out.%p "$@" \
    > "$w/valgrind.$name.$n.log" 2>&1 &
  local vg=$!
  for _ in $(seq 240); do
    curl -sk --http2 -o /dev/null "https://127.0.0.1:$port/12.txt" && break; sleep 0.5
  done
  taskset -c 1 h2load -c100 -m100 -n 20000 "https://127.0.0.1:$port/12.txt" | grep -q '20000 succeeded'
  taskset -c 1 h2load -c100 -m100 -n "$n" "https://127.0.0.1:$port/12.txt" | grep -q "$n succeeded" \
    || { echo "$name: not every request succeeded" >&2; exit 1; }
  if [ "$dump" = yes ]; then timeout 60 callgrind_control -d >/dev/null 2>&1 || true; sleep 2; fi
  pkill -TERM -f -- "--callgrind-out-file=$out" || true
  wait $vg || true
  # The process that served: the one with the most instructions, over its
  # dump and what it counted after the dump until it stopped.
  local best=0
  for pid in $(ls "$out".* | sed -E 's/.*\.([0-9]+)(\.[0-9]+)?$/\1/' | sort -u); do
    local ir; ir=$(cat "$out.$pid" "$out.$pid".* 2>/dev/null | awk '/^totals:/{s+=$2} END{printf "%.0f\n", s}')
    [ "$ir" -gt "$best" ] && best=$ir
  done
  echo "$best"
}

printf '%-8s %14s %14s %10s\n' server "Ir A" "Ir B" "Ir/req"
for srv in $servers; do
  case $srv in
    sluice) port=19443 dump=no; cmd=("$sluice" -c "$w/sluice.conf" -p "$w" -g "daemon off; master_process off;");;
    nginx) port=19444 dump=no; cmd=("$nginx" -c "$w/nginx.conf" -p "$w" -g "daemon off; master_process off;");;
    h2o) port=19445 dump=yes; cmd=("$h2o" -c "$w/h2o.conf");;
  esac
  a=$(run $srv $port "$small" $dump "${cmd[@]}")
  b=$(run $srv $port "$big" $dump "${cmd[@]}")
  printf '%-8s %14d %14d %10d\n' $srv "$a" "$b" $(( (b - a) / (big - small) ))
done
[ -n "$keep" ] || rm -rf "$w"
