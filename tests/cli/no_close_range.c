/* SPDX-License-Identifier: MIT */
/* no_close_range.c - an LD_PRELOAD module for test_cli.sh: close_range()
 * fails with ENOSYS, as on a kernel before 5.9 or under a seccomp filter
 * that refuses it, so that what closes dlock's descriptors in the command
 * dlock run starts is its fallback. Built by test_cli.sh itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

int close_range(unsigned int first, unsigned int last, int flags)
{
    (void) first;
    (void) last;
    (void) flags;
    errno = ENOSYS;
    return -1;
}
