/* SPDX-License-Identifier: MIT */
/* codec.c - etcd v3 JSON gateway messages (see codec.h). No I/O.
 *
 * Requests are built as json-c trees and printed; replies are parsed with a
 * depth-bounded tokener and read field by field, each field defaulting to
 * its zero value when omitted (the gateway omits every zero value). */
#include "codec.h"

#include "../../base/error.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ helpers */

size_t dlock__etcd_b64_encode(const void *in, size_t n, char *out)
{
    /* EVP_EncodeBlock takes an int; a key or value that large is refused by
     * the encoders before it gets here. */
    return (size_t) EVP_EncodeBlock((unsigned char *) out, (const unsigned char *) in, (int) n);
}

static int b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

long dlock__etcd_b64_decode(const char *in, size_t n, char *out)
{
    size_t pad = 0;

    /* EVP_DecodeBlock alone would skip surrounding whitespace and count
     * padding as zero bytes, so the shape is checked here first. */
    if (n % 4 != 0 || n > (size_t) INT_MAX)
        return -1;
    if (n > 0 && in[n - 1] == '=')
        pad = (n > 1 && in[n - 2] == '=') ? 2 : 1;
    for (size_t i = 0; i < n - pad; i++) {
        if (!b64_char((unsigned char) in[i]))
            return -1;
    }
    int got = EVP_DecodeBlock((unsigned char *) out, (const unsigned char *) in, (int) n);
    if (got < 0 || (size_t) got < pad)
        return -1;
    out[got - (int) pad] = '\0';
    return (long) got - (long) pad;
}

int dlock__etcd_parse_int64(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0, limit = (uint64_t) INT64_MAX;

    if (n > 0 && s[0] == '-') {
        neg = 1;
        limit += 1;
        i = 1;
    }
    if (i == n || n - i > 19)
        return -1;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t) (s[i] - '0');
        if (v > (limit - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg)
        *out = v == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) v;
    else
        *out = (int64_t) v;
    return 0;
}

char *dlock__etcd_prefix_end(const char *prefix)
{
    size_t n = strlen(prefix);
    char *end = malloc(n + 1);

    if (end == NULL)
        return NULL;
    memcpy(end, prefix, n + 1);
    while (n > 0) {
        unsigned char c = (unsigned char) end[n - 1];
        if (c < 0xff) {
            end[n - 1] = (char) (c + 1);
            end[n] = '\0';
            return end;
        }
        n--;
    }
    end[0] = '\0';
    return end;
}

/* ================================================================ encoding */

static int add(json_object *o, const char *name, json_object *v)
{
    if (v == NULL)
        return -1;
    if (json_object_object_add(o, name, v) != 0) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

static int add_i64(json_object *o, const char *name, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return add(o, name, json_object_new_string(buf));
}

static int add_bytes(json_object *o, const char *name, const char *p, size_t n)
{
    char small[256], *buf = small;
    size_t need = 4 * ((n + 2) / 3) + 1;
    int rc;

    if (need > sizeof small) {
        buf = malloc(need);
        if (buf == NULL)
            return -1;
    }
    size_t len = dlock__etcd_b64_encode(p != NULL ? p : "", n, buf);
    rc = add(o, name, json_object_new_string_len(buf, (int) len));
    if (buf != small)
        free(buf);
    return rc;
}

/* A key's validity is checked once, here, for every encoder. */
static int check_key(const char *key, const char *what)
{
    if (key == NULL || key[0] == '\0')
        return dlock__fail(DLOCK_EINVAL, "etcd: %s: empty key", what);
    if (strlen(key) > DLOCK__ETCD_MAX_KEY)
        return dlock__fail(DLOCK_EINVAL, "etcd: %s: key longer than %d bytes", what,
                           DLOCK__ETCD_MAX_KEY);
    return DLOCK_OK;
}

static int add_key(json_object *o, const char *name, const char *key)
{
    return add_bytes(o, name, key, strlen(key));
}

/* range_end "" stands for etcd's "\0" (every key from key on). */
static int add_range_end(json_object *o, const char *end)
{
    if (end == NULL)
        return 0;
    if (end[0] == '\0')
        return add_bytes(o, "range_end", "", 1);
    if (strlen(end) > DLOCK__ETCD_MAX_KEY)
        return -1;
    return add_key(o, "range_end", end);
}

static const char *const sort_orders[] = {"NONE", "ASCEND", "DESCEND"};
static const char *const sort_targets[] = {"KEY", "VERSION", "CREATE", "MOD", "VALUE"};
static const char *const cmp_results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
static const char *const cmp_targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};

