/* memres - CUDA memory resources
 * arena.c: the `arena` kind, a caching device arena on virtual memory management that holds no
 * more physical memory than the program uses: the kind itself (its options, init and finalize,
 * statistics, counters and trim, the plugin). Each mapped granule is a segment
 * (MEMRES_KIND_SEGMENTS, arena-segments.c). arena-private.h lists the other files and the
 * memory model.
 *
 * Spec: arena[:device=N,reserve=SIZE,release_threshold=SIZE|max,max_block=SIZE,chunk=SIZE,
 *              front=N,front_bytes=SIZE,handle_type=none|posix_fd|fabric,
 *              fabric_fallback=fail|posix_fd,export_min=SIZE,settle=lazy|eager,place=fit|stable,
 *              park=BOOL,check=BOOL]
 *
 * At init, one range of address space is reserved (cuMemAddressReserve: `reserve` bytes, by
 * default twice the device's memory, halved until the driver grants it); more are reserved when
 * it is full (arena_reserve_more(), arena-granules.c). Physical memory is
 * mapped into it one granule (cuMemGetAllocationGranularity, recommended: 2 MiB on the H200) at
 * a time, where an allocation needs it: an idle granule's memory moved there (cuMemUnmap,
 * cuMemMap, cuMemSetAccess: counted as remapped), or only when no granule is idle, a new one
 * (cuMemCreate). Requests up to max_block go to size classes with per-thread front caches (no
 * lock on a hit); larger ones best-fit into the range with coalescing (arena-alloc.c).
 *
 * Streams (docs/arena.md): allocation and free are stream-ordered. A block freed on stream S is
 * handed out again for S at once, for another stream after that stream waits on an event
 * recorded on S (the cache's rules, plugins/common/cache/cache-bins.c); a large extent freed on
 * S is reused at once by S, and by any stream once settled: before it would create physical
 * memory the arena settles the ranges whose events are done (cuEventQuery, no wait; arena-heap.c),
 * and only out of memory, at trim and at finalize does it wait for the device's work
 * (cuCtxSynchronize), so memory is never unmapped or moved while queued work may still use it.
 *
 * Statistics: reserved is the physical memory mapped (granules times granularity), used the
 * bytes handed out (class bytes of blocks, rounded bytes of large buffers), both the arena's own
 * (MEMRES_KIND_OWN_USAGE: the core counts no bytes on the pair); the counters add the virtual
 * bytes reserved and the granules created, remapped and released. */
#include "arena-private.h"

#include "../common/fabric.h"

static const char *const handle_type_choices[] = { "none", "posix_fd", "fabric", NULL };
static const char *const settle_choices[] = { "lazy", "eager", NULL };
static const char *const place_choices[] = { "fit", "stable", NULL };

