/* memres - CUDA memory resources
 * pinned-private.h: the instance data of the pinned kind. Internal to the pinned plugin. */
#pragma once

#include "pinned-config.h"
#include "pinned-legacy.h"
#include "pool.h"

G_BEGIN_DECLS

typedef struct
{
  PinnedMode mode;
  gint device;
  gboolean ipc;        /* pool mode: the pool is shareable */
  gboolean imported;   /* pool mode: the pool was imported from another process */
  PinnedLegacy legacy; /* legacy mode */
  MemresPool pool;     /* pool mode */
} Pinned;

/* pinned-ipc.c: the IPC slots. */
gboolean pinned_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error);
gboolean pinned_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error);
gboolean pinned_export_buffer (MemresResource *mr, const MemresAllocation *alloc,
                               MemresBufferExport *out, GError **error);
gboolean pinned_import_buffer (MemresResource *mr, const MemresBufferExport *in,
                               MemresStream stream, MemresAllocation *alloc, GError **error);

G_END_DECLS
