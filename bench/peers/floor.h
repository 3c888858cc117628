/* SPDX-License-Identifier: MIT */
/* floor.h - what the floors of the session stores share (zk/floor.c,
 * etcd/floor.c): the command line, the threads running cycles until time is
 * up, and the JSON line of cycles/s and latency percentiles. A floor gives
 * the per-thread setup, one cycle and the per-thread teardown. */
#ifndef BENCH_FLOOR_H
#define BENCH_FLOOR_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLOOR_MAX_THREADS 256
#define FLOOR_MAX_SAMPLES 2000000

typedef struct floor_worker {
    int id;
    long cycles, nsamples, failures;
    double *lat_us;
    void *state; /* the floor's own, made by its setup */
} floor_worker;

typedef struct floor_ops {
    void (*setup)(floor_worker *w);    /* in the worker's thread, before its cycles */
    int (*cycle)(floor_worker *w);     /* one lock + unlock; 0 when it went through */
    void (*teardown)(floor_worker *w); /* in the worker's thread, after them; or NULL */
} floor_ops;

static double floor_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

/* floor HOST:PORT THREADS SECONDS: 0, or the exit status of a usage error. */
static int floor_args(int argc, char **argv, int *threads, double *seconds)
{
    if (argc != 4) {
        fprintf(stderr, "usage: floor HOST:PORT THREADS SECONDS\n");
        return 64;
    }
    *threads = atoi(argv[2]);
    *seconds = atof(argv[3]);
    if (*threads < 1 || *threads > FLOOR_MAX_THREADS || *seconds <= 0) {
        fprintf(stderr, "floor: 1..%d threads, a positive number of seconds\n",
                FLOOR_MAX_THREADS);
        return 64;
    }
    return 0;
}

static const floor_ops *floor_the_ops;
static double floor_seconds;

static void *floor_thread(void *arg)
{
    floor_worker *w = arg;
    floor_the_ops->setup(w);
    double end = floor_now() + floor_seconds;
    while (floor_now() < end) {
        double t0 = floor_now();
        if (floor_the_ops->cycle(w) != 0) {
            w->failures++;
            continue;
        }
        if (w->nsamples < FLOOR_MAX_SAMPLES)
            w->lat_us[w->nsamples++] = (floor_now() - t0) * 1e6;
        w->cycles++;
    }
    if (floor_the_ops->teardown != NULL)
        floor_the_ops->teardown(w);
    return NULL;
}

static int floor_by_value(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* Runs the threads and prints the JSON line for lib. Returns the exit
 * status: 0 when cycles went through, 1 when none did, 70 out of memory. */
static int floor_run(const char *lib, int threads, double seconds, const floor_ops *ops)
{
    static floor_worker w[FLOOR_MAX_THREADS];
    pthread_t th[FLOOR_MAX_THREADS];

    floor_the_ops = ops;
    floor_seconds = seconds;
    double t0 = floor_now();
    for (int i = 0; i < threads; i++) {
        w[i] = (floor_worker){.id = i, .lat_us = malloc(sizeof(double) * FLOOR_MAX_SAMPLES)};
        if (w[i].lat_us == NULL) {
            fprintf(stderr, "floor: out of memory\n");
            return 70;
        }
        pthread_create(&th[i], NULL, floor_thread, &w[i]);
    }
    long cycles = 0, failures = 0, n = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        cycles += w[i].cycles;
        failures += w[i].failures;
        n += w[i].nsamples;
    }
    double elapsed = floor_now() - t0;
    double *all = malloc(sizeof(double) * (size_t) (n > 0 ? n : 1));
    if (all == NULL) {
        fprintf(stderr, "floor: out of memory\n");
        return 70;
    }
    for (int i = 0, k = 0; i < threads; k += (int) w[i].nsamples, i++)
        memcpy(all + k, w[i].lat_us, sizeof(double) * (size_t) w[i].nsamples);
    qsort(all, (size_t) n, sizeof(double), floor_by_value);
    printf("{\"lib\":\"%s\",\"threads\":%d,\"cycles_per_s\":%.0f,\"p50_us\":%.0f,"
           "\"p99_us\":%.0f,\"failures\":%ld}\n",
           lib, threads, (double) cycles / elapsed, n > 0 ? all[n / 2] : 0,
           n > 0 ? all[(long) ((double) n * 0.99)] : 0, failures);
    return cycles > 0 ? 0 : 1;
}

#endif
