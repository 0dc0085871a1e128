//! Distribution of requests over an upstream's peers for each balancing
//! method, end to end with real origins: least_conn sends to the least
//! busy peer, ip_hash keeps a client on one peer, `hash KEY` keeps a key on
//! one peer (and `consistent` moves only the keys of a removed peer),
//! `random` and `random two` spread load. (Smooth weighted round robin is
//! in tests/proxy.rs; the algorithms are checked pick by pick against
//! nginx in src/upstream/balance.) Passes on nginx 1.22 too.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::origin::*;
use common::*;

/// Three origins answering their letter; `/hold` takes 1.5 s.
fn three() -> Vec<Origin> {
    ["A", "B", "C"]
        .iter()
        .map(|l| {
            let l = l.to_string();
            Origin::start(move |r| {
                let reply = Reply::ok(&l);
                if r.target().contains("hold") { reply.after(Duration::from_millis(1500)) } else { reply }
            })
        })
        .collect()
}

fn conf(method: &str, o: &[Origin]) -> String {
    format!(
        "upstream b {{ {method} server 127.0.0.1:{}; server 127.0.0.1:{}; server 127.0.0.1:{}; }}\n\
         server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://b; }} }}",
        o[0].port, o[1].port, o[2].port
    )
}

/// Which letter answered each of these paths.
fn letters(s: &TestServer, paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            let r = s.get(p);
            assert_eq!(r.status, 200, "{p}: {}", r.head);
            r.text()
        })
        .collect()
}

fn counts(v: &[String]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for l in v {
        *m.entry(l.clone()).or_default() += 1;
    }
    m
}

#[test]
fn least_conn_avoids_busy_peers() {
    let o = three();
    let s = builder().http(&conf("least_conn;", &o)).start();
    // Two long requests occupy two peers...
    let holds: Vec<_> = (0..2)
        .map(|i| {
            let port = s.port;
            let h = std::thread::spawn(move || {
                request(port, &format!("GET /hold{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).text()
            });
            std::thread::sleep(Duration::from_millis(200));
            h
        })
        .collect();
    // ...so every quick request goes to the third.
    let quick = letters(&s, &(0..6).map(|i| format!("/q{i}")).collect::<Vec<_>>());
    let busy: Vec<String> = holds.into_iter().map(|h| h.join().expect("hold")).collect();
    assert_ne!(busy[0], busy[1], "the second long request went to the busy peer");
    let free = ["A", "B", "C"].iter().find(|l| !busy.contains(&l.to_string())).expect("a free peer");
    assert_eq!(quick, vec![free.to_string(); 6], "busy: {busy:?}");
}

#[test]
fn ip_hash_keeps_a_client_on_one_peer() {
    let o = three();
    let s = builder().http(&conf("ip_hash;", &o)).start();
    let got = letters(&s, &(0..12).map(|i| format!("/i{i}")).collect::<Vec<_>>());
    assert_eq!(counts(&got).len(), 1, "{got:?}");
}

#[test]
fn hash_keeps_keys_and_consistent_moves_only_the_removed_peers_keys() {
    let o = three();
    let keys: Vec<String> = (0..40).map(|i| format!("/k?key=user{i}")).collect();
    for consistent in ["", " consistent"] {
        let s = builder().http(&conf(&format!("hash $arg_key{consistent};"), &o)).start();
        let first = letters(&s, &keys);
        assert_eq!(letters(&s, &keys), first, "hash{consistent}: a key moved between two rounds");
        let c = counts(&first);
        assert_eq!(c.len(), 3, "hash{consistent}: {c:?}");
        assert!(c.values().all(|&n| n >= 4), "hash{consistent}: {c:?}");
        if consistent.is_empty() {
            continue;
        }
        // Without C: with ketama only C's keys move.
        let gone = o[2].port;
        let text = std::fs::read_to_string(s.conf_path()).expect("conf");
        s.write_conf(&text.replace(&format!("server 127.0.0.1:{gone}; "), ""));
        s.signal("reload");
        std::thread::sleep(Duration::from_millis(700));
        let after = letters(&s, &keys);
        for (k, (a, b)) in keys.iter().zip(first.iter().zip(&after)) {
            if a != "C" {
                assert_eq!(a, b, "{k} moved from {a} to {b} though its peer stayed");
            } else {
                assert_ne!(b, "C");
            }
        }
    }
}

#[test]
fn random_spreads_load() {
    let o = three();
    for method in ["random;", "random two;", "random two least_conn;"] {
        let s = builder().http(&conf(method, &o)).start();
        let got = letters(&s, &(0..240).map(|i| format!("/r{i}")).collect::<Vec<_>>());
        let c = counts(&got);
        // Each of three peers: 80 expected; far outside 40..130 is not random.
        assert!(c.len() == 3 && c.values().all(|&n| (40..=130).contains(&n)), "{method}: {c:?}");
    }
}

/// The same keys land on the same peers as with nginx (when nginx is
/// installed; the test suite installs it): hash (Cache::Memcached-style and
/// ketama) and round robin, run side by side against the same origins.
#[test]
fn same_picks_as_nginx() {
    if prog() != "sluice" || !std::path::Path::new("/usr/sbin/nginx").exists() {
        return;
    }
    let o = three();
    let keys: Vec<String> = (0..30).map(|i| format!("/k?key=k{i}")).collect();
    for method in ["hash $arg_key;", "hash $arg_key consistent;", ""] {
        let ours = builder().http(&conf(method, &o)).start();
        let theirs = builder().nginx().http(&conf(method, &o)).start();
        assert_eq!(letters(&ours, &keys), letters(&theirs, &keys), "{method}");
    }
}
