/* SPDX-License-Identifier: MIT */
/* redis.c - the single-server Redis backend: its table, URL and
 * connections, a lock's keys; the protocol's steps are in steps.c and
 * renewal.c, waiting for a hand-over in waiting.c, holders and listing in
 * holders.c.
 *
 * Keys of lock N under prefix P share the hash tag {N} (keys.h), so a lock
 * lives in one Cluster slot; the layout is in scripts/README.md. All
 * commands of one lock go over one of the client's pooled connections,
 * picked by the key's hash, and calls from many threads are pipelined
 * there (conn.c). */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT            6379
#define DEFAULT_PREFIX          "dlock"
#define DEFAULT_POOL            2
#define DEFAULT_SYNC_TIMEOUT_MS 1000 /* wait_timeout: Redisson's slavesSyncTimeout */

/* ---------------------------------------------------------------- keys */

static char *join(const char *a, const char *b, const char *c, const char *d, size_t *len)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + strlen(d);
    char *s = malloc(n + 1);
    if (s != NULL)
        snprintf(s, n + 1, "%s%s%s%s", a, b, c, d);
    *len = n;
    return s;
}

static uint32_t hash_key(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s != '\0')
        h = (h ^ (unsigned char) *s++) * 16777619u;
    return h;
}

static void free_rlock(rlock *l)
{
    if (l == NULL)
        return;
    free(l->keys[0]); /* the block of all three (keys.h) */
    free(l->interop_off);
    free(l->wake_channel);
    free(l);
}

