/* SPDX-License-Identifier: MIT */
/* codec.h - etcd v3 JSON gateway messages: request bodies and typed replies.
 *
 * No I/O here: encoders turn typed requests into JSON text, decoders turn
 * reply bytes into typed results, so each decoder can be fuzzed on its own.
 *
 * What the gateway sends (etcd 3.4, proto3 JSON): bytes fields are base64,
 * int64 fields decimal strings, enums names, and every zero value is omitted
 * (an empty value, succeeded=false, count 0, watch_id 0, a PUT event's type).
 * Decoders therefore default every field to zero and accept an int64 as a
 * string or a JSON number, but validate what is present: a revision, lease
 * id or count that is negative or not a decimal int64 is DLOCK_EPROTO, never
 * a value. Failures record their detail with dlock__fail(). */
#ifndef DLOCK_ETCD_CODEC_H
#define DLOCK_ETCD_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- limits */

/* A reply may not nest deeper than this (our deepest: txn > responses >
 * response_range > kvs > kv is 6). */
#define DLOCK__ETCD_MAX_DEPTH 16
/* Keys and values we send; etcd's own request limit is 1.5 MiB. */
#define DLOCK__ETCD_MAX_KEY 4096
/* Operations or compares in one txn (etcd's default --max-txn-ops). */
#define DLOCK__ETCD_MAX_TXN_OPS 128
/* Elements of any one array in a reply (kvs, events, responses, keys). */
#define DLOCK__ETCD_MAX_ITEMS (1 << 20)

/* ---------------------------------------------------------------- requests */

/* Enum values are etcd's own (rpc.proto), sent by name. */
enum { DLOCK__ETCD_SORT_NONE = 0, DLOCK__ETCD_SORT_ASCEND = 1, DLOCK__ETCD_SORT_DESCEND = 2 };
enum {
    DLOCK__ETCD_SORT_BY_KEY = 0,
    DLOCK__ETCD_SORT_BY_VERSION = 1,
    DLOCK__ETCD_SORT_BY_CREATE = 2,
    DLOCK__ETCD_SORT_BY_MOD = 3,
    DLOCK__ETCD_SORT_BY_VALUE = 4
};

/* Keys and range ends are C strings (lock names are text); values are
 * byte strings. range_end NULL means the key alone, "" stands for etcd's
 * "\0": every key >= key. */
typedef struct dlock__etcd_range {
    const char *key;
    const char *range_end;
    int64_t limit; /* 0: all */
    int sort_order;
    int sort_target;
    int64_t revision;            /* 0: the latest */
    int64_t min_create_revision; /* 0: no bound */
    int64_t max_create_revision; /* 0: no bound */
    int keys_only, count_only;
} dlock__etcd_range;

typedef struct dlock__etcd_put {
    const char *key;
    const char *value; /* may be NULL when value_len is 0 */
    size_t value_len;
    int64_t lease; /* 0: none */
} dlock__etcd_put;

typedef struct dlock__etcd_delete {
    const char *key;
    const char *range_end;
} dlock__etcd_delete;

enum { DLOCK__ETCD_OP_RANGE = 1, DLOCK__ETCD_OP_PUT = 2, DLOCK__ETCD_OP_DELETE = 3 };

typedef struct dlock__etcd_op {
    int type; /* DLOCK__ETCD_OP_* */
    union {
        dlock__etcd_range range;
        dlock__etcd_put put;
        dlock__etcd_delete del;
    };
} dlock__etcd_op;

enum {
    DLOCK__ETCD_CMP_EQUAL = 0,
    DLOCK__ETCD_CMP_GREATER = 1,
    DLOCK__ETCD_CMP_LESS = 2,
    DLOCK__ETCD_CMP_NOT_EQUAL = 3
};
enum {
    DLOCK__ETCD_TARGET_VERSION = 0,
    DLOCK__ETCD_TARGET_CREATE = 1,
    DLOCK__ETCD_TARGET_MOD = 2,
    DLOCK__ETCD_TARGET_VALUE = 3,
    DLOCK__ETCD_TARGET_LEASE = 4
};

typedef struct dlock__etcd_compare {
    const char *key;
    int target;        /* DLOCK__ETCD_TARGET_* */
    int result;        /* DLOCK__ETCD_CMP_* */
    int64_t number;    /* version, create or mod revision, lease */
    const char *value; /* TARGET_VALUE */
    size_t value_len;
} dlock__etcd_compare;

