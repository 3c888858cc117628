/* SPDX-License-Identifier: MIT */
/* floor.c - the floor an etcd lock client can reach over the v3 JSON gateway:
 * each cycle is the bare requests of an uncontended concurrency.Mutex-layout
 * lock, with nothing around them: one Txn that puts the contender's key on a
 * lease if it is absent and reads the oldest key under the lock's prefix,
 * then a delete of the key. One lease for the run; each thread has its own
 * connection (libcurl keeps it alive) and its own lock (bench/floor-<thread>/),
 * so no cycle ever waits.
 *
 *   floor HOST:PORT THREADS SECONDS     prints one JSON line (cycles/s, p50, p99)
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 256
#define MAX_SAMPLES 2000000

static const char *endpoint;
static double seconds;
static char lease[32];

typedef struct reply {
    char text[8192];
    size_t len;
} reply;

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

static void b64(const char *in, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char) in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char) in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char) in[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = i + 1 < n ? abc[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[o] = '\0';
}

static size_t keep(char *data, size_t size, size_t n, void *arg)
{
    reply *r = arg;
    size_t len = size * n;
    if (r->len + len < sizeof r->text) {
        memcpy(r->text + r->len, data, len);
        r->len += len;
        r->text[r->len] = '\0';
    }
    return len;
}

/* POSTs body to path; 0 if etcd answered 200. */
static int post(CURL *h, const char *path, const char *body, reply *r)
{
    char url[256];
    long status = 0;

    snprintf(url, sizeof url, "http://%s%s", endpoint, path);
    r->len = 0;
    r->text[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L); /* a hung request ends the run's wait */
    if (curl_easy_perform(h) != CURLE_OK)
        return -1;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    return status == 200 ? 0 : -1;
}

static void *run(void *arg)
{
    worker *w = arg;
    char key[128], prefix[64], end[64], k64[192], p64[128], e64[128], txn[1024], del[256];
    reply r;
    CURL *h = curl_easy_init();

    snprintf(prefix, sizeof prefix, "bench/floor-%d/", w->id);
    snprintf(end, sizeof end, "bench/floor-%d0", w->id); /* '/' + 1 */
    snprintf(key, sizeof key, "%s%llx", prefix, strtoull(lease, NULL, 10)); /* Mutex's: hex */
    b64(key, k64);
    b64(prefix, p64);
    b64(end, e64);
    snprintf(txn, sizeof txn,
             "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
             "\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"\",\"lease\":\"%s\"}},"
             "{\"request_range\":{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
             "\"sort_target\":\"CREATE\",\"limit\":\"1\"}}]}",
             k64, k64, lease, p64, e64);
    snprintf(del, sizeof del, "{\"key\":\"%s\"}", k64);
    double stop = now() + seconds;
    while (now() < stop) {
        double t0 = now();
        if (post(h, "/v3/kv/txn", txn, &r) != 0 || strstr(r.text, "\"succeeded\":true") == NULL ||
            post(h, "/v3/kv/deleterange", del, &r) != 0) {
            w->failures++;
            post(h, "/v3/kv/deleterange", del, &r); /* a key left would fail every cycle */
            continue;
        }
        if (w->nsamples < MAX_SAMPLES)
            w->lat_us[w->nsamples++] = (now() - t0) * 1e6;
        w->cycles++;
    }
    curl_easy_cleanup(h);
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
    endpoint = argv[1];
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    if (threads < 1 || threads > MAX_THREADS || seconds <= 0) {
        fprintf(stderr, "floor: 1..%d threads, a positive number of seconds\n", MAX_THREADS);
        return 64;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    reply r;
    const char *id;
    if (post(h, "/v3/lease/grant", "{\"TTL\":\"60\"}", &r) != 0 ||
        (id = strstr(r.text, "\"ID\":\"")) == NULL ||
        sscanf(id + 6, "%31[0-9]", lease) != 1) {
        fprintf(stderr, "floor: no lease from %s: %s\n", endpoint, r.text);
        return 69;
    }

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
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%s\"}", lease);
    post(h, "/v3/lease/revoke", body, &r);
    curl_easy_cleanup(h);
    printf("{\"lib\":\"etcd-floor\",\"threads\":%d,\"cycles_per_s\":%.0f,\"p50_us\":%.0f,"
           "\"p99_us\":%.0f,\"failures\":%ld}\n",
           threads, (double) cycles / elapsed, n > 0 ? all[n / 2] : 0,
           n > 0 ? all[(long) ((double) n * 0.99)] : 0, failures);
    return cycles > 0 ? 0 : 1;
}
