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
 * for a restore backup-contiguous too), @size bytes from @address; of a restore, the first @done
 * bytes queued already (MemresSleepRestore) */
typedef struct
{
  gsize first, n;
  gint device;
  guint64 address;
  gsize size;
  gsize done;
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
          Run r = { i, 1, buf->device, buf->alloc.address, buf->alloc.size, 0 };

          g_array_append_val (runs, r);
        }
    }
  *sorted = s;
  return runs;
}

/* One copy of run @r's bytes from @r->done on (all of them, or @len), between its buffers and its
 * backup (@to_host: into it), queued on @stream in @t's context. */
static CUresult
copy_run (MemresStreamContext *t, Run *r, MemresSleepEntry **sorted, gboolean to_host, gsize len,
          MemresStream stream)
{
  const MemresSleepEntry *e = sorted[r->first];
  CUdeviceptr host = e->backup->host->alloc.address + e->backup_offset + r->done;
  CUdeviceptr dev = r->address + r->done;
  CUresult res;

  res = to_host ? t->drv->cuMemcpyAsync (host, dev, len, (CUstream) stream)
                : t->drv->cuMemcpyAsync (dev, host, len, (CUstream) stream);
  if (res == CUDA_SUCCESS)
    r->done += len;
  return res;
}

/* Each of @runs copied between its buffers and its backup (@to_host: into it; the bytes from
 * each run's done on), the copies queued on @stream, one cuStreamSynchronize per device. A
 * failing copy stops the queuing; the stream is still waited for (the copies queued before it
 * done), and the error names the copy. */
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
          Run *r = &g_array_index (runs, Run, i);

          if (res != CUDA_SUCCESS || r->done == r->size)
            continue;
          res = copy_run (&t, r, sorted, to_host, r->size - r->done, stream);
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

