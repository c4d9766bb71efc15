/* descriptor-layout.h: the byte layout of a buffer descriptor (core/ipc/ipc-private.h documents
 * it), for tests that read or forge its fields. Integers are little-endian. */
#pragma once

#include <memres/memres-plugin.h>

/* Byte offsets of the fields, and the size of the whole descriptor. */
enum
{
  OFF_MAGIC = 0,        /* u32 "MRBD" */
  OFF_VERSION = 4,      /* u16 */
  OFF_LENGTH = 6,       /* u16, 160 */
  OFF_KIND = 8,         /* char[32], NUL-padded */
  OFF_POOL_ID = 40,     /* [16] */
  OFF_DEVICE_UUID = 56, /* [16] */
  OFF_OFFSET = 72,      /* u64, bytes */
  OFF_SIZE = 80,        /* u64, bytes */
  OFF_EXPORT_DATA = 88, /* [64], the kind's */
  OFF_RESERVED = 152,   /* [8], zero */
  DESC_SIZE = MEMRES_BUFFER_DESCRIPTOR_SIZE,
};

/* Stores @v as 8 little-endian bytes at @p. */
static inline void
mt_put_u64 (guint8 *p, guint64 v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (v >> (8 * i)) & 0xff;
}

/* The 8 little-endian bytes at @p. */
static inline guint64
mt_get_u64 (const guint8 *p)
{
  guint64 v = 0;

  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
