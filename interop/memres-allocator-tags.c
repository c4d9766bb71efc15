/* memres - CUDA memory resources
 * memres-allocator-tags.c: tags (memres-tags.h, docs/tags.md) through libmemres-allocator, for a
 * Python process that loads the library with ctypes: no GError crosses the boundary, a call
 * returns 0 or the #MemresTagError code plus 1 (or -1 for another error) and keeps the message
 * for memres_allocator_tag_last_error() on the calling thread. */
#include "memres-allocator-private.h"

static GPrivate last_error = G_PRIVATE_INIT (g_free);

static int
result (gboolean ok, GError *error)
{
  return _memres_allocator_result (ok, error, MEMRES_TAG_ERROR, &last_error);
}

/**
 * memres_allocator_tag_push:
 * @tag: the tag
 *
 * memres_tag_push() on the calling thread: the tensors it allocates through the library until the
 * matching memres_allocator_tag_pop() carry @tag.
 *
 * Returns: 0, or the #MemresTagError code + 1 (message: memres_allocator_tag_last_error())
 */
int
memres_allocator_tag_push (const char *tag)
{
  GError *error = NULL;
  gboolean ok = memres_tag_push (tag, &error);

  return result (ok, error);
}

/**
 * memres_allocator_tag_pop:
 * @tag: (nullable): the innermost tag, as a check; %NULL pops whichever it is
 *
 * memres_tag_pop() on the calling thread.
 *
 * Returns: 0, or the #MemresTagError code + 1
 */
int
memres_allocator_tag_pop (const char *tag)
{
  GError *error = NULL;
  gboolean ok = memres_tag_pop (tag, &error);

  return result (ok, error);
}

/**
 * memres_allocator_tag_set_stream_default:
 * @stream: a `CUstream` (NULL: the legacy default stream)
 * @tag: (nullable): the tag; %NULL clears the default
 *
 * memres_tag_set_stream_default(): the tag of tensors allocated on @stream by threads without a
 * scope (PyTorch's backward pass runs on a thread of its own).
 *
 * Returns: 0, or the #MemresTagError code + 1
 */
int
memres_allocator_tag_set_stream_default (void *stream, const char *tag)
{
  GError *error = NULL;
  gboolean ok = memres_tag_set_stream_default (stream, tag, &error);

  return result (ok, error);
}

/**
 * memres_allocator_tag_set_device_default:
 * @device: a device ordinal
 * @tag: (nullable): the tag; %NULL clears the default
 *
 * memres_tag_set_device_default().
 *
 * Returns: 0, the #MemresTagError code + 1, or -1 (a device out of range)
 */
int
memres_allocator_tag_set_device_default (int device, const char *tag)
{
  GError *error = NULL;
  gboolean ok = memres_tag_set_device_default (device, tag, &error);

  return result (ok, error);
}

/**
 * memres_allocator_tag_get_counts:
 * @device: a device ordinal
 * @tag: a tag
 * @counts: (out caller-allocates): six 64-bit counts, as #MemresTagCounts orders them
 *
 * The counts of @tag in the first `stats` layer of @device's resource (set
 * `MEMRES_ALLOCATOR_RESOURCE="stats>cache>dmr:device={device}"` to have one).
 *
 * Returns: 0, the #MemresTagError code + 1, or -1 (no resource, no `stats` layer)
 */
int
memres_allocator_tag_get_counts (int device, const char *tag, MemresTagCounts *counts)
{
  GError *error = NULL;
  MemresResource *mr = memres_allocator_get_resource (device);
  MemresResource *layer;
  gboolean ok;

  if (mr == NULL)
    {
      g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND, "device %d has no resource",
                   device);
      return result (FALSE, error);
    }
  layer = memres_resource_find_layer (mr, "stats", &error);
  ok = layer != NULL && memres_resource_get_tag_counts (layer, tag, counts, &error);
  return result (ok, error);
}

/**
 * memres_allocator_tag_last_error:
 *
 * The message of the error that the calling thread's last failed tag call of libmemres-allocator
 * returned as a code (its entry points for ctypes cross no #GError), kept per thread until that
 * thread's next failure. Thread-safe.
 *
 * Returns: (transfer none) (nullable): the message of the calling thread's last failed tag call
 *   of this library
 */
const char *
memres_allocator_tag_last_error (void)
{
  return g_private_get (&last_error);
}
