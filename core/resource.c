/* memres - CUDA memory resources
 * resource.c: a resource's creation (the instance, its slot pointers, what its layers say of
 * their memory), its lifetime (references and the buffer stripes) and what it says of itself
 * (kind, spec, upstream, device, flags). The calls of its slots, which layer serves one and peer
 * access are resource-slots.c's; the bytes on its stripes counting.c's; allocation lives in
 * buffer.c; statistics, trim and counters in resource-query.c. */
#include "memres-private.h"

/* MemresResource.dead_count from creation until the last reference's resource_last_ref() has
 * summed the stripes into it and taken this out: what counts up or down there before that
 * (closes on dead stripes, a reference taken again, a buffer allocated on a dead stripe) cannot
 * take it to 0 early */
#define DEAD_BIAS ((gint64) 1 << 48)

#include <stdlib.h>
#include <string.h>

/* The instance and its private data are one allocation; the private data starts at a 16-byte
 * boundary after the instance. (Before it, on the instance's page, a handle would point into the
 * middle of its block, and valgrind would take a resource kept until exit for a possible leak.) */
#define PRIV_OFFSET ((sizeof (MemresResource) + 15) & ~(gsize) 15)

OWNER_FENCE_DEFINE;

/* The flags this core knows: bits 0 to 8 (MEMRES_MEMORY_DEVICE_ACCESSIBLE to
 * MEMRES_MEMORY_FABRIC_HANDLES); a flag appended to MemresMemoryFlags widens the mask. */
#define KNOWN_FLAGS ((MemresMemoryFlags) ((1u << 9) - 1))

/* Checks what the query slot reported: a device that exists (or -1), flags this core knows
 * (unknown ones are cleared with a warning, as is MEMRES_MEMORY_IMPORTED on a resource that
 * init made). */
static gboolean
check_info (MemresResource *mr, gboolean imported, GError **error)
{
  g_autoptr (GError) local = NULL;
  gint device = mr->info.device;

  if (device < -1 || (device >= 0 && !memres_cuda_check_device (device, &local)))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "kind \"%s\": query reported device %d, which %s%s%s: a plugin bug",
                   mr->kind->name, device,
                   local != NULL ? "cannot be used (" : "is neither a device ordinal nor -1 (host)",
                   local != NULL ? local->message : "", local != NULL ? ")" : "");
      return FALSE;
    }
  if (mr->info.flags & ~KNOWN_FLAGS)
    {
      g_warning ("kind \"%s\": query reported unknown flags 0x%x: ignored", mr->kind->name,
                 (guint) (mr->info.flags & ~KNOWN_FLAGS));
      mr->info.flags &= KNOWN_FLAGS;
    }
  if (!imported && (mr->info.flags & MEMRES_MEMORY_IMPORTED))
    {
      g_warning ("kind \"%s\": query reported MEMRES_MEMORY_IMPORTED for a resource made by "
                 "init: ignored",
                 mr->kind->name);
      mr->info.flags &= ~MEMRES_MEMORY_IMPORTED;
    }
  return TRUE;
}

/* What an adaptor's information may keep of its upstream's: IPC only where a layer's IPC table
 * serves it (an upstream's passed through), resizing only where the slot does (its own, or its
 * upstream's passed through). */
static void
adaptor_info (MemresResource *mr)
{
  MemresMemoryFlags flags;

  mr->info = mr->upstream->info;
  mr->info.flags &= ~MEMRES_MEMORY_IMPORTED;
  if (mr->ops->query != NULL)
    mr->ops->query (mr, &mr->info);
  flags = mr->info.flags;
  if (_memres_resource_ipc_owner (mr)->kind->ipc.version == 0)
    flags &= ~(MEMRES_MEMORY_IPC_ENABLED | MEMRES_MEMORY_FABRIC_HANDLES);
  if (_memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (resize), TRUE)->ops->resize == NULL)
    flags &= ~MEMRES_MEMORY_RESIZABLE;
  mr->info.flags = flags & ~MEMRES_MEMORY_IMPORTED;
}

/* The kinds' inits (and import setups) running on this thread, one inside the other, and the
 * kind of the innermost: a kind whose init creates a resource of its own kind would otherwise
 * recurse until the stack overflows. A creation while INIT_MAX_DEPTH run is refused. */
#define INIT_MAX_DEPTH 32
static __thread guint init_depth;
static __thread const char *init_kind;

/* Whether @mr's stack can sleep (sleep.h): the layer its records reach (through the adaptors
 * that pass allocations) has the sleep and wake slots, and an adaptor with them has an upstream
 * that can sleep. */