typedef struct dlock__etcd_txn {
    const dlock__etcd_compare *compare;
    size_t n_compare;
    const dlock__etcd_op *success;
    size_t n_success;
    const dlock__etcd_op *failure;
    size_t n_failure;
} dlock__etcd_txn;

typedef struct dlock__etcd_watch_create {
    const char *key;
    const char *range_end;
    int64_t start_revision; /* 0: from now */
    int64_t watch_id;       /* > 0: chosen by the client (etcd 3.4+) */
    int no_put;             /* filter PUT events out: deletes only */
    int prev_kv;
} dlock__etcd_watch_create;

/* Each encoder returns a malloc'd NUL-terminated JSON text in *out (length
 * in *len) and DLOCK_OK, or DLOCK_EINVAL (a missing or too long key, too
 * many ops) / DLOCK_ENOMEM. */
int dlock__etcd_encode_range(const dlock__etcd_range *r, char **out, size_t *len);
int dlock__etcd_encode_put(const dlock__etcd_put *p, char **out, size_t *len);
int dlock__etcd_encode_delete(const dlock__etcd_delete *d, char **out, size_t *len);
int dlock__etcd_encode_txn(const dlock__etcd_txn *t, char **out, size_t *len);
/* {"TTL":ttl[,"ID":id]}; id 0 lets the server choose. */
int dlock__etcd_encode_lease_grant(int64_t ttl_s, int64_t id, char **out, size_t *len);
/* {"ID":id} (keepalive, revoke), with "keys":true when keys (timetolive). */
int dlock__etcd_encode_lease_id(int64_t id, int keys, char **out, size_t *len);
int dlock__etcd_encode_compaction(int64_t revision, char **out, size_t *len);
int dlock__etcd_encode_authenticate(const char *user, const char *password, char **out,
                                    size_t *len);
/* One line of the watch request stream, newline included. */
int dlock__etcd_encode_watch_create(const dlock__etcd_watch_create *w, char **out, size_t *len);
int dlock__etcd_encode_watch_cancel(int64_t watch_id, char **out, size_t *len);

/* ---------------------------------------------------------------- replies */

/* A key-value as etcd reports it. key and value are decoded bytes, always
 * NUL-terminated (value "" when omitted). A DELETE event's kv carries only
 * key and mod_revision. */
typedef struct dlock__etcd_kv {
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} dlock__etcd_kv;

typedef struct dlock__etcd_range_result {
    int64_t revision;  /* header.revision: the store's revision when read */
    int64_t raft_term; /* header.raft_term of a whole reply (0: absent) */
    dlock__etcd_kv *kvs;
    size_t n_kvs;
    int64_t count; /* keys in the range (ignores limit and create-revision filters) */
    int more;
} dlock__etcd_range_result;

typedef struct dlock__etcd_op_result {
    int type;                       /* DLOCK__ETCD_OP_* */
    int64_t revision;               /* its header.revision */
    dlock__etcd_range_result range; /* OP_RANGE */
    int64_t deleted;                /* OP_DELETE */
} dlock__etcd_op_result;

typedef struct dlock__etcd_txn_result {
    int64_t revision;
    int64_t raft_term; /* 0: absent */
    int succeeded;
    dlock__etcd_op_result *responses;
    size_t n_responses;
} dlock__etcd_txn_result;

typedef struct dlock__etcd_lease {
    int64_t id;
    int64_t ttl; /* seconds granted, or left (keepalive) */
    int64_t revision;
    int64_t raft_term; /* the answering member's term (0: absent) */
} dlock__etcd_lease;

typedef struct dlock__etcd_lease_ttl {
    int64_t id;
    int64_t ttl; /* seconds left; -1: the lease does not exist */
    int64_t granted_ttl;
    int64_t raft_term; /* the answering member's term (0: absent) */
    char **keys;       /* attached keys when asked for, NUL-terminated */
    size_t n_keys;
} dlock__etcd_lease_ttl;

/* A gRPC status carried by a gateway error body: unary replies send
 * {"error":"..","message":"..","code":N} with a non-2xx status, streams
 * {"error":{"grpc_code":N,"message":".."}}. */
typedef struct dlock__etcd_status {
    int code; /* gRPC code, 0 = OK */
    char message[256];
} dlock__etcd_status;

enum { DLOCK__ETCD_EV_PUT = 0, DLOCK__ETCD_EV_DELETE = 1 };

typedef struct dlock__etcd_event {
    int type; /* DLOCK__ETCD_EV_* */
    dlock__etcd_kv kv;
} dlock__etcd_event;

