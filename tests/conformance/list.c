/* SPDX-License-Identifier: MIT */
/* list.c - the table of conformance tests (list.h). */
#include "conformance.h"

#define CT_ENTRY(name, needs, what) {#name, (needs), ct_##name, (what)},

const ct_test ct_tests[] = {CT_TEST_LIST(CT_ENTRY)};
const size_t ct_ntests = sizeof ct_tests / sizeof ct_tests[0];
