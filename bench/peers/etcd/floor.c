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
#include "../floor.h"

#include <curl/curl.h>
#include <stdio.h>

static const char *endpoint;
static char lease[32];

typedef struct reply {
    char text[8192];
    size_t len;
} reply;

/* A worker's connection and its lock's requests. */
typedef struct bodies {
    CURL *h;
    char txn[1024], del[256];
    reply r;
} bodies;

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

static void setup(floor_worker *w)
{
    static bodies all[FLOOR_MAX_THREADS];
    bodies *b = &all[w->id];
    char key[128], prefix[64], end[64], k64[192], p64[128], e64[128];

    b->h = curl_easy_init();
    snprintf(prefix, sizeof prefix, "bench/floor-%d/", w->id);
    snprintf(end, sizeof end, "bench/floor-%d0", w->id); /* '/' + 1 */
    snprintf(key, sizeof key, "%s%llx", prefix, strtoull(lease, NULL, 10)); /* Mutex's: hex */
    b64(key, k64);
    b64(prefix, p64);
    b64(end, e64);
    snprintf(b->txn, sizeof b->txn,
             "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
             "\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"\",\"lease\":\"%s\"}},"
             "{\"request_range\":{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
             "\"sort_target\":\"CREATE\",\"limit\":\"1\"}}]}",
             k64, k64, lease, p64, e64);
    snprintf(b->del, sizeof b->del, "{\"key\":\"%s\"}", k64);
    w->state = b;
}

static int cycle(floor_worker *w)
{
    bodies *b = w->state;
    if (post(b->h, "/v3/kv/txn", b->txn, &b->r) != 0 ||
        strstr(b->r.text, "\"succeeded\":true") == NULL ||
        post(b->h, "/v3/kv/deleterange", b->del, &b->r) != 0) {
        post(b->h, "/v3/kv/deleterange", b->del, &b->r); /* a key left would fail every cycle */
        return -1;
    }
    return 0;
}

static void teardown(floor_worker *w)
{
    curl_easy_cleanup(((bodies *) w->state)->h);
}

int main(int argc, char **argv)
{
    int threads;
    double seconds;
    int rc = floor_args(argc, argv, &threads, &seconds);
    if (rc != 0)
        return rc;
    endpoint = argv[1];
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
    rc = floor_run("etcd-floor", threads, seconds, &(floor_ops){setup, cycle, teardown});
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%s\"}", lease);
    post(h, "/v3/lease/revoke", body, &r);
    curl_easy_cleanup(h);
    return rc;
}
