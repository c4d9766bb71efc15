/* memres - CUDA memory resources
 * sleep.c: sleep and wake (memres-sleep.h, docs/sleep.md): whether a buffer or a tag sleeps, the
 * sleep and wake slots of the layer the records reach, the stream waits, the save of the contents
 * before the sleep slot and their restore after the wake slot by policy (sleep-contents.c),
 * all or nothing. A
 * resource's sleep state and the checks of a sleeping buffer that the rest of the core calls are
 * sleep-state.c's (sleep.h). The kinds do the driver work of releasing and mapping again (their
 * sleep and wake slots); this file never unmaps. */
#include "memres-private.h"

#include <unistd.h>

/**
 * memres_buffer_is_asleep:
 * @buf: a #MemresBuffer
 *
 * Whether @buf sleeps: its tag was put to sleep on its resource (memres_resource_sleep()) and
 * not woken since, or is being put to sleep or woken now. A sleeping buffer keeps its address,
 * size and tag; it has no memory under it, and every memres operation on it but closing it and
 * the getters fails with %MEMRES_SLEEP_ERROR_ASLEEP. No driver call; thread-safe.
 *
 * Returns: %TRUE when @buf sleeps
 *
 * Since: 2.0
 */
gboolean
memres_buffer_is_asleep (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return !memres_buffer_is_closed (buf) && _memres_buffer_asleep_slow (buf);
}

/**
 * memres_resource_is_asleep:
 * @mr: a #MemresResource
 * @tag: a tag's name
 *
 * Whether @tag sleeps on @mr (put to sleep by memres_resource_sleep() and not woken since, or
 * being put to sleep or woken now). %FALSE for a stack that cannot sleep and for a tag never
 * used. No driver call; thread-safe.
 *
 * Returns: %TRUE when @tag sleeps on @mr
 *
 * Since: 2.0
 */
gboolean
memres_resource_is_asleep (MemresResource *mr, const char *tag)
{
  guint id;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (tag != NULL, FALSE);

  if (mr->sleep == NULL || (id = _memres_tag_find (tag, NULL)) == 0)
    return FALSE;
  return _memres_sleep_tag_asleep (mr->sleep, id);
}

/* sleep-state.c's frees, given before anything it frees exists */
static void
give_frees (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      static const MemresSleepFrees frees = {
        .free_backup = _memres_sleep_backup_unref,
        .free_policy = memres_sleep_policy_unref,
        .free_resource = memres_resource_unref,
      };

      _memres_sleep_set_frees (&frees);
      g_once_init_leave (&done, 1);
    }
}

/* --- the checks of a call ----------------------------------------------------------------- */

/* MEMRES_ERROR_NOT_SUPPORTED for @mr, naming the kinds that can sleep (those whose table has
 * the slots: base kinds, and the adaptors above them). */
static gboolean
not_supported (MemresResource *mr, GError **error)
{
  g_autoptr (GPtrArray) kinds = memres_registry_list_kinds (NULL);
  g_autoptr (GString) bases = g_string_new (NULL);
  g_autoptr (GString) adaptors = g_string_new (NULL);
  g_autofree char *stack = memres_resource_to_string (mr);

  for (guint i = 0; kinds != NULL && i < kinds->len; i++)
    {
      MemresKind *kind = kinds->pdata[i];
      GString *to = (kind->flags & MEMRES_KIND_ADAPTOR) ? adaptors : bases;

      if (kind->ops.sleep == NULL)
        continue;
      g_string_append_printf (to, "%s%s", to->len > 0 ? ", " : "", kind->name);
    }
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "the stack \"%s\" cannot sleep: only kinds that keep addresses while the memory "
               "under them is released can (%s), alone or under %s%sthe adaptors that pass "
               "allocations through",
               stack, bases->len > 0 ? bases->str : "none is registered", adaptors->str,
               adaptors->len > 0 ? " and " : "");
  return FALSE;
}

/* The layer whose sleep or wake slot serves @mr's records, or NULL with NOT_SUPPORTED. */
static MemresResource *
sleep_layer (MemresResource *mr, GError **error)
{
  MemresResource *layer
      = _memres_resource_slot_owner (mr, G_STRUCT_OFFSET (MemresResourceOps, sleep), TRUE);

  if (layer->ops->sleep == NULL || layer->ops->wake == NULL)
    {
      not_supported (mr, error);
      return NULL;
    }
  return layer;
}

