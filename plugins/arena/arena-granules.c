/* memres - CUDA memory resources
 * arena-granules.c: the physical memory of the `arena` kind, one granule (the device's
 * allocation granularity) at a time: the granule table, the one place that maps a granule
 * (granule_map()) and the one place that unmaps one (granule_unmap()), backing the granules a
 * new extent needs (an idle granule's memory moved there, else a new cuMemCreate), and giving
 * idle granules back to the driver.
 *
 * Rollback. Backing a granule: cuMemCreate, cuMemMap, cuMemSetAccess; a failing step undoes the
 * ones before it (unmap, release). Moving an idle granule: cuMemUnmap at its old place, then
 * map and grant at the new one; a failure maps it back at the old place (and if even that
 * fails, releases it: nothing is lost). When a later granule of the same extent fails, the
 * granules created for it are unmapped and released; the ones moved there stay where they now
 * are, mapped and idle, as reusable as before. Giving a granule back: cuMemRelease while it is
 * still mapped (the mapping keeps the memory), then cuMemUnmap, which frees it; a failing unmap
 * takes the handle back (cuMemRetainAllocationHandle). Every failure leaves the table as it was
 * and the driver matching it. All under parts.lock. */
#include "arena-private.h"

#include "../common/alloc-error.h"

gboolean
arena_granules_init (Arena *self, GError **error)
{
  self->held = g_new0 (guint64, self->n_granules);
  self->handle = g_new0 (CUmemGenericAllocationHandle, self->n_granules);
  self->in_idle = g_new0 (guint8, self->n_granules);
  self->idle = g_new (guint32, self->n_granules);
  return TRUE;
}

void
arena_granules_clear (Arena *self)
{
  g_clear_pointer (&self->held, g_free);
  g_clear_pointer (&self->handle, g_free);
  g_clear_pointer (&self->in_idle, g_free);
  g_clear_pointer (&self->idle, g_free);
}

static CUdeviceptr
granule_address (Arena *self, guint g)
{
  return self->base + ((guint64) g << self->granule_shift);
}

/* THE place where the arena maps memory: @h at granule @g, with the device's access. Segment
 * events ("mapped") are raised here. On failure nothing is mapped. */
static gboolean
granule_map (Arena *self, guint g, CUmemGenericAllocationHandle h, GError **error)
{
  CUdeviceptr at = granule_address (self, g);
  CUresult r = self->drv->cuMemMap (at, self->granularity, 0, h, 0);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemMap");
  r = self->drv->cuMemSetAccess (at, self->granularity, &self->access, 1);
  if (r != CUDA_SUCCESS)
    {
      CUresult r2 = self->drv->cuMemUnmap (at, self->granularity);

      if (r2 != CUDA_SUCCESS)
        g_warning ("arena: cuMemUnmap failed (%d) while rolling back a failure", r2);
      return memres_cuda_set_error (error, r, "cuMemSetAccess");
    }
  return TRUE;
}

/* THE place where the arena unmaps memory: granule @g (whose bytes are all free and settled:
 * no queued work uses them). Segment events ("about to unmap") are raised here. */
static CUresult
granule_unmap (Arena *self, guint g)
{
  return self->drv->cuMemUnmap (granule_address (self, g), self->granularity);
}

static void
idle_push (Arena *self, guint g)
{
  if (!self->in_idle[g])
    {
      self->in_idle[g] = 1;
      self->idle[self->n_idle_stack++] = g;
    }
}

/* An idle granule (mapped, no held bytes) off the stack, or -1. */
static gint
idle_pop (Arena *self)
{
  while (self->n_idle_stack > 0)
    {
      guint g = self->idle[--self->n_idle_stack];

      self->in_idle[g] = 0;
      if (self->held[g] == 0 && self->handle[g] != 0)
        return (gint) g;
    }
  return -1;
}

/* Physical memory for granule @g: an idle granule's, moved (*@moved TRUE), else new. */
static gboolean
granule_back (Arena *self, guint g, gboolean *moved, GError **error)
{
  gint src = idle_pop (self);
  CUmemGenericAllocationHandle h;
  CUresult r;

  *moved = src >= 0;
  if (src >= 0)
    {
      h = self->handle[src];
      if ((r = granule_unmap (self, (guint) src)) != CUDA_SUCCESS)
        {
          idle_push (self, (guint) src);
          return memres_cuda_set_error (error, r, "cuMemUnmap");
        }
      self->handle[src] = 0;
      if (!granule_map (self, g, h, error))
        {
          g_autoptr (GError) local = NULL;

          if (granule_map (self, (guint) src, h, &local))
            {
              self->handle[src] = h;
              idle_push (self, (guint) src);
              return FALSE;
            }
          /* neither here nor there: the memory goes back to the driver */
          memres_cuda_warn_release_failure (local, "arena: mapping a granule back");
          if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
            g_warning ("arena: cuMemRelease failed (%d) while rolling back a failure", r);
          self->n_mapped--;
          self->n_idle_mapped--;
          self->released++;
          return FALSE;
        }
      self->handle[g] = h;
      self->n_idle_mapped--;
      self->remapped++;
      return TRUE;
    }
  if ((r = self->drv->cuMemCreate (&h, self->granularity, &self->prop, 0)) != CUDA_SUCCESS)
    return alloc_error_set (error, r, "cuMemCreate", self->granularity);
  if (!granule_map (self, g, h, error))
    {
      if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
        g_warning ("arena: cuMemRelease failed (%d) while rolling back a failure", r);
      return FALSE;
    }
  self->handle[g] = h;
  self->n_mapped++;
  self->mapped_high = MAX (self->mapped_high, self->n_mapped);
  self->created++;
  return TRUE;
}

