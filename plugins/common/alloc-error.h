/* memres - CUDA memory resources
 * alloc-error.h: the message of the shipped kinds' failed allocations. An allocation that the
 * memory cannot satisfy says the size it was asked for before the reason: "cannot allocate N
 * bytes: cuMemAllocAsync: CUDA_ERROR_OUT_OF_MEMORY: ...", the same words from every base kind
 * (the out-of-memory case of tests/test-conformance.c holds them to it). Header-only, as
 * release.h: the pool kinds' slots (pool-slots.c, pool-other.c), graph's and vmm's allocate use
 * it. */
#pragma once

#include <memres/memres-plugin.h>

/* Puts "cannot allocate @size bytes: " ("1 byte" for 1) before the message of @error (set). */
static inline void
alloc_error_prefix (GError **error, gsize size)
{
  g_prefix_error (error, "cannot allocate %" G_GSIZE_FORMAT " byte%s: ", size,
                  size == 1 ? "" : "s");
}

/* The error of an allocation of @size bytes whose driver call @call failed with @result:
 * memres_cuda_set_error() (which makes `CUDA_ERROR_OUT_OF_MEMORY` a
 * %MEMRES_ERROR_OUT_OF_MEMORY), an out-of-memory's message prefixed with the size
 * (alloc_error_prefix()). Returns FALSE. */
static inline gboolean
alloc_error_set (GError **error, CUresult result, const char *call, gsize size)
{
  memres_cuda_set_error (error, result, call);
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    alloc_error_prefix (error, size);
  return FALSE;
}
