/* memres - CUDA memory resources
 * pool-ipc.c: sharing a MemresPool between processes through POSIX file descriptors: the pool
 * (cuMemPoolExportToShareableHandle / cuMemPoolImportFromShareableHandle) and its allocations
 * (cuMemPoolExportPointer / cuMemPoolImportPointer). Used by the ipc kind, and by pinned with
 * ipc=true. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"

G_STATIC_ASSERT (sizeof (((CUmemPoolPtrExportData *) NULL)->reserved)
                 == sizeof (((MemresBufferExport *) NULL)->export_data));

/* Runs a driver call; when the thread has no current context, makes the primary context of
 * @device current and tries once more. */
#define CALL_WITH_CONTEXT(r, pool, error, call)                                                    \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (!memres_pool_ensure_context ((pool), (error)))                                             \
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
 * memres_pool_is_shareable:
 * @pool: a pool
 *
 * Returns: %TRUE when @pool was created with POSIX file descriptor handles, or imported
 */
gboolean
memres_pool_is_shareable (const MemresPool *pool)
{
  return (pool->handle_type & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
}

/**
 * memres_pool_export_handle:
 * @pool: a shareable pool (created with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`, or imported)
 * @kind: the kind name the handle carries
 * @handle: (out) (transfer full): the new handle
 * @error: return location for a #GError
 *
 * Makes a new #MemresIpcHandle for @pool owning a new file descriptor: for a pool created here,
 * one from cuMemPoolExportToShareableHandle() (each call a new one); for an imported pool, a
 * duplicate of the descriptor it was imported from, so that the pool can be forwarded to a
 * third process. The handle carries @pool's identity and device UUID. On failure no fd is left
 * open. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NOT_SUPPORTED (the pool is not
 *   shareable), %MEMRES_ERROR_FAILED (dup() failed) or a %MEMRES_CUDA_ERROR.
 */
gboolean
memres_pool_export_handle (MemresPool *pool, const char *kind, MemresIpcHandle **handle,
                           GError **error)
{
  int fd = -1;

  if (!memres_pool_is_shareable (pool))
    return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                                "the pool was not created shareable (POSIX file descriptors)"),
           FALSE;

  fd = fcntl (pool->share_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    {
      int saved = errno;
      return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                          "duplicating the pool's file descriptor: %s", g_strerror (saved)),
             FALSE;
    }

  *handle = memres_ipc_handle_new (kind, fd, pool->pool_id, pool->device_uuid, error);
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

/**
 * memres_pool_init_import:
 * @pool: (out caller-allocates): the pool to set up
 * @handle: a handle received from the exporting process (transfer none: it keeps its fd)
 * @location: (nullable): where the pool's memory lives; %NULL for device memory on the device
 *   whose UUID the handle names
 * @error: return location for a #GError
 *
 * Imports the pool behind @handle: finds the device with the handle's device UUID
 * (memres_cuda_find_device_by_uuid(): the exporter's ordinal may name another device here),
 * duplicates the handle's fd and passes it to cuMemPoolImportFromShareableHandle(). The pool
 * keeps that duplicate (for memres_pool_export_handle()) and closes it in
 * memres_pool_destroy(), which also destroys the imported pool. An imported pool takes the
 * handle's identity. On failure nothing is left open.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_WRONG_DEVICE (no device with that UUID),
 *   %MEMRES_ERROR_NO_DEVICE, %MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NOT_SUPPORTED (the fd is not
 *   a shareable pool handle), %MEMRES_ERROR_FAILED (dup() failed) or a %MEMRES_CUDA_ERROR.
 */
gboolean
memres_pool_init_import (MemresPool *pool, const MemresIpcHandle *handle,
                         const CUmemLocation *location, GError **error)
{
  const MemresCudaDriver *drv;
  CUmemLocation where;
  CUmemoryPool imported = NULL;
  CUresult r;
  gint device;
  int fd;

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

  fd = fcntl (memres_ipc_handle_get_fd (handle), F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    {
      int saved = errno;
      return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                          "duplicating the handle's file descriptor: %s", g_strerror (saved)),
             FALSE;
    }
  r = drv->cuMemPoolImportFromShareableHandle (&imported, (void *) (gintptr) fd,
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
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

  memres_pool_init_for_handle (pool, drv, imported, TRUE, &where, device,
                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  pool->share_fd = fd;
  memcpy (pool->pool_id, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (pool->device_uuid, memres_ipc_handle_get_device_uuid (handle), MEMRES_IPC_ID_SIZE);
  return TRUE;
}

/**
 * memres_pool_export_pointer:
 * @pool: a shareable pool
 * @alloc: an allocation of @pool made in this process
 * @out: (out caller-allocates): filled: pool identity, device UUID, offset 0, @alloc's size and
 *   the driver's export data
 * @error: return location for a #GError
 *
 * Exports @alloc with cuMemPoolExportPointer(). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NOT_SUPPORTED (the pool is not
 *   shareable) or a %MEMRES_CUDA_ERROR.
 */
gboolean
memres_pool_export_pointer (MemresPool *pool, const MemresAllocation *alloc,
                            MemresBufferExport *out, GError **error)
{
  CUmemPoolPtrExportData data;
  CUresult r;

  if (!memres_pool_is_shareable (pool))
    return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                                "the pool was not created shareable (POSIX file descriptors)"),
           FALSE;
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

/**
 * memres_pool_import_pointer:
 * @pool: an imported pool
 * @in: the decoded descriptor (validated by the core)
 * @stream: the stream the import is ordered on
 * @alloc: (out caller-allocates): the whole mapped allocation: the address the driver mapped
 *   and its extent in bytes (cuPointerGetAttribute `CU_POINTER_ATTRIBUTE_RANGE_SIZE`); the core
 *   checks that the descriptor's offset and size fit in it
 * @error: return location for a #GError
 *
 * Maps an allocation of the exporting process with cuMemPoolImportPointer(). Undo with
 * memres_pool_free() (cuMemFreeAsync). Not deduplicated here: the core maps each exported
 * allocation once per process. On failure nothing stays mapped: a mapping made before a later
 * step failed is unmapped on @stream (the caller's stream, in whose order the import was).
 * Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_import_pointer (MemresPool *pool, const MemresBufferExport *in, MemresStream stream,
                            MemresAllocation *alloc, GError **error)
{
  CUmemPoolPtrExportData data;
  CUdeviceptr ptr = 0;
  size_t extent = 0;
  CUresult r;

  memcpy (data.reserved, in->export_data, sizeof data.reserved);
  CALL_WITH_CONTEXT (r, pool, error, pool->drv->cuMemPoolImportPointer (&ptr, pool->handle, &data));
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolImportPointer");

  r = pool->drv->cuPointerGetAttribute (&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
  if (r != CUDA_SUCCESS)
    {
      memres_cuda_set_error (error, r, "cuPointerGetAttribute");
      (void) pool->drv->cuMemFreeAsync (ptr, (CUstream) stream);
      return FALSE;
    }

  alloc->address = ptr;
  alloc->size = extent;
  alloc->plugin_data = NULL;
  return TRUE;
}
