/* streamtool: the origins and load generators of bench/stream.py (sluice's
 * stream proxy against nginx's stream module and HAProxy). Cheap on purpose:
 * one thread, level-triggered epoll, no allocation per event, so that the
 * load generator and the origin (both pinned to the client CPU) cost little
 * next to the proxy under test.
 *
 *   streamtool origin SRC_PORT ECHO_PORT HTTP_PORT UDP_PORT FILE ANS_BYTES
 *       One process, four listeners on 127.0.0.1:
 *       SRC_PORT   reads an 8-byte big-endian count N, then sends N bytes of
 *                  FILE (sendfile, wrapping around) and closes.
 *       ECHO_PORT  sends back whatever it reads, until the peer closes.
 *       HTTP_PORT  reads a request head (up to CRLFCRLF), answers
 *                  "HTTP/1.1 200 OK" with a 43-byte body and closes.
 *       UDP_PORT   answers every datagram with ANS_BYTES bytes whose first
 *                  two are the query's (a DNS id).
 *   streamtool tput PORT CONNS TOTAL TIMEOUT_S
 *       CONNS connections at once, each asking the source for TOTAL/CONNS
 *       bytes and reading them (splice to /dev/null: no copy) until EOF.
 *   streamtool crate PORT CONC DURATION_S SIZE
 *       CONC slots; each: connect, write SIZE bytes, read the SIZE echoed
 *       bytes back (compared), close, again; for DURATION_S seconds.
 *   streamtool udpq PORT SOCKETS DURATION_S QUERY_BYTES ANS_BYTES
 *       SOCKETS connected UDP sockets, one query in flight on each; a query
 *       unanswered after 1 s is counted as a timeout and replaced.
 *   streamtool hold PORT N SIZE MAX_HOLD_S
 *       Opens N connections (at most 256 being set up at once), each one
 *       echoes SIZE bytes, then all stay idle. Prints READY, holds them
 *       until stdin reaches EOF or MAX_HOLD_S pass, prints DONE.
 *
 * Every client prints one line of key=value pairs on stdout. Loopback only
 * (every address is 127.0.0.1), every run bounded in time. Not a server:
 * no error handling beyond closing the connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 131072
#define NEV 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static struct sockaddr_in addr(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int listener(int port, int type) {
    int fd = socket(AF_INET, type | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0) die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = addr(port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (type == SOCK_STREAM && listen(fd, 4096) < 0) die("listen");
    if (type == SOCK_DGRAM) {
        int sz = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    }
    return fd;
}

static void ep_set(int ep, int op, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    if (epoll_ctl(ep, op, fd, &ev) < 0 && op != EPOLL_CTL_DEL) die("epoll_ctl");
}

static void raise_nofile(void) {
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

/* ------------------------------------------------------------------ origin */

enum { K_NONE, K_SRC, K_ECHO, K_HTTP };

struct oconn {
    unsigned char hdr[8];
    int hdr_have;
    uint64_t left;  /* source: bytes still to send */
    off_t off;      /* source: offset in the file */
    int tail;       /* http: how much of CRLFCRLF was seen */
    int plen, poff; /* echo: bytes read and not yet written back */
    char buf[2048];
};

static unsigned char kind[MAXFD];
static struct oconn *oc[MAXFD];

