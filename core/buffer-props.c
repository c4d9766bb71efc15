/* memres - CUDA memory resources
 * buffer-props.c: what a buffer says of itself: whether it is closed, its address, size, device,
 * resource, flags and allocation record, and its deallocation stream (set and read); the error
 * of a call on a closed buffer (buffers.h). None of it changes the memory; the allocate/close
 * pair is buffer.c's. */
#include "memres-private.h"

gboolean
_memres_buffer_closed_error (GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED, "the buffer is closed");
  return FALSE;
}

/**
 * memres_buffer_is_closed:
 * @buf: a #MemresBuffer
 *
 * Whether the buffer was closed: memres_buffer_close() (or memres_buffer_close_full()) ran on
 * it. A closed buffer's getters answer 0, %NULL or -1, and
 * every operation on its memory is refused with %MEMRES_ERROR_CLOSED. Reads one atomic word: no
 * lock, no driver call, no #GError; thread-safe.
 *
 * Returns: %TRUE once memres_buffer_close() ran
 *
 * Since: 1.0
 */
gboolean
memres_buffer_is_closed (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, TRUE);
  return __atomic_load_n (&buf->closed, __ATOMIC_SEQ_CST) != 0;
}

/**
 * memres_buffer_set_deallocation_stream:
 * @buf: a #MemresBuffer
 * @stream: the stream a later close with a %NULL stream (or the last unref) frees on
 * @error: return location for a #GError, or %NULL
 *
 * Records the stream the buffer's memory is freed on. Not to be called while another thread
 * closes the buffer.
 *
 * Errors: %MEMRES_ERROR_CLOSED.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_set_deallocation_stream (MemresBuffer *buf, MemresStream stream, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);

  if (memres_buffer_is_closed (buf))
    return _memres_buffer_closed_error (error);
  buf->dealloc_stream = stream;
  return TRUE;
}

/**
 * memres_buffer_get_deallocation_stream:
 * @buf: a #MemresBuffer
 *
 * The stream the buffer's memory is freed on when it is closed without a stream of its own
 * (memres_buffer_unref() of the last reference, or memres_buffer_close() with %NULL): the
 * allocation stream until memres_buffer_set_deallocation_stream() changes it. It is a
 * `CUstream` (%NULL: the legacy default stream) and stays valid after the close. No lock, no driver
 * call, no #GError; thread-safe (a buffer closed by another thread at the same time gives either
 * answer).
 *
 * Returns: the recorded deallocation stream (initially the allocation stream)
 *
 * Since: 1.0
 */
MemresStream
memres_buffer_get_deallocation_stream (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);
  return buf->dealloc_stream;
}

/**
 * memres_buffer_get_pointer:
 * @buf: a #MemresBuffer
 *
 * The start of the buffer's memory as a pointer: a host pointer for host-accessible memory, the
 * `CUdeviceptr` cast to a pointer for device memory (dereference it only where
 * memres_buffer_is_host_accessible() says so). No lock, no driver call, no #GError; thread-safe (a
 * buffer closed by another thread at the same time gives either answer).
 *
 * Returns: (transfer none) (nullable): the start of the memory as a pointer (device memory:
 *   the `CUdeviceptr`); %NULL for a closed buffer and for one allocated with size 0 (a buffer
 *   memres_buffer_resize() shrank to 0 bytes keeps the address its kind leaves it: vmm keeps its
 *   reserved range, nothing mapped there, to grow in place)
 *
 * Since: 1.0
 */
gpointer
memres_buffer_get_pointer (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);
  return memres_buffer_is_closed (buf) ? NULL : (gpointer) (guintptr) buf->alloc.address;
}

/**
 * memres_buffer_get_address:
 * @buf: a #MemresBuffer
 *
 * The start of the buffer's memory as a 64-bit integer, as the driver API takes it
 * (`CUdeviceptr`); the same value as memres_buffer_get_pointer(). No lock, no driver call, no
 * #GError; thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: the start of the memory as an integer (a `CUdeviceptr`); 0 for a closed buffer and
 *   for one allocated with size 0 (after memres_buffer_resize() to 0 bytes, the address its
 *   kind leaves it, as memres_buffer_get_pointer() says)
 *
 * Since: 1.0
 */
guint64
memres_buffer_get_address (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, 0);
  return memres_buffer_is_closed (buf) ? 0 : buf->alloc.address;
}

