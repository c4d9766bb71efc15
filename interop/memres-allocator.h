/* memres - CUDA memory resources
 * memres-allocator.h: libmemres-allocator, memres as the allocator of PyTorch
 * (torch.cuda.memory.CUDAPluggableAllocator) and CuPy (cupy.cuda.memory.CFunctionAllocator),
 * loaded by name from the shared library; no Python extension module. docs/interop.md tells how
 * to set it up. Streams are `CUstream` values declared as `void *`: the library does not need
 * the CUDA runtime. */
#pragma once

#include <sys/types.h>

#include <memres/memres.h>

G_BEGIN_DECLS

/**
 * MEMRES_ALLOCATOR_DEFAULT_SPEC:
 *
 * The resource of each device when neither `MEMRES_ALLOCATOR_RESOURCE_<N>` nor
 * `MEMRES_ALLOCATOR_RESOURCE` is set (set to the empty string counts as unset, as for every
 * `MEMRES_*` variable with a value: `MEMRES_ALLOCATOR_RESOURCE= python train.py` is the
 * default, as an empty `PYTORCH_CUDA_ALLOC_CONF` is torch's); `{device}` stands for the device
 * ordinal: the caching
 * adaptor (docs/cache.md) over the device's memory pool, as torch's and CuPy's own allocators
 * cache.
 */
#define MEMRES_ALLOCATOR_DEFAULT_SPEC "cache>dmr:device={device}"

/**
 * MEMRES_ALLOCATOR_MAX_DEVICES:
 *
 * Devices 0 to this minus one are served; an allocation for another device fails.
 */
#define MEMRES_ALLOCATOR_MAX_DEVICES 64

/* PyTorch: CUDAPluggableAllocator (alloc, free) and the optional hooks of its C++ API; torch
 * passes the sizes as size_t (the ssize_t of its documented example: the same register).
 * torch does not check the pointer alloc returns: built with a C++ compiler,
 * memres_torch_alloc() throws a std::runtime_error on failure (torch raises RuntimeError) and
 * memres_torch_alloc_throws() returns TRUE; built without one, it returns NULL and torch makes
 * a tensor at address 0 (never use that build with torch). Call it from C++ only. */
void *memres_torch_alloc (ssize_t size, int device, void *stream);
gboolean memres_torch_alloc_throws (void);
void memres_torch_free (void *ptr, ssize_t size, int device, void *stream);
/* torch.cuda.MemPool's alloc: NULL on failure, which torch's caching allocator checks there. */
void *memres_torch_pool_alloc (ssize_t size, int device, void *stream);
void memres_torch_record_stream (void *ptr, void *stream);
void memres_torch_empty_cache (void);

/* CuPy: CFunctionAllocator (param: NULL for the legacy default stream, or a CUstream). NULL on
 * failure, which CuPy does not check: wrap it (memres_interop.Allocator.cupy_allocator()). */
void *memres_cupy_malloc (void *param, size_t size, int device);
void memres_cupy_free (void *param, void *ptr, int device);

/* The resource behind a device and what is allocated through the library. */
MemresResource *memres_allocator_get_resource (int device);
guint64 memres_allocator_count_buffers (int device);
/* The snapshot of every device's resource, written to @path as one JSON document. */
gboolean memres_allocator_write_snapshot (const char *path, GError **error);

/* Tags (memres-tags.h) for ctypes callers (memres-allocator-tags.c): 0 on success, else the
 * MemresTagError code + 1, or -1 for another error; the message of the thread's last failure. */
int memres_allocator_tag_push (const char *tag);
int memres_allocator_tag_pop (const char *tag);
int memres_allocator_tag_set_stream_default (void *stream, const char *tag);
int memres_allocator_tag_set_device_default (int device, const char *tag);
int memres_allocator_tag_get_counts (int device, const char *tag, MemresTagCounts *counts);
const char *memres_allocator_tag_last_error (void);

/* Sleep and wake (memres-sleep.h) for ctypes callers (memres-allocator-sleep.c): 0 on success,
 * else the MemresSleepError code + 1, or -1 for another error; the message of the thread's last
 * failure. */
int memres_allocator_sleep (int device, const char *tag, int mode, const char *path, void *stream);
int memres_allocator_wake (int device, const char *tag, void *stream);
int memres_allocator_is_asleep (int device, const char *tag);
const char *memres_allocator_sleep_last_error (void);

G_END_DECLS