/* Adds (@sign 1) or takes away (-1) the bytes of [addr, addr + size) granule by granule; a
 * granule whose count goes to 0 is idle. */
static void
span_count (Arena *self, guint64 addr, guint64 size, gint sign)
{
  guint64 end = addr + size;

  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = granule_address (self, g) + self->granularity;
      guint64 bytes = MIN (end, g_end) - addr;

      if (sign > 0)
        {
          if (self->held[g] == 0 && self->handle[g] != 0)
            self->n_idle_mapped--;
          self->held[g] += bytes;
        }
      else if ((self->held[g] -= bytes) == 0 && self->handle[g] != 0)
        {
          self->n_idle_mapped++;
          idle_push (self, g);
        }
      addr = MIN (end, g_end);
    }
}

/* Granules of [addr, addr + size) with no physical memory (no held bytes and unmapped). */
guint
arena_span_unbacked (Arena *self, guint64 addr, guint64 size)
{
  guint n = 0;

  for (guint g = arena_granule (self, addr); g <= arena_granule (self, addr + size - 1); g++)
    n += self->held[g] == 0 && self->handle[g] == 0;
  return n;
}

/* The bytes [addr, addr + size), free and settled, are held from now on: every granule they lie
 * in gets physical memory (granule_back()). On failure nothing is held, and the granules
 * created for it are gone again. */
gboolean
arena_span_hold (Arena *self, guint64 addr, guint64 size, GError **error)
{
  guint g0 = arena_granule (self, addr), g1 = arena_granule (self, addr + size - 1);
  guint n_new = 0;
  g_autofree guint *created = NULL;

  for (guint g = g0; g <= g1; g++)
    if (self->held[g] == 0 && self->handle[g] == 0)
      n_new++;
  span_count (self, addr, size, 1);
  if (n_new == 0)
    return TRUE;
  created = g_new (guint, n_new);
  n_new = 0;
  for (guint g = g0; g <= g1; g++)
    {
      gboolean moved;

      if (self->handle[g] != 0)
        continue;
      if (!granule_back (self, g, &moved, error))
        {
          /* the created ones go back; the moved ones stay here, idle, once uncounted */
          while (n_new-- > 0)
            {
              guint c = created[n_new];
              CUresult r;

              if ((r = granule_unmap (self, c)) != CUDA_SUCCESS
                  || (r = self->drv->cuMemRelease (self->handle[c])) != CUDA_SUCCESS)
                {
                  g_warning ("arena: a granule could not be given back (%d) while rolling back "
                             "a failure; it stays mapped",
                             r);
                  continue;
                }
              self->handle[c] = 0;
              self->n_mapped--;
              self->created--;
            }
          span_count (self, addr, size, -1);
          return FALSE;
        }
      if (!moved)
        created[n_new++] = g;
    }
  return TRUE;
}

/* The bytes [addr, addr + size) are free and settled again. */
void
arena_span_drop (Arena *self, guint64 addr, guint64 size)
{
  span_count (self, addr, size, -1);
}

/* Gives idle granules back to the driver while more than @keep_bytes are mapped. */
gboolean
arena_release_idle (Arena *self, guint64 keep_bytes, GError **error)
{
  while ((guint64) self->n_mapped * self->granularity > keep_bytes)
    {
      gint g = idle_pop (self);
      CUmemGenericAllocationHandle h;
      CUresult r;

      if (g < 0)
        return TRUE;
      h = self->handle[g];
      if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
        {
          idle_push (self, (guint) g);
          return memres_cuda_set_error (error, r, "cuMemRelease");
        }
      if ((r = granule_unmap (self, (guint) g)) != CUDA_SUCCESS)
        {
          CUresult r2 = self->drv->cuMemRetainAllocationHandle (
              &h, (void *) (guintptr) granule_address (self, (guint) g));

          if (r2 != CUDA_SUCCESS)
            g_warning ("arena: cuMemRetainAllocationHandle failed (%d) while rolling back a "
                       "failure",
                       r2);
          self->handle[g] = h;
          idle_push (self, (guint) g);
          return memres_cuda_set_error (error, r, "cuMemUnmap");
        }
      self->handle[g] = 0;
      self->n_mapped--;
      self->n_idle_mapped--;
      self->released++;
    }
  return TRUE;
}

/* Finalize: every granule given back (cuMemRelease, cuMemUnmap); a failure is warned about and
 * the others are still given back. TRUE when nothing stays mapped. */
gboolean
arena_granules_release_all (Arena *self)
{
  gboolean all = TRUE;

  for (guint g = 0; g < self->n_granules; g++)
    {
      CUresult r;

      if (self->handle[g] == 0)
        continue;
      if ((r = self->drv->cuMemRelease (self->handle[g])) != CUDA_SUCCESS
          && r != CUDA_ERROR_DEINITIALIZED)
        g_warning ("arena: cuMemRelease failed (%d) at finalize", r);
      if ((r = granule_unmap (self, g)) != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
        {
          g_warning ("arena: cuMemUnmap failed (%d) at finalize", r);
          all = FALSE;
        }
      self->handle[g] = 0;
    }
  self->n_mapped = self->n_idle_mapped = 0;
  return all;
}