static const char http_resp[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 43\r\n"
    "Connection: close\r\n\r\n"
    "0123456789012345678901234567890123456789012";

static void oclose(int ep, int fd) {
    ep_set(ep, EPOLL_CTL_DEL, fd, 0);
    close(fd);
    free(oc[fd]);
    oc[fd] = NULL;
    kind[fd] = K_NONE;
}

static int origin(int argc, char **argv) {
    if (argc != 8) return 1;
    int lsrc = listener(atoi(argv[2]), SOCK_STREAM);
    int lecho = listener(atoi(argv[3]), SOCK_STREAM);
    int lhttp = listener(atoi(argv[4]), SOCK_STREAM);
    int ludp = listener(atoi(argv[5]), SOCK_DGRAM);
    int file = open(argv[6], O_RDONLY);
    if (file < 0) die("open");
    struct stat st;
    fstat(file, &st);
    off_t flen = st.st_size;
    int ans = atoi(argv[7]);
    if (ans < 2 || ans > 1400) return 1;
    int ep = epoll_create1(0);
    ep_set(ep, EPOLL_CTL_ADD, lsrc, EPOLLIN);
    ep_set(ep, EPOLL_CTL_ADD, lecho, EPOLLIN);
    ep_set(ep, EPOLL_CTL_ADD, lhttp, EPOLLIN);
    ep_set(ep, EPOLL_CTL_ADD, ludp, EPOLLIN);
    enum { B = 64 };
    static char qbuf[B][1500], abuf[B][1500];
    static struct sockaddr_in from[B];
    static struct iovec qiov[B], aiov[B];
    static struct mmsghdr qm[B], am[B];
    for (int i = 0; i < B; i++) {
        qiov[i].iov_base = qbuf[i];
        qiov[i].iov_len = sizeof qbuf[i];
        memset(abuf[i], 'a', sizeof abuf[i]);
        aiov[i].iov_base = abuf[i];
        aiov[i].iov_len = (size_t)ans;
    }
    struct epoll_event evs[NEV];
    for (;;) {
        int n = epoll_wait(ep, evs, NEV, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lsrc || fd == lecho || fd == lhttp) {
                int k = fd == lsrc ? K_SRC : fd == lecho ? K_ECHO : K_HTTP;
                for (;;) {
                    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
                    if (c < 0) break;
                    if (c >= MAXFD) {
                        close(c);
                        continue;
                    }
                    int one = 1;
                    if (k != K_SRC) setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    oc[c] = calloc(1, sizeof(struct oconn));
                    kind[c] = (unsigned char)k;
                    ep_set(ep, EPOLL_CTL_ADD, c, EPOLLIN);
                }
                continue;
            }
            if (fd == ludp) {
                for (int j = 0; j < B; j++) {
                    qm[j].msg_hdr.msg_name = &from[j];
                    qm[j].msg_hdr.msg_namelen = sizeof from[j];
                    qm[j].msg_hdr.msg_iov = &qiov[j];
                    qm[j].msg_hdr.msg_iovlen = 1;
                }
                int m = recvmmsg(ludp, qm, B, MSG_DONTWAIT, NULL);
                if (m <= 0) continue;
                for (int j = 0; j < m; j++) {
                    if (qm[j].msg_len >= 2) memcpy(abuf[j], qbuf[j], 2);
                    am[j].msg_hdr.msg_name = &from[j];
                    am[j].msg_hdr.msg_namelen = qm[j].msg_hdr.msg_namelen;
                    am[j].msg_hdr.msg_iov = &aiov[j];
                    am[j].msg_hdr.msg_iovlen = 1;
                }
                sendmmsg(ludp, am, (unsigned)m, MSG_DONTWAIT);
                continue;
            }
            struct oconn *c = oc[fd];
            if (!c) continue;
            if (kind[fd] == K_SRC) {
                if (c->hdr_have < 8) {
                    ssize_t r = read(fd, c->hdr + c->hdr_have, (size_t)(8 - c->hdr_have));
                    if (r <= 0) {
                        if (r < 0 && errno == EAGAIN) continue;
                        oclose(ep, fd);
                        continue;
                    }
                    c->hdr_have += (int)r;
                    if (c->hdr_have < 8) continue;
                    uint64_t want = 0;
                    for (int j = 0; j < 8; j++) want = want << 8 | c->hdr[j];
                    c->left = want;
                    ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
                }
                while (c->left) {
                    if (c->off >= flen) c->off = 0;
                    size_t chunk = (size_t)(flen - c->off);
                    if (chunk > c->left) chunk = (size_t)c->left;
                    if (chunk > (1 << 20)) chunk = 1 << 20;
                    ssize_t w = sendfile(fd, file, &c->off, chunk);
                    if (w <= 0) {
                        if (w < 0 && errno == EAGAIN) break;
                        c->left = 0;
                        break;
                    }
                    c->left -= (uint64_t)w;
                }
                if (!c->left) oclose(ep, fd);
            } else if (kind[fd] == K_ECHO) {
                if (c->plen == 0) {
                    ssize_t r = read(fd, c->buf, sizeof c->buf);
                    if (r <= 0) {
                        if (r < 0 && errno == EAGAIN) continue;
                        oclose(ep, fd);
                        continue;
                    }
                    c->plen = (int)r;
                    c->poff = 0;
                }
                while (c->poff < c->plen) {
                    ssize_t w = write(fd, c->buf + c->poff, (size_t)(c->plen - c->poff));
                    if (w < 0) {
                        if (errno == EAGAIN) break;
                        oclose(ep, fd);
                        goto next;
                    }
                    c->poff += (int)w;
                }
                if (c->poff < c->plen) {
                    ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
                } else {
                    if (evs[i].events & EPOLLOUT) ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN);
                    c->plen = 0;
                }
            } else {
                ssize_t r = read(fd, c->buf, sizeof c->buf);
                if (r <= 0) {
                    if (r < 0 && errno == EAGAIN) continue;
                    oclose(ep, fd);
                    continue;
                }
                static const char end[] = "\r\n\r\n";
                int done = 0;
                for (ssize_t j = 0; j < r && !done; j++) {
                    c->tail = c->buf[j] == end[c->tail] ? c->tail + 1 : (c->buf[j] == '\r');
                    done = c->tail == 4;
                }
                if (done) {
                    /* The answer fits any socket buffer. */
                    if (write(fd, http_resp, sizeof http_resp - 1) < 0) {
                    }
                    oclose(ep, fd);
                }
            }
        next:;
        }
    }
}

