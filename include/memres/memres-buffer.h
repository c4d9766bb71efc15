/* memres - CUDA memory resources
 * memres-buffer.h: buffers. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-buffer.
 *
 * Lifetime */
MemresBuffer *memres_buffer_ref (MemresBuffer *buf);
void memres_buffer_unref (MemresBuffer *buf);
gboolean memres_buffer_close (MemresBuffer *buf, MemresStream stream, GError **error);
gboolean memres_buffer_close_full (MemresBuffer *buf, MemresStream stream, MemresCloseFlags flags,
                                   GError **error);
gboolean memres_buffer_is_closed (MemresBuffer *buf);
gboolean memres_buffer_set_deallocation_stream (MemresBuffer *buf, MemresStream stream,
                                                GError **error);
MemresStream memres_buffer_get_deallocation_stream (MemresBuffer *buf);

/* Wrapping foreign memory */
MemresBuffer *memres_buffer_new_for_pointer (gpointer ptr, gsize size, gint device,
                                             MemresMemoryFlags flags, GDestroyNotify release,
                                             gpointer user_data, GError **error);

/* Properties (a closed buffer reports NULL / 0 / -1 / FALSE). The device of host memory is -1,
 * page-locked host memory included (pinned, host-located vmm, wrapped cuMemHostAlloc or
 * registered memory): one rule whoever allocated it. */
gpointer memres_buffer_get_pointer (MemresBuffer *buf);
guint64 memres_buffer_get_address (MemresBuffer *buf);
gsize memres_buffer_get_size (MemresBuffer *buf);
gint memres_buffer_get_device (MemresBuffer *buf);
MemresResource *memres_buffer_get_resource (MemresBuffer *buf);
MemresMemoryFlags memres_buffer_get_flags (MemresBuffer *buf);
gboolean memres_buffer_is_device_accessible (MemresBuffer *buf);
gboolean memres_buffer_is_host_accessible (MemresBuffer *buf);

/* Data movement, stream-ordered */
gboolean memres_buffer_copy_to (MemresBuffer *src, MemresBuffer *dst, MemresStream stream,
                                GError **error);
gboolean memres_buffer_copy_from (MemresBuffer *dst, MemresBuffer *src, MemresStream stream,
                                  GError **error);
gboolean memres_buffer_fill (MemresBuffer *buf, guint32 pattern, guint width, MemresStream stream,
                             GError **error);
gboolean memres_buffer_read (MemresBuffer *buf, gsize offset, gpointer dest, gsize n_bytes,
                             MemresStream stream, GError **error);
gboolean memres_buffer_write (MemresBuffer *buf, gsize offset, gconstpointer src, gsize n_bytes,
                              MemresStream stream, GError **error);
gboolean memres_stream_synchronize (MemresStream stream, GError **error);

/* Growth (kinds with MEMRES_MEMORY_RESIZABLE; others give MEMRES_ERROR_NOT_SUPPORTED) */
gboolean memres_buffer_resize (MemresBuffer *buf, gsize new_size, MemresStream stream,
                               GError **error);

/* Sharing between processes */
gboolean memres_buffer_export (MemresBuffer *buf, MemresBufferDescriptor *descriptor,
                               GError **error);
MemresBuffer *memres_buffer_import (MemresResource *mr, gconstpointer descriptor, gsize length,
                                    MemresStream stream, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresBuffer, memres_buffer_unref)

G_END_DECLS