static int range_object(const dlock__etcd_range *r, json_object **out)
{
    json_object *o;
    int rc = check_key(r->key, "range");

    if (rc != DLOCK_OK)
        return rc;
    if (r->sort_order < 0 || r->sort_order > 2 || r->sort_target < 0 || r->sort_target > 4 ||
        r->limit < 0 || r->revision < 0 || r->min_create_revision < 0 || r->max_create_revision < 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: range: invalid sort, limit or revision");
    o = json_object_new_object();
    if (o == NULL || add_key(o, "key", r->key) != 0 || add_range_end(o, r->range_end) != 0 ||
        (r->limit > 0 && add_i64(o, "limit", r->limit) != 0) ||
        (r->sort_order != 0 &&
         add(o, "sort_order", json_object_new_string(sort_orders[r->sort_order])) != 0) ||
        (r->sort_target != 0 &&
         add(o, "sort_target", json_object_new_string(sort_targets[r->sort_target])) != 0) ||
        (r->revision > 0 && add_i64(o, "revision", r->revision) != 0) ||
        (r->min_create_revision > 0 &&
         add_i64(o, "min_create_revision", r->min_create_revision) != 0) ||
        (r->max_create_revision > 0 &&
         add_i64(o, "max_create_revision", r->max_create_revision) != 0) ||
        (r->keys_only && add(o, "keys_only", json_object_new_boolean(1)) != 0) ||
        (r->count_only && add(o, "count_only", json_object_new_boolean(1)) != 0)) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a range");
    }
    *out = o;
    return DLOCK_OK;
}

static int put_object(const dlock__etcd_put *p, json_object **out)
{
    json_object *o;
    int rc = check_key(p->key, "put");

    if (rc != DLOCK_OK)
        return rc;
    if (p->value_len > INT_MAX / 2 || p->lease < 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: put: value too large or negative lease");
    o = json_object_new_object();
    if (o == NULL || add_key(o, "key", p->key) != 0 ||
        (p->value_len > 0 && add_bytes(o, "value", p->value, p->value_len) != 0) ||
        (p->lease != 0 && add_i64(o, "lease", p->lease) != 0)) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a put");
    }
    *out = o;
    return DLOCK_OK;
}

static int delete_object(const dlock__etcd_delete *d, json_object **out)
{
    json_object *o;
    int rc = check_key(d->key, "delete");

    if (rc != DLOCK_OK)
        return rc;
    o = json_object_new_object();
    if (o == NULL || add_key(o, "key", d->key) != 0 || add_range_end(o, d->range_end) != 0) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a delete");
    }
    *out = o;
    return DLOCK_OK;
}

/* Prints o (and drops it) into a malloc'd text, with a newline when the
 * text is one line of a request stream. */
static int finish(json_object *o, int newline, char **out, size_t *len)
{
    size_t n = 0;
    const char *text = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    char *copy = text != NULL ? malloc(n + 2) : NULL;
    int rc = DLOCK_OK;

    if (copy == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory printing a request");
    } else {
        memcpy(copy, text, n);
        if (newline)
            copy[n++] = '\n';
        copy[n] = '\0';
        *out = copy;
        *len = n;
    }
    json_object_put(o);
    return rc;
}

int dlock__etcd_encode_range(const dlock__etcd_range *r, char **out, size_t *len)
{
    json_object *o = NULL;
    int rc = range_object(r, &o);
    return rc != DLOCK_OK ? rc : finish(o, 0, out, len);
}

int dlock__etcd_encode_put(const dlock__etcd_put *p, char **out, size_t *len)
{
    json_object *o = NULL;
    int rc = put_object(p, &o);
    return rc != DLOCK_OK ? rc : finish(o, 0, out, len);
}

int dlock__etcd_encode_delete(const dlock__etcd_delete *d, char **out, size_t *len)
{
    json_object *o = NULL;
    int rc = delete_object(d, &o);
    return rc != DLOCK_OK ? rc : finish(o, 0, out, len);
}

static int compare_object(const dlock__etcd_compare *c, json_object **out)
{
    static const char *const fields[] = {"version", "create_revision", "mod_revision", NULL,
                                         "lease"};
    json_object *o;
    int rc = check_key(c->key, "txn compare");

    if (rc != DLOCK_OK)
        return rc;
    if (c->target < 0 || c->target > 4 || c->result < 0 || c->result > 3 ||
        c->value_len > INT_MAX / 2)
        return dlock__fail(DLOCK_EINVAL, "etcd: txn compare: invalid target or result");
    o = json_object_new_object();
    if (o == NULL || add_key(o, "key", c->key) != 0 ||
        add(o, "target", json_object_new_string(cmp_targets[c->target])) != 0 ||
        add(o, "result", json_object_new_string(cmp_results[c->result])) != 0 ||
        (c->target == DLOCK__ETCD_TARGET_VALUE ? add_bytes(o, "value", c->value, c->value_len)
                                               : add_i64(o, fields[c->target], c->number)) != 0) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a compare");
    }
    *out = o;
    return DLOCK_OK;
}

static int op_object(const dlock__etcd_op *op, json_object **out)
{
    json_object *inner = NULL, *o;
    const char *name;
    int rc;

    switch (op->type) {
    case DLOCK__ETCD_OP_RANGE:
        name = "request_range";
        rc = range_object(&op->range, &inner);
        break;
    case DLOCK__ETCD_OP_PUT:
        name = "request_put";
        rc = put_object(&op->put, &inner);
        break;
    case DLOCK__ETCD_OP_DELETE:
        name = "request_delete_range";
        rc = delete_object(&op->del, &inner);
        break;
    default:
        return dlock__fail(DLOCK_EINVAL, "etcd: txn: unknown operation type %d", op->type);
    }
    if (rc != DLOCK_OK)
        return rc;
    o = json_object_new_object();
    if (o == NULL || add(o, name, inner) != 0) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a txn");
    }
    *out = o;
    return DLOCK_OK;
}

