/* memres - CUDA memory resources
 * memres-cuda.h: the table of CUDA driver entry points the core hands to plugins.
 * Part of the plugin SDK; included by memres-plugin.h. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <cuda.h>
#include <memres/memres-types.h>
#include <glib.h>

G_BEGIN_DECLS

/**
 * MEMRES_CUDA_FOREACH_ENTRY:
 * @X: a macro taking one driver entry point name
 *
 * Every driver entry point the core resolves with cuGetProcAddress() at %MEMRES_CUDA_VERSION.
 * Entries are only appended (the table is part of the plugin ABI). An entry point the driver
 * does not have is %NULL in the table; the core requires the ones in
 * %MEMRES_CUDA_FOREACH_REQUIRED_ENTRY and refuses a driver without them (%MEMRES_ERROR_NO_DRIVER).
 */
#define MEMRES_CUDA_FOREACH_ENTRY(X)                                                              \
  X (cuInit)                                                                                      \
  X (cuDriverGetVersion)                                                                          \
  X (cuGetErrorName)                                                                              \
  X (cuGetErrorString)                                                                            \
  X (cuDeviceGet)                                                                                 \
  X (cuDeviceGetCount)                                                                            \
  X (cuDeviceGetName)                                                                             \
  X (cuDeviceGetUuid)                                                                             \
  X (cuDeviceGetAttribute)                                                                        \
  X (cuDeviceTotalMem)                                                                            \
  X (cuDeviceCanAccessPeer)                                                                       \
  X (cuDevicePrimaryCtxRetain)                                                                    \
  X (cuDevicePrimaryCtxRelease)                                                                   \
  X (cuCtxGetCurrent)                                                                             \
  X (cuCtxSetCurrent)                                                                             \
  X (cuCtxPushCurrent)                                                                            \
  X (cuCtxPopCurrent)                                                                             \
  X (cuCtxGetDevice)                                                                              \
  X (cuCtxSynchronize)                                                                            \
  X (cuStreamCreate)                                                                              \
  X (cuStreamDestroy)                                                                             \
  X (cuStreamSynchronize)                                                                         \
  X (cuStreamQuery)                                                                               \
  X (cuStreamWaitEvent)                                                                           \
  X (cuStreamIsCapturing)                                                                         \
  X (cuStreamBeginCapture)                                                                        \
  X (cuStreamEndCapture)                                                                          \
  X (cuGraphDestroy)                                                                              \
  X (cuEventCreate)                                                                               \
  X (cuEventRecord)                                                                               \
  X (cuEventSynchronize)                                                                          \
  X (cuEventElapsedTime)                                                                          \
  X (cuEventDestroy)                                                                              \
  X (cuMemGetInfo)                                                                                \
  X (cuMemAlloc)                                                                                  \
  X (cuMemFree)                                                                                   \
  X (cuMemHostAlloc)                                                                              \
  X (cuMemFreeHost)                                                                               \
  X (cuMemHostGetDevicePointer)                                                                   \
  X (cuMemcpy)                                                                                    \
  X (cuMemcpyAsync)                                                                               \
  X (cuMemcpyHtoDAsync)                                                                           \
  X (cuMemcpyDtoHAsync)                                                                           \
  X (cuMemsetD8Async)                                                                             \
  X (cuMemsetD16Async)                                                                            \
  X (cuMemsetD32Async)                                                                            \
  X (cuPointerGetAttribute)                                                                       \
  X (cuPointerGetAttributes)                                                                      \
  X (cuDeviceGetDefaultMemPool)                                                                   \
  X (cuDeviceGetMemPool)                                                                          \
  X (cuMemGetMemPool)                                                                             \
  X (cuMemPoolCreate)                                                                             \
  X (cuMemPoolDestroy)                                                                            \
  X (cuMemPoolGetAttribute)                                                                       \
  X (cuMemPoolSetAttribute)                                                                       \
  X (cuMemPoolTrimTo)                                                                             \
  X (cuMemPoolSetAccess)                                                                          \
  X (cuMemPoolGetAccess)                                                                          \
  X (cuMemAllocFromPoolAsync)                                                                     \
  X (cuMemAllocAsync)                                                                             \
  X (cuMemFreeAsync)                                                                              \
  X (cuMemPoolExportToShareableHandle)                                                            \
  X (cuMemPoolImportFromShareableHandle)                                                          \
  X (cuMemPoolExportPointer)                                                                      \
  X (cuMemPoolImportPointer)                                                                      \
  X (cuMemGetAllocationGranularity)                                                               \
  X (cuMemCreate)                                                                                 \
  X (cuMemRelease)                                                                                \
  X (cuMemAddressReserve)                                                                         \
  X (cuMemAddressFree)                                                                            \
  X (cuMemMap)                                                                                    \
  X (cuMemUnmap)                                                                                  \
  X (cuMemSetAccess)                                                                              \
  X (cuMemGetAccess)                                                                              \
  X (cuMemExportToShareableHandle)                                                                \
  X (cuMemImportFromShareableHandle)                                                              \
  X (cuMemRetainAllocationHandle)                                                                 \
  X (cuMemGetAllocationPropertiesFromHandle)

/**
 * MEMRES_CUDA_FOREACH_REQUIRED_ENTRY:
 * @X: a macro taking one driver entry point name
 *
 * The entry points without which the core refuses a driver.
 */
#define MEMRES_CUDA_FOREACH_REQUIRED_ENTRY(X)                                                     \
  X (cuInit)                                                                                      \
  X (cuDriverGetVersion)                                                                          \
  X (cuGetErrorName)                                                                              \
  X (cuGetErrorString)                                                                            \
  X (cuDeviceGet)                                                                                 \
  X (cuDeviceGetCount)                                                                            \
  X (cuDeviceGetAttribute)                                                                        \
  X (cuDevicePrimaryCtxRetain)                                                                    \
  X (cuCtxGetCurrent)                                                                             \
  X (cuCtxSetCurrent)

#define MEMRES_CUDA_DECLARE_ENTRY_(name) __typeof__ (name) *name;

/**
 * MemresCudaDriver:
 *
 * The driver's entry points, one function pointer per name in %MEMRES_CUDA_FOREACH_ENTRY,
 * each of the type `cuda.h` declares for that name (so `drv->cuMemAlloc` is the `_v2` entry
 * point, exactly as a direct call would be). Obtained with memres_cuda_get_driver(); const,
 * valid for the life of the process, safe to use from any thread.
 */
typedef struct
{
  guint32 struct_size;
  gint driver_version;
  const char *path;
  MEMRES_CUDA_FOREACH_ENTRY (MEMRES_CUDA_DECLARE_ENTRY_)
} MemresCudaDriver;

/* Full documentation with each definition in core/cuda-driver.c. */
const MemresCudaDriver *memres_cuda_get_driver (GError **error);
gboolean memres_cuda_set_error (GError **error, CUresult result, const char *call);
gboolean memres_cuda_get_device_count (gint *count, GError **error);
gboolean memres_cuda_check_device (gint device, GError **error);
gboolean memres_cuda_get_primary_context (gint device, CUcontext *context, GError **error);
gboolean memres_cuda_ensure_context (gint device, GError **error);
gboolean memres_cuda_get_device_uuid (gint device, guint8 uuid[16], GError **error);
gboolean memres_cuda_find_device_by_uuid (const guint8 uuid[16], gint *device, GError **error);
gboolean memres_cuda_check_stream_not_capturing (MemresStream stream, GError **error);

G_END_DECLS
