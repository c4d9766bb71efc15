/* testutil-sleep.h: what the sleep tests share (testutil-sleep.c). */
#ifndef TESTUTIL_SLEEP_H
#define TESTUTIL_SLEEP_H

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

gboolean require_device (void);

MemresResource *new_ok (const char *spec);

MemresBuffer *alloc_tagged (MemresResource *mr, const char *tag, gsize size);

int live_handles (void);

guint64 device_free_bytes (void);

void sleep_ok (MemresResource *mr, const char *tag, MemresSleepPolicy *policy);

void wake_ok (MemresResource *mr, const char *tag);

MemresSleepPolicy *policy_new (MemresSleepMode mode);

void assert_sleep_segment_events (MemresResource *mr, const char *tag, MemresBuffer *const *bufs,
                                  guint n_bufs, guint n_segments, guint64 bytes);

void test_no_open_buffer (gconstpointer spec);

/* How many of the @n_names traced calls (mt_fake_trace_end()) are @entry. */
guint trace_count (const char **names, int n_names, const char *entry);

/* Whether the granule at @address has physical memory mapped (the fake's handle table:
 * cuMemRetainAllocationHandle). */
gboolean granule_mapped (guint64 address);

/* Adds the granules (mt_device_granularity(), each its first byte's address) under @buf to @set
 * (a GHashTable of addresses, g_hash_table_new (NULL, NULL)). */
void granules_add (GHashTable *set, MemresBuffer *buf);

/* Asserts that every granule of @set is mapped (@mapped) or not (granule_mapped()). */
void assert_granules (GHashTable *set, gboolean mapped);

/* The tagged buffers of a sleep test: a stack and buffers of two tags (and none), each tagged
 * buffer written with its pattern (seed TAGGED_SET_SEED + its index), the granules under each
 * tag's buffers and their bytes. The tags are compared by address: pass the same strings. */
#define TAGGED_SET_MAX  480
#define TAGGED_SET_SEED 1000
typedef struct
{
  MemresResource *mr;
  const char *tag[2];                 /* the two tags */
  GHashTable *granules[2];            /* the granules under each tag's buffers (closed ones too) */
  guint64 bytes[2];                   /* the bytes of each tag's buffers */
  guint n;                            /* buffers allocated */
  MemresBuffer *bufs[TAGGED_SET_MAX]; /* NULL once closed */
  const char *tags[TAGGED_SET_MAX];
  guint64 addrs[TAGGED_SET_MAX];
} TaggedSet;

/* new_ok (@spec) and no buffer, for tags @a and @b. */
void tagged_set_init (TaggedSet *s, const char *spec, const char *a, const char *b);
/* A buffer of @size bytes of @tag (one of the set's two, or NULL) from the set's stack
 * (alloc_tagged()), written with its pattern when tagged; returns its index. */
guint tagged_set_add (TaggedSet *s, const char *tag, gsize size);
/* Asserts that the two tags' buffers lie in granules of their own (chunks and slabs serve one
 * tag). */
void tagged_set_assert_apart (const TaggedSet *s);
/* The open buffers of @tag (NULL: both tags) at their addresses, asleep or not, and when awake
 * with their bytes. */
void tagged_set_check (const TaggedSet *s, const char *tag, gboolean asleep);
/* Closes every open buffer, drops the stack and the granule sets. */
void tagged_set_clear (TaggedSet *s);

#endif
