/* memres - CUDA memory resources
 * sleep.h: a resource's sleep state (sleep-state.c: MemresResource.sleep, made at creation for a
 * stack that can sleep, else NULL), the buffers of each tag it tracks (tagged buffers of such a
 * stack only: an untagged pair and every pair of a stack that cannot sleep never reach it), and
 * the checks of a sleeping buffer, which the rest of the core calls; sleep-policy.c the policies;
 * sleep.c, above them all, puts tags to sleep and wakes them. sleep-state.c calls no other file of
 * the core but tags.c: what it frees of sleep.c's (backups, policies) it frees through the
 * functions sleep.c gave it. Included by memres-private.h. */
#pragma once
#ifndef MEMRES_CORE_COMPILATION
#error "sleep.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* sleep-policy.c: a policy (memres_sleep_policy_new()), immutable once a sleep uses it; read by
 * sleep.c */
struct _MemresSleepPolicy
{
  gatomicrefcount ref;
  MemresSleepMode mode;
  char *path;
  MemresResource *host_mr; /* BACKUP, FILE: where the page-locked memory comes from, or NULL */
};

typedef struct _MemresSleepEntry MemresSleepEntry;

/* sleep-backup.c: the page-locked memory of a run of address-contiguous buffers (BACKUP), their
 * bytes in address order; each of the run's entries holds a reference */
typedef struct _MemresSleepBackup MemresSleepBackup;

/* a tracked buffer: while it sleeps, its run's backup (BACKUP) and its bytes' offset there, or
 * its offset in the file (FILE) */
struct _MemresSleepEntry
{
  MemresBuffer *buf;
  MemresSleepBackup *backup;
  gsize backup_offset;
  guint64 file_offset;
};

/* sleep-backup.c, for sleep.c. _save(): the backups of @entries (their buffers with bytes, in
 * runs of address-contiguous ones on one device: one backup of @host's and one cuMemcpyAsync
 * per run, on @stream) made and filled, one cuStreamSynchronize per device; on failure the
 * backups made so far stay in the entries for the caller to free (the buffers untouched).
 * _restore(): the bytes copied back (one copy per run whose buffers are contiguous in the
 * address space and in their backup: buffers closed while asleep split runs), waited for the
 * same way; the backups stay. Both name the failing step and driver call. _unref(): drops an
 * entry's reference (the last closes the page-locked memory). */
gboolean _memres_sleep_backup_save (MemresResource *host, MemresSleepEntry **entries, gsize n,
                                    MemresStream stream, GError **error);
gboolean _memres_sleep_backup_restore (MemresSleepEntry **entries, gsize n, MemresStream stream,
                                       GError **error);
void _memres_sleep_backup_unref (MemresSleepBackup *backup);

typedef struct
{
  /* the open tagged buffers of the tag (a set of MemresBuffer *): one insert at an allocation,
   * one removal at a close, nothing allocated for them */
  GHashTable *buffers;
  /* MemresBuffer * -> MemresSleepEntry * (owned): made for each of @buffers by a sleep's begin(),
   * kept while the tag sleeps (their backups), freed when it is awake again (sleep.c's end());
   * NULL meanwhile */
  GHashTable *entries;
  MemresSleepPolicy *policy; /* while asleep */
  guint64 file_size;         /* FILE: the bytes the sleep wrote */
  /* FILE: the sleep's file, held open with flock() while asleep, so that no other sleep (of
   * any tag, resource or process) writes over it; -1 when none */
  int file_fd;
} MemresSleepTag;

struct _MemresSleepState
{
  GMutex lock;
  GCond cond;
  /* atomic: bit @tag set while the tag sleeps or is being put to sleep or woken (read without the
   * lock by the checks of a buffer); written under @lock */
  guint64 asleep;
  guint64 busy; /* under @lock: a sleep or wake of the tag in progress */
  /* under @lock: the thread running the sleep or wake of each busy tag (a segment callback on
   * it that closes a buffer of the tag is refused rather than waiting for itself) */
  GThread *busy_owner[MEMRES_TAGS_MAX + 1];
  MemresResource *host_mr; /* the page-locked resource made at first use (under @lock) */
  MemresSleepTag tags[MEMRES_TAGS_MAX + 1];
};

