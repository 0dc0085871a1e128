/* floorproxy: the least a stream proxy can do on this kernel, as a floor to
 * read bench/stream.py's figures against (st1-st3, st5). One thread,
 * edge-triggered epoll, no configuration, no logging, no timers, no limits:
 * what any real proxy (nginx, HAProxy, sluice) must do at least, and
 * nothing else.
 *
 *   floorproxy ECHO_LISTEN ECHO_ORIGIN TPUT_LISTEN SRC_ORIGIN UDP_LISTEN UDP_ORIGIN
 *
 * TCP (ECHO_LISTEN -> ECHO_ORIGIN, TPUT_LISTEN -> SRC_ORIGIN): accept4,
 * a non-blocking connect to the origin, both sockets added once to epoll
 * (EPOLLIN|EPOLLOUT|EPOLLRDHUP, edge-triggered), then bytes relayed both
 * ways. A short read means the socket is drained (EPOLLRDHUP reports the
 * peer's FIN), as nginx reads. The echo listener copies through a 16 KB
 * buffer per direction; the throughput listener moves bytes with splice(2)
 * through a pipe per direction (sized to 1 MB), so nothing is copied in user
 * space. When one side has reached EOF and what it sent is written, both
 * sockets are closed (nginx's stream proxy does the same).
 *
 * UDP (UDP_LISTEN -> UDP_ORIGIN): one session per datagram, as
 * `proxy_responses 1` makes it: recvfrom on the listener, a new socket
 * connected to the origin, send; the answer is read, sent to the client
 * with sendto on the listener, and the session's socket is closed.
 *
 * Loopback only. Not a server: no error handling beyond closing a session.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 131072
#define NEV 256
#define BUF 16384
#define PIPE_SIZE (1 << 20)

enum { F_NONE, F_LISTEN_ECHO, F_LISTEN_TPUT, F_LISTEN_UDP, F_TCP, F_UDP };

/* One direction of a TCP session: bytes read from src and not yet written. */
struct dir {
    int pending;      /* bytes held (buffer or pipe) */
    int off;          /* copy mode: start of the held bytes in buf */
    int eof;          /* src reached EOF */
    int pipe[2];      /* splice mode */
    char *buf;        /* copy mode */
};

struct sess {
    int cfd, ofd;
    int splice;
    struct dir up;    /* client -> origin */
    struct dir down;  /* origin -> client */
};

struct usess {
    struct sockaddr_in peer;
};

static unsigned char kind[MAXFD];
static void *obj[MAXFD];
static int ep;
static int udp_listen_fd;
static struct sockaddr_in echo_origin, src_origin, udp_origin;

