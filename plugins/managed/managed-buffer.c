/* memres - CUDA memory resources
 * managed-buffer.c: advice, prefetch and discard for buffers of managed memory
 * (MEMRES_MEMORY_MANAGED), through the CUmemLocation forms of cuMemAdvise and
 * cuMemPrefetchAsync, cuMemRangeGetAttribute and the CUDA 13 batch entry points.
 *
 * Part of libmemres, not of the libmemres-managed.so plugin: memres-managed.h is libmemres's
 * API, and it serves every managed buffer, the managed kind's and wrapped cuMemAllocManaged
 * memory alike (an application calls it without loading the plugin). It lives here because
 * these are the managed kind's driver calls (a kind writes only its own), and it is written
 * against the public API alone, as a plugin is: buffers through their getters, the driver
 * through the plugin SDK (public_api_sources, the top-level meson.build). */
#include <memres/memres.h>
#include <memres/memres-plugin.h> /* the driver table (memres-cuda.h) */

/* The driver's legacy ordinals in range attributes. */
#define ORDINAL_HOST    (-1) /* CU_DEVICE_CPU */
#define ORDINAL_INVALID (-2) /* CU_DEVICE_INVALID */

G_STATIC_ASSERT ((int) MEMRES_LOCATION_NONE == (int) CU_MEM_LOCATION_TYPE_NONE);
G_STATIC_ASSERT ((int) MEMRES_LOCATION_DEVICE == (int) CU_MEM_LOCATION_TYPE_DEVICE);
G_STATIC_ASSERT ((int) MEMRES_LOCATION_HOST == (int) CU_MEM_LOCATION_TYPE_HOST);
G_STATIC_ASSERT ((int) MEMRES_LOCATION_HOST_NUMA == (int) CU_MEM_LOCATION_TYPE_HOST_NUMA);
G_STATIC_ASSERT ((int) MEMRES_LOCATION_HOST_NUMA_CURRENT
                 == (int) CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
G_STATIC_ASSERT (ORDINAL_HOST == CU_DEVICE_CPU && ORDINAL_INVALID == CU_DEVICE_INVALID);

/* What a location may be for one use. */
typedef enum
{
  LOCATIONS_ADVICE = 0,              /* preferred location, prefetch: every type */
  LOCATIONS_DEVICE_OR_HOST = 1 << 0, /* accessed-by: a device or the host */
} LocationUse;

/**
 * memres_buffer_is_managed:
 * @buf: a #MemresBuffer
 *
 * Whether @buf is managed memory (its flags hold %MEMRES_MEMORY_MANAGED): the buffers of the
 * `managed` kind, and wrapped cuMemAllocManaged memory. Thread-safe.
 *
 * Returns: %TRUE for an open buffer of managed memory; %FALSE otherwise (a closed buffer too)
 *
 * Since: 1.2
 */
gboolean
memres_buffer_is_managed (MemresBuffer *buf)
{
  return (memres_buffer_get_flags (buf) & MEMRES_MEMORY_MANAGED) != 0;
}

/* Checks that @buf is open and managed; stores the driver (NULL for an empty buffer: nothing to
 * ask the driver about) with a context current for it. */
static gboolean
begin (MemresBuffer *buf, const char *what, const MemresCudaDriver **drv, GError **error)
{
  *drv = NULL;
  if (memres_buffer_is_closed (buf))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED, "%s: the buffer is closed", what);
      return FALSE;
    }
  if (!memres_buffer_is_managed (buf))
    {
      MemresResource *mr = memres_buffer_get_resource (buf);

      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: the buffer is not managed memory (its kind is \"%s\"): advice, prefetch "
                   "and discard apply to managed buffers only",
                   what, mr != NULL ? memres_resource_get_kind_name (mr) : "wrapped memory");
      return FALSE;
    }
  if (memres_buffer_get_size (buf) == 0)
    return TRUE;
  *drv = memres_cuda_get_driver (error);
  return *drv != NULL
         && memres_cuda_ensure_context (MAX (memres_buffer_get_device (buf), 0), error);
}

/* @since: the CUDA version that introduced the form of @entry the table holds */
static gboolean
no_entry (const char *what, const char *entry, const char *since, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "%s: the CUDA driver has no %s (CUDA %s or newer is needed)", what, entry, since);
  return FALSE;
}

