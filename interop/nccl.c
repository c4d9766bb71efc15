/* memres - CUDA memory resources
 * nccl.c: memres memory registered with NCCL (memres-nccl.h, docs/distributed.md). A registrar
 * follows one resource's segment events (memres-segments.h): ncclCommRegister of each segment
 * when it is mapped (the existing ones at subscription), ncclCommDeregister in its "about to be
 * unmapped" event, so before the driver unmaps it; one registration per segment, never per
 * buffer. Windows are collective and so never come from one rank's events: the application
 * registers one over a buffer on every rank (memres_nccl_window_register()). Part of libmemres
 * on the public API only (public_api_sources), NCCL through nccl-library.c. */
#include "nccl-private.h"

typedef struct
{
  gpointer handle; /* ncclCommRegister's */
  guint64 length;
} Registration;

struct _MemresNcclRegistrar
{
  gint refs; /* atomic: the owner's, and the subscription's until its destroy notify */
  const NcclLibrary *nccl;
  gpointer comm;
  MemresResource *mr; /* referenced */
  guint subscription;
  GMutex lock;
  GHashTable *registered;  /* under lock: segment base (guint64 *) -> Registration * */
  MemresNcclCounts counts; /* under lock */
  GError *first_error;     /* under lock */
  gboolean closed;         /* under lock: memres_nccl_registrar_free() began */
};

struct _MemresNcclWindow
{
  const NcclLibrary *nccl;
  gpointer comm;
  gpointer win;
  MemresBuffer *buf; /* referenced (the structure; a close would still free its memory) */
};

static void
registrar_unref (gpointer data)
{
  MemresNcclRegistrar *reg = data;

  if (!g_atomic_int_dec_and_test (&reg->refs))
    return;
  g_hash_table_unref (reg->registered);
  g_clear_error (&reg->first_error);
  g_mutex_clear (&reg->lock);
  memres_resource_unref (reg->mr);
  g_free (reg);
}

/* A failure inside an event: counted, the first one kept. lock held. */
static void
keep_failure (MemresNcclRegistrar *reg, GError *error)
{
  reg->counts.failures++;
  if (reg->first_error == NULL)
    reg->first_error = error;
  else
    g_error_free (error);
}

/* ncclCommRegister of [base, +length). lock held. */
static void
register_range (MemresNcclRegistrar *reg, guint64 base, guint64 length)
{
  gpointer ptr = (gpointer) (guintptr) base;
  gpointer handle = NULL;
  NcclResult r = reg->nccl->CommRegister (reg->comm, ptr, length, &handle);
  Registration *rec;
  guint64 *key;

  if (r != 0)
    {
      GError *error = NULL;

      _memres_nccl_set_error (&error, reg->nccl, r, reg->comm, "ncclCommRegister", ptr, length);
      keep_failure (reg, error);
      return;
    }
  rec = g_new (Registration, 1);
  rec->handle = handle;
  rec->length = length;
  key = g_new (guint64, 1);
  *key = base;
  g_hash_table_replace (reg->registered, key, rec);
  reg->counts.registered++;
  reg->counts.registered_bytes += length;
  reg->counts.registrations++;
}

/* ncclCommDeregister of the segment at @base, if registered; it is forgotten either way (the
 * memory is about to go). lock held. */
static gboolean
deregister_range (MemresNcclRegistrar *reg, guint64 base, GError **error)
{
  Registration *rec = g_hash_table_lookup (reg->registered, &base);
  NcclResult r;

  if (rec == NULL)
    return TRUE; /* its registration failed: counted then */
  r = reg->nccl->CommDeregister (reg->comm, rec->handle);
  reg->counts.registered--;
  reg->counts.registered_bytes -= rec->length;
  if (r != 0)
    {
      _memres_nccl_set_error (error, reg->nccl, r, reg->comm, "ncclCommDeregister",
                              (gconstpointer) (guintptr) base, rec->length);
      g_hash_table_remove (reg->registered, &base);
      return FALSE;
    }
  reg->counts.deregistrations++;
  g_hash_table_remove (reg->registered, &base);
  return TRUE;
}

static void
on_segment (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
            guint64 previous_length, gpointer data)
{
  MemresNcclRegistrar *reg = data;
  GError *error = NULL;

  g_mutex_lock (&reg->lock);
  if (!reg->closed)
    switch (event)
      {
      case MEMRES_SEGMENT_MAPPED:
        register_range (reg, seg->base, seg->length);
        break;
      case MEMRES_SEGMENT_GROWN:
        /* NCCL cannot grow a registration: the segment is registered again, whole */
        if (!deregister_range (reg, seg->base, &error))
          keep_failure (reg, error);
        register_range (reg, seg->base, seg->length);
        break;
      case MEMRES_SEGMENT_UNMAPPING:
        if (!deregister_range (reg, seg->base, &error))
          keep_failure (reg, error);
        break;
      default:
        break;
      }
  g_mutex_unlock (&reg->lock);
}

