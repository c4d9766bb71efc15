/* memres - CUDA memory resources
 * vmm-sleep.c: the sleep and wake slots of the `vmm` kind (docs/sleep.md): a buffer's physical
 * chunks released while its reservations stay, and created again and mapped at the same offsets.
 * Each buffer woken is told mapped to the core (memres_sleep_call_mapped()), which may queue its
 * restoring copies while the next buffers are mapped; a failed wake waits for them
 * (memres_sleep_call_unmapping()) before it puts the buffers woken back to sleep.
 *
 * All or nothing. Sleep first unmaps every buffer, holding the handles, so that a failure maps
 * them back with their contents; only then does it release the handles, which cannot be undone:
 * a handle the driver refuses to release is kept with the buffer (its memory stays held and is
 * mapped again at the wake; a debug message says so) rather than failing a sleep that can no
 * longer go back. Wake creates, maps and grants each buffer in turn, and on a failure
 * puts back to sleep the buffers it woke and releases what it created. Segments: UNMAPPING for
 * every buffer (one batch, memres_resource_raise_segment_events()) before the first is unmapped,
 * MAPPED for every one (one batch) once all are mapped again, also when a failed sleep maps them
 * back; a failed wake puts the buffers it woke back to sleep before telling them mapped, so it
 * tells nothing. */
#include "vmm-private.h"

/* Maps the chunks of @buf that start before @end and grants access to [0, end): undoes an unmap
 * of [0, end) (@end a reservation boundary or buf->mapped). */
static void
vmm_sleep_remap_or_warn (VmmResource *self, VmmBuffer *buf, gsize end)
{
  gsize stop;
  CUresult res = CUDA_SUCCESS;

  for (gsize i = 0; i < buf->n_chunks && buf->chunks[i].offset < end; i++)
    {
      const VmmChunk *c = &buf->chunks[i];

      res = self->drv->cuMemMap (buf->base + c->offset, c->size, 0, c->handle, 0);
      if (res != CUDA_SUCCESS)
        {
          vmm_warn_call_failed (res, "cuMemMap", "mapping a buffer again after a failed sleep");
          return;
        }
    }
  res = _vmm_buffer_apply (self, buf, VMM_GRANT, 0, end, &stop);
  if (res != CUDA_SUCCESS)
    vmm_warn_call_failed (res, "cuMemSetAccess", "mapping a buffer again after a failed sleep");
}

/* One @event for the mapped part of each of the buffers of @allocs, in one batch. */
static void
raise_all (VmmResource *self, MemresAllocation *const *allocs, gsize n_allocs,
           MemresSegmentEvent event)
{
  g_autofree MemresSegment *segs = g_new (MemresSegment, n_allocs + 1);
  g_autoptr (GError) error = NULL;
  gsize m = 0;

  for (gsize i = 0; i < n_allocs; i++)
    {
      const VmmBuffer *buf = allocs[i]->plugin_data;

      m += _vmm_segment (self, buf, buf->base, buf->mapped, &segs[m]);
    }
  if (!memres_resource_raise_segment_events (self->mr, event, segs, m, &error))
    g_warning ("vmm: %s", error->message);
}

static gboolean
vmm_refuse_shared (const VmmBuffer *buf, gsize size, GError **error)
{
  g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_SHARED,
               "vmm: the buffer of %" G_GSIZE_FORMAT " bytes at 0x%" G_GINT64_MODIFIER
               "x is %s another process: it cannot sleep",
               size, (guint64) buf->base, buf->imported ? "imported from" : "exported to");
  return FALSE;
}

gboolean
_vmm_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);

  for (gsize i = 0; i < n_allocs; i++)
    {
      const VmmBuffer *buf = allocs[i]->plugin_data;

      if (buf->imported || buf->exported)
        return vmm_refuse_shared (buf, allocs[i]->size, error);
    }

  /* every buffer unmapped, the handles held: a failure maps them all back */
  raise_all (self, allocs, n_allocs, MEMRES_SEGMENT_UNMAPPING);
  for (gsize i = 0; i < n_allocs; i++)
    {
      VmmBuffer *buf = allocs[i]->plugin_data;
      gsize stop = 0;
      CUresult res;

      res = _vmm_buffer_apply (self, buf, VMM_UNMAP, 0, buf->mapped, &stop);
      if (res == CUDA_SUCCESS)
        continue;
      for (gsize j = i + 1; j-- > 0;)
        {
          VmmBuffer *b = allocs[j]->plugin_data;

          vmm_sleep_remap_or_warn (self, b, j == i ? stop : b->mapped);
        }
      raise_all (self, allocs, n_allocs, MEMRES_SEGMENT_MAPPED);
      memres_cuda_set_error (error, res, "cuMemUnmap");
      g_prefix_error (error, "vmm: unmapping %" G_GSIZE_FORMAT " bytes: ", buf->mapped);
      return FALSE;
    }

  /* then the memory released: past the point of return */
  for (gsize i = 0; i < n_allocs; i++)
    {
      VmmBuffer *buf = allocs[i]->plugin_data;
      gint64 released = 0;

      for (gsize k = 0; k < buf->n_chunks; k++)
        {
          VmmChunk *c = &buf->chunks[k];
          CUresult res = self->drv->cuMemRelease (c->handle);

          if (res != CUDA_SUCCESS)
            {
              /* kept, and mapped again at the wake: not a failure of the sleep */
              g_debug ("vmm: cuMemRelease of a chunk of a sleeping buffer failed (%d): the chunk "
                       "stays held",
                       (int) res);
              continue;
            }
          c->handle = 0;
          released += (gint64) c->size;
        }
      buf->asleep = TRUE;
      _vmm_buffer_update (self, buf, allocs[i]->size, VMM_BUFFER_CHANGED, -released);
    }
  return TRUE;
}

