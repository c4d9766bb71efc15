/* memres - CUDA memory resources
 * segment-index.h: the process-wide index of segments that memres_lookup() reads, as segments.c
 * sees it (the operations in segment-index.c; the slots written in segment-slots.c; the readers
 * in segment-lookup.c; their layout in segment-index-layout.h): every call but memres_lookup() is
 * made with segments.c's lock held, and each change is published to the readers before it
 * returns. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "segment-index.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include "memres-private.h"

G_BEGIN_DECLS

/* One segment in the index. Its first 48 bytes are what memres_lookup() answers, laid out as
 * the first 48 of a MemresLookupInfo (resource, then the MemresSegment up to its tag), read by
 * lookups word by word (atomic loads, under the sequence lock) and copied as they lie; the rest
 * is the writer's. An entry is never freed: once removed it waits on a free list for the next
 * segment, so a reader holding a stale pointer reads valid memory. */
typedef struct
{
  MemresResource *mr;
  guint64 base;
  guint64 length; /* end - base */
  union
  {
    struct
    {
      gint device;
      guint32 handle_types;
    };
    guint64 dev_types;
  };
  union
  {
    guint32 tag_id;
    guint64 tag_word; /* tag_id and 4 zero bytes */
  };
  const char *tag;
  guint64 end;       /* writer: one past the last byte */
  guint live_at;     /* writer: its place in _memres_index_live() */
  guint8 unmapping;  /* writer: its UNMAPPING event is being delivered */
  guint8 dying : 1;  /* writer: inside _memres_index_remove_many() */
  guint8 coarse : 1; /* writer: 64 MiB or more, kept in its regions' slots, not its pages' */
  guint16 gen;       /* writer: counts the entry's removals (a removed one is reused) */
} MemresIndexEntry;

G_STATIC_ASSERT (sizeof (MemresIndexEntry) == 64);

/* @mr's segment at @base, or NULL. */
MemresIndexEntry *_memres_index_find (MemresResource *mr, guint64 base);
/* _memres_index_find() of each of the @n segments' bases, into @out (NULL where none; the same
 * entry twice where a base comes twice), each page read once. */
void _memres_index_find_many (MemresResource *mr, const MemresSegment *segments, gsize n,
                              MemresIndexEntry **out);
/* Whether a segment of @mr overlaps [@base, @end). */
gboolean _memres_index_overlaps (MemresResource *mr, guint64 base, guint64 end);
/* Whether a segment of @mr overlaps one of the @n segments @sorted (in address order, none
 * overlapping another): each page they span read once. */
gboolean _memres_index_overlaps_many (MemresResource *mr, MemresIndexEntry *const *sorted, guint n);
/* Adds a copy of @e (base < end), published; returns the index's entry. */
MemresIndexEntry *_memres_index_insert (const MemresIndexEntry *e);
/* Adds a copy of each of the @n segments @src (none overlapping another), published; their
 * entries in @out. Each page they touch is rewritten once, whatever the number of them in it. */
void _memres_index_insert_many (const MemresIndexEntry *src, guint n, MemresIndexEntry **out);
/* @e now ends at @end (>= its end), published. */
void _memres_index_grow (MemresIndexEntry *e, guint64 end);
/* Removes @e, published; @e is not to be used after. */
void _memres_index_remove (MemresIndexEntry *e);
/* Removes the @n entries @es (each once), published, each page they touch rewritten once; they
 * are not to be used after. */
void _memres_index_remove_many (MemresIndexEntry *const *es, guint n);
/* Removes every segment of @mr in one publication. */
void _memres_index_remove_resource (MemresResource *mr);
/* Every entry (MemresIndexEntry *), in no order; borrowed, valid until the next change. */
GPtrArray *_memres_index_live (void);
/* Sorts an array of MemresIndexEntry * in address order (base, then longest first). */
void _memres_index_sort (GPtrArray *entries);

G_END_DECLS