static int lock_new(dlock__store *store, const char *name, const dlock__lock_spec *spec,
                    dlock__store_lock **out)
{
    rbackend *b = RBACKEND(store);
    rlock *l;

    *out = NULL;
    l = calloc(1, sizeof *l);
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    l->base.spec = *spec;
    l->spec = *spec;
    int rc = dlock__redis_keys_of(b->prefix, name, spec->kind, spec->simple, l->keys, l->key_lens);
    if (rc != DLOCK_OK) {
        free(l);
        return rc;
    }
    l->slot = dlock__redis_slot(l->keys[0], l->key_lens[0]);
    if (b->cluster != NULL && !spec->simple) {
        /* P:{E}:wake:<client id> (keys[1] is the tag P:{E} and ":fence"),
         * as scripts/queue.lua's grant names it */
        size_t tag = l->key_lens[1] - 6, id = strlen(b->cfg.client_id);
        l->wake_channel = malloc(tag + sizeof ":wake:" + id);
        if (l->wake_channel == NULL) {
            free_rlock(l);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        memcpy(l->wake_channel, l->keys[1], tag);
        memcpy(l->wake_channel + tag, ":wake:", 6);
        memcpy(l->wake_channel + tag + 6, b->cfg.client_id, id + 1);
    }
    if (b->cluster == NULL) {
        l->conn = b->pool[hash_key(l->keys[0]) % b->npool];
    } else if (dlock__redis_slot(l->keys[2], l->key_lens[2]) != l->slot) {
        /* A script on a cluster may touch keys of its own slot only: the
         * interop key N, elsewhere, is not looked at. A key of the lock's
         * slot that nothing writes stands in for it (keys[1] is the tag
         * P:{E} and ":fence"). */
        size_t tag = l->key_lens[1] - 6;
        l->interop_off = malloc(tag + sizeof ":interop-off");
        if (l->interop_off == NULL) {
            free_rlock(l);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        memcpy(l->interop_off, l->keys[1], tag);
        memcpy(l->interop_off + tag, ":interop-off", sizeof ":interop-off");
        l->keys[2] = l->interop_off;
        l->key_lens[2] = tag + sizeof ":interop-off" - 1;
    }
    *out = &l->base;
    return DLOCK_OK;
}

/* A hold left in the store: it keeps its lease, and the client's owner
 * record outlives the client to name its holder. */
static void detach(dlock__store *store, dlock__store_lock *l)
{
    (void) l;
    atomic_store(&RBACKEND(store)->owner_kept, 1);
}

static void lock_free(dlock__store *store, dlock__store_lock *l)
{
    (void) store;
    free_rlock(RLOCK(l));
}

/* ---------------------------------------------------------------- client */

static void close_backend(dlock__store *store, int64_t deadline)
{
    rbackend *b = RBACKEND(store);

    if (b == NULL)
        return;
    dlock__redis_owner_forget(b, deadline);
    dlock__rsub_free(b->sub);
    dlock__rstream_free(b->stream);
    dlock__rshards_free(b->shards); /* before the cluster whose nodes it reads */
    for (size_t i = 0; i < b->npool; i++)
        dlock__rconn_free(b->pool[i]);
    dlock__redis_replicas_close(b);
    dlock__rsentinel_free(b->sentinel); /* after every connection that dials through it */
    dlock__rcluster_free(b->cluster);
    dlock__rtls_free(b->tls); /* after every link made with it */
    pthread_mutex_destroy(&b->mu);
    pthread_mutex_destroy(&b->sync_mu);
    free(b->prefix);
    free(b->wake_channel);
    free(b->owner_key);
    free(b->host);
    free(b->unix_path);
    free(b->user);
    free(b->password);
    free(b->label);
    free(b);
}

static int parse_endpoint(rbackend *b, dlock__url *url)
{
    char label[300];

    if (strcmp(url->scheme, "redis+unix") == 0) {
        if (url->nhosts != 0 || url->path[0] == '\0')
            return dlock__fail(DLOCK_EINVAL, "%s: want redis+unix:///path/to/socket", url->text);
        size_t n = strlen(url->path) + 2;
        b->unix_path = malloc(n);
        if (b->unix_path == NULL)
            return DLOCK_ENOMEM;
        snprintf(b->unix_path, n, "/%s", url->path);
        snprintf(label, sizeof label, "redis+unix://%s", b->unix_path);
        b->ep.single = 1;
    } else if (strcmp(url->scheme, "redis+sentinel") == 0 ||
               strcmp(url->scheme, "rediss+sentinel") == 0) {
        int rc = dlock__rsentinel_new(url, b->ep.log, &b->sentinel);
        if (rc != DLOCK_OK)
            return rc;
        dlock__rsentinel_attach(b->sentinel, &b->ep);
        long db = 0;
        rc = dlock__url_int(url, "db", 0, 1000000, &db);
        if (rc != DLOCK_OK)
            return rc;
        b->ep.db = (int) db;
        size_t used = (size_t) snprintf(label, sizeof label, "%s://%s", url->scheme, url->userinfo);
        for (size_t i = 0; i < url->nhosts && used < sizeof label; i++)
            used += (size_t) snprintf(label + used, sizeof label - used,
                                      strchr(url->hosts[i].name, ':') ? "%s[%s]:%d" : "%s%s:%d",
                                      i > 0 ? "," : "", url->hosts[i].name,
                                      url->hosts[i].port ? url->hosts[i].port : 26379);
        if (used < sizeof label)
            snprintf(label + used, sizeof label - used, "/%s", url->path);
    } else if (strcmp(url->scheme, "redis+cluster") == 0 ||
               strcmp(url->scheme, "rediss+cluster") == 0) {
        /* the seeds; the nodes are made once auth and timeouts are known */
        size_t used = (size_t) snprintf(label, sizeof label, "%s://%s", url->scheme, url->userinfo);
        for (size_t i = 0; i < url->nhosts && used < sizeof label; i++)
            used += (size_t) snprintf(label + used, sizeof label - used,
                                      strchr(url->hosts[i].name, ':') ? "%s[%s]:%d" : "%s%s:%d",
                                      i > 0 ? "," : "", url->hosts[i].name,
                                      url->hosts[i].port ? url->hosts[i].port : DEFAULT_PORT);
    } else {
        char *end;
        long db;
        if (url->nhosts != 1)
            return dlock__fail(DLOCK_EINVAL, "%s: want exactly one host (redis://host:port)",
                               url->text);
        b->host = strdup(url->hosts[0].name);
        if (b->host == NULL)
            return DLOCK_ENOMEM;
        b->ep.port = url->hosts[0].port ? url->hosts[0].port : DEFAULT_PORT;
        b->ep.single = 1;
        if (url->path[0] != '\0') {
            db = strtol(url->path, &end, 10);
            if (*end != '\0' || db < 0 || db > 1000000 || end == url->path)
                return dlock__fail(DLOCK_EINVAL, "%s: database '%s' is not a number", url->text,
                                   url->path);
            b->ep.db = (int) db;
        }
        const char *open = strchr(b->host, ':') != NULL ? "[" : "";
        snprintf(label, sizeof label, "%s://%s%s%s%s:%d", url->scheme, url->userinfo, open, b->host,
                 open[0] ? "]" : "", b->ep.port);
    }
    b->label = strdup(label);
    if ((url->user != NULL && (b->user = strdup(url->user)) == NULL) ||
        (url->password != NULL && (b->password = strdup(url->password)) == NULL) ||
        b->label == NULL)
        return DLOCK_ENOMEM;
    if (b->user != NULL && b->password == NULL) {
        /* redis://secret@host: the user-info is the password (AUTH secret; redis-py 4.3
         * reads it as a user name instead: docs/dlock.1 says so). */
        b->password = b->user;
        b->user = NULL;
    }
    b->ep.host = b->host;
    b->ep.unix_path = b->unix_path;
    b->ep.user = b->user;
    b->ep.password = b->password;
    b->ep.label = b->label;
    return DLOCK_OK;
}

/* rediss://, rediss+sentinel:// and rediss+cluster://: TLS to every node, with the options
 * redis-cli names its flags after. Elsewhere those options are refused. */
static int parse_tls(rbackend *b, dlock__url *url)
{
    int rc = dlock__rtls_from_url(url, strncmp(url->scheme, "rediss", 6) == 0,
                                  "rediss:// (or rediss+sentinel://, rediss+cluster://)", &b->tls);
    b->ep.tls = b->tls; /* insecure=1 is logged at the first connection (conn.c) */
    return rc;
}

/* wait=N and wait_timeout= (replicas.c): how many replicas must have each
 * change, and how long a step waits for them. */
static int parse_wait(rbackend *b, dlock__url *url)
{
    long n = 0;
    int rc = dlock__url_int(url, "wait", 0, 64, &n);
    if (rc != DLOCK_OK)
        return rc;
    b->sync_replicas = (unsigned) n;
    if (n == 0 && dlock__url_get(url, "wait_timeout") != NULL)
        return dlock__fail(DLOCK_EINVAL, "option wait_timeout= bounds the WAIT of wait=N: give "
                                         "wait=N too, or leave it out");
    b->sync_timeout_ms = b->cfg.command_timeout_ms / 2;
    if (b->sync_timeout_ms > DEFAULT_SYNC_TIMEOUT_MS)
        b->sync_timeout_ms = DEFAULT_SYNC_TIMEOUT_MS;
    rc = dlock__url_duration(url, "wait_timeout", 1, &b->sync_timeout_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (b->sync_timeout_ms >= b->cfg.command_timeout_ms)
        return dlock__fail(DLOCK_EINVAL,
                           "option wait_timeout=%lldms: want less than the request timeout "
                           "(timeout=%lldms), which bounds the step and its WAIT",
                           (long long) b->sync_timeout_ms, (long long) b->cfg.command_timeout_ms);
    return DLOCK_OK;
}

/* redis+cluster:// and rediss+cluster://: the nodes (cluster.h) and their sharded pub/sub
 * (shards.h), the options it does not take yet, and what it cannot do yet
 * (README.md, Cluster). */
static int open_cluster(rbackend *b, dlock__url *url, size_t pool)
{
    static const char *const not_yet[] = {"wait", "db"};
    for (size_t i = 0; i < sizeof not_yet / sizeof not_yet[0]; i++) {
        if (dlock__url_get(url, not_yet[i]) != NULL)
            return dlock__fail(DLOCK_ENOTSUP,
                               "option %s= is not built for redis+cluster:// yet (no WAIT; a "
                               "cluster has only database 0)",
                               not_yet[i]);
    }
    if (b->notify_stream)
        return dlock__fail(DLOCK_ENOTSUP,
                           "option notify=stream is not built for redis+cluster://: its "
                           "hand-over notices go through sharded pub/sub (notify=pubsub, the "
                           "default)");
    b->ep.tls_scheme = "rediss+cluster://"; /* the hint to a plain client at TLS ports */
    int rc = dlock__rcluster_new(url, &b->ep, pool, &b->cluster);
    if (rc == DLOCK_OK)
        rc = dlock__rshards_new(b->cluster, b->board, b->ep.log, &b->shards);
    if (rc != DLOCK_OK)
        return rc;
    /* Not yet on a cluster: the interop layout (its key N lives in
     * another slot than the lock's keys). */
    b->base.caps &= ~(unsigned) DLOCK_CAP_INTEROP;
    return DLOCK_OK;
}

static int open_backend(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    rbackend *b = calloc(1, sizeof *b);
    const dlock__client_cfg *cfg = host->cfg;
    const char *prefix;
    long pool = DEFAULT_POOL;
    int rc;

    *out = NULL;
    if (b == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    b->ep.log = host->log;
    b->ep.reached = &b->reached;
    b->ep.in_cluster = &b->in_cluster;
    pthread_mutex_init(&b->mu, NULL);
    pthread_mutex_init(&b->sync_mu, NULL);
    b->base.backend = &dlock__redis_backend;
    b->base.caps = dlock__redis_backend.caps;
    b->base.host = *host;
    b->cfg = *cfg;
    b->board = host->board;
    b->ep.connect_timeout_ms = 2000;
    b->ep.command_timeout_ms = cfg->command_timeout_ms;
    rc = parse_endpoint(b, url);
    if (rc == DLOCK_ENOMEM)
        dlock__fail(rc, "out of memory");
    if (rc == DLOCK_OK)
        rc = parse_tls(b, url);
    if (rc != DLOCK_OK)
        goto fail;
    prefix = dlock__url_get(url, "prefix");
    rc = dlock__redis_check_prefix(prefix != NULL ? prefix : DEFAULT_PREFIX);
    if (rc != DLOCK_OK)
        goto fail;
    b->prefix = strdup(prefix != NULL ? prefix : DEFAULT_PREFIX);
    size_t channel_len;
    b->wake_channel =
        b->prefix != NULL ? join(b->prefix, ":wake:", cfg->client_id, "", &channel_len) : NULL;
    static const char *const notify_ways[] = {"pubsub", "stream"};
    const char *notify;
    rc = dlock__url_choice(url, "notify", notify_ways, 2, 0, &notify);
    if (rc != DLOCK_OK)
        goto fail;
    b->notify_stream = notify != NULL && strcmp(notify, "stream") == 0;
    rc = parse_wait(b, url);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &b->ep.connect_timeout_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_int(url, "pool", 1, MAX_POOL, &pool);
    if (rc != DLOCK_OK)
        goto fail;
    size_t owner_key_len;
    b->owner_key =
        b->prefix != NULL ? join(b->prefix, ":owner:", cfg->client_id, "", &owner_key_len) : NULL;
    if (b->prefix == NULL || b->wake_channel == NULL || b->owner_key == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    if (strcmp(url->scheme, "redis+cluster") == 0 || strcmp(url->scheme, "rediss+cluster") == 0) {
        rc = open_cluster(b, url, (size_t) pool);
        if (rc != DLOCK_OK)
            goto fail;
    }
    for (b->npool = 0; b->cluster == NULL && b->npool < (size_t) pool; b->npool++) {
        rc = dlock__rconn_new(&b->ep, &b->pool[b->npool]);
        if (rc != DLOCK_OK) {
            dlock__fail(rc, "out of memory");
            goto fail;
        }
        char what[48];
        snprintf(what, sizeof what, "command connection %zu of %ld", b->npool + 1, (long) pool);
        dlock__rconn_describe(b->pool[b->npool], what);
    }
    b->base.label = b->label;
    b->base.kind = b->cluster != NULL    ? "Redis Cluster"
                   : b->sentinel != NULL ? "Redis Sentinel"
                                         : NULL;
    *out = &b->base;
    return DLOCK_OK;
fail:
    close_backend(&b->base, dlock__now_us());
    return rc;
}

/* Any connection's handshake answered: the pool's, the subscriber's, the
 * stream reader's (they all dial with b->ep). */
static int reached(dlock__store *store)
{
    rbackend *b = RBACKEND(store);
    /* a plain Redis at a redis+cluster:// URL answered, but no cluster did
     * (-1: a wrong URL, said at once) */
    if (b->cluster != NULL && dlock__rcluster_wrong_kind(b->cluster))
        return -1;
    /* nor a node of a cluster at a redis:// URL (told by a MOVED when
     * INFO is not allowed, after its handshake answered) */
    if (atomic_load(&b->in_cluster))
        return -1;
    return atomic_load(&b->reached);
}

static const char *const schemes[] = {
    "redis",           "rediss",        "redis+unix",     "redis+sentinel",
    "rediss+sentinel", "redis+cluster", "rediss+cluster", NULL};

const dlock__backend dlock__redis_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "Redis",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_ADOPT |
            DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_FAIR | DLOCK_CAP_READ_WRITE |
            DLOCK_CAP_SEMAPHORE | DLOCK_CAP_MULTI_ATOMIC | DLOCK_CAP_INTEROP | DLOCK_CAP_NOTIFY |
            DLOCK_CAP_LIST,
    .open = open_backend,
    .close = close_backend,
    .lock_new = lock_new,
    .lock_free = lock_free,
    .detach = detach,
    .acquire = dlock__redis_acquire,
    .acquire_many = dlock__redis_acquire_many,
    .prepare_wait = dlock__redis_prepare_wait,
    .wait = dlock__redis_wait,
    .cancel = dlock__redis_cancel,
    .release = dlock__redis_release,
    .extend = dlock__redis_extend,
    .renew = dlock__redis_renew,
    .query = dlock__redis_query,
    .force_unlock = dlock__redis_force_unlock,
    .holders = dlock__redis_holders,
    .list = dlock__redis_list,
    .reached = reached,
};
