/* memres - CUDA memory resources
 * resource-slots.c: the calls of a resource's slots that are not inline in hot-path.h, and which
 * layer of a stack serves a slot: the check of a slot's result; the checks of the records the
 * memory slots return and take back (the slow halves of _memres_resource_call_allocate() and
 * _memres_resource_call_deallocate(): a contract breach reported and counted, a bad record
 * released) and the wait before freeing memory that is not stream-ordered; a counted layer's slot
 * pointers (the bodies of counting.h, one pair per MemresCountedMode, and their out-of-line
 * halves); peer access (the set_access and get_access slots) and the device whose context reaches
 * a resource's memory. It calls nothing of resource.c, which makes the resource and sets its
 * slot pointers (_memres_resource_set_counted_slots() for a counted layer). */
#include "memres-private.h"

#include <string.h>

/* Checks a slot's result: FALSE must come with an error, TRUE without one. */
static gboolean
slot_result (MemresResource *mr, const char *slot, gboolean ok, GError **local, GError **error)
{
  if (!ok && *local == NULL)
    g_set_error (local, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                 "kind \"%s\": %s failed without saying why", mr->kind->name, slot);
  if (ok && *local != NULL)
    {
      g_warning ("kind \"%s\": %s succeeded but set an error: %s", mr->kind->name, slot,
                 (*local)->message);
      g_clear_error (local);
    }
  if (!ok)
    g_propagate_error (error, g_steal_pointer (local));
  return ok;
}

/* A call of @mr's memory slot @slot (allocate, deallocate and the slots that fill an allocation
 * record) that broke the contract in a way @what says: reported once per call, as a critical
 * warning naming the kind, and counted (memres_resource_get_counters(): contract_breaches). */
static void
contract_breach (MemresResource *mr, const char *slot, const char *what)
{
  __atomic_add_fetch (&mr->contract_breaches, 1, __ATOMIC_RELAXED);
  g_critical ("kind \"%s\": %s %s, which breaks the slot contract (a plugin bug, counted in "
              "memres_resource_get_counters()'s contract_breaches)",
              mr->kind->name, slot, what);
}

/* slot_result() for the slot wrappers outside this file (resource.c's init and access, ipc/). */
gboolean
_memres_resource_slot_result (MemresResource *mr, const char *slot, gboolean ok, GError **local,
                              GError **error)
{
  return slot_result (mr, slot, ok, local, error);
}

/* The slot pointers of a counted layer (MemresResource.allocate/deallocate, set at creation):
 * counting.h's bodies, one pair per MemresCountedMode: for a kind with slots of its own, and for a
 * pass-through one without them (`stats`), which calls its upstream's, counting its upstream's
 * usage or not. */
#define COUNTED_SLOTS(name, mode)                                                                  \
  static MEMRES_HOT gboolean name##_allocate (MemresResource *mr, gsize size, MemresStream stream, \
                                              MemresAllocation *alloc, GError **error)             \
  {                                                                                                \
    return _memres_counted_allocate (mr, size, stream, alloc, error, mode);                        \
  }                                                                                                \
  static MEMRES_HOT gboolean name##_deallocate (MemresResource *mr, MemresAllocation *alloc,       \
                                                MemresStream stream, GError **error)               \
  {                                                                                                \
    return _memres_counted_deallocate (mr, alloc, stream, error, mode);                            \
  }
COUNTED_SLOTS (counted, MEMRES_COUNTED_OWN)
COUNTED_SLOTS (counted_pass, MEMRES_COUNTED_PASS)
COUNTED_SLOTS (counted_pass_usage, MEMRES_COUNTED_PASS_USAGE)

void
_memres_resource_set_counted_slots (MemresResource *mr, MemresResource *upstream)
{
  if (mr->ops->allocate != NULL)
    {
      mr->allocate = counted_allocate;
      mr->deallocate = counted_deallocate;
    }
  else if (upstream->count_usage)
    {
      mr->allocate = counted_pass_usage_allocate;
      mr->deallocate = counted_pass_usage_deallocate;
    }
  else
    {
      mr->allocate = counted_pass_allocate;
      mr->deallocate = counted_pass_deallocate;
    }
}

