/* SPDX-License-Identifier: MIT */
/* holders.c - who holds a lock, and the locks under a prefix (dlock
 * status, dlock list): a lock's holders and waiters from its keys, each
 * named by its client's owner record (owner.c), and the names found by
 * SCAN. Read-only: nothing here changes a lock. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include <stdlib.h>
#include <string.h>

#define MGET_MAX   1024 /* owner records read per MGET */
#define SCAN_COUNT "1000"

/* ---------------------------------------------------------------- holders */

int dlock__redis_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                         int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    const char *argv[5] = {NULL, NULL, "1", l->keys[0], ""};
    size_t lens[5] = {0, 0, 1, l->key_lens[0], 0};
    redisReply *r = NULL, *records = NULL;
    int rc, stop = 0;

    argv[4] = l->spec.kind == DLOCK__READ || l->spec.kind == DLOCK__WRITE ? "r"
              : l->spec.kind == DLOCK__SEMAPHORE                          ? "s"
                                                                          : "";
    lens[4] = strlen(argv[4]);
    evalcall call = {DLOCK__S_HOLDERS, 5, argv, lens};
    rc = dlock__redis_run_script(dlock__redis_conn(b, l, deadline), &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->elements % 2 != 1) {
        rc = dlock__redis_bad_reply(b, "holders", r);
        freeReplyObject(r);
        return rc;
    }
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING) {
            rc = dlock__redis_bad_reply(b, "holders", r);
            freeReplyObject(r);
            return rc;
        }
    }
    /* Holders at 0 (the exclusive one, "" when none) and at 1, 3, 5...;
     * their clients' records read by MGETs of up to MGET_MAX keys. */
    size_t nholders = (r->elements - 1) / 2 + 1, chunk = nholders < MGET_MAX ? nholders : MGET_MAX;
    if (b->cluster != NULL)
        chunk = 1; /* records live in slots of their own: one MGET each, to its node */
    const char **margv = calloc(chunk + 1, sizeof *margv);
    size_t *mlens = calloc(chunk + 1, sizeof *mlens);
    char(*keys)[96] = calloc(chunk, sizeof *keys);
    size_t *of = calloc(chunk, sizeof *of); /* holder j's record is at of[j] - 1, 0: none */
    if (margv == NULL || mlens == NULL || keys == NULL || of == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    margv[0] = "MGET";
    mlens[0] = 4;
    for (size_t from = 0; from < nholders && !stop; from += chunk) {
        size_t to = from + chunk < nholders ? from + chunk : nholders, nkeys = 0;
        for (size_t j = from; j < to; j++) {
            const redisReply *t = r->element[j == 0 ? 0 : 2 * j - 1];
            of[j - from] = 0;
            if (dlock__redis_owner_record_key(b, t->str, t->len, keys[j - from], sizeof keys[0])) {
                margv[1 + nkeys] = keys[j - from];
                mlens[1 + nkeys] = strlen(keys[j - from]);
                of[j - from] = ++nkeys;
            }
        }
        if (nkeys > 0) {
            dlock__rcmd cmd = {1 + nkeys, margv, mlens};
            dlock__rconn *c = b->cluster != NULL ? dlock__redis_owner_conn(b, margv[1])
                                                 : dlock__redis_conn(b, l, deadline);
            rc = dlock__redis_call(c, &cmd, deadline, &records);
            if (rc != DLOCK_OK)
                goto out;
            if (records->type != REDIS_REPLY_ARRAY || records->elements != nkeys) {
                rc = dlock__redis_bad_reply(b, "MGET of owner records", records);
                goto out;
            }
        }
        for (size_t j = from; j < to && !stop; j++) {
            const redisReply *t = r->element[j == 0 ? 0 : 2 * j - 1];
            if (j == 0 && t->len == 0)
                continue; /* no exclusive holder */
            const redisReply *rec = of[j - from] != 0 ? records->element[of[j - from] - 1] : NULL;
            dlock__holder_raw h = {
                .owner = t->str,
                .count = j == 0 ? 1u : (unsigned) strtoul(r->element[2 * j]->str, NULL, 10),
                .info = rec != NULL && rec->type == REDIS_REPLY_STRING ? rec->str : NULL,
            };
            stop = sink(arg, &h) != 0;
        }
        if (records != NULL)
            freeReplyObject(records);
        records = NULL;
    }
out:
    free(margv);
    free(mlens);
    free(keys);
    free(of);
    if (records != NULL)
        freeReplyObject(records);
    freeReplyObject(r);
    return rc;
}

/* ---------------------------------------------------------------- listing */

/* What a key says of the lock it belongs to: its name, and its kind; 0 for a
 * key that is no sign of a holder or a waiter (a fence counter, a waiter's
 * place, the owner records, anything else). */
static int key_names_lock(const char *prefix, const char *key, size_t len, char *name, size_t n,
                          enum dlock__kind *kind)
{
    static const struct {
        const char *rest;
        enum dlock__kind kind;
    } signs[] = {
        {"", DLOCK__MUTEX},
        {":queue", DLOCK__MUTEX},
        {":rw", DLOCK__WRITE},
        {":rw:holders", DLOCK__WRITE},
        {":rw:queue", DLOCK__WRITE},
        {":sem:holders", DLOCK__SEMAPHORE},
        {":sem:queue", DLOCK__SEMAPHORE},
    };
    const char *rest;
    if (!dlock__redis_key_lock(prefix, key, len, name, n, &rest))
        return 0;
    size_t rlen = len - (size_t) (rest - key);
    for (size_t i = 0; i < sizeof signs / sizeof signs[0]; i++) {
        if (strlen(signs[i].rest) == rlen && memcmp(rest, signs[i].rest, rlen) == 0) {
            *kind = signs[i].kind;
            return 1;
        }
    }
    return 0;
}