static gboolean
resource_can_sleep (MemresResource *mr)
{
  mr = _memres_resource_slot_owner (mr, G_STRUCT_OFFSET (MemresResourceOps, sleep), TRUE);
  if (mr->ops->sleep == NULL || mr->ops->wake == NULL)
    return FALSE;
  return mr->upstream == NULL || resource_can_sleep (mr->upstream);
}

/* An instance of @kind: set up by the init slot with @options, or by @setup (an import, named
 * @setup_name in messages) with @data when @setup is not NULL. */
static MemresResource *
resource_create (MemresKind *kind, const MemresOptions *options, MemresResourceSetupFunc setup,
                 const char *setup_name, gconstpointer data, MemresResource *upstream,
                 const char *spec, GError **error)
{
  MemresResource *mr;
  GError *local = NULL;
  gpointer mem = NULL;
  const char *outer_kind;
  gsize total;
  gboolean ok;

  g_return_val_if_fail (kind != NULL, NULL);
  g_return_val_if_fail ((upstream != NULL) == ((kind->flags & MEMRES_KIND_ADAPTOR) != 0), NULL);
  if (init_depth >= INIT_MAX_DEPTH)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "kind \"%s\": not created: inside the init of kind \"%s\", with %d "
                   "kinds' inits running on this thread, one inside the other, the most that "
                   "may nest (a kind whose init creates a resource of its own kind recurses "
                   "without end)",
                   kind->name, init_kind, INIT_MAX_DEPTH);
      return NULL;
    }
  if (kind->instance_size > G_MAXSIZE - PRIV_OFFSET)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "kind \"%s\": private data too large", kind->name);
      return NULL;
    }
  total = PRIV_OFFSET + kind->instance_size;
  if (posix_memalign (&mem, G_ALIGNOF (MemresResource), total) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "kind \"%s\": cannot allocate %" G_GSIZE_FORMAT " bytes for the instance",
                   kind->name, total);
      return NULL;
    }
  memset (mem, 0, total);
  mr = mem;
  mr->refs = MEMRES_RESOURCE_APP_REF;
  mr->dead_count = DEAD_BIAS;
  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    mr->stripes[i].n = MEMRES_STRIPE_BIAS;
  owner_fence_init (); /* before any thread counts on a stripe */
  /* without membarrier(), plain updates would need a fence each: as costly as locked ones */
  mr->stripes_stop = !owner_fence_is_light ();
  mr->kind = memres_kind_ref (kind);
  mr->ops = &mr->kind->ops;
  if (kind->flags & MEMRES_KIND_COUNTED)
    _memres_resource_set_counted_slots (mr, upstream);
  else
    {
      mr->allocate = mr->ops->allocate;
      mr->deallocate = mr->ops->deallocate;
    }
  mr->priv = kind->instance_size > 0 ? (guint8 *) mem + PRIV_OFFSET : NULL;
  mr->spec = g_strdup (spec != NULL ? spec : kind->name);
  mr->generation = g_atomic_int_get (&_memres_fork_generation_);
  _memres_fork_add_part (MEMRES_FORK_COUNTS, _memres_counts_fork);
  mr->upstream = upstream; /* valid while init runs; the reference is taken over on success */
  /* an adaptor without get_stats reports its upstream's statistics: its count would go unread */
  mr->count_usage = !(kind->flags & (MEMRES_KIND_OWN_USAGE | MEMRES_KIND_COUNTED))
                    && (upstream == NULL || kind->ops.get_stats != NULL);
  /* the layers below were made first */
  if ((kind->flags & (MEMRES_KIND_COUNTED | MEMRES_KIND_TAGGED))
      || ((kind->flags & MEMRES_KIND_PASSES_ALLOCATIONS) && upstream != NULL
          && (upstream->tags_wanted & MEMRES_TAGS_READ)))
    mr->tags_wanted = MEMRES_TAGS_READ;
  if ((kind->flags & MEMRES_KIND_COUNTED) && (mr->counts = _memres_counts_new ()) == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "kind \"%s\": cannot allocate %" G_GSIZE_FORMAT " bytes for its counts",
                   kind->name, sizeof (MemresCounts));
      memres_kind_unref (mr->kind);
      g_free (mr->spec);
      free (mem);
      return NULL;
    }

  outer_kind = init_kind;
  init_depth++;
  init_kind = kind->name;
  if (setup != NULL)
    ok = _memres_resource_slot_result (mr, setup_name, setup (mr, data, &local), &local, error);
  else
    ok = _memres_resource_slot_result (mr, "init", mr->ops->init (mr, options, &local), &local,
                                       error);
  init_kind = outer_kind;
  init_depth--;
  if (ok)
    {
      if (upstream != NULL)
        adaptor_info (mr);
      else
        {
          mr->info.device = -1;
          mr->ops->query (mr, &mr->info);
        }
      ok = check_info (mr, setup != NULL, error);
      if (!ok)
        mr->ops->finalize (mr);
      /* an adaptor's memory is its upstream's, whose deallocate waits when it is called */
      mr->wait_before_free
          = upstream == NULL
            && (mr->info.flags & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED))
                   == MEMRES_MEMORY_DEVICE_ACCESSIBLE;
    }
  if (!ok)
    {
      _memres_counts_free (mr->counts);
      memres_kind_unref (mr->kind);
      g_free (mr->spec);
      free (mem);
      return NULL;
    }
  /* an imported pool allocates nothing of its own: nothing of it sleeps */
  if (setup == NULL && resource_can_sleep (mr))
    {
      mr->sleep = _memres_sleep_state_new ();
      mr->tags_wanted |= MEMRES_TAGS_SLEEP;
    }
  _memres_fork_add_resource (mr);
  return mr;
}