/* counting.h's out-of-line halves: a thread's first count gets the thread its stripe and calls
 * again (so that the bodies make no call but a tail call or the marks'); the shared stripe, the
 * tag of the call; each body expanded once per @mode, a constant there */
static G_GNUC_NO_INLINE gboolean
counted_allocated_first (MemresResource *mr, const MemresAllocation *alloc, gsize asked,
                         MemresCountedMode mode)
{
  _memres_stripe_assign ();
  return _memres_counted_allocated_slow (mr, alloc, asked, mode);
}

G_ALWAYS_INLINE static inline gboolean
counted_allocated_slow (MemresResource *mr, guint i, const MemresAllocation *alloc, gsize asked,
                        MemresCountedMode mode)
{
  _memres_counted_count (mr, i, alloc, (gint64) alloc->size, 1, TRUE,
                         _memres_counted_usage_of_mode (mr, mode), asked,
                         _memres_tag_of_call (alloc));
  return TRUE;
}

G_GNUC_NO_INLINE gboolean
_memres_counted_allocated_slow (MemresResource *mr, const MemresAllocation *alloc, gsize asked,
                                MemresCountedMode mode)
{
  guint i = _memres_thread.stripe_index;

  if (i == 0)
    return counted_allocated_first (mr, alloc, asked, mode);
  switch (mode)
    {
    case MEMRES_COUNTED_OWN:
      return counted_allocated_slow (mr, i, alloc, asked, MEMRES_COUNTED_OWN);
    case MEMRES_COUNTED_PASS:
      return counted_allocated_slow (mr, i, alloc, asked, MEMRES_COUNTED_PASS);
    default:
      return counted_allocated_slow (mr, i, alloc, asked, MEMRES_COUNTED_PASS_USAGE);
    }
}

static G_GNUC_NO_INLINE gboolean
counted_deallocate_first (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error)
{
  _memres_stripe_assign ();
  return mr->deallocate (mr, alloc, stream, error);
}

G_ALWAYS_INLINE static inline gboolean
counted_deallocate_slow (MemresResource *mr, guint i, MemresAllocation *alloc, MemresStream stream,
                         GError **error, MemresCountedMode mode)
{
  return _memres_counted_free (mr, i, alloc, stream, error, mode != MEMRES_COUNTED_OWN,
                               _memres_counted_usage_of_mode (mr, mode),
                               _memres_tag_of_call (alloc));
}

G_GNUC_NO_INLINE gboolean
_memres_counted_deallocate_slow (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                                 GError **error, MemresCountedMode mode)
{
  guint i = _memres_thread.stripe_index;

  if (i == 0)
    return counted_deallocate_first (mr, alloc, stream, error);
  switch (mode)
    {
    case MEMRES_COUNTED_OWN:
      return counted_deallocate_slow (mr, i, alloc, stream, error, MEMRES_COUNTED_OWN);
    case MEMRES_COUNTED_PASS:
      return counted_deallocate_slow (mr, i, alloc, stream, error, MEMRES_COUNTED_PASS);
    default:
      return counted_deallocate_slow (mr, i, alloc, stream, error, MEMRES_COUNTED_PASS_USAGE);
    }
}

G_GNUC_NO_INLINE gboolean
_memres_resource_call_deallocate_waiting (MemresResource *mr, MemresAllocation *alloc,
                                          MemresStream stream, GError **error)
{
  if (!_memres_resource_wait_stream (mr, stream, error))
    return FALSE;
  return mr->deallocate (mr, alloc, stream, error);
}

/* The slow half of _memres_resource_alloc_result() (hot-path.h): slot_result(), then, on
 * success, a record _memres_allocation_plausible() accepts. A success that breaks that contract is
 * released through the deallocate slot (its failure a warning), @alloc zeroed and refused with
 * MEMRES_ERROR_FAILED. */
