/* memres - CUDA memory resources
 * fork.h: fork generations and the atfork handlers (fork.c); the check of an inherited
 * resource, which the hot path makes, is in hot-path.h. Included through memres-private.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "fork.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include "hot-path.h"

G_BEGIN_DECLS

/* fork.c: the child of a fork() after the driver was initialized (see there).
 * _memres_fork_note_driver_init(): cuInit ran in this generation (cuda-driver.c).
 * _memres_fork_driver_lost(): the driver was initialized before a fork of this process: it
 *   must not be called here. */
void _memres_fork_note_driver_init (void);
gboolean _memres_fork_driver_lost (void);
/* Whether the release function of wrapped memory with @flags, wrapped in fork @generation, must
 * not run: device-accessible memory wrapped before the fork (its release would call the
 * driver). */
gboolean _memres_fork_skips_release (gint generation, MemresMemoryFlags flags);
/* fork.c's atfork handlers (see there): the live resources and the kinds with an at_fork slot
 * (added when made, removed when finalized or freed); each module's part, taking (prepare) and
 * releasing (parent, child) its locks (memres_fork_mutex() for one GMutex). */
void _memres_fork_add_resource (MemresResource *mr);
void _memres_fork_remove_resource (MemresResource *mr);
void _memres_fork_add_kind (MemresKind *kind);
void _memres_fork_remove_kind (MemresKind *kind);
/* Each module hands fork.c its part when its locks first matter (fork.c calls it through the
 * pointer, so that no file's calls circle back through fork.c): in prepare the parts in the
 * order of these ranks, the kinds' and resources' slots between IPC_TABLES and REGISTRY; parent
 * and child the reverse. IPC_TABLES and SLEEP are called with each live resource. */
typedef enum
{
  MEMRES_FORK_LOADER,     /* the load token (loader.c) */
  MEMRES_FORK_IPC_IMPORT, /* import_pool_lock (ipc-pools.c) */
  MEMRES_FORK_IPC_TABLES, /* an imported pool's mapping table (ipc-pools.c) */
  MEMRES_FORK_REGISTRY,   /* registry.c */
  MEMRES_FORK_IPC_POOLS,  /* pools_lock (ipc-pools.c) */
  MEMRES_FORK_COUNTS,     /* counting.c */
  MEMRES_FORK_SLEEP,      /* each resource's sleep state (sleep-state.c), with each live one */
  MEMRES_FORK_TAGS,       /* the interned tags and the defaults (tags.c) */
  MEMRES_FORK_REPORTS,    /* the last out-of-memory reports (oom-report.c) */
  MEMRES_FORK_SEGMENTS,   /* segments.c */
  MEMRES_FORK_DEFERRED,   /* the buffers waiting for a capture's end (buffer-deferred.c) */
  MEMRES_FORK_CONTEXTS,   /* the primary contexts (cuda-driver.c) */
  MEMRES_FORK_N_PARTS
} MemresForkPart;
void _memres_fork_add_part (MemresForkPart part,
                            void (*func) (MemresResource *mr, MemresForkPhase phase));
void _memres_loader_fork (MemresResource *unused, MemresForkPhase phase);

G_END_DECLS
