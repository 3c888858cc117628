/* SPDX-License-Identifier: MIT */
/* test_names.c - layouts are one to one: no two locks share a key, a node
 * or a range on any store, whatever their names hold (no server: the pure
 * mapping functions each backend calls, redis/keys.h, zk/names.h,
 * etcd/names.h).
 *
 * Names are made from an adversarial alphabet: the characters with a
 * meaning in some layout ({ } / : . %), the words the layouts use (kinds,
 * derived keys, recipe markers, suffixes), digits, hex, escapes, characters
 * a store refuses, and fixed awkward names. Each lock (prefix or base,
 * name, kind) is mapped to everything it can ever touch, and:
 *   - Redis: no key (base, fence, queue, waiters' places, holders, streams,
 *     owner records) belongs to two locks; every key reads back as its own
 *     lock and as no lock under another prefix; all keys of a lock share
 *     one Cluster hash tag. The interop key N (DLOCK_SIMPLE) is the name
 *     itself, the key peers use, which its user names: it is no part of
 *     the layout (its fence counter is the mutex's, on purpose).
 *   - ZooKeeper: no two locks share a directory their contenders' nodes
 *     are made in or ranked in; no node a lock makes for good (its path,
 *     the paths above it, a semaphore's locks/ and leases/) looks like a
 *     contender's node, which is what a lock ranks (zk.c ranks contender
 *     nodes only), nor is another lock's semaphore directory; every path is
 *     valid for ZooKeeper and reads back as its name. The base is part of
 *     the path: two (base, name) pairs that make one path are one lock.
 *   - etcd: no key of one lock is under another lock's prefix (so none
 *     falls in a range another ranks); dlock does not keep etcd's rule that
 *     `a` ranks the keys of `a/b`: it escapes '/', so `a` and `a/b` are two
 *     locks as on every store; every key reads back as its lock, and
 *     etcdctl's `a/b/<lease>` is no lock of dlock's. */
#include "../support/harness.h"

#include "backend/backend.h"
#include "backend/escape.h"
#ifdef DLOCK_WITH_REDIS
#include "backend/redis/keys.h"
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
#include "backend/zk/names.h"
#include "backend/zk/recipe.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "backend/etcd/names.h"
#endif
#ifdef DLOCK_WITH_MYSQL
#include "backend/mysql/names.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- names */

static const char *const alphabet[] = {"{",
                                       "}",
                                       "/",
                                       ":",
                                       ".",
                                       "%",
                                       "-",
                                       " ",
                                       "fence",
                                       "queue",
                                       "holders",
                                       "exp",
                                       "used",
                                       "cap",
                                       "rw",
                                       "sem",
                                       "w",
                                       "wake",
                                       "owner",
                                       "rwlock",
                                       "semaphore",
                                       "locks",
                                       "leases",
                                       "lock-",
                                       "lease-",
                                       "__READ__",
                                       "__WRIT__",
                                       "__lock__",
                                       "_c_",
                                       "zookeeper",
                                       ".rwlock",
                                       ".semaphore",
                                       "..",
                                       "r-",
                                       "w-",
                                       "0",
                                       "1",
                                       "9",
                                       "0000000001",
                                       "00000",
                                       "a",
                                       "f",
                                       "1f",
                                       "deadbeef",
                                       "A",
                                       "%25",
                                       "%2F",
                                       "%7D",
                                       "%2E",
                                       "%6C",
                                       "\xc3\xa9" /* é */,
                                       "\xf0\x9f\x94\x92" /* emoji */,
                                       "\xee\x80\x80" /* U+E000 */,
                                       "\xef\xbf\xbf" /* U+FFFF */,
                                       "\xe6\x97\xa5" /* CJK */};

static const char *const fixed[] = {"a",
                                    "a/b",
                                    "a/",
                                    "/a",
                                    "a//b",
                                    "/",
                                    "//",
                                    ".",
                                    "..",
                                    "a/./b",
                                    "a/../b",
                                    "S/locks",
                                    "S/leases",
                                    "S",
                                    "locks",
                                    "x.rwlock",
                                    "x.semaphore",
                                    "x/y.rwlock/z",
                                    "{acct}:1",
                                    "{acct}:2",
                                    "{acct}:fence",
                                    "acct",
                                    "acct:fence",
                                    "a{b",
                                    "a}b",
                                    "}x",
                                    "%x",
                                    "%7Dx",
                                    "{}",
                                    "}",
                                    "{",
                                    "%",
                                    "%25",
                                    "x-lock-0000000001",
                                    "a/x-lock-0000000001",
                                    "a/0",
                                    "zookeeper",
                                    "zookeeper/quota",
                                    "\xc3\xa9\xf0\x9f\x94\x92",
                                    "Upper Case",
                                    "with space",
                                    "a:b:c",
                                    "-",
                                    "a/%2F/b"};

