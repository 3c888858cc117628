/* SPDX-License-Identifier: MIT */
/* server_etcd.c - the "etcd" server kind: a single-member etcd 3.4 with its
 * own client and peer ports and its data dir in the temp dir. Checked and
 * driven with etcdctl (the v3 API), never a hand-written HTTP client.
 *
 * A member of an ensemble is member n<index+1> of a cluster named in
 * --initial-cluster, with the first member's client port as its token (so
 * two clusters of one test never join each other). It ticks twice as
 * slowly as a single member: three members on two busy cores must not
 * lose a leader to a late heartbeat, which would move the leader behind a
 * test's back. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static void etcd_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = 0;
    const dt_ensemble *e = s->ensemble;
    snprintf(bufs[0], 256, "%s/data", s->dir);
    snprintf(bufs[1], 256, "http://127.0.0.1:%d", s->port);
    snprintf(bufs[2], 256, "http://127.0.0.1:%d", s->peer_port);
    snprintf(bufs[4], 256, "t%d", e != NULL ? e->members[0].port : s->port);
    snprintf(bufs[5], 256, "n%d", s->member + 1);
    if (e == NULL) {
        snprintf(bufs[3], 256, "n1=http://127.0.0.1:%d", s->peer_port);
    } else {
        size_t used = 0;
        bufs[3][0] = '\0';
        for (int i = 0; i < e->n && used < 256; i++)
            used += (size_t) snprintf(bufs[3] + used, 256 - used, "%sn%d=http://127.0.0.1:%d",
                                      i > 0 ? "," : "", i + 1, e->members[i].peer_port);
    }
    argv[argc++] = "etcd";
    argv[argc++] = "--name";
    argv[argc++] = bufs[5];
    argv[argc++] = "--data-dir";
    argv[argc++] = bufs[0];
    argv[argc++] = "--listen-client-urls";
    argv[argc++] = bufs[1];
    argv[argc++] = "--advertise-client-urls";
    argv[argc++] = bufs[1];
    argv[argc++] = "--listen-peer-urls";
    argv[argc++] = bufs[2];
    argv[argc++] = "--initial-advertise-peer-urls";
    argv[argc++] = bufs[2];
    /* The --initial-* flags only matter for a new data dir; a restart with
     * the dir kept rejoins from it. */
    argv[argc++] = "--initial-cluster";
    argv[argc++] = bufs[3];
    argv[argc++] = "--initial-cluster-state";
    argv[argc++] = "new";
    argv[argc++] = "--initial-cluster-token";
    argv[argc++] = bufs[4];
    /* A single member still waits one election timeout after a start or
     * restart before it leads and answers: keep that short. */
    argv[argc++] = "--heartbeat-interval";
    argv[argc++] = e != NULL ? "50" : "25";
    argv[argc++] = "--election-timeout";
    argv[argc++] = e != NULL ? "500" : "250";
    argv[argc++] = "--logger";
    argv[argc++] = "zap";
    argv[argc++] = "--log-level";
    argv[argc++] = "warn";
    for (int i = 0; i < s->nargs && argc < 62; i++)
        argv[argc++] = s->args[i];
    argv[argc] = NULL;
}

/* etcd 3.4 runs on amd64 and ppc64le only unless ETCD_UNSUPPORTED_ARCH names
 * the Go architecture it runs on. */
static const char *const *etcd_env(const dt_server *s)
{
    static char arch[128];
    static const char *env[2];
    struct utsname u;
    (void) s;
    env[0] = NULL;
    if (uname(&u) != 0 || strcmp(u.machine, "x86_64") == 0 || strcmp(u.machine, "ppc64le") == 0)
        return env;
    const char *go = strcmp(u.machine, "aarch64") == 0   ? "arm64"
                     : strncmp(u.machine, "arm", 3) == 0 ? "arm"
                     : strcmp(u.machine, "i686") == 0    ? "386"
                                                         : u.machine;
    snprintf(arch, sizeof arch, "ETCD_UNSUPPORTED_ARCH=%s", go);
    env[0] = arch;
    env[1] = NULL;
    return env;
}

