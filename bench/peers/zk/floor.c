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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define THREADED /* the synchronous calls of libzookeeper_mt */
#include <zookeeper/zookeeper.h>

#define MAX_THREADS 256
#define MAX_SAMPLES 2000000

static zhandle_t *zh;
static double seconds;

typedef struct worker {
    int id;
    long cycles, nsamples, failures;
    double *lat_us;
} worker;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static void quiet(const char *message)
{
    (void) message;
}

static void watcher(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void) h, (void) type, (void) state, (void) path, (void) ctx;
}

static int cycle(const char *dir, const char *prefix)
{
    char node[256];
    struct String_vector children = {0};

    if (zoo_create(zh, prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, node,
                   sizeof node) != ZOK)
        return -1;
    int rc = zoo_get_children(zh, dir, 0, &children);
    deallocate_String_vector(&children);
    if (zoo_delete(zh, node, -1) != ZOK || rc != ZOK)
        return -1;
    return 0;
}

static void *run(void *arg)
{
    worker *w = arg;
    char dir[64], prefix[96];

    snprintf(dir, sizeof dir, "/bench/floor-%d", w->id);
    snprintf(prefix, sizeof prefix, "%s/lock-", dir);
    zoo_create(zh, dir, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */
    double end = now() + seconds;
    while (now() < end) {
        double t0 = now();
        if (cycle(dir, prefix) != 0) {
            w->failures++;
            continue;
        }
        if (w->nsamples < MAX_SAMPLES)
            w->lat_us[w->nsamples++] = (now() - t0) * 1e6;
        w->cycles++;
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: floor HOST:PORT THREADS SECONDS\n");
        return 64;
    }
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    if (threads < 1 || threads > MAX_THREADS || seconds <= 0) {
        fprintf(stderr, "floor: 1..%d threads, a positive number of seconds\n", MAX_THREADS);
        return 64;
    }
    zh = zookeeper_init2(argv[1], watcher, 30000, NULL, NULL, 0, quiet);
    if (zh != NULL)
        zoo_set_servers_resolution_delay(zh, 60000); /* as dlock: no resolving per poll */
    double until = now() + 20;
    while (zh != NULL && zoo_state(zh) != ZOO_CONNECTED_STATE && now() < until)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    if (zh == NULL || zoo_state(zh) != ZOO_CONNECTED_STATE) {
        fprintf(stderr, "floor: no session with %s\n", argv[1]);
        return 69;
    }
    zoo_create(zh, "/bench", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */

    static worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){.id = i, .lat_us = malloc(sizeof(double) * MAX_SAMPLES)};
        if (w[i].lat_us == NULL) {
            fprintf(stderr, "floor: out of memory\n");
            return 70;
        }
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    long cycles = 0, failures = 0, n = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        cycles += w[i].cycles;
        failures += w[i].failures;
        n += w[i].nsamples;
    }
    double elapsed = now() - t0;
    double *all = malloc(sizeof(double) * (size_t) (n > 0 ? n : 1));
    for (int i = 0, k = 0; i < threads; k += (int) w[i].nsamples, i++)
        memcpy(all + k, w[i].lat_us, sizeof(double) * (size_t) w[i].nsamples);
    qsort(all, (size_t) n, sizeof(double), by_value);
    zookeeper_close(zh);
    printf("{\"lib\":\"zk-floor\",\"threads\":%d,\"cycles_per_s\":%.0f,\"p50_us\":%.0f,"
           "\"p99_us\":%.0f,\"failures\":%ld}\n",
           threads, (double) cycles / elapsed, n > 0 ? all[n / 2] : 0,
           n > 0 ? all[(long) ((double) n * 0.99)] : 0, failures);
    return cycles > 0 ? 0 : 1;
}
