/* fakecuda-control.h: the test-only control interface of libfakecuda.so, the fault-injecting
 * test double of the CUDA driver. Tests reach these functions with dlsym() on the library named
 * by MEMRES_CUDA_DRIVER (tests/testutil.h wraps them); memres itself never calls them.
 *
 * Environment (read at cuInit):
 *   FAKECUDA_DEVICES=N          number of fake devices (default 1, at most 8)
 *   FAKECUDA_DEVICE_MEMORY=SIZE bytes of memory per device (default 4 GiB; backs allocations
 *                               lazily, so large values are fine)
 *   FAKECUDA_FAIL=ENTRY:N:CODE[,ENTRY:N:CODE...]  the Nth call (1-based, counted from cuInit) of
 *                               ENTRY returns CODE (a number or a CUDA_ERROR_* name)
 *   FAKECUDA_NO_MEMPOOLS=1, FAKECUDA_NO_HOST_POOLS=1, FAKECUDA_NO_VMM=1, FAKECUDA_NO_IPC=1,
 *   FAKECUDA_NO_PEER=1          device attributes reported as 0
 *   FAKECUDA_GRANULARITY=SIZE, FAKECUDA_RECOMMENDED_GRANULARITY=SIZE
 *                               VMM granularities (default 2 MiB both; powers of two)
 *   FAKECUDA_HOST_MEMORY=SIZE   bytes of pinned/host-pool/host-VMM memory (default 64 GiB)
 *   FAKECUDA_ASYNC=1            start in the asynchronous stream mode (fakecuda_set_async)
 * FAKECUDA_DEVICES=0 makes cuInit return CUDA_ERROR_NO_DEVICE, as the real driver does.
 * See README.md in this directory for what is simulated and how it differs from the driver.
 */
#pragma once

#include <cuda.h>

#ifdef __cplusplus
extern "C"
{
#endif

  typedef struct
  {
    int pools;            /* live pools created with cuMemPoolCreate or imported */
    int pool_allocations; /* live allocations from pools (cuMemAllocFromPoolAsync/cuMemAllocAsync,
                             imported pointers) */
    int allocations;      /* live cuMemAlloc and cuMemHostAlloc allocations */
    int reservations;     /* live cuMemAddressReserve ranges */
    int mappings;         /* live cuMemMap mappings */
    int physical_handles; /* live cuMemCreate / imported handles, counting retains */
    int exported_fds;     /* fds the fake created for shareable handles and still open */
    int streams;          /* live streams */
    int events;           /* live events */
  } FakeCudaCounts;

  void fakecuda_get_counts (FakeCudaCounts *counts);
  /* Makes the @nth call (1-based, counted from now) of @entry (a base name as cuGetProcAddress
   * takes it, or "cuGetProcAddress") return @result, once, without doing anything else; several
   * faults may be armed. @nth 0 disarms every fault of @entry. An unknown @entry aborts. */
  void fakecuda_fail_call (const char *entry, int nth, CUresult result);
  void fakecuda_reset_faults (void);
  /* Starts recording the names of the entry points called, in order (failed calls included). */
  void fakecuda_trace_begin (void);
  /* Returns the number of recorded calls; names[i] stay valid until the next trace_begin. */
  int fakecuda_trace_end (const char ***names);
  /* Overrides a device attribute (takes effect at once). */
  void fakecuda_set_attribute (int device, CUdevice_attribute attr, int value);
  /* Number of calls of @entry since the library was loaded (the same as since cuInit for every
   * entry point but cuGetProcAddress, cuDriverGetVersion and the error-name functions). */
  long fakecuda_call_count (const char *entry);
  /* Number of calls since the library was loaded that returned an error (anything but
   * CUDA_SUCCESS and CUDA_ERROR_NOT_READY; injected faults included). */
  long fakecuda_failed_call_count (void);
  /* Sets the VMM granularities cuMemGetAllocationGranularity reports and cuMemCreate/cuMemMap
   * enforce (bytes; powers of two, multiples of the page size, @recommended a multiple of
   * @minimum). Takes effect at once; use it before creating VMM memory. */
  void fakecuda_set_granularity (size_t minimum, size_t recommended);
  /* The asynchronous stream mode (off unless FAKECUDA_ASYNC is set): @on non-zero makes every
   * stream (and each device's legacy stream) queue its work to a worker thread of its own that
   * runs it in order (copies, fills, cuMemFreeAsync, event records and waits,
   * cuStreamWaitValue32/cuStreamWriteValue32, cuLaunchHostFunc), with the legacy stream's
   * implicit synchronization; 0 waits until every queue is empty, then runs work at once again.
   * See README.md ("Asynchronous mode"). */
  void fakecuda_set_async (int on);
  int fakecuda_get_async (void);
  /* Waits until every stream's queue is empty (asynchronous mode; at once otherwise): then the
   * counts include the frees that were queued. Hangs while a stream is held. */
  void fakecuda_wait_idle (void);

#ifdef __cplusplus
}
#endif
