/* memres - CUDA memory resources
 * memres-cuda.h: the table of CUDA driver entry points the core hands to plugins.
 * Part of the plugin SDK; included by memres-plugin.h.
 *
 * Plugins never link libcuda and never dlopen it: the core opens the driver once (libcuda.so.1,
 * or the file named by the environment variable MEMRES_CUDA_DRIVER, which tests point at
 * tests/fakecuda/libfakecuda.so) and hands every plugin the same const table:
 *
 *   const MemresCudaDriver *drv = memres_cuda_get_driver (error);
 *   gboolean pushed;
 *   CUresult r;
 *
 *   if (drv == NULL || !memres_cuda_push_context (device, &pushed, error))
 *     return FALSE;                      (NO_DRIVER, NO_DEVICE, ...: already set)
 *   r = drv->cuMemAlloc (&ptr, size);    (acts on the current context: the pushed one)
 *   memres_cuda_pop_context (pushed);
 *   if (r != CUDA_SUCCESS)               (CUDA_ERROR_OUT_OF_MEMORY: MEMRES_ERROR_OUT_OF_MEMORY)
 *     return memres_cuda_set_error (error, r, "cuMemAlloc");
 *
 * Do not define CUDA_API_PER_THREAD_DEFAULT_STREAM (or __CUDA_API_VERSION_INTERNAL) when
 * compiling a plugin: cuda.h would rename the stream entry points to their _ptsz/_ptds
 * variants, but the table holds the legacy-stream entry points the core resolved. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <cuda.h>
#include <memres/memres-types.h>
#include <glib.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-cuda
 * @title: CUDA driver
 * @short_description: the table of CUDA driver entry points, and helpers for kinds
 * @section_id: memres-memres-cuda
 *
 * Part of the plugin SDK, included by `<memres/memres-plugin.h>`. Plugins never link `libcuda`
 * and never open it: the core opens the driver once (`libcuda.so.1`, or the file the environment
 * variable `MEMRES_CUDA_DRIVER` names) and hands every plugin the same constant
 * #MemresCudaDriver (memres_cuda_get_driver()), whose entry points it resolved at
 * %MEMRES_CUDA_VERSION. The helpers do the common mechanics of kinds: the error of a failed
 * driver call (memres_cuda_set_error(), which reports `CUDA_ERROR_OUT_OF_MEMORY` as
 * %MEMRES_ERROR_OUT_OF_MEMORY), the primary context made current around calls that act on the
 * current context (memres_cuda_push_context()), device checks and UUIDs, stream synchronization.
 *
 * |[<!-- language="C" -->
 * const MemresCudaDriver *drv = memres_cuda_get_driver (error);
 * gboolean pushed;
 * CUresult r;
 *
 * if (drv == NULL || !memres_cuda_push_context (device, &pushed, error))
 *   return FALSE;
 * r = drv->cuMemAlloc (&ptr, size);
 * memres_cuda_pop_context (pushed);
 * if (r != CUDA_SUCCESS)
 *   return memres_cuda_set_error (error, r, "cuMemAlloc");
 * ]|
 *
 * The table is valid for the life of the process and every function here is thread-safe. Do
 * not define `CUDA_API_PER_THREAD_DEFAULT_STREAM` when compiling a plugin: the table holds the
 * legacy-stream entry points.
 */

/**
 * MEMRES_CUDA_FOREACH_ENTRY:
 * @X: a macro taking one driver entry point name
 *
 * Every driver entry point the core resolves with cuGetProcAddress() at %MEMRES_CUDA_VERSION
 * (the CUDA version the core was built for), in the order of the #MemresCudaDriver fields.
 * Entries are only appended, in a new ABI minor (the table is part of the plugin ABI). An entry
 * point the driver does not have is %NULL in the table: check before calling anything outside
 * %MEMRES_CUDA_FOREACH_REQUIRED_ENTRY, and fail with %MEMRES_ERROR_NOT_SUPPORTED. The core
 * requires the ones in %MEMRES_CUDA_FOREACH_REQUIRED_ENTRY and refuses a driver without them
 * (%MEMRES_ERROR_NO_DRIVER).
 *
 * A plugin that needs an entry point not listed here cannot resolve it itself: ask for it to be
 * appended (next ABI minor).
 *
 * The table of ABI 2.0 is the one of the last ABI 1 minor, whose history it keeps: ABI 1.1
 * appended cuStreamGetCtx (transfers on an explicit stream run in its context), ABI 1.2 the
 * graph entry points: cuGraphInstantiateWithFlags, cuGraphLaunch,
 * cuGraphExecDestroy, cuDeviceGraphMemTrim, cuDeviceGetGraphMemAttribute and
 * cuDeviceSetGraphMemAttribute (the `graph` kind, and tests that capture and launch graphs);
 * then the managed-memory entry points cuMemAllocManaged, cuMemAdvise, cuMemPrefetchAsync,
 * cuMemRangeGetAttribute, cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync and
 * cuMemDiscardAndPrefetchBatchAsync (the `managed` kind). cuda.h (CUDA 13) names the
 * CUmemLocation forms of cuMemAdvise and cuMemPrefetchAsync (their `_v2`), and
 * cuGetProcAddress() at CUDA 13.0 returns exactly those (introduced in CUDA 12.2); the three
 * batch entry points exist from CUDA 13.0 and are %NULL with older drivers. ABI 2.0 appended
 * cuEventQuery (whether the work before an event is done, without waiting: the `arena` kind's
 * old addresses of lent memory).
 *
 * Since: 1.0
 */
