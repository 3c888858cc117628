/* SPDX-License-Identifier: MIT */
/* conn_int.h - the inside of a ZooKeeper connection, shared by the three
 * files that implement conn.h: conn.c (opening the session, requests,
 * watches), close.c (the end of a connection: its session ended, its
 * handle closed, itself freed) and orphans.c (the nodes it still has to
 * delete). Not for use outside them. */
#ifndef DLOCK_ZK_CONN_INT_H
#define DLOCK_ZK_CONN_INT_H

#include "conn.h"

#include <pthread.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#define MAX_PORTS 16

typedef struct zwatch {
    struct zwatch *prev, *next;
    dlock__zconn *conn;
    char token[72];
} zwatch;

/* A node to delete, or (uuid set) a directory to search for a lost create's
 * node. */
typedef struct orphan {
    struct orphan *next;
    dlock__zconn *conn;
    char *path;
    char uuid[37];
    int busy;           /* a request for it is in flight */
    int searches;       /* listings that found nothing */
    int64_t not_before; /* a search: not again before */
} orphan;

/* CONNECTING: zookeeper_init called; CONNECTED: the library says so;
 * READY: the round trip succeeded and the core's session started. */
enum { CONNECTING, CONNECTED, READY, DEAD };

struct dlock__zconn {
    _Atomic int refs;
    pthread_rwlock_t use; /* readers: calls on zh; writer: taking it to close */
    zhandle_t *zh;        /* for requests; NULL once being closed */
    zhandle_t *close_zh;  /* (under use) being closed, by whichever callback comes first */
    pthread_mutex_t mu;   /* state, why, watches */
    pthread_cond_t cv;    /* state changes */
    int state;
    int auth_failed;
    int probing; /* a caller makes the first round trip */
    int asking;  /* a caller probes the hosts (probe_hosts, conn.c) */
    int closed;  /* the handle is closed: no callback of it runs any more */
    int doomed;  /* no reference is left: freed once closed */
    int64_t id;
    int64_t timeout_ms;      /* negotiated */
    int64_t opened;          /* when zookeeper_init was called */
    int64_t connect_until;   /* dead if not READY by then */
    int auth;                /* credentials were given */
    dlock__session *session; /* the store's reference, until it ends */
    dlock__sessions *sessions;
    dlock__board *board;
    char label[256];
    char why[200];
    char hosts[1024]; /* "h1:p1,[v6]:p2", for probe_hosts */
    int ports[MAX_PORTS];
    size_t nports;
    zwatch watches; /* sentinel */
    orphan *orphans;
    int norphans;
};

/* Starts a call on c's handle unless it was closed: `call` names the
 * handle ZH. */
#define start(c, call)                                                                             \
    ({                                                                                             \
        pthread_rwlock_rdlock(&(c)->use);                                                          \
        zhandle_t *ZH = (c)->zh;                                                                   \
        int zrc_ = ZH != NULL ? (call) : ZINVALIDSTATE;                                            \
        pthread_rwlock_unlock(&(c)->use);                                                          \
        zrc_;                                                                                      \
    })

/* close.c */
void dlock__zk_die_locked(dlock__zconn *c, const char *why);
void dlock__zk_end_session(dlock__zconn *c, const char *why);
void dlock__zk_close_here(dlock__zconn *c);
void dlock__zk_begin_close(dlock__zconn *c);

/* orphans.c */
void dlock__zk_orphan_add(dlock__zconn *c, const char *path, const char *uuid);

#endif