/* Puts a buffer that vmm_wake_one() woke back to sleep: unmapped, the chunks it created (marked
 * in @created) released. It was not told mapped: nothing to tell. */
static void
vmm_sleep_again_or_warn (VmmResource *self, VmmBuffer *buf, gsize size, const gboolean *created)
{
  gsize stop;
  CUresult res;
  gint64 released = 0;

  res = _vmm_buffer_apply (self, buf, VMM_UNMAP, 0, buf->mapped, &stop);
  if (res != CUDA_SUCCESS)
    vmm_warn_call_failed (res, "cuMemUnmap", "rolling back a failed wake");
  for (gsize k = 0; k < buf->n_chunks; k++)
    if (created[k])
      {
        res = self->drv->cuMemRelease (buf->chunks[k].handle);
        if (res != CUDA_SUCCESS)
          vmm_warn_call_failed (res, "cuMemRelease", "rolling back a failed wake");
        buf->chunks[k].handle = 0;
        released += (gint64) buf->chunks[k].size;
      }
  buf->asleep = TRUE;
  _vmm_buffer_update (self, buf, size, VMM_BUFFER_CHANGED, -released);
}

/* Wakes one buffer: creates the chunks released at its sleep (marked in @created), maps every
 * chunk, grants access; its MAPPED event is the caller's. On failure leaves it asleep as it was. */
static gboolean
vmm_wake_one (VmmResource *self, VmmBuffer *buf, gsize size, gboolean *created, GError **error)
{
  const char *call = NULL, *doing = NULL;
  gsize k, mapped_end = 0, bytes = 0, stop;
  gint64 made = 0;
  CUresult res = CUDA_SUCCESS;

  for (k = 0; k < buf->n_chunks; k++)
    {
      VmmChunk *c = &buf->chunks[k];

      created[k] = FALSE;
      if (c->handle != 0)
        continue;
      res = self->drv->cuMemCreate (&c->handle, c->size, &self->prop, 0);
      if (res != CUDA_SUCCESS)
        {
          c->handle = 0;
          call = "cuMemCreate";
          doing = "creating";
          bytes = c->size;
          goto undo;
        }
      created[k] = TRUE;
      made += (gint64) c->size;
    }
  for (k = 0; k < buf->n_chunks; k++)
    {
      const VmmChunk *c = &buf->chunks[k];

      res = self->drv->cuMemMap (buf->base + c->offset, c->size, 0, c->handle, 0);
      if (res != CUDA_SUCCESS)
        {
          call = "cuMemMap";
          doing = "mapping";
          bytes = c->size;
          goto unmap;
        }
      mapped_end = c->offset + c->size;
    }
  res = _vmm_buffer_apply (self, buf, VMM_GRANT, 0, buf->mapped, &stop);
  if (res != CUDA_SUCCESS)
    {
      call = "cuMemSetAccess";
      doing = "granting access to";
      bytes = buf->mapped;
      goto unmap;
    }
  buf->asleep = FALSE;
  _vmm_buffer_update (self, buf, size, VMM_BUFFER_CHANGED, made);
  return TRUE;

unmap:
  /* the copies queued into the buffers woken before this one finish first (its own are not) */
  memres_sleep_call_unmapping ();
  if (mapped_end > 0)
    {
      CUresult res2 = _vmm_buffer_apply (self, buf, VMM_UNMAP, 0, mapped_end, &stop);

      if (res2 != CUDA_SUCCESS)
        vmm_warn_call_failed (res2, "cuMemUnmap", "rolling back a failed wake");
    }
  k = buf->n_chunks;
undo:
  for (gsize j = 0; j < k; j++)
    if (created[j])
      {
        CUresult res2 = self->drv->cuMemRelease (buf->chunks[j].handle);

        if (res2 != CUDA_SUCCESS)
          vmm_warn_call_failed (res2, "cuMemRelease", "rolling back a failed wake");
        buf->chunks[j].handle = 0;
        created[j] = FALSE;
      }
  memres_cuda_set_error (error, res, call);
  g_prefix_error (error, "vmm: %s %" G_GSIZE_FORMAT " bytes%s: ", doing, bytes,
                  g_str_equal (call, "cuMemCreate") ? " of physical memory" : "");
  return FALSE;
}

gboolean
_vmm_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  gboolean **created = g_new0 (gboolean *, n_allocs + 1);
  gboolean ok = TRUE;
  gsize i;

  for (i = 0; ok && i < n_allocs; i++)
    {
      VmmBuffer *buf = allocs[i]->plugin_data;

      created[i] = g_new0 (gboolean, buf->n_chunks + 1);
      ok = vmm_wake_one (self, buf, allocs[i]->size, created[i], error);
      /* its bytes' restoring copies may start while the next buffers are mapped */
      if (ok)
        memres_sleep_call_mapped (buf->base, buf->mapped);
    }
  if (!ok)
    {
      /* the copies queued into the buffers woken finish before their memory goes */
      memres_sleep_call_unmapping ();
      for (gsize j = i - 1; j-- > 0;)
        vmm_sleep_again_or_warn (self, allocs[j]->plugin_data, allocs[j]->size, created[j]);
    }
  else
    raise_all (self, allocs, n_allocs, MEMRES_SEGMENT_MAPPED);
  for (gsize j = 0; j < n_allocs; j++)
    g_free (created[j]);
  g_free (created);
  return ok;
}
