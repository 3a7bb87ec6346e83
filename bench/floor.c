/* The floor of a keep-alive HTTP/1.1 generator: nothing but the system
 * calls. C connections to 127.0.0.1:PORT, each sends a fixed GET and
 * reads until the response's header ends (nginx `return 200` has no body),
 * then sends again; an epoll_wait carries the readiness of all of them.
 * Per request: one send, one recv, and a share of one epoll_wait. No
 * parsing beyond finding "\r\n\r\n", no timing, no accounting: what a real
 * generator costs above this is its own work.
 *
 *   cc -O2 -o floor bench/floor.c && ./floor PORT CONNECTIONS SECONDS
 *
 * Prints the responses completed. Loopback only (127.0.0.1). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQ[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: floor\r\n\r\n";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: floor PORT CONNECTIONS SECONDS\n");
        return 2;
    }
    int port = atoi(argv[1]), c = atoi(argv[2]);
    double secs = atof(argv[3]);
    if (c < 1 || c > 10000 || port < 1 || port > 65535 || secs <= 0) {
        fprintf(stderr, "floor: PORT 1-65535, CONNECTIONS 1-10000, SECONDS > 0\n");
        return 2;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ep = epoll_create1(0);
    for (int i = 0; i < c; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            perror("floor: connect");
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (send(fd, REQ, sizeof REQ - 1, MSG_NOSIGNAL) < 0) {
            perror("floor: send");
            return 1;
        }
    }
    long done = 0;
    char buf[4096];
    struct epoll_event evs[256];
    double end = now() + secs;
    while (now() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                fprintf(stderr, "floor: connection ended\n");
                return 1;
            }
            /* A `return 200` response arrives in one segment. */
            if (r >= 4 && memcmp(buf + r - 4, "\r\n\r\n", 4) == 0) {
                done++;
                if (send(fd, REQ, sizeof REQ - 1, MSG_NOSIGNAL) < 0) {
                    perror("floor: send");
                    return 1;
                }
            }
        }
    }
    printf("%ld responses\n", done);
    return 0;
}