static gboolean
call_layer (MemresResource *mr, gboolean sleep, MemresAllocation *const *allocs, gsize n,
            GError **error)
{
  MemresResource *layer = sleep_layer (mr, error);
  GError *local = NULL;
  gboolean ok;

  if (layer == NULL)
    return FALSE;
  /* with no record too: a layer that keeps free memory by tag releases (wakes) the tag's */
  ok = sleep ? layer->ops->sleep (layer, allocs, n, &local)
             : layer->ops->wake (layer, allocs, n, &local);
  if (!ok && local == NULL)
    g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                 "kind \"%s\": its %s slot failed without an error", layer->kind->name,
                 sleep ? "sleep" : "wake");
  if (local != NULL)
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  return TRUE;
}

/* The memres_resource_sleep() or memres_resource_wake() this thread is inside, while it calls
 * the stack's slots: memres_sleep_call_get_tag() reads it. */
static __thread struct
{
  guint tag; /* 0: none */
  MemresSleepMode mode;
} sleep_call;

/* call_layer() for the top of the stack, with the call's tag and mode told to the slots. */
static gboolean
call_stack (MemresResource *mr, gboolean sleep, MemresAllocation *const *allocs, gsize n, guint tag,
            const MemresSleepPolicy *policy, GError **error)
{
  gboolean ok;

  sleep_call.tag = tag;
  sleep_call.mode = policy != NULL ? policy->mode : MEMRES_SLEEP_DISCARD;
  ok = call_layer (mr, sleep, allocs, n, error);
  sleep_call.tag = 0;
  return ok;
}

/**
 * memres_sleep_call_get_tag:
 * @mode: (out) (optional): where to store the mode of the call's policy (for a wake, the policy
 *   its tag was put to sleep with), or %NULL
 *
 * Inside a sleep or wake slot (#MemresResourceOps.sleep, #MemresResourceOps.wake), and in the
 * slots below it that memres_upstream_sleep() and memres_upstream_wake() call: the tag that the
 * memres_resource_sleep() or memres_resource_wake() running on this thread puts to sleep or
 * wakes, and its policy's mode; for an adaptor that tells of the call (`log` writes a line). A
 * wake whose restore failed calls the sleep slots again, inside the same wake: same tag and mode.
 * Reads a thread-local: no lock, no driver call. Thread-safe.
 *
 * Returns: (transfer none) (nullable): the tag (interned, valid for the life of the process),
 *   or %NULL outside those slots (@mode then untouched)
 *
 * Since: 2.0
 */
const char *
memres_sleep_call_get_tag (MemresSleepMode *mode)
{
  if (sleep_call.tag == 0)
    return NULL;
  if (mode != NULL)
    *mode = sleep_call.mode;
  return _memres_tag_name (sleep_call.tag);
}

/**
 * memres_upstream_sleep: (skip)
 * @mr: an adaptor's instance
 * @allocs: (array length=n_allocs): records of the upstream's allocations
 * @n_allocs: how many
 * @error: return location for a #GError, or %NULL
 *
 * The sleep slot of @mr's upstream (through the adaptors that pass allocations): see
 * #MemresResourceOps.sleep.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_upstream_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                       GError **error)
{
  g_return_val_if_fail (mr != NULL && mr->upstream != NULL, FALSE);
  return call_layer (mr->upstream, TRUE, allocs, n_allocs, error);
}

/**
 * memres_upstream_wake: (skip)
 * @mr: an adaptor's instance
 * @allocs: (array length=n_allocs): records of the upstream's allocations, asleep
 * @n_allocs: how many
 * @error: return location for a #GError, or %NULL
 *
 * The wake slot of @mr's upstream (through the adaptors that pass allocations): see
 * #MemresResourceOps.wake.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_upstream_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                      GError **error)
{
  g_return_val_if_fail (mr != NULL && mr->upstream != NULL, FALSE);
  return call_layer (mr->upstream, FALSE, allocs, n_allocs, error);
}

/* --- sleep and wake -------------------------------------------------------------------------- */

/* Takes the tag's buffers for a sleep (@sleep) or a wake, marking the tag busy; NULL with an
 * error when the tag is in the wrong state. A sleep makes their entries: one array, sized once
 * (MemresSleepEntries), no allocation or table per buffer. */
