/* memres - CUDA memory resources
 * cache-classes.h: the size classes of the `cache` adaptor and the `arena` kind (included by
 * cache-parts.h, whose hit paths look the class up). Every class size is a multiple of
 * 256 bytes: 256, 512, ..., 2048 (steps of 256), then eight classes per doubling (2304, 2560,
 * ..., 4096, 4608, ...), so that a request is rounded up by at most 12.5 % above 2 KiB.
 * Shared by the kinds and their tests (tests/test-cache.c checks every boundary). */
#pragma once

#include <glib.h>

#define CACHE_CLASS_SMALL_MAX 2048 /* up to here: steps of 256 bytes (classes 0..7) */

/* The class of a request of @size bytes (1 to G_MAXSIZE / 2). */
static inline guint
cache_class_of (gsize size)
{
  guint e;

  if (size <= CACHE_CLASS_SMALL_MAX)
    return size <= 256 ? 0 : (guint) ((size + 255) / 256) - 1;
  e = (guint) (63 - __builtin_clzll ((unsigned long long) (size - 1))); /* >= 11 */
  return 8 + (e - 11) * 8 + (guint) (((size - 1) >> (e - 3)) & 7);
}

/* The bytes of class @cls: the largest request it serves. */
static inline gsize
cache_class_size (guint cls)
{
  guint e, sub;

  if (cls < 8)
    return (gsize) (cls + 1) * 256;
  e = (cls - 8) / 8 + 11;
  sub = (cls - 8) % 8;
  return (gsize) (9 + sub) << (e - 3);
}
