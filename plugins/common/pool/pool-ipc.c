/* memres - CUDA memory resources
 * pool-ipc.c: sharing a pool between processes through POSIX file descriptors, or fabric
 * handles: the pool (cuMemPoolExportToShareableHandle / cuMemPoolImportFromShareableHandle) and
 * its allocations (cuMemPoolExportPointer / cuMemPoolImportPointer, the same for both handle
 * types), as the export and import slots of the ipc kind, and of pinned with ipc=true. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "pool-private.h"

G_STATIC_ASSERT (sizeof (((CUmemPoolPtrExportData *) NULL)->reserved)
                 == sizeof (((MemresBufferExport *) NULL)->export_data));

/* Runs a driver call; when the thread has no current context, makes the primary context of
 * @device current and tries once more. */
#define CALL_WITH_CONTEXT(r, pool, error, call)                                                    \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (!pool_ensure_context ((pool), (error)))                                                    \
      return FALSE;                                                                                \
    (r) = (call);                                                                                  \
    if ((r) == CUDA_ERROR_INVALID_CONTEXT)                                                         \
      {                                                                                            \
        if (!memres_cuda_ensure_context ((pool)->device, (error)))                                 \
          return FALSE;                                                                            \
        (r) = (call);                                                                              \
      }                                                                                            \
  }                                                                                                \
  G_STMT_END

/**
 * pool_is_shareable:
 * @pool: a record
 *
 * Returns: %TRUE when @pool was created with POSIX file descriptor or fabric handles, or
 *   imported
 */
gboolean
pool_is_shareable (const PoolRecord *pool)
{
  return (pool->handle_type
          & (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))
         != 0;
}

/* Whether the pool can be shared: %MEMRES_ERROR_NOT_SUPPORTED naming why not otherwise. */
static gboolean
check_shareable (const PoolRecord *pool, GError **error)
{
  if (pool->other != NULL)
    return pool_refuse_without_pool (pool, error);
  if (pool_is_shareable (pool))
    return TRUE;
  g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       pool->unshareable != NULL
                           ? pool->unshareable
                           : "the pool was not created shareable (POSIX file descriptors)");
  return FALSE;
}

/**
 * pool_export_handle:
 * @mr: an instance of a pool kind whose pool is shareable (created with
 *   `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`, or imported)
 * @handle: (out) (transfer full): the new handle, of the resource's kind
 * @error: return location for a #GError
 *
 * The export_handle slot. Makes a new #MemresIpcHandle for the pool owning a new file
 * descriptor: for a pool created here,
 * one from cuMemPoolExportToShareableHandle() (each call a new one); for an imported pool, a
 * duplicate of the descriptor it was imported from, so that the pool can be forwarded to a
 * third process. The handle carries @pool's identity and device UUID. On failure no fd is left
 * open. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NOT_SUPPORTED (the pool is not
 *   shareable, shares by its fabric handle, or the instance has none), %MEMRES_ERROR_FAILED
 *   (dup() failed) or a %MEMRES_CUDA_ERROR.
 */
gboolean
pool_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
  int fd = -1;

  if (!check_shareable (pool, error))
    return FALSE;
  if (pool->share_fd < 0)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "the pool shares by its fabric handle (handle_type=fabric), not by a "
                           "file descriptor: share its buffers with "
                           "memres_buffer_export_message(), whose message carries the pool's "
                           "fabric handle as bytes");
      return FALSE;
    }

  fd = fcntl (pool->share_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "duplicating the pool's file descriptor: %s", g_strerror (saved));
      return FALSE;
    }

  *handle = memres_ipc_handle_new (memres_resource_get_kind_name (mr), fd, pool->pool_id,
                                   pool->device_uuid, error);
  if (*handle == NULL)
    {
      close (fd);
      return FALSE;
    }
  return TRUE;
}

/* The driver refuses an fd that is not a pool's shareable handle with one of these; the real
 * driver (580 on the H200) answers an ordinary memfd with CUDA_ERROR_UNKNOWN. */
static gboolean
is_not_a_pool_handle (CUresult r)
{
  return r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE
         || r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_DEVICE
         || r == CUDA_ERROR_UNKNOWN;
}

