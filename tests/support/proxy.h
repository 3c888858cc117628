/* SPDX-License-Identifier: MIT */
/* proxy.h - a fault proxy: TCP between clients and one server, whose links
 * a test can cut, blackhole and heal at any moment, without root.
 *
 * The proxy is a helper process (forked, so it survives the test forking
 * workers, and it dies with the process that started it). It listens on
 * one loopback port per link and forwards every connection to the
 * upstream port. Give different clients different links to partition one
 * client, or set all links at once to partition every client.
 *
 * Modes of a link:
 *   DT_PASS       bytes flow (heal)
 *   DT_BLACKHOLE  connections stay open and new ones are accepted, but no
 *                 byte moves in either direction: clients see silence, not
 *                 a reset. Held bytes flow again on heal, late, as after a
 *                 long network stall that TCP rides out.
 *   DT_DROP       like DT_BLACKHOLE, but bytes are read and thrown away;
 *                 on heal, connections that lost bytes are reset (their
 *                 streams are broken, as TCP would end them after its
 *                 retransmissions gave up), the others go on.
 *   DT_CUT        every open connection is reset (RST) and new ones are
 *                 refused (the port stops listening) until the next mode.
 *
 * dt_proxy_set() returns once the proxy applies the mode. */
#ifndef DLOCK_TEST_PROXY_H
#define DLOCK_TEST_PROXY_H

#include <sys/types.h>

typedef enum dt_proxy_mode {
    DT_PASS = 0,
    DT_BLACKHOLE = 1,
    DT_DROP = 2,
    DT_CUT = 3,
} dt_proxy_mode;

#define DT_PROXY_MAX_LINKS 16

typedef struct dt_proxy {
    pid_t pid;
    int control; /* socket to the proxy process */
    int links;
    int upstream_port;
    int ports[DT_PROXY_MAX_LINKS];
    dt_proxy_mode modes[DT_PROXY_MAX_LINKS];
} dt_proxy;

/* Starts a proxy with `links` listening ports (1..DT_PROXY_MAX_LINKS) on
 * free loopback ports, all forwarding to 127.0.0.1:upstream_port. Aborts
 * the test if it cannot. */
void dt_proxy_start(dt_proxy *p, int upstream_port, int links);
/* Sets link `link`'s mode, or every link's when link is -1. */
void dt_proxy_set(dt_proxy *p, int link, dt_proxy_mode mode);
/* Holds every byte that passes through link (-1: all links) ms before it
 * goes on, both ways, in order (0: none): a slow network or server, whose
 * every request is answered, late. Bytes already read keep their time. */
void dt_proxy_delay(dt_proxy *p, int link, int ms);
/* Resets (RST) every connection open through link (-1: all links), as a
 * server that dies or a middlebox that drops state would; the mode stays,
 * and so does the listening port: clients may connect again at once. */
void dt_proxy_reset(dt_proxy *p, int link);
/* Connections currently open through link (-1: all links), as the proxy
 * counts them. */
int dt_proxy_connections(dt_proxy *p, int link);
void dt_proxy_stop(dt_proxy *p);
const char *dt_proxy_mode_name(dt_proxy_mode mode);

#endif