gboolean
_memres_resource_alloc_result_slow (MemresResource *mr, const char *slot, gboolean ok,
                                    GError **local, gsize size, MemresStream stream,
                                    MemresAllocation *alloc, GError **error)
{
  g_autoptr (GError) release_error = NULL;
  const char *what;
  /* a counted layer counted whatever record its successful allocate returned (counting.h): the
   * counts of a record refused here are taken back, under the tag they were counted under */
  gboolean counted = ok && mr->counts != NULL && g_strcmp0 (slot, "allocate") == 0;
  guint tag = counted ? _memres_tag_of_call (alloc) : 0;
  gint64 bytes = (gint64) alloc->size;

  /* a pass-through counted layer's record is its upstream's, unchecked: judged, named and
   * released there */
  if (mr->counts != NULL && _memres_counted_passes (mr) && g_strcmp0 (slot, "allocate") == 0)
    {
      if (_memres_resource_alloc_result_slow (mr->upstream, slot, ok, local, size, stream, alloc,
                                              error))
        return TRUE;
      if (counted)
        _memres_counted_refused (mr, tag, bytes);
      return FALSE;
    }
  if (!ok && *local == NULL)
    contract_breach (mr, slot, "returned FALSE without setting an error");
  if (!slot_result (mr, slot, ok, local, error))
    return FALSE;
  if (_memres_allocation_plausible (alloc, size))
    return TRUE;
  if (counted)
    _memres_counted_refused (mr, tag, bytes);
  if (alloc->address == 0)
    what = "address 0";
  else if (alloc->size < size)
    what = "fewer bytes than asked for";
  else
    what = "a range no memory can have (above G_MAXSSIZE bytes or past the end of the address "
           "space)";
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
               "kind \"%s\": %s succeeded but returned %s (%" G_GSIZE_FORMAT
               " bytes at 0x%" G_GINT64_MODIFIER "x for %" G_GSIZE_FORMAT
               " asked): a plugin bug; the memory was given back to it",
               mr->kind->name, slot, what, alloc->size, alloc->address, size);
  /* a size no memory can have is no size to give back: released as the size asked for, so
   * that the layers below an adaptor that over-reported see a size they can have made (a
   * cache takes a size above its max_block for one of its direct allocations) */
  if (alloc->address != 0 && alloc->size > G_MAXSSIZE)
    alloc->size = size;
  /* a counted layer's counts taken back: counted again at the size released, as the release
   * uncounts it */
  if (counted)
    _memres_counted_count (mr, _memres_stripe_current (), alloc, (gint64) alloc->size, 1, FALSE,
                           NULL, 0, tag);
  if (!_memres_resource_call_deallocate (mr, alloc, stream, &release_error))
    g_warning ("kind \"%s\": releasing what %s returned failed: %s", mr->kind->name, slot,
               release_error->message);
  memset (alloc, 0, sizeof *alloc);
  return FALSE;
}

/* The slow half of _memres_resource_call_deallocate() (hot-path.h, which says the rule).
 * A breach sets the address to 0, as a release half-way does: the callers (a buffer's close, an
 * IPC mapping's, memres_upstream_deallocate()) see an address that changed: gone. */
static gboolean
deallocate_judge (MemresResource *mr, gboolean ok, GError **local, guint64 address,
                  MemresAllocation *alloc, GError **error)
{
  if (ok || (*local != NULL && (alloc->address == address || alloc->address == 0)))
    return slot_result (mr, "deallocate", ok, local, error);
  if (*local == NULL)
    {
      contract_breach (mr, "deallocate", "returned FALSE without setting an error");
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "kind \"%s\": deallocate failed without saying why, which breaks the slot "
                   "contract: the allocation of %" G_GSIZE_FORMAT " bytes at 0x%" G_GINT64_MODIFIER
                   "x is taken as released and never deallocated again (it may have leaked)",
                   mr->kind->name, alloc->size, address);
    }
  else
    {
      contract_breach (mr, "deallocate", "failed and changed the allocation's address");
      g_propagate_prefixed_error (error, g_steal_pointer (local),
                                  "kind \"%s\": deallocate failed and changed the allocation's "
                                  "address from 0x%" G_GINT64_MODIFIER "x to 0x%" G_GINT64_MODIFIER
                                  "x, which breaks the slot contract: the allocation is taken as "
                                  "released and never deallocated again (it may have leaked): ",
                                  mr->kind->name, address, alloc->address);
    }
  alloc->address = 0; /* as a slot that released half-way marks it: gone */
  return FALSE;
}

