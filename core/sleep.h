/* memres - CUDA memory resources
 * sleep.h: a resource's sleep state (sleep-state.c: MemresResource.sleep, made at creation for a
 * stack that can sleep, else NULL), the lists of each tag's open buffers (tagged buffers of such a
 * stack only: an untagged pair and every pair of a stack that cannot sleep never reach them; a
 * link on the buffer structure's second line, one list per stripe and tag, changed without a
 * lock by the stripe's thread behind the stripe's owner fence, inline below), and the checks of
 * a sleeping buffer, which the rest of the core calls; sleep-policy.c the policies;
 * sleep-backup.c the backup policy's copies and sleep-contents.c the contents saved and restored
 * by policy, below sleep.c; sleep.c, above them all, puts tags to sleep and wakes them.
 * sleep-state.c calls no other file of the core but tags.c: what it frees of sleep.c's (backups,
 * policies) it frees through the functions sleep.c gave it. Included by memres-private.h. */
#pragma once
#ifndef MEMRES_CORE_COMPILATION
#error "sleep.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <memres/memres-plugin.h>

#include "buffers.h"
#include "hot-path.h"

G_BEGIN_DECLS

/* sleep-policy.c: a policy (memres_sleep_policy_new()), immutable once a sleep uses it; read by
 * sleep.c */
struct _MemresSleepPolicy
{
  gatomicrefcount ref;
  MemresSleepMode mode;
  char *path;
  MemresResource *host_mr; /* BACKUP, FILE: where the page-locked memory comes from, or NULL */
  gsize restore_batch;     /* BACKUP: memres_sleep_policy_set_restore_batch() */
};

/* BACKUP: the bytes a wake maps before it queues their restoring copies, by default */
#define MEMRES_SLEEP_RESTORE_BATCH ((gsize) 64 << 20)

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
 * backups made so far stay in the entries for the caller to free (the buffers untouched),
 * naming the failing step and driver call. The copies back: MemresSleepRestore below (one copy
 * per run whose buffers are contiguous in the address space and in their backup, buffers closed
 * while asleep splitting runs; a run larger than a batch in pieces). _unref(): drops an entry's
 * reference (the last closes the page-locked memory). */
gboolean _memres_sleep_backup_save (MemresResource *host, MemresSleepEntry **entries, gsize n,
                                    MemresStream stream, GError **error);
/* sleep-backup.c: the restoring copies of a wake (BACKUP), queued while its slot maps the memory
 * (docs/sleep.md, "The wake's copies as the memory comes"). _new(): the runs of @entries with
 * a backup (as _save()'s, a buffer closed while asleep splitting its run); when @batch is not 0
 * and the runs are on one device, @stream's context made current until _finish() or _free()
 * (NULL with the error naming the driver call when it cannot be). _batch(): @batch, 0 when no
 * copy is queued early (0 given, several devices, an early copy failed). _mapped(): a wake slot
 * told [address, address + size) mapped and granted (memres_sleep_call_mapped()): the runs' bytes
 * now mapped from where their copies stopped are queued when they end their run or are at least
 * @batch bytes; a failing copy is kept for _finish() to name, and nothing more is queued early.
 * _drain(): waits for the copies queued (before a slot releases memory they may write).
 * _finish(): the rest of every run queued, one cuStreamSynchronize for all (the copies queued
 * before a failure too), the context popped; FALSE naming the call that failed. _free(): waits
 * for what is still queued, pops the context, frees. */
typedef struct _MemresSleepRestore MemresSleepRestore;
/* sleep-backup.c: @entries sorted by device and address (the order the wake's runs are in) */
void _memres_sleep_entries_sort (MemresSleepEntry **entries, gsize n);
MemresSleepRestore *_memres_sleep_restore_new (MemresSleepEntry **entries, gsize n,
                                               MemresStream stream, gsize batch, GError **error);
gsize _memres_sleep_restore_batch (const MemresSleepRestore *r);
void _memres_sleep_restore_mapped (MemresSleepRestore *r, guint64 address, guint64 size);
void _memres_sleep_restore_drain (MemresSleepRestore *r);
gboolean _memres_sleep_restore_finish (MemresSleepRestore *r, GError **error);
void _memres_sleep_restore_free (MemresSleepRestore *r);
/* sleep-backup.c: @r (or NULL) for this thread's wake slots (memres_sleep_call_mapped()); returns
 * the one before, to be put back (a wake from a segment event's callback inside another's slot) */