MemresResource *
_memres_resource_new_imported (MemresKind *kind, MemresResourceSetupFunc setup,
                               const char *setup_name, gconstpointer data, const char *spec,
                               GError **error)
{
  g_return_val_if_fail (setup != NULL, NULL);
  return resource_create (kind, NULL, setup, setup_name, data, NULL, spec, error);
}

MemresResource *
_memres_resource_new_layer (MemresKind *kind, const MemresOptions *options,
                            MemresResource *upstream, const char *spec, GError **error)
{
  return resource_create (kind, options, NULL, NULL, NULL, upstream, spec, error);
}

static void resource_ref_again (MemresResource *mr);

/**
 * memres_resource_ref:
 * @mr: a #MemresResource
 *
 * Adds a reference. Thread-safe. A resource that only its open buffers hold (every reference
 * dropped) can be referenced again through one of them (memres_buffer_get_resource()): it then
 * serves allocations as before and is finalized after the last of its references and buffers.
 *
 * Returns: (transfer full): @mr
 *
 * Since: 1.0
 */
MemresResource *
memres_resource_ref (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);

  if (G_UNLIKELY (__atomic_fetch_add (&mr->refs, MEMRES_RESOURCE_APP_REF, __ATOMIC_ACQ_REL) == 0))
    resource_ref_again (mr);
  return mr;
}

/* Destroys the close event buffer-streams.c kept in @mr (kept here, at the end of the
 * resource's life, so that resource.c calls nothing of buffer-streams.c, which calls
 * _memres_resource_context_device()). */
static void
clear_close_event (MemresResource *mr)
{
  CUevent event = __atomic_exchange_n (&mr->close_event, NULL, __ATOMIC_ACQ_REL);
  const MemresCudaDriver *drv;

  if (event != NULL && (drv = memres_cuda_get_driver (NULL)) != NULL)
    (void) drv->cuEventDestroy (event);
}

static void
resource_finalize (MemresResource *mr)
{
  MemresResource *upstream;

  _memres_fork_remove_resource (mr);
  if (mr->ipc != NULL)
    mr->ipc->hooks->finalize (mr);
  /* in the child of a fork(), what the kind holds stays (no driver call may be made) */
  if (!_memres_resource_is_inherited (mr))
    {
      clear_close_event (mr);
      mr->ops->finalize (mr);
    }
  _memres_segments_forget (mr);
  _memres_counts_free (mr->counts);
  _memres_sleep_state_free (mr->sleep, _memres_resource_is_inherited (mr));
  memres_kind_unref (mr->kind);
  g_free (mr->spec);
  g_free (mr->oom_report);
  g_free (mr->oom_snapshot);
  upstream = mr->upstream;
  free (mr);
  if (upstream != NULL)
    memres_resource_unref (upstream);
}

/* @refs dropped to 0: the stripes die, their buffers move to dead_count, and the resource is
 * finalized now when none is open, else by the close of the last (_memres_resource_buffer_gone).
 * First the stripes stop: after the barrier every thread either is seen inside its plain update
 * (waited for) or sees the stop and changes its stripe with locked instructions from then on.
 * A stripe's close either came before its mark (and is in the sum) or sees the mark. */