#define MEMRES_CUDA_FOREACH_ENTRY(X)                                                               \
  X (cuInit)                                                                                       \
  X (cuDriverGetVersion)                                                                           \
  X (cuGetErrorName)                                                                               \
  X (cuGetErrorString)                                                                             \
  X (cuDeviceGet)                                                                                  \
  X (cuDeviceGetCount)                                                                             \
  X (cuDeviceGetName)                                                                              \
  X (cuDeviceGetUuid)                                                                              \
  X (cuDeviceGetAttribute)                                                                         \
  X (cuDeviceTotalMem)                                                                             \
  X (cuDeviceCanAccessPeer)                                                                        \
  X (cuDevicePrimaryCtxRetain)                                                                     \
  X (cuDevicePrimaryCtxRelease)                                                                    \
  X (cuCtxGetCurrent)                                                                              \
  X (cuCtxSetCurrent)                                                                              \
  X (cuCtxPushCurrent)                                                                             \
  X (cuCtxPopCurrent)                                                                              \
  X (cuCtxGetDevice)                                                                               \
  X (cuCtxSynchronize)                                                                             \
  X (cuStreamCreate)                                                                               \
  X (cuStreamDestroy)                                                                              \
  X (cuStreamSynchronize)                                                                          \
  X (cuStreamQuery)                                                                                \
  X (cuStreamWaitEvent)                                                                            \
  X (cuStreamIsCapturing)                                                                          \
  X (cuStreamBeginCapture)                                                                         \
  X (cuStreamEndCapture)                                                                           \
  X (cuGraphDestroy)                                                                               \
  X (cuEventCreate)                                                                                \
  X (cuEventRecord)                                                                                \
  X (cuEventSynchronize)                                                                           \
  X (cuEventElapsedTime)                                                                           \
  X (cuEventDestroy)                                                                               \
  X (cuMemGetInfo)                                                                                 \
  X (cuMemAlloc)                                                                                   \
  X (cuMemFree)                                                                                    \
  X (cuMemHostAlloc)                                                                               \
  X (cuMemFreeHost)                                                                                \
  X (cuMemHostGetDevicePointer)                                                                    \
  X (cuMemcpy)                                                                                     \
  X (cuMemcpyAsync)                                                                                \
  X (cuMemcpyHtoDAsync)                                                                            \
  X (cuMemcpyDtoHAsync)                                                                            \
  X (cuMemsetD8Async)                                                                              \
  X (cuMemsetD16Async)                                                                             \
  X (cuMemsetD32Async)                                                                             \
  X (cuPointerGetAttribute)                                                                        \
  X (cuPointerGetAttributes)                                                                       \
  X (cuDeviceGetDefaultMemPool)                                                                    \
  X (cuDeviceGetMemPool)                                                                           \
  X (cuMemGetMemPool)                                                                              \
  X (cuMemPoolCreate)                                                                              \
  X (cuMemPoolDestroy)                                                                             \
  X (cuMemPoolGetAttribute)                                                                        \
  X (cuMemPoolSetAttribute)                                                                        \
  X (cuMemPoolTrimTo)                                                                              \
  X (cuMemPoolSetAccess)                                                                           \
  X (cuMemPoolGetAccess)                                                                           \
  X (cuMemAllocFromPoolAsync)                                                                      \
  X (cuMemAllocAsync)                                                                              \
  X (cuMemFreeAsync)                                                                               \
  X (cuMemPoolExportToShareableHandle)                                                             \
  X (cuMemPoolImportFromShareableHandle)                                                           \
  X (cuMemPoolExportPointer)                                                                       \
  X (cuMemPoolImportPointer)                                                                       \
  X (cuMemGetAllocationGranularity)                                                                \
  X (cuMemCreate)                                                                                  \
  X (cuMemRelease)                                                                                 \
  X (cuMemAddressReserve)                                                                          \
  X (cuMemAddressFree)                                                                             \
  X (cuMemMap)                                                                                     \
  X (cuMemUnmap)                                                                                   \
  X (cuMemSetAccess)                                                                               \
  X (cuMemGetAccess)                                                                               \
  X (cuMemExportToShareableHandle)                                                                 \
  X (cuMemImportFromShareableHandle)                                                               \
  X (cuMemRetainAllocationHandle)                                                                  \
  X (cuMemGetAllocationPropertiesFromHandle)                                                       \
  X (cuStreamGetCtx)                                                                               \
  X (cuGraphInstantiateWithFlags)                                                                  \
  X (cuGraphLaunch)                                                                                \
  X (cuGraphExecDestroy)                                                                           \
  X (cuDeviceGraphMemTrim)                                                                         \
  X (cuDeviceGetGraphMemAttribute)                                                                 \
  X (cuDeviceSetGraphMemAttribute)                                                                 \
  X (cuMemAllocManaged)                                                                            \
  X (cuMemAdvise)                                                                                  \
  X (cuMemPrefetchAsync)                                                                           \
  X (cuMemRangeGetAttribute)                                                                       \
  X (cuMemPrefetchBatchAsync)                                                                      \
  X (cuMemDiscardBatchAsync)                                                                       \
  X (cuMemDiscardAndPrefetchBatchAsync)                                                            \
  X (cuEventQuery)

