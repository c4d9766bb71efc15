/* memres - CUDA memory resources
 * sleep-policy.c: a sleep policy (memres-sleep.h, docs/sleep.md): what a sleep does with the
 * contents of the buffers it puts to sleep (discard them, back them up in page-locked memory, or
 * write them to a file), the file's path and the resource the page-locked memory comes from;
 * reference-counted, read by sleep.c (MemresSleepPolicy, sleep.h). */
#include "memres-private.h"

/**
 * memres_sleep_policy_new:
 * @mode: a #MemresSleepMode
 * @error: return location for a #GError, or %NULL
 *
 * A new policy of @mode. %MEMRES_SLEEP_FILE needs a path (memres_sleep_policy_set_path())
 * before memres_resource_sleep() takes it. The page-locked memory of %MEMRES_SLEEP_BACKUP (and
 * the staging memory of %MEMRES_SLEEP_FILE, at most 64 MiB at a time) comes from a `pinned`
 * resource made at the first sleep that needs one (`pinned:device=N,fallback=true`, N the
 * resource's device), or from the one memres_sleep_policy_set_host_resource() names. No driver
 * call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a @mode that is not a #MemresSleepMode.
 *
 * Returns: (transfer full) (nullable): a new policy; free with memres_sleep_policy_unref()
 *
 * Since: 2.0
 */
MemresSleepPolicy *
memres_sleep_policy_new (MemresSleepMode mode, GError **error)
{
  MemresSleepPolicy *policy;

  if ((guint) mode > MEMRES_SLEEP_FILE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "sleep policy mode %d: the modes are MEMRES_SLEEP_DISCARD (0), "
                   "MEMRES_SLEEP_BACKUP (1) and MEMRES_SLEEP_FILE (2)",
                   (gint) mode);
      return NULL;
    }
  policy = g_new0 (MemresSleepPolicy, 1);
  g_atomic_ref_count_init (&policy->ref);
  policy->mode = mode;
  policy->restore_batch = mode == MEMRES_SLEEP_BACKUP ? MEMRES_SLEEP_RESTORE_BATCH : 0;
  return policy;
}

/**
 * memres_sleep_policy_ref:
 * @policy: a #MemresSleepPolicy
 *
 * Adds a reference. Thread-safe.
 *
 * Returns: (transfer full): @policy
 *
 * Since: 2.0
 */
MemresSleepPolicy *
memres_sleep_policy_ref (MemresSleepPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, NULL);
  g_atomic_ref_count_inc (&policy->ref);
  return policy;
}

/**
 * memres_sleep_policy_unref:
 * @policy: (nullable): a #MemresSleepPolicy
 *
 * Drops a reference; the last one frees the policy (and its reference to a host resource).
 * Thread-safe.
 *
 * Since: 2.0
 */
void
memres_sleep_policy_unref (MemresSleepPolicy *policy)
{
  if (policy == NULL || !g_atomic_ref_count_dec (&policy->ref))
    return;
  g_free (policy->path);
  if (policy->host_mr != NULL)
    memres_resource_unref (policy->host_mr);
  g_free (policy);
}

/**
 * memres_sleep_policy_get_mode:
 * @policy: a #MemresSleepPolicy
 *
 * What @policy does with the contents of the buffers it puts to sleep, as given to
 * memres_sleep_policy_new(). A policy is immutable once given to memres_resource_sleep():
 * thread-safe from then on; sets no error.
 *
 * Returns: the policy's #MemresSleepMode
 *
 * Since: 2.0
 */
MemresSleepMode
memres_sleep_policy_get_mode (const MemresSleepPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, MEMRES_SLEEP_DISCARD);
  return policy->mode;
}