/**
 * memres_buffer_get_size:
 * @buf: a #MemresBuffer
 *
 * The buffer's size in bytes: what was asked for, or more where the kind rounds up (its
 * granularity), and the new size after memres_buffer_resize(). No lock, no driver call, no #GError;
 * thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: the size in bytes (a kind that rounds up reports the rounded size); 0 when closed
 *
 * Since: 1.0
 */
gsize
memres_buffer_get_size (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, 0);
  return memres_buffer_is_closed (buf) ? 0 : buf->alloc.size;
}

/**
 * memres_buffer_get_device:
 * @buf: a #MemresBuffer
 *
 * The device the memory lives on. Page-locked host memory lives on none: it is -1 whoever
 * allocated it (the `pinned` kind, a host-located `vmm` resource, cudaHostAlloc() or
 * cuMemHostRegister() memory wrapped with memres_buffer_new_for_pointer()), although every
 * device can reach it (memres_buffer_is_device_accessible()).
 *
 * Returns: the device ordinal of the memory; -1 for host memory (pageable or page-locked) or
 *   a closed buffer
 *
 * Since: 1.0
 */
gint
memres_buffer_get_device (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, -1);
  return memres_buffer_is_closed (buf) ? -1 : buf->device;
}

/**
 * memres_buffer_get_resource:
 * @buf: a #MemresBuffer
 *
 * The resource (the top of the stack) the buffer was allocated from; the buffer holds a
 * reference to it until it is closed, so the pointer stays valid while the buffer is open.
 * Wrapped memory (memres_buffer_new_for_pointer()) has none. No lock, no driver call, no #GError;
 * thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: (transfer none) (nullable): the resource the buffer came from; %NULL for wrapped
 *   foreign memory or a closed buffer
 *
 * Since: 1.0
 */
MemresResource *
memres_buffer_get_resource (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);
  return memres_buffer_is_closed (buf) ? NULL : buf->mr;
}

/**
 * memres_buffer_get_flags:
 * @buf: a #MemresBuffer
 *
 * What the buffer's memory can do, as #MemresMemoryFlags bits: reached by device code, by host
 * code, shared between processes, exported by fabric handles, and so on (the kind's flags for its
 * memory, or those given to memres_buffer_new_for_pointer()). No lock, no driver call, no #GError;
 * thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: what the buffer's memory can do; 0 when closed
 *
 * Since: 1.0
 */
MemresMemoryFlags
memres_buffer_get_flags (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, 0);
  return memres_buffer_is_closed (buf) ? 0 : buf->flags;
}

/**
 * memres_buffer_is_device_accessible:
 * @buf: a #MemresBuffer
 *
 * Whether device code (a kernel, a copy engine) can read and write the buffer's memory:
 * %MEMRES_MEMORY_DEVICE_ACCESSIBLE in memres_buffer_get_flags(). Device memory and page-locked
 * host memory answer %TRUE; pageable host memory (`host`) %FALSE. No lock, no driver call, no
 * #GError; thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: %TRUE when device code can access the memory; %FALSE when closed
 *
 * Since: 1.0
 */
gboolean
memres_buffer_is_device_accessible (MemresBuffer *buf)
{
  return (memres_buffer_get_flags (buf) & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0;
}

/**
 * memres_buffer_is_host_accessible:
 * @buf: a #MemresBuffer
 *
 * Whether host code can dereference memres_buffer_get_pointer():
 * %MEMRES_MEMORY_HOST_ACCESSIBLE in memres_buffer_get_flags(). Host memory, page-locked or not,
 * and managed memory answer %TRUE; device memory %FALSE. No lock, no driver call, no #GError;
 * thread-safe (a buffer closed by another thread at the same time gives either answer).
 *
 * Returns: %TRUE when host code can dereference the pointer; %FALSE when closed
 *
 * Since: 1.0
 */
gboolean
memres_buffer_is_host_accessible (MemresBuffer *buf)
{
  return (memres_buffer_get_flags (buf) & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0;
}

/**
 * memres_buffer_get_allocation:
 * @buf: a #MemresBuffer
 *
 * For plugins: the allocation record the kind filled in (address, size, plugin data).
 *
 * Returns: (transfer none) (nullable): the record, valid while the buffer is open; %NULL when
 *   closed
 *
 * Since: 1.0
 */
const MemresAllocation *
memres_buffer_get_allocation (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);
  return memres_buffer_is_closed (buf) ? NULL : &buf->alloc;
}
