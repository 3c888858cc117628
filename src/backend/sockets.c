/* SPDX-License-Identifier: MIT */
/* sockets.c - the process's open sockets, read from /proc, and what
 * answered at a socket in another protocol (sockets.h). */
#include "sockets.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dlock__open_socket_cmp(const void *a, const void *b)
{
    const dlock__open_socket *x = a, *y = b;
    if (x->fd != y->fd)
        return (x->fd > y->fd) - (x->fd < y->fd);
    return (x->inode > y->inode) - (x->inode < y->inode);
}

size_t dlock__open_sockets(dlock__open_socket **out)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    size_t n = 0, cap = 0;
    dlock__open_socket *all = NULL;

    *out = NULL;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[300], target[64];
        unsigned long inode;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) != 1)
            continue;
        if (n == cap) {
            dlock__open_socket *grown = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof *all);
            if (grown == NULL)
                break;
            all = grown;
        }
        all[n++] = (dlock__open_socket){.fd = atoi(e->d_name), .inode = inode};
    }
    closedir(d);
    if (all != NULL)
        qsort(all, n, sizeof *all, dlock__open_socket_cmp);
    *out = all;
    return n;
}

void dlock__set_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0)
        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

void dlock__what_answered(const void *bytes, size_t n, char *out, size_t size)
{
    const unsigned char *b = bytes;

    if (n >= 5 && b[3] == 0 && (b[4] == 0x0a || b[4] == 0xff))
        /* a packet of the MySQL protocol: 3 bytes of length, sequence 0,
         * then the greeting's protocol version 10 (or an error packet) */
        snprintf(out, size, "a MySQL or MariaDB server's %s: use mysql://",
                 b[4] == 0x0a ? "greeting" : "error");
    else if (n >= 5 && memcmp(b, "HTTP/", 5) == 0)
        snprintf(out, size, "an HTTP server's reply: etcd's port is etcd://");
    else if (n >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03)
        /* a TLS record (an alert, or a handshake) of version 3.x */
        snprintf(out, size, "a TLS %s: the port takes TLS",
                 b[0] == 0x15 ? "alert" : "server's handshake");
    else if (n >= 1 && b[0] == '-')
        snprintf(out, size, "a Redis server's error: use redis://");
    else if (n >= 1 && b[0] == 'E')
        /* PostgreSQL's ErrorResponse to a startup packet it cannot read */
        snprintf(out, size, "a PostgreSQL server's error: use postgres://");
    else
        snprintf(out, size, "an unknown protocol: none of dlock's stores, nor HTTP or TLS");
}