static const MemresOptionSpec arena_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal the memory belongs to", NULL, 0,
    G_MAXINT },
  { "reserve", MEMRES_OPTION_SIZE, "0",
    "bytes of address space reserved at init (0: twice the device's memory), halved until the "
    "driver grants it; more ranges are reserved when it is full",
    NULL, 0, 0 },
  { "release_threshold", MEMRES_OPTION_SIZE, "max",
    "physical bytes kept mapped: above it, idle granules go back to the driver after a large "
    "allocation and at trim (max: kept until trim)",
    NULL, 0, 0 },
  { "max_block", MEMRES_OPTION_SIZE, "64KiB",
    "largest request served from size classes (256 B to 64 MiB); larger ones are placed "
    "best-fit in the address range",
    NULL, 0, 0 },
  { "chunk", MEMRES_OPTION_SIZE, "256KiB",
    "bytes of a slab carved into blocks of one class, for the classes up to chunk/16 (4 KiB to "
    "64 MiB)",
    NULL, 0, 0 },
  { "front", MEMRES_OPTION_INT, "8", "free blocks per size class in each thread's front cache",
    NULL, 0, CACHE_FRONT_MAX },
  { "front_bytes", MEMRES_OPTION_SIZE, "64MiB", "most bytes of free blocks in each thread's front",
    NULL, 0, 0 },
  { "handle_type", MEMRES_OPTION_ENUM, "none",
    "posix_fd: buffers of more than max_block and at least export_min bytes get physical memory "
    "of their own (no neighbour in their granules) and export by POSIX fd; fabric: the same, "
    "exported as fabric handles (bytes, across the nodes of a multi-node NVLink domain) where the "
    "driver grants them (none: no export)",
    handle_type_choices, 0, 0 },
  FABRIC_FALLBACK_OPTION,
  { "export_min", MEMRES_OPTION_SIZE, "0",
    "with handle_type=posix_fd or fabric: the smallest request that gets memory of its own and "
    "can be exported (0: every request above max_block)",
    NULL, 0, 0 },
  { "settle", MEMRES_OPTION_ENUM, "lazy",
    "eager: before placing a large request that no free range of its stream's own fits exactly, "
    "the free ranges whose work is done are settled (cuEventQuery, no wait), so that best fit "
    "sees whole holes (less memory for requests of many sizes, a query per such request); lazy: "
    "only before memory would be created",
    settle_choices, 0, 0 },
  { "place", MEMRES_OPTION_ENUM, "fit",
    "stable: a large request on a stream is placed best fit over the runs of adjacent free "
    "ranges that are each settled or freed on that stream, the same whenever its work completes "
    "(a repeating step keeps its layout and maps nothing once it ran), and the memory of its "
    "frees is lent only past 2 % over the peak used (docs/arena.md); fit: as the settle option "
    "says",
    place_choices, 0, 0 },
  { "park", MEMRES_OPTION_BOOL, "false",
    "large closes parked by size: the next allocation of that size on the stream takes the "
    "extent back without heap work or a driver call; every other placement flushes them into "
    "the heap first (docs/arena.md)",
    NULL, 0, 0 },
  { "event_bytes", MEMRES_OPTION_SIZE, "64MiB",
    "free bytes of large closes on the legacy default stream (with the free ranges they join) "
    "after which the event they share is recorded (cuEventRecord), so that they settle while "
    "later work is queued; 0: only at every 16th close or when a placement needs it (fewer "
    "records, later settling; docs/arena.md)",
    NULL, 0, 0 },
  { "check", MEMRES_OPTION_BOOL, "false",
    "for tests: the counters add heap_errors, the disagreements of a full check of the free "
    "ranges' indexes, which walks every free range at each read of the counters (a snapshot "
    "reads them too; docs/arena.md)",
    NULL, 0, 0 },
};

static gboolean
arena_invalid (GError **error, const char *option, guint64 value, const char *range)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "option \"%s\" of kind \"arena\": %" G_GUINT64_FORMAT " is not %s", option, value,
               range);
  return FALSE;
}

static gboolean
arena_setup_options (Arena *self, const MemresOptions *options, GError **error)
{
  guint64 max_block = memres_options_get_size (options, "max_block");
  guint64 chunk = memres_options_get_size (options, "chunk");
  guint n_classes;

  if (max_block < 256 || max_block > (G_GUINT64_CONSTANT (64) << 20))
    return arena_invalid (error, "max_block", max_block, "between 256 bytes and 64 MiB");
  if (chunk < 4096 || chunk > (G_GUINT64_CONSTANT (64) << 20))
    return arena_invalid (error, "chunk", chunk, "between 4 KiB and 64 MiB");
  self->chunk_size = (gsize) chunk;
  self->release_threshold = memres_options_get_size (options, "release_threshold");
  self->park = memres_options_get_bool (options, "park");
  self->event_bytes = memres_options_get_size (options, "event_bytes");
  self->heap_check = memres_options_get_bool (options, "check");
  self->exportable = g_strcmp0 (memres_options_get_string (options, "handle_type"), "none") != 0;
  self->export_min = memres_options_get_size (options, "export_min");
  self->eager_settle = g_strcmp0 (memres_options_get_string (options, "settle"), "eager") == 0;
  self->stable_place = g_strcmp0 (memres_options_get_string (options, "place"), "stable") == 0;
  /* export_min means nothing without exportable memory: refused rather than ignored */
  if (self->export_min > 0 && !self->exportable)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"export_min\" of kind \"arena\" applies only with "
                   "handle_type=posix_fd or fabric (handle_type is \"%s\"): add "
                   "handle_type=posix_fd, or leave export_min out",
                   memres_options_get_string (options, "handle_type"));
      return FALSE;
    }
  n_classes = cache_class_of ((gsize) max_block) + 1;
  while (self->n_chunk_classes < n_classes
         && cache_class_size (self->n_chunk_classes) <= chunk / 16)
    self->n_chunk_classes++;
  cache_parts_init (&self->parts, cache_class_size (n_classes - 1), n_classes,
                    (guint) memres_options_get_int (options, "front"),
                    memres_options_get_size (options, "front_bytes"), TRUE, self->device);
  return TRUE;
}