void
_memres_sleep_entries_sort (MemresSleepEntry **entries, gsize n)
{
  qsort (entries, n, sizeof *entries, entry_cmp);
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

/* A range [start, end) of device addresses a wake slot told mapped */
typedef struct
{
  guint64 start, end;
} Span;

struct _MemresSleepRestore
{
  GArray *runs;              /* Run, by device and address, each run's done bytes queued */
  MemresSleepEntry **sorted; /* the runs' entries */
  MemresStream stream;
  gsize batch;    /* the least bytes of an early copy that does not end its run; 0: none early */
  GArray *mapped; /* Span, disjoint, by address: what the wake slot told mapped */
  MemresStreamContext t;
  gboolean begun; /* @t's context pushed (the runs are on one device) */
  guint queued;   /* copies queued since the last wait */
  CUresult res;   /* the first early copy that failed (its call: cuMemcpyAsync) */
};

MemresSleepRestore *
_memres_sleep_restore_new (MemresSleepEntry **entries, gsize n, MemresStream stream, gsize batch,
                           GError **error)
{
  MemresSleepRestore *r = g_new0 (MemresSleepRestore, 1);
  gboolean one_device = TRUE;

  r->runs = runs_of (entries, n, TRUE, &r->sorted);
  r->stream = stream;
  r->mapped = g_array_new (FALSE, FALSE, sizeof (Span));
  for (guint i = 1; i < r->runs->len; i++)
    one_device &= g_array_index (r->runs, Run, i).device == g_array_index (r->runs, Run, 0).device;
  /* the context of the copies made current once, before the wake slot maps anything: an early
   * copy is queued from inside the slot, whose own context pushes and pops nest inside it */
  if (batch > 0 && r->runs->len > 0 && one_device)
    {
      if (!_memres_stream_context_begin (&r->t, g_array_index (r->runs, Run, 0).device, stream,
                                         error))
        {
          g_prefix_error (error, "restoring buffers from host memory: ");
          _memres_sleep_restore_free (r);
          return NULL;
        }
      r->begun = TRUE;
      r->batch = batch;
    }
  return r;
}

gsize
_memres_sleep_restore_batch (const MemresSleepRestore *r)
{
  return r->res == CUDA_SUCCESS ? r->batch : 0;
}

/* [start, end) added to r->mapped, merged with the spans it touches; the merged span's index. */
static guint
mapped_add (MemresSleepRestore *r, guint64 start, guint64 end)
{
  GArray *m = r->mapped;
  guint lo = 0, hi = m->len, k;

  /* the first span that ends at or after @start (fast for the spans told in address order) */
  if (m->len > 0 && g_array_index (m, Span, m->len - 1).end < start)
    lo = m->len;
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (g_array_index (m, Span, mid).end < start)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (k = lo; k < m->len && g_array_index (m, Span, k).start <= end; k++)
    {
      start = MIN (start, g_array_index (m, Span, k).start);
      end = MAX (end, g_array_index (m, Span, k).end);
    }
  if (k > lo)
    g_array_remove_range (m, lo, k - lo);
  g_array_insert_val (m, lo, ((Span){ start, end }));
  return lo;
}

void
_memres_sleep_restore_mapped (MemresSleepRestore *r, guint64 address, guint64 size)
{
  const Span *s;
  guint lo = 0, hi, k;

  if (r->batch == 0 || r->res != CUDA_SUCCESS || size == 0)
    return;
  k = mapped_add (r, address, address + size); /* before the array's data is read: it moves */
  s = &g_array_index (r->mapped, Span, k);
  /* the first run that ends after @address: the runs before it gained nothing (so that a span
   * that grows piece by piece costs a look-up per piece, not a walk from its start) */
  hi = r->runs->len;
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      const Run *x = &g_array_index (r->runs, Run, mid);

      if (x->address + x->size <= address)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (guint i = lo; i < r->runs->len; i++)
    {
      Run *x = &g_array_index (r->runs, Run, i);
      guint64 from = x->address + x->done, to = MIN (s->end, x->address + x->size);

      if (x->address >= s->end)
        break;
      /* the bytes from where the run's copies stopped, mapped: queued when they end the run or
       * are a batch (a run larger than a batch goes in pieces, as its memory is mapped) */
      if (from < s->start || from >= to
          || (to < x->address + x->size && to - from < (guint64) r->batch))
        continue;
      r->res = copy_run (&r->t, x, r->sorted, FALSE, to - from, r->stream);
      if (r->res != CUDA_SUCCESS)
        return; /* the wake's end names it (_memres_sleep_restore_finish()) */
      r->queued++;
    }
}

void
_memres_sleep_restore_drain (MemresSleepRestore *r)
{
  CUresult res;

  if (r->queued == 0)
    return;
  r->queued = 0;
  if ((res = r->t.drv->cuStreamSynchronize ((CUstream) r->stream)) != CUDA_SUCCESS)
    {
      g_autoptr (GError) error = NULL;

      memres_cuda_set_error (&error, res, "cuStreamSynchronize");
      memres_cuda_warn_release_failure (error, "sleep: waiting for the restoring copies of a "
                                               "failed wake before its memory goes");
    }
}

gboolean
_memres_sleep_restore_finish (MemresSleepRestore *r, GError **error)
{
  static const char step[] = "restoring buffers from host memory";
  CUresult res = r->res, sync;
  const char *call = "cuMemcpyAsync";

  if (!r->begun)
    return copy_runs (r->runs, r->sorted, FALSE, r->stream, step, error);
  /* the rest of each run (the memory the slot did not tell mapped, or less than a batch of it) */
  for (guint i = 0; res == CUDA_SUCCESS && i < r->runs->len; i++)
    {
      Run *x = &g_array_index (r->runs, Run, i);

      if (x->done < x->size
          && (res = copy_run (&r->t, x, r->sorted, FALSE, x->size - x->done, r->stream))
                 == CUDA_SUCCESS)
        r->queued++;
    }
  /* one wait for every copy, those queued before a failing one too */
  sync = r->t.drv->cuStreamSynchronize ((CUstream) r->stream);
  r->queued = 0;
  if (res == CUDA_SUCCESS && sync != CUDA_SUCCESS)
    {
      res = sync;
      call = "cuStreamSynchronize";
    }
  r->begun = FALSE;
  return _memres_sleep_copy_end (&r->t, res, call, step, error);
}

void
_memres_sleep_restore_free (MemresSleepRestore *r)
{
  if (r == NULL)
    return;
  if (r->begun)
    {
      _memres_sleep_restore_drain (r);
      _memres_stream_context_end (&r->t);
    }
  g_array_unref (r->runs);
  g_array_unref (r->mapped);
  g_free (r->sorted);
  g_free (r);
}

/* --- what the wake slots tell (memres-plugin.h) ----------------------------------------------- */

/* the restore of the memres_resource_wake() this thread is inside, while it calls the wake slots */
static __thread MemresSleepRestore *current;

MemresSleepRestore *
_memres_sleep_restore_set_current (MemresSleepRestore *r)
{
  MemresSleepRestore *was = current;

  current = r;
  return was;
}

/**
 * memres_sleep_call_get_restore_batch:
 *
 * Inside a wake slot (#MemresResourceOps.wake, and the slots below it that
 * memres_upstream_wake() calls): how many bytes the kind should map and grant before it tells
 * them mapped with memres_sleep_call_mapped(), so that the core queues their restoring copies
 * while the kind maps the rest (a wake whose tag slept with %MEMRES_SLEEP_BACKUP:
 * memres_sleep_policy_set_restore_batch(), 64 MiB by default). 0 outside such a wake, and when
 * the core queues nothing early (a batch of 0, buffers on several devices, an early copy that
 * failed): a kind then maps as it likes. Reads a thread-local: no lock, no driver call.
 * Thread-safe.
 *
 * Returns: the bytes of a batch, or 0
 *
 * Since: 2.0
 */
gsize
memres_sleep_call_get_restore_batch (void)
{
  return current != NULL ? _memres_sleep_restore_batch (current) : 0;
}

/**
 * memres_sleep_call_mapped:
 * @address: the device address of the first byte
 * @size: the bytes from @address, mapped with the resource's access granted
 *
 * Inside a wake slot: tells the core that [@address, @address + @size) has memory under it
 * again and the device's access, so that the restoring copies of the bytes of the sleeping
 * buffers there may start now (cuMemcpyAsync() on the wake's stream, in its context) while the
 * kind maps the rest: the whole wake then takes about the longer of the mapping and the copies,
 * not their sum. The core queues the bytes of a run of adjacent buffers once they end the run or
 * are memres_sleep_call_get_restore_batch() bytes; the rest after the slot returns. Tell only
 * memory granted already, in any order, each byte at most once per wake. A kind that tells
 * nothing loses only the overlap. A failing copy is named by the wake's error after the slot
 * returns (the slot goes on). Before the slot releases any memory it told mapped (a failure
 * rolled back), it calls memres_sleep_call_unmapping(). No-op where
 * memres_sleep_call_get_restore_batch() is 0. Not thread-safe across threads: call it on the
 * thread the slot was called on.
 *
 * Since: 2.0
 */
void
memres_sleep_call_mapped (guint64 address, guint64 size)
{
  if (current != NULL)
    _memres_sleep_restore_mapped (current, address, size);
}

/**
 * memres_sleep_call_unmapping:
 *
 * Inside a wake slot that fails after it told memory mapped (memres_sleep_call_mapped()): call
 * it before unmapping or releasing any of that memory. It waits for the restoring copies the
 * core queued (one cuStreamSynchronize() of the wake's stream, when any is queued), so that no
 * copy writes into memory being released; the backups stay for the next wake. A failing wait is
 * logged (memres_cuda_warn_release_failure()): the slot rolls back all the same. No-op outside a
 * wake, or when nothing was queued. Call it on the thread the slot was called on.
 *
 * Since: 2.0
 */
void
memres_sleep_call_unmapping (void)
{
  if (current != NULL)
    _memres_sleep_restore_drain (current);
}