static int add_ops(json_object *txn, const char *name, const dlock__etcd_op *ops, size_t n)
{
    json_object *arr, *item = NULL;
    int rc;

    if (n == 0)
        return DLOCK_OK;
    arr = json_object_new_array_ext((int) n);
    if (arr == NULL || add(txn, name, arr) != 0)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a txn");
    for (size_t i = 0; i < n; i++) {
        rc = op_object(&ops[i], &item);
        if (rc != DLOCK_OK)
            return rc;
        if (json_object_array_add(arr, item) != 0) {
            json_object_put(item);
            return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a txn");
        }
    }
    return DLOCK_OK;
}

int dlock__etcd_encode_txn(const dlock__etcd_txn *t, char **out, size_t *len)
{
    json_object *o = NULL, *arr, *item = NULL;
    int rc = DLOCK_OK;

    if (t->n_compare > DLOCK__ETCD_MAX_TXN_OPS || t->n_success > DLOCK__ETCD_MAX_TXN_OPS ||
        t->n_failure > DLOCK__ETCD_MAX_TXN_OPS)
        return dlock__fail(DLOCK_EINVAL, "etcd: txn: more than %d compares or operations",
                           DLOCK__ETCD_MAX_TXN_OPS);
    o = json_object_new_object();
    if (o == NULL)
        goto nomem;
    if (t->n_compare > 0) {
        arr = json_object_new_array_ext((int) t->n_compare);
        if (arr == NULL || add(o, "compare", arr) != 0)
            goto nomem;
        for (size_t i = 0; i < t->n_compare; i++) {
            rc = compare_object(&t->compare[i], &item);
            if (rc != DLOCK_OK)
                goto fail;
            if (json_object_array_add(arr, item) != 0) {
                json_object_put(item);
                goto nomem;
            }
        }
    }
    rc = add_ops(o, "success", t->success, t->n_success);
    if (rc == DLOCK_OK)
        rc = add_ops(o, "failure", t->failure, t->n_failure);
    if (rc != DLOCK_OK)
        goto fail;
    return finish(o, 0, out, len);
nomem:
    rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a txn");
fail:
    json_object_put(o);
    return rc;
}

int dlock__etcd_encode_lease_grant(int64_t ttl_s, int64_t id, char **out, size_t *len)
{
    json_object *o;

    if (ttl_s <= 0 || id < 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: lease grant: TTL must be > 0 s");
    o = json_object_new_object();
    if (o == NULL || add_i64(o, "TTL", ttl_s) != 0 || (id > 0 && add_i64(o, "ID", id) != 0)) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a lease grant");
    }
    return finish(o, 0, out, len);
}

int dlock__etcd_encode_lease_id(int64_t id, int keys, char **out, size_t *len)
{
    json_object *o;

    if (id <= 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: lease id %" PRId64 " is not a lease", id);
    o = json_object_new_object();
    if (o == NULL || add_i64(o, "ID", id) != 0 ||
        (keys && add(o, "keys", json_object_new_boolean(1)) != 0)) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a lease request");
    }
    return finish(o, 0, out, len);
}

int dlock__etcd_encode_compaction(int64_t revision, char **out, size_t *len)
{
    json_object *o;

    if (revision <= 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: compaction: revision must be > 0");
    o = json_object_new_object();
    if (o == NULL || add_i64(o, "revision", revision) != 0 ||
        add(o, "physical", json_object_new_boolean(1)) != 0) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a compaction");
    }
    return finish(o, 0, out, len);
}

int dlock__etcd_encode_authenticate(const char *user, const char *password, char **out, size_t *len)
{
    json_object *o = json_object_new_object();

    if (o == NULL || add(o, "name", json_object_new_string(user)) != 0 ||
        add(o, "password", json_object_new_string(password != NULL ? password : "")) != 0) {
        json_object_put(o);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building an authentication");
    }
    return finish(o, 0, out, len);
}