#define MAX_NAMES 700

typedef struct names {
    char *all[MAX_NAMES];
    size_t n;
} names;

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static unsigned pick(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned) (rng % n);
}

/* Adds name once (a name twice would be one lock twice). */
static void add(names *ns, const char *name)
{
    for (size_t i = 0; i < ns->n; i++) {
        if (strcmp(ns->all[i], name) == 0)
            return;
    }
    if (ns->n < MAX_NAMES && strlen(name) >= 1 && strlen(name) <= DLOCK_NAME_MAX)
        ns->all[ns->n++] = strdup(name);
}

static names make_names(size_t random_ones)
{
    names ns = {{0}, 0};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        add(&ns, fixed[i]);
    for (size_t i = 0; i < random_ones; i++) {
        char buf[DLOCK_NAME_MAX + 1] = "";
        unsigned parts = 1 + pick(6);
        for (unsigned k = 0; k < parts; k++)
            strcat(buf, alphabet[pick(sizeof alphabet / sizeof alphabet[0])]);
        add(&ns, buf);
    }
    return ns;
}

static void free_names(names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->all[i]);
}

/* One thing a lock touches, and whose it is. */
typedef struct touch {
    char *what;
    int owner; /* the lock (an index), or a group of them that are one */
    int role;
} touch;

typedef struct touches {
    touch *all;
    size_t n, cap;
} touches;

static void touch_add(touches *t, const char *what, int owner, int role)
{
    if (t->n == t->cap) {
        t->cap = t->cap != 0 ? 2 * t->cap : 4096;
        t->all = realloc(t->all, t->cap * sizeof *t->all);
        CHECK(t->all != NULL);
    }
    t->all[t->n++] = (touch){strdup(what), owner, role};
}

static int by_what(const void *a, const void *b)
{
    return strcmp(((const touch *) a)->what, ((const touch *) b)->what);
}

/* Sorts, and fails on any two touches of one thing by different owners
 * (or in different roles). */
static void no_two_owners(touches *t, const char *store)
{
    qsort(t->all, t->n, sizeof *t->all, by_what);
    for (size_t i = 1; i < t->n; i++) {
        const touch *a = &t->all[i - 1], *b = &t->all[i];
        if (strcmp(a->what, b->what) == 0 && (a->owner != b->owner || a->role != b->role))
            dt_fail(__FILE__, __LINE__, "%s: '%s' belongs to locks %d (role %d) and %d (role %d)",
                    store, a->what, a->owner, a->role, b->owner, b->role);
    }
}

static void free_touches(touches *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->all[i].what);
    free(t->all);
}

/* ---------------------------------------------------------------- escape */

static void escape_round_trip(void)
{
    char out[16];
    CHECK_INT(dlock__escape_byte(out, '/'), ==, 3);
    CHECK(memcmp(out, "%2F", 3) == 0);
    CHECK_INT(dlock__unescape("a%2Fb%25", 8, out, sizeof out), ==, 4);
    CHECK(strcmp(out, "a/b%") == 0);
    CHECK_INT(dlock__unescape("%2", 2, out, sizeof out), ==, -1);
    CHECK_INT(dlock__unescape("%zz", 3, out, sizeof out), ==, -1);
    CHECK_INT(dlock__unescape("%00", 3, out, sizeof out), ==, -1);
    CHECK_INT(dlock__unescape("abcd", 4, out, 4), ==, -1); /* no room for the NUL */
}

/* ---------------------------------------------------------------- Redis */

#ifdef DLOCK_WITH_REDIS
/* The text Redis Cluster hashes a key by. */
static size_t hash_tag(const char *key, const char **tag)
{
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;
    if (open == NULL || close == NULL || close == open + 1) {
        *tag = key;
        return strlen(key);
    }
    *tag = open + 1;
    return (size_t) (close - open - 1);
}