static gboolean
check_location (const MemresLocation *location, LocationUse use, const char *what,
                CUmemLocation *out, GError **error)
{
  if (location == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "%s: no location given",
                   what);
      return FALSE;
    }
  out->type = (CUmemLocationType) location->type;
  out->id = 0;
  switch (location->type)
    {
    case MEMRES_LOCATION_DEVICE:
      /* a negative ordinal is bad input, as everywhere in memres; one the driver does not have
       * is MEMRES_ERROR_NO_DEVICE */
      if (location->id < 0)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "%s: device %d: a device ordinal is 0 or more (the host is "
                       "MEMRES_LOCATION_HOST)",
                       what, location->id);
          return FALSE;
        }
      if (!memres_cuda_check_device (location->id, error))
        {
          g_prefix_error (error, "%s: ", what);
          return FALSE;
        }
      out->id = location->id;
      return TRUE;
    case MEMRES_LOCATION_HOST:
      return TRUE;
    case MEMRES_LOCATION_HOST_NUMA:
    case MEMRES_LOCATION_HOST_NUMA_CURRENT:
      if (use & LOCATIONS_DEVICE_OR_HOST)
        break;
      if (location->type == MEMRES_LOCATION_HOST_NUMA)
        {
          if (location->id < 0)
            {
              g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                           "%s: host NUMA node %d: a node is 0 or more", what, location->id);
              return FALSE;
            }
          out->id = location->id;
        }
      return TRUE;
    default:
      break;
    }
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "%s: location type %d is not valid here (expected %s)", what, (int) location->type,
               (use & LOCATIONS_DEVICE_OR_HOST) ? "a device or the host"
                                                : "a device, the host or a host NUMA node");
  return FALSE;
}

static gboolean
advise (MemresBuffer *buf, CUmem_advise advice, const MemresLocation *location, LocationUse use,
        const char *what, GError **error)
{
  const MemresCudaDriver *drv;
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_HOST, 0 };
  CUresult res;

  /* accessed-by always names a location; read-mostly and unsetting the preferred location
   * none (the driver ignores it) */
  if ((location != NULL || (use & LOCATIONS_DEVICE_OR_HOST))
      && !check_location (location, use, what, &loc, error))
    return FALSE;
  if (!begin (buf, what, &drv, error))
    return FALSE;
  if (drv == NULL)
    return TRUE;
  if (drv->cuMemAdvise == NULL)
    return no_entry (what, "cuMemAdvise", "12.2", error);
  res = drv->cuMemAdvise ((CUdeviceptr) memres_buffer_get_address (buf),
                          memres_buffer_get_size (buf), advice, loc);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuMemAdvise");
  return TRUE;
}

/* One int attribute of the buffer's range; @empty is what an empty buffer reports. */
static gboolean
get_int_attribute (MemresBuffer *buf, CUmem_range_attribute attr, const char *what, int empty,
                   int *value, GError **error)
{
  const MemresCudaDriver *drv;
  CUresult res;

  if (!begin (buf, what, &drv, error))
    return FALSE;
  if (drv == NULL)
    {
      *value = empty;
      return TRUE;
    }
  if (drv->cuMemRangeGetAttribute == NULL)
    return no_entry (what, "cuMemRangeGetAttribute", "8.0", error);
  res = drv->cuMemRangeGetAttribute (value, sizeof *value, attr,
                                     (CUdeviceptr) memres_buffer_get_address (buf),
                                     memres_buffer_get_size (buf));
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuMemRangeGetAttribute");
  return TRUE;
}

/* A location from the TYPE and ID range attributes. */
static void
location_from (int type, int id, MemresLocation *location)
{
  switch (type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      location->type = (MemresLocationType) type;
      location->id = id;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
      location->type = MEMRES_LOCATION_HOST;
      location->id = 0;
      break;
    default:
      location->type = MEMRES_LOCATION_NONE;
      location->id = 0;
      break;
    }
}