static MemresSleepEntry **
begin (MemresResource *mr, guint tag, gboolean sleep, gsize *n, GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepEntries *e = &state->tags[tag].entries;
  MemresSleepEntry **entries;
  guint n_strays;
  gsize i = 0;

  g_mutex_lock (&state->lock);
  if ((state->busy >> tag) & 1)
    {
      g_mutex_unlock (&state->lock);
      g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_BUSY,
                   "tag \"%s\" is being put to sleep or woken by another thread",
                   _memres_tag_name (tag));
      return NULL;
    }
  if (_memres_sleep_tag_asleep (state, tag) == sleep)
    {
      g_mutex_unlock (&state->lock);
      g_set_error (error, MEMRES_SLEEP_ERROR,
                   sleep ? MEMRES_SLEEP_ERROR_ALREADY_ASLEEP : MEMRES_SLEEP_ERROR_NOT_ASLEEP,
                   sleep ? "tag \"%s\" is asleep already on this resource"
                         : "tag \"%s\" is not asleep on this resource",
                   _memres_tag_name (tag));
      return NULL;
    }
  state->busy |= (guint64) 1 << tag;
  state->busy_owner[tag] = g_thread_self ();
  __atomic_or_fetch (&state->asleep, (guint64) 1 << tag, __ATOMIC_SEQ_CST);
  for (guint s = 0; s < MEMRES_BUFFER_STRIPES; s++)
    __atomic_store_n (&state->lists[s][tag].stop, 1, __ATOMIC_SEQ_CST);
  /* a sleep makes the entries of the tag's open buffers (their backups go there), kept until the
   * tag is awake again; a wake takes them. The tag's bit is set: after the barrier, each stripe's
   * thread either is seen inside its fence (waited for) or sees the bit and takes the lock for
   * the tag's lists from then on (sleep.h: MemresSleepList), so that they hold still here. The
   * dead (closed on other threads than their lists') are skipped, and so is a buffer that has an
   * entry already (none has: the tag was awake). */
  if (sleep)
    {
      gsize m = 0;

      owner_heavy_barrier ();
      for (guint s = 0; s < MEMRES_STRIPE_SHARED - 1; s++)
        while (__atomic_load_n (&mr->stripes[s].busy, __ATOMIC_ACQUIRE))
          g_thread_yield ();
      g_assert (e->slots == NULL);
      for (guint s = 0; s < MEMRES_BUFFER_STRIPES; s++)
        for (MemresBuffer *b = state->lists[s][tag].head; b != NULL;
             b = MEMRES_SLEEP_LINK (b)->next)
          m += !MEMRES_SLEEP_LINK (b)->dead && MEMRES_SLEEP_LINK (b)->entry == NULL;
      e->slots = g_new (MemresSleepEntry, m + 1);
      for (guint s = 0; s < MEMRES_BUFFER_STRIPES; s++)
        for (MemresBuffer *b = state->lists[s][tag].head; b != NULL;
             b = MEMRES_SLEEP_LINK (b)->next)
          {
            MemresSleepLink *l = MEMRES_SLEEP_LINK (b);

            if (l->dead || l->entry != NULL)
              continue;
            l->entry = &e->slots[e->n_slots++];
            *l->entry = (MemresSleepEntry){ .buf = b };
          }
    }
  /* the open buffers' slots (a slot emptied by a close while asleep has none), then the strays */
  n_strays = e->strays != NULL ? e->strays->len : 0;
  entries = g_new (MemresSleepEntry *, e->n_slots + n_strays + 1);
  for (gsize k = 0; k < e->n_slots; k++)
    if (e->slots[k].buf != NULL)
      entries[i++] = &e->slots[k];
  for (guint k = 0; k < n_strays; k++)
    entries[i++] = e->strays->pdata[k];
  *n = i;
  g_mutex_unlock (&state->lock);
  return entries;
}

/* Ends a sleep or wake: the tag is asleep when @asleep; its policy (transfer full) kept, and
 * the locked file of a sleep's file policy (@file_fd, transfer full; -1: the one it has). A tag
 * awake closes its file (the lock released) and frees its buffers' entries (their backups freed
 * before). */
