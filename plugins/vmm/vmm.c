/* memres - CUDA memory resources
 * vmm.c: the `vmm` kind: reserved address space with physical memory mapped in chunks, so that
 * buffers can grow in place. This file holds the option schema, the resource's setup from its
 * options and the statistics; vmm-buffer.c holds the buffers. */
#include "vmm-private.h"

#include "../common/fabric.h"

/* CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: only in the newest headers. A
 * driver that does not know the attribute answers CUDA_ERROR_INVALID_VALUE, read as "no". */
#define VMM_ATTRIBUTE_HOST_VMM_SUPPORTED ((CUdevice_attribute) 145)

static const char *const location_choices[] = { "device", "host", "host_numa", NULL };
static const char *const handle_type_choices[] = { "none", "posix_fd", "fabric", NULL };
static const char *const granularity_choices[] = { "minimum", "recommended", NULL };
static const char *const access_choices[] = { "rw", "ro", NULL };

static const MemresOptionSpec vmm_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal the memory belongs to", NULL, 0,
    G_MAXINT },
  { "location", MEMRES_OPTION_ENUM, "device",
    "where the physical memory lives: device memory, host memory or one host NUMA node",
    location_choices, 0, 0 },
  { "numa_id", MEMRES_OPTION_INT, NULL,
    "host NUMA node for location=host_numa (unset or -1: the node closest to the device)", NULL, -1,
    G_MAXINT },
  { "handle_type", MEMRES_OPTION_ENUM, "none",
    "shareable handle type requested at cuMemCreate (none: not exportable)", handle_type_choices, 0,
    0 },
  { "granularity", MEMRES_OPTION_ENUM, "recommended",
    "allocation granularity sizes are rounded up to (cuMemGetAllocationGranularity)",
    granularity_choices, 0, 0 },
  { "chunk", MEMRES_OPTION_SIZE, "0",
    "bytes of physical memory per cuMemCreate, rounded up to the granularity (0: 64 MiB)", NULL, 0,
    0 },
  { "reserve", MEMRES_OPTION_SIZE, "0",
    "address space reserved per buffer up front (0: just the size); room lets buffers grow in "
    "place",
    NULL, 0, 0 },
  { "access", MEMRES_OPTION_ENUM, "rw", "access of the device (and peers): read-write or read-only",
    access_choices, 0, 0 },
  { "peers", MEMRES_OPTION_INT_LIST, NULL,
    "other devices given the same access, joined by + (for example 1+2)", NULL, 0, G_MAXINT },
  { "gpu_direct_rdma", MEMRES_OPTION_BOOL, "false",
    "request GPUDirect RDMA capable memory (cuMemCreate allocFlags.gpuDirectRDMACapable)", NULL, 0,
    0 },
  FABRIC_FALLBACK_OPTION,
};

/* Sets *supported from a capability attribute; a driver too old to know the attribute counts
 * as "not supported". */
static gboolean
vmm_get_capability (VmmResource *self, CUdevice_attribute attr, gboolean *supported, GError **error)
{
  GError *local_error = NULL;
  gint value = 0;

  if (!memres_cuda_get_device_attribute (self->device, attr, &value, &local_error))
    {
      if (g_error_matches (local_error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE))
        {
          g_clear_error (&local_error);
          value = 0;
        }
      else
        {
          g_propagate_error (error, local_error);
          return FALSE;
        }
    }
  *supported = value != 0;
  return TRUE;
}

/* %MEMRES_ERROR_NOT_SUPPORTED, "vmm: device N does not support @what", unless the capability
 * @attr is set (vmm_get_capability()). */
static gboolean
vmm_require_capability (VmmResource *self, CUdevice_attribute attr, const char *what,
                        GError **error)
{
  gboolean supported;

  if (!vmm_get_capability (self, attr, &supported, error))
    return FALSE;
  if (!supported)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "vmm: device %d does not support %s", self->device, what);
      return FALSE;
    }
  return TRUE;
}