gboolean
_memres_resource_deallocate_result_slow (MemresResource *mr, gboolean ok, GError **local,
                                         guint64 address, MemresAllocation *alloc, GError **error)
{
  if (mr->counts == NULL)
    return deallocate_judge (mr, ok, local, address, alloc, error);
  /* a counted layer (counting.h) uncounted before its call: a pass-through layer's call judged
   * at the upstream, which made it, as memres_upstream_deallocate() would; the counts (and the
   * upstream's usage) counted again when the allocation was kept */
  if (_memres_counted_passes (mr))
    ok = _memres_resource_deallocate_result_slow (mr->upstream, ok, local, address, alloc, error);
  else
    ok = deallocate_judge (mr, ok, local, address, alloc, error);
  if (!ok && address != 0 && alloc->address == address)
    _memres_counted_count (mr, _memres_stripe_current (), alloc, (gint64) alloc->size, 1, FALSE,
                           _memres_counted_usage (mr), 0, _memres_tag_of_call (alloc));
  return ok;
}

/* resource.c's part of a counted layer's count (counting.h): the marks of the sets past their
 * quotas on the thread's stripe @i. A set within its quota now needs none: the quotas sum to at
 * most the mark (another thread's update may have raised this stripe's since the count saw it
 * passed). A record the caller's check refuses leaves them as they are: its counts are taken
 * back, and the next allocation that passes a quota updates them. */
void
_memres_counted_marks (MemresResource *mr, guint i, guint tag, MemresResource *usage,
                       const MemresAllocation *alloc, gsize asked)
{
  if (!_memres_allocation_plausible (alloc, asked))
    return;
  if (_memres_count_set_over_quota (&MEMRES_STRIPE_AT (mr, i)->set, i))
    _memres_counts_peak (mr);
  if (tag != 0 && _memres_count_set_over_quota (&mr->counts->tag_stripes[i - 1].tags[tag], i))
    _memres_counts_tag_peak (mr->counts, tag);
  if (usage != NULL && _memres_stripe_over_quota (MEMRES_STRIPE_AT (usage, i), i))
    _memres_resource_count_peak (usage, FALSE);
}

/* The wait before freeing memory that is not stream-ordered. `CUDA_ERROR_DEINITIALIZED` (the
 * driver is shutting down at process exit: no work of this process runs any more) lets the free
 * go ahead, as the kinds' frees take that code as success. */
gboolean
_memres_resource_wait_stream (MemresResource *mr, MemresStream stream, GError **error)
{
  GError *local = NULL;

  if (memres_cuda_stream_synchronize (_memres_resource_context_device (mr), stream, &local))
    return TRUE;
  if (g_error_matches (local, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED))
    {
      g_error_free (local);
      return TRUE;
    }
  g_propagate_error (error, local);
  g_prefix_error (error,
                  "kind \"%s\": waiting for stream %p before freeing memory that is not "
                  "stream-ordered: ",
                  mr->kind->name, (gpointer) stream);
  return FALSE;
}

gboolean
_memres_resource_not_supported (MemresResource *mr, const char *what, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "resources of kind \"%s\" do not support %s", mr->kind->name, what);
  return FALSE;
}

