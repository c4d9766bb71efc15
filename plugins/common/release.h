/* memres - CUDA memory resources
 * release.h: the rule of the shipped kinds' frees at process exit. Once the driver has shut down
 * (`CUDA_ERROR_DEINITIALIZED`, which every driver call then returns), the memory went with it: a
 * free that meets that code, from its own driver call or from making a context current for it,
 * has nothing left to do and succeeds (the core's wait before the free takes it the same way,
 * see #MemresResourceOps.deallocate). Header-only, as owner-fence.h: the pool kinds' slots
 * (pool-slots.c, pool-other.c) and graph's free use it. */
#pragma once

#include <memres/memres-plugin.h>

/* The answer of a free's driver call @call: TRUE for `CUDA_SUCCESS` and
 * `CUDA_ERROR_DEINITIALIZED`; otherwise FALSE with @error set by memres_cuda_set_error(). */
static inline gboolean
release_result (GError **error, CUresult result, const char *call)
{
  if (G_LIKELY (result == CUDA_SUCCESS) || result == CUDA_ERROR_DEINITIALIZED)
    return TRUE;
  return memres_cuda_set_error (error, result, call);
}

/* A free whose context could not be made current (@local, taken): TRUE when that was the
 * driver's `CUDA_ERROR_DEINITIALIZED`; otherwise FALSE with @local moved into @error. */
static inline gboolean
release_context_failed (GError *local, GError **error)
{
  if (g_error_matches (local, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED))
    {
      g_error_free (local);
      return TRUE;
    }
  g_propagate_error (error, local);
  return FALSE;
}