static gboolean
vmm_setup_location (VmmResource *self, const MemresOptions *options, GError **error)
{
  const char *location = memres_options_get_string (options, "location");
  gboolean numa_given = memres_options_is_set (options, "numa_id");

  if (g_strcmp0 (location, "host_numa") != 0 && numa_given)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "vmm: option numa_id is only valid with location=host_numa (location is %s)",
                   location);
      return FALSE;
    }

  if (g_strcmp0 (location, "device") == 0)
    {
      self->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      self->prop.location.id = self->device;
      self->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
      return TRUE;
    }

  if (g_strcmp0 (location, "host") == 0)
    {
      if (!vmm_require_capability (self, VMM_ATTRIBUTE_HOST_VMM_SUPPORTED,
                                   "location=host with virtual memory management", error))
        return FALSE;
      self->prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
      self->prop.location.id = 0; /* ignored for HOST */
    }
  else
    {
      gint64 numa_id = numa_given ? memres_options_get_int (options, "numa_id") : -1;

      if (!vmm_require_capability (
              self, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
              "location=host_numa with virtual memory management", error))
        return FALSE;
      if (numa_id < 0)
        {
          gint closest = -1;

          if (!memres_cuda_get_device_attribute (self->device, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID,
                                                 &closest, error))
            return FALSE;
          /* -1: the system has no NUMA; the driver then wants node 0 */
          numa_id = MAX (closest, 0);
        }
      self->prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      self->prop.location.id = (int) numa_id;
    }
  self->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE;
  return TRUE;
}

static gboolean
vmm_setup_handle_type (VmmResource *self, const MemresOptions *options, GError **error)
{
  const char *handle_type = memres_options_get_string (options, "handle_type");
  g_autofree char *what = NULL;
  CUdevice_attribute attr;

  if (g_strcmp0 (handle_type, "none") == 0)
    {
      self->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
      return TRUE;
    }
  if (self->prop.location.type == CU_MEM_LOCATION_TYPE_HOST)
    {
      /* cuMemCreate: HOST allocations are not IPC capable */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "vmm: handle_type=%s needs location=device or location=host_numa: "
                   "location=host memory cannot be shared",
                   handle_type);
      return FALSE;
    }
  if (g_strcmp0 (handle_type, "posix_fd") == 0)
    {
      /* buffers can be sent to other processes (vmm-ipc.c) */
      self->flags |= MEMRES_MEMORY_IPC_ENABLED;
      self->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      attr = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED;
    }
  else
    {
      self->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
      attr = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;
    }
  what = g_strdup_printf ("handle_type=%s", handle_type);
  return vmm_require_capability (self, attr, what, error);
}

/* handle_type=fabric: whether the driver lets this process create and export fabric handles,
 * asked with one granule (fabric_probe_memory()); where it refuses with CUDA_ERROR_NOT_PERMITTED
 * (no IMEX channel: the H200 machine refuses the cuMemCreate), fabric_fallback=posix_fd switches
 * to POSIX-fd handles, else the error names the missing channel (fabric_settle()). The handle
 * type in use shows in the flags: %MEMRES_MEMORY_FABRIC_HANDLES. */
static gboolean
vmm_setup_fabric (VmmResource *self, const MemresOptions *options, GError **error)
{
  GError *probe = NULL;
  gboolean fabric;
  const char *call;
  CUresult res;

  if (self->prop.requestedHandleTypes != CU_MEM_HANDLE_TYPE_FABRIC)
    return TRUE;
  res = fabric_probe_memory (self->drv, &self->prop, self->granularity, &call);
  if (res != CUDA_SUCCESS)
    memres_cuda_set_error (&probe, res, call);
  if (!fabric_settle ("vmm", self->device, options, probe, &fabric, error))
    return FALSE;
  self->flags |= MEMRES_MEMORY_IPC_ENABLED;
  if (fabric)
    {
      self->flags |= MEMRES_MEMORY_FABRIC_HANDLES;
      return TRUE;
    }
  /* the same granularity holds: the options asked for both kinds of handle support */
  self->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return vmm_require_capability (self,
                                 CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                 "handle_type=fabric with fabric_fallback=posix_fd", error);
}

static gboolean
vmm_setup_rdma (VmmResource *self, const MemresOptions *options, GError **error)
{
  if (!memres_options_get_bool (options, "gpu_direct_rdma"))
    return TRUE;
  if (!vmm_require_capability (self, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                               "gpu_direct_rdma with virtual memory management", error))
    return FALSE;
  self->prop.allocFlags.gpuDirectRDMACapable = 1;
  return TRUE;
}

/* Rounds @value up to a multiple of the granularity; FALSE on overflow. */
static gboolean
vmm_round_option (VmmResource *self, const char *name, guint64 value, gsize *out, GError **error)
{
  if (value > G_MAXSIZE - (self->granularity - 1))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "vmm: option %s is too large (%" G_GUINT64_FORMAT " bytes)", name, value);
      return FALSE;
    }
  *out = (gsize) ((value + self->granularity - 1) / self->granularity * self->granularity);
  return TRUE;
}