static void
resource_last_ref (MemresResource *mr)
{
  gint64 alive = 0;

  /* not the first time: a reference taken again (memres_resource_ref()) went, and with it the
   * one it counted in dead_count; the stripes' buffers were summed the first time (or are being
   * summed: the bias keeps dead_count above 0 until they are) */
  if (__atomic_exchange_n (&mr->stripes_dead, 1, __ATOMIC_ACQ_REL))
    {
      _memres_resource_buffer_gone (mr);
      return;
    }

  __atomic_store_n (&mr->stripes_stop, 1, __ATOMIC_SEQ_CST);
  owner_heavy_barrier ();
  for (guint i = 0; i < MEMRES_STRIPE_SHARED - 1; i++)
    while (__atomic_load_n (&mr->stripes[i].busy, __ATOMIC_ACQUIRE))
      g_thread_yield ();
  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    alive += (__atomic_fetch_or (&mr->stripes[i].n, MEMRES_STRIPE_DEAD, __ATOMIC_ACQ_REL)
              & ~MEMRES_STRIPE_DEAD)
             - MEMRES_STRIPE_BIAS;
  /* the sum in, the bias out: from now on dead_count is the count of what keeps the resource */
  if (__atomic_add_fetch (&mr->dead_count, alive - DEAD_BIAS, __ATOMIC_ACQ_REL) == 0)
    resource_finalize (mr);
}

void
_memres_resource_buffer_gone (MemresResource *mr)
{
  if (__atomic_sub_fetch (&mr->dead_count, 1, __ATOMIC_ACQ_REL) == 0)
    resource_finalize (mr);
}

void
_memres_resource_dead_allocated (MemresResource *mr)
{
  __atomic_add_fetch (&mr->dead_count, 1, __ATOMIC_ACQ_REL);
}

/* memres_resource_ref() that took @refs from 0: a resource whose references had all gone while
 * buffers of it were open, referenced again through one of them. The reference counts as one
 * more in dead_count until @refs drops to 0 again (resource_last_ref() gives it back), so that
 * the close of the last of those buffers does not finalize the resource under it. The last
 * reference's resource_last_ref() may still be summing the stripes on another thread: the bias
 * keeps dead_count above 0 until it has. */
G_GNUC_NO_INLINE static void
resource_ref_again (MemresResource *mr)
{
  _memres_resource_dead_allocated (mr);
}

gint64
_memres_resource_count_allocated (MemresResource *mr)
{
  gint64 n = 0;

  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    n += (__atomic_load_n (&mr->stripes[i].n, __ATOMIC_RELAXED) & ~MEMRES_STRIPE_DEAD)
         - MEMRES_STRIPE_BIAS;
  return n;
}

/* One more open buffer outside the stripes (the imported buffers' shared reference). */
void
_memres_resource_add_buffer (MemresResource *mr)
{
  __atomic_add_fetch (&mr->refs, 1, __ATOMIC_RELAXED);
}

/* One such buffer fewer; the last reference of any sort finalizes @mr. */
void
_memres_resource_remove_buffer (MemresResource *mr)
{
  if (__atomic_sub_fetch (&mr->refs, 1, __ATOMIC_ACQ_REL) == 0)
    resource_last_ref (mr);
}

/* A new application reference on @mr unless it is already being finalized (the IPC import
 * table finds resources whose last reference may be going away concurrently). */
gboolean
_memres_resource_try_ref (MemresResource *mr)
{
  gint64 old = __atomic_load_n (&mr->refs, __ATOMIC_RELAXED);

  do
    {
      if (old <= 0)
        return FALSE;
    }
  while (!__atomic_compare_exchange_n (&mr->refs, &old, old + MEMRES_RESOURCE_APP_REF, TRUE,
                                       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
  return TRUE;
}

/**
 * memres_resource_unref:
 * @mr: (transfer full): a #MemresResource
 *
 * Drops a reference. Each open buffer holds one, so the resource (a pool, say) is finalized
 * (the kind's finalize slot) only when the application's last reference and the last buffer
 * are gone. Thread-safe.
 *
 * Since: 1.0
 */
void
memres_resource_unref (MemresResource *mr)
{
  g_return_if_fail (mr != NULL);

  /* a buffer waiting for a capture's end may hold the last reference but this one */
  _memres_buffer_deferred_flush ();
  if (__atomic_sub_fetch (&mr->refs, MEMRES_RESOURCE_APP_REF, __ATOMIC_ACQ_REL) == 0)
    resource_last_ref (mr);
}

/**
 * memres_resource_get_private:
 * @mr: a #MemresResource
 *
 * For plugins: the instance's private data, `instance_size` bytes (see #MemresKindInfo),
 * zero-filled at creation, 16-byte aligned. Thread-safe.
 *
 * Returns: (transfer none): the private data, or %NULL when the kind has none
 *
 * Since: 1.0
 */
MEMRES_HOT gpointer
memres_resource_get_private (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);
  return mr->priv;
}

/**
 * memres_resource_get_kind_name:
 * @mr: a #MemresResource
 *
 * The name of the kind that made @mr (its top layer's, for a stack), such as `host` or `stats`.
 * Fixed at creation: thread-safe; sets no error.
 *
 * Returns: (transfer none): the name of the resource's kind
 *
 * Since: 1.0
 */
const char *
memres_resource_get_kind_name (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);
  return mr->kind->name;
}