int dlock__etcd_encode_watch_create(const dlock__etcd_watch_create *w, char **out, size_t *len)
{
    json_object *o = NULL, *c = NULL, *filters;
    int rc = check_key(w->key, "watch");

    if (rc != DLOCK_OK)
        return rc;
    if (w->start_revision < 0 || w->watch_id < 0)
        return dlock__fail(DLOCK_EINVAL, "etcd: watch: negative revision or id");
    c = json_object_new_object();
    if (c == NULL || add_key(c, "key", w->key) != 0 || add_range_end(c, w->range_end) != 0 ||
        (w->start_revision > 0 && add_i64(c, "start_revision", w->start_revision) != 0) ||
        (w->watch_id > 0 && add_i64(c, "watch_id", w->watch_id) != 0) ||
        (w->prev_kv && add(c, "prev_kv", json_object_new_boolean(1)) != 0))
        goto nomem;
    if (w->no_put) {
        json_object *noput = json_object_new_string("NOPUT");
        filters = json_object_new_array();
        if (noput == NULL || filters == NULL || json_object_array_add(filters, noput) != 0) {
            json_object_put(noput);
            json_object_put(filters);
            goto nomem;
        }
        if (add(c, "filters", filters) != 0)
            goto nomem;
    }
    o = json_object_new_object();
    if (o == NULL)
        goto nomem;
    rc = add(o, "create_request", c);
    c = NULL; /* o owns it now, or add() dropped it */
    if (rc != 0)
        goto nomem;
    return finish(o, 1, out, len);
nomem:
    json_object_put(c);
    json_object_put(o);
    return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a watch");
}

int dlock__etcd_encode_watch_cancel(int64_t watch_id, char **out, size_t *len)
{
    json_object *o = NULL, *c = json_object_new_object();

    if (c == NULL || add_i64(c, "watch_id", watch_id) != 0)
        goto nomem;
    o = json_object_new_object();
    if (o == NULL)
        goto nomem;
    if (add(o, "cancel_request", c) != 0) {
        c = NULL; /* dropped by add() */
        goto nomem;
    }
    return finish(o, 1, out, len);
nomem:
    json_object_put(c);
    json_object_put(o);
    return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory building a watch cancel");
}

/* ================================================================ decoding */

static int bad(const char *fmt, const char *field)
{
    return dlock__fail(DLOCK_EPROTO, fmt, field);
}

/* Parses a whole reply into an object; only whitespace may follow it. */
static int parse(const char *body, size_t n, json_object **out)
{
    json_tokener *tok;
    json_object *o = NULL;
    int rc = DLOCK_OK;

    if (n > (size_t) INT_MAX)
        return dlock__fail(DLOCK_EPROTO, "etcd: reply of %zu bytes is too large", n);
    tok = json_tokener_new_ex(DLOCK__ETCD_MAX_DEPTH);
    if (tok == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory parsing a reply");
    o = json_tokener_parse_ex(tok, body, (int) n);
    if (o == NULL) {
        enum json_tokener_error e = json_tokener_get_error(tok);
        rc = dlock__fail(DLOCK_EPROTO, "etcd: reply is not JSON: %s",
                         e == json_tokener_continue ? "truncated" : json_tokener_error_desc(e));
        goto out;
    }
    for (size_t i = json_tokener_get_parse_end(tok); i < n; i++) {
        if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
            rc = dlock__fail(DLOCK_EPROTO, "etcd: reply has bytes after its JSON object");
            goto out;
        }
    }
    if (!json_object_is_type(o, json_type_object)) {
        rc = dlock__fail(DLOCK_EPROTO, "etcd: reply is not a JSON object");
        goto out;
    }
    *out = o;
    o = NULL;
out:
    json_object_put(o);
    json_tokener_free(tok);
    return rc;
}

static json_object *field(json_object *o, const char *name)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

/* An int64 field: a decimal string (proto3 JSON) or a JSON number; missing
 * is 0; below min is a protocol error. */
static int get_i64(json_object *o, const char *name, int64_t min, int64_t *out)
{
    json_object *v = field(o, name);
    const char *s;
    size_t n;

    *out = 0;
    if (v == NULL)
        return DLOCK_OK;
    if (json_object_is_type(v, json_type_string)) {
        s = json_object_get_string(v);
        n = (size_t) json_object_get_string_len(v);
    } else if (json_object_is_type(v, json_type_int)) {
        /* Printed back as json-c read it, so the strict parser decides. */
        s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        n = s != NULL ? strlen(s) : 0;
    } else {
        return bad("etcd: reply field \"%s\" is not a number", name);
    }
    if (s == NULL || dlock__etcd_parse_int64(s, n, out) != 0)
        return bad("etcd: reply field \"%s\" is not a decimal int64", name);
    if (*out < min)
        return dlock__fail(DLOCK_EPROTO, "etcd: reply field \"%s\" is %" PRId64 ", out of range",
                           name, *out);
    return DLOCK_OK;
}

/* A lease ID: present and > 0 (etcd never grants 0). */
static int get_id(json_object *o, const char *name, int64_t *out)
{
    int rc = get_i64(o, name, 1, out);
    if (rc == DLOCK_OK && *out == 0)
        rc = bad("etcd: reply has no lease \"%s\"", name);
    return rc;
}

static int get_bool(json_object *o, const char *name, int *out)
{
    json_object *v = field(o, name);

    *out = 0;
    if (v == NULL)
        return DLOCK_OK;
    if (!json_object_is_type(v, json_type_boolean))
        return bad("etcd: reply field \"%s\" is not a boolean", name);
    *out = json_object_get_boolean(v) ? 1 : 0;
    return DLOCK_OK;
}

/* A bytes field, base64-decoded into a malloc'd NUL-terminated buffer
 * ("" when missing). */
