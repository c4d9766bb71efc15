/* memres - CUDA memory resources
 * memres-allocator-sleep.c: sleep and wake (memres-sleep.h, docs/sleep.md) through
 * libmemres-allocator, for a Python process that loads the library with ctypes: the resource of a
 * device (MEMRES_ALLOCATOR_RESOURCE: a stack over `vmm`, `cache>vmm` for example) puts the
 * tensors of a tag to sleep and wakes them. No GError crosses the boundary: a call returns 0 or
 * the #MemresSleepError code plus 1 (or -1 for an error of another domain: a stack that cannot
 * sleep, a driver failure) and keeps the message for memres_allocator_sleep_last_error() on the
 * calling thread. */
#include "memres-allocator-private.h"

static GPrivate last_error = G_PRIVATE_INIT (g_free);

static int
result (gboolean ok, GError *error)
{
  return _memres_allocator_result (ok, error, MEMRES_SLEEP_ERROR, &last_error);
}

/* The device's resource, or NULL with an error; a NULL or invalid @tag is refused first
 * (MEMRES_TAG_ERROR_INVALID: -1 from the entry points), before any resource is made. */
static MemresResource *
resource_or_error (int device, const char *tag, GError **error)
{
  MemresResource *mr;

  if (!memres_tag_check_name (tag, error))
    return NULL;
  mr = memres_allocator_get_resource (device);

  if (mr == NULL)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE,
                 "no resource for device %d (see the warning logged when it was made)", device);
  return mr;
}

/**
 * memres_allocator_sleep:
 * @device: the CUDA device whose resource the tensors came from
 * @tag: the tag of the tensors to put to sleep (%NULL or an invalid name: -1, the message
 *   kept)
 * @mode: a #MemresSleepMode: 0 discard, 1 backup to page-locked host memory, 2 a file
 * @path: (nullable): the file of mode 2, else %NULL
 * @stream: (nullable): the stream of the saving copies (a `cudaStream_t`), %NULL the legacy one
 *
 * memres_resource_sleep() on the device's resource: the physical memory under every tensor of
 * @tag is released, their addresses kept.
 *
 * Returns: 0, or the #MemresSleepError code + 1, or -1 (message:
 *   memres_allocator_sleep_last_error())
 */
int
memres_allocator_sleep (int device, const char *tag, int mode, const char *path, void *stream)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  GError *error = NULL;
  MemresResource *mr = resource_or_error (device, tag, &error);
  gboolean ok = mr != NULL && (policy = memres_sleep_policy_new (mode, &error)) != NULL
                && (path == NULL || memres_sleep_policy_set_path (policy, path, &error))
                && memres_resource_sleep (mr, tag, policy, (MemresStream) stream, &error);

  return result (ok, error);
}

/**
 * memres_allocator_wake:
 * @device: the CUDA device
 * @tag: the tag put to sleep (%NULL or an invalid name: -1)
 * @stream: (nullable): the stream of the restoring copies, %NULL the legacy one
 *
 * memres_resource_wake() on the device's resource: the tensors of @tag get memory again at the
 * same addresses, their contents restored by the sleep's mode.
 *
 * Returns: 0, or the #MemresSleepError code + 1, or -1
 */
int
memres_allocator_wake (int device, const char *tag, void *stream)
{
  GError *error = NULL;
  MemresResource *mr = resource_or_error (device, tag, &error);
  gboolean ok = mr != NULL && memres_resource_wake (mr, tag, (MemresStream) stream, &error);

  return result (ok, error);
}

/**
 * memres_allocator_is_asleep:
 * @device: the CUDA device
 * @tag: (nullable): a tag
 *
 * memres_resource_is_asleep() on the device's resource; 0 for %NULL or an invalid name.
 *
 * Returns: 1 when @tag sleeps there, else 0
 */
int
memres_allocator_is_asleep (int device, const char *tag)
{
  MemresResource *mr;

  if (!memres_tag_check_name (tag, NULL))
    return 0;
  mr = memres_allocator_get_resource (device);
  return mr != NULL && memres_resource_is_asleep (mr, tag) ? 1 : 0;
}

/**
 * memres_allocator_sleep_last_error:
 *
 * The message of the error that the calling thread's last failed sleep or wake call of
 * libmemres-allocator returned as a code (its entry points for ctypes cross no #GError), kept per
 * thread until that thread's next failure. Thread-safe.
 *
 * Returns: (nullable): the message of the calling thread's last failed sleep or wake call of
 *   this library (valid until its next failure), or %NULL
 */
const char *
memres_allocator_sleep_last_error (void)
{
  return g_private_get (&last_error);
}