/**
 * memres_resource_get_kind:
 * @mr: a #MemresResource
 *
 * The kind that made @mr (its top layer's, for a stack), to read its options schema or flags.
 * Fixed at creation: thread-safe; sets no error.
 *
 * Returns: (transfer none): the resource's kind, valid while @mr lives
 *
 * Since: 1.0
 */
MemresKind *
memres_resource_get_kind (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);
  return mr->kind;
}

/**
 * memres_resource_to_string:
 * @mr: a #MemresResource
 *
 * The resource as a spec string, every option that has a value written out (defaults
 * included, values escaped as memres_resource_new() reads them), such as "host:alignment=256";
 * for a stack, every layer from @mr down, joined by `>` (`@NAME` layers appear as what they
 * named); for an imported resource, a description of the import (`ipc (imported pool ID)`, not
 * a spec: memres_resource_new() refuses it). For every other resource, memres_resource_new() of
 * the result creates the same stack again. Thread-safe.
 *
 * Returns: (transfer full): a new string; free with `g_free`
 *
 * Since: 1.0
 */
char *
memres_resource_to_string (MemresResource *mr)
{
  GString *str;

  g_return_val_if_fail (mr != NULL, NULL);

  str = g_string_new (mr->spec);
  for (mr = mr->upstream; mr != NULL; mr = mr->upstream)
    {
      g_string_append_c (str, '>');
      g_string_append (str, mr->spec);
    }
  return g_string_free (str, FALSE);
}

/**
 * memres_resource_get_upstream:
 * @mr: a #MemresResource
 *
 * The layer below @mr in its stack: for an adaptor (#MEMRES_KIND_ADAPTOR), the resource the
 * core created from the rest of the spec; %NULL for a base kind. The adaptor holds it until
 * the adaptor itself is finalized, so it is valid while @mr is (already while the adaptor's
 * init runs). Walk a stack with it: `for (r = mr; r; r = memres_resource_get_upstream (r))`.
 * Thread-safe.
 *
 * Returns: (transfer none) (nullable): the upstream, or %NULL
 *
 * Since: 1.2
 */
MemresResource *
memres_resource_get_upstream (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);
  return mr->upstream;
}

/**
 * memres_resource_get_device:
 * @mr: a #MemresResource
 *
 * Which device the memory of @mr belongs to. Fixed at creation: thread-safe; sets no error.
 *
 * Returns: the device ordinal the resource's memory belongs to, or -1 for host memory
 *   (pageable or page-locked: see memres_buffer_get_device())
 *
 * Since: 1.0
 */
gint
memres_resource_get_device (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, -1);
  return mr->info.device;
}

/**
 * memres_resource_get_flags:
 * @mr: a #MemresResource
 *
 * What the memory of @mr can do: who can access it, whether it can be shared, resized, is
 * stream-ordered or managed. Fixed at creation (the kind's init slot chose them): thread-safe;
 * sets no error.
 *
 * Returns: what the resource's memory can do (#MemresMemoryFlags)
 *
 * Since: 1.0
 */
MemresMemoryFlags
memres_resource_get_flags (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, 0);
  return mr->info.flags;
}

/**
 * memres_resource_is_device_accessible:
 * @mr: a #MemresResource
 *
 * Whether %MEMRES_MEMORY_DEVICE_ACCESSIBLE is in memres_resource_get_flags(). Thread-safe; sets no
 * error.
 *
 * Returns: %TRUE when device code can access the resource's memory
 *
 * Since: 1.0
 */
gboolean
memres_resource_is_device_accessible (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  return (mr->info.flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0;
}

/**
 * memres_resource_is_host_accessible:
 * @mr: a #MemresResource
 *
 * Whether %MEMRES_MEMORY_HOST_ACCESSIBLE is in memres_resource_get_flags(). Thread-safe; sets no
 * error.
 *
 * Returns: %TRUE when host code can dereference pointers of the resource's buffers
 *
 * Since: 1.0
 */
gboolean
memres_resource_is_host_accessible (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  return (mr->info.flags & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0;
}