static int get_bytes(json_object *o, const char *name, char **out, size_t *len)
{
    json_object *v = field(o, name);
    const char *s = "";
    size_t n = 0;
    long got;

    *out = NULL;
    *len = 0;
    if (v != NULL) {
        if (!json_object_is_type(v, json_type_string))
            return bad("etcd: reply field \"%s\" is not a string", name);
        s = json_object_get_string(v);
        n = (size_t) json_object_get_string_len(v);
    }
    *out = malloc(3 * (n / 4) + 1);
    if (*out == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a reply");
    got = dlock__etcd_b64_decode(s, n, *out);
    if (got < 0) {
        free(*out);
        *out = NULL;
        return bad("etcd: reply field \"%s\" is not base64", name);
    }
    *len = (size_t) got;
    return DLOCK_OK;
}

/* An optional array; *n is 0 when missing. */
static int get_array(json_object *o, const char *name, json_object **arr, size_t *n)
{
    json_object *v = field(o, name);

    *arr = NULL;
    *n = 0;
    if (v == NULL)
        return DLOCK_OK;
    if (!json_object_is_type(v, json_type_array))
        return bad("etcd: reply field \"%s\" is not an array", name);
    *n = json_object_array_length(v);
    if (*n > DLOCK__ETCD_MAX_ITEMS)
        return bad("etcd: reply array \"%s\" is too long", name);
    *arr = v;
    return DLOCK_OK;
}

static int get_object(json_object *o, const char *name, int required, json_object **out)
{
    json_object *v = field(o, name);

    *out = v;
    if (v == NULL)
        return required ? bad("etcd: reply has no \"%s\"", name) : DLOCK_OK;
    if (!json_object_is_type(v, json_type_object))
        return bad("etcd: reply field \"%s\" is not an object", name);
    return DLOCK_OK;
}

/* header.revision of a reply, and header.raft_term when term is not NULL
 * (0 when absent). Top-level replies must carry a header: an object without
 * one is not an etcd reply. */
static int get_header(json_object *o, int required, int64_t *revision, int64_t *term)
{
    json_object *h;
    int rc = get_object(o, "header", required, &h);

    *revision = 0;
    if (term != NULL)
        *term = 0;
    if (rc != DLOCK_OK || h == NULL)
        return rc;
    rc = get_i64(h, "revision", 0, revision);
    if (rc == DLOCK_OK && term != NULL)
        rc = get_i64(h, "raft_term", 0, term);
    return rc;
}

static void kv_free(dlock__etcd_kv *kv)
{
    free(kv->key);
    free(kv->value);
    kv->key = kv->value = NULL;
}

static int get_kv(json_object *o, dlock__etcd_kv *kv)
{
    int rc;

    memset(kv, 0, sizeof *kv);
    if (!json_object_is_type(o, json_type_object))
        return bad("etcd: reply %s is not an object", "kv");
    if (field(o, "key") == NULL)
        return bad("etcd: reply %s has no key", "kv");
    rc = get_bytes(o, "key", &kv->key, &kv->key_len);
    if (rc == DLOCK_OK)
        rc = get_bytes(o, "value", &kv->value, &kv->value_len);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "create_revision", 0, &kv->create_revision);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "mod_revision", 0, &kv->mod_revision);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "version", 0, &kv->version);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "lease", 0, &kv->lease);
    if (rc != DLOCK_OK)
        kv_free(kv);
    return rc;
}

void dlock__etcd_range_result_free(dlock__etcd_range_result *r)
{
    for (size_t i = 0; i < r->n_kvs; i++)
        kv_free(&r->kvs[i]);
    free(r->kvs);
    r->kvs = NULL;
    r->n_kvs = 0;
}

static int get_range(json_object *o, int top, dlock__etcd_range_result *out)
{
    json_object *arr;
    size_t n;
    int rc;

    memset(out, 0, sizeof *out);
    rc = get_header(o, top, &out->revision, top ? &out->raft_term : NULL);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "count", 0, &out->count);
    if (rc == DLOCK_OK)
        rc = get_bool(o, "more", &out->more);
    if (rc == DLOCK_OK)
        rc = get_array(o, "kvs", &arr, &n);
    if (rc != DLOCK_OK || n == 0)
        return rc;
    out->kvs = calloc(n, sizeof *out->kvs);
    if (out->kvs == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a range");
    for (size_t i = 0; i < n; i++) {
        rc = get_kv(json_object_array_get_idx(arr, i), &out->kvs[i]);
        if (rc != DLOCK_OK)
            break;
        out->n_kvs++;
    }
    if (rc != DLOCK_OK)
        dlock__etcd_range_result_free(out);
    return rc;
}

int dlock__etcd_decode_header(const char *body, size_t n, int64_t *revision)
{
    json_object *o;
    int rc = parse(body, n, &o);

    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, revision, NULL);
    json_object_put(o);
    return rc;
}

int dlock__etcd_decode_range(const char *body, size_t n, dlock__etcd_range_result *out)
{
    json_object *o;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_range(o, 1, out);
    json_object_put(o);
    return rc;
}