/**
 * memres_sleep_policy_set_path:
 * @policy: a #MemresSleepPolicy of mode %MEMRES_SLEEP_FILE
 * @path: (type filename): the file the contents go to: a regular file, created (mode 0600) or
 *   truncated at the sleep, read back at the wake, left in place after it (the application's
 *   to remove). The sleep refuses (%MEMRES_SLEEP_ERROR_FILE, the file untouched) a path that
 *   is a FIFO, a device such as /dev/null, a directory or a socket, and a file that holds the
 *   contents of another sleep until its wake (of any tag, resource or process, by any name: the
 *   sleep holds an flock() on it until the wake)
 * @error: return location for a #GError, or %NULL
 *
 * Names the file of a file policy. Not thread-safe against a sleep that uses @policy.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a policy of another mode or an empty path.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_sleep_policy_set_path (MemresSleepPolicy *policy, const char *path, GError **error)
{
  g_return_val_if_fail (policy != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  if (policy->mode != MEMRES_SLEEP_FILE || path[0] == '\0')
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   policy->mode != MEMRES_SLEEP_FILE
                       ? "only a policy of MEMRES_SLEEP_FILE has a path"
                       : "the path of a file policy is empty");
      return FALSE;
    }
  g_free (policy->path);
  policy->path = g_strdup (path);
  return TRUE;
}

/**
 * memres_sleep_policy_set_host_resource:
 * @policy: a #MemresSleepPolicy of mode %MEMRES_SLEEP_BACKUP or %MEMRES_SLEEP_FILE
 * @host_mr: the resource of the page-locked memory of backups (a `pinned` resource, or a stack
 *   over one): memory the host and the device both reach
 * @error: return location for a #GError, or %NULL
 *
 * Names the pool the backups (and a file policy's staging memory) come from, in place of the
 * `pinned` resource made at first use. The policy keeps a reference. Not thread-safe against a
 * sleep that uses @policy.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a discard policy or a resource whose memory the
 * host or the device cannot reach (memres_resource_get_flags()).
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_sleep_policy_set_host_resource (MemresSleepPolicy *policy, MemresResource *host_mr,
                                       GError **error)
{
  MemresMemoryFlags want = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE;

  g_return_val_if_fail (policy != NULL, FALSE);
  g_return_val_if_fail (host_mr != NULL, FALSE);

  if (policy->mode == MEMRES_SLEEP_DISCARD || (host_mr->info.flags & want) != want)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   policy->mode == MEMRES_SLEEP_DISCARD
                       ? "a discard policy keeps no contents: it has no host resource"
                       : "the host resource of a sleep policy must give memory that the host and "
                         "the device both reach (page-locked memory: `pinned`), not kind \"%s\"",
                   host_mr->kind->name);
      return FALSE;
    }
  memres_resource_ref (host_mr);
  if (policy->host_mr != NULL)
    memres_resource_unref (policy->host_mr);
  policy->host_mr = host_mr;
  return TRUE;
}

/**
 * memres_sleep_policy_set_restore_batch:
 * @policy: a #MemresSleepPolicy of mode %MEMRES_SLEEP_BACKUP
 * @bytes: how many bytes the wake maps before it queues their restoring copies (64 MiB by
 *   default); 0 queues every copy once all the memory is mapped
 * @error: return location for a #GError, or %NULL
 *
 * How the wake of a tag put to sleep with @policy overlaps its two halves: it maps the memory in
 * batches of about @bytes (`arena`: runs of adjacent granules of at most @bytes, each granted by
 * one cuMemSetAccess(); `vmm`: buffer by buffer) and queues the restoring cuMemcpyAsync() of the
 * bytes of each batch as soon as it is mapped, while it maps the next; the one wait at the end
 * stays (docs/sleep.md). A run of adjacent buffers larger than @bytes is copied in pieces of at
 * least @bytes. Read by the wake from the policy its tag slept with. Not thread-safe against a
 * sleep or wake that uses @policy.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a policy of another mode (a discard wake copies
 * nothing; a file's wake reads the file through a staging buffer, copy by copy).
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_sleep_policy_set_restore_batch (MemresSleepPolicy *policy, gsize bytes, GError **error)
{
  g_return_val_if_fail (policy != NULL, FALSE);

  if (policy->mode != MEMRES_SLEEP_BACKUP)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "only a policy of MEMRES_SLEEP_BACKUP has a restore batch: a %s wake "
                   "restores nothing from host memory",
                   policy->mode == MEMRES_SLEEP_DISCARD ? "discard" : "file");
      return FALSE;
    }
  policy->restore_batch = bytes;
  return TRUE;
}