/* handle_type=fabric: exportable buffers created with fabric handles where the driver grants
 * them (probed with one granule: fabric_probe_memory()), else POSIX fds or the error that names
 * the missing IMEX channel, as fabric_fallback says (fabric_settle()). */
static gboolean
arena_setup_fabric (Arena *self, const MemresOptions *options, GError **error)
{
  GError *probe = NULL;
  const char *call;
  CUresult res;

  if (g_strcmp0 (memres_options_get_string (options, "handle_type"), "fabric") != 0)
    return TRUE;
  self->own_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  res = fabric_probe_memory (self->drv, &self->own_prop, self->granularity, &call);
  if (res != CUDA_SUCCESS)
    memres_cuda_set_error (&probe, res, call);
  if (!fabric_settle ("arena", self->device, options, probe, &self->fabric, error))
    return FALSE;
  if (!self->fabric)
    self->own_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return TRUE;
}

/* The granularity, the device's memory and the reservation. */
static gboolean
arena_setup_range (Arena *self, guint64 reserve, GError **error)
{
  size_t granularity = 0;
  CUdeviceptr base = 0;
  CUdevice dev;
  CUresult r;

  r = self->drv->cuMemGetAllocationGranularity (&granularity, &self->prop,
                                                CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemGetAllocationGranularity");
  if (granularity < ARENA_ALIGN || (granularity & (granularity - 1)) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "arena: the driver reports an allocation granularity of %zu bytes",
                   (gsize) granularity);
      return FALSE;
    }
  self->granularity = granularity;
  self->granule_shift = (guint) __builtin_ctzll (granularity);
  if (reserve == 0)
    {
      size_t total = 0;

      if ((r = self->drv->cuDeviceGet (&dev, self->device)) != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuDeviceGet");
      if ((r = self->drv->cuDeviceTotalMem (&total, dev)) != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuDeviceTotalMem");
      reserve = 2 * (guint64) total;
    }
  if (reserve > (G_GUINT64_CONSTANT (1) << 50))
    return arena_invalid (error, "reserve", reserve, "at most 1 PiB");
  reserve = (reserve + granularity - 1) & ~(guint64) (granularity - 1);
  for (;;)
    {
      r = self->drv->cuMemAddressReserve (&base, reserve, granularity, 0, 0);
      if (r == CUDA_SUCCESS)
        break;
      if (reserve / 2 < 64 * (guint64) granularity)
        {
          memres_cuda_set_error (error, r, "cuMemAddressReserve");
          g_prefix_error (
              error, "arena: reserving %" G_GUINT64_FORMAT " bytes of address space: ", reserve);
          return FALSE;
        }
      reserve = (reserve / 2) & ~(guint64) (granularity - 1);
    }
  self->resv = g_new (Reservation, 1);
  self->resv[0] = (Reservation){ base, reserve, 0 };
  self->n_resv = 1;
  self->va_size = reserve;
  self->n_granules = (guint) (reserve >> self->granule_shift);
  return TRUE;
}

static gboolean
arena_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  gint64 device = memres_options_get_int (options, "device");
  gint vmm = 0;

  self->mr = mr;
  if ((self->drv = memres_cuda_get_driver (error)) == NULL
      || !memres_cuda_check_device ((gint) device, error))
    return FALSE;
  self->device = (gint) device;
  if (!memres_cuda_get_device_attribute (
          self->device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &vmm, error))
    return FALSE;
  if (!vmm)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "arena: device %d does not support virtual memory management", self->device);
      return FALSE;
    }
  self->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  self->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  self->prop.location.id = self->device;
  self->access.location = self->prop.location;
  self->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  self->own_prop = self->prop;
  self->own_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (!arena_setup_range (self, memres_options_get_size (options, "reserve"), error))
    return FALSE;
  /* arena_setup_options() last: its parts are not rolled back here */
  if (!arena_setup_fabric (self, options, error) || !arena_setup_options (self, options, error))
    {
      CUresult r = self->drv->cuMemAddressFree (self->resv[0].base, self->resv[0].size);

      if (r != CUDA_SUCCESS)
        g_warning ("arena: cuMemAddressFree failed (%d) while rolling back a failure", r);
      g_clear_pointer (&self->resv, g_free);
      return FALSE;
    }
  arena_granules_init (self, NULL);
  arena_heap_init (self);
  arena_lend_init (self);
  arena_lines_init (self);
  arena_park_init (self);
  arena_heap_insert (self, self->resv[0].base, self->resv[0].size, NULL, NULL);
  return TRUE;
}

