/* memres - CUDA memory resources
 * sleep-contents.c: the contents of a sleep's buffers saved before the sleep slot and restored
 * after the wake slot, by policy (sleep-policy.c), for sleep.c (sleep.h): the backup policy's
 * copies handed to sleep-backup.c, the file policy's file (opened, locked with flock() until the
 * wake, written and read back through a page-locked stage, one synchronous cuMemcpyAsync per
 * stage), the page-locked resource they take from (the policy's, else a `pinned` one made once
 * per resource). */
#include "memres-private.h"

#include "../sdk/file-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* the bytes of page-locked memory a file policy stages through at a time */
#define SLEEP_FILE_STAGE ((gsize) 64 << 20)

/* One copy of @n bytes from @src to @dst on @stream in the context of @device, waited for (the
 * file policy's stages). */
static gboolean
copy_sync (gint device, CUdeviceptr dst, CUdeviceptr src, gsize n, MemresStream stream,
           const char *step, GError **error)
{
  MemresStreamContext t;
  const char *call = "cuMemcpyAsync";
  CUresult res;

  if (!_memres_stream_context_begin (&t, device, stream, error))
    {
      g_prefix_error (error, "%s: ", step);
      return FALSE;
    }
  res = t.drv->cuMemcpyAsync (dst, src, n, (CUstream) stream);
  if (res == CUDA_SUCCESS)
    {
      call = "cuStreamSynchronize";
      res = t.drv->cuStreamSynchronize ((CUstream) stream);
    }
  return _memres_sleep_copy_end (&t, res, call, step, error);
}

/* The resource of the page-locked memory for @policy on @mr (transfer none). */
static MemresResource *
host_resource (MemresResource *mr, MemresSleepPolicy *policy, GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresResource *host;

  if (policy->host_mr != NULL)
    return policy->host_mr;
  g_mutex_lock (&state->lock);
  host = state->host_mr;
  g_mutex_unlock (&state->lock);
  if (host != NULL)
    return host;
  /* made without the lock (a leaf, which fork.c's prepare takes after the loader's token that a
   * creation may wait for); a thread that made one first wins */
  {
    g_autofree char *spec
        = g_strdup_printf ("pinned:device=%d,fallback=true", MAX (mr->info.device, 0));
    MemresResource *made = memres_resource_new (spec, error);

    if (made == NULL)
      {
        g_prefix_error (error, "making the page-locked pool of backups: ");
        return NULL;
      }
    g_mutex_lock (&state->lock);
    if (state->host_mr == NULL)
      state->host_mr = g_steal_pointer (&made);
    host = state->host_mr;
    g_mutex_unlock (&state->lock);
    if (made != NULL)
      memres_resource_unref (made);
  }
  return host;
}

/* MEMRES_SLEEP_ERROR_FILE for the system's error @errsv on the file (0: the file is shorter
 * than the sleep wrote): its reason and its number, "REASON (errno N)", so that the caller can
 * tell ENOSPC from EACCES without the domain of GLib's file errors, which the public API keeps
 * for MEMRES_SLEEP_ERROR_FILE (memres-sleep.h). Returns FALSE. */
static gboolean
file_error (GError **error, const char *path, const char *doing, int errsv)
{
  if (errsv != 0)
    g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE, "%s \"%s\": %s (errno %d)",
                 doing, path, g_strerror (errsv), errsv);
  else
    g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE,
                 "%s \"%s\": the file is shorter than the sleep wrote", doing, path);
  return FALSE;
}

/* Opens the file of a file policy for a sleep: a regular file (created, mode 0600, when
 * missing), locked with flock() so that no other sleep in progress or asleep (of any tag,
 * resource or process) uses it, then truncated. A FIFO, a device (/dev/null), a directory or a
 * socket is refused untouched: the contents could not be read back at the wake. The lock is
 * held until the wake (the descriptor kept in the tag's MemresSleepTag.file_fd). */
static int
open_sleep_file (const char *path, GError **error)
{
  struct stat st;
  int fd;

  if (stat (path, &st) == 0 && !S_ISREG (st.st_mode))
    {
      g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE,
                   "cannot use \"%s\" as the sleep file: not a regular file (%s): its contents "
                   "could not be read back at the wake",
                   path, memres_file_type_name (st.st_mode));
      return -1;
    }
  /* O_NONBLOCK: a FIFO made meanwhile fails (ENXIO) rather than waiting for a reader */
  fd = open (path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    {
      file_error (error, path, "cannot open the sleep file", errno);
      return -1;
    }
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE,
                   "cannot use \"%s\" as the sleep file: not a regular file", path);
      return -1;
    }
  if (flock (fd, LOCK_EX | LOCK_NB) != 0)
    {
      int errsv = errno;

      close (fd);
      if (errsv == EWOULDBLOCK)
        g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE,
                     "cannot use \"%s\" as the sleep file: it holds the contents of another "
                     "sleep (of this or another tag, resource or process) until its wake "
                     "(flock(): %s, errno %d); name another file",
                     path, g_strerror (errsv), errsv);
      else
        file_error (error, path, "cannot lock the sleep file", errsv);
      return -1;
    }
  if (ftruncate (fd, 0) != 0)
    {
      int errsv = errno;

      close (fd);
      file_error (error, path, "cannot truncate the sleep file", errsv);
      return -1;
    }
  return fd;
}

