/* SPDX-License-Identifier: MIT */
/* hot_name.h - a name taken in tight loops, and the waiters served beside
 * it: the starvation check the SQL stores' tests share (issue 23: a waiter
 * polls with a backoff that grows, while a client that has just released
 * asks again at once, and used to lose every round; the fault suite's
 * multi-lock waiter not served in 14 s). */
#ifndef DLOCK_TEST_HOT_NAME_H
#define DLOCK_TEST_HOT_NAME_H

/* Starts 4 clients (dt_client(url, options)) that take "hot", hold it
 * 30 ms and give it back, in loops; then a plain waiter on "hot" and a
 * multi-lock waiter on ("hot", "other"), of a client of their own, must
 * each be served within 3 s (their budget: 5 s), and, over the next 8
 * rounds each, the client in the loops served least must get at least
 * half as many rounds as the one served most. Fails the test otherwise.
 * options should give a lease longer than a round ("?lease=5s"). */
void dt_hot_name_serves_waiters(const char *url, const char *options);

#endif