/**
 * memres_nccl_registrar_new:
 * @mr: the resource whose segments to register: a kind with segments (`vmm`, `arena`, `cache`
 *   over anything), or a pass-through adaptor above one (memres_resource_subscribe_segments())
 * @comm: the NCCL communicator, an `ncclComm_t` (borrowed: keep it alive until
 *   memres_nccl_registrar_free())
 * @error: return location for a #GError
 *
 * Registers every segment of @mr with @comm, as plain (local, not collective) NCCL buffer
 * registration, and keeps it so: it subscribes to @mr's segment events and calls
 * `ncclCommRegister` for each segment there is now and each one mapped later,
 * `ncclCommDeregister` when one is about to be unmapped (its callback returns before the driver
 * unmaps it), and both, deregistration first, when one grows in place (NCCL cannot grow a
 * registration). So NCCL sees one registration per segment (a `vmm` buffer, a `cache` chunk, an
 * `arena` granule), however many buffers (tensors) a segment holds, and collectives on
 * any buffer inside one skip NCCL's own registration. The calls run on the thread that maps or
 * unmaps, inside the allocation or close; a registrar's own lock serializes them. A tag's sleep
 * (memres_resource_sleep()) deregisters the segments it releases before it unmaps any, and its
 * wake registers them again once they are mapped (a registration does not survive new physical
 * memory).
 *
 * An NCCL failure inside an event cannot fail the allocation that raised it: the segment stays
 * unregistered (NCCL then copies, as for unregistered memory), the failure is counted
 * (the @failures of #MemresNcclCounts) and the first one is kept for memres_nccl_registrar_check().
 * Not collective: each rank may have its own segments. Thread-safe.
 *
 * The registrar holds a reference on @mr until memres_nccl_registrar_free(), so the resource's
 * finalize (which unmaps what it still holds: a cache's chunks, an arena's granules) comes after
 * the registrar deregistered every segment, whichever of the two the application drops first.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @comm is %NULL; %MEMRES_ERROR_NOT_SUPPORTED when
 * NCCL cannot be loaded (memres_nccl_is_available()) or @mr has no segment events;
 * %MEMRES_NCCL_ERROR (the `ncclResult_t`) when registering an existing segment failed, in which
 * case the ones registered before it are deregistered and nothing is left subscribed.
 *
 * Returns: (transfer full): the registrar, for memres_nccl_registrar_free(); %NULL on failure
 *
 * Since: 2.0
 */
MemresNcclRegistrar *
memres_nccl_registrar_new (MemresResource *mr, gpointer comm, GError **error)
{
  const NcclLibrary *nccl;
  MemresNcclRegistrar *reg;
  GError *first = NULL;

  g_return_val_if_fail (mr != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (comm == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "registering a resource with NCCL: the communicator is NULL");
      return NULL;
    }
  if ((nccl = _memres_nccl_library (error)) == NULL)
    return NULL;

  reg = g_new0 (MemresNcclRegistrar, 1);
  reg->refs = 2; /* the owner's, the subscription's */
  reg->nccl = nccl;
  reg->comm = comm;
  reg->mr = memres_resource_ref (mr);
  g_mutex_init (&reg->lock);
  reg->registered = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  reg->subscription
      = memres_resource_subscribe_segments (mr, on_segment, reg, registrar_unref, error);
  if (reg->subscription == 0)
    {
      reg->refs = 1; /* no destroy notify on failure */
      registrar_unref (reg);
      return NULL;
    }
  g_mutex_lock (&reg->lock);
  first = g_steal_pointer (&reg->first_error);
  g_mutex_unlock (&reg->lock);
  if (first != NULL)
    {
      memres_nccl_registrar_free (reg, NULL);
      g_propagate_error (error, first);
      return NULL;
    }
  return reg;
}

/**
 * memres_nccl_registrar_get_counts:
 * @reg: a registrar
 * @counts: (out caller-allocates): its counts
 *
 * Reads @reg's counts: the segments registered now and their bytes, the registrations and
 * deregistrations made, the NCCL calls that failed. Thread-safe (a snapshot under the
 * registrar's lock). No NCCL call.
 *
 * Since: 2.0
 */