MemresResource *
_memres_resource_ipc_owner (MemresResource *mr)
{
  while (mr->kind->ipc.version == 0 && mr->upstream != NULL
         && (mr->kind->flags & MEMRES_KIND_PASSES_ALLOCATIONS))
    mr = mr->upstream;
  return mr;
}

MemresResource *
_memres_resource_slot_owner (MemresResource *mr, gsize slot_offset, gboolean allocation_level)
{
  for (;;)
    {
      gpointer slot;

      memcpy (&slot, (const guint8 *) mr->ops + slot_offset, sizeof slot);
      if (slot != NULL || mr->upstream == NULL)
        return mr;
      if (allocation_level && !(mr->kind->flags & MEMRES_KIND_PASSES_ALLOCATIONS))
        return mr;
      mr = mr->upstream;
    }
}

/**
 * memres_resource_set_access:
 * @mr: a #MemresResource
 * @descs: (array length=n_descs): the devices and the access each gets
 * @n_descs: entries in @descs
 * @error: return location for a #GError, or %NULL
 *
 * Grants or revokes access of other devices to the resource's memory, in one driver call (for
 * pools, cuMemPoolSetAccess()). An adaptor without a set_access slot passes the call to its
 * upstream (down the stack). Thread-safe.
 *
 * An empty request (@n_descs 0) changes nothing and succeeds.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when the kind has no peer access; those of the kind
 * (%MEMRES_ERROR_INVALID_ARGUMENT, %MEMRES_ERROR_NO_DEVICE, %MEMRES_CUDA_ERROR).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_resource_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs,
                            GError **error)
{
  MemresResource *top = mr;
  GError *local = NULL;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (descs != NULL || n_descs == 0, FALSE);
  if (!_memres_resource_check_usable (mr, "peer access", error))
    return FALSE;

  mr = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (set_access), FALSE);
  if (mr->ops->set_access == NULL)
    return _memres_resource_not_supported (mr, "peer access", error);
  if (n_descs == 0)
    return TRUE;
  for (; top != NULL; top = top->upstream)
    g_atomic_int_set (&top->reach_device, 0); /* read again at the next transfer */
  return _memres_resource_slot_result (
      mr, "set_access", mr->ops->set_access (mr, descs, n_descs, &local), &local, error);
}

gint
_memres_resource_context_device (MemresResource *mr)
{
  gint known = g_atomic_int_get (&mr->reach_device);
  gint n_devices = 0, found = -1;

  if (mr->info.device >= 0 || !(mr->info.flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE))
    return mr->info.device;
  if (known != 0)
    return known - 2;
  if (!memres_cuda_get_device_count (&n_devices, NULL))
    return -1; /* no driver: asked again next time */
  for (gint d = 0; d < n_devices && found < 0; d++)
    {
      g_autoptr (GError) local = NULL;
      MemresAccess access = MEMRES_ACCESS_NONE;

      if (!memres_resource_get_access (mr, d, &access, &local))
        {
          /* a kind that cannot tell: no device known, for good; a failing driver call: the
           * current context this time, asked again next time */
          if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
            return -1;
          break;
        }
      if (access != MEMRES_ACCESS_NONE)
        found = d;
    }
  g_atomic_int_set (&mr->reach_device, found + 2);
  return found;
}

/**
 * memres_resource_get_access:
 * @mr: a #MemresResource
 * @device: a CUDA device ordinal
 * @access: (out): return location for the access @device has
 * @error: return location for a #GError, or %NULL
 *
 * Reads the access @device has to the resource's memory (for pools, cuMemPoolGetAccess()).
 * Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when the kind has no peer access; those of the kind.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_resource_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error)
{
  GError *local = NULL;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (access != NULL, FALSE);
  if (!_memres_resource_check_usable (mr, "peer access", error))
    return FALSE;

  mr = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (get_access), FALSE);
  if (mr->ops->get_access == NULL)
    return _memres_resource_not_supported (mr, "peer access", error);
  return _memres_resource_slot_result (
      mr, "get_access", mr->ops->get_access (mr, device, access, &local), &local, error);
}