static void redis_keys_one_to_one(void)
{
    static const char *const prefixes[] = {"dlock", "a", "a:b", "dlock:x", "x/y", "a.b-c_d", ":"};
    static const enum dlock__kind kinds[] = {DLOCK__MUTEX, DLOCK__WRITE, DLOCK__SEMAPHORE};
    static const char *const derived[] = {"",         ":fence",
                                          ":queue",   ":w:0123abcdef-x_.Z",
                                          ":w:a",     ":wake:0123456789abcdef",
                                          ":holders", ":exp",
                                          ":used",    ":cap"};
    names ns = make_names(500);
    touches t = {0};
    char name[DLOCK_NAME_MAX + 1];
    const size_t np = sizeof prefixes / sizeof prefixes[0];

    for (size_t p = 0; p < np; p++) {
        char owner_key[128];
        snprintf(owner_key, sizeof owner_key, "%s:owner:0123456789abcdef", prefixes[p]);
        touch_add(&t, owner_key, -1 - (int) p, 1); /* the client's record: no lock's */
        for (size_t i = 0; i < ns.n; i++) {
            for (size_t k = 0; k < 3; k++) {
                int owner = (int) ((p * ns.n + i) * 3 + k);
                char *keys[3];
                size_t lens[3];
                CHECK_RC(dlock__redis_keys_of(prefixes[p], ns.all[i], kinds[k], 0, keys, lens),
                         DLOCK_OK);
                for (int j = 0; j < 3; j++)
                    CHECK_INT(lens[j], ==, strlen(keys[j]));
                CHECK(strcmp(keys[2], ns.all[i]) == 0);
                const char *tag0;
                size_t tag0_len = hash_tag(keys[0], &tag0);
                if (kinds[k] != DLOCK__MUTEX) {
                    /* a name's one fence counter, for every kind: the mutex's */
                    char *mutex[3];
                    size_t mlens[3];
                    CHECK_RC(
                        dlock__redis_keys_of(prefixes[p], ns.all[i], DLOCK__MUTEX, 0, mutex, mlens),
                        DLOCK_OK);
                    CHECK(strcmp(keys[1], mutex[1]) == 0);
                    free(mutex[0]);
                }
                for (size_t d = 0; d < sizeof derived / sizeof derived[0]; d++) {
                    char key[2048];
                    snprintf(key, sizeof key, "%s%s", keys[0], derived[d]);
                    if (d == 1 && kinds[k] != DLOCK__MUTEX)
                        continue; /* not a key of it: it counts on the mutex's */
                    if (d == 1)
                        CHECK(strcmp(key, keys[1]) == 0);
                    touch_add(&t, key, owner, 0);
                    /* it reads back as its lock, and as none under another prefix */
                    const char *rest = NULL;
                    CHECK(dlock__redis_key_lock(prefixes[p], key, strlen(key), name, sizeof name,
                                                &rest));
                    if (strcmp(name, ns.all[i]) != 0)
                        dt_fail(__FILE__, __LINE__, "key '%s' reads back as '%s', not '%s'", key,
                                name, ns.all[i]);
                    CHECK(strchr(rest, '}') == NULL);
                    CHECK(dlock__redis_key_lock(prefixes[(p + 1) % np], key, strlen(key), name,
                                                sizeof name, &rest) == 0);
                    /* one Cluster slot for all of a lock's keys, by a tag never empty */
                    const char *tag;
                    size_t tag_len = hash_tag(key, &tag);
                    CHECK(tag != key);
                    CHECK(tag_len == tag0_len && memcmp(tag, tag0, tag_len) == 0);
                }
                /* interop: the key is the name; its fence is the name's counter */
                char *simple[3];
                size_t slens[3];
                CHECK_RC(dlock__redis_keys_of(prefixes[p], ns.all[i], kinds[k], 1, simple, slens),
                         DLOCK_OK);
                for (int j = 0; j < 3; j++)
                    CHECK_INT(slens[j], ==, strlen(simple[j]));
                CHECK(strcmp(simple[0], ns.all[i]) == 0);
                CHECK(strcmp(simple[1], keys[1]) == 0);
                CHECK(strcmp(simple[2], ns.all[i]) == 0);
                free(keys[0]); /* each block whole (keys.h) */
                free(simple[0]);
            }
        }
    }
    no_two_owners(&t, "Redis");
    /* names that begin with their own tag share a slot, as in 0.2 */
    char *a[3], *b[3];
    size_t la[3], lb[3];
    const char *ta, *tb;
    CHECK_RC(dlock__redis_keys_of("dlock", "{acct}:1", DLOCK__MUTEX, 0, a, la), DLOCK_OK);
    CHECK_RC(dlock__redis_keys_of("dlock", "{acct}:2", DLOCK__MUTEX, 0, b, lb), DLOCK_OK);
    size_t na = hash_tag(a[0], &ta), nb = hash_tag(b[0], &tb);
    CHECK(na == nb && memcmp(ta, tb, na) == 0 && strncmp(ta, "{acct", na) == 0);
    CHECK(strcmp(a[0], "dlock:{{acct}:1}") == 0);
    free(a[0]);
    free(b[0]);
    /* the listing's pattern: every key of a name with the prefix matches */
    for (size_t i = 0; i < ns.n; i++) {
        size_t cut = strlen(ns.all[i]) / 2 + 1;
        char prefix[DLOCK_NAME_MAX + 1];
        snprintf(prefix, sizeof prefix, "%.*s", (int) cut, ns.all[i]);
        char *pattern = dlock__redis_list_pattern("dlock", prefix), *keys[3];
        size_t lens[3], at = 0;
        char head[2048];
        CHECK(pattern != NULL);
        for (const char *q = pattern; *q != '\0' && *q != '*'; q++)
            head[at++] = *q == '\\' ? *++q : *q;
        head[at] = '\0';
        CHECK(pattern[strlen(pattern) - 1] == '*');
        CHECK_RC(dlock__redis_keys_of("dlock", ns.all[i], DLOCK__MUTEX, 0, keys, lens), DLOCK_OK);
        if (strncmp(keys[0], head, strlen(head)) != 0)
            dt_fail(__FILE__, __LINE__, "'%s' does not match '%s'", keys[0], pattern);
        free(keys[0]);
        free(pattern);
    }
    free_touches(&t);
    free_names(&ns);
}
#endif