void
_memres_sleep_free_backups (MemresSleepEntry **entries, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (entries[i]->backup != NULL)
      _memres_sleep_backup_unref (g_steal_pointer (&entries[i]->backup));
}

/* Saves the contents of @entries by @policy before the sleep slot (the backup policy's copies:
 * sleep-backup.c); a file policy's file stays open and locked in *@file_fd (else -1) for the
 * caller. On failure frees what it made (the buffers are untouched; the file closed). */
gboolean
_memres_sleep_save_contents (MemresResource *mr, MemresSleepPolicy *policy,
                             MemresSleepEntry **entries, gsize n, MemresStream stream,
                             guint64 *file_size, int *file_fd, GError **error)
{
  MemresResource *host;
  MemresBuffer *stage;
  gboolean ok = TRUE;
  int fd;
  guint64 offset = 0;

  if (policy->mode == MEMRES_SLEEP_DISCARD || n == 0)
    return TRUE;
  if ((host = host_resource (mr, policy, error)) == NULL)
    return FALSE;
  if (policy->mode == MEMRES_SLEEP_BACKUP)
    {
      if (_memres_sleep_backup_save (host, entries, n, stream, error))
        return TRUE;
      _memres_sleep_free_backups (entries, n);
      return FALSE;
    }
  if ((fd = open_sleep_file (policy->path, error)) < 0)
    return FALSE;
  stage = memres_resource_allocate (host, SLEEP_FILE_STAGE, stream, error);
  if (stage == NULL)
    {
      close (fd);
      return FALSE;
    }
  for (gsize i = 0; ok && i < n; i++)
    {
      MemresBuffer *buf = entries[i]->buf;

      entries[i]->file_offset = offset;
      for (gsize done = 0; ok && done < buf->alloc.size; done += SLEEP_FILE_STAGE)
        {
          gsize len = MIN (SLEEP_FILE_STAGE, buf->alloc.size - done);
          const guint8 *p = (const guint8 *) (guintptr) stage->alloc.address;

          ok = copy_sync (buf->device, stage->alloc.address, buf->alloc.address + done, len, stream,
                          "saving a buffer to the sleep file", error);
          for (gsize w = 0; ok && w < len;)
            {
              ssize_t r = pwrite (fd, p + w, len - w, (off_t) (offset + done + w));

              if (r < 0 && errno == EINTR)
                continue;
              if (r <= 0)
                ok = file_error (error, policy->path, "cannot write the sleep file",
                                 r < 0 ? errno : ENOSPC);
              else
                w += (gsize) r;
            }
        }
      offset += buf->alloc.size;
    }
  if (ok && fsync (fd) != 0 && errno != EINVAL)
    ok = file_error (error, policy->path, "cannot write the sleep file", errno);
  if (!ok)
    {
      close (fd);
      fd = -1;
    }
  *file_fd = fd;
  memres_buffer_close (stage, NULL, NULL);
  memres_buffer_unref (stage);
  *file_size = offset;
  return ok;
}

/* Restores the contents of @entries by @policy after the wake slot (BACKUP: the rest of
 * @restore's copies, those the slot's mapping let it queue early being on their way); the backups
 * stay (freed by the caller once everything succeeded). */
gboolean
_memres_sleep_restore_contents (MemresResource *mr, MemresSleepPolicy *policy, guint64 file_size,
                                MemresSleepEntry **entries, gsize n, MemresSleepRestore *restore,
                                MemresStream stream, GError **error)
{
  MemresResource *host;
  MemresBuffer *stage = NULL;
  gboolean ok = TRUE;
  struct stat st;
  int fd;

  if (policy->mode == MEMRES_SLEEP_DISCARD || n == 0)
    return TRUE;
  if (policy->mode == MEMRES_SLEEP_BACKUP)
    return _memres_sleep_restore_finish (restore, error);
  fd = open (policy->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return file_error (error, policy->path, "cannot open the sleep file", errno);
  if (fstat (fd, &st) != 0 || (guint64) st.st_size < file_size)
    {
      int errsv = errno;

      close (fd);
      return file_error (error, policy->path, "cannot read the sleep file back",
                         (guint64) st.st_size < file_size ? 0 : errsv);
    }
  if ((host = host_resource (mr, policy, error)) == NULL
      || (stage = memres_resource_allocate (host, SLEEP_FILE_STAGE, stream, error)) == NULL)
    {
      close (fd);
      return FALSE;
    }
  for (gsize i = 0; ok && i < n; i++)
    {
      MemresBuffer *buf = entries[i]->buf;
      guint8 *p = (guint8 *) (guintptr) stage->alloc.address;

      for (gsize done = 0; ok && done < buf->alloc.size; done += SLEEP_FILE_STAGE)
        {
          gsize len = MIN (SLEEP_FILE_STAGE, buf->alloc.size - done);

          for (gsize r = 0; ok && r < len;)
            {
              ssize_t got
                  = pread (fd, p + r, len - r, (off_t) (entries[i]->file_offset + done + r));

              if (got < 0 && errno == EINTR)
                continue;
              if (got <= 0)
                ok = file_error (error, policy->path, "cannot read the sleep file back",
                                 got < 0 ? errno : 0);
              else
                r += (gsize) got;
            }
          ok = ok
               && copy_sync (buf->device, buf->alloc.address + done, stage->alloc.address, len,
                             stream, "restoring a buffer from the sleep file", error);
        }
    }
  close (fd);
  memres_buffer_close (stage, NULL, NULL);
  memres_buffer_unref (stage);
  return ok;
}