static void
arena_finalize (MemresResource *mr)
{
  Arena *self = memres_resource_get_private (mr);
  g_autoptr (GError) error = NULL;
  CUresult r;

  cache_parts_stop (&self->parts);
  if (!arena_flush (self, &error))
    {
      memres_cuda_warn_release_failure (error, "arena: finalize");
      g_clear_error (&error);
    }
  arena_own_release_all (self);
  if (self->chunks != NULL || self->large_used != 0)
    g_warning ("arena: %" G_GUINT64_FORMAT " bytes still in use at finalize", arena_used (self));
  if (arena_granules_release_all (self))
    for (guint i = 0; i < self->n_resv; i++)
      if ((r = self->drv->cuMemAddressFree (self->resv[i].base, self->resv[i].size)) != CUDA_SUCCESS
          && r != CUDA_ERROR_DEINITIALIZED)
        g_warning ("arena: cuMemAddressFree failed (%d) at finalize", r);
  /* what a failed flush left: the slabs' and the ranges' events go with them */
  while (self->chunks != NULL)
    {
      Chunk *chunk = self->chunks;

      for (guint i = 0; i < chunk->n_blocks; i++)
        cache_event_unref (&self->parts, chunk->blocks[i].event);
      LIST_UNLINK (self->chunks, chunk);
      g_free (chunk);
    }
  arena_lend_clear (self);
  arena_park_clear (self);
  arena_heap_clear (self);
  arena_lines_clear (self);
  cache_parts_clear (&self->parts);
  g_mutex_unlock (&self->parts.lock);
  g_mutex_clear (&self->parts.lock);
  arena_granules_clear (self);
  g_clear_pointer (&self->resv, g_free);
}

static void
arena_query (MemresResource *mr, MemresResourceInfo *info)
{
  Arena *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags
      = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED | MEMRES_MEMORY_RESIZABLE;
  if (self->exportable)
    info->flags |= MEMRES_MEMORY_IPC_ENABLED;
  if (self->fabric)
    info->flags |= MEMRES_MEMORY_FABRIC_HANDLES;
}

/* ---- statistics and trim --------------------------------------------------------------------- */

static gboolean
arena_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Arena *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->parts.lock);
  stats->reserved_current = (guint64) self->n_mapped * self->granularity;
  stats->reserved_high = (guint64) self->mapped_high * self->granularity;
  stats->used_current = arena_used_with (self, cache_fronts_cached_exact (&self->parts));
  self->used_high = MAX (self->used_high, stats->used_current);
  stats->used_high = self->used_high;
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

static gboolean
arena_reset_stats (MemresResource *mr, GError **error)
{
  Arena *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->parts.lock);
  self->mapped_high = self->n_mapped;
  self->used_high = arena_used_with (self, cache_fronts_cached_exact (&self->parts));
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

/* trim: every front drained, idle slabs back to the range, free ranges settled, then idle
 * granules released (cuMemRelease, cuMemUnmap), at least @bytes_to_keep kept mapped. */
static gboolean
arena_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  gboolean ok;

  g_mutex_lock (&self->parts.lock);
  ok = arena_flush (self, error) && arena_release_idle (self, bytes_to_keep, error);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  return ok;
}