static gboolean
vmm_setup_sizes (VmmResource *self, const MemresOptions *options, GError **error)
{
  const char *granularity = memres_options_get_string (options, "granularity");
  CUmemAllocationGranularity_flags flag = g_strcmp0 (granularity, "minimum") == 0
                                              ? CU_MEM_ALLOC_GRANULARITY_MINIMUM
                                              : CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;
  guint64 chunk = memres_options_get_size (options, "chunk");
  size_t value = 0;
  CUresult res;

  res = self->drv->cuMemGetAllocationGranularity (&value, &self->prop, flag);
  if (res != CUDA_SUCCESS)
    {
      /* the driver's verdict on the allocation properties the options describe */
      memres_cuda_set_error (error, res, "cuMemGetAllocationGranularity");
      g_prefix_error (error,
                      "vmm: device %d cannot allocate with location=%s (id %d): ", self->device,
                      memres_options_get_string (options, "location"), self->prop.location.id);
      return FALSE;
    }
  if (value == 0 || (value & (value - 1)) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "vmm: the driver reports an allocation granularity of %zu bytes, not a power "
                   "of two",
                   (gsize) value);
      return FALSE;
    }
  self->granularity = value;

  if (!vmm_round_option (self, "chunk", chunk != 0 ? chunk : VMM_DEFAULT_CHUNK, &self->chunk,
                         error))
    return FALSE;
  return vmm_round_option (self, "reserve", memres_options_get_size (options, "reserve"),
                           &self->reserve, error);
}

/* Checks the peers and builds the access descriptors: the owning device, the host location for
 * host memory (so the CPU can use the pointer), then every peer, all with the same flags. */
static gboolean
vmm_setup_access (VmmResource *self, const MemresOptions *options, GError **error)
{
  CUmemAccess_flags flags = g_strcmp0 (memres_options_get_string (options, "access"), "ro") == 0
                                ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  gboolean host = self->prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE;
  gsize n_peers = 0;
  const gint64 *peers = memres_options_get_int_list (options, "peers", &n_peers);
  g_autofree CUmemAccessDesc *access = NULL;
  guint n = 0;

  access = g_new0 (CUmemAccessDesc, 2 + n_peers);
  access[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access[n].location.id = self->device;
  access[n++].flags = flags;
  if (host)
    {
      access[n].location = self->prop.location;
      access[n++].flags = flags;
    }

  for (gsize i = 0; i < n_peers; i++)
    {
      gint peer = (gint) peers[i];

      if (peer == self->device)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "vmm: option peers: device %d is the resource's own device", peer);
          return FALSE;
        }
      for (gsize j = 0; j < i; j++)
        if (peers[j] == peers[i])
          {
            g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                         "vmm: option peers: device %d is listed twice", peer);
            return FALSE;
          }
      if (!memres_cuda_check_device (peer, error))
        return FALSE;
      if (!host && !memres_cuda_check_peer_access (self->device, peer, error))
        {
          g_prefix_error (error, "vmm: option peers: ");
          return FALSE;
        }
      access[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access[n].location.id = peer;
      access[n++].flags = flags;
    }

  self->access = g_steal_pointer (&access);
  self->n_access = n;
  return TRUE;
}

static gboolean
vmm_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  gint64 device = memres_options_get_int (options, "device");

  self->mr = mr;
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL)
    return FALSE;
  if (!memres_cuda_check_device ((gint) device, error))
    return FALSE;
  self->device = (gint) device;

  if (!vmm_require_capability (self, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               "virtual memory management "
                               "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)",
                               error))
    return FALSE;

  self->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  /* vmm_setup_access() last: it is the one step that allocates, and a failed init is not
   * finalized */
  if (!vmm_setup_location (self, options, error) || !vmm_setup_handle_type (self, options, error)
      || !vmm_setup_rdma (self, options, error) || !vmm_setup_sizes (self, options, error)
      || !vmm_setup_fabric (self, options, error) || !vmm_setup_access (self, options, error))
    return FALSE;

  self->flags |= MEMRES_MEMORY_RESIZABLE;
  g_mutex_init (&self->stats_lock);
  return TRUE;
}

static void
vmm_finalize (MemresResource *mr)
{
  VmmResource *self = memres_resource_get_private (mr);

  _vmm_free_strays (self);
  if (self->strays != NULL && self->strays->len > 0)
    g_warning ("vmm: %u stray address reservations could not be freed", self->strays->len);
  g_clear_pointer (&self->strays, g_array_unref);
  g_free (self->access);
  g_mutex_clear (&self->stats_lock);
}

static void
vmm_query (MemresResource *mr, MemresResourceInfo *info)
{
  VmmResource *self = memres_resource_get_private (mr);

  /* host-located memory (page-locked) belongs to no device: the rule of
   * memres_buffer_get_device() */
  info->device = self->prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? self->device : -1;
  info->flags = self->flags;
}

