/* memres - CUDA memory resources
 * version.c: the library's version. */
#include "memres-private.h"

/**
 * memres_get_version:
 *
 * The version of the memres library loaded at run time, as "MAJOR.MINOR.MICRO" (the headers'
 * version is %MEMRES_VERSION_STRING). Thread-safe.
 *
 * Returns: (transfer none): a static string
 *
 * Since: 1.0
 */
const char *
memres_get_version (void)
{
  return MEMRES_VERSION_STRING;
}