/* A location from a TYPE/ID pair of range attributes. */
static gboolean
get_location (MemresBuffer *buf, CUmem_range_attribute type_attr, CUmem_range_attribute id_attr,
              const char *what, MemresLocation *location, GError **error)
{
  int type = 0, id = 0;

  g_return_val_if_fail (location != NULL, FALSE);
  if (!get_int_attribute (buf, type_attr, what, CU_MEM_LOCATION_TYPE_NONE, &type, error))
    return FALSE;
  if ((type == CU_MEM_LOCATION_TYPE_DEVICE || type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
      && !get_int_attribute (buf, id_attr, what, 0, &id, error))
    return FALSE;
  location_from (type, id, location);
  return TRUE;
}

/**
 * memres_buffer_set_read_mostly:
 * @buf: a managed #MemresBuffer
 * @read_mostly: %TRUE to advise that the memory is mostly read (the driver may then keep
 *   read-only copies where it is read), %FALSE to undo that advice
 * @error: return location for a #GError, or %NULL
 *
 * cuMemAdvise() with `CU_MEM_ADVISE_SET_READ_MOSTLY` or `CU_MEM_ADVISE_UNSET_READ_MOSTLY` over
 * the whole buffer. Not stream-ordered: the advice applies when the call returns. An empty
 * buffer has nothing to advise: success without a driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED when the driver lacks the CUmemLocation
 * form of cuMemAdvise (CUDA 12.2); %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_set_read_mostly (MemresBuffer *buf, gboolean read_mostly, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return advise (buf, read_mostly ? CU_MEM_ADVISE_SET_READ_MOSTLY : CU_MEM_ADVISE_UNSET_READ_MOSTLY,
                 NULL, LOCATIONS_ADVICE, "read-mostly advice", error);
}

/**
 * memres_buffer_get_read_mostly:
 * @buf: a managed #MemresBuffer
 * @read_mostly: (out): whether the whole buffer is advised read-mostly
 * @error: return location for a #GError, or %NULL
 *
 * cuMemRangeGetAttribute() of `CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY` over the whole buffer
 * (%FALSE for an empty buffer). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED (no cuMemRangeGetAttribute);
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_get_read_mostly (MemresBuffer *buf, gboolean *read_mostly, GError **error)
{
  int value = 0;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (read_mostly != NULL, FALSE);
  if (!get_int_attribute (buf, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, "read-mostly query", 0, &value,
                          error))
    return FALSE;
  *read_mostly = value != 0;
  return TRUE;
}

/**
 * memres_buffer_set_preferred_location:
 * @buf: a managed #MemresBuffer
 * @location: (nullable): where the memory should preferably live: a device, the host, a host
 *   NUMA node or the calling thread's node; %NULL unsets the preferred location
 * @error: return location for a #GError, or %NULL
 *
 * cuMemAdvise() with `CU_MEM_ADVISE_SET_PREFERRED_LOCATION` (or
 * `CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION` for %NULL) over the whole buffer. Not
 * stream-ordered. An empty buffer: success without a driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory
 * or @location is not one of the types above (or a device or NUMA node below 0);
 * %MEMRES_ERROR_NO_DEVICE for a device the driver does not have; %MEMRES_ERROR_NO_DRIVER;
 * %MEMRES_ERROR_NOT_SUPPORTED (no CUmemLocation form of cuMemAdvise); %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_set_preferred_location (MemresBuffer *buf, const MemresLocation *location,
                                      GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  if (location == NULL)
    return advise (buf, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, NULL, LOCATIONS_ADVICE,
                   "preferred-location advice", error);
  return advise (buf, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location, LOCATIONS_ADVICE,
                 "preferred-location advice", error);
}

/**
 * memres_buffer_get_preferred_location:
 * @buf: a managed #MemresBuffer
 * @location: (out caller-allocates): the preferred location, %MEMRES_LOCATION_NONE when none
 *   is set (or the buffer is empty)
 * @error: return location for a #GError, or %NULL
 *
 * cuMemRangeGetAttribute() of `CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE` (and, for a
 * device or NUMA node, `CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID`) over the whole buffer.
 * Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED (no cuMemRangeGetAttribute);
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_get_preferred_location (MemresBuffer *buf, MemresLocation *location, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return get_location (buf, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
                       CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, "preferred-location query",
                       location, error);
}

/**
 * memres_buffer_add_accessed_by:
 * @buf: a managed #MemresBuffer
 * @location: a device (%MEMRES_LOCATION_DEVICE) or the host (%MEMRES_LOCATION_HOST) that will
 *   access the memory: the driver keeps it mapped there, to avoid faults
 * @error: return location for a #GError, or %NULL
 *
 * cuMemAdvise() with `CU_MEM_ADVISE_SET_ACCESSED_BY` over the whole buffer. Not stream-ordered.
 * An empty buffer: success without a driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory
 * or @location is neither a device nor the host (or a device below 0); %MEMRES_ERROR_NO_DEVICE
 * for a device the driver does not have; %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED;
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_add_accessed_by (MemresBuffer *buf, const MemresLocation *location, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return advise (buf, CU_MEM_ADVISE_SET_ACCESSED_BY, location, LOCATIONS_DEVICE_OR_HOST,
                 "accessed-by advice", error);
}

/**
 * memres_buffer_remove_accessed_by:
 * @buf: a managed #MemresBuffer
 * @location: a device or the host, as for memres_buffer_add_accessed_by()
 * @error: return location for a #GError, or %NULL
 *
 * cuMemAdvise() with `CU_MEM_ADVISE_UNSET_ACCESSED_BY` over the whole buffer: undoes
 * memres_buffer_add_accessed_by() (removing a location never added is no error). Thread-safe.
 *
 * Errors: those of memres_buffer_add_accessed_by().
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_remove_accessed_by (MemresBuffer *buf, const MemresLocation *location, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return advise (buf, CU_MEM_ADVISE_UNSET_ACCESSED_BY, location, LOCATIONS_DEVICE_OR_HOST,
                 "accessed-by advice", error);
}

/**
 * memres_buffer_get_accessed_by:
 * @buf: a managed #MemresBuffer
 * @locations: (out) (transfer full) (array length=n_locations) (nullable): the devices (in
 *   ordinal order) and the host that the buffer is advised to be accessed by; free with
 *   `g_free`; %NULL when there are none
 * @n_locations: (out): the number of @locations
 * @error: return location for a #GError, or %NULL
 *
 * cuMemRangeGetAttribute() of `CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY` over the whole buffer, into
 * an array of one slot per device plus one for the host. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED (no cuMemRangeGetAttribute);
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success (@locations and @n_locations are set only then)
 *
 * Since: 1.2
 */
gboolean
memres_buffer_get_accessed_by (MemresBuffer *buf, MemresLocation **locations, guint *n_locations,
                               GError **error)
{
  const MemresCudaDriver *drv;
  g_autofree int *slots = NULL;
  MemresLocation *out;
  gint n_devices = 0;
  guint n = 0;
  CUresult res;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (locations != NULL && n_locations != NULL, FALSE);
  if (!begin (buf, "accessed-by query", &drv, error))
    return FALSE;
  if (drv == NULL)
    {
      *locations = NULL;
      *n_locations = 0;
      return TRUE;
    }
  if (drv->cuMemRangeGetAttribute == NULL)
    return no_entry ("accessed-by query", "cuMemRangeGetAttribute", "8.0", error);
  if (!memres_cuda_get_device_count (&n_devices, error))
    return FALSE;
  slots = g_new (int, n_devices + 1);
  res = drv->cuMemRangeGetAttribute (
      slots, sizeof (int) * (gsize) (n_devices + 1), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
      (CUdeviceptr) memres_buffer_get_address (buf), memres_buffer_get_size (buf));
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuMemRangeGetAttribute");
  out = g_new0 (MemresLocation, n_devices + 1);
  for (gint i = 0; i <= n_devices; i++)
    if (slots[i] >= 0 && slots[i] < n_devices)
      out[n++] = (MemresLocation){ MEMRES_LOCATION_DEVICE, slots[i] };
    else if (slots[i] == ORDINAL_HOST)
      out[n++] = (MemresLocation){ MEMRES_LOCATION_HOST, 0 };
  if (n == 0)
    g_clear_pointer (&out, g_free);
  *locations = out;
  *n_locations = n;
  return TRUE;
}

/**
 * memres_buffer_prefetch:
 * @buf: a managed #MemresBuffer
 * @location: where to migrate the memory: a device, the host, a host NUMA node, or the calling
 *   thread's node
 * @stream: the stream the migration is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Migrates the whole buffer to @location in @stream's order: cuMemPrefetchAsync() in its
 * CUmemLocation form (flags 0), in the context memres_buffer_copy_to() uses for @stream. A
 * device location needs a device with concurrent managed access (the driver refuses it
 * otherwise). An empty buffer: success without a driver call. Thread-safe for distinct
 * buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory
 * or @location is not valid (a device or NUMA node below 0 among them); %MEMRES_ERROR_NO_DEVICE
 * for a device the driver does not have; %MEMRES_ERROR_NO_DRIVER;
 * %MEMRES_ERROR_NOT_SUPPORTED (no CUmemLocation form of cuMemPrefetchAsync, CUDA 12.2);
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_prefetch (MemresBuffer *buf, const MemresLocation *location, MemresStream stream,
                        GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return memres_buffers_prefetch (&buf, 1, location, 1, stream, error);
}

/**
 * memres_buffer_get_last_prefetch_location:
 * @buf: a managed #MemresBuffer
 * @location: (out caller-allocates): where the whole buffer was last prefetched to;
 *   %MEMRES_LOCATION_NONE when never (or not all to one place, or the buffer is empty)
 * @error: return location for a #GError, or %NULL
 *
 * cuMemRangeGetAttribute() of `CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE` (and
 * `_ID`). It reports what was asked for, not where the pages are now. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED (no cuMemRangeGetAttribute);
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_get_last_prefetch_location (MemresBuffer *buf, MemresLocation *location,
                                          GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return get_location (buf, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
                       CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, "prefetch-location query",
                       location, error);
}

typedef enum
{
  BATCH_PREFETCH,
  BATCH_DISCARD,
  BATCH_DISCARD_AND_PREFETCH,
} BatchOp;

static const char *const batch_what[] = { "prefetch", "discard", "discard and prefetch" };

/* The batch calls refuse the legacy stream (cuda.h: "must not be legacy NULL stream"). For
 * @stream NULL or MEMRES_STREAM_LEGACY they go to the per-thread default stream, made to wait
 * for an event recorded on the legacy stream: the batch runs after all work the legacy stream
 * would have waited for, and later legacy work waits for it (the per-thread stream is a
 * blocking stream). Context current. Returns the stream to pass, or NULL with *@res and *@call
 * set. */
static CUstream
batch_stream (const MemresCudaDriver *drv, MemresStream stream, CUresult *res, const char **call)
{
  CUevent event = NULL;

  if (stream != NULL && stream != MEMRES_STREAM_LEGACY)
    return (CUstream) stream;
  *call = "cuEventCreate";
  *res = drv->cuEventCreate (&event, CU_EVENT_DISABLE_TIMING);
  if (*res == CUDA_SUCCESS)
    {
      *call = "cuEventRecord";
      *res = drv->cuEventRecord (event, CU_STREAM_LEGACY);
      if (*res == CUDA_SUCCESS)
        {
          *call = "cuStreamWaitEvent";
          *res = drv->cuStreamWaitEvent (CU_STREAM_PER_THREAD, event, 0);
        }
      /* destroying an event with work waiting on it is allowed: released once complete */
      drv->cuEventDestroy (event);
    }
  return *res == CUDA_SUCCESS ? CU_STREAM_PER_THREAD : NULL;
}

/* One batch call over the non-empty buffers of @bufs; @locs has one location per buffer (NULL
 * for discard). Locations are passed to the driver once per run of equal ones. */
static gboolean
batch (BatchOp op, MemresBuffer *const *bufs, guint n_buffers, const CUmemLocation *locs,
       MemresStream stream, GError **error)
{
  const char *what = batch_what[op];
  const MemresCudaDriver *drv = NULL;
  g_autofree CUdeviceptr *ptrs = g_new (CUdeviceptr, MAX (n_buffers, 1));
  g_autofree size_t *sizes = g_new (size_t, MAX (n_buffers, 1));
  g_autofree CUmemLocation *runs = g_new (CUmemLocation, MAX (n_buffers, 1));
  g_autofree size_t *run_starts = g_new (size_t, MAX (n_buffers, 1));
  gboolean pushed;
  size_t n = 0, n_runs = 0;
  gint device = -1;
  CUresult res = CUDA_SUCCESS;
  CUstream cu_stream;
  const char *call;

  for (guint i = 0; i < n_buffers; i++)
    {
      const MemresCudaDriver *d;

      g_return_val_if_fail (bufs[i] != NULL, FALSE);
      if (!begin (bufs[i], what, &d, error))
        return FALSE;
      if (d == NULL)
        continue;
      drv = d;
      if (device < 0)
        device = memres_buffer_get_device (bufs[i]);
      ptrs[n] = (CUdeviceptr) memres_buffer_get_address (bufs[i]);
      sizes[n] = memres_buffer_get_size (bufs[i]);
      if (locs != NULL
          && (n_runs == 0 || runs[n_runs - 1].type != locs[i].type
              || runs[n_runs - 1].id != locs[i].id))
        {
          runs[n_runs] = locs[i];
          run_starts[n_runs++] = n;
        }
      n++;
    }
  if (n == 0)
    return TRUE;

  if (op == BATCH_DISCARD && drv->cuMemDiscardBatchAsync == NULL)
    return no_entry (what, "cuMemDiscardBatchAsync", "13.0", error);
  if (op == BATCH_DISCARD_AND_PREFETCH && drv->cuMemDiscardAndPrefetchBatchAsync == NULL)
    return no_entry (what, "cuMemDiscardAndPrefetchBatchAsync", "13.0", error);
  if (op == BATCH_PREFETCH && drv->cuMemPrefetchBatchAsync == NULL
      && drv->cuMemPrefetchAsync == NULL)
    return no_entry (what, "cuMemPrefetchAsync", "12.2", error);

  if (!memres_cuda_push_stream_context (device, stream, &pushed, error))
    return FALSE;
  switch (op)
    {
    case BATCH_DISCARD:
      if ((cu_stream = batch_stream (drv, stream, &res, &call)) == NULL)
        break;
      call = "cuMemDiscardBatchAsync";
      res = drv->cuMemDiscardBatchAsync (ptrs, sizes, n, 0, cu_stream);
      break;
    case BATCH_DISCARD_AND_PREFETCH:
      if ((cu_stream = batch_stream (drv, stream, &res, &call)) == NULL)
        break;
      call = "cuMemDiscardAndPrefetchBatchAsync";
      res = drv->cuMemDiscardAndPrefetchBatchAsync (ptrs, sizes, n, runs, run_starts, n_runs, 0,
                                                    cu_stream);
      break;
    default:
      /* One buffer, or a driver without the batch call (before CUDA 13): one prefetch each. */
      if (drv->cuMemPrefetchBatchAsync == NULL || (n == 1 && drv->cuMemPrefetchAsync != NULL))
        {
          call = "cuMemPrefetchAsync";
          for (size_t i = 0, r = 0; i < n && res == CUDA_SUCCESS; i++)
            {
              while (r + 1 < n_runs && run_starts[r + 1] <= i)
                r++;
              res = drv->cuMemPrefetchAsync (ptrs[i], sizes[i], runs[r], 0, (CUstream) stream);
            }
        }
      else if ((cu_stream = batch_stream (drv, stream, &res, &call)) != NULL)
        {
          call = "cuMemPrefetchBatchAsync";
          res = drv->cuMemPrefetchBatchAsync (ptrs, sizes, n, runs, run_starts, n_runs, 0,
                                              cu_stream);
        }
      break;
    }
  memres_cuda_pop_context (pushed);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, call);
  return TRUE;
}

