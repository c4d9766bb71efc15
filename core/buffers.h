/* memres - CUDA memory resources
 * buffers.h: the core's buffers beside their hot path (hot-path.h): wrapped foreign memory,
 * buffers made by the core and the IPC layer, the ordering of a close on another stream, the
 * device and stream context of their driver calls, and the out-of-memory report of an
 * allocation that fails. Included through memres-private.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "buffers.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include "hot-path.h"

G_BEGIN_DECLS

/* The release function of wrapped foreign memory and its data (buffer.c). Kept out of the
 * buffer's allocation record: memres_buffer_get_allocation() shows that record to plugins, whose
 * plugin_data it is (NULL for memory no kind allocated). */
struct _MemresRelease
{
  GDestroyNotify func;
  gpointer data;
  gint generation; /* the fork generation the buffer was made in (fork.c) */
};

/* buffer-streams.c: a close of @buf on @stream, not its deallocation stream, is ordered after the
 * deallocation stream's work (event recorded there, waited for on @stream; when no event can be
 * recorded there, after all work of the device: cuCtxSynchronize()), for stream-ordered memory.
 * Errors: MEMRES_CUDA_ERROR (a @stream that cannot wait: CUDA_ERROR_INVALID_HANDLE for a
 * destroyed one), MEMRES_ERROR_NO_DRIVER; nothing changed then. */
gboolean _memres_buffer_order_close (MemresBuffer *buf, MemresStream stream, GError **error);
/* buffer-streams.c: waits for all work of the primary context of @buf's device
 * (cuCtxSynchronize()); FALSE when it cannot. */
gboolean _memres_buffer_wait_device (MemresBuffer *buf);

/* buffer-deferred.c (see there): _memres_buffer_defer_close() takes @buf, open and held by the
 * caller's last reference, whose close on its deallocation stream failed with @error, into the
 * list of buffers closed once their stream's capture has ended, when that is why it failed
 * (judged from @error alone: memres's MEMRES_ERROR_NOT_SUPPORTED, or the driver's
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED or _INVALIDATED): TRUE then, the reference the list's,
 * which @unref (memres_buffer_unref()) drops once the capture has ended.
 * _memres_buffer_deferred_flush(): the memres calls that may close them check the list (one
 * relaxed load while it is empty) and get how many it closed (0 inside its own closes on this
 * thread). Only where nothing is held (see buffer-deferred.c). */
extern gint _memres_deferred_closes_;
gboolean _memres_buffer_defer_close (MemresBuffer *buf, const GError *error,
                                     void (*unref) (MemresBuffer *buf));
guint _memres_buffer_deferred_flush_slow (void);

static inline guint
_memres_buffer_deferred_flush (void)
{
  if (G_UNLIKELY (__atomic_load_n (&_memres_deferred_closes_, __ATOMIC_RELAXED) != 0))
    return _memres_buffer_deferred_flush_slow ();
  return 0;
}

/* memres_cuda_push_stream_context() (cuda-helpers.c) with the driver kept in @t->drv, for
 * the core's callers (transfers, the cross-stream close, IPC close ordering);
 * _memres_stream_context_end() pops what begin pushed. */
typedef struct
{
  const MemresCudaDriver *drv;
  gboolean pushed;
} MemresStreamContext;

/* resource-slots.c: the device whose context the entry points make current for @mr's memory: its
 * device; for device-accessible memory of device -1 (page-locked pools), the first device the
 * kind's get_access slot says has access (the resource's `device` by default), read once and
 * again after memres_resource_set_access(); -1 where no slot says (the current context is
 * used). _memres_buffer_context_device(): the same for @buf (wrapped memory: its device). */
gint _memres_resource_context_device (MemresResource *mr);

static inline gint
_memres_buffer_context_device (MemresBuffer *buf)
{
  if (buf->device >= 0 || buf->mr == NULL || !(buf->flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE))
    return buf->device;
  return _memres_resource_context_device (buf->mr);
}

static inline gboolean
_memres_stream_context_begin (MemresStreamContext *t, gint device, MemresStream stream,
                              GError **error)
{
  t->pushed = FALSE;
  t->drv = memres_cuda_get_driver (error);
  return t->drv != NULL && memres_cuda_push_stream_context (device, stream, &t->pushed, error);
}

static inline void
_memres_stream_context_end (MemresStreamContext *t)
{
  memres_cuda_pop_context (t->pushed);
}

/* oom-report.c: @error (MEMRES_ERROR_OUT_OF_MEMORY of an allocation of @size bytes through @mr,
 * about to reach the application) gets the report of the stack appended to its message: what
 * each layer holds, the largest free block where a layer knows it (its explain_oom slot), the
 * device's free and total bytes, the verdict and the remedy; the message is also kept as @mr's
 * last report (memres_resource_get_oom_report()). Only for the error the caller gets: never
 * for one an adaptor catches below. */
void _memres_oom_report (MemresResource *mr, gsize size, GError *error);
/* snapshot.c: the free and total bytes of the device whose memory @base (a base layer) holds
 * (cuMemGetInfo in its primary context); FALSE when its memory is no device's or the driver
 * cannot say. */
gboolean _memres_device_mem_info (MemresResource *base, guint64 *free_bytes, guint64 *total);
/* snapshot.c: the snapshot of @mr's stack as JSON text (memres_resource_snapshot() without its
 * checks; transfer full). */
char *_memres_snapshot_build (MemresResource *mr);
/* the same with the member "oom_report": @oom_report (oom-report.c, the snapshot at a failure) */
char *_memres_snapshot_build_for_oom (MemresResource *mr, const char *oom_report);

/* buffer.c: a new open buffer owning @alloc, holding a reference on @mr, its bytes counted on
 * the stripes (memres_resource_allocate(), chunks received from another process).
 * _memres_buffer_new_imported(): a new open buffer at @alloc inside @mapping (one user of it
 * already counted), flagged MEMRES_MEMORY_IMPORTED; it holds no reference of its own on @mr:
 * the imported buffers of @mr share one (ipc/ipc-buffers.c). */
MemresBuffer *_memres_buffer_new (MemresResource *mr, const MemresAllocation *alloc,
                                  MemresStream stream);
MemresBuffer *_memres_buffer_new_imported (MemresResource *mr, const MemresAllocation *alloc,
                                           MemresStream stream, MemresIpcMapping *mapping);

/* buffer.c: @local, the error of an allocation or resize of @size bytes through @mr, to the
 * caller: an out-of-memory gets the stack's report first (oom-report.c). Only where the error
 * leaves memres (memres_resource_allocate(), memres_buffer_resize()): an adaptor that catches it
 * below pays for no report. Returns FALSE. */
gboolean _memres_buffer_allocation_failed (MemresResource *mr, gsize size, GError *local,
                                           GError **error);
/* buffer-props.c: MEMRES_ERROR_CLOSED, "the buffer is closed"; returns FALSE */
gboolean _memres_buffer_closed_error (GError **error);

/* buffer.c: a buffer structure, not initialized, on a cache line of its own (64-byte aligned;
 * aborts when out of memory), for buffer-wrap.c; buffer.c frees it at the buffer's last unref. */
MemresBuffer *_memres_buffer_struct_alloc (void);

G_END_DECLS