/**
 * MEMRES_CUDA_FOREACH_REQUIRED_ENTRY:
 * @X: a macro taking one driver entry point name
 *
 * The entry points without which the core refuses a driver: these are never %NULL in a table
 * that memres_cuda_get_driver() returned.
 *
 * Since: 1.0
 */
#define MEMRES_CUDA_FOREACH_REQUIRED_ENTRY(X)                                                      \
  X (cuInit)                                                                                       \
  X (cuDriverGetVersion)                                                                           \
  X (cuGetErrorName)                                                                               \
  X (cuGetErrorString)                                                                             \
  X (cuDeviceGet)                                                                                  \
  X (cuDeviceGetCount)                                                                             \
  X (cuDeviceGetAttribute)                                                                         \
  X (cuDevicePrimaryCtxRetain)                                                                     \
  X (cuCtxGetCurrent)                                                                              \
  X (cuCtxSetCurrent)

#ifndef __GTK_DOC_IGNORE__
#define MEMRES_CUDA_DECLARE_ENTRY_(name) __typeof__ (name) *name;
#endif

typedef struct _MemresCudaDriver MemresCudaDriver;

/**
 * MemresCudaDriver:
 * @struct_size: sizeof (MemresCudaDriver) in the core's headers: an entry lies inside the table
 *   only when its offset is below this (always true for a plugin the loader accepted, whose
 *   ABI minor is at most the core's)
 * @driver_version: what cuDriverGetVersion() reported (for example 13000 for CUDA 13.0)
 * @path: the file the driver was loaded from (libcuda.so.1, or MEMRES_CUDA_DRIVER)
 *
 * The driver's entry points, one function pointer per name in %MEMRES_CUDA_FOREACH_ENTRY,
 * after the three fields above, each of the type `cuda.h` declares for that name. `cuda.h`
 * maps names to their current versions (`cuMemAlloc` is `cuMemAlloc_v2`), and so does the
 * table: `drv->cuMemAlloc (&ptr, size)` calls the entry point a direct call would.
 *
 * Obtained with memres_cuda_get_driver(); const, valid for the life of the process, safe to use
 * from any thread. The entry points behave as the driver documents them (`cuda.h`): in
 * particular they act on the calling thread's current context, which memres_cuda_ensure_context()
 * sets. Part of the plugin ABI: fields are only appended.
 *
 * Since: 1.0
 */
struct _MemresCudaDriver
{
  guint32 struct_size;
  gint driver_version;
  const char *path;
#ifndef __GTK_DOC_IGNORE__
  MEMRES_CUDA_FOREACH_ENTRY (MEMRES_CUDA_DECLARE_ENTRY_)
#endif
};

