/* SPDX-License-Identifier: MIT */
/* registry.c - which backend serves which URL scheme.
 *
 * Each backend is compiled behind its own build option (DLOCK_WITH_<STORE>
 * in CMakeLists.txt) and listed here under it; nothing else in the library
 * names a backend. A scheme the project knows but this build lacks gets a
 * message saying so, not "unknown scheme". */
#include "../base/error.h"
#include "../base/url.h"
#include "backend.h"

#include <stdio.h>
#include <string.h>

#ifdef DLOCK_WITH_REDIS
extern const dlock__backend dlock__redis_backend;
#endif
#ifdef DLOCK_WITH_REDLOCK
extern const dlock__backend dlock__redlock_backend;
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
extern const dlock__backend dlock__zk_backend;
#endif
#ifdef DLOCK_WITH_ETCD
extern const dlock__backend dlock__etcd_backend;
#endif
#ifdef DLOCK_WITH_POSTGRES
extern const dlock__backend dlock__pg_backend;
#endif
#ifdef DLOCK_WITH_SQLITE
extern const dlock__backend dlock__sqlite_backend;
#endif
#ifdef DLOCK_WITH_MYSQL
extern const dlock__backend dlock__my_backend;
#endif

static const dlock__backend *const built[] = {
#ifdef DLOCK_WITH_REDIS
    &dlock__redis_backend,
#endif
#ifdef DLOCK_WITH_REDLOCK
    &dlock__redlock_backend,
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
    &dlock__zk_backend,
#endif
#ifdef DLOCK_WITH_ETCD
    &dlock__etcd_backend,
#endif
#ifdef DLOCK_WITH_POSTGRES
    &dlock__pg_backend,
#endif
#ifdef DLOCK_WITH_SQLITE
    &dlock__sqlite_backend,
#endif
#ifdef DLOCK_WITH_MYSQL
    &dlock__my_backend,
#endif
    NULL,
};

/* Schemes of stores this build may lack, and why. */
static const struct {
    const char *scheme;
    const char *why;
} absent[] = {
    {"redis", "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"redis+unix",
     "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"rediss", "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"redis+sentinel",
     "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"rediss+sentinel",
     "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"redis+cluster",
     "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"rediss+cluster",
     "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"redlock", "this build of dlock has no Redis backend (configure with -DDLOCK_WITH_REDIS=ON)"},
    {"zk", "this build of dlock has no ZooKeeper backend (configure with "
           "-DDLOCK_WITH_ZOOKEEPER=ON)"},
    {"etcd", "this build of dlock has no etcd backend (configure with -DDLOCK_WITH_ETCD=ON)"},
    {"postgres", "this build of dlock has no PostgreSQL backend (configure with "
                 "-DDLOCK_WITH_POSTGRES=ON)"},
    {"postgresql", "this build of dlock has no PostgreSQL backend (configure with "
                   "-DDLOCK_WITH_POSTGRES=ON)"},
    {"sqlite", "this build of dlock has no SQLite backend (configure with -DDLOCK_WITH_SQLITE=ON)"},
    {"mysql", "this build of dlock has no MariaDB/MySQL backend (configure with "
              "-DDLOCK_WITH_MYSQL=ON)"},
    {"mariadb", "this build of dlock has no MariaDB/MySQL backend (configure with "
                "-DDLOCK_WITH_MYSQL=ON)"},
};

static size_t scheme_list(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; built[i] != NULL; i++) {
        for (const char *const *s = built[i]->schemes; *s != NULL; s++) {
            int n = snprintf(buf + used, len - used, "%s%s://", used ? ", " : "", *s);
            if (n < 0 || (size_t) n >= len - used)
                return used;
            used += (size_t) n;
        }
    }
    return used;
}

static int is_built(const char *scheme)
{
    for (size_t i = 0; built[i] != NULL; i++) {
        for (const char *const *s = built[i]->schemes; *s != NULL; s++) {
            if (strcmp(*s, scheme) == 0)
                return 1;
        }
    }
    return 0;
}

/* The schemes whose name says TLS: a built one whose first part is another
 * built scheme with an 's' appended (rediss+cluster: redis). */
static void tls_schemes(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; built[i] != NULL; i++) {
        for (const char *const *s = built[i]->schemes; *s != NULL; s++) {
            char plain[64];
            size_t first = strcspn(*s, "+");
            if (first < 2 || first > sizeof plain || (*s)[first - 1] != 's')
                continue;
            snprintf(plain, sizeof plain, "%.*s", (int) first - 1, *s);
            if (!is_built(plain))
                continue;
            int n = snprintf(buf + used, len - used, "%s%s://", used ? ", " : "", *s);
            if (n < 0 || (size_t) n >= len - used)
                return;
            used += (size_t) n;
        }
    }
}

/* What the user likely meant by an unknown scheme, written to buf ("" if
 * nothing is near): "did you mean redis://?". A TLS word appended
 * ("zk+tls", "redis+ssl") means the store's TLS scheme, or says it has
 * none. */
static void near_scheme(const char *scheme, char *buf, size_t len)
{
    static const char *const tls_words[] = {"+tls", "+ssl"};
    size_t n = strlen(scheme);
    const char *near = NULL;
    int best = 3;

    buf[0] = '\0';
    for (size_t w = 0; w < sizeof tls_words / sizeof tls_words[0]; w++) {
        size_t wl = strlen(tls_words[w]);
        char base[64], twin[64];
        if (n <= wl || n - wl >= sizeof base || strcmp(scheme + n - wl, tls_words[w]) != 0)
            continue;
        snprintf(base, sizeof base, "%.*s", (int) (n - wl), scheme);
        if (!is_built(base))
            continue;
        size_t first = strcspn(base, "+");
        snprintf(twin, sizeof twin, "%.*ss%s", (int) first, base, base + first);
        if (is_built(twin)) {
            snprintf(buf, len, "did you mean %s://?", twin);
        } else {
            char tls[256];
            tls_schemes(tls, sizeof tls);
            snprintf(buf, len, "did you mean %s://? (it has no TLS scheme%s%s)", base,
                     tls[0] ? "; the schemes with TLS in their name: " : "", tls);
        }
        return;
    }
    for (size_t i = 0; built[i] != NULL; i++) {
        for (const char *const *s = built[i]->schemes; *s != NULL; s++) {
            int d = dlock__url_nearness(scheme, *s);
            if (d < best) {
                best = d;
                near = *s;
            }
        }
    }
    if (near != NULL)
        snprintf(buf, len, "did you mean %s://?", near);
}

const dlock__backend *dlock__backend_find(const char *scheme, const char *url_text, int *code)
{
    char known[256], near[400];

    for (size_t i = 0; built[i] != NULL; i++) {
        for (const char *const *s = built[i]->schemes; *s != NULL; s++) {
            if (strcmp(*s, scheme) == 0)
                return built[i];
        }
    }
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        if (strcmp(absent[i].scheme, scheme) == 0) {
            *code = dlock__fail(DLOCK_ENOTSUP, "%s: %s", url_text, absent[i].why);
            return NULL;
        }
    }
    near_scheme(scheme, near, sizeof near);
    if (near[0] != '\0') {
        *code = dlock__fail(DLOCK_EINVAL, "%s: unknown scheme '%s': %s", url_text, scheme, near);
        return NULL;
    }
    scheme_list(known, sizeof known);
    *code = dlock__fail(DLOCK_EINVAL, "%s: unknown scheme '%s' (this build serves %s)", url_text,
                        scheme, known[0] ? known : "none");
    return NULL;
}