static gboolean
arena_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  guint64 g = self->granularity;

  g_mutex_lock (&self->parts.lock);
  g_variant_dict_insert (counters, "physical", "t", (guint64) self->n_mapped * g);
  g_variant_dict_insert (counters, "physical_idle", "t", (guint64) self->n_idle_mapped * g);
  g_variant_dict_insert (counters, "used", "t", arena_used (self));
  g_variant_dict_insert (counters, "virtual", "t", self->va_size);
  g_variant_dict_insert (counters, "reservations", "t", (guint64) self->n_resv);
  g_variant_dict_insert (counters, "granularity", "t", g);
  g_variant_dict_insert (counters, "granules_created", "t", self->created);
  g_variant_dict_insert (counters, "granules_remapped", "t", self->remapped);
  g_variant_dict_insert (counters, "granules_moved", "t", self->moved);
  g_variant_dict_insert (counters, "granules_refaulted", "t", self->refaulted);
  g_variant_dict_insert (counters, "headroom", "t", (guint64) self->headroom * g);
  g_variant_dict_insert (counters, "granules_released", "t", self->released);
  g_variant_dict_insert (counters, "settles", "t", self->settles);
  g_variant_dict_insert (counters, "oom_flushes", "t", self->oom_flushes);
  g_variant_dict_insert (counters, "slab_bytes", "t", self->slab_bytes);
  g_variant_dict_insert (counters, "tagged_bytes", "t", self->tagged_bytes);
  g_variant_dict_insert (counters, "large_allocations", "t", self->large_allocs);
  g_variant_dict_insert (counters, "run_takes", "t", self->run_takes);
  if (self->heap_check)
    g_variant_dict_insert (counters, "heap_errors", "t", arena_heap_check (self));
  g_variant_dict_insert (counters, "granules_lent", "t", self->lent_granules);
  g_variant_dict_insert (counters, "lent_pending", "t", (guint64) self->retired->len);
  g_variant_dict_insert (counters, "granules_reaped", "t", self->reaped_granules);
  g_variant_dict_insert (counters, "granules_shared", "t", self->shared_granules);
  g_variant_dict_insert (counters, "shared_pending", "t", (guint64) self->shared->len);
  g_variant_dict_insert (counters, "misses", "t", self->misses);
  g_variant_dict_insert (counters, "parked", "t", (guint64) self->n_parked);
  g_variant_dict_insert (counters, "parked_bytes", "t", self->parked_large);
  g_variant_dict_insert (counters, "park_hits", "t", self->park_hits);
  g_variant_dict_insert (counters, "park_flushes", "t", self->park_flushes);
  g_variant_dict_insert (counters, "max_block", "t", (guint64) self->parts.max_block);
  g_variant_dict_insert (counters, "exportable_buffers", "t", self->exportables);
  g_variant_dict_insert (counters, "exports", "t", self->exports);
  g_variant_dict_insert (counters, "imported", "t", self->imported_bytes);
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

/* The report of an out-of-memory error (#MemresResourceOps.explain_oom): the free bytes of the
 * physical memory it holds (mapped, not in use), the most one request could get from them
 * without new memory (arena_heap_largest_servable()), the granules, and what strands them:
 * physical memory moves a whole granule at a time, so the free bytes of granules that also
 * hold live bytes serve only requests placed right there. When the driver refused more address
 * space for the request (va_refused), that is the verdict, the arena's own. */
