/* memres - CUDA memory resources
 * pool-private.h: what the files of the shared pool code use of each other (pool.c,
 * pool-slots.c, pool-ipc.c); the kinds include pool.h only. */
#pragma once

#include "pool.h"
#include "../alloc-error.h"
#include "../release.h"

G_BEGIN_DECLS

/* The record at the start of a pool kind's private data. */
#define POOL_RECORD(mr) ((PoolRecord *) memres_resource_get_private (mr))

/* pool.c */
void pool_init_for_handle (PoolRecord *pool, const MemresCudaDriver *drv, CUmemoryPool handle,
                           gboolean owned, const CUmemLocation *location, gint device,
                           CUmemAllocationHandleType handle_type);
gboolean pool_get_attribute (PoolRecord *pool, CUmemPool_attribute attr, void *value,
                             GError **error);
gboolean pool_set_attribute (PoolRecord *pool, CUmemPool_attribute attr, void *value,
                             GError **error);

/* pool-slots.c: makes sure a context is current on the calling thread before a driver call that
 * needs one (memres_cuda_ensure_context() for @pool's device the first time on a thread;
 * nothing after that). */
gboolean pool_ensure_context (PoolRecord *pool, GError **error);
/* The pool-only slots of an instance that has none (pool_use_other()): sets @error to
 * %MEMRES_ERROR_NOT_SUPPORTED with @pool's no_pool message; returns FALSE. */
gboolean pool_refuse_without_pool (const PoolRecord *pool, GError **error);

/* pool-other.c: the allocate and deallocate slots of an instance of the kind's other
 * implementation (pool_use_other()), @pool->other's driver calls in its context. Allocate fills
 * @alloc (@size bytes); deallocate frees it, `CUDA_ERROR_DEINITIALIZED` taken as success. */
gboolean pool_other_allocate (MemresResource *mr, PoolRecord *pool, gsize size,
                              MemresAllocation *alloc, GError **error);
gboolean pool_other_deallocate (MemresResource *mr, PoolRecord *pool, MemresAllocation *alloc,
                                GError **error);

G_END_DECLS
