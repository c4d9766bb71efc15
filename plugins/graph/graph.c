/* memres - CUDA memory resources
 * graph.c: the `graph` kind, device memory allocated inside a stream capture. Each allocation
 * becomes an allocation node of the graph being captured (cuMemAllocAsync on the capturing
 * stream) and closing the buffer on a capturing stream becomes a free node (cuMemFreeAsync);
 * the memory exists only while a launch of the graph has it allocated. docs/graph.md describes
 * how buffers relate to the graph's launches.
 *
 * Spec: graph[:device=N]
 *
 * Graph memory belongs to the device, not to a pool memres owns: every `graph:device=N`
 * resource is a view of device N's graph memory and holds no state of its own, so two of them
 * are equal (same device, same statistics, a trim through one is seen by the other) and
 * interchangeable. Statistics (cuDeviceGetGraphMemAttribute) and trimming
 * (cuDeviceGraphMemTrim) cover all graph memory of the device in this process, memres's or
 * not. */
#include <memres/memres-plugin.h>

#include "../common/alloc-error.h"
#include "../common/release.h"

typedef struct
{
  const MemresCudaDriver *drv;
  gint device;
  CUdevice cu_device;
} Graph;

static const MemresOptionSpec graph_options[] = {
  { "device", MEMRES_OPTION_INT, "0",
    "CUDA device ordinal whose graph memory the resource allocates (the capturing stream must "
    "belong to this device)",
    NULL, 0, G_MAXINT },
};

static const char *
capture_status_name (CUstreamCaptureStatus status)
{
  switch (status)
    {
    case CU_STREAM_CAPTURE_STATUS_NONE:
      return "not capturing";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE:
      return "capturing";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED:
      return "capturing, but the capture was invalidated by an earlier error";
    default:
      return "in an unknown capture state";
    }
}

static gboolean
graph_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Graph *self = memres_resource_get_private (mr);
  gint device = (gint) memres_options_get_int (options, "device");
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  int pools = 0;
  CUresult r;

  if (drv == NULL || !memres_cuda_check_device (device, error))
    return FALSE;
  if (drv->cuStreamIsCapturing == NULL || drv->cuMemAllocAsync == NULL
      || drv->cuMemFreeAsync == NULL || drv->cuDeviceGetGraphMemAttribute == NULL
      || drv->cuDeviceSetGraphMemAttribute == NULL || drv->cuDeviceGraphMemTrim == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "the CUDA driver %s lacks the graph memory entry points (cuStreamIsCapturing, "
                   "cuMemAllocAsync, cuMemFreeAsync, cuDeviceGet/SetGraphMemAttribute, "
                   "cuDeviceGraphMemTrim; CUDA 11.4 or newer)",
                   drv->path);
      return FALSE;
    }
  r = drv->cuDeviceGet (&self->cu_device, device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  if (!memres_cuda_get_device_attribute (device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, &pools,
                                         error))
    return FALSE;
  if (!pools)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "device %d cannot allocate inside graphs: "
                   "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0",
                   device);
      return FALSE;
    }
  self->drv = drv;
  self->device = device;
  return TRUE;
}

static void
graph_finalize (MemresResource *mr)
{
}

/* Calls on an explicit stream act in the stream's context; a thread without any current
 * context may still be refused one, a failing call that compute-sanitizer reports. So the first
 * call on a thread makes sure a context is current (the device's primary context when there is
 * none); the usual path then stays one driver call. Should the application take the context
 * away later, it is made current again and the call tried once more. */
static __thread gboolean thread_has_context;

#define WITH_CONTEXT(self, r, call)                                                                \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (G_UNLIKELY (!thread_has_context) && memres_cuda_ensure_context ((self)->device, NULL))     \
      thread_has_context = TRUE;                                                                   \
    (r) = (call);                                                                                  \
    if (G_UNLIKELY ((r) == CUDA_ERROR_INVALID_CONTEXT)                                             \
        && memres_cuda_ensure_context ((self)->device, NULL))                                      \
      (r) = (call);                                                                                \
  }                                                                                                \
  G_STMT_END

/* INVALID_ARGUMENT unless @stream is capturing a graph. */
static gboolean
check_capturing (Graph *self, MemresStream stream, GError **error)
{
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r;

  /* The legacy default stream cannot capture: no need to ask. */
  if (stream == NULL || stream == MEMRES_STREAM_LEGACY)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"graph\" (device %d) allocates only on a stream that is capturing a "
                   "graph, and the legacy default stream never captures: begin a capture "
                   "(cuStreamBeginCapture) on a stream of your own",
                   self->device);
      return FALSE;
    }
  WITH_CONTEXT (self, r, self->drv->cuStreamIsCapturing ((CUstream) stream, &status));
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamIsCapturing");
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"graph\" (device %d) allocates only on a stream that is capturing a "
                   "graph, and stream %p is %s (cuStreamIsCapturing): allocate between "
                   "cuStreamBeginCapture and cuStreamEndCapture, or use a kind such as dmr "
                   "outside captures",
                   self->device, (gpointer) stream, capture_status_name (status));
      return FALSE;
    }
  return TRUE;
}