static struct sockaddr_in addr(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static int listener(int port, int type) {
    int fd = socket(AF_INET, type | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0) die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = addr(port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (type == SOCK_STREAM && listen(fd, 4096) < 0) die("listen");
    return fd;
}

static void ep_add(int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
}

static void dir_free(struct dir *d) {
    if (d->pipe[0] >= 0) {
        close(d->pipe[0]);
        close(d->pipe[1]);
    }
    free(d->buf);
}

static void sess_close(struct sess *s) {
    close(s->cfd);
    close(s->ofd);   /* close() also takes both out of the epoll set */
    kind[s->cfd] = kind[s->ofd] = F_NONE;
    obj[s->cfd] = obj[s->ofd] = NULL;
    dir_free(&s->up);
    dir_free(&s->down);
    free(s);
}

/* Moves what src has to dst until one of them would block. Returns -1 on an
 * error (the session is to be closed), else 0. */
static int pump(struct sess *s, struct dir *d, int src, int dst) {
    for (;;) {
        if (d->pending) {
            ssize_t n = s->splice
                ? splice(d->pipe[0], NULL, dst, NULL, d->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
                : write(dst, d->buf + d->off, d->pending);
            if (n < 0) return errno == EAGAIN ? 0 : -1;
            d->pending -= n;
            d->off += n;
            if (d->pending) return 0;   /* short write: wait for EPOLLOUT */
            d->off = 0;
            if (d->eof) return 0;
            continue;
        }
        if (d->eof) return 0;
        ssize_t n = s->splice
            ? splice(src, NULL, d->pipe[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
            : read(src, d->buf, BUF);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        if (n == 0) {
            d->eof = 1;
            return 0;
        }
        d->pending = (int)n;
        if (!s->splice && n < BUF) {
            /* A short read: drained (EPOLLRDHUP tells of a FIN). Write and
             * wait for the next edge. */
            ssize_t w = write(dst, d->buf, n);
            if (w < 0) return errno == EAGAIN ? 0 : -1;
            d->pending -= (int)w;
            d->off = (int)w;
            if (!d->pending) d->off = 0;
            return 0;
        }
    }
}

static void sess_event(struct sess *s) {
    if (pump(s, &s->up, s->cfd, s->ofd) < 0 || pump(s, &s->down, s->ofd, s->cfd) < 0 ||
        (s->up.eof && !s->up.pending) || (s->down.eof && !s->down.pending)) {
        sess_close(s);
    }
}

static void dir_init(struct dir *d, int splice_mode) {
    memset(d, 0, sizeof *d);
    d->pipe[0] = d->pipe[1] = -1;
    if (splice_mode) {
        if (pipe2(d->pipe, O_NONBLOCK) < 0) die("pipe2");
        fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
    } else {
        d->buf = malloc(BUF);
        if (!d->buf) die("malloc");
    }
}

static void tcp_accept(int lfd, int splice_mode) {
    for (int i = 0; i < 64; i++) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (cfd < 0) return;
        int ofd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (ofd < 0 || cfd >= MAXFD || ofd >= MAXFD) {
            close(cfd);
            if (ofd >= 0) close(ofd);
            continue;
        }
        struct sockaddr_in *o = splice_mode ? &src_origin : &echo_origin;
        if (connect(ofd, (struct sockaddr *)o, sizeof *o) < 0 && errno != EINPROGRESS) {
            close(cfd);
            close(ofd);
            continue;
        }
        struct sess *s = calloc(1, sizeof *s);
        if (!s) die("calloc");
        s->cfd = cfd;
        s->ofd = ofd;
        s->splice = splice_mode;
        dir_init(&s->up, splice_mode);
        dir_init(&s->down, splice_mode);
        kind[cfd] = kind[ofd] = F_TCP;
        obj[cfd] = obj[ofd] = s;
        ep_add(cfd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
        ep_add(ofd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
    }
}

static void udp_read_listener(void) {
    char buf[65536];
    for (int i = 0; i < 64; i++) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        ssize_t n = recvfrom(udp_listen_fd, buf, sizeof buf, 0, (struct sockaddr *)&peer, &pl);
        if (n < 0) return;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (fd < 0) continue;
        if (fd >= MAXFD || connect(fd, (struct sockaddr *)&udp_origin, sizeof udp_origin) < 0 ||
            send(fd, buf, n, 0) < 0) {
            close(fd);
            continue;
        }
        struct usess *u = malloc(sizeof *u);
        if (!u) die("malloc");
        u->peer = peer;
        kind[fd] = F_UDP;
        obj[fd] = u;
        ep_add(fd, EPOLLIN | EPOLLET);
    }
}

static void udp_answer(int fd) {
    char buf[65536];
    struct usess *u = obj[fd];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EAGAIN) return;
    if (n >= 0) {
        sendto(udp_listen_fd, buf, n, 0, (struct sockaddr *)&u->peer, sizeof u->peer);
    }
    close(fd);
    kind[fd] = F_NONE;
    obj[fd] = NULL;
    free(u);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: floorproxy ECHO_LISTEN ECHO_ORIGIN TPUT_LISTEN SRC_ORIGIN "
                        "UDP_LISTEN UDP_ORIGIN\n");
        return 1;
    }
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    echo_origin = addr(atoi(argv[2]));
    src_origin = addr(atoi(argv[4]));
    udp_origin = addr(atoi(argv[6]));
    ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    int echo_l = listener(atoi(argv[1]), SOCK_STREAM);
    int tput_l = listener(atoi(argv[3]), SOCK_STREAM);
    udp_listen_fd = listener(atoi(argv[5]), SOCK_DGRAM);
    kind[echo_l] = F_LISTEN_ECHO;
    kind[tput_l] = F_LISTEN_TPUT;
    kind[udp_listen_fd] = F_LISTEN_UDP;
    ep_add(echo_l, EPOLLIN);
    ep_add(tput_l, EPOLLIN);
    ep_add(udp_listen_fd, EPOLLIN);
    struct epoll_event evs[NEV];
    for (;;) {
        int n = epoll_wait(ep, evs, NEV, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            switch (kind[fd]) {
            case F_LISTEN_ECHO: tcp_accept(fd, 0); break;
            case F_LISTEN_TPUT: tcp_accept(fd, 1); break;
            case F_LISTEN_UDP: udp_read_listener(); break;
            case F_TCP: sess_event(obj[fd]); break;
            case F_UDP: udp_answer(fd); break;
            default: break;   /* closed earlier in this batch */
            }
        }
    }
}
