/* memres - CUDA memory resources
 * memres-allocator-private.h: what memres-allocator.c gives memres-allocator-torch.cc (not
 * installed, not exported: the version script keeps memres_torch_*, memres_cupy_* and
 * memres_allocator_* only). */
#pragma once

#include "memres-allocator.h"

G_BEGIN_DECLS

/* memres_torch_alloc()'s allocation: NULL with @error set on failure; a @size of 0 gives NULL
 * without an error. */
void *_memres_allocator_torch_alloc (ssize_t size, int device, void *stream, GError **error);

G_END_DECLS