typedef struct found {
    char *name;
    enum dlock__kind kind;
} found;

static int by_name_kind(const void *pa, const void *pb)
{
    const found *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c != 0 ? c : (int) a->kind - (int) b->kind;
}

/* SCANs keys matching pattern, adding the locks named with prefix to *all. */
static int scan(rbackend *b, dlock__rconn *c, const char *pattern, const char *prefix, found **all,
                size_t *n, size_t *cap, int64_t deadline)
{
    char cursor[32] = "0";

    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
        size_t lens[] = {4, strlen(cursor), 5, strlen(pattern), 5, strlen(SCAN_COUNT)};
        dlock__rcmd cmd = {6, argv, lens};
        redisReply *r = NULL;
        int64_t step = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
        int rc = dlock__rconn_call(c, 1, &cmd, step < deadline ? step : deadline, &r);
        if (rc != DLOCK_OK)
            return rc;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof cursor ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            rc = dlock__redis_bad_reply(b, "SCAN", r);
            freeReplyObject(r);
            return rc;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const redisReply *k = r->element[1]->element[i];
            char name[DLOCK_NAME_MAX + 1];
            enum dlock__kind kind;
            if (k->type != REDIS_REPLY_STRING ||
                !key_names_lock(b->prefix, k->str, k->len, name, sizeof name, &kind) ||
                strncmp(name, prefix, strlen(prefix)) != 0)
                continue;
            if (*n == *cap) {
                size_t more = *cap != 0 ? *cap * 2 : 64;
                found *grown = realloc(*all, more * sizeof *grown);
                if (grown == NULL) {
                    freeReplyObject(r);
                    return dlock__fail(DLOCK_ENOMEM, "out of memory");
                }
                *all = grown;
                *cap = more;
            }
            if (((*all)[*n].name = strdup(name)) == NULL) {
                freeReplyObject(r);
                return dlock__fail(DLOCK_ENOMEM, "out of memory");
            }
            (*all)[(*n)++].kind = kind;
        }
        freeReplyObject(r);
        if (strcmp(cursor, "0") != 0 && dlock__now_us() >= deadline)
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: listing locks took too long", b->label);
    } while (strcmp(cursor, "0") != 0);
    return DLOCK_OK;
}

/* Whether the lock a key named has a holder or a queued waiter now: the
 * keys of shared holders and queues outlive their members until a script
 * touches the lock again, so each lock found is asked (status.lua, which
 * drops lapsed holders first). */
static int still_there(rbackend *b, const found *f, int64_t deadline, int *live)
{
    dlock__lock_spec spec = {.kind = f->kind};
    dlock__store_lock *sl = NULL;
    dlock_status st;
    dlock__saved_error saved;

    *live = 0;
    dlock__save_error(&saved);
    int rc = b->base.backend->lock_new(&b->base, f->name, &spec, &sl);
    dlock__restore_error(&saved);
    if (rc != DLOCK_OK)
        return DLOCK_OK; /* not a name of ours after all */
    int64_t step = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
    rc = dlock__redis_query(&b->base, sl, &st, step < deadline ? step : deadline);
    b->base.backend->lock_free(&b->base, sl);
    *live = rc == DLOCK_OK && (st.held || st.waiters > 0);
    return rc;
}

int dlock__redis_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                      int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    size_t n = 0, cap = 0;
    found *all = NULL;
    char *pattern = dlock__redis_list_pattern(b->prefix, prefix);
    int rc = DLOCK_OK;

    if (pattern == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    if (b->cluster == NULL) {
        rc = dlock__redis_note_replica(b, b->pool[0], deadline);
        if (rc == DLOCK_OK)
            rc = scan(b, b->pool[0], pattern, prefix, &all, &n, &cap, deadline);
    } else {
        /* every master once: each holds the keys of its slots */
        dlock__rconn *masters[64];
        size_t nm = dlock__rcluster_masters(b->cluster, deadline, masters, 64);
        rc = dlock__rcluster_check(b->cluster); /* a plain Redis */
        if (rc == DLOCK_OK && nm == 0)
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: no node answered CLUSTER SLOTS", b->label);
        for (size_t i = 0; i < nm && rc == DLOCK_OK; i++)
            rc = scan(b, masters[i], pattern, prefix, &all, &n, &cap, deadline);
    }
    if (rc != DLOCK_OK)
        goto out;
    /* A lock has several keys, and SCAN may return a key twice. */
    if (n > 1)
        qsort(all, n, sizeof *all, by_name_kind);
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        if (i > 0 && by_name_kind(&all[i - 1], &all[i]) == 0)
            continue;
        int live = 0;
        rc = still_there(b, &all[i], deadline, &live);
        if (rc == DLOCK_OK && live && sink(arg, all[i].name, all[i].kind) != 0)
            break;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(all[i].name);
    free(all);
    free(pattern);
    return rc;
}