/* pool_init_import() of @handle's fd, or (@fabric not NULL) of @fabric's bytes: the pool
 * imported from it on the device with @handle's UUID (@location NULL) or at @location. */
static gboolean
init_import (PoolRecord *pool, const MemresIpcHandle *handle, const MemresFabricHandle *fabric,
             const CUmemLocation *location, GError **error)
{
  const MemresCudaDriver *drv;
  CUmemAllocationHandleType type
      = fabric != NULL ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  MemresFabricHandle copy; /* the driver's argument is not const */
  CUmemLocation where;
  CUmemoryPool imported = NULL;
  CUresult r;
  gint device;
  int fd = -1;

  memset (pool, 0, sizeof *pool);
  pool->share_fd = -1;
  drv = memres_cuda_get_driver (error);
  if (drv == NULL)
    return FALSE;
  if (!memres_cuda_find_device_by_uuid (memres_ipc_handle_get_device_uuid (handle), &device, error))
    return FALSE;
  if (location != NULL)
    where = *location;
  else
    {
      where.type = CU_MEM_LOCATION_TYPE_DEVICE;
      where.id = device;
    }

  if (fabric != NULL)
    {
      copy = *fabric;
      /* bytes the driver does not know (forged, or of a pool destroyed since) are its error;
       * a process without the exporter's IMEX channel gets CUDA_ERROR_NOT_PERMITTED */
      r = drv->cuMemPoolImportFromShareableHandle (&imported, copy.data, type, 0);
      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuMemPoolImportFromShareableHandle");
    }
  else
    {
      fd = fcntl (memres_ipc_handle_get_fd (handle), F_DUPFD_CLOEXEC, 0);
      if (fd < 0)
        {
          int saved = errno;
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                       "duplicating the handle's file descriptor: %s", g_strerror (saved));
          return FALSE;
        }
      r = drv->cuMemPoolImportFromShareableHandle (&imported, (void *) (gintptr) fd, type, 0);
    }
  if (r != CUDA_SUCCESS)
    {
      close (fd);
      if (is_not_a_pool_handle (r))
        {
          GError *cuda_error = NULL;
          memres_cuda_set_error (&cuda_error, r, "cuMemPoolImportFromShareableHandle");
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       "the handle is not the shareable handle of a memory pool: %s",
                       cuda_error->message);
          g_error_free (cuda_error);
          return FALSE;
        }
      return memres_cuda_set_error (error, r, "cuMemPoolImportFromShareableHandle");
    }

  pool_init_for_handle (pool, drv, imported, TRUE, &where, device, type);
  pool->share_fd = fd;
  if (fabric != NULL)
    pool->fabric = *fabric;
  pool->imported = TRUE;
  pool->fast_size = 0; /* the checked path refuses allocation */
  memcpy (pool->pool_id, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (pool->device_uuid, memres_ipc_handle_get_device_uuid (handle), MEMRES_IPC_ID_SIZE);
  return TRUE;
}

/**
 * pool_init_import:
 * @pool: (out caller-allocates): the pool to set up
 * @handle: a handle received from the exporting process (transfer none: it keeps its fd)
 * @location: (nullable): where the pool's memory lives; %NULL for device memory on the device
 *   whose UUID the handle names
 * @error: return location for a #GError
 *
 * Imports the pool behind @handle: finds the device with the handle's device UUID
 * (memres_cuda_find_device_by_uuid(): the exporter's ordinal may name another device here),
 * duplicates the handle's fd and passes it to cuMemPoolImportFromShareableHandle(). The pool
 * keeps that duplicate (for pool_export_handle()) and closes it in
 * pool_destroy(), which also destroys the imported pool. An imported pool takes the
 * handle's identity; it cannot allocate (pool_allocate() refuses) but maps buffers
 * (pool_import_buffer()). On failure nothing is left open.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_WRONG_DEVICE (no device with that UUID),
 *   %MEMRES_ERROR_NO_DEVICE, %MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NOT_SUPPORTED (the fd is not
 *   a shareable pool handle), %MEMRES_ERROR_FAILED (dup() failed) or a %MEMRES_CUDA_ERROR.
 */
gboolean
pool_init_import (PoolRecord *pool, const MemresIpcHandle *handle, const CUmemLocation *location,
                  GError **error)
{
  return init_import (pool, handle, NULL, location, error);
}

