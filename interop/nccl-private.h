/* memres - CUDA memory resources
 * nccl-private.h: what interop/nccl.c takes from interop/nccl-library.c: NCCL's entry points,
 * opened with dlopen() once per process, and the errors of its calls. */
#pragma once

#include <memres/memres.h>

typedef int NcclResult; /* ncclResult_t: 0 is ncclSuccess */

typedef struct
{
  NcclResult (*CommRegister) (gpointer comm, gpointer buff, gsize size, gpointer *handle);
  NcclResult (*CommDeregister) (gpointer comm, gpointer handle);
  /* NULL before NCCL 2.27 */
  NcclResult (*CommWindowRegister) (gpointer comm, gpointer buff, gsize size, gpointer *win,
                                    int flags);
  NcclResult (*CommWindowDeregister) (gpointer comm, gpointer win);
  const char *(*GetErrorString) (NcclResult result);
  const char *(*GetLastError) (gpointer comm); /* may be NULL */
  int version;                                 /* ncclGetVersion(), 0 when unknown */
} NcclLibrary;

G_GNUC_INTERNAL const NcclLibrary *_memres_nccl_library (GError **error);
G_GNUC_INTERNAL void _memres_nccl_set_error (GError **error, const NcclLibrary *nccl, NcclResult r,
                                             gpointer comm, const char *call, gconstpointer base,
                                             gsize length);
