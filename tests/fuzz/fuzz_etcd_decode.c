/* SPDX-License-Identifier: MIT */
/* fuzz_etcd_decode.c - libFuzzer target for the etcd reply decoders
 * (src/backend/etcd/codec.c). The first input byte picks the decoder, the
 * rest is the reply. Every result is walked, so a bad pointer or length in
 * it shows under AddressSanitizer, and freed, so a leak does.
 *
 * Built as a fuzzer with clang (tests/CMakeLists.txt); with any compiler
 * it is also linked to replay.c, which runs the seed corpus as a test. */
#include "backend/etcd/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static void walk_kv(const dlock__etcd_kv *kv)
{
    sink += strlen(kv->key) + kv->key_len + kv->value_len + (size_t) kv->create_revision;
    if (kv->value_len > 0)
        sink += (unsigned char) kv->value[kv->value_len - 1];
}

static void walk_range(const dlock__etcd_range_result *r)
{
    for (size_t i = 0; i < r->n_kvs; i++)
        walk_kv(&r->kvs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *body = (const char *) data + 1;
    size_t n = size - 1;
    int64_t a, b;

    switch (data[0] % 12) {
    case 0:
        dlock__etcd_decode_header(body, n, &a);
        break;
    case 1: {
        dlock__etcd_range_result r;
        if (dlock__etcd_decode_range(body, n, &r) == 0) {
            walk_range(&r);
            dlock__etcd_range_result_free(&r);
        }
        break;
    }
    case 2:
        dlock__etcd_decode_delete(body, n, &a, &b);
        break;
    case 3: {
        dlock__etcd_txn_result t;
        if (dlock__etcd_decode_txn(body, n, &t) == 0) {
            for (size_t i = 0; i < t.n_responses; i++)
                walk_range(&t.responses[i].range);
            dlock__etcd_txn_result_free(&t);
        }
        break;
    }
    case 4: {
        dlock__etcd_lease l;
        dlock__etcd_decode_lease_grant(body, n, &l);
        break;
    }
    case 5: {
        dlock__etcd_lease l;
        dlock__etcd_status st;
        if (dlock__etcd_decode_keepalive(body, n, &l, &st) == 0)
            sink += strlen(st.message);
        break;
    }
    case 6: {
        dlock__etcd_lease_ttl t;
        if (dlock__etcd_decode_lease_ttl(body, n, &t) == 0) {
            for (size_t i = 0; i < t.n_keys; i++)
                sink += strlen(t.keys[i]);
            dlock__etcd_lease_ttl_free(&t);
        }
        break;
    }
    case 7: {
        char *token = NULL;
        if (dlock__etcd_decode_token(body, n, &token) == 0) {
            sink += strlen(token);
            free(token);
        }
        break;
    }
    case 8: {
        dlock__etcd_watch_response w;
        if (dlock__etcd_decode_watch(body, n, &w) == 0) {
            for (size_t i = 0; i < w.n_events; i++)
                walk_kv(&w.events[i].kv);
            if (w.cancel_reason != NULL)
                sink += strlen(w.cancel_reason);
            sink += strlen(w.error.message);
            dlock__etcd_watch_response_free(&w);
        }
        break;
    }
    case 9: {
        dlock__etcd_status st;
        if (dlock__etcd_decode_status(body, n, &st) == 0) {
            sink += strlen(st.message);
            sink += (size_t) dlock__etcd_status_kind(&st);
        }
        break;
    }
    case 10: {
        char out[3 * (256 / 4) + 1];
        if (n <= 256)
            sink += (size_t) dlock__etcd_b64_decode(body, n, out);
        break;
    }
    default:
        if (dlock__etcd_parse_int64(body, n, &a) == 0)
            sink += (size_t) a;
        break;
    }
    return 0;
}