MemresSleepRestore *_memres_sleep_restore_set_current (MemresSleepRestore *r);
void _memres_sleep_backup_unref (MemresSleepBackup *backup);
/* sleep-backup.c, for its copies and sleep-contents.c's file policy: ends @t's context and, where
 * @res failed, sets @error from it naming @call, prefixed with @step; TRUE where @res succeeded. */
gboolean _memres_sleep_copy_end (MemresStreamContext *t, CUresult res, const char *call,
                                 const char *step, GError **error);
/* sleep-contents.c, for sleep.c. _save_contents(): the contents of @entries saved by @policy
 * before the sleep slot (BACKUP: _memres_sleep_backup_save(); FILE: the policy's file, left open
 * and locked in *@file_fd (else -1) for the caller, its length in *@file_size); on failure frees
 * what it made (the buffers untouched, the file closed). _restore_contents(): restores them after
 * the wake slot (BACKUP: the rest of @restore's copies; FILE: read back from the file, at least
 * @file_size bytes long); the backups stay. _free_backups(): drops each entry's backup. */
gboolean _memres_sleep_save_contents (MemresResource *mr, MemresSleepPolicy *policy,
                                      MemresSleepEntry **entries, gsize n, MemresStream stream,
                                      guint64 *file_size, int *file_fd, GError **error);
gboolean _memres_sleep_restore_contents (MemresResource *mr, MemresSleepPolicy *policy,
                                         guint64 file_size, MemresSleepEntry **entries, gsize n,
                                         MemresSleepRestore *restore, MemresStream stream,
                                         GError **error);
void _memres_sleep_free_backups (MemresSleepEntry **entries, gsize n);
/* The open tagged buffers of a stack that can sleep, by tag, in lists with no lock on the
 * allocate/close pair. Each buffer structure (buffer.c) has a second cache line that only such a
 * buffer touches: its link (MEMRES_SLEEP_LINK()). A buffer is linked at its allocation into the
 * list of its tag on the allocating thread's stripe (MemresSleepState.lists), and unlinked at its
 * close. The stripe's thread changes its own lists without a lock, inside the owner fence of the
 * stripe (MemresStripe.busy, owner-fence.h) and only while the tag is awake (the list's @stop
 * read inside it): a sleep sets the tag's bit in MemresSleepState.asleep and the @stop of each of
 * the tag's lists, then owner_heavy_barrier() and waits for every stripe to leave its fence, after
 * which no thread changes a list of the tag without the state's lock until the tag is awake again.
 * Everything else takes the lock (sleep-state.c): the shared stripe's lists, a tag that sleeps or
 * is busy, stripes stopped (the resource's last reference gone, or no membarrier()). A buffer
 * closed on another thread than the list's, the tag awake, cannot be unlinked there (the list's
 * thread changes it without a lock): it is marked
 * @dead (a sleep skips it) and, once its memory is released, pushed on the list's @remote stack
 * with a reference of the list on the buffer structure (so that it is not reused while linked);
 * the list's thread unlinks the dead at its next allocation of the tag (and drops their
 * references), the resource's finalize whatever is left. */
typedef struct _MemresSleepList MemresSleepList;

typedef struct
{
  MemresBuffer *prev, *next; /* in @list; NULL at its ends */
  MemresSleepList *list;     /* the list it is on; NULL: none (a zeroed link, or unlinked) */
  MemresBuffer *remote_next; /* on @list's remote stack */
  /* under the state's lock: its entry while its tag sleeps (MemresSleepEntries), else NULL */
  MemresSleepEntry *entry;
  gint dead; /* closed by another thread than @list's: a sleep skips it */
} MemresSleepLink;

struct _MemresSleepList
{
  MemresBuffer *head;
  /* atomic: dead buffers closed by other threads (a stack linked by MemresSleepLink.remote_next,
   * pushed with a compare-and-swap), each holding a reference the list gives up once it has
   * unlinked it */
  MemresBuffer *remote;
  /* atomic: the bit of the list's tag in MemresSleepState.asleep, written with it under the lock
   * (sleep.c), so that the list's thread tests one flag beside the list inside its fence */
  gint stop;
} __attribute__ ((aligned (32))); /* a power of two: its index a shift (the state is allocated
                                   * 64-byte aligned: sleep-state.c) */

/* A buffer structure's second line (buffer.c allocates MEMRES_BUFFER_STRUCT_SIZE bytes) */
#define MEMRES_BUFFER_STRUCT_SIZE 128
#define MEMRES_SLEEP_LINK(buf)    ((MemresSleepLink *) ((guint8 *) (buf) + 64))
G_STATIC_ASSERT (64 + sizeof (MemresSleepLink) <= MEMRES_BUFFER_STRUCT_SIZE);

