/* SPDX-License-Identifier: MIT */
/* floor.c - the floor a ZooKeeper lock client can reach: each cycle is the
 * bare requests of an uncontended Curator-layout lock, with nothing around
 * them: create an EPHEMERAL_SEQUENTIAL node under the lock's path, list the
 * path (the check that the node is first), delete the node. The threads
 * share one session, as dlock's do, and each has a lock path of its own
 * (/bench/floor-<thread>), so no cycle ever waits.
 *
 *   floor HOST:PORT THREADS SECONDS     prints one JSON line (cycles/s, p50, p99)
 */
#include "../floor.h"

#include <stdio.h>
#include <time.h>
#define THREADED /* the synchronous calls of libzookeeper_mt */
#include <zookeeper/zookeeper.h>

static zhandle_t *zh;

typedef struct paths {
    char dir[64], prefix[96];
} paths;

static void quiet(const char *message)
{
    (void) message;
}

static void watcher(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void) h, (void) type, (void) state, (void) path, (void) ctx;
}

static void setup(floor_worker *w)
{
    static paths all[FLOOR_MAX_THREADS];
    paths *p = &all[w->id];
    snprintf(p->dir, sizeof p->dir, "/bench/floor-%d", w->id);
    snprintf(p->prefix, sizeof p->prefix, "/bench/floor-%d/lock-", w->id);
    zoo_create(zh, p->dir, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */
    w->state = p;
}

static int cycle(floor_worker *w)
{
    const paths *p = w->state;
    char node[256];
    struct String_vector children = {0};

    if (zoo_create(zh, p->prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, node,
                   sizeof node) != ZOK)
        return -1;
    int rc = zoo_get_children(zh, p->dir, 0, &children);
    deallocate_String_vector(&children);
    if (zoo_delete(zh, node, -1) != ZOK || rc != ZOK)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int threads;
    double seconds;
    int rc = floor_args(argc, argv, &threads, &seconds);
    if (rc != 0)
        return rc;
    zh = zookeeper_init2(argv[1], watcher, 30000, NULL, NULL, 0, quiet);
    if (zh != NULL)
        zoo_set_servers_resolution_delay(zh, 60000); /* as dlock: no resolving per poll */
    double until = floor_now() + 20;
    while (zh != NULL && zoo_state(zh) != ZOO_CONNECTED_STATE && floor_now() < until)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    if (zh == NULL || zoo_state(zh) != ZOO_CONNECTED_STATE) {
        fprintf(stderr, "floor: no session with %s\n", argv[1]);
        return 69;
    }
    zoo_create(zh, "/bench", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */
    rc = floor_run("zk-floor", threads, seconds, &(floor_ops){setup, cycle, NULL});
    zookeeper_close(zh);
    return rc;
}
