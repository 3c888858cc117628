/* SPDX-License-Identifier: MIT */
/* url.h - parsing of the store URL that picks the backend (nng style):
 *
 *   scheme://[user[:password]@]host[:port][,host[:port]...][/path][?key=value&...]
 *
 * Parsing is pure (no I/O) so it can be fuzzed. Backends read the parts they
 * understand and must reject options they do not know. */
#ifndef DLOCK_CORE_URL_H
#define DLOCK_CORE_URL_H

#include <stddef.h>
#include <stdint.h>

#define DLOCK__URL_MAX_HOSTS   16
#define DLOCK__URL_MAX_OPTIONS 16
#define DLOCK__URL_MAX_ASKED   96

typedef struct dlock__url_host {
    char *name; /* without IPv6 brackets */
    int port;   /* 0 when absent */
} dlock__url_host;

typedef struct dlock__url_option {
    char *key;
    char *value;
    int used;  /* set by the backend that read it */
    int added; /* by dlock__url_add_options: not in text, messages do not show text */
} dlock__url_option;

typedef struct dlock__url {
    char *text; /* the URL as given, for messages (password masked) */
    /* the URL as given when its user-info is one word (no ':'), which a
     * store may read as a password (Redis) or a user name: see
     * dlock__url_user_is_a_name; NULL otherwise */
    char *text_with_user;
    char *scheme;
    /* the user-info as every message shows it: "user:***@", ":***@",
     * "user@" (a store's user name: dlock__url_user_is_a_name), "***@" (one
     * word that may be a password) or "" */
    char *userinfo;
    char *user;     /* NULL when absent */
    char *password; /* NULL when absent */
    dlock__url_host hosts[DLOCK__URL_MAX_HOSTS];
    size_t nhosts;
    char *path; /* after the authority, without the leading '/'; "" when absent */
    dlock__url_option options[DLOCK__URL_MAX_OPTIONS];
    size_t noptions;
    /* the keys the backend asked for, given or not: the options it knows,
     * for a misspelt one's "did you mean" */
    const char *asked[DLOCK__URL_MAX_ASKED];
    size_t nasked;
} dlock__url;

/* Parses text into *url. Returns DLOCK_OK, DLOCK_EINVAL (with a detail that
 * says what is wrong) or DLOCK_ENOMEM. On failure *url holds nothing. */
int dlock__url_parse(const char *text, dlock__url *url);
void dlock__url_clear(dlock__url *url);

/* Adds the options of query ("key=value&...", %-encoded, without '?') to
 * url's, each over the URL's own of the same key; url->text is left as it
 * was. Returns DLOCK_OK, DLOCK_EINVAL (with a detail) or DLOCK_ENOMEM. */
int dlock__url_add_options(dlock__url *url, const char *query);

/* For a store that reads a user-info without ':' as a user name: messages
 * show it from now on (url->text). Until a store says so it is masked as a
 * password could be ("redis://secret@host"). A user-info with a ':' shows
 * its user always, its password never. */
void dlock__url_user_is_a_name(dlock__url *url);

/* The value of option key (marking it used), or NULL. key must outlive
 * url (a string literal): it is kept as an option the backend knows. */
const char *dlock__url_get(dlock__url *url, const char *key);

/* Reads a duration option (dlock_parse_duration: "250ms", "2s", "1.5",
 * "1m") in milliseconds into *ms, leaving it unchanged when absent. Returns
 * DLOCK_OK or DLOCK_EINVAL. */
int dlock__url_duration(dlock__url *url, const char *key, int64_t min_ms, int64_t *ms);

/* Why a lease has a floor, in every message that refuses a shorter one. */
#define DLOCK__LEASE_FLOOR_WHY                                                                     \
    "(of a shorter one, the drift margin and a round trip leave too little to hold)"

/* As dlock__url_duration for a lease of at least min_ms, refused in the
 * words of every refusal of a short lease ("a lease must be at least"). */
int dlock__url_lease(dlock__url *url, const char *key, int64_t min_ms, int64_t *ms);

/* As dlock__url_duration (from 0 ms), and also "forever", read as -1. */
int dlock__url_duration_or_forever(dlock__url *url, const char *key, int64_t *ms);

/* Reads an integer option in [min, max]. Returns DLOCK_OK or DLOCK_EINVAL. */
int dlock__url_int(dlock__url *url, const char *key, long min, long max, long *value);

/* Reads option key, whose value must be one of the n choices (compared
 * exactly): *value is that choice (choices[k] itself), or NULL when the
 * option is absent. Otherwise DLOCK_EINVAL, *value unchanged, in the words
 * of every refusal of such a value, naming the URL and listing the choices
 * (choices[dflt] marked "the default"; dflt -1: none is):
 *   URL: unknown mode 'tabel' (did you mean mode=table? want mode=table,
 *   the default, mode=session or mode=row)
 *   URL: mode= is empty (want mode=table, the default, ...)
 * "did you mean" only when one is a near miss (dlock__url_nearness). */
int dlock__url_choice(dlock__url *url, const char *key, const char *const *choices, size_t n,
                      int dflt, const char **value);

/* How near a word typed is to a known one, for a "did you mean": 0 (the
 * same but for case) to 2 edits (insertions, deletions, substitutions,
 * swaps of neighbours), or 3 when it is no near miss (more than 2 edits,
 * or 2 in a word of 3 characters or fewer). */
int dlock__url_nearness(const char *typed, const char *known);

/* The nearest of the n known words to typed (the first of the nearest),
 * or NULL when none is a near miss (dlock__url_nearness). */
const char *dlock__url_nearest(const char *typed, const char *const *known, size_t n);

/* DLOCK_EINVAL naming the first option nobody used, with the known option
 * it is likely a misspelling of ("did you mean lease=?"), else DLOCK_OK. */
int dlock__url_check_unused(const dlock__url *url);

#endif