/* The entries of a tag's buffers while it sleeps (their backups), under the state's lock: one
 * array (@slots) that a sleep's begin() (sleep.c) sizes once and fills, a slot per open buffer
 * of the tag, placed by index, each buffer's link pointing at its slot (MemresSleepLink.entry:
 * no table); a buffer closed while asleep empties its slot (@buf NULL). @strays: the entries a
 * close that failed while the tag slept put back (_memres_sleep_untrack_end(), rare), each
 * allocated alone, or NULL. All freed when the tag is awake again (sleep.c's end()). */
typedef struct
{
  MemresSleepEntry *slots;
  gsize n_slots;
  GPtrArray *strays;
} MemresSleepEntries;

typedef struct
{
  MemresSleepEntries entries;
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
  /* the open tagged buffers by stripe (the allocating thread's, - 1) and tag (above) */
  MemresSleepList lists[MEMRES_BUFFER_STRIPES][MEMRES_TAGS_MAX + 1];
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
/* The backup an entry (a copy of one, _memres_sleep_untrack_begin()) holds, freed */
void _memres_sleep_entry_clear (MemresSleepEntry *entry);
/* Under the state's lock: @e moved to *@out, its buffers' links pointing at no entry any more;
 * then, without the lock, _clear() frees what *@out holds (the backups, the arrays). */
void _memres_sleep_entries_steal (MemresSleepEntries *e, MemresSleepEntries *out);
void _memres_sleep_entries_clear (MemresSleepEntries *e);

/* At creation, for a stack that can sleep (resource.c decides: a layer with the sleep slot
 * whose upstreams can, reached through MEMRES_KIND_PASSES_ALLOCATIONS adaptors). Freed at
 * finalize (no buffer is open then): the references its lists still hold on closed buffers are
 * dropped, unless @inherited (the child of a fork(): the lists are the parent's, never read). */
MemresSleepState *_memres_sleep_state_new (void);
void _memres_sleep_state_free (MemresSleepState *state, gboolean inherited);

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

/* The list of @tag on stripe @i (1 to MEMRES_BUFFER_STRIPES) */
G_ALWAYS_INLINE static inline MemresSleepList *
_memres_sleep_list (MemresSleepState *state, guint i, guint tag)
{
  return &state->lists[i - (gsize) 1][tag];
}

/* Allocation of a tagged buffer on a resource with a sleep state: _memres_sleep_check_tag()
 * (above) FALSE with MEMRES_SLEEP_ERROR_TAG_ASLEEP when @tag is asleep there (before the slot
 * call); after it, _memres_sleep_link_fast() links the buffer into its tag's list on stripe @i,
 * the calling thread's own (no lock: see MemresSleepList), and returns FALSE when it cannot (the
 * shared stripe, the stripes stopped, the tag asleep or busy, dead buffers to unlink first); then
 * _memres_sleep_link() does it under the lock or refuses the buffer with
 * MEMRES_SLEEP_ERROR_TAG_ASLEEP (a sleep that began meanwhile: the caller closes it). (Linked in
 * the fence of the buffer's count instead, the pair measured no fewer instructions.) */
G_ALWAYS_INLINE static inline gboolean
_memres_sleep_link_fast (MemresResource *mr, MemresBuffer *buf, guint i)
{
  MemresStripe *stripe = MEMRES_STRIPE_AT (mr, i);
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresSleepList *list;
  MemresBuffer *head;

  if (G_UNLIKELY (i == MEMRES_STRIPE_SHARED)
      || !owner_try_enter_light (&stripe->busy, &mr->stripes_stop))
    return FALSE;
  list = _memres_sleep_list (mr->sleep, i, buf->tag);
  if (G_UNLIKELY (__atomic_load_n (&list->stop, __ATOMIC_ACQUIRE)
                  || __atomic_load_n (&list->remote, __ATOMIC_RELAXED) != NULL))
    {
      owner_leave_busy (&stripe->busy);
      return FALSE;
    }
  head = list->head;
  l->prev = NULL;
  l->next = head;
  l->list = list;
  if (head != NULL)
    MEMRES_SLEEP_LINK (head)->prev = buf;
  list->head = buf;
  owner_leave_busy (&stripe->busy);
  return TRUE;
}
gboolean _memres_sleep_link (MemresResource *mr, MemresBuffer *buf, GError **error);

/* @buf (linked) out of @list, by a thread allowed to change it (its own stripe's thread in the
 * fence, or under the lock where no other thread changes it). */
G_ALWAYS_INLINE static inline void
_memres_sleep_unlink_from (MemresSleepList *list, MemresBuffer *buf)
{
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresBuffer *prev = l->prev, *next = l->next;

  if (prev != NULL)
    MEMRES_SLEEP_LINK (prev)->next = next;
  else
    list->head = next;
  if (next != NULL)
    MEMRES_SLEEP_LINK (next)->prev = prev;
  l->list = NULL;
}

/* The close of a tagged buffer of a resource with a sleep state, on the thread (stripe) that
 * allocated it, its tag awake: unlinked without a lock; FALSE when the close must take
 * _memres_sleep_untrack_begin() instead. */
G_ALWAYS_INLINE static inline gboolean
_memres_sleep_unlink_fast (MemresResource *mr, MemresBuffer *buf)
{
  guint i = _memres_thread.stripe_index;
  MemresSleepState *state = mr->sleep;
  MemresStripe *stripe;
  MemresSleepList *list;

  /* 0 (no stripe yet: not the allocating thread) and the shared stripe: the lock */
  if (G_UNLIKELY (i - 1u >= MEMRES_STRIPE_SHARED - 1u))
    return FALSE;
  list = _memres_sleep_list (state, i, buf->tag);
  stripe = MEMRES_STRIPE_AT (mr, i);
  if (MEMRES_SLEEP_LINK (buf)->list != list
      || !owner_try_enter_light (&stripe->busy, &mr->stripes_stop))
    return FALSE;
  if (G_UNLIKELY (__atomic_load_n (&list->stop, __ATOMIC_ACQUIRE)))
    {
      owner_leave_busy (&stripe->busy);
      return FALSE;
    }
  _memres_sleep_unlink_from (list, buf);
  owner_leave_busy (&stripe->busy);
  return TRUE;
}

/* What _memres_sleep_untrack_begin() did (0: nothing, it failed) */
typedef enum
{
  MEMRES_SLEEP_UNLINKED = 1, /* out of its list (or in none) */
  MEMRES_SLEEP_MARKED = 2,   /* marked dead in another thread's list: pushed once closed */
} MemresSleepUntrack;

/* The close of a tagged buffer of a resource with a sleep state that _memres_sleep_unlink_fast()
 * left, under the lock: waits for a sleep or wake of its tag in progress and takes the buffer
 * out of its tag (unlinked, or marked dead in another thread's list while the tag is awake), with
 * its entry copied into *@entry (the caller's, zeroed first; @buf NULL when it has none: its tag
 * is awake) and its slot emptied; 0 with MEMRES_SLEEP_ERROR_BUSY, nothing changed, when that sleep
 * or wake runs on this very thread (a segment event callback inside it: waiting would never end).
 * When the close then fails, the buffer still open, _end() puts it back with @entry (NULL or
 * with @buf NULL: none; @how: what _begin() did, MEMRES_SLEEP_UNLINKED after
 * _memres_sleep_unlink_fast()): a stray entry of its tag while the tag still sleeps, its backup
 * freed when the tag was woken meanwhile (the wake passed the buffer by); when it closed, the
 * caller frees @entry's backup (_memres_sleep_entry_clear()) and, for MEMRES_SLEEP_MARKED, calls
 * _memres_sleep_push_dead() before the buffer is counted closed (the resource stays until
 * then). */
MemresSleepUntrack _memres_sleep_untrack_begin (MemresResource *mr, MemresBuffer *buf,
                                                MemresSleepEntry *entry, GError **error);
void _memres_sleep_untrack_end (MemresResource *mr, MemresBuffer *buf, MemresSleepUntrack how,
                                const MemresSleepEntry *entry);
void _memres_sleep_push_dead (MemresBuffer *buf);
/* A buffer structure about to be freed while still linked (a close that failed for good: the
 * driver gone at exit, or a free that failed twice): unlinked, or handed to its list as a dead
 * one (TRUE: the list holds the caller's reference now, and frees the structure later); its
 * entry, if its tag sleeps, taken out and its backup freed (no wake restores a freed buffer). */
gboolean _memres_sleep_forget (MemresResource *mr, MemresBuffer *buf);

/* Whether @buf sleeps (its tag asleep on its resource); FALSE with MEMRES_SLEEP_ERROR_ASLEEP
 * naming @what when it does. */
gboolean _memres_buffer_asleep_slow (MemresBuffer *buf);
gboolean _memres_buffer_check_awake (MemresBuffer *buf, const char *what, GError **error);

G_END_DECLS
