/* SPDX-License-Identifier: MIT */
/* test_url.c - what the URL's option readers say of a bad value (no
 * server: src/base/url.c alone). A value from a fixed set of choices that
 * is misspelt says what was meant, an empty one says it is empty, and each
 * lists the choices; a value refused names the URL it is in (its password
 * masked), as an unknown option does, but not when the option was added
 * beside the URL (dlock_client_open_with), which the URL does not show. */
#include "../support/harness.h"

#include "base/url.h"

#include <string.h>

/* Parses text, which must parse, into *url. */
static void parse(const char *text, dlock__url *url)
{
    CHECK_RC(dlock__url_parse(text, url), DLOCK_OK);
}

/* Checks that the last failure's message is want exactly. */
static void expect_message(const char *want)
{
    if (strcmp(dlock_errmsg(), want) != 0)
        dt_fail(__FILE__, __LINE__, "got '%s', want '%s'", dlock_errmsg(), want);
}

static const char *const mysql_modes[] = {"table", "session", "row"};
static const char *const names_values[] = {"mapped", "exact"};

static void choice_typo_says_what_was_meant(void)
{
    dlock__url url;
    const char *value = "unchanged";

    parse("mysql://u:pw@127.0.0.1/db?names=exct", &url);
    CHECK_RC(dlock__url_choice(&url, "names", names_values, 2, 0, &value), DLOCK_EINVAL);
    expect_message("mysql://u:***@127.0.0.1/db?names=exct: unknown names 'exct' (did you mean "
                   "names=exact? want names=mapped, the default, or names=exact)");
    CHECK(strcmp(value, "unchanged") == 0);
    dlock__url_clear(&url);

    /* as mysql.c's and pg.c's own mode messages say it */
    parse("mysql://u@127.0.0.1/db?mode=tabel", &url);
    dlock__url_user_is_a_name(&url); /* as mysql.c and pg.c do */
    CHECK_RC(dlock__url_choice(&url, "mode", mysql_modes, 3, 0, &value), DLOCK_EINVAL);
    expect_message("mysql://u@127.0.0.1/db?mode=tabel: unknown mode 'tabel' (did you mean "
                   "mode=table? want mode=table, the default, mode=session or mode=row)");
    dlock__url_clear(&url);

    /* nothing near: the choices only */
    parse("mysql://u@127.0.0.1/db?mode=banana", &url);
    dlock__url_user_is_a_name(&url);
    CHECK_RC(dlock__url_choice(&url, "mode", mysql_modes, 3, 0, &value), DLOCK_EINVAL);
    expect_message("mysql://u@127.0.0.1/db?mode=banana: unknown mode 'banana' (want mode=table, "
                   "the default, mode=session or mode=row)");
    dlock__url_clear(&url);

    /* no default; a default that is not the first choice */
    static const char *const notify[] = {"pubsub", "stream"};
    parse("redis://127.0.0.1?notify=pubsb", &url);
    CHECK_RC(dlock__url_choice(&url, "notify", notify, 2, -1, &value), DLOCK_EINVAL);
    expect_message("redis://127.0.0.1?notify=pubsb: unknown notify 'pubsb' (did you mean "
                   "notify=pubsub? want notify=pubsub or notify=stream)");
    dlock__url_clear(&url);
    static const char *const three[] = {"a1", "b2", "c3"};
    parse("x://h?k=zzzz", &url);
    CHECK_RC(dlock__url_choice(&url, "k", three, 3, 2, &value), DLOCK_EINVAL);
    expect_message("x://h?k=zzzz: unknown k 'zzzz' (want k=a1, k=b2 or k=c3, the default)");
    dlock__url_clear(&url);
}

static void choice_empty_says_it_is_empty(void)
{
    dlock__url url;
    const char *value = "unchanged";
    static const char *const pg_modes[] = {"session", "table"};

    parse("mysql://u:pw@127.0.0.1/db?mode=", &url);
    CHECK_RC(dlock__url_choice(&url, "mode", mysql_modes, 3, 0, &value), DLOCK_EINVAL);
    expect_message("mysql://u:***@127.0.0.1/db?mode=: mode= is empty (want mode=table, the "
                   "default, mode=session or mode=row)");
    dlock__url_clear(&url);
    parse("postgres://u@127.0.0.1/db?mode=&lease=5s", &url);
    dlock__url_user_is_a_name(&url);
    CHECK_RC(dlock__url_choice(&url, "mode", pg_modes, 2, 0, &value), DLOCK_EINVAL);
    expect_message("postgres://u@127.0.0.1/db?mode=&lease=5s: mode= is empty (want "
                   "mode=session, the default, or mode=table)");
    CHECK(strcmp(value, "unchanged") == 0);
    dlock__url_clear(&url);
}

static void choice_good_or_absent(void)
{
    dlock__url url;
    const char *value = NULL;

    parse("mysql://u@127.0.0.1/db?mode=row&names=exact", &url);
    CHECK_RC(dlock__url_choice(&url, "mode", mysql_modes, 3, 0, &value), DLOCK_OK);
    CHECK(value == mysql_modes[2]);
    CHECK_RC(dlock__url_choice(&url, "names", names_values, 2, 0, &value), DLOCK_OK);
    CHECK(value == names_values[1]);
    CHECK_RC(dlock__url_check_unused(&url), DLOCK_OK); /* both read */
    dlock__url_clear(&url);

    /* absent: NULL, and the key is one the store knows (its did-you-mean) */
    parse("mysql://u@127.0.0.1/db?nmes=exact", &url);
    value = "unchanged";
    CHECK_RC(dlock__url_choice(&url, "names", names_values, 2, 0, &value), DLOCK_OK);
    CHECK(value == NULL);
    CHECK_RC(dlock__url_check_unused(&url), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "(did you mean names=?)") != NULL);
    dlock__url_clear(&url);

    /* a case slip is no choice: it is told, as a near miss */
    parse("mysql://u@127.0.0.1/db?mode=Table", &url);
    CHECK_RC(dlock__url_choice(&url, "mode", mysql_modes, 3, 0, &value), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "(did you mean mode=table?") != NULL);
    dlock__url_clear(&url);
}