int dlock__etcd_decode_put(const char *body, size_t n, int64_t *revision)
{
    return dlock__etcd_decode_header(body, n, revision);
}

int dlock__etcd_decode_delete(const char *body, size_t n, int64_t *revision, int64_t *deleted)
{
    json_object *o;
    int rc = parse(body, n, &o);

    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, revision, NULL);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "deleted", 0, deleted);
    json_object_put(o);
    return rc;
}

void dlock__etcd_txn_result_free(dlock__etcd_txn_result *r)
{
    for (size_t i = 0; i < r->n_responses; i++)
        dlock__etcd_range_result_free(&r->responses[i].range);
    free(r->responses);
    r->responses = NULL;
    r->n_responses = 0;
}

static int get_op_result(json_object *o, dlock__etcd_op_result *out)
{
    json_object *inner;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_object_is_type(o, json_type_object))
        return bad("etcd: reply %s is not an object", "txn response");
    rc = get_object(o, "response_range", 0, &inner);
    if (rc == DLOCK_OK && inner != NULL) {
        out->type = DLOCK__ETCD_OP_RANGE;
        rc = get_range(inner, 0, &out->range);
        out->revision = out->range.revision;
        return rc;
    }
    if (rc == DLOCK_OK)
        rc = get_object(o, "response_put", 0, &inner);
    if (rc == DLOCK_OK && inner != NULL) {
        out->type = DLOCK__ETCD_OP_PUT;
        return get_header(inner, 0, &out->revision, NULL);
    }
    if (rc == DLOCK_OK)
        rc = get_object(o, "response_delete_range", 0, &inner);
    if (rc == DLOCK_OK && inner != NULL) {
        out->type = DLOCK__ETCD_OP_DELETE;
        rc = get_header(inner, 0, &out->revision, NULL);
        if (rc == DLOCK_OK)
            rc = get_i64(inner, "deleted", 0, &out->deleted);
        return rc;
    }
    return rc != DLOCK_OK ? rc
                          : bad("etcd: reply %s holds no range, put or delete", "txn response");
}

int dlock__etcd_decode_txn(const char *body, size_t n, dlock__etcd_txn_result *out)
{
    json_object *o, *arr;
    size_t count;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, &out->revision, &out->raft_term);
    if (rc == DLOCK_OK)
        rc = get_bool(o, "succeeded", &out->succeeded);
    if (rc == DLOCK_OK)
        rc = get_array(o, "responses", &arr, &count);
    if (rc == DLOCK_OK && count > 0) {
        out->responses = calloc(count, sizeof *out->responses);
        if (out->responses == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a txn");
        for (size_t i = 0; rc == DLOCK_OK && i < count; i++) {
            rc = get_op_result(json_object_array_get_idx(arr, i), &out->responses[i]);
            /* counted even when it failed half-way: its range is freed with the rest */
            out->n_responses++;
        }
    }
    if (rc != DLOCK_OK)
        dlock__etcd_txn_result_free(out);
    json_object_put(o);
    return rc;
}

int dlock__etcd_decode_lease_grant(const char *body, size_t n, dlock__etcd_lease *out)
{
    json_object *o, *err;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, &out->revision, &out->raft_term);
    if (rc == DLOCK_OK)
        rc = get_id(o, "ID", &out->id);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "TTL", 1, &out->ttl);
    err = field(o, "error");
    if (rc == DLOCK_OK && err != NULL && json_object_is_type(err, json_type_string) &&
        json_object_get_string_len(err) > 0)
        rc = dlock__fail(DLOCK_ESERVER, "etcd: lease grant refused: %.200s",
                         json_object_get_string(err));
    json_object_put(o);
    return rc;
}

/* The stream form of an error: {"error":{"grpc_code":N,"message":".."}}. */
static int get_stream_error(json_object *e, dlock__etcd_status *st)
{
    int64_t code;
    json_object *msg = field(e, "message");
    int rc = get_i64(e, "grpc_code", 0, &code);

    if (rc != DLOCK_OK)
        return rc;
    if (code <= 0 || code > 16)
        return bad("etcd: stream error has %s", "no valid grpc_code");
    st->code = (int) code;
    snprintf(st->message, sizeof st->message, "%s",
             msg != NULL && json_object_is_type(msg, json_type_string) ? json_object_get_string(msg)
                                                                       : "(no message)");
    return DLOCK_OK;
}

int dlock__etcd_decode_keepalive(const char *body, size_t n, dlock__etcd_lease *out,
                                 dlock__etcd_status *status)
{
    json_object *o, *res, *err;
    int rc;

    memset(out, 0, sizeof *out);
    memset(status, 0, sizeof *status);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_object(o, "error", 0, &err);
    if (rc == DLOCK_OK && err != NULL) {
        rc = get_stream_error(err, status);
        goto out;
    }
    if (rc == DLOCK_OK)
        rc = get_object(o, "result", 1, &res);
    if (rc == DLOCK_OK)
        rc = get_header(res, 1, &out->revision, &out->raft_term);
    if (rc == DLOCK_OK)
        rc = get_id(res, "ID", &out->id);
    if (rc == DLOCK_OK)
        rc = get_i64(res, "TTL", 0, &out->ttl);
out:
    json_object_put(o);
    return rc;
}

