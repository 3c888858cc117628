/* SPDX-License-Identifier: MIT */
/* The floor a PostgreSQL lock client can reach: a bare libpq loop of
 * SELECT pg_advisory_lock(hashtext(name)) + SELECT pg_advisory_unlock(hashtext(name)), one connection per
 * thread (pg_advisory_lock waits in the server, so a hot lock needs no client-side retry loop).
 * usage: floor_pg HOST PORT THREADS SECONDS [hot]        (user/password/database dlock/dlock/dlock)
 *        floor_pg postgres://USER:PASS@HOST:PORT/DB THREADS SECONDS [hot]   (any libpq conninfo/URI)
 * build: gcc -O2 -o floor_pg floor_pg.c -I$(pg_config --includedir) -lpq -lpthread
 * prints one JSON line: cycles/s and p50/p99 of one cycle (µs), like ../limit.c. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static char conninfo[512];
static int secs, hot, T;
static pthread_barrier_t ready;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
typedef struct { long n, cap; double *lat; int id; } W;
static void exec1(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "%s: %s", q, PQerrorMessage(c)); exit(1); }
  PQclear(r);
}
static void *run(void *a) {
  W *w = a; char lock[128], unlock[128];
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) { fprintf(stderr, "connect: %s", PQerrorMessage(c)); exit(1); }
  snprintf(lock, sizeof lock, hot ? "SELECT pg_advisory_lock(hashtext('floor:hot'))" : "SELECT pg_advisory_lock(hashtext('floor:%d'))", w->id);
  snprintf(unlock, sizeof unlock, hot ? "SELECT pg_advisory_unlock(hashtext('floor:hot'))" : "SELECT pg_advisory_unlock(hashtext('floor:%d'))", w->id);
  pthread_barrier_wait(&ready);               /* connections are open before the clock starts */
  double t0 = now();
  while (now() - t0 < secs) {
    double s = now();
    exec1(c, lock);
    exec1(c, unlock);
    if (w->n == w->cap) w->lat = realloc(w->lat, sizeof(double) * (w->cap *= 2));
    w->lat[w->n++] = (now() - s) * 1e6;
  }
  PQfinish(c); return NULL;
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  int i = 1;
  if (argc > 1 && strstr(argv[1], "://")) { snprintf(conninfo, sizeof conninfo, "%s", argv[1]); i = 2; }
  else if (argc > 2) { snprintf(conninfo, sizeof conninfo, "host=%s port=%s user=dlock password=dlock dbname=dlock", argv[1], argv[2]); i = 3; }
  if (argc < i + 2) { fprintf(stderr, "usage: floor_pg HOST PORT|URL THREADS SECONDS [hot]\n"); return 2; }
  T = atoi(argv[i]); secs = atoi(argv[i + 1]); hot = argc > i + 2;
  pthread_t *th = calloc(T, sizeof *th); W *w = calloc(T, sizeof *w);
  pthread_barrier_init(&ready, NULL, T + 1);
  for (int k = 0; k < T; k++) { w[k] = (W){0, 4096, malloc(sizeof(double) * 4096), k}; pthread_create(&th[k], 0, run, &w[k]); }
  pthread_barrier_wait(&ready); double t0 = now();
  long n = 0, m = 0; for (int k = 0; k < T; k++) { pthread_join(th[k], 0); n += w[k].n; }
  double el = now() - t0, *all = malloc(sizeof(double) * (n + 1));
  for (int k = 0; k < T; k++) { memcpy(all + m, w[k].lat, w[k].n * sizeof(double)); m += w[k].n; }
  qsort(all, m, sizeof(double), cmp);
  printf("{\"lib\":\"libpq-floor\",\"wl\":\"%s\",\"conc\":%d,\"cycles_per_s\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f}\n",
         hot ? "hot" : T == 1 ? "seq" : "par", T, n / el, m ? all[m / 2] : 0, m ? all[(long)(m * 0.99)] : 0);
  return 0;
}
