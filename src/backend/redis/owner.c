/* SPDX-License-Identifier: MIT */
/* owner.c - the client's owner record: who a client is, for the holders'
 * listing (holders.c).
 *
 * A lock's keys hold owner tokens only (the scripts compare them), so what
 * a client is (client_cfg.owner_info: host, pid, start, label) is kept
 * once per client, at P:owner:<client id>, and found from a holder's token,
 * which starts with that id. The record goes with the client's first
 * attempt, in the same write (no round trip of its own), and again with an
 * attempt when less than a day (or the attempt's lease, if longer) is left
 * of it: it outlives every lease the client gave. A client that closes
 * deletes it, unless it left a hold in the store (dlock_lock_detach: `dlock
 * lock`), which the record goes on naming; one of a process that died
 * lives two days. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include <stdlib.h>
#include <string.h>

#define RECORD_TTL_MS   (48LL * 3600 * 1000) /* an owner record lives two days */
#define RECORD_RENEW_MS (24LL * 3600 * 1000) /* written again when a day is left */
#define RECORD_RETRY_US (60LL * 1000 * 1000) /* after a refusal (ACL, OOM), tried again */
#define CLIENT_ID_LEN   16
#define FORGET_MS       250 /* the bound of deleting the record at close */

/* ---------------------------------------------------------------- the record */

int dlock__redis_owner_due(rbackend *b, int64_t lease_ms, dlock__owner_write *w)
{
    int64_t now = dlock__now_us();
    int64_t keep_ms = lease_ms > RECORD_RENEW_MS ? lease_ms : RECORD_RENEW_MS;

    if (atomic_load(&b->owner_until_us) - now > keep_ms * 1000 ||
        atomic_load(&b->owner_retry_us) > now || atomic_exchange(&b->owner_writing, 1))
        return 0; /* written, refused a minute ago, or another thread is at it */
    int64_t ttl_ms = keep_ms + RECORD_TTL_MS - RECORD_RENEW_MS;
    w->argv[0] = "SET";
    w->lens[0] = 3;
    w->argv[1] = b->owner_key;
    w->lens[1] = strlen(b->owner_key);
    w->argv[2] = b->cfg.owner_info;
    w->lens[2] = strlen(b->cfg.owner_info);
    w->argv[3] = "PX";
    w->lens[3] = 2;
    w->argv[4] = w->ttl;
    w->lens[4] = NUM(w->ttl, ttl_ms);
    w->cmd = (dlock__rcmd){5, w->argv, w->lens};
    /* counted from before it is sent: the record ends no later than this */
    w->until_us = now + ttl_ms * 1000;
    return 1;
}

void dlock__redis_owner_sent(rbackend *b, dlock__owner_write *w, redisReply *reply)
{
    if (reply != NULL && reply->type == REDIS_REPLY_STATUS) {
        atomic_store(&b->owner_until_us, w->until_us);
    } else if (reply != NULL) {
        char why[512];
        DLOCK__LOG(b->base.host.log, DLOCK_LOG_DEBUG, "%s: owner record not written: %s", b->label,
                   dlock__reply_reason(reply, "unexpected reply", why, sizeof why));
        atomic_store(&b->owner_retry_us, dlock__now_us() + RECORD_RETRY_US);
    }
    if (reply != NULL)
        freeReplyObject(reply);
    atomic_store(&b->owner_writing, 0);
}

void dlock__redis_owner_forget(rbackend *b, int64_t deadline)
{
    if (atomic_load(&b->owner_until_us) == 0 || atomic_load(&b->owner_kept))
        return;
    const char *argv[] = {"DEL", b->owner_key};
    size_t lens[] = {3, strlen(b->owner_key)};
    dlock__rcmd cmd = {2, argv, lens};
    redisReply *r = NULL;
    dlock__saved_error saved;
    int64_t bound_ms =
        b->cfg.command_timeout_ms < FORGET_MS ? b->cfg.command_timeout_ms : FORGET_MS;
    int64_t until = dlock__now_us() + bound_ms * 1000;

    /* best effort, briefly: a record left behind ends by itself */
    dlock__save_error(&saved);
    if (dlock__redis_call(dlock__redis_owner_conn(b, b->owner_key), &cmd,
                          until < deadline ? until : deadline, &r) == DLOCK_OK)
        freeReplyObject(r);
    dlock__restore_error(&saved);
}

dlock__rconn *dlock__redis_owner_conn(rbackend *b, const char *key)
{
    if (b->cluster == NULL)
        return b->pool[0];
    int64_t soon = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
    return dlock__rcluster_conn(b->cluster, dlock__redis_slot(key, strlen(key)), soon);
}

int dlock__redis_owner_record_key(const rbackend *b, const char *token, size_t len, char *key,
                                  size_t n)
{
    if (len < CLIENT_ID_LEN)
        return 0;
    for (size_t i = 0; i < CLIENT_ID_LEN; i++) {
        char ch = token[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return 0;
    }
    snprintf(key, n, "%s:owner:%.*s", b->prefix, CLIENT_ID_LEN, token);
    return 1;
}