void dlock__etcd_lease_ttl_free(dlock__etcd_lease_ttl *t)
{
    for (size_t i = 0; i < t->n_keys; i++)
        free(t->keys[i]);
    free(t->keys);
    t->keys = NULL;
    t->n_keys = 0;
}

int dlock__etcd_decode_lease_ttl(const char *body, size_t n, dlock__etcd_lease_ttl *out)
{
    json_object *o, *arr;
    size_t count, len;
    int64_t revision;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, &revision, &out->raft_term);
    if (rc == DLOCK_OK)
        rc = get_id(o, "ID", &out->id);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "TTL", -1, &out->ttl);
    if (rc == DLOCK_OK)
        rc = get_i64(o, "grantedTTL", 0, &out->granted_ttl);
    if (rc == DLOCK_OK)
        rc = get_array(o, "keys", &arr, &count);
    if (rc == DLOCK_OK && count > 0) {
        out->keys = calloc(count, sizeof *out->keys);
        if (out->keys == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a lease");
        for (size_t i = 0; rc == DLOCK_OK && i < count; i++) {
            /* get_bytes reads a named field; wrap the element as one */
            json_object *holder = json_object_new_object();
            json_object *item = json_object_array_get_idx(arr, i);
            if (holder == NULL || json_object_object_add(holder, "k", json_object_get(item)) != 0) {
                json_object_put(holder);
                rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a lease");
                break;
            }
            rc = get_bytes(holder, "k", &out->keys[i], &len);
            json_object_put(holder);
            if (rc == DLOCK_OK)
                out->n_keys++;
        }
    }
    if (rc != DLOCK_OK)
        dlock__etcd_lease_ttl_free(out);
    json_object_put(o);
    return rc;
}

