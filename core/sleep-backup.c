/* memres - CUDA memory resources
 * sleep-backup.c: the copies of the backup policy (docs/sleep.md, sleep.h): a tag's buffers in
 * runs of address-contiguous ones, one page-locked backup per run laid out in address order (the
 * run's buffers contiguous on both sides), one copy per run each way, all queued on the call's
 * stream and waited for once per device (one cuStreamSynchronize), not once per buffer. Called
 * by sleep.c alone; the backups it makes are freed through _memres_sleep_backup_unref(), which
 * sleep.c hands to sleep-state.c. */
#include "memres-private.h"

struct _MemresSleepBackup
{
  gatomicrefcount ref; /* one per entry that points here */
  MemresBuffer *host;  /* page-locked memory: the run's bytes in address order */
};

void
_memres_sleep_backup_unref (MemresSleepBackup *backup)
{
  g_autoptr (GError) error = NULL;

  if (!g_atomic_ref_count_dec (&backup->ref))
    return;
  if (!memres_buffer_close (backup->host, NULL, &error))
    memres_cuda_warn_release_failure (error, "sleep: freeing the backup of a run of buffers");
  memres_buffer_unref (backup->host);
  g_free (backup);
}

/* A run: the @n entries from @first of a sorted array, on one device, address-contiguous (and
 * for a restore backup-contiguous too), @size bytes from @address */
typedef struct
{
  gsize first, n;
  gint device;
  guint64 address;
  gsize size;
} Run;

gboolean
_memres_sleep_copy_end (MemresStreamContext *t, CUresult res, const char *call, const char *step,
                        GError **error)
{
  _memres_stream_context_end (t);
  if (res == CUDA_SUCCESS)
    return TRUE;
  memres_cuda_set_error (error, res, call);
  g_prefix_error (error, "%s: ", step);
  return FALSE;
}

static gint
entry_cmp (gconstpointer a, gconstpointer b)
{
  const MemresBuffer *x = (*(MemresSleepEntry *const *) a)->buf;
  const MemresBuffer *y = (*(MemresSleepEntry *const *) b)->buf;

  if (x->device != y->device)
    return x->device < y->device ? -1 : 1;
  return x->alloc.address < y->alloc.address ? -1 : x->alloc.address > y->alloc.address;
}

/* @entries' buffers that have bytes (with a backup, for a restore), sorted by device and address,
 * in runs: a buffer that starts where the previous one ends, on the same device (and, for a
 * restore, whose bytes follow the previous one's in the same backup) extends its run. */
static GArray *
runs_of (MemresSleepEntry **entries, gsize n, gboolean restore, MemresSleepEntry ***sorted)
{
  GArray *runs = g_array_new (FALSE, FALSE, sizeof (Run));
  MemresSleepEntry **s = g_new (MemresSleepEntry *, n + 1);
  gsize m = 0;

  for (gsize i = 0; i < n; i++)
    if (entries[i]->buf->alloc.size > 0 && (!restore || entries[i]->backup != NULL))
      s[m++] = entries[i];
  qsort (s, m, sizeof *s, entry_cmp);
  for (gsize i = 0; i < m; i++)
    {
      const MemresBuffer *buf = s[i]->buf;
      Run *last = runs->len > 0 ? &g_array_index (runs, Run, runs->len - 1) : NULL;

      if (last != NULL && last->device == buf->device
          && last->address + last->size == buf->alloc.address
          && (!restore
              || (s[i - 1]->backup == s[i]->backup
                  && s[i - 1]->backup_offset + s[i - 1]->buf->alloc.size == s[i]->backup_offset)))
        {
          last->n++;
          last->size += buf->alloc.size;
        }
      else
        {
          Run r = { i, 1, buf->device, buf->alloc.address, buf->alloc.size };

          g_array_append_val (runs, r);
        }
    }
  *sorted = s;
  return runs;
}

/* Each of @runs copied between its buffers and its backup (@to_host: into it), the copies
 * queued on @stream, one cuStreamSynchronize per device. A failing copy stops the queuing; the
 * stream is still waited for (the copies queued before it done), and the error names the copy. */
static gboolean
copy_runs (GArray *runs, MemresSleepEntry **sorted, gboolean to_host, MemresStream stream,
           const char *step, GError **error)
{
  for (guint i = 0; i < runs->len;)
    {
      gint device = g_array_index (runs, Run, i).device;
      MemresStreamContext t;
      const char *call = NULL;
      CUresult res = CUDA_SUCCESS, sync;

      if (!_memres_stream_context_begin (&t, device, stream, error))
        {
          g_prefix_error (error, "%s: ", step);
          return FALSE;
        }
      for (; i < runs->len && g_array_index (runs, Run, i).device == device; i++)
        {
          const Run *r = &g_array_index (runs, Run, i);
          const MemresSleepEntry *e = sorted[r->first];
          CUdeviceptr host;

          if (res != CUDA_SUCCESS)
            continue;
          host = e->backup->host->alloc.address + e->backup_offset;
          res = to_host ? t.drv->cuMemcpyAsync (host, r->address, r->size, (CUstream) stream)
                        : t.drv->cuMemcpyAsync (r->address, host, r->size, (CUstream) stream);
          if (res != CUDA_SUCCESS)
            call = "cuMemcpyAsync";
        }
      sync = t.drv->cuStreamSynchronize ((CUstream) stream);
      if (res == CUDA_SUCCESS && sync != CUDA_SUCCESS)
        {
          res = sync;
          call = "cuStreamSynchronize";
        }
      if (!_memres_sleep_copy_end (&t, res, call, step, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
_memres_sleep_backup_save (MemresResource *host, MemresSleepEntry **entries, gsize n,
                           MemresStream stream, GError **error)
{
  g_autofree MemresSleepEntry **sorted = NULL;
  g_autoptr (GArray) runs = runs_of (entries, n, FALSE, &sorted);

  for (guint i = 0; i < runs->len; i++)
    {
      const Run *r = &g_array_index (runs, Run, i);
      MemresBuffer *mem = memres_resource_allocate (host, r->size, stream, error);
      MemresSleepBackup *backup;
      gsize offset = 0;

      if (mem == NULL)
        {
          g_prefix_error (error, "saving buffers to host memory: ");
          return FALSE;
        }
      backup = g_new0 (MemresSleepBackup, 1);
      backup->host = mem;
      g_atomic_ref_count_init (&backup->ref);
      for (gsize k = r->first; k < r->first + r->n; k++)
        {
          if (k > r->first)
            g_atomic_ref_count_inc (&backup->ref);
          sorted[k]->backup = backup;
          sorted[k]->backup_offset = offset;
          offset += sorted[k]->buf->alloc.size;
        }
    }
  return copy_runs (runs, sorted, TRUE, stream, "saving buffers to host memory", error);
}

gboolean
_memres_sleep_backup_restore (MemresSleepEntry **entries, gsize n, MemresStream stream,
                              GError **error)
{
  g_autofree MemresSleepEntry **sorted = NULL;
  g_autoptr (GArray) runs = runs_of (entries, n, TRUE, &sorted);

  return copy_runs (runs, sorted, FALSE, stream, "restoring buffers from host memory", error);
}
