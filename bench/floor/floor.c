/* The floor: the least a server can do to answer keep-alive GETs with one
 * file over loopback, so the kernel's share of a response can be measured
 * apart from any server's own choices.
 *
 * One thread, edge-free epoll, no parsing beyond finding the end of each
 * request head; every request gets the same fixed response head and the
 * same file, sent the cheapest way Linux offers on a plain socket: the head
 * with MSG_MORE (so it leaves in the body's first segment) and the body
 * with sendfile from a descriptor opened once. Mode "writev" sends the head
 * in a write of its own first instead (what nginx does). A response that
 * does not fit the socket buffer continues when the socket is writable.
 *
 *   floor PORT FILE [more|writev]
 *
 * Not a server: no error handling beyond closing the connection, no
 * timeouts, for bench/floor.py only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXC 65536

struct conn {
    char in[4096];
    size_t have;
    /* Bytes of the current response still to send: head, then body. */
    size_t head_off;
    off_t body_off;
    int busy;
};

static struct conn *conns[MAXC];
static char head[256];
static size_t head_len;
static int file_fd;
static off_t file_len;
static int use_writev;

static void drop(int ep, int fd) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Sends what is left of the current response; 1 when done, 0 when the
 * socket is full, -1 on error. */
static int send_rest(int fd, struct conn *c) {
    while (c->head_off < head_len) {
        ssize_t n = use_writev ? write(fd, head + c->head_off, head_len - c->head_off)
                               : send(fd, head + c->head_off, head_len - c->head_off, MSG_MORE);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->head_off += (size_t)n;
    }
    while (c->body_off < file_len) {
        ssize_t n = sendfile(fd, file_fd, &c->body_off, (size_t)(file_len - c->body_off));
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        if (n == 0) return -1;
    }
    return 1;
}

/* Answers every whole request head in the buffer, in order. */
static int serve(int ep, int fd, struct conn *c) {
    for (;;) {
        if (c->busy) {
            int r = send_rest(fd, c);
            if (r <= 0) return r;
            c->busy = 0;
        }
        char *end = memmem(c->in, c->have, "\r\n\r\n", 4);
        if (!end) return 1;
        size_t used = (size_t)(end - c->in) + 4;
        memmove(c->in, c->in + used, c->have - used);
        c->have -= used;
        c->head_off = 0;
        c->body_off = 0;
        c->busy = 1;
    }
    (void)ep;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor PORT FILE [more|writev]\n");
        return 2;
    }
    use_writev = argc > 3 && strcmp(argv[3], "writev") == 0;
    /* A client that closes mid-response must not end the process. */
    signal(SIGPIPE, SIG_IGN);
    file_fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (file_fd < 0 || fstat(file_fd, &st) < 0) {
        perror(argv[2]);
        return 1;
    }
    file_len = st.st_size;
    head_len = (size_t)snprintf(head, sizeof head,
                                "HTTP/1.1 200 OK\r\nServer: floor\r\nContent-Type: application/octet-stream\r\n"
                                "Content-Length: %lld\r\nConnection: keep-alive\r\n\r\n",
                                (long long)file_len);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) {
        perror("listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXC) {
                        close(c);
                        continue;
                    }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conns[c] = calloc(1, sizeof(struct conn));
                    struct epoll_event ce = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            struct conn *c = conns[fd];
            if (!c) continue;
            int dead = 0;
            if (evs[i].events & EPOLLIN) {
                for (;;) {
                    ssize_t r = recv(fd, c->in + c->have, sizeof c->in - c->have, 0);
                    if (r > 0) {
                        c->have += (size_t)r;
                        if (c->have == sizeof c->in) { dead = 1; break; }
                        continue;
                    }
                    if (r == 0 || errno != EAGAIN) dead = 1;
                    break;
                }
            }
            if (!dead && serve(ep, fd, c) < 0) dead = 1;
            if (dead || (evs[i].events & (EPOLLHUP | EPOLLERR))) drop(ep, fd);
        }
    }
}
