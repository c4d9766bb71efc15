/* memres - CUDA memory resources
 * tags.h: what the allocate/close hot path reads of tags (tags.c): the calling thread's innermost
 * scope tag and whether any device or stream default is set (one OR and one branch when neither
 * is), the tag an allocation made on a thread without a scope gets from its stream or device,
 * and the record of the allocate or close in progress that a counted layer counts under its tag
 * (buffer.c and buffer-resize.c set it around the slot call of a tagged buffer, through
 * hot-path.h's _memres_buffer_slot_allocate() and _memres_buffer_call_deallocate(); counting.h's
 * counted slots read it). Included by memres-private.h. */
#pragma once

#include <memres/memres-plugin.h>

#include "hot-path.h"

G_BEGIN_DECLS

/* A tag's id: 1 to MEMRES_TAGS_MAX, in the order the names were first used; 0 is no tag. */

/* The calling thread's tag state is part of its hot-path block (hot-path.h: MemresThread):
 * _memres_thread.tag_scope, the innermost tag of its scope stack (0: none), and
 * _memres_thread.call_record, set only while a tagged buffer's allocate or deallocate slot runs
 * in a stack where a layer reads tags: the buffer's allocation record (MemresBuffer.alloc, the
 * buffer's tag set), which a counted layer compares the record it counts with (a chunk a caching
 * layer takes from its upstream is another record: it has no tag). */
/* how many device and stream defaults are set (0 on the fast path) */
G_GNUC_INTERNAL extern guint _memres_tag_defaults;

/* The tag of an allocation on @stream from a resource of @device made on a thread without a
 * scope: the stream's default, else the device's, else 0. No lock. */
guint _memres_tag_resolve (MemresStream stream, gint device);
/* The interned name of tag @id (1 to MEMRES_TAGS_MAX), or NULL for 0; the id of @name, 0 when it
 * was never used (@error: MEMRES_TAG_ERROR_INVALID, MEMRES_TAG_ERROR_UNKNOWN). */
const char *_memres_tag_name (guint id);
guint _memres_tag_find (const char *name, GError **error);
/* how many tags exist (their ids are 1 to that) */
guint _memres_tag_count (void);

/* The record of an adaptor's upstream call for memory of its own that serves one tag
 * (memres_upstream_allocate_for_tag(), stack.c) and that tag's id: memres_allocation_get_tag()
 * answers it for that record during the call (a thread-local of tags.c, off the hot path: the
 * counted layers' _memres_tag_of_call() does not read it, so such memory is counted under no
 * tag). _memres_tag_record_set() makes @record (NULL: none) the thread's and returns the one it
 * replaces, to set back after the call (calls nest: a cache over a cache). */
typedef struct
{
  const MemresAllocation *record;
  guint id;
} MemresTagRecord;
MemresTagRecord _memres_tag_record_set (MemresTagRecord record);

/* tags.c's lock around fork() */
void _memres_tags_fork (MemresResource *unused, MemresForkPhase phase);

G_END_DECLS