/* A lease the URL gives that is too short names the URL, password masked,
 * as an unknown option does (a new user's trial: ?lease=0 did not). */
static void short_lease_names_the_url(void)
{
    static const char *const texts[] = {"redis://:s3cret@127.0.0.1:1?lease=0",
                                        "redis://:s3cret@127.0.0.1:1?lease=0s",
                                        "redis://:s3cret@127.0.0.1:1?lease=19ms"};
    char want[512];

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        dlock__url url;
        int64_t ms = 7;
        parse(texts[i], &url);
        CHECK_RC(dlock__url_lease(&url, "lease", 20, &ms), DLOCK_EINVAL);
        CHECK(ms == 7);
        const char *value = strstr(texts[i], "lease=") + strlen("lease=");
        snprintf(want, sizeof want,
                 "redis://:***@127.0.0.1:1?lease=%s: option lease=%s: a lease must be at least "
                 "20 ms " DLOCK__LEASE_FLOOR_WHY,
                 value, value);
        expect_message(want);
        dlock__url_clear(&url);
    }
}

/* Every value the URL's readers refuse names the URL, as the lease does. */
static void bad_values_name_the_url(void)
{
    dlock__url url;
    int64_t ms = 0;
    long n = 0;

    parse("redis://u:pw@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x", &url);
    CHECK_RC(dlock__url_duration(&url, "timeout", 1, &ms), DLOCK_EINVAL);
    expect_message("redis://u:***@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x: option "
                   "timeout=0: must be at least 1ms");
    CHECK_RC(dlock__url_int(&url, "pool", 1, 64, &n), DLOCK_EINVAL);
    expect_message("redis://u:***@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x: option "
                   "pool=0: want an integer in 1..64");
    CHECK_RC(dlock__url_duration(&url, "wait", 0, &ms), DLOCK_EINVAL);
    CHECK(strncmp(dlock_errmsg(),
                  "redis://u:***@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x: option wait: "
                  "'soon' is not a duration",
                  strlen("redis://u:***@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x: option "
                         "wait: 'soon' is not a duration")) == 0);
    CHECK_RC(dlock__url_duration_or_forever(&url, "until", &ms), DLOCK_EINVAL);
    expect_message("redis://u:***@127.0.0.1:1?timeout=0&pool=0&wait=soon&until=x: option "
                   "until=x: want a duration or forever");
    dlock__url_clear(&url);
}

/* An option added beside the URL is not in its text: its message does not
 * show the URL as if it were (the CLI names the option it came from). */
static void added_option_not_blamed_on_the_url(void)
{
    dlock__url url;
    int64_t ms = 0;

    parse("redis://127.0.0.1:1?timeout=2s", &url);
    CHECK_RC(dlock__url_add_options(&url, "lease=0"), DLOCK_OK);
    CHECK_RC(dlock__url_lease(&url, "lease", 20, &ms), DLOCK_EINVAL);
    expect_message("option lease=0: a lease must be at least 20 ms " DLOCK__LEASE_FLOOR_WHY);
    dlock__url_clear(&url);

    /* one added over the URL's own: the added one's value, not the URL's */
    parse("redis://127.0.0.1:1?lease=5s", &url);
    CHECK_RC(dlock__url_add_options(&url, "lease=1ms"), DLOCK_OK);
    CHECK_RC(dlock__url_lease(&url, "lease", 20, &ms), DLOCK_EINVAL);
    CHECK(strncmp(dlock_errmsg(), "option lease=1ms: ", strlen("option lease=1ms: ")) == 0);
    dlock__url_clear(&url);
}

/* Options after '&' with no '?' (a new user's mysql://.../db&mode=table):
 * told so, not "bad port" or a database that does not exist. */
static void options_without_question_mark(void)
{
    static const char *const texts[] = {"mysql://u:pw@127.0.0.1:3306/db&mode=table",
                                        "redis://127.0.0.1:1&timeout=1s",
                                        "postgres://u@h/postgres&mode=table&timeout=2s"};
    dlock__url url;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        CHECK_RC(dlock__url_parse(texts[i], &url), DLOCK_EINVAL);
        if (strstr(dlock_errmsg(), "options go after a '?'") == NULL ||
            strstr(dlock_errmsg(), "pw") != NULL)
            dt_fail(__FILE__, __LINE__, "%s: %s", texts[i], dlock_errmsg());
    }
    /* an '&' elsewhere is no option */
    parse("redis://:p%26ss@127.0.0.1:1", &url);
    dlock__url_clear(&url);
    parse("sqlite:///tmp/a&b.db", &url);
    dlock__url_clear(&url);
    parse("mysql://u:p&w=1@127.0.0.1:3306/db", &url);
    dlock__url_clear(&url);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"choice_typo_says_what_was_meant", choice_typo_says_what_was_meant},
        {"choice_empty_says_it_is_empty", choice_empty_says_it_is_empty},
        {"choice_good_or_absent", choice_good_or_absent},
        {"short_lease_names_the_url", short_lease_names_the_url},
        {"bad_values_name_the_url", bad_values_name_the_url},
        {"added_option_not_blamed_on_the_url", added_option_not_blamed_on_the_url},
        {"options_without_question_mark", options_without_question_mark},
    };
    return DT_RUN(tests);
}