void
memres_nccl_registrar_get_counts (MemresNcclRegistrar *reg, MemresNcclCounts *counts)
{
  g_return_if_fail (reg != NULL);
  g_return_if_fail (counts != NULL);

  g_mutex_lock (&reg->lock);
  *counts = reg->counts;
  g_mutex_unlock (&reg->lock);
}

/**
 * memres_nccl_registrar_check:
 * @reg: a registrar
 * @error: return location for a #GError
 *
 * Says whether every NCCL call @reg made in segment events succeeded. Thread-safe. No NCCL call.
 *
 * Errors: a copy of the first failure, %MEMRES_NCCL_ERROR with its `ncclResult_t` (the message
 * names the call and the range); the @failures of #MemresNcclCounts
 * counts them all.
 *
 * Returns: %TRUE when none failed
 *
 * Since: 2.0
 */
gboolean
memres_nccl_registrar_check (MemresNcclRegistrar *reg, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (reg != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_mutex_lock (&reg->lock);
  ok = reg->first_error == NULL;
  if (!ok)
    g_propagate_error (error, g_error_copy (reg->first_error));
  g_mutex_unlock (&reg->lock);
  return ok;
}

/**
 * memres_nccl_registrar_free:
 * @reg: (transfer full): a registrar
 * @error: return location for a #GError
 *
 * Ends @reg: unsubscribes from the resource's segment events and calls `ncclCommDeregister` for
 * every segment still registered. Call it before destroying the communicator, and before the
 * resource's last buffers close if NCCL must not see their segments go. Thread-safe against
 * events on other threads (one already running finishes under the registrar's lock; none
 * registers anything after this begins). @reg is freed in every case.
 *
 * Errors: %MEMRES_NCCL_ERROR, the first `ncclCommDeregister` that failed (the others are still
 * tried; nothing is left registered on memres's side).
 *
 * Returns: %TRUE when every deregistration succeeded
 *
 * Since: 2.0
 */
gboolean
memres_nccl_registrar_free (MemresNcclRegistrar *reg, GError **error)
{
  GError *first = NULL;
  g_autoptr (GArray) bases = g_array_new (FALSE, FALSE, sizeof (guint64));
  GHashTableIter iter;
  gpointer key;

  g_return_val_if_fail (reg != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_mutex_lock (&reg->lock);
  reg->closed = TRUE;
  /* the bases copied: a deregistration frees its key */
  g_hash_table_iter_init (&iter, reg->registered);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_array_append_val (bases, *(guint64 *) key);
  for (guint i = 0; i < bases->len; i++)
    {
      GError *local = NULL;

      if (!deregister_range (reg, g_array_index (bases, guint64, i), &local))
        {
          reg->counts.failures++;
          if (first == NULL)
            first = local;
          else
            g_error_free (local);
        }
    }
  g_mutex_unlock (&reg->lock);
  /* after the deregistrations: the resource (referenced) keeps the segments mapped meanwhile */
  if (!memres_resource_unsubscribe_segments (reg->mr, reg->subscription, NULL))
    g_warn_if_reached ();
  registrar_unref (reg);
  if (first != NULL)
    {
      g_propagate_error (error, first);
      return FALSE;
    }
  return TRUE;
}

/**
 * memres_nccl_window_register:
 * @buf: the buffer the window covers, whole: `vmm` or `arena` memory (or memory from
 *   `ncclMemAlloc` wrapped with memres_buffer_new_for_pointer()); NCCL 2.28 refuses pool memory
 *   (`dmr`, `cache>dmr`) with `ncclUnhandledCudaError`
 * @comm: the NCCL communicator, an `ncclComm_t` (borrowed)
 * @flags: 0, or %MEMRES_NCCL_WINDOW_SYMMETRIC
 * @error: return location for a #GError
 *
 * Registers @buf as an NCCL window (`ncclCommWindowRegister`). This is a **collective** call:
 * every rank of @comm must make it, in the same order as its other collectives on @comm, with a
 * buffer of the same size (for a symmetric window, at the same offset of matching
 * allocations: a buffer of the same size from an `arena` or `vmm` resource made with the same
 * options on every rank). It is therefore never made from segment events, which are one rank's:
 * a window covers @buf as it is now. When one rank's arena grows (maps more granules, adds a
 * segment), its windows do not change; a window over new memory is another collective call on
 * every rank. Do not resize @buf while the window exists (a `vmm` buffer moved by a grow would
 * leave the window on unmapped memory). The window holds a reference on @buf
 * (memres_buffer_ref()) until memres_nccl_window_deregister(): it keeps the buffer structure,
 * not its memory (memres_buffer_close() frees the memory whatever references remain), so close
 * @buf only once the window is deregistered on every rank. Blocks like any collective until
 * every rank has called it.
 *
 * Sleep (memres-sleep.h): a sleeping buffer has no memory under it, so its window is refused.
 * Do not put the tag of a buffer with a window to sleep: NCCL holds the memory it registered
 * (and peers may have mapped it), so the sleep would not give it back and the window would stay
 * on the old memory after the wake. Deregister the window on every rank before the sleep and
 * register it again after the wake.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a %NULL @comm, unknown @flags or a buffer of 0 bytes
 * (no NCCL call);
 * %MEMRES_ERROR_CLOSED when @buf is closed (no NCCL call);
 * %MEMRES_SLEEP_ERROR_ASLEEP when @buf is asleep (no NCCL call);
 * %MEMRES_ERROR_NOT_SUPPORTED when NCCL cannot be loaded or has no windows (before 2.27);
 * %MEMRES_NCCL_ERROR (the `ncclResult_t`) when NCCL refuses.
 *
 * Returns: (transfer full): the window; %NULL on failure
 *
 * Since: 2.0
 */
MemresNcclWindow *
memres_nccl_window_register (MemresBuffer *buf, gpointer comm, guint flags, GError **error)
{
  const NcclLibrary *nccl;
  MemresNcclWindow *w;
  gpointer win = NULL;
  NcclResult r;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (comm == NULL || (flags & ~(guint) MEMRES_NCCL_WINDOW_SYMMETRIC) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "registering an NCCL window: %s",
                   comm == NULL ? "the communicator is NULL" : "unknown flags");
      return NULL;
    }
  if (memres_buffer_is_closed (buf))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED,
                   "registering an NCCL window over a closed buffer");
      return NULL;
    }
  if (memres_buffer_get_size (buf) == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "registering an NCCL window over a buffer of 0 bytes");
      return NULL;
    }
  if (memres_buffer_is_asleep (buf))
    {
      g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP,
                   "registering an NCCL window over a buffer of tag \"%s\": it is asleep (no "
                   "memory under it until memres_resource_wake())",
                   memres_buffer_get_tag (buf));
      return NULL;
    }
  if ((nccl = _memres_nccl_library (error)) == NULL)
    return NULL;
  if (nccl->CommWindowRegister == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "this NCCL (version %d) has no windows (ncclCommWindowRegister: NCCL 2.27 "
                   "or later)",
                   nccl->version);
      return NULL;
    }
  r = nccl->CommWindowRegister (comm, memres_buffer_get_pointer (buf), memres_buffer_get_size (buf),
                                &win, (int) flags);
  if (r != 0)
    {
      _memres_nccl_set_error (error, nccl, r, comm, "ncclCommWindowRegister",
                              memres_buffer_get_pointer (buf), memres_buffer_get_size (buf));
      return NULL;
    }
  w = g_new0 (MemresNcclWindow, 1);
  w->nccl = nccl;
  w->comm = comm;
  w->win = win;
  w->buf = memres_buffer_ref (buf);
  return w;
}

