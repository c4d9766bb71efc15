/* memres - CUDA memory resources
 * memres-nccl.h: memres memory registered with NCCL, which memres opens at run time (dlopen of
 * libnccl.so.2; no build dependency): plain registration that follows a resource's segments
 * (ncclCommRegister / ncclCommDeregister), and windows, the collective registration every rank
 * makes (ncclCommWindowRegister / ncclCommWindowDeregister). Full documentation: the reference
 * (share/gtk-doc/html/memres), memres-nccl, and docs/distributed.md. All Since: 2.0. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-nccl
 * @title: NCCL registration
 * @short_description: memres memory registered with NCCL communicators
 * @section_id: memres-memres-nccl
 *
 * NCCL moves data faster from memory registered with a communicator. A #MemresNcclRegistrar
 * (memres_nccl_registrar_new()) registers every segment of a resource (memres-segments) with one
 * communicator and follows it as segments are mapped and unmapped, so that every buffer of the
 * resource is registered however many there are; a #MemresNcclWindow
 * (memres_nccl_window_register()) is the collective registration of one buffer that every rank
 * makes. memres opens NCCL at run time (`libnccl.so.2`): memres_nccl_is_available() says whether
 * it can, and memres needs no NCCL to build.
 *
 * |[<!-- language="C" -->
 * MemresNcclRegistrar *reg = memres_nccl_registrar_new (mr, comm, &error);
 * // ... collectives on buffers of mr ...
 * if (!memres_nccl_registrar_free (reg, &error))
 *   return FALSE;
 * ]|
 *
 * NCCL failures are in the %MEMRES_NCCL_ERROR domain. A registrar is thread-safe. See also
 * docs/distributed.md in the source tree.
 */

/**
 * MEMRES_NCCL_ERROR:
 *
 * Error domain of NCCL failures. The error code is the `ncclResult_t` value itself
 * (`ncclUnhandledCudaError` 1, `ncclSystemError` 2, `ncclInternalError` 3,
 * `ncclInvalidArgument` 4, `ncclInvalidUsage` 5, `ncclRemoteError` 6, `ncclInProgress` 7); the
 * message names the failing NCCL call, the range, ncclGetErrorString() and, where NCCL has one,
 * ncclGetLastError(). NCCL that cannot be loaded is not this domain but
 * %MEMRES_ERROR_NOT_SUPPORTED.
 *
 * Since: 2.0
 */
#define MEMRES_NCCL_ERROR (memres_nccl_error_quark ())

/**
 * MEMRES_NCCL_WINDOW_SYMMETRIC:
 *
 * The flag of memres_nccl_window_register() for a symmetric window (NCCL's
 * `NCCL_WIN_COLL_SYMMETRIC`): the buffer is at the same offset of a window of the same size on
 * every rank, which lets NCCL use its symmetric kernels.
 *
 * Since: 2.0
 */
#define MEMRES_NCCL_WINDOW_SYMMETRIC 0x01

/**
 * MemresNcclRegistrar:
 *
 * An opaque object: the registration of one resource's segments with one NCCL communicator
 * (memres_nccl_registrar_new()). Thread-safe.
 *
 * Since: 2.0
 */
typedef struct _MemresNcclRegistrar MemresNcclRegistrar;

/**
 * MemresNcclWindow:
 *
 * An opaque object: one NCCL window over a buffer (memres_nccl_window_register()).
 *
 * Since: 2.0
 */
typedef struct _MemresNcclWindow MemresNcclWindow;

typedef struct _MemresNcclCounts MemresNcclCounts;

/**
 * MemresNcclCounts:
 * @registered: segments registered now (each one ncclCommRegister handle)
 * @registered_bytes: their bytes
 * @registrations: ncclCommRegister calls that succeeded, in total
 * @deregistrations: ncclCommDeregister calls that succeeded, in total
 * @failures: NCCL calls that failed, in total (the first one's error:
 * memres_nccl_registrar_check())
 *
 * A registrar's counts (memres_nccl_registrar_get_counts()). @registered equals the segments
 * of the resource, not its buffers: one registration per segment, however many tensors it
 * holds. Frozen layout (part of the ABI).
 *
 * Since: 2.0
 */
struct _MemresNcclCounts
{
  guint64 registered;
  guint64 registered_bytes;
  guint64 registrations;
  guint64 deregistrations;
  guint64 failures;
};

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-nccl. */
GQuark memres_nccl_error_quark (void);
gboolean memres_nccl_is_available (GError **error);
MemresNcclRegistrar *memres_nccl_registrar_new (MemresResource *mr, gpointer comm, GError **error);
void memres_nccl_registrar_get_counts (MemresNcclRegistrar *reg, MemresNcclCounts *counts);
gboolean memres_nccl_registrar_check (MemresNcclRegistrar *reg, GError **error);
gboolean memres_nccl_registrar_free (MemresNcclRegistrar *reg, GError **error);
MemresNcclWindow *memres_nccl_window_register (MemresBuffer *buf, gpointer comm, guint flags,
                                               GError **error);
gpointer memres_nccl_window_get_handle (MemresNcclWindow *win);
gboolean memres_nccl_window_deregister (MemresNcclWindow *win, GError **error);

G_END_DECLS
