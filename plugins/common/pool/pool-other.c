/* memres - CUDA memory resources
 * pool-other.c: the allocate and deallocate of an instance of a kind's other implementation
 * (pool_use_other(): dmr-sync.c, managed-none.c, pinned-legacy.c): the context its driver calls
 * need made current around them (#PoolContext), their failures reported the same way for every
 * kind. The calls themselves are the kind's (#PoolOther). Reached from the checked path of the
 * slots (pool-slots.c), which counts the bytes of live buffers. */
#include "pool-private.h"

/* Makes @pool's context current; *@pushed for memres_cuda_pop_context(). */
static gboolean
context_begin (const PoolRecord *pool, gboolean *pushed, GError **error)
{
  *pushed = FALSE;
  if (pool->other->context == POOL_CONTEXT_PRIMARY)
    return memres_cuda_push_context (pool->device, pushed, error);
  return memres_cuda_ensure_context (pool->device, error);
}

/* Not stream-ordered: the memory is usable at once, on every stream. Errors: those of
 * memres_cuda_push_context() or memres_cuda_ensure_context(); the kind's failing call's
 * through alloc_error_set() (%MEMRES_ERROR_OUT_OF_MEMORY, "cannot allocate N bytes", when
 * the driver has not enough memory; a %MEMRES_CUDA_ERROR otherwise). */
gboolean
pool_other_allocate (MemresResource *mr, PoolRecord *pool, gsize size, MemresAllocation *alloc,
                     GError **error)
{
  const char *call = pool->other->allocate_call;
  guint64 address = 0;
  gboolean pushed;
  CUresult r;

  if (!context_begin (pool, &pushed, error))
    return FALSE;
  r = pool->other->allocate (mr, size, &address, &call);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return alloc_error_set (error, r, call, size);
  alloc->address = address;
  alloc->size = size;
  return TRUE;
}

/* The core waited for the deallocation stream first (the memory is not stream-ordered), so
 * that no work queued there still uses the memory. When the free fails nothing is freed: the
 * core keeps the buffer open, to be closed again. `CUDA_ERROR_DEINITIALIZED` is success
 * (release.h). Errors: those of memres_cuda_push_context() or memres_cuda_ensure_context(); a
 * %MEMRES_CUDA_ERROR of the kind's free. */
gboolean
pool_other_deallocate (MemresResource *mr, PoolRecord *pool, MemresAllocation *alloc,
                       GError **error)
{
  GError *local = NULL;
  gboolean pushed;
  CUresult r;

  if (!context_begin (pool, &pushed, &local))
    return release_context_failed (local, error);
  r = pool->other->free (mr, alloc->address);
  memres_cuda_pop_context (pushed);
  return release_result (error, r, pool->other->free_call);
}
