/* memres - CUDA memory resources
 * memres-buffer.h: buffers. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-buffer
 * @title: Buffers
 * @short_description: allocated memory: its lifetime, properties and stream-ordered data movement
 * @section_id: memres-memres-buffer
 *
 * A #MemresBuffer is one block of memory: allocated from a resource
 * (memres_resource_allocate()), wrapped from memory allocated elsewhere
 * (memres_buffer_new_for_pointer(), memres_buffer_new_for_dlpack()) or imported from another
 * process (memres_buffer_import(), memres_ipc_receive_buffer()).
 *
 * Closing gives the memory back, ordered on a stream (memres_buffer_close(), by default on the
 * buffer's deallocation stream); a closed buffer's getters report %NULL, 0, -1 or %FALSE and its
 * other functions fail with %MEMRES_ERROR_CLOSED. The buffer object itself is reference counted:
 * the last memres_buffer_unref() of an open buffer closes it. Copies, fills, reads and writes
 * are queued on a stream (memres_buffer_copy_to(), memres_buffer_fill(), memres_buffer_read(),
 * memres_buffer_write()); memres_stream_synchronize() waits for them.
 *
 * |[<!-- language="C" -->
 * guint8 back[16];
 *
 * if (!memres_buffer_fill (buf, 0xab, 1, stream, &error)
 *     || !memres_buffer_read (buf, 0, back, sizeof back, stream, &error)
 *     || !memres_buffer_close (buf, stream, &error))
 *   return FALSE;
 * ]|
 *
 * Reference counting and the getters are thread-safe; close a buffer once, when no other thread
 * still uses it.
 */

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