static gboolean
graph_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  Graph *self = memres_resource_get_private (mr);
  CUdeviceptr ptr = 0;
  CUresult r;

  if (!check_capturing (self, stream, error))
    return FALSE;
  /* On a capturing stream this adds an allocation node: the address is fixed now, the memory
   * is allocated by each launch. */
  WITH_CONTEXT (self, r, self->drv->cuMemAllocAsync (&ptr, size, (CUstream) stream));
  if (r != CUDA_SUCCESS)
    return alloc_error_set (error, r, "cuMemAllocAsync", size);
  alloc->address = ptr;
  alloc->size = size;
  return TRUE;
}

static gboolean
graph_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Graph *self = memres_resource_get_private (mr);
  CUresult r;

  /* A free node when @stream is capturing; otherwise the free of the allocation a launch left
   * live. The core calls this once per buffer: the buffer is closed from here on, so no later
   * close or unref frees it again. `CUDA_ERROR_DEINITIALIZED` (process exit) is success, as for
   * every kind (release.h). */
  WITH_CONTEXT (self, r,
                self->drv->cuMemFreeAsync ((CUdeviceptr) alloc->address, (CUstream) stream));
  return release_result (error, r, "cuMemFreeAsync");
}

static void
graph_query (MemresResource *mr, MemresResourceInfo *info)
{
  Graph *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags
      = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED | MEMRES_MEMORY_GRAPH;
}

static gboolean
get_attribute (Graph *self, CUgraphMem_attribute attr, guint64 *value, GError **error)
{
  cuuint64_t v = 0;
  CUresult r = self->drv->cuDeviceGetGraphMemAttribute (self->cu_device, attr, &v);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGetGraphMemAttribute");
  *value = v;
  return TRUE;
}

static gboolean
graph_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Graph *self = memres_resource_get_private (mr);

  return get_attribute (self, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &stats->reserved_current,
                        error)
         && get_attribute (self, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &stats->reserved_high, error)
         && get_attribute (self, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &stats->used_current, error)
         && get_attribute (self, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &stats->used_high, error);
}

static gboolean
graph_reset_stats (MemresResource *mr, GError **error)
{
  static const CUgraphMem_attribute highs[]
      = { CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH };
  Graph *self = memres_resource_get_private (mr);

  for (guint i = 0; i < G_N_ELEMENTS (highs); i++)
    {
      cuuint64_t zero = 0; /* the only value the driver accepts: a reset */
      CUresult r = self->drv->cuDeviceSetGraphMemAttribute (self->cu_device, highs[i], &zero);

      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuDeviceSetGraphMemAttribute");
    }
  return TRUE;
}

static gboolean
graph_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Graph *self = memres_resource_get_private (mr);
  guint64 reserved = 0;
  CUresult r;

  if (bytes_to_keep > 0)
    {
      /* cuDeviceGraphMemTrim keeps nothing it can release: only a no-op honours a floor. */
      if (!get_attribute (self, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved, error))
        return FALSE;
      if (reserved <= bytes_to_keep)
        return TRUE;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "kind \"graph\" (device %d) cannot keep %" G_GSIZE_FORMAT
                   " of its %" G_GUINT64_FORMAT " reserved bytes: cuDeviceGraphMemTrim releases "
                   "all unused graph memory of the device; trim with 0 bytes to keep",
                   self->device, bytes_to_keep, reserved);
      return FALSE;
    }
  r = self->drv->cuDeviceGraphMemTrim (self->cu_device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGraphMemTrim");
  return TRUE;
}

static const MemresResourceOps graph_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = graph_init,
  .finalize = graph_finalize,
  .allocate = graph_allocate,
  .deallocate = graph_deallocate,
  .query = graph_query,
  .get_stats = graph_get_stats,
  .reset_stats = graph_reset_stats,
  .trim = graph_trim,
};

static const MemresKindInfo graph_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "graph",
  .description = "device memory allocated inside a stream capture: allocation and free nodes "
                 "of the captured graph (capturing streams only; one view per device)",
  .options = graph_options,
  .n_options = G_N_ELEMENTS (graph_options),
  .ops = &graph_ops,
  .instance_size = sizeof (Graph),
  /* the driver's used bytes (what launches have allocated), not the buffers' sizes */
  .flags = MEMRES_KIND_OWN_USAGE,
};

static gboolean
graph_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &graph_kind, error);
}

MEMRES_PLUGIN_DEFINE (graph, "allocations inside a captured graph (stream-ordered)",
                      graph_plugin_init)