int dlock__etcd_decode_token(const char *body, size_t n, char **token)
{
    json_object *o, *t;
    int64_t revision;
    int rc;

    *token = NULL;
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_header(o, 1, &revision, NULL);
    t = field(o, "token");
    if (rc == DLOCK_OK &&
        (t == NULL || !json_object_is_type(t, json_type_string) ||
         json_object_get_string_len(t) == 0 || json_object_get_string_len(t) > 4096 ||
         strpbrk(json_object_get_string(t), "\r\n") != NULL))
        rc = bad("etcd: authentication reply has no usable %s", "token");
    if (rc == DLOCK_OK) {
        *token = strdup(json_object_get_string(t));
        if (*token == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a token");
    }
    json_object_put(o);
    return rc;
}

void dlock__etcd_watch_response_free(dlock__etcd_watch_response *w)
{
    for (size_t i = 0; i < w->n_events; i++)
        kv_free(&w->events[i].kv);
    free(w->events);
    free(w->cancel_reason);
    w->events = NULL;
    w->cancel_reason = NULL;
    w->n_events = 0;
}

static int get_event(json_object *o, dlock__etcd_event *ev)
{
    json_object *type, *kv;
    int rc;

    memset(ev, 0, sizeof *ev);
    if (!json_object_is_type(o, json_type_object))
        return bad("etcd: watch %s is not an object", "event");
    type = field(o, "type");
    if (type == NULL) {
        ev->type = DLOCK__ETCD_EV_PUT;
    } else if (json_object_is_type(type, json_type_string) &&
               strcmp(json_object_get_string(type), "DELETE") == 0) {
        ev->type = DLOCK__ETCD_EV_DELETE;
    } else if (json_object_is_type(type, json_type_string) &&
               strcmp(json_object_get_string(type), "PUT") == 0) {
        ev->type = DLOCK__ETCD_EV_PUT;
    } else {
        return bad("etcd: watch event %s is neither PUT nor DELETE", "type");
    }
    rc = get_object(o, "kv", 1, &kv);
    if (rc == DLOCK_OK)
        rc = get_kv(kv, &ev->kv);
    return rc;
}

int dlock__etcd_decode_watch(const char *body, size_t n, dlock__etcd_watch_response *out)
{
    json_object *o, *res, *err, *arr, *reason;
    size_t count;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    rc = get_object(o, "error", 0, &err);
    if (rc == DLOCK_OK && err != NULL) {
        rc = get_stream_error(err, &out->error);
        goto out;
    }
    if (rc == DLOCK_OK)
        rc = get_object(o, "result", 1, &res);
    if (rc == DLOCK_OK)
        rc = get_header(res, 1, &out->revision, NULL);
    if (rc == DLOCK_OK)
        rc = get_i64(res, "watch_id", -1, &out->watch_id);
    if (rc == DLOCK_OK)
        rc = get_bool(res, "created", &out->created);
    if (rc == DLOCK_OK)
        rc = get_bool(res, "canceled", &out->canceled);
    if (rc == DLOCK_OK)
        rc = get_i64(res, "compact_revision", 0, &out->compact_revision);
    reason = rc == DLOCK_OK ? field(res, "cancel_reason") : NULL;
    if (reason != NULL) {
        if (!json_object_is_type(reason, json_type_string))
            rc = bad("etcd: watch %s is not a string", "cancel_reason");
        else if ((out->cancel_reason = strdup(json_object_get_string(reason))) == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a watch");
    }
    if (rc == DLOCK_OK)
        rc = get_array(res, "events", &arr, &count);
    if (rc == DLOCK_OK && count > 0) {
        out->events = calloc(count, sizeof *out->events);
        if (out->events == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory decoding a watch");
        for (size_t i = 0; rc == DLOCK_OK && i < count; i++) {
            rc = get_event(json_object_array_get_idx(arr, i), &out->events[i]);
            if (rc == DLOCK_OK)
                out->n_events++;
        }
    }
out:
    if (rc != DLOCK_OK)
        dlock__etcd_watch_response_free(out);
    json_object_put(o);
    return rc;
}

int dlock__etcd_decode_status(const char *body, size_t n, dlock__etcd_status *out)
{
    json_object *o, *err, *msg;
    int64_t code;
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse(body, n, &o);
    if (rc != DLOCK_OK)
        return rc;
    err = field(o, "error");
    if (err != NULL && json_object_is_type(err, json_type_object)) {
        rc = get_stream_error(err, out);
        goto out;
    }
    rc = get_i64(o, "code", 0, &code);
    if (rc == DLOCK_OK && (code <= 0 || code > 16))
        rc = bad("etcd: error reply has %s", "no valid gRPC code");
    if (rc != DLOCK_OK)
        goto out;
    out->code = (int) code;
    msg = field(o, "message");
    if (msg == NULL || !json_object_is_type(msg, json_type_string))
        msg = err;
    snprintf(out->message, sizeof out->message, "%s",
             msg != NULL && json_object_is_type(msg, json_type_string) ? json_object_get_string(msg)
                                                                       : "(no message)");
out:
    json_object_put(o);
    return rc;
}

/* ================================================================ status */

/* gRPC codes used below (google.golang.org/grpc/codes). */
enum {
    GRPC_CANCELED = 1,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16
};

int dlock__etcd_status_kind(const dlock__etcd_status *st)
{
    /* etcd's errors are told apart by their text (rpctypes), as its Go
     * client does: the codes alone are shared by unrelated errors. */
    if (strstr(st->message, "requested lease not found") != NULL)
        return DLOCK__ETCD_ST_LEASE_NOT_FOUND;
    if (strstr(st->message, "invalid user ID or password") != NULL)
        return DLOCK__ETCD_ST_AUTH_FAILED;
    if (strstr(st->message, "user name is empty") != NULL)
        return DLOCK__ETCD_ST_AUTH_REQUIRED;
    if (strstr(st->message, "authentication is not enabled") != NULL)
        return DLOCK__ETCD_ST_AUTH_NOT_ENABLED;
    if (strstr(st->message, "invalid auth token") != NULL ||
        strstr(st->message, "revision of auth store is old") != NULL ||
        st->code == GRPC_UNAUTHENTICATED)
        return DLOCK__ETCD_ST_REAUTH;
    return DLOCK__ETCD_ST_OTHER;
}

int dlock__etcd_fail_status(const dlock__etcd_status *st, int http_status, const char *label,
                            const char *path)
{
    const char *m = st->message;

    switch (dlock__etcd_status_kind(st)) {
    case DLOCK__ETCD_ST_LEASE_NOT_FOUND:
        return dlock__fail(DLOCK_ELOST, "etcd %s %s: lease not found (expired or revoked): %s",
                           label, path, m);
    case DLOCK__ETCD_ST_AUTH_FAILED:
        return dlock__fail(DLOCK_ESERVER,
                           "etcd %s: authentication failed: wrong user name or password (%s)",
                           label, m);
    case DLOCK__ETCD_ST_AUTH_REQUIRED:
        return dlock__fail(DLOCK_ESERVER,
                           "etcd %s %s: the server requires authentication and no user was "
                           "given (%s)",
                           label, path, m);
    case DLOCK__ETCD_ST_REAUTH:
        return dlock__fail(DLOCK_ESERVER, "etcd %s %s: authentication token refused: %s", label,
                           path, m);
    default:
        break;
    }
    switch (st->code) {
    case GRPC_PERMISSION_DENIED:
        return dlock__fail(DLOCK_ESERVER, "etcd %s %s: permission denied: %s", label, path, m);
    case GRPC_UNAVAILABLE:
    case GRPC_DEADLINE_EXCEEDED:
    case GRPC_CANCELED:
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "etcd %s %s: server unavailable (the request may or may not have "
                           "run): %s",
                           label, path, m);
    case GRPC_INVALID_ARGUMENT:
        return dlock__fail(DLOCK_EINVAL, "etcd %s %s: request refused as invalid: %s", label, path,
                           m);
    default:
        return dlock__fail(DLOCK_ESERVER, "etcd %s %s: HTTP %d, gRPC code %d: %s", label, path,
                           http_status, st->code, m);
    }
}
