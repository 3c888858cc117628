/* SPDX-License-Identifier: MIT */
/* sockets.h - the process's open sockets, for the stores whose client
 * library opens its own without close-on-exec (libzookeeper-mt, libcurl).
 *
 * A command run under a lock (`dlock run`) must not inherit a store's
 * sockets. A store that cannot open a library's sockets itself finds them
 * afterwards here: by the inode behind each fd, read from /proc/self/fd's
 * links, never by a call on the fds themselves, which other threads (other
 * handles' I/O threads, the host program's) may be using or closing.
 * And the words for what answered at a socket in another protocol. */
#ifndef DLOCK_BACKEND_SOCKETS_H
#define DLOCK_BACKEND_SOCKETS_H

#include <stddef.h>

/* A socket open now: its fd and the inode behind it. */
typedef struct dlock__open_socket {
    int fd;
    unsigned long inode;
} dlock__open_socket;

/* The sockets open now, sorted by fd then inode (dlock__open_socket_cmp),
 * into *out (malloc'd; NULL when none or out of memory). Returns how many. */
size_t dlock__open_sockets(dlock__open_socket **out);

/* qsort / bsearch order of dlock__open_socket. */
int dlock__open_socket_cmp(const void *a, const void *b);

/* Sets close-on-exec on fd, keeping its other descriptor flags. */
void dlock__set_cloexec(int fd);

/* A URL at another service's port: what answered with b[0..n), the first
 * bytes it sent to our protocol's first words, in words and with the URL
 * to use when it is one of dlock's stores: "an HTTP server's reply: etcd's
 * port is etcd://", "a Redis server's error: use redis://", a MySQL or
 * MariaDB greeting or error, a PostgreSQL error, "a TLS alert: the port
 * takes TLS", or "an unknown protocol: ...": never the raw bytes. Into
 * out, of size bytes. */
void dlock__what_answered(const void *b, size_t n, char *out, size_t size);

#endif