static int etcdctl(const dt_server *s, int timeout_ms, const char *a1, const char *a2,
                   const char *a3, const char *a4)
{
    char endpoints[64];
    snprintf(endpoints, sizeof endpoints, "--endpoints=127.0.0.1:%d", s->port);
    const char *argv[] = {
        "etcdctl", endpoints, "--dial-timeout=500ms", "--command-timeout=2s", a1, a2, a3, a4, NULL};
    return dt__run_quiet(argv, timeout_ms);
}

static int etcd_answers(const dt_server *s)
{
    /* A refused connect is the common case while starting: skip the fork. */
    int fd = dt__tcp_connect(s->port, 200);
    if (fd < 0)
        return 0;
    close(fd);
    return etcdctl(s, 3000, "endpoint", "health", NULL, NULL) == 0;
}

/* Whether the member's own status names it as the leader. */
static int etcd_leads(const dt_server *s)
{
    const char *out =
        dt_server_cli(s, "endpoint status -w fields --dial-timeout=300ms --command-timeout=1s "
                         "2>/dev/null");
    const char *id = strstr(out, "\"MemberID\" : "), *leader = strstr(out, "\"Leader\" : ");
    if (id == NULL || leader == NULL)
        return 0;
    unsigned long long me = strtoull(id + 13, NULL, 10), lead = strtoull(leader + 11, NULL, 10);
    return me != 0 && me == lead;
}

static void etcd_wipe(const dt_server *s)
{
    char path[200];
    snprintf(path, sizeof path, "%s/data", s->dir);
    dt__remove_tree(path);
}

static void etcd_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%d ", s->port);
}

static int op_wipe(dt_server *s, const char *arg)
{
    (void) arg;
    return etcdctl(s, 5000, "del", "", "--from-key=true", NULL) == 0 ? 0 : -1;
}

/* The keys of lock NAME as etcd's own Mutex lays them out (NAME/<lease>),
 * and NAME itself. */
static int op_drop_lock(dt_server *s, const char *name)
{
    char prefix[600];
    if (name == NULL)
        return -1;
    snprintf(prefix, sizeof prefix, "%s/", name);
    int rc = etcdctl(s, 5000, "del", prefix, "--prefix", NULL);
    if (rc == 0)
        rc = etcdctl(s, 5000, "del", name, NULL, NULL);
    return rc == 0 ? 0 : -1;
}

/* Compacts the history to the current revision: watches that start below it
 * are cancelled, as after a long partition. */
static int op_compact(dt_server *s, const char *arg)
{
    char rev[32];
    (void) arg;
    const char *out = dt_server_cli(s, "get dt-compact-probe -w fields 2>/dev/null");
    const char *at = strstr(out, "\"Revision\" : ");
    if (at == NULL)
        return -1;
    snprintf(rev, sizeof rev, "%lld", strtoll(at + 13, NULL, 10));
    return etcdctl(s, 10000, "compaction", rev, NULL, NULL) == 0 ? 0 : -1;
}

static const dt_server_op_entry etcd_ops[] = {
    {"wipe", "delete every key", op_wipe, 1},
    {"drop_lock", "delete the keys of lock NAME (NAME/... and NAME)", op_drop_lock, 2},
    {"compact", "compact to the current revision (cancels older watches)", op_compact, 0},
    {NULL, NULL, NULL, 0},
};

const dt_server_kind dt__etcd_kind = {
    .name = "etcd",
    .scheme = "etcd",
    .needs_peer_port = 1,
    .ensemble_ports = 1,
    .durable = 1,
    .start_timeout_ms = 20000,
    .lease_unit_ms = 1000,
    .expiry_lag_ms = 500,
    .argv = etcd_argv,
    .env = etcd_env,
    .answers = etcd_answers,
    .leads = etcd_leads,
    .wipe = etcd_wipe,
    .cli_prefix = etcd_cli_prefix,
    .ops = etcd_ops,
};
