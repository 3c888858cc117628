/* SPDX-License-Identifier: MIT */
/* The floor a MariaDB/MySQL lock client can reach: a bare libmariadb loop of
 * SELECT GET_LOCK(name, 30) + SELECT RELEASE_LOCK(name), one connection per thread (GET_LOCK waits in the
 * server, so a hot lock needs no client-side retry loop; 0 = timed out, asked again).
 * usage: floor_mysql HOST PORT THREADS SECONDS [hot]       (user/password/database dlock/dlock/dlock)
 *        floor_mysql mysql://USER:PASS@HOST:PORT/DB THREADS SECONDS [hot]
 * build: gcc -O2 -o floor_mysql floor_mysql.c $(mariadb_config --cflags --libs) -lpthread
 * prints one JSON line: cycles/s and p50/p99 of one cycle (µs), like ../limit.c. */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static char host[128] = "127.0.0.1", user[64] = "dlock", pass[64] = "dlock", db[64] = "dlock";
static int port, secs, hot, T;
static pthread_barrier_t ready;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
typedef struct { long n, cap; double *lat; int id; } W;
static MYSQL *open_conn(void) {
  MYSQL *c = mysql_init(NULL);
  if (!mysql_real_connect(c, host, user, pass, db, port, NULL, 0)) { fprintf(stderr, "connect: %s\n", mysql_error(c)); exit(1); }
  return c;
}
static long one(MYSQL *c, const char *q) {   /* runs a one-value SELECT; returns the value, -1 for NULL */
  if (mysql_query(c, q)) { fprintf(stderr, "%s: %s\n", q, mysql_error(c)); exit(1); }
  MYSQL_RES *r = mysql_store_result(c); MYSQL_ROW row = mysql_fetch_row(r);
  long v = row[0] ? atol(row[0]) : -1; mysql_free_result(r); return v;
}
static void *run(void *a) {
  W *w = a; MYSQL *c = open_conn(); char lock[128], unlock[128];
  snprintf(lock, sizeof lock, hot ? "SELECT GET_LOCK('floor:hot', 30)" : "SELECT GET_LOCK('floor:%d', 30)", w->id);
  snprintf(unlock, sizeof unlock, hot ? "SELECT RELEASE_LOCK('floor:hot')" : "SELECT RELEASE_LOCK('floor:%d')", w->id);
  pthread_barrier_wait(&ready);               /* connections are open before the clock starts */
  double t0 = now();
  while (now() - t0 < secs) {
    double s = now();
    while (one(c, lock) != 1) {}
    one(c, unlock);
    if (w->n == w->cap) w->lat = realloc(w->lat, sizeof(double) * (w->cap *= 2));
    w->lat[w->n++] = (now() - s) * 1e6;
  }
  mysql_close(c); mysql_thread_end(); return NULL;
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  int i = 1;
  if (argc > 1 && strstr(argv[1], "://")) {
    if (sscanf(argv[1], "mysql://%63[^:]:%63[^@]@%127[^:]:%d/%63s", user, pass, host, &port, db) != 5) { fprintf(stderr, "bad URL\n"); return 2; }
    i = 2;
  } else if (argc > 2) { snprintf(host, sizeof host, "%s", argv[1]); port = atoi(argv[2]); i = 3; }
  if (argc < i + 2) { fprintf(stderr, "usage: floor_mysql HOST PORT|URL THREADS SECONDS [hot]\n"); return 2; }
  T = atoi(argv[i]); secs = atoi(argv[i + 1]); hot = argc > i + 2;
  mysql_library_init(0, NULL, NULL);
  pthread_t *th = calloc(T, sizeof *th); W *w = calloc(T, sizeof *w);
  pthread_barrier_init(&ready, NULL, T + 1);
  for (int k = 0; k < T; k++) { w[k] = (W){0, 4096, malloc(sizeof(double) * 4096), k}; pthread_create(&th[k], 0, run, &w[k]); }
  pthread_barrier_wait(&ready); double t0 = now();
  long n = 0, m = 0; for (int k = 0; k < T; k++) { pthread_join(th[k], 0); n += w[k].n; }
  double el = now() - t0, *all = malloc(sizeof(double) * (n + 1));
  for (int k = 0; k < T; k++) { memcpy(all + m, w[k].lat, w[k].n * sizeof(double)); m += w[k].n; }
  qsort(all, m, sizeof(double), cmp);
  printf("{\"lib\":\"libmariadb-floor\",\"wl\":\"%s\",\"conc\":%d,\"cycles_per_s\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f}\n",
         hot ? "hot" : T == 1 ? "seq" : "par", T, n / el, m ? all[m / 2] : 0, m ? all[(long)(m * 0.99)] : 0);
  mysql_library_end(); return 0;
}