/* Driver helpers. Full documentation: the reference (share/gtk-doc/html/memres), memres-cuda;
 * in short (all thread-safe; Since: 1.0 unless marked otherwise):
 *
 * memres_cuda_get_driver(): the table (transfer none), loading the driver and calling cuInit(0)
 *   on first use; %NULL with %MEMRES_ERROR_NO_DRIVER when no usable driver exists (no
 *   libcuda, a required entry point missing, cuInit failed). Never crashes without a GPU.
 * memres_cuda_set_error(): sets @error from a failed driver call, with the message
 *   "CALL: CUDA_ERROR_NAME: description" (cuGetErrorName, cuGetErrorString): in %MEMRES_CUDA_ERROR
 *   with code @result, except `CUDA_ERROR_OUT_OF_MEMORY`, which is always %MEMRES_ERROR /
 *   %MEMRES_ERROR_OUT_OF_MEMORY (the out-of-memory rule: whichever kind or driver call ran out,
 *   callers match one code, as the kinds report their own size limits; since 1.2). Returns
 *   %FALSE so that a slot can `return memres_cuda_set_error (error, r, "cuMemFree");`. Every
 *   driver failure a kind reports goes through it: never g_set_error() in %MEMRES_CUDA_ERROR.
 * memres_cuda_get_device_count(): the number of devices (cuDeviceGetCount at load; 0 when
 *   cuInit said CUDA_ERROR_NO_DEVICE); errors as memres_cuda_get_driver().
 * memres_cuda_check_device(): %TRUE when @device is an existing ordinal; otherwise
 *   %MEMRES_ERROR_NO_DEVICE (or %MEMRES_ERROR_NO_DRIVER).
 * memres_cuda_get_primary_context(): the device's primary context (retained once per process
 *   and device by the core, never released: do not release it).
 * memres_cuda_ensure_context(): makes @device's primary context current on the calling thread
 *   when no context is current (a context the application made current, maybe of another
 *   device, is left alone). Enough before calls that name their device, pool or pointer; for
 *   calls that act on the current context, push the primary context instead.
 * memres_cuda_get_device_uuid(), memres_cuda_find_device_by_uuid(): between ordinals and the
 *   16-byte UUIDs used in IPC handles and descriptors; a UUID no local device has gives
 *   %MEMRES_ERROR_WRONG_DEVICE.
 * memres_cuda_check_stream_not_capturing(): %MEMRES_ERROR_NOT_SUPPORTED when @stream is being
 *   captured into a graph (cuStreamIsCapturing), for kinds that cannot allocate in a graph; the
 *   message points at the `graph` kind, which can.
 * memres_cuda_warn_release_failure() (Since: 1.2): logs a release or rollback failure nobody
 *   can be told about with g_warning(), except `CUDA_ERROR_DEINITIALIZED` (the driver shut
 *   down at process exit), which is silent (g_debug()); every such warning goes through it.
 *
 * The common mechanics of kinds, one copy each in libmemres (Since: 1.2):
 *
 * memres_cuda_push_context(), memres_cuda_pop_context(): @device's primary context made
 *   current around calls that act on "the current context" (cuMemAlloc, cuMemHostAlloc,
 *   cuMemAllocManaged, cuCtxSynchronize, event creation, the legacy stream): pushed unless it
 *   is current already; the pop restores what the application had current.
 * memres_cuda_push_stream_context() (Since: 2.0): the context work queued on a stream runs in
 *   (an explicit stream's own; a default stream's: @device's primary context unless a context
 *   of @device is current) made current around calls that queue work on it, popped with
 *   memres_cuda_pop_context().
 * memres_cuda_stream_synchronize(): waits for a stream in its own context (a default stream:
 *   @device's primary context unless a context of @device is current). The core calls it
 *   before the deallocate slot of a kind whose memory is not stream-ordered.
 * memres_cuda_device_synchronize(): waits for all work of @device's primary context
 *   (cuCtxSynchronize).
 * memres_cuda_get_device_attribute(): cuDeviceGet + cuDeviceGetAttribute, the error set.
 * memres_cuda_check_peer_access(): %MEMRES_ERROR_NOT_SUPPORTED unless cuDeviceCanAccessPeer says
 *   @peer can access @device's memory (for set_access slots and peer options). */
const MemresCudaDriver *memres_cuda_get_driver (GError **error);
gboolean memres_cuda_set_error (GError **error, CUresult result, const char *call);
gboolean memres_cuda_get_device_count (gint *count, GError **error);
gboolean memres_cuda_check_device (gint device, GError **error);
gboolean memres_cuda_get_primary_context (gint device, CUcontext *context, GError **error);
gboolean memres_cuda_ensure_context (gint device, GError **error);
gboolean memres_cuda_get_device_uuid (gint device, guint8 uuid[16], GError **error);
gboolean memres_cuda_find_device_by_uuid (const guint8 uuid[16], gint *device, GError **error);
gboolean memres_cuda_check_stream_not_capturing (MemresStream stream, GError **error);
void memres_cuda_warn_release_failure (const GError *error, const char *format, ...)
    G_GNUC_PRINTF (2, 3);
gboolean memres_cuda_push_context (gint device, gboolean *pushed, GError **error);
void memres_cuda_pop_context (gboolean pushed);
gboolean memres_cuda_push_stream_context (gint device, MemresStream stream, gboolean *pushed,
                                          GError **error);
gboolean memres_cuda_stream_synchronize (gint device, MemresStream stream, GError **error);
gboolean memres_cuda_device_synchronize (gint device, GError **error);
gboolean memres_cuda_get_device_attribute (gint device, CUdevice_attribute attribute, gint *value,
                                           GError **error);
gboolean memres_cuda_check_peer_access (gint device, gint peer, GError **error);

G_END_DECLS