static void
end (MemresResource *mr, guint tag, gboolean asleep, MemresSleepPolicy *policy, guint64 file_size,
     int file_fd)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[tag];
  MemresSleepPolicy *old;
  MemresSleepEntries entries = { 0 };
  int old_fd = -1;

  g_mutex_lock (&state->lock);
  if (!asleep)
    _memres_sleep_entries_steal (&t->entries, &entries);
  old = t->policy;
  t->policy = policy;
  t->file_size = file_size;
  if (!asleep || file_fd >= 0)
    {
      old_fd = t->file_fd;
      t->file_fd = asleep ? file_fd : -1;
    }
  if (!asleep)
    {
      for (guint s = 0; s < MEMRES_BUFFER_STRIPES; s++)
        __atomic_store_n (&state->lists[s][tag].stop, 0, __ATOMIC_RELEASE);
      __atomic_and_fetch (&state->asleep, ~((guint64) 1 << tag), __ATOMIC_SEQ_CST);
    }
  state->busy &= ~((guint64) 1 << tag);
  state->busy_owner[tag] = NULL;
  g_cond_broadcast (&state->cond);
  g_mutex_unlock (&state->lock);
  _memres_sleep_entries_clear (&entries);
  if (old_fd >= 0)
    close (old_fd);
  if (old != policy)
    memres_sleep_policy_unref (old);
}

static guint
find_tag (MemresResource *mr, const char *tag, GError **error)
{
  if (mr->sleep == NULL)
    {
      not_supported (mr, error);
      return 0;
    }
  if (!_memres_resource_check_usable (mr, "putting buffers to sleep", error))
    return 0;
  return _memres_tag_find (tag, error);
}

/* Waits for the work queued on each distinct stream of @entries (their deallocation streams).
 * Buffers mostly share a stream: the previous buffer's is passed by without a look-up. */
static gboolean
wait_streams (MemresSleepEntry **entries, gsize n, GError **error)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (NULL, NULL);

  for (gsize i = 0; i < n; i++)
    {
      MemresBuffer *buf = entries[i]->buf;

      if ((i > 0 && entries[i - 1]->buf->dealloc_stream == buf->dealloc_stream)
          || !g_hash_table_add (seen, buf->dealloc_stream))
        continue;
      if (!memres_cuda_stream_synchronize (buf->device, buf->dealloc_stream, error))
        {
          g_prefix_error (error, "waiting for the work queued on a buffer's stream: ");
          return FALSE;
        }
    }
  return TRUE;
}

static MemresAllocation **
records_of (MemresSleepEntry **entries, gsize n)
{
  MemresAllocation **allocs = g_new (MemresAllocation *, n + 1);

  for (gsize i = 0; i < n; i++)
    allocs[i] = &entries[i]->buf->alloc;
  return allocs;
}

