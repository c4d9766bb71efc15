/* memres - CUDA memory resources
 * cuda-entry-check.c: a compile-time check that every field of MemresCudaDriver has the type of
 * the entry point the driver returns for it. cuGetProcAddress() hands out the newest ABI of a
 * name up to the requested CUDA version, which is not always the one cuda.h declares under that
 * name: CUDA 13.0 changed cuCtxGetDevice and cuCtxSynchronize to take a context, keeping the
 * old declarations (calling the new entry through the old type crashed on the H200). The core
 * asks for those at version 12000 (see entry_version() in core/cuda-driver.c); each line below
 * pairs a field with the cudaTypedefs.h type of the version the driver gives for the version
 * requested. Regenerate the list when the toolkit or the table changes.
 *
 * It has no code: tests/meson.build compiles it into a static library of the default build, so
 * a wrong type fails the build. */
#include <memres/memres-plugin.h>

#include <cudaTypedefs.h>

#if CUDA_VERSION >= 13000
#define MEMRES_CHECK_ENTRY_(name, version)                                                         \
  _Static_assert(__builtin_types_compatible_p (__typeof__ (((MemresCudaDriver *) 0)->name),        \
                                               PFN_##name##_v##version),                           \
                 #name " in MemresCudaDriver must have the type of PFN_" #name "_v" #version);
#define MEMRES_CHECKED_ENTRIES_(X)                                                                 \
  X (cuInit, 2000)                                                                                 \
  X (cuDriverGetVersion, 2020)                                                                     \
  X (cuGetErrorName, 6000)                                                                         \
  X (cuGetErrorString, 6000)                                                                       \
  X (cuDeviceGet, 2000)                                                                            \
  X (cuDeviceGetCount, 2000)                                                                       \
  X (cuDeviceGetName, 2000)                                                                        \
  X (cuDeviceGetUuid, 11040)                                                                       \
  X (cuDeviceGetAttribute, 2000)                                                                   \
  X (cuDeviceTotalMem, 3020)                                                                       \
  X (cuDeviceCanAccessPeer, 4000)                                                                  \
  X (cuDevicePrimaryCtxRetain, 7000)                                                               \
  X (cuDevicePrimaryCtxRelease, 11000)                                                             \
  X (cuCtxGetCurrent, 4000)                                                                        \
  X (cuCtxSetCurrent, 4000)                                                                        \
  X (cuCtxPushCurrent, 4000)                                                                       \
  X (cuCtxPopCurrent, 4000)                                                                        \
  X (cuCtxGetDevice, 2000)                                                                         \
  X (cuCtxSynchronize, 2000)                                                                       \
  X (cuStreamCreate, 2000)                                                                         \
  X (cuStreamDestroy, 4000)                                                                        \
  X (cuStreamSynchronize, 2000)                                                                    \
  X (cuStreamQuery, 2000)                                                                          \
  X (cuStreamWaitEvent, 3020)                                                                      \
  X (cuStreamIsCapturing, 10000)                                                                   \
  X (cuStreamBeginCapture, 10010)                                                                  \
  X (cuStreamEndCapture, 10000)                                                                    \
  X (cuGraphDestroy, 10000)                                                                        \
  X (cuEventCreate, 2000)                                                                          \
  X (cuEventRecord, 2000)                                                                          \
  X (cuEventSynchronize, 2000)                                                                     \
  X (cuEventElapsedTime, 12080)                                                                    \
  X (cuEventDestroy, 4000)                                                                         \
  X (cuMemGetInfo, 3020)                                                                           \
  X (cuMemAlloc, 3020)                                                                             \
  X (cuMemFree, 3020)                                                                              \
  X (cuMemHostAlloc, 2020)                                                                         \
  X (cuMemFreeHost, 2000)                                                                          \
  X (cuMemHostGetDevicePointer, 3020)                                                              \
  X (cuMemcpy, 4000)                                                                               \
  X (cuMemcpyAsync, 4000)                                                                          \
  X (cuMemcpyHtoDAsync, 3020)                                                                      \
  X (cuMemcpyDtoHAsync, 3020)                                                                      \
  X (cuMemsetD8Async, 3020)                                                                        \
  X (cuMemsetD16Async, 3020)                                                                       \
  X (cuMemsetD32Async, 3020)                                                                       \
  X (cuPointerGetAttribute, 4000)                                                                  \
  X (cuPointerGetAttributes, 7000)                                                                 \
  X (cuDeviceGetDefaultMemPool, 11020)                                                             \
  X (cuDeviceGetMemPool, 11020)                                                                    \
  X (cuMemGetMemPool, 13000)                                                                       \
  X (cuMemPoolCreate, 11020)                                                                       \
  X (cuMemPoolDestroy, 11020)                                                                      \
  X (cuMemPoolGetAttribute, 11020)                                                                 \
  X (cuMemPoolSetAttribute, 11020)                                                                 \
  X (cuMemPoolTrimTo, 11020)                                                                       \
  X (cuMemPoolSetAccess, 11020)                                                                    \
  X (cuMemPoolGetAccess, 11020)                                                                    \
  X (cuMemAllocFromPoolAsync, 11020)                                                               \
  X (cuMemAllocAsync, 11020)                                                                       \
  X (cuMemFreeAsync, 11020)                                                                        \
  X (cuMemPoolExportToShareableHandle, 11020)                                                      \
  X (cuMemPoolImportFromShareableHandle, 11020)                                                    \
  X (cuMemPoolExportPointer, 11020)                                                                \
  X (cuMemPoolImportPointer, 11020)                                                                \
  X (cuMemGetAllocationGranularity, 10020)                                                         \
  X (cuMemCreate, 10020)                                                                           \
  X (cuMemRelease, 10020)                                                                          \
  X (cuMemAddressReserve, 10020)                                                                   \
  X (cuMemAddressFree, 10020)                                                                      \
  X (cuMemMap, 10020)                                                                              \
  X (cuMemUnmap, 10020)                                                                            \
  X (cuMemSetAccess, 10020)                                                                        \
  X (cuMemGetAccess, 10020)                                                                        \
  X (cuMemExportToShareableHandle, 10020)                                                          \
  X (cuMemImportFromShareableHandle, 10020)                                                        \
  X (cuMemRetainAllocationHandle, 11000)                                                           \
  X (cuMemGetAllocationPropertiesFromHandle, 10020)                                                \
  X (cuStreamGetCtx, 9020)                                                                         \
  X (cuGraphInstantiateWithFlags, 11040)                                                           \
  X (cuGraphLaunch, 10000)                                                                         \
  X (cuGraphExecDestroy, 10000)                                                                    \
  X (cuDeviceGraphMemTrim, 11040)                                                                  \
  X (cuDeviceGetGraphMemAttribute, 11040)                                                          \
  X (cuDeviceSetGraphMemAttribute, 11040)                                                          \
  X (cuMemAllocManaged, 6000)                                                                      \
  X (cuMemAdvise, 12020)                                                                           \
  X (cuMemPrefetchAsync, 12020)                                                                    \
  X (cuMemRangeGetAttribute, 8000)                                                                 \
  X (cuMemPrefetchBatchAsync, 13000)                                                               \
  X (cuMemDiscardBatchAsync, 13000)                                                                \
  X (cuMemDiscardAndPrefetchBatchAsync, 13000)                                                     \
  X (cuEventQuery, 2000)

MEMRES_CHECKED_ENTRIES_ (MEMRES_CHECK_ENTRY_)
#endif
