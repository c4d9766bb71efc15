/* memres - CUDA memory resources
 * memres-allocator-private.h: what memres-allocator.c gives the other files of the library (not
 * installed, not exported: the version script keeps memres_torch_*, memres_cupy_* and
 * memres_allocator_* only). */
#pragma once

#include "memres-allocator.h"

G_BEGIN_DECLS

/* memres_torch_alloc()'s allocation: NULL with @error set on failure; a @size of 0 gives NULL
 * without an error. */
void *_memres_allocator_torch_alloc (ssize_t size, int device, void *stream, GError **error);

/* A ctypes entry point's result, for callers that get no GError: 0 when @ok; otherwise @error's
 * code + 1 when it is of @domain, else -1, with its message kept in @last_error (per thread, read
 * back by the module's *_last_error()) and @error freed. */
int _memres_allocator_result (gboolean ok, GError *error, GQuark domain, GPrivate *last_error);

G_END_DECLS
