/* SPDX-License-Identifier: MIT */
/* owner.c - the line that tells who took a hold. It is made once per
 * client and stored with each hold by the backend (backend.h,
 * client_cfg.owner_info); it carries no secret: an operator reads it. */
#include "owner.h"

#include "../base/error.h"
#include "../base/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define TAG "dlock1"

int dlock__owner_info_make(const char *label, char *out, size_t len)
{
    char host[256];
    struct timeval now;

    if (label == NULL)
        label = "";
    int rc = dlock__check_text(label, DLOCK__LABEL_MAX, "option label", "labels");
    if (rc != DLOCK_OK)
        return rc;
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "-");
    host[sizeof host - 1] = '\0';
    /* A host name is one word of printable ASCII; anything else reads as "-". */
    for (const char *p = host; *p != '\0'; p++) {
        if (*p <= ' ' || *p > '~') {
            snprintf(host, sizeof host, "-");
            break;
        }
    }
    gettimeofday(&now, NULL);
    int64_t started_ms = (int64_t) now.tv_sec * 1000 + now.tv_usec / 1000;
    int n = snprintf(out, len, TAG " %.200s %ld %" PRId64 " %s", host, (long) getpid(), started_ms,
                     label);
    if (n < 0 || (size_t) n >= len)
        return dlock__fail(DLOCK_EINVAL, "owner record does not fit");
    return DLOCK_OK;
}

/* The next space-separated word of *p, NUL-terminated in place. */
static char *word(char **p)
{
    char *w = *p, *end = strchr(w, ' ');

    if (end == NULL)
        return NULL;
    *end = '\0';
    *p = end + 1;
    return w;
}

void dlock__owner_info_read(const char *info, dlock_holder *h, char *buf, size_t len)
{
    char *p = buf, *tag, *host, *pid, *started, *end;

    h->host = "";
    h->label = "";
    h->pid = 0;
    h->started_ms = 0;
    if (info == NULL || len == 0 || strlen(info) >= len)
        return;
    snprintf(buf, len, "%s", info);
    if ((tag = word(&p)) == NULL || strcmp(tag, TAG) != 0 || (host = word(&p)) == NULL ||
        (pid = word(&p)) == NULL || (started = word(&p)) == NULL)
        return;
    for (const char *c = host; *c != '\0'; c++) {
        if (*c <= ' ' || *c > '~')
            return;
    }
    long pid_value = strtol(pid, &end, 10);
    if (*end != '\0' || pid_value <= 0)
        return;
    long long started_value = strtoll(started, &end, 10);
    if (*end != '\0' || started_value <= 0)
        return;
    /* The label is checked as it is made; one read from a store is checked
     * again, since anybody may have written it. */
    if (strchr(p, '\n') != NULL || dlock__check_text(p, DLOCK__LABEL_MAX, "label", "labels") != 0)
        p = "";
    h->host = host;
    h->pid = pid_value;
    h->started_ms = started_value;
    h->label = p;
}
