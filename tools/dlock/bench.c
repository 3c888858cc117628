/* bench.c - `dlock bench`: placeholder until the benchmark lands. */
#include "cli.h"

#include <stdio.h>

int cmd_bench(int argc, char **argv)
{
    (void) argc;
    (void) argv;
    fprintf(stderr, "dlock bench: not built yet\n");
    return EXIT_USAGE;
}