/* ---------------------------------------------------------------- ZooKeeper */

#ifdef DLOCK_WITH_ZOOKEEPER
/* A path ZooKeeper takes (PathUtils.validatePath): absolute, no empty, "."
 * or ".." part, no character it refuses, not its own /zookeeper. */
static void valid_zk_path(const char *path)
{
    CHECK(path[0] == '/' && path[1] != '\0' && path[strlen(path) - 1] != '/');
    CHECK(strstr(path, "//") == NULL && strstr(path, "/./") == NULL &&
          strstr(path, "/../") == NULL);
    const char *last = strrchr(path, '/') + 1;
    CHECK(strcmp(last, ".") != 0 && strcmp(last, "..") != 0);
    CHECK(strcmp(path, "/zookeeper") != 0 && strncmp(path, "/zookeeper/", 11) != 0);
    for (const unsigned char *p = (const unsigned char *) path; *p != '\0'; p++) {
        CHECK(*p >= 0x20 && *p < 0xf0 && *p != 0xee);
        CHECK(!(p[0] == 0xef && (p[1] < 0xa4 || (p[1] == 0xbf && p[2] >= 0xb0))));
    }
}

static void zk_paths_one_to_one(void)
{
    names ns = make_names(400);
    touches dirs = {0}, nodes = {0};
    char path[1024], name[DLOCK_NAME_MAX + 1];
    /* bases: the default, the root, and some a name's path would be */
    const char *bases[8] = {"/dlock", "/", "/a"};
    char made[5][1024];
    size_t nb = 3;
    for (size_t i = 0; i < 5; i++) {
        CHECK_RC(dlock__zk_path_of("/", ns.all[pick((unsigned) ns.n)], made[i], sizeof made[i]),
                 DLOCK_OK);
        bases[nb++] = made[i];
    }
    enum { MUTEX, RW, SEM };
    enum { PATH, SEM_DIR };

    for (size_t b = 0; b < nb; b++) {
        int at_root = strcmp(bases[b], "/") == 0;
        size_t blen = at_root ? 0 : strlen(bases[b]);
        for (size_t i = 0; i < ns.n; i++) {
            CHECK_RC(dlock__zk_path_of(bases[b], ns.all[i], path, sizeof path), DLOCK_OK);
            valid_zk_path(path);
            /* it reads back as its name */
            CHECK(dlock__zk_name_of(at_root, path + blen + 1, name, sizeof name));
            if (strcmp(name, ns.all[i]) != 0)
                dt_fail(__FILE__, __LINE__, "'%s' reads back as '%s', not '%s'", path, name,
                        ns.all[i]);
            /* one lock per path, whatever base and name made it: its
             * owner is the path's first touch */
            touch_add(&nodes, path, 0, PATH);
            for (int k = MUTEX; k <= SEM; k++) {
                char dir[1100];
                if (k != SEM) {
                    snprintf(dir, sizeof dir, "%s#%s", path, k == MUTEX ? "lock-" : "rw");
                    touch_add(&dirs, dir, 0, k);
                    continue;
                }
                snprintf(dir, sizeof dir, "%s/locks", path);
                touch_add(&nodes, dir, 0, SEM_DIR);
                snprintf(dir, sizeof dir, "%s/leases", path);
                touch_add(&nodes, dir, 0, SEM_DIR);
            }
            /* the nodes made for good on the way: none looks like a
             * contender or is a semaphore's own */
            for (char *slash = strchr(path + blen + 1, '/');; slash = strchr(slash + 1, '/')) {
                char *end = slash != NULL ? slash : path + strlen(path);
                char part[1024];
                const char *from = end - 1;
                while (*from != '/')
                    from--;
                snprintf(part, sizeof part, "%.*s", (int) (end - from - 1), from + 1);
                if (dlock__zk_contender(part) >= 0 || strcmp(part, "locks") == 0 ||
                    strcmp(part, "leases") == 0)
                    dt_fail(__FILE__, __LINE__, "path '%s' has the part '%s'", path, part);
                if (slash == NULL)
                    break;
            }
        }
    }
    /* a path is a lock's path or a semaphore's directory, never both;
     * contenders' directories are kept apart by kind (marker) */
    no_two_owners(&nodes, "ZooKeeper nodes");
    no_two_owners(&dirs, "ZooKeeper contender directories");
    /* a path with no name is no lock; too long is refused, saying so */
    CHECK(!dlock__zk_name_of(0, "a/locks", name, sizeof name));
    CHECK(dlock__zk_name_of(0, "a%2F", name, sizeof name) && strcmp(name, "a/") == 0);
    CHECK(!dlock__zk_name_of(0, "x-lock-0000000001", name, sizeof name));
    CHECK(!dlock__zk_name_of(1, "zookeeper", name, sizeof name));
    CHECK(!dlock__zk_name_of(0, "%zz", name, sizeof name));
    char emoji[DLOCK_NAME_MAX + 1] = "";
    for (int i = 0; i < DLOCK_NAME_MAX / 4; i++)
        strcat(emoji, "\xf0\x9f\x94\x92");
    CHECK_RC(dlock__zk_path_of("/dlock", emoji, path, sizeof path), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "too long for ZooKeeper") != NULL);
    /* what Curator and kazoo see is unchanged for ordinary names */
    CHECK_RC(dlock__zk_path_of("/dlock", "jobs/nightly", path, sizeof path), DLOCK_OK);
    CHECK(strcmp(path, "/dlock/jobs/nightly") == 0);
    CHECK_RC(dlock__zk_path_of("/", "a/", path, sizeof path), DLOCK_OK);
    CHECK(strcmp(path, "/a%2F") == 0);
    free_touches(&dirs);
    free_touches(&nodes);
    free_names(&ns);
}
#endif

