/* testutil-adaptors.h: the in-test kinds of the adaptor tests (testutil-adaptors.c). */
#ifndef TESTUTIL_ADAPTORS_H
#define TESTUTIL_ADAPTORS_H

#include "testutil.h"

/* ---- tight ---- */

typedef struct
{
  guint64 capacity;
  guint64 used;   /* atomic */
  guint64 cached; /* atomic: freed, held until trimmed */
  gint trims;     /* atomic */
} TightResource;

extern gint balky_calls;

void register_kinds (void);

#endif