/* --------------------------------------------------------------- clients */

static int connect_nb(int port, int *done) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0) return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = addr(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        *done = 1;
    } else if (errno == EINPROGRESS) {
        *done = 0;
    } else {
        close(fd);
        return -1;
    }
    return fd;
}

static int sock_error(int fd) {
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    return err;
}

static int tput(int argc, char **argv) {
    if (argc != 6) return 1;
    int port = atoi(argv[2]), conns = atoi(argv[3]);
    uint64_t total = strtoull(argv[4], NULL, 10);
    double timeout = atof(argv[5]);
    if (conns < 1 || conns > 1000) return 1;
    uint64_t each = total / (uint64_t)conns;
    static int fds[1000], open_[1000];
    static uint64_t got[1000];
    int ep = epoll_create1(0), p[2];
    if (pipe2(p, O_NONBLOCK) < 0) die("pipe");
    fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    int null = open("/dev/null", O_WRONLY);
    double t0 = now();
    int live = 0, errors = 0;
    for (int i = 0; i < conns; i++) {
        int done;
        fds[i] = connect_nb(port, &done);
        if (fds[i] < 0 || fds[i] >= MAXFD) die("connect");
        struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
        open_[i] = 1;
        live++;
    }
    static int sent[1000];
    struct epoll_event evs[NEV];
    while (live && now() - t0 < timeout) {
        int n = epoll_wait(ep, evs, NEV, 200);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32, fd = fds[i];
            if (!sent[i]) {
                unsigned char h[8];
                for (int j = 0; j < 8; j++) h[j] = (unsigned char)(each >> (56 - 8 * j));
                if (sock_error(fd) || write(fd, h, 8) != 8) {
                    errors++;
                    close(fd);
                    open_[i] = 0;
                    live--;
                    continue;
                }
                sent[i] = 1;
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
                continue;
            }
            for (;;) {
                ssize_t r = splice(fd, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (r > 0) {
                    got[i] += (uint64_t)r;
                    while (r > 0) {
                        ssize_t w = splice(p[0], NULL, null, NULL, (size_t)r, SPLICE_F_MOVE);
                        if (w <= 0) die("splice to /dev/null");
                        r -= w;
                    }
                    continue;
                }
                if (r < 0 && errno == EAGAIN) break;
                if (r < 0 || got[i] != each) errors++;
                close(fd);
                open_[i] = 0;
                live--;
                break;
            }
        }
    }
    double el = now() - t0;
    uint64_t bytes = 0;
    for (int i = 0; i < conns; i++) {
        bytes += got[i];
        if (open_[i]) errors++; /* timed out */
    }
    printf("bytes=%llu expected=%llu errors=%d timed_out=%d elapsed=%.6f\n", (unsigned long long)bytes,
           (unsigned long long)(each * (uint64_t)conns), errors, live, el);
    return 0;
}

struct slot {
    int fd, got;
    double started;
};