/* ---------------------------------------------------------------- etcd */

#ifdef DLOCK_WITH_ETCD
static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

static void etcd_keys_one_to_one(void)
{
    static const enum dlock__kind kinds[] = {DLOCK__MUTEX, DLOCK__WRITE, DLOCK__SEMAPHORE};
    static const char *const ids[] = {"1f", "7fffffffffffffff", "1f-1"};
    names ns = make_names(600);
    size_t n = 0;
    char **prefixes = calloc(3 * ns.n, sizeof *prefixes);
    char name[DLOCK_NAME_MAX + 1], key[2048];
    enum dlock__kind kind;

    CHECK(prefixes != NULL);
    for (size_t i = 0; i < ns.n; i++) {
        for (size_t k = 0; k < 3; k++) {
            char *prefix = dlock__etcd_lock_prefix(ns.all[i], kinds[k]);
            CHECK(prefix != NULL);
            prefixes[n++] = prefix;
            for (size_t d = 0; d < 3; d++) {
                snprintf(key, sizeof key, "%s%s%s", prefix,
                         kinds[k] != DLOCK__WRITE ? ""
                         : d == 0                 ? "r-"
                                                  : "w-",
                         ids[d]);
                CHECK(dlock__etcd_key_lock(key, strlen(key), name, sizeof name, &kind));
                if (strcmp(name, ns.all[i]) != 0 ||
                    kind != (kinds[k] == DLOCK__MUTEX ? DLOCK__MUTEX : kinds[k]))
                    dt_fail(__FILE__, __LINE__, "key '%s' reads back as '%s'/%d", key, name,
                            (int) kind);
                /* the lock's key is in no other lock's range */
                for (size_t j = 0; j + 1 < n; j++) {
                    if (strncmp(key, prefixes[j], strlen(prefixes[j])) == 0)
                        dt_fail(__FILE__, __LINE__, "key '%s' is in the range '%s'", key,
                                prefixes[j]);
                }
            }
            /* the listing starts at or before the lock's keys, in its range */
            size_t cut = strlen(ns.all[i]) / 2 + 1;
            char lp[DLOCK_NAME_MAX + 1];
            snprintf(lp, sizeof lp, "%.*s", (int) cut, ns.all[i]);
            char *start = dlock__etcd_list_start(lp);
            CHECK(start != NULL && strncmp(prefix, start, strlen(start)) == 0);
            free(start);
        }
    }
    /* the same, over all pairs: sorted, a prefix of another (or the same
     * prefix twice) comes just before the first it begins (lock ids hold
     * no '/') */
    qsort(prefixes, n, sizeof *prefixes, by_text);
    for (size_t j = 1; j < n; j++) {
        if (strncmp(prefixes[j], prefixes[j - 1], strlen(prefixes[j - 1])) == 0)
            dt_fail(__FILE__, __LINE__, "'%s' ranks the keys of '%s'", prefixes[j - 1],
                    prefixes[j]);
    }
    /* keys no name of dlock's writes: etcdctl's `a/b`, another's escapes */
    static const char *const foreign[] = {"a/b/1f", "a%2f/1f", "x.rwlock/1f", "%zz/1f", "a/1x"};
    for (size_t j = 0; j < sizeof foreign / sizeof foreign[0]; j++)
        CHECK(!dlock__etcd_key_lock(foreign[j], strlen(foreign[j]), name, sizeof name, &kind));
    /* ordinary names are etcdctl's keys */
    char *plain = dlock__etcd_lock_prefix("jobs-nightly", DLOCK__MUTEX);
    CHECK(strcmp(plain, "jobs-nightly/") == 0);
    free(plain);
    for (size_t j = 0; j < n; j++)
        free(prefixes[j]);
    free(prefixes);
    free_names(&ns);
}
#endif