void
_vmm_buffer_update (VmmResource *self, VmmBuffer *buf, gsize size, VmmBufferChange change,
                    gint64 physical_delta)
{
  g_mutex_lock (&self->stats_lock);
  self->physical += physical_delta;
  self->physical_high = MAX (self->physical_high, self->physical);
  if (change == VMM_BUFFER_ADDED)
    {
      buf->prev = NULL;
      buf->next = self->buffers;
      if (self->buffers != NULL)
        self->buffers->prev = buf;
      self->buffers = buf;
    }
  else if (change == VMM_BUFFER_REMOVED)
    {
      if (buf->prev != NULL)
        buf->prev->next = buf->next;
      else
        self->buffers = buf->next;
      if (buf->next != NULL)
        buf->next->prev = buf->prev;
    }
  buf->shown.base = buf->base;
  buf->shown.size = size;
  buf->shown.mapped = buf->mapped;
  buf->shown.reserved = buf->reserved;
  g_mutex_unlock (&self->stats_lock);
}

/* The snapshot slot: each buffer a used block (imported ones as imports), the address space
 * reserved after its mapped bytes a hole, the stray reservations holes too; the granularity,
 * the chunk size and the physical bytes as figures. vmm holds nothing free: every byte it maps
 * is a buffer's. */
static void
vmm_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  VmmResource *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->stats_lock);
  for (VmmBuffer *b = self->buffers; b != NULL; b = b->next)
    {
      const VmmShown *v = &b->shown;

      if (b->imported)
        memres_snapshot_add_import (layer, v->base, v->mapped);
      else
        memres_snapshot_add_block (layer, v->base, v->mapped, NULL, MEMRES_BLOCK_USED);
      if (v->reserved > v->mapped)
        memres_snapshot_add_hole (layer, v->base + v->mapped, v->reserved - v->mapped);
    }
  for (guint i = 0; self->strays != NULL && i < self->strays->len; i++)
    {
      const VmmRange *r = &g_array_index (self->strays, VmmRange, i);

      memres_snapshot_add_hole (layer, r->ptr, r->size);
    }
  memres_snapshot_add_figure (layer, "physical", self->physical);
  g_mutex_unlock (&self->stats_lock);
  memres_snapshot_add_figure (layer, "granularity", self->granularity);
  memres_snapshot_add_figure (layer, "chunk", self->chunk);
  memres_snapshot_add_figure (layer, "reserve", self->reserve);
}

/* reserved_* count physical memory (bytes of live cuMemCreate allocations); used_* are the
 * core's count of the live buffers' sizes, which @stats arrives with. Address space
 * reservations are not memory and are not counted. */
static gboolean
vmm_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->stats_lock);
  stats->reserved_current = self->physical;
  stats->reserved_high = self->physical_high;
  g_mutex_unlock (&self->stats_lock);
  return TRUE;
}

static gboolean
vmm_reset_stats (MemresResource *mr, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->stats_lock);
  self->physical_high = self->physical;
  g_mutex_unlock (&self->stats_lock);
  return TRUE;
}

static void
vmm_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  if (mr != NULL)
    memres_fork_mutex (&((VmmResource *) memres_resource_get_private (mr))->stats_lock, phase);
}

static const MemresResourceOps vmm_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = vmm_init,
  .finalize = vmm_finalize,
  .allocate = _vmm_allocate,
  .deallocate = _vmm_deallocate,
  .query = vmm_query,
  .get_stats = vmm_get_stats,
  .reset_stats = vmm_reset_stats,
  .resize = _vmm_resize,
  .at_fork = vmm_at_fork,
  .snapshot = vmm_snapshot,
  .sleep = _vmm_sleep,
  .wake = _vmm_wake,
};

/* every instance's: only those made with handle_type=posix_fd export chunks, only those of
 * fabric handles export fabric chunks (the slots check) */
static const MemresIpcOps vmm_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .export_chunks = _vmm_export_chunks,
  .import_chunks = _vmm_import_chunks,
  .export_fabric_chunks = _vmm_export_fabric_chunks,
  .import_fabric_chunks = _vmm_import_fabric_chunks,
};

static gboolean
vmm_plugin_init (MemresPlugin *plugin, GError **error)
{
  MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = "vmm",
    .description = "virtual memory management: reserved address space mapped in chunks; buffers "
                   "grow in place",
    .options = vmm_options,
    .n_options = G_N_ELEMENTS (vmm_options),
    .ops = &vmm_ops,
    .ipc = &vmm_ipc_ops,
    .instance_size = sizeof (VmmResource),
    .flags = MEMRES_KIND_SEGMENTS, /* each buffer's mapped part is a segment */
  };

  return memres_plugin_register_kind (plugin, &info, error);
}

MEMRES_PLUGIN_DEFINE (vmm, "virtual memory management with growable buffers", vmm_plugin_init)