/**
 * pool_init_import_fabric:
 * @pool: (out caller-allocates): the pool to set up
 * @handle: the pool's identity (kind, pool identity, device UUID), holding no fd
 * @fabric: the pool's fabric handle, received from the exporting process (untrusted bytes)
 * @error: return location for a #GError
 *
 * As pool_init_import() for device memory, with the pool named by @fabric
 * (cuMemPoolImportFromShareableHandle() with `CU_MEM_HANDLE_TYPE_FABRIC`); the pool keeps the
 * bytes, for pool_export_fabric_handle(). On failure nothing is left open.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_WRONG_DEVICE (no device with that
 *   UUID), %MEMRES_ERROR_NO_DEVICE, %MEMRES_ERROR_NO_DRIVER or a %MEMRES_CUDA_ERROR (bytes the
 *   driver does not know, `CUDA_ERROR_NOT_PERMITTED` without the exporter's IMEX channel).
 */
gboolean
pool_init_import_fabric (PoolRecord *pool, const MemresIpcHandle *handle,
                         const MemresFabricHandle *fabric, GError **error)
{
  return init_import (pool, handle, fabric, NULL, error);
}

/**
 * pool_export_buffer:
 * @mr: an instance of a pool kind whose pool is shareable
 * @alloc: an allocation of the pool made in this process
 * @out: (out caller-allocates): filled: pool identity, device UUID, offset 0, @alloc's size and
 *   the driver's export data
 * @error: return location for a #GError
 *
 * The export_buffer slot: exports @alloc with cuMemPoolExportPointer(). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NOT_SUPPORTED (the pool is not
 *   shareable) or a %MEMRES_CUDA_ERROR.
 */
gboolean
pool_export_buffer (MemresResource *mr, const MemresAllocation *alloc, MemresBufferExport *out,
                    GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
  CUmemPoolPtrExportData data;
  CUresult r;

  if (!check_shareable (pool, error))
    return FALSE;
  memset (&data, 0, sizeof data);
  CALL_WITH_CONTEXT (r, pool, error,
                     pool->drv->cuMemPoolExportPointer (&data, (CUdeviceptr) alloc->address));
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolExportPointer");

  memset (out, 0, sizeof *out);
  memcpy (out->pool_id, pool->pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (out->device_uuid, pool->device_uuid, MEMRES_IPC_ID_SIZE);
  out->offset = 0;
  out->size = alloc->size;
  memcpy (out->export_data, data.reserved, sizeof data.reserved);
  return TRUE;
}

/* What the driver says about the memory just imported at @ptr: its extent, and whether it is
 * device or host memory. The pool's handle came with a kind name from another process, which
 * chose where the pool's memory lives (device memory for ipc, host memory for pinned): a
 * handle relabelled with another kind's name (a device pool sent as pinned, a pinned pool as
 * ipc) would make this resource claim an accessibility its memory does not have (a host
 * pointer that is device memory), so the memory type must be the one of @pool's location. One
 * call (cuPointerGetAttributes: RANGE_SIZE and MEMORY_TYPE; CUDA 13 has no query of a pool's
 * location, only of its memory). */
static gboolean
query_import (PoolRecord *pool, CUdeviceptr ptr, size_t *extent, GError **error)
{
  CUpointer_attribute attrs[]
      = { CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
  unsigned int type = 0;
  void *data[] = { extent, &type };
  gboolean want_device = pool->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  CUresult r;

  r = pool->drv->cuPointerGetAttributes (G_N_ELEMENTS (attrs), attrs, data, ptr);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuPointerGetAttributes");
  if (want_device ? type != CU_MEMORYTYPE_DEVICE : type != CU_MEMORYTYPE_HOST)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "the imported pool's memory is %s memory, but its handle named a kind "
                   "of %s memory (a handle relabelled with another kind's name?)",
                   type == CU_MEMORYTYPE_DEVICE ? "device"
                   : type == CU_MEMORYTYPE_HOST ? "host"
                                                : "unknown",
                   want_device ? "device" : "host");
      return FALSE;
    }
  return TRUE;
}