/* ---------------------------------------------------------------- MariaDB/MySQL */

#ifdef DLOCK_WITH_MYSQL
/* GET_LOCK's names as the laxest server compares them: without regard to
 * ASCII case (MySQL) or trailing spaces (PAD SPACE collations). */
static void fold(char *s)
{
    for (char *t = s; *t != '\0'; t++) {
        if (*t >= 'A' && *t <= 'Z')
            *t = (char) (*t - 'A' + 'a');
    }
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ')
        s[--n] = '\0';
}

static int by_mapped(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

static void mysql_names_one_to_one(void)
{
    names ns = make_names(600);
    char **mapped = calloc(ns.n, sizeof *mapped);
    char out[DLOCK__MY_NAME_MAX * 4 + 1];

    CHECK(mapped != NULL);
    for (size_t i = 0; i < ns.n; i++) {
        CHECK_RC(dlock__my_name(ns.all[i], 0, out, sizeof out), DLOCK_OK);
        CHECK_INT(strlen(out), <=, DLOCK__MY_NAME_MAX);
        for (const unsigned char *t = (const unsigned char *) out; *t != '\0'; t++)
            CHECK(*t > ' ' && *t < 0x7f);
        fold(out);
        mapped[i] = strdup(out);
        CHECK(mapped[i] != NULL);
    }
    qsort(mapped, ns.n, sizeof *mapped, by_mapped);
    for (size_t j = 1; j < ns.n; j++) {
        if (strcmp(mapped[j], mapped[j - 1]) == 0)
            dt_fail(__FILE__, __LINE__, "two names share the GET_LOCK name '%s'", mapped[j]);
    }
    for (size_t j = 0; j < ns.n; j++)
        free(mapped[j]);
    free(mapped);
    free_names(&ns);
}
#endif

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"escape_round_trip", escape_round_trip},
#ifdef DLOCK_WITH_REDIS
        {"redis_keys_one_to_one", redis_keys_one_to_one},
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
        {"zk_paths_one_to_one", zk_paths_one_to_one},
#endif
#ifdef DLOCK_WITH_ETCD
        {"etcd_keys_one_to_one", etcd_keys_one_to_one},
#endif
#ifdef DLOCK_WITH_MYSQL
        {"mysql_names_one_to_one", mysql_names_one_to_one},
#endif
    };
    return DT_RUN(tests);
}
