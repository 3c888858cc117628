/* SPDX-License-Identifier: MIT */
/* server_zookeeper.c - the "zookeeper" server kind: a standalone ZooKeeper
 * 3.8 (Debian's jars) started straight with java, no wrapper script.
 *
 * Fast start: a small heap, SerialGC, C1 only (TieredStopAtLevel=1: a test
 * server never runs long enough for C2 to pay off), class data sharing, no
 * admin server, no JMX perf file. tickTime 200 ms so sessions may be as
 * short as 400 ms (2 ticks); maxSessionTimeout stays at 60 s so a client
 * asking for a long session is not cut down to 20 ticks. forceSync=no: the
 * log is written at each commit but not fsynced, so a kill -9 keeps what
 * was acknowledged (the OS has it) without a disk flush per write.
 *
 * A member of an ensemble gets the same, plus a server.N line per member
 * (ids from 1, in member order; quorum and election ports of their own)
 * and its id in DATADIR/myid, rewritten at each start so that a member
 * whose data was removed still knows who it is. With ticks of 200 ms,
 * followers give up on a silent leader after syncLimit (5) ticks. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CLASSPATH "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

static void write_myid(const dt_server *s)
{
    char path[200];
    snprintf(path, sizeof path, "%s/data", s->dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        dt_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/data/myid", s->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        dt_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    fprintf(f, "%d\n", s->member + 1);
    fclose(f);
}

static void zk_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    char path[200];
    int argc = 0;

    snprintf(path, sizeof path, "%s/zoo.cfg", s->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        dt_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    fprintf(f,
            "tickTime=200\n"
            "initLimit=10\n"
            "syncLimit=5\n"
            "dataDir=%s/data\n"
            "clientPort=%d\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,mntr,stat,cons\n"
            "forceSync=no\n"
            "minSessionTimeout=400\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n",
            s->dir, s->port);
    for (int i = 0; s->ensemble != NULL && i < s->ensemble->n; i++) {
        const dt_server *m = &s->ensemble->members[i];
        fprintf(f, "server.%d=127.0.0.1:%d:%d\n", i + 1, m->peer_port, m->election_port);
    }
    for (int i = 0; i < s->nargs; i++)
        fprintf(f, "%s\n", s->args[i]); /* extra args are zoo.cfg lines */
    fclose(f);
    if (s->ensemble != NULL)
        write_myid(s);

    const char *cp = getenv("DT_ZK_CLASSPATH");
    snprintf(bufs[0], 256, "%s", cp != NULL && cp[0] != '\0' ? cp : DEFAULT_CLASSPATH);
    snprintf(bufs[1], 256, "%s", path);
    argv[argc++] = "java";
    argv[argc++] = "-Xmx128m";
    argv[argc++] = "-Xms32m";
    argv[argc++] = "-Xss512k";
    argv[argc++] = "-XX:+UseSerialGC";
    argv[argc++] = "-XX:TieredStopAtLevel=1";
    argv[argc++] = "-Xshare:auto";
    argv[argc++] = "-XX:-UsePerfData";
    argv[argc++] = "-Dzookeeper.admin.enableServer=false";
    argv[argc++] = "-Dzookeeper.jmx.log4j.disable=true";
    /* DT_ZK_LOG_LEVEL=info (or debug) to see what the servers did */
    const char *level = getenv("DT_ZK_LOG_LEVEL");
    snprintf(bufs[2], 256, "-Dorg.slf4j.simpleLogger.defaultLogLevel=%s",
             level != NULL && level[0] != '\0' ? level : "warn");
    argv[argc++] = bufs[2];
    argv[argc++] = "-Dorg.slf4j.simpleLogger.showDateTime=true";
    argv[argc++] = "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS";
    argv[argc++] = "-cp";
    argv[argc++] = bufs[0];
    argv[argc++] = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
    argv[argc++] = bufs[1];
    argv[argc] = NULL;
}

/* The answer to "srvr" (NUL-terminated in buf, "" if none). */
static void srvr(const dt_server *s, char *buf, size_t len)
{
    size_t used = 0;
    ssize_t n;
    buf[0] = '\0';
    int fd = dt__tcp_connect(s->port, 200);
    if (fd < 0)
        return;
    if (write(fd, "srvr", 4) != 4) {
        close(fd);
        return;
    }
    while (used + 1 < len && (n = read(fd, buf + used, len - 1 - used)) > 0)
        used += (size_t) n;
    buf[used] = '\0';
    close(fd);
}

/* "srvr" says "Mode: standalone" (in an ensemble: leader, follower) once
 * the server serves requests (before that: "This ZooKeeper instance is not
 * currently serving requests"). */
static int zk_answers(const dt_server *s)
{
    char buf[1024];
    srvr(s, buf, sizeof buf);
    return strstr(buf, "Mode: ") != NULL;
}

static int zk_leads(const dt_server *s)
{
    char buf[1024];
    srvr(s, buf, sizeof buf);
    return strstr(buf, "Mode: leader") != NULL;
}

static void zk_wipe(const dt_server *s)
{
    char path[200];
    snprintf(path, sizeof path, "%s/data", s->dir);
    dt__remove_tree(path);
}

static void zk_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "/usr/share/zookeeper/bin/zkCli.sh -server 127.0.0.1:%d ", s->port);
}

static const dt_server_op_entry zk_ops[] = {
    {NULL, NULL, NULL, 0},
};

const dt_server_kind dt__zookeeper_kind = {
    .name = "zookeeper",
    .scheme = "zk",
    .ensemble_ports = 2,
    .durable = 1,
    .start_timeout_ms = 60000,
    .expiry_lag_ms = 200, /* tickTime */
    .argv = zk_argv,
    .answers = zk_answers,
    .leads = zk_leads,
    .wipe = zk_wipe,
    .cli_prefix = zk_cli_prefix,
    .ops = zk_ops,
};