/**
 * memres_nccl_window_get_handle:
 * @win: a window
 *
 * The NCCL window, for NCCL's calls that take one (an `ncclWindow_t`). No NCCL call.
 *
 * Returns: (transfer none): the `ncclWindow_t`, valid until memres_nccl_window_deregister()
 *
 * Since: 2.0
 */
gpointer
memres_nccl_window_get_handle (MemresNcclWindow *win)
{
  g_return_val_if_fail (win != NULL, NULL);
  return win->win;
}

/**
 * memres_nccl_window_deregister:
 * @win: (transfer full): a window
 * @error: return location for a #GError
 *
 * Deregisters the window (`ncclCommWindowDeregister`), a **collective** call as its
 * registration was: every rank makes it. Then drops the window's reference on its buffer.
 * @win is freed in every case.
 *
 * Errors: %MEMRES_NCCL_ERROR (the `ncclResult_t`) when NCCL refuses.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_nccl_window_deregister (MemresNcclWindow *win, GError **error)
{
  NcclResult r;

  g_return_val_if_fail (win != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  r = win->nccl->CommWindowDeregister (win->comm, win->win);
  if (r != 0)
    _memres_nccl_set_error (error, win->nccl, r, win->comm, "ncclCommWindowDeregister",
                            memres_buffer_get_pointer (win->buf),
                            memres_buffer_get_size (win->buf));
  memres_buffer_unref (win->buf);
  g_free (win);
  return r == 0;
}
