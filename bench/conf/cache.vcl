# Varnish's side of workloads c1 and c3 (and c4 when varnish has room): the
# same origin as nginx and sluice (px1's nginx on 127.0.0.1:@ORIGIN_PORT@),
# cached for the same time as their proxy_cache_valid 200 1h, and the same
# X-Cache header the harness checks (HIT/MISS). Everything else is Varnish's
# default (builtin.vcl, default storage, default thread pools).
# Rendered by bench/run: @ORIGIN_PORT@ is substituted.
vcl 4.1;

backend origin {
    .host = "127.0.0.1";
    .port = "@ORIGIN_PORT@";
}

sub vcl_backend_response {
    if (beresp.status == 200) {
        set beresp.ttl = 1h;
        set beresp.grace = 0s;
    }
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    # Varnish's own headers, which nginx and sluice do not send.
    unset resp.http.Via;
    unset resp.http.X-Varnish;
}
