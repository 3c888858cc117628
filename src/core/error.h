/* error.h - error codes' text and the calling thread's failure detail. */
#ifndef DLOCK_CORE_ERROR_H
#define DLOCK_CORE_ERROR_H

#include "dlock.h"

/* Records a printf-style detail for the calling thread and returns code. */
int dlock__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's detail (start of a public call). */
void dlock__clear_error(void);

#endif
