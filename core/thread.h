/* memres - CUDA memory resources
 * thread.h: the calling thread's state that an allocate/close pair reads, in one thread-local
 * block (thread.c): the buffer structures the thread keeps for reuse (buffer.c), the stripe it
 * counts on (counting.c), its innermost tag scope and the record of the tagged slot call in
 * progress (tags.c). One block, so that a pair finds all of it from one address (initial-exec:
 * one load of its offset, then loads relative to the thread pointer) rather than one per
 * variable. Included by hot-path.h and tags.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "thread.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

typedef struct
{
  /* buffer.c: the thread's spare buffer structures, linked through their mr field (NULL: none),
   * and how many more it may keep (0: full, or not set up yet: buffer.c's slow half sets it up,
   * @cache_set, and its thread-exit handler frees the structures and clears it) */
  MemresBuffer *cache_head;
  guint cache_room;
  /* counting.c: the thread's stripe + 1 (0: none yet; _memres_stripe_assign()) */
  guint stripe_index;
  /* tags.c: the innermost tag of the thread's scope stack (0: none) */
  guint32 tag_scope;
  /* buffer.c: the cache above is set up (its thread-exit handler registered) */
  gboolean cache_set;
  /* tags.c: set only while a tagged buffer's allocate or deallocate slot runs, in a stack where a
   * layer reads tags: the buffer's allocation record (MemresBuffer.alloc), which a counted layer
   * compares the record it counts with (tags.h) */
  const MemresAllocation *call_record;
} MemresThread;

/* initial-exec: no __tls_get_addr call on the hot path; the block is small enough for the static
 * TLS room glibc keeps for libraries loaded with dlopen() (as Python's ctypes does). */
G_GNUC_INTERNAL extern __thread MemresThread _memres_thread
    __attribute__ ((tls_model ("initial-exec")));

G_END_DECLS