static int crate(int argc, char **argv) {
    if (argc != 6) return 1;
    int port = atoi(argv[2]), conc = atoi(argv[3]), size = atoi(argv[5]);
    double dur = atof(argv[4]);
    if (conc < 1 || conc > 10000 || size < 1 || size > 4096 || dur <= 0 || dur > 3600) return 1;
    char msg[4096], in[4096];
    for (int i = 0; i < size; i++) msg[i] = (char)('a' + i % 26);
    struct slot *s = calloc((size_t)conc, sizeof *s);
    int ep = epoll_create1(0);
    long sessions = 0, e_connect = 0, e_write = 0, e_read = 0, e_data = 0, e_timeout = 0;
    double t0 = now(), end = t0 + dur, scan = t0 + 1;
    /* start(i): a new connection in slot i; the message goes out as soon as
     * the connect completes. */
#define START(i)                                                                      \
    do {                                                                              \
        int done_;                                                                    \
        s[i].fd = connect_nb(port, &done_);                                           \
        s[i].got = 0;                                                                 \
        s[i].started = now();                                                         \
        if (s[i].fd < 0) {                                                            \
            e_connect++;                                                              \
            break;                                                                    \
        }                                                                             \
        struct epoll_event ev_ = {.events = EPOLLOUT, .data.u32 = (uint32_t)(i)};     \
        epoll_ctl(ep, EPOLL_CTL_ADD, s[i].fd, &ev_);                                  \
    } while (0)
#define FINISH(i)                                                                     \
    do {                                                                              \
        close(s[i].fd);                                                               \
        s[i].fd = -1;                                                                 \
        if (now() < end) START(i);                                                    \
    } while (0)
    for (int i = 0; i < conc; i++) START(i);
    struct epoll_event evs[NEV];
    for (;;) {
        double t = now();
        if (t >= end) break;
        if (t >= scan) {
            scan = t + 1;
            for (int i = 0; i < conc; i++) {
                if (s[i].fd < 0) {
                    START(i);
                } else if (t - s[i].started > 5) {
                    e_timeout++;
                    FINISH(i);
                }
            }
        }
        int n = epoll_wait(ep, evs, NEV, 100);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32, fd = s[i].fd;
            if (fd < 0) continue;
            if (evs[k].events & EPOLLOUT) {
                if (sock_error(fd)) {
                    e_connect++;
                    FINISH(i);
                    continue;
                }
                if (write(fd, msg, (size_t)size) != size) {
                    e_write++;
                    FINISH(i);
                    continue;
                }
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
                continue;
            }
            ssize_t r = read(fd, in + 0, (size_t)(size - s[i].got));
            if (r < 0 && errno == EAGAIN) continue;
            if (r <= 0) {
                e_read++;
                FINISH(i);
                continue;
            }
            if (memcmp(in, msg + s[i].got, (size_t)r) != 0) {
                e_data++;
                FINISH(i);
                continue;
            }
            s[i].got += (int)r;
            if (s[i].got == size) {
                sessions++;
                FINISH(i);
            }
        }
    }
    double el = now() - t0;
    for (int i = 0; i < conc; i++)
        if (s[i].fd >= 0) close(s[i].fd);
    printf("sessions=%ld errors=%ld connect=%ld write=%ld read=%ld data=%ld timeout=%ld elapsed=%.6f\n",
           sessions, e_connect + e_write + e_read + e_data + e_timeout, e_connect, e_write, e_read,
           e_data, e_timeout, el);
    return 0;
}

static int udpq(int argc, char **argv) {
    if (argc != 7) return 1;
    int port = atoi(argv[2]), socks = atoi(argv[3]), qlen = atoi(argv[5]), alen = atoi(argv[6]);
    double dur = atof(argv[4]);
    if (socks < 1 || socks > 10000 || qlen < 2 || qlen > 1400 || dur <= 0 || dur > 3600) return 1;
    int *fd = calloc((size_t)socks, sizeof *fd);
    unsigned *id = calloc((size_t)socks, sizeof *id);
    double *sent = calloc((size_t)socks, sizeof *sent);
    char q[1500], a[1500];
    memset(q, 'q', sizeof q);
    int ep = epoll_create1(0);
    long answered = 0, e_timeout = 0, e_stale = 0, e_size = 0, e_send = 0, e_recv = 0;
    double t0 = now(), end = t0 + dur, scan = t0 + 0.1;
#define SEND(i)                                                                       \
    do {                                                                              \
        id[i] = (id[i] + 1) & 0xffff;                                                 \
        q[0] = (char)(id[i] >> 8);                                                    \
        q[1] = (char)id[i];                                                           \
        sent[i] = now();                                                              \
        if (send(fd[i], q, (size_t)qlen, 0) != qlen) e_send++;                        \
    } while (0)
    for (int i = 0; i < socks; i++) {
        fd[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in sa = addr(port);
        if (fd[i] < 0 || connect(fd[i], (struct sockaddr *)&sa, sizeof sa) < 0) die("udp socket");
        id[i] = (unsigned)(i * 7919) & 0xffff;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev);
        SEND(i);
    }
    struct epoll_event evs[NEV];
    for (;;) {
        double t = now();
        if (t >= end) break;
        if (t >= scan) {
            scan = t + 0.1;
            for (int i = 0; i < socks; i++)
                if (t - sent[i] > 1) {
                    e_timeout++;
                    SEND(i);
                }
        }
        int n = epoll_wait(ep, evs, NEV, 100);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            for (;;) {
                ssize_t r = recv(fd[i], a, sizeof a, 0);
                if (r < 0) {
                    if (errno != EAGAIN) e_recv++;
                    break;
                }
                unsigned got = ((unsigned)(unsigned char)a[0] << 8) | (unsigned char)a[1];
                if (r < 2 || got != id[i]) {
                    e_stale++;
                    continue;
                }
                if (r != alen) e_size++;
                else answered++;
                if (now() < end) SEND(i);
            }
        }
    }
    double el = now() - t0;
    printf("answered=%ld errors=%ld timeout=%ld stale=%ld size=%ld send=%ld recv=%ld elapsed=%.6f\n",
           answered, e_timeout + e_size + e_send + e_recv, e_timeout, e_stale, e_size, e_send, e_recv,
           el);
    return 0;
}