static void
arena_explain_oom (MemresResource *mr, MemresOomFigures *figures)
{
  Arena *self = memres_resource_get_private (mr);
  guint64 mapped, used, largest, va_refused, va_size;
  guint partly = 0, idle, n_resv;

  g_mutex_lock (&self->parts.lock);
  va_refused = self->va_refused;
  va_size = self->va_size;
  n_resv = self->n_resv;
  mapped = (guint64) self->n_mapped * self->granularity;
  used = arena_used_with (self, cache_fronts_cached_exact (&self->parts));
  largest = arena_heap_largest_servable (self);
  idle = arena_reusable (self);
  for (guint g = 0; g < self->n_granules; g++)
    partly += self->handle[g] != 0 && self->held[g] > 0 && self->held[g] < self->granularity;
  g_mutex_unlock (&self->parts.lock);
  figures->cached = mapped > used ? mapped - used : 0;
  figures->largest_free = largest;
  figures->figures = g_strdup_printf (
      "%" G_GUINT64_FORMAT " granules of %" G_GSIZE_FORMAT " bytes mapped, %u idle, %u partly "
      "in use; %" G_GUINT64_FORMAT " bytes of address space",
      mapped / self->granularity, self->granularity, idle, partly, self->va_size);
  /* the address space the driver refused to extend: the arena's own verdict */
  if (va_refused > 0
      && figures->struct_size >= G_STRUCT_OFFSET (MemresOomFigures, verdict) + sizeof (char *))
    {
      figures->verdict = g_strdup_printf ("address space: `arena` has %" G_GUINT64_FORMAT
                                          " bytes of address space in %u "
                                          "reservation%s, none with a free range for the request, "
                                          "and the driver refused %" G_GUINT64_FORMAT " bytes more",
                                          va_size, n_resv, n_resv == 1 ? "" : "s", va_refused);
      figures->remedy = g_strdup (
          "create the arena with a larger reserve (arena:reserve=SIZE, up to 1 PiB: address "
          "space costs no memory), or close buffers to free address space");
    }
  else if (largest < figures->request && figures->cached >= figures->request)
    figures->remedy = g_strdup_printf (
        "the free bytes of `arena` lie in %u granules that also hold live buffers, and it moves "
        "physical memory only a whole granule (%" G_GSIZE_FORMAT " bytes) at a time: free the "
        "buffers that pin them (small ones kept long), or allocate those before the large ones "
        "so that they share granules",
        partly, self->granularity);
}

/* ev_lock is taken before parts.lock (arena-segments.c). */
static void
arena_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  Arena *self = mr != NULL ? memres_resource_get_private (mr) : NULL;

  if (self != NULL && phase == MEMRES_FORK_PREPARE)
    memres_fork_mutex (&self->ev_lock, phase);
  cache_parts_at_fork (self != NULL ? &self->parts : NULL, phase);
  if (self != NULL && phase != MEMRES_FORK_PREPARE)
    {
      if (phase == MEMRES_FORK_CHILD)
        self->ev_owner = NULL;
      memres_fork_mutex (&self->ev_lock, phase);
    }
}

static const MemresResourceOps arena_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = arena_init,
  .finalize = arena_finalize,
  .allocate = arena_allocate,
  .deallocate = arena_deallocate,
  .resize = arena_resize,
  .query = arena_query,
  .get_stats = arena_get_stats,
  .reset_stats = arena_reset_stats,
  .trim = arena_trim,
  .get_counters = arena_get_counters,
  .at_fork = arena_at_fork,
  .explain_oom = arena_explain_oom,
  .snapshot = arena_snapshot, /* arena-snapshot.c */
  .sleep = arena_sleep,       /* arena-sleep.c */
  .wake = arena_wake,
};

/* every instance's: only those made with handle_type=posix_fd export and import chunks of
 * fds, those made with handle_type=fabric (granted) chunks of fabric handles (the slots
 * check), and only their buffers of memory of their own export (arena-export.c) */
static const MemresIpcOps arena_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .export_chunks = arena_export_chunks,
  .import_chunks = arena_import_chunks,
  .export_fabric_chunks = arena_export_fabric_chunks,
  .import_fabric_chunks = arena_import_fabric_chunks,
};

static const MemresKindInfo arena_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "arena",
  .description = "caching device arena on virtual memory: granules mapped on demand and moved "
                 "where needed, size classes with per-thread fronts, best-fit large buffers",
  .options = arena_options,
  .n_options = G_N_ELEMENTS (arena_options),
  .ops = &arena_ops,
  .ipc = &arena_ipc_ops,
  .instance_size = sizeof (Arena),
  /* each mapped granule is a segment; a buffer is placed by its tag (arena-private.h); get_stats
   * reports the used bytes (class bytes of blocks, rounded bytes of extents: not the sizes handed
   * out), so the core counts none on the pair: no stripe's bytes, no quota test, and no sum of
   * the stripes that rewrites every thread's quota (the one write of the class pair to lines
   * other threads use, bench/pair-lines.py) */
  .flags = MEMRES_KIND_SEGMENTS | MEMRES_KIND_TAGGED | MEMRES_KIND_OWN_USAGE,
};

static gboolean
arena_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &arena_kind, error);
}

MEMRES_PLUGIN_DEFINE (arena, "The arena kind: a caching device arena on virtual memory",
                      arena_plugin_init)