/**
 * memres_resource_sleep:
 * @mr: a #MemresResource whose stack can sleep: `vmm` or `arena`, alone, under `cache` or under
 *   the adaptors that pass allocations through (`stats`, `limit`, `track`, `log`, `retry`)
 * @tag: the name of a tag
 * @policy: (nullable): what happens to the contents; %NULL is the default, %MEMRES_SLEEP_DISCARD
 *   (the contents are undefined after the wake)
 * @stream: the stream the saving copies run on (%NULL: the legacy default stream); the call
 *   returns once they are done
 * @error: return location for a #GError, or %NULL
 *
 * Releases the physical memory under every open buffer of @tag allocated from @mr and keeps
 * their virtual addresses reserved; memres_resource_wake() maps new memory at the same
 * addresses. In order: the work queued on each buffer's deallocation stream is waited for (one
 * cuStreamSynchronize() per distinct stream, not the whole device); the contents are saved by
 * @policy (%MEMRES_SLEEP_BACKUP: into page-locked memory from the policy's host resource, one
 * allocation and one cuMemcpyAsync() per run of adjacent buffers, all queued on @stream, then one
 * cuStreamSynchronize(); a buffer closed while asleep frees its run's backup with the last of the
 * run; %MEMRES_SLEEP_FILE: through at most 64 MiB of page-locked memory into the
 * policy's file with pwrite(), then fsync()); then the kind's sleep slot releases the memory
 * (`vmm`: for each buffer, cuMemUnmap() and cuMemRelease() of its chunks; `arena`: of the
 * granules only sleeping buffers cover, and the idle granules @tag last used; `cache` also gives
 * the free blocks it keeps for @tag back to its upstream, the other tags' staying cached),
 * raising %MEMRES_SEGMENT_UNMAPPING for each segment first.
 *
 * All or nothing: when any step fails, every buffer is awake and intact as before, the saved
 * contents are freed and the error names the step. While @tag sleeps on @mr: allocating under
 * it from @mr fails with %MEMRES_SLEEP_ERROR_TAG_ASLEEP; copies, fills, reads, writes, exports
 * and resizes of its buffers fail with %MEMRES_SLEEP_ERROR_ASLEEP; closing one is allowed (its
 * address range is released, its saved contents freed, nothing restored for it). A buffer
 * exported to another process over IPC cannot sleep (%MEMRES_SLEEP_ERROR_SHARED naming it); one
 * exported through DLPack can: the consumer's view then has no memory under it until the wake;
 * a new DLPack export of a sleeping buffer is refused (%MEMRES_SLEEP_ERROR_ASLEEP).
 *
 * A tag with no open buffer on @mr sleeps too: the kinds still release the free memory its
 * buffers left cached (`cache` gives the tag's free blocks back, `arena` releases the tag's
 * slabs with their free blocks), and allocating under it is refused until the wake, as for any
 * sleeping tag; a tag of the process that never went through @mr sleeps all the same (there is
 * no free memory of it to give back). A name that was never a tag in this
 * process (no allocation, push or default ever used it) is %MEMRES_TAG_ERROR_UNKNOWN, and nothing
 * sleeps.
 *
 * Thread-safe: sleeps and wakes of different tags may run at once; a second one of the same
 * tag and resource fails with %MEMRES_SLEEP_ERROR_BUSY; a close of a buffer of the tag waits
 * for the one in progress. No other thread may use the tag's buffers meanwhile.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED for a stack that cannot sleep (the message names the
 * kinds that can); %MEMRES_TAG_ERROR_INVALID for a @tag that cannot be a tag's name,
 * %MEMRES_TAG_ERROR_UNKNOWN for one never used as a tag in this process;
 * %MEMRES_ERROR_INVALID_ARGUMENT for a file policy without a path;
 * %MEMRES_SLEEP_ERROR_ALREADY_ASLEEP, %MEMRES_SLEEP_ERROR_BUSY, %MEMRES_SLEEP_ERROR_SHARED,
 * %MEMRES_SLEEP_ERROR_FILE; %MEMRES_ERROR_FORKED; %MEMRES_ERROR_OUT_OF_MEMORY for the backups;
 * a %MEMRES_CUDA_ERROR naming the driver call of the step that failed.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_sleep (MemresResource *mr, const char *tag, MemresSleepPolicy *policy,
                       MemresStream stream, GError **error)
{
  g_autofree MemresSleepEntry **entries = NULL;
  g_autofree MemresAllocation **allocs = NULL;
  guint64 file_size = 0;
  int file_fd = -1;
  guint id;
  gsize n = 0;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (tag != NULL, FALSE);

  give_frees ();
  if ((id = find_tag (mr, tag, error)) == 0)
    return FALSE;
  if (policy != NULL && policy->mode == MEMRES_SLEEP_FILE && policy->path == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "a file policy needs a path (memres_sleep_policy_set_path())");
      return FALSE;
    }
  if (sleep_layer (mr, error) == NULL || (entries = begin (mr, id, TRUE, &n, error)) == NULL)
    return FALSE;
  policy = policy != NULL ? memres_sleep_policy_ref (policy)
                          : memres_sleep_policy_new (MEMRES_SLEEP_DISCARD, NULL);
  allocs = records_of (entries, n);
  if (!wait_streams (entries, n, error)
      || !_memres_sleep_save_contents (mr, policy, entries, n, stream, &file_size, &file_fd, error))
    {
      end (mr, id, FALSE, NULL, 0, -1);
      memres_sleep_policy_unref (policy);
      g_prefix_error (error, "cannot put tag \"%s\" to sleep: ", tag);
      return FALSE;
    }
  if (!call_stack (mr, TRUE, allocs, n, id, policy, error))
    {
      _memres_sleep_free_backups (entries, n);
      if (file_fd >= 0)
        close (file_fd);
      end (mr, id, FALSE, NULL, 0, -1);
      memres_sleep_policy_unref (policy);
      g_prefix_error (error, "cannot put tag \"%s\" to sleep: releasing its memory: ", tag);
      return FALSE;
    }
  end (mr, id, TRUE, policy, file_size, file_fd);
  return TRUE;
}

/**
 * memres_resource_wake:
 * @mr: the #MemresResource a tag was put to sleep on
 * @tag: the tag's name
 * @stream: the stream the restoring copies run on (%NULL: the legacy default stream); the call
 *   returns once they are done
 * @error: return location for a #GError, or %NULL
 *
 * Creates the physical memory of every sleeping buffer of @tag again, maps it at the same
 * addresses with the same access (cuMemCreate() and cuMemMap() per `vmm` chunk or `arena`
 * granule, cuMemSetAccess() per reservation or run of adjacent granules) and restores the contents
 * by the sleep's policy (from the host backups: one cuMemcpyAsync() per run of adjacent buffers
 * still open, or per restore batch of a larger run, all queued on @stream as the memory under
 * them is mapped, so that the copies overlap the mapping of the rest
 * (memres_sleep_policy_set_restore_batch()), then one cuStreamSynchronize(); or pread() of the
 * file through page-locked memory); the kind raises %MEMRES_SEGMENT_MAPPED for each segment it
 * maps, so that registrars register again. The backups are freed after. Buffers closed while
 * asleep are not restored.
 *
 * All or nothing: when any step fails (the driver, a missing or truncated file), everything
 * stays asleep as it was, the memory made meanwhile is released again (once the copies queued
 * into it are done), the saved contents are kept for a later wake, and the error names the step.
 * Thread-safe as memres_resource_sleep().
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED, %MEMRES_TAG_ERROR_INVALID, %MEMRES_TAG_ERROR_UNKNOWN,
 * %MEMRES_SLEEP_ERROR_NOT_ASLEEP, %MEMRES_SLEEP_ERROR_BUSY, %MEMRES_SLEEP_ERROR_FILE,
 * %MEMRES_ERROR_FORKED, %MEMRES_ERROR_OUT_OF_MEMORY, a %MEMRES_CUDA_ERROR naming the driver call.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_wake (MemresResource *mr, const char *tag, MemresStream stream, GError **error)
{
  g_autofree MemresSleepEntry **entries = NULL;
  g_autofree MemresAllocation **allocs = NULL;
  MemresSleepRestore *restore = NULL, *outer;
  MemresSleepPolicy *policy;
  guint64 file_size;
  gboolean ok;
  guint id;
  gsize n = 0;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (tag != NULL, FALSE);

  if ((id = find_tag (mr, tag, error)) == 0)
    return FALSE;
  if ((entries = begin (mr, id, FALSE, &n, error)) == NULL)
    return FALSE;
  g_mutex_lock (&mr->sleep->lock);
  policy = mr->sleep->tags[id].policy;
  file_size = mr->sleep->tags[id].file_size;
  g_mutex_unlock (&mr->sleep->lock);
  /* the backup's copies queued as the slot maps the memory (docs/sleep.md), the records given in
   * address order so that the runs complete as their memory comes */
  if (policy->mode == MEMRES_SLEEP_BACKUP)
    _memres_sleep_entries_sort (entries, n);
  allocs = records_of (entries, n);
  if (policy->mode == MEMRES_SLEEP_BACKUP && n > 0
      && (restore = _memres_sleep_restore_new (entries, n, stream, policy->restore_batch, error))
             == NULL)
    {
      end (mr, id, TRUE, policy, file_size, -1);
      g_prefix_error (error, "cannot wake tag \"%s\": ", tag);
      return FALSE;
    }
  outer = _memres_sleep_restore_set_current (restore);
  ok = call_stack (mr, FALSE, allocs, n, id, policy, error);
  _memres_sleep_restore_set_current (outer);
  if (!ok)
    {
      /* the slot released what it mapped, after waiting for the copies it let the core queue
       * (memres_sleep_call_unmapping()); what is still queued is waited for here */
      _memres_sleep_restore_free (restore);
      end (mr, id, TRUE, policy, file_size, -1);
      g_prefix_error (error, "cannot wake tag \"%s\": mapping its memory again: ", tag);
      return FALSE;
    }
  ok = _memres_sleep_restore_contents (mr, policy, file_size, entries, n, restore, stream, error);
  _memres_sleep_restore_free (restore);
  if (!ok)
    {
      g_autoptr (GError) again = NULL;

      if (!call_stack (mr, TRUE, allocs, n, id, policy, &again))
        g_warning ("memres: tag \"%s\" stays awake after a failed restore (its contents are "
                   "undefined): %s",
                   tag, again->message);
      if (again == NULL)
        end (mr, id, TRUE, policy, file_size, -1);
      else
        {
          _memres_sleep_free_backups (entries, n);
          end (mr, id, FALSE, NULL, 0, -1);
        }
      g_prefix_error (error, "cannot wake tag \"%s\": ", tag);
      return FALSE;
    }
  _memres_sleep_free_backups (entries, n);
  end (mr, id, FALSE, NULL, 0, -1);
  return TRUE;
}
