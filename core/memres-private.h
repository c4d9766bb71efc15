/* memres - CUDA memory resources
 * memres-private.h: the core's internal header, an umbrella over one header per part (as
 * core/ipc/ipc-private.h is the IPC layer's): hot-path.h (what an allocate/close pair runs: the
 * resource's first line, the stripes, the inline slot calls), counting.h (the high-water marks,
 * the counted layers' counts and their inline slot calls), resources.h (resource.c's and
 * resource-slots.c's other calls), buffers.h, fork.h, loader.h (plugins and kinds), spec.h
 * (specs, options, stacks, config), ipc/ipc.h (what the core sees of the IPC layer). Never
 * installed; the structs here are not part of any ABI. Internal functions carry a leading
 * underscore so that the version script (memres_* only) keeps them out of libmemres's exports. Only
 * the core's own files include these headers (core/, core/ipc/, and the internal tests and fuzzers
 * that reach into the core): they are compiled with MEMRES_CORE_COMPILATION. The plugins, the kinds
 * embedded in libmemres among them, are written against the installed headers and the SDK alone
 * (tests/check-plugin-wall.sh). */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "memres-private.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <string.h>

#include <gmodule.h>
#include <memres/memres-plugin.h>

#include "hot-path.h"
#include "counting.h"
#include "tags.h"
#include "sleep.h"
#include "resources.h"
#include "buffers.h"
#include "fork.h"
#include "loader.h"
#include "spec.h"
#include "ipc/ipc.h"

/* memres_printable() of one piece of user input: what error messages quote. */
#define _memres_show_input(text) memres_printable ((text), MEMRES_INPUT_SHOWN_MAX)

G_BEGIN_DECLS

/* cuda-driver.c: how the message of the driver's MEMRES_ERROR_NO_DRIVER starts when no driver
 * library could be opened at all (other messages: a library that is not a driver, or a driver
 * that failed to initialize); memres_error_is_driver_absent() (errors.c) tells them apart. */
#define MEMRES_NO_DRIVER_PREFIX "No CUDA driver could be loaded from "

/* cuda-driver.c: the driver table when memres_cuda_get_driver() has loaded it already (and this
 * process may use it), else NULL: nothing is loaded or initialized by this call, for a check
 * that wants the driver's word only where the driver is in use (buffer-wrap.c). */
const MemresCudaDriver *_memres_cuda_driver_if_loaded (void);
/* cuda-driver.c: whether @stream is capturing a graph (cuStreamIsCapturing(), in the current
 * context: active, or invalidated and not yet ended); the legacy stream, which cannot capture,
 * is not asked, and a failing query (or no driver) says no. The query of
 * memres_cuda_check_stream_not_capturing(). */
gboolean _memres_stream_is_capturing (MemresStream stream);

/* Whether @stream is a default stream: the legacy one (%NULL, %MEMRES_STREAM_LEGACY) or the
 * per-thread one (`CU_STREAM_PER_THREAD`), the current context's, no handle of the caller's. */
static inline gboolean
_memres_stream_is_default (MemresStream stream)
{
  return stream == NULL || stream == MEMRES_STREAM_LEGACY
         || stream == (MemresStream) CU_STREAM_PER_THREAD;
}

G_END_DECLS