/* One line of the watch stream. */
typedef struct dlock__etcd_watch_response {
    int64_t revision; /* header.revision */
    int64_t watch_id; /* -1 when a create failed */
    int created, canceled;
    int64_t compact_revision;
    char *cancel_reason; /* NULL when none */
    dlock__etcd_event *events;
    size_t n_events;
    dlock__etcd_status error; /* code != 0: the line was a stream error */
} dlock__etcd_watch_response;

/* Decoders: body/n is the whole reply (need not be NUL-terminated); trailing
 * whitespace is allowed, anything else after the object is DLOCK_EPROTO.
 * On failure nothing is left allocated in *out. */
int dlock__etcd_decode_header(const char *body, size_t n, int64_t *revision);
int dlock__etcd_decode_range(const char *body, size_t n, dlock__etcd_range_result *out);
int dlock__etcd_decode_put(const char *body, size_t n, int64_t *revision);
int dlock__etcd_decode_delete(const char *body, size_t n, int64_t *revision, int64_t *deleted);
int dlock__etcd_decode_txn(const char *body, size_t n, dlock__etcd_txn_result *out);
int dlock__etcd_decode_lease_grant(const char *body, size_t n, dlock__etcd_lease *out);
/* A keepalive reply ({"result":{..}} line). A lease that no longer exists
 * comes back with no TTL: out->ttl is then 0. A stream error line fills
 * *status (code != 0) and returns DLOCK_OK. */
int dlock__etcd_decode_keepalive(const char *body, size_t n, dlock__etcd_lease *out,
                                 dlock__etcd_status *status);
int dlock__etcd_decode_lease_ttl(const char *body, size_t n, dlock__etcd_lease_ttl *out);
int dlock__etcd_decode_token(const char *body, size_t n, char **token);
int dlock__etcd_decode_watch(const char *body, size_t n, dlock__etcd_watch_response *out);
/* An error body, either form. DLOCK_EPROTO if body is neither. */
int dlock__etcd_decode_status(const char *body, size_t n, dlock__etcd_status *out);

void dlock__etcd_range_result_free(dlock__etcd_range_result *r);
void dlock__etcd_txn_result_free(dlock__etcd_txn_result *r);
void dlock__etcd_lease_ttl_free(dlock__etcd_lease_ttl *t);
void dlock__etcd_watch_response_free(dlock__etcd_watch_response *w);

/* ---------------------------------------------------------------- status */

/* What a caller does about a gRPC status. */
enum {
    DLOCK__ETCD_ST_OTHER = 0,
    DLOCK__ETCD_ST_LEASE_NOT_FOUND, /* "requested lease not found" */
    DLOCK__ETCD_ST_REAUTH,          /* token expired or auth store moved: authenticate, retry */
    DLOCK__ETCD_ST_AUTH_FAILED,     /* wrong user or password */
    DLOCK__ETCD_ST_AUTH_REQUIRED,   /* auth is enabled and no user was given */
    DLOCK__ETCD_ST_AUTH_NOT_ENABLED /* we authenticated against a server without auth */
};
int dlock__etcd_status_kind(const dlock__etcd_status *st);

/* Records the detail of a failed request ("<label> <path>: <why>") and
 * returns its dlock code: DLOCK_ELOST for a lease not found, DLOCK_EUNREACHABLE
 * for an unavailable or timed-out server (no leader, leader changed,
 * deadline exceeded), DLOCK_EINVAL for an invalid argument, DLOCK_ESERVER for
 * the rest (auth failures and permission denied named as such). */
int dlock__etcd_fail_status(const dlock__etcd_status *st, int http_status, const char *label,
                            const char *path);

/* ---------------------------------------------------------------- helpers */

/* Standard padded base64. encode: out holds 4*((n+2)/3)+1 bytes; returns the
 * length. decode: strict (alphabet, length a multiple of 4, '=' only as
 * padding); out holds 3*(n/4)+1 bytes, NUL-terminated; returns the length or
 * -1. */
size_t dlock__etcd_b64_encode(const void *in, size_t n, char *out);
long dlock__etcd_b64_decode(const char *in, size_t n, char *out);

/* A decimal int64, strictly: optional '-', digits, no overflow. 0 or -1. */
int dlock__etcd_parse_int64(const char *s, size_t n, int64_t *out);

/* The end of the range of keys starting with prefix: prefix with its last
 * byte below 0xff incremented and the rest dropped ("lock/" -> "lock0"), or
 * "" (all keys from prefix on) when every byte is 0xff. malloc'd; NULL when
 * out of memory. */
char *dlock__etcd_prefix_end(const char *prefix);

#endif