static int hold(int argc, char **argv) {
    if (argc != 6) return 1;
    int port = atoi(argv[2]), want = atoi(argv[3]), size = atoi(argv[4]);
    double maxhold = atof(argv[5]);
    if (want < 1 || want > 60000 || size < 1 || size > 4096 || maxhold <= 0 || maxhold > 3600) return 1;
    raise_nofile();
    char msg[4096], in[4096];
    memset(msg, 'h', (size_t)size);
    int *fd = malloc(sizeof(int) * (size_t)want), *got = calloc((size_t)want, sizeof(int));
    int ep = epoll_create1(0);
    int ok = 0, failed = 0, started = 0, pending = 0;
    double t0 = now();
    struct epoll_event evs[NEV];
    while ((ok + failed < want) && now() - t0 < 120) {
        while (pending < 256 && started < want) {
            int i = started++, done;
            fd[i] = connect_nb(port, &done);
            if (fd[i] < 0) {
                failed++;
                continue;
            }
            struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
            epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev);
            pending++;
        }
        int n = epoll_wait(ep, evs, NEV, 100);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            if (got[i] < 0) continue;
            if (evs[k].events & EPOLLOUT) {
                if (sock_error(fd[i]) || write(fd[i], msg, (size_t)size) != size) goto fail;
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd[i], &ev);
                continue;
            }
            ssize_t r = read(fd[i], in, sizeof in);
            if (r < 0 && errno == EAGAIN) continue;
            if (r <= 0) goto fail;
            got[i] += (int)r;
            if (got[i] >= size) {
                got[i] = -1; /* idle from now on; watched for closing */
                ok++;
                pending--;
            }
            continue;
        fail:
            epoll_ctl(ep, EPOLL_CTL_DEL, fd[i], NULL);
            close(fd[i]);
            got[i] = -2;
            failed++;
            pending--;
        }
    }
    /* Watch the idle ones: any event now is the server closing (or talking). */
    for (int i = 0; i < started; i++) {
        if (got[i] != -1) continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_MOD, fd[i], &ev);
    }
    printf("READY ok=%d failed=%d seconds=%.3f\n", ok, failed, now() - t0);
    fflush(stdout);
    struct epoll_event sev = {.events = EPOLLIN, .data.u32 = 0xffffffffu};
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
    int closed = 0, quit = 0;
    double h0 = now();
    while (!quit && now() - h0 < maxhold) {
        int n = epoll_wait(ep, evs, NEV, 500);
        for (int k = 0; k < n; k++) {
            uint32_t i = evs[k].data.u32;
            if (i == 0xffffffffu) {
                quit = 1;
                continue;
            }
            closed++;
            epoll_ctl(ep, EPOLL_CTL_DEL, fd[i], NULL);
        }
    }
    printf("DONE held=%d closed=%d seconds=%.3f\n", ok - closed, closed, now() - h0);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int rc = 1;
    if (argc > 1 && !strcmp(argv[1], "origin")) {
        raise_nofile();
        rc = origin(argc, argv);
    } else if (argc > 1 && !strcmp(argv[1], "tput")) {
        rc = tput(argc, argv);
    } else if (argc > 1 && !strcmp(argv[1], "crate")) {
        rc = crate(argc, argv);
    } else if (argc > 1 && !strcmp(argv[1], "udpq")) {
        rc = udpq(argc, argv);
    } else if (argc > 1 && !strcmp(argv[1], "hold")) {
        rc = hold(argc, argv);
    }
    if (rc == 1) fprintf(stderr, "usage: see the comment at the top of streamtool.c\n");
    return rc;
}