/* sleep.c, at its first sleep: how sleep-state.c frees an entry's reference to a backup, a
 * policy and a resource (a closed buffer's entry, a finalized resource's state) */
typedef struct
{
  void (*free_backup) (MemresSleepBackup *backup);
  void (*free_policy) (MemresSleepPolicy *policy);
  void (*free_resource) (MemresResource *mr);
} MemresSleepFrees;
void _memres_sleep_set_frees (const MemresSleepFrees *frees);
void _memres_sleep_entry_free (MemresSleepEntry *entry);
/* A table of MemresSleepTag.entries (its values freed with _memres_sleep_entry_free()) */
GHashTable *_memres_sleep_entries_new (void);

/* At creation, for a stack that can sleep (resource.c decides: a layer with the sleep slot
 * whose upstreams can, reached through MEMRES_KIND_PASSES_ALLOCATIONS adaptors). Freed at
 * finalize (no buffer is open then). */
MemresSleepState *_memres_sleep_state_new (void);
void _memres_sleep_state_free (MemresSleepState *state);

/* Allocation of a tagged buffer on a resource with a sleep state: _memres_sleep_check_tag() (below)
 * FALSE with MEMRES_SLEEP_ERROR_TAG_ASLEEP when @tag is asleep there (before the slot call); after
 * it, _memres_sleep_track() records the buffer under its tag, or refuses it the same way (a sleep
 * that began meanwhile: the caller closes it). */
gboolean _memres_sleep_track (MemresResource *mr, MemresBuffer *buf, GError **error);
/* Sets MEMRES_SLEEP_ERROR_TAG_ASLEEP for an allocation under @tag; returns FALSE */
gboolean _memres_sleep_tag_asleep_error (GError **error, guint tag);

/* Whether @tag sleeps on @state (or is being put to sleep or woken): no lock */
static inline gboolean
_memres_sleep_tag_asleep (MemresSleepState *state, guint tag)
{
  return (__atomic_load_n (&state->asleep, __ATOMIC_ACQUIRE) >> tag) & 1;
}

/* inline: one load and one test on the tagged allocation's hot path */
static inline gboolean
_memres_sleep_check_tag (MemresResource *mr, guint tag, GError **error)
{
  if (G_LIKELY (!_memres_sleep_tag_asleep (mr->sleep, tag)))
    return TRUE;
  return _memres_sleep_tag_asleep_error (error, tag);
}

/* The close of a tagged buffer of a resource with a sleep state: _begin() waits for a sleep or
 * wake of its tag in progress and takes the buffer out of its tag, with its entry (*@entry NULL
 * when it has none: its tag is awake); FALSE with MEMRES_SLEEP_ERROR_BUSY, nothing changed, when
 * that sleep or wake runs on this very thread (a segment event callback inside it: waiting
 * would never end). When the close then fails, the buffer still open, _end() puts it back with
 * @entry; when it closed, the caller frees @entry (_memres_sleep_entry_free(): its backup). */
gboolean _memres_sleep_untrack_begin (MemresResource *mr, MemresBuffer *buf,
                                      MemresSleepEntry **entry, GError **error);
void _memres_sleep_untrack_end (MemresResource *mr, MemresBuffer *buf, MemresSleepEntry *entry);

/* Whether @buf sleeps (its tag asleep on its resource); FALSE with MEMRES_SLEEP_ERROR_ASLEEP
 * naming @what when it does. */
gboolean _memres_buffer_asleep_slow (MemresBuffer *buf);
gboolean _memres_buffer_check_awake (MemresBuffer *buf, const char *what, GError **error);

G_END_DECLS