/**
 * pool_import_buffer:
 * @mr: an instance of a pool kind made by import_handle (pool_init_import())
 * @in: the decoded descriptor (validated by the core)
 * @stream: the stream the import is ordered on
 * @alloc: (out caller-allocates): the whole mapped allocation: the address the driver mapped
 *   and its extent in bytes (cuPointerGetAttribute `CU_POINTER_ATTRIBUTE_RANGE_SIZE`); the core
 *   checks that the descriptor's offset and size fit in it
 * @error: return location for a #GError
 *
 * The import_buffer slot. Maps an allocation of the exporting process with
 * cuMemPoolImportPointer(), then asks the
 * driver what was mapped (cuPointerGetAttributes: RANGE_SIZE and MEMORY_TYPE): memory of
 * another type than @pool's location (device memory in a host-located pool, host memory in a
 * device pool: a pool handle relabelled with another kind's name) is unmapped again and
 * refused. Undo with pool_deallocate() (cuMemFreeAsync). Not deduplicated here: the core maps
 * each exported allocation once per process. On failure nothing stays mapped: a mapping made before
 * a later step failed is unmapped on @stream (the caller's stream, in whose order the import was).
 * Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_INVALID_DESCRIPTOR (memory of the wrong
 *   type), %MEMRES_ERROR_NOT_SUPPORTED (the instance is not an importer) or a
 *   %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_import_buffer (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                    MemresAllocation *alloc, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
  CUmemPoolPtrExportData data;
  CUdeviceptr ptr = 0;
  size_t extent = 0;
  CUresult r;

  if (!pool->imported)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "only a pool imported with memres_resource_import_handle() "
                           "imports buffers: the exporter uses its buffers directly");
      return FALSE;
    }

  memcpy (data.reserved, in->export_data, sizeof data.reserved);
  CALL_WITH_CONTEXT (r, pool, error, pool->drv->cuMemPoolImportPointer (&ptr, pool->handle, &data));
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolImportPointer");

  if (!query_import (pool, ptr, &extent, error))
    {
      (void) pool->drv->cuMemFreeAsync (ptr, (CUstream) stream);
      return FALSE;
    }

  alloc->address = ptr;
  alloc->size = extent;
  alloc->plugin_data = NULL;
  return TRUE;
}

/**
 * pool_import_handle:
 * @mr: a new instance of a kind of device pools (private data zero-filled)
 * @handle: a handle from another process (transfer none)
 * @error: return location for a #GError
 *
 * The import_handle slot of a kind whose pools hold device memory: pool_init_import() on the
 * device with the handle's device UUID.
 *
 * Returns: %TRUE on success; %FALSE with the errors of pool_init_import().
 */
gboolean
pool_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  return pool_init_import (POOL_RECORD (mr), handle, NULL, error);
}

/**
 * pool_export_fabric_handle:
 * @mr: an instance of a pool kind
 * @out: (out caller-allocates): the pool's fabric handle
 * @error: return location for a #GError
 *
 * The export_fabric_handle slot: the fabric handle the pool was exported as at creation, or
 * the one it was imported from (so that it can be forwarded). No driver call. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NOT_SUPPORTED when the pool has no
 *   fabric handle (made with POSIX-fd handles, or the instance has no pool).
 */
gboolean
pool_export_fabric_handle (MemresResource *mr, MemresFabricHandle *out, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (pool->other != NULL)
    return pool_refuse_without_pool (pool, error);
  if (pool->handle_type != CU_MEM_HANDLE_TYPE_FABRIC)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "the pool has no fabric handle (create it with handle_type=fabric)");
      return FALSE;
    }
  *out = pool->fabric;
  return TRUE;
}

/**
 * pool_import_fabric_handle:
 * @mr: a new instance of a kind of device pools (private data zero-filled)
 * @handle: the pool's identity, holding no fd (transfer none)
 * @fabric: the pool's fabric handle (transfer none)
 * @error: return location for a #GError
 *
 * The import_fabric_handle slot of a kind whose pools hold device memory:
 * pool_init_import_fabric().
 *
 * Returns: %TRUE on success; %FALSE with the errors of pool_init_import_fabric().
 */
gboolean
pool_import_fabric_handle (MemresResource *mr, const MemresIpcHandle *handle,
                           const MemresFabricHandle *fabric, GError **error)
{
  return pool_init_import_fabric (POOL_RECORD (mr), handle, fabric, error);
}