/* The locations of a prefetch of @n_buffers buffers: @n_locations is 1 (all to one place) or
 * @n_buffers (one each). Returns a new array of @n_buffers, or NULL with @error set. */
static CUmemLocation *
prefetch_locations (guint n_buffers, const MemresLocation *locations, guint n_locations,
                    const char *what, GError **error)
{
  g_autofree CUmemLocation *locs = NULL;

  if (locations == NULL || (n_locations != 1 && n_locations != n_buffers))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: %u location%s for %u buffer%s: give one location, or one per buffer", what,
                   locations == NULL ? 0 : n_locations,
                   locations != NULL && n_locations == 1 ? "" : "s", n_buffers,
                   n_buffers == 1 ? "" : "s");
      return NULL;
    }
  locs = g_new (CUmemLocation, n_buffers);
  for (guint i = 0; i < n_buffers; i++)
    if (!check_location (&locations[n_locations == 1 ? 0 : i], LOCATIONS_ADVICE, what, &locs[i],
                         error))
      return NULL;
  return g_steal_pointer (&locs);
}

/**
 * memres_buffers_prefetch:
 * @bufs: (array length=n_buffers): managed buffers
 * @n_buffers: the number of @bufs, at least 1
 * @locations: (array length=n_locations): where to migrate them: one location for all, or
 *   one per buffer (as for memres_buffer_prefetch())
 * @n_locations: 1 or @n_buffers
 * @stream: the stream the migrations are ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Migrates several buffers in one driver call: cuMemPrefetchBatchAsync() (CUDA 13), each run of
 * buffers with the same location passed as one location entry; with a driver before CUDA 13,
 * one cuMemPrefetchAsync() per buffer. Every buffer and location is checked before any driver
 * call. Empty buffers are skipped. The batch calls refuse the legacy stream: for @stream %NULL or
 * %MEMRES_STREAM_LEGACY the call goes to the per-thread default stream after it waits
 * (cuEventRecord() on the legacy stream, cuStreamWaitEvent()) for what the legacy stream would have
 * waited for. Thread-safe for distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED (one of @bufs); %MEMRES_ERROR_INVALID_ARGUMENT when @n_buffers
 * is 0, @n_locations is neither 1 nor @n_buffers, a buffer is not managed memory or a location
 * is not valid (a device or NUMA node below 0 among them); %MEMRES_ERROR_NO_DEVICE for a device
 * the driver does not have; %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED;
 * %MEMRES_CUDA_ERROR (the driver's batch is not documented to be all or nothing).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffers_prefetch (MemresBuffer *const *bufs, guint n_buffers,
                         const MemresLocation *locations, guint n_locations, MemresStream stream,
                         GError **error)
{
  g_autofree CUmemLocation *locs = NULL;

  g_return_val_if_fail (bufs != NULL || n_buffers == 0, FALSE);
  if (n_buffers == 0)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                           "prefetch: no buffers given");
      return FALSE;
    }
  locs = prefetch_locations (n_buffers, locations, n_locations, "prefetch", error);
  return locs != NULL && batch (BATCH_PREFETCH, bufs, n_buffers, locs, stream, error);
}

/**
 * memres_buffer_discard:
 * @buf: a managed #MemresBuffer
 * @stream: the stream the discard is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Tells the driver that the buffer's content is no longer needed (cuMemDiscardBatchAsync() with
 * one range, CUDA 13): pages need not be migrated or written back, and reading the memory
 * before writing it again gives undefined bytes. Stream-ordered. The batch calls refuse the legacy
 * stream: for @stream %NULL or %MEMRES_STREAM_LEGACY the call goes to the per-thread default stream
 * after it waits (cuEventRecord() on the legacy stream, cuStreamWaitEvent()) for what the legacy
 * stream would have waited for. An empty buffer: success without a driver call. Thread-safe for
 * distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_ERROR_INVALID_ARGUMENT when @buf is not managed memory;
 * %MEMRES_ERROR_NO_DRIVER; %MEMRES_ERROR_NOT_SUPPORTED when the driver has no
 * cuMemDiscardBatchAsync (before CUDA 13.0); %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_discard (MemresBuffer *buf, MemresStream stream, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  return batch (BATCH_DISCARD, &buf, 1, NULL, stream, error);
}

/**
 * memres_buffer_discard_and_prefetch:
 * @buf: a managed #MemresBuffer
 * @location: where the (discarded) pages are to be populated, as for memres_buffer_prefetch()
 * @stream: the stream the operation is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Discards the buffer's content and prefetches its pages to @location in one driver call
 * (cuMemDiscardAndPrefetchBatchAsync() with one range, CUDA 13): cheaper than a prefetch when
 * the data will be overwritten anyway. The bytes are undefined afterwards. Stream-ordered. The
 * batch calls refuse the legacy stream: for @stream %NULL or %MEMRES_STREAM_LEGACY the call goes to
 * the per-thread default stream after it waits (cuEventRecord() on the legacy stream,
 * cuStreamWaitEvent()) for what the legacy stream would have waited for. Thread-safe for distinct
 * buffers.
 *
 * Errors: those of memres_buffer_prefetch(); %MEMRES_ERROR_NOT_SUPPORTED when the driver has
 * no cuMemDiscardAndPrefetchBatchAsync (before CUDA 13.0).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_buffer_discard_and_prefetch (MemresBuffer *buf, const MemresLocation *location,
                                    MemresStream stream, GError **error)
{
  g_autofree CUmemLocation *locs = NULL;

  g_return_val_if_fail (buf != NULL, FALSE);
  locs = prefetch_locations (1, location, 1, "discard and prefetch", error);
  return locs != NULL && batch (BATCH_DISCARD_AND_PREFETCH, &buf, 1, locs, stream, error);
}
