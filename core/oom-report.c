/* memres - CUDA memory resources
 * oom-report.c: the report an out-of-memory error carries when it reaches the application, and
 * the last one kept for it to ask for (memres_resource_get_oom_report()). Built only at the top
 * of the stack, when the error leaves memres_resource_allocate() or memres_buffer_resize(): an
 * adaptor that catches out-of-memory below (the cache's flush, retry) gets the plain error and
 * pays for no report. The report is one paragraph appended to the error's message: the verdict
 * (limit, too large, fragmentation or exhausted) with its figures, what each layer holds (its
 * statistics, and what its explain_oom slot adds: free bytes, the largest free block, a limit), the
 * device's free and total bytes (cuMemGetInfo) and the one remedy that fits. The core names no
 * kind: each layer is named by its kind, and a layer's own remedy line replaces the core's
 * words when the verdict is its. With the report, the snapshot of the stack at the failure
 * (snapshot.c): kept beside it (memres_resource_get_oom_snapshot()) and written to the file
 * $MEMRES_OOM_SNAPSHOT names. */
#include "memres-private.h"
#include "../sdk/file-writer.h"

#include <sys/sysinfo.h>
#include <unistd.h>

static GMutex report_lock; /* MemresResource.oom_report of every resource */

typedef enum
{
  VERDICT_EXHAUSTED,
  VERDICT_TOO_LARGE, /* more than any memory (above G_MAXSSIZE) or than the device (or, for host
                      * memory, the host) has in all */
  VERDICT_FRAGMENTATION,
  VERDICT_LIMIT,
  VERDICT_LAYER, /* the layer's own words (MemresOomFigures.verdict) */
} Verdict;

/* One layer of the stack as the report sees it. */
typedef struct
{
  MemresResource *mr;
  MemresOomFigures f;
  gboolean has_stats; /* the statistics are the layer's own, not its upstream's */
  MemresStats stats;
} Layer;

/* fork(): the lock is taken on the failure path only, never around a call of anything else */
static void
reports_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&report_lock, phase);
}

/* Whether @n / @div printed with one decimal reads as a whole number ("4.0") that it is not. */
static gboolean
reads_whole (guint64 n, guint64 div)
{
  return n % div != 0 && (guint64) ((double) n / (double) div * 10 + 0.5) % 10 == 0;
}

/* @n bytes in words: "1 byte", "512 bytes", "128 KiB", "31.5 MiB", "4094 MiB" (not "4.0 GiB").
 * A figure that reads as whole in no unit (2^64 - 1 is "16.0 EiB", and 16383.99... PiB) is
 * given in exact bytes, the rounded figure beside it: "18446744073709551615 bytes (16.0 EiB)". */
static void
append_bytes (GString *s, guint64 n)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  guint64 div = 1024;
  guint u = 0;

  if (n < 1024)
    {
      g_string_append_printf (s, "%" G_GUINT64_FORMAT " byte%s", n, n == 1 ? "" : "s");
      return;
    }
  while (u + 1 < G_N_ELEMENTS (units) && n / div >= 1024)
    {
      div *= 1024;
      u++;
    }
  /* not a whole number that would read as one ("4.0 GiB" for 4094 MiB): the unit below, or
   * the exact bytes where that reads as whole too ("16384.0 PiB" for 2^64 - 1) */
  if (reads_whole (n, div))
    {
      if (u == 0 || reads_whole (n, div / 1024))
        {
          g_string_append_printf (s, "%" G_GUINT64_FORMAT " bytes (%.1f %s)", n,
                                  (double) n / (double) div, units[u]);
          return;
        }
      div /= 1024;
      u--;
    }
  if (n % div == 0)
    g_string_append_printf (s, "%" G_GUINT64_FORMAT " %s", n / div, units[u]);
  else
    g_string_append_printf (s, "%.1f %s", (double) n / (double) div, units[u]);
}

static gboolean
known (guint64 figure)
{
  return figure != MEMRES_OOM_UNKNOWN;
}

/* The layer's free bytes: what its slot said, else what its statistics hold beyond its use. */
static guint64
layer_cached (const Layer *l)
{
  if (known (l->f.cached))
    return l->f.cached;
  if (l->has_stats && l->stats.reserved_current > l->stats.used_current)
    return l->stats.reserved_current - l->stats.used_current;
  return 0;
}

/* Fills @l for @mr: its statistics when they are its own, its explain_oom slot's figures. */
static void
layer_read (Layer *l, MemresResource *mr, gsize size)
{
  memset (l, 0, sizeof *l);
  l->mr = mr;
  l->f.struct_size = sizeof l->f;
  l->f.request = size;
  l->f.cached = l->f.largest_free = l->f.limit = l->f.limit_used = l->f.refused
      = MEMRES_OOM_UNKNOWN;
  l->has_stats = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (get_stats), FALSE) == mr
                 && memres_resource_get_stats (mr, &l->stats, NULL);
  if (mr->ops->explain_oom != NULL && !_memres_resource_is_inherited (mr))
    mr->ops->explain_oom (mr, &l->f);
}

/* Whether the stack's memory is the device's own, which cannot hold more than the device's
 * total: device-accessible memory of a device that the host cannot reach (managed memory
 * oversubscribes the device; page-locked and host-located memory are the host's). */
static gboolean
memory_is_device_only (const MemresResource *base)
{
  MemresMemoryFlags flags = base->info.flags;

  return base->info.device >= 0 && (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE)
         && !(flags & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED));
}

/* Whether the stack's memory is the host's: host-accessible memory that is not managed (pageable
 * or page-locked host memory, a pool located on the host), which cannot hold more than the host's
 * memory and swap together. */
static gboolean
memory_is_host (const MemresResource *base)
{
  MemresMemoryFlags flags = base->info.flags;

  return (flags & MEMRES_MEMORY_HOST_ACCESSIBLE) && !(flags & MEMRES_MEMORY_MANAGED);
}

/* The host's memory and swap together in bytes (sysinfo()), 0 when not known. */
static guint64
host_total (void)
{
  struct sysinfo si;

  if (sysinfo (&si) != 0)
    return 0;
  return ((guint64) si.totalram + (guint64) si.totalswap) * MAX (si.mem_unit, 1u);
}

/* The verdict and the layer it is about (NULL for exhausted and too large): a request no
 * memory can hold (above G_MAXSSIZE) or larger than the whole memory of the stack (@whole: the
 * device's where the stack's memory is the device's, the host's memory and swap where it is the
 * host's; 0 when not known), which no raised limit, no
 * trim and no kind would serve; else a layer's own verdict, a layer that refused the request
 * or whose limit leaves less than it, else one whose free bytes would serve it but not in one
 * block, else exhaustion. */
static Verdict
judge (Layer *layers, guint n, gsize size, guint64 whole, Layer **culprit)
{
  /* first: no limit raised, no address space or trim makes such a request fit */
  *culprit = NULL;
  if (size > G_MAXSSIZE || (whole > 0 && size > whole))
    return VERDICT_TOO_LARGE;
  for (guint i = 0; i < n; i++)
    if (layers[i].f.verdict != NULL)
      {
        *culprit = &layers[i];
        return VERDICT_LAYER;
      }
  for (guint i = 0; i < n; i++)
    {
      MemresOomFigures *f = &layers[i].f;

      if (known (f->refused)
          || (known (f->limit) && known (f->limit_used)
              && f->limit - MIN (f->limit, f->limit_used) < size))
        {
          *culprit = &layers[i];
          return VERDICT_LIMIT;
        }
    }
  for (guint i = 0; i < n; i++)
    if (known (layers[i].f.largest_free) && layers[i].f.largest_free < size
        && layer_cached (&layers[i]) >= size)
      {
        *culprit = &layers[i];
        return VERDICT_FRAGMENTATION;
      }
  *culprit = NULL;
  return VERDICT_EXHAUSTED;
}

/* What a layer holds, in a clause: "`cache` holds 64 MiB (32 MiB used, 32 MiB cached, largest
 * free block 128 KiB)", "`limit` allows 8 MiB, 7 MiB in use". FALSE when it has nothing to say. */
static gboolean
append_layer (GString *s, const Layer *l)
{
  const char *name = l->mr->kind->name;
  gboolean said = FALSE;

  if (l->has_stats)
    {
      g_string_append_printf (s, "`%s` holds ", name);
      append_bytes (s, MAX (l->stats.reserved_current, l->stats.used_current));
      g_string_append (s, " (");
      append_bytes (s, l->stats.used_current);
      g_string_append (s, " used, ");
      append_bytes (s, layer_cached (l));
      g_string_append (s, " cached");
      if (known (l->f.largest_free))
        {
          g_string_append (s, ", largest free block ");
          append_bytes (s, l->f.largest_free);
        }
      g_string_append_c (s, ')');
      said = TRUE;
    }
  if (known (l->f.limit))
    {
      g_string_append_printf (s, "%s`%s` allows ", said ? ", " : "", name);
      append_bytes (s, l->f.limit);
      if (known (l->f.limit_used))
        {
          g_string_append (s, ", ");
          append_bytes (s, l->f.limit_used);
          g_string_append (s, " in use");
        }
      said = TRUE;
    }
  if (l->f.figures != NULL)
    {
      g_string_append_printf (s, "%s%s%s", said ? ", " : "`", said ? "" : name, said ? "" : "`: ");
      g_string_append (s, l->f.figures);
      said = TRUE;
    }
  return said;
}

static void
append_verdict (GString *s, Verdict verdict, const Layer *culprit, gsize size, gboolean have_device,
                guint64 dev_free, guint64 dev_total, guint64 whole, gboolean host,
                const Layer *base)
{
  switch (verdict)
    {
    case VERDICT_LAYER:
      g_string_append (s, culprit->f.verdict);
      break;
    case VERDICT_LIMIT:
      g_string_append_printf (s, "limit: `%s` allows ", culprit->mr->kind->name);
      append_bytes (s, culprit->f.limit);
      g_string_append (s, ", ");
      append_bytes (s, culprit->f.limit_used);
      g_string_append (s, " in use");
      if (known (culprit->f.refused) && culprit->f.refused != size)
        {
          g_string_append (s, ", ");
          append_bytes (s, culprit->f.refused);
          g_string_append (s, " refused for a request of ");
          append_bytes (s, size);
        }
      break;
    case VERDICT_TOO_LARGE:
      g_string_append (s, "too large: the request of ");
      append_bytes (s, size);
      if (size > G_MAXSSIZE)
        g_string_append (s, " is more than any memory holds (at most 2^63 - 1 bytes)");
      else
        {
          g_string_append_printf (s, " is more than the %s has in all (", host ? "host" : "device");
          append_bytes (s, whole);
          g_string_append (s, host ? " of memory and swap)" : ")");
        }
      break;
    case VERDICT_FRAGMENTATION:
      g_string_append (s, "fragmentation: ");
      append_bytes (s, layer_cached (culprit));
      g_string_append_printf (s, " free in `%s`, largest block ", culprit->mr->kind->name);
      append_bytes (s, culprit->f.largest_free);
      g_string_append (s, ", request ");
      append_bytes (s, size);
      break;
    case VERDICT_EXHAUSTED:
      g_string_append (s, "exhausted: ");
      if (have_device)
        {
          g_string_append (s, "the device has ");
          append_bytes (s, dev_free);
          g_string_append (s, " free of ");
          append_bytes (s, dev_total);
        }
      else
        {
          g_string_append_printf (s, "`%s` could not get ", base->mr->kind->name);
          append_bytes (s, size);
          break;
        }
      g_string_append (s, ", request ");
      append_bytes (s, size);
      /* more free than asked for, and still out of memory: the layers below map the device's
       * memory in pieces (a pool's chunks, a mapping's granules) larger than what is free */
      if (dev_free >= size)
        g_string_append (s, ": more than the request is free, but not in the pieces the memory "
                            "below takes (a pool or a mapping takes the device's memory in "
                            "granules, 2 MiB on most devices)");
      break;
    }
}

static void
append_remedy (GString *s, Verdict verdict, const Layer *culprit, gsize size, gboolean host,
               guint64 cached_total)
{
  g_string_append (s, " Remedy: ");
  if (culprit != NULL && culprit->f.remedy != NULL)
    g_string_append (s, culprit->f.remedy);
  else if (verdict == VERDICT_TOO_LARGE && size > G_MAXSSIZE)
    /* no trim or kind helps: such a size is a count gone wrong (a negative one made unsigned,
     * an overflow) far more often than a wish */
    g_string_append (s, "check how the size was computed: a negative or overflowed count "
                        "read as an unsigned size asks for this much");
  else if (verdict == VERDICT_TOO_LARGE && host)
    g_string_append (s, "no trim or kind makes the host larger: split the request into pieces "
                        "the host can hold, or look at how its size was computed");
  else if (verdict == VERDICT_TOO_LARGE)
    g_string_append (s, "no trim or kind makes the device larger: split the request into "
                        "pieces the device can hold, or use memory that can exceed the "
                        "device's (managed memory, or page-locked host memory)");
  else if (verdict == VERDICT_LIMIT)
    g_string_append_printf (s, "raise the limit of `%s`, or free some of what it has in use",
                            culprit->mr->kind->name);
  else if (verdict == VERDICT_LAYER)
    g_string_append_printf (s, "free some of what `%s` holds", culprit->mr->kind->name);
  else if (verdict == VERDICT_FRAGMENTATION)
    g_string_append_printf (s,
                            "a kind that does not strand free memory in blocks smaller than the "
                            "request, below or in place of `%s`",
                            culprit->mr->kind->name);
  else if (cached_total > 0)
    {
      g_string_append (s, "trim (memres_resource_trim()) the ");
      append_bytes (s, cached_total);
      g_string_append (s, " this stack holds unused, and what other resources of the memory "
                          "hold, or free memory held elsewhere");
    }
  else
    g_string_append (s, "trim (memres_resource_trim()) what other resources of the memory hold "
                        "unused, or free memory held elsewhere; nothing is cached in this stack");
  g_string_append_c (s, '.');
}

/* The snapshot at the failure, written to the file $MEMRES_OOM_SNAPSHOT names (replaced
 * whole by sdk/file-writer.c: written beside it, then renamed; a link followed; a FIFO, a
 * device, a directory refused), when it is set and not empty; "%p" in it is the process id. A
 * file that cannot be written is a warning, never a second error. */
static void
write_snapshot_file (const char *snapshot)
{
  const char *name = g_getenv ("MEMRES_OOM_SNAPSHOT");
  g_autofree char *path = NULL;
  g_autofree char *pid = NULL;
  g_autoptr (GError) local = NULL;
  GString *p;

  if (name == NULL || name[0] == '\0')
    return;
  p = g_string_new (name);
  pid = g_strdup_printf ("%d", (int) getpid ());
  g_string_replace (p, "%p", pid, 0);
  path = g_string_free (p, FALSE);
  if (!memres_file_replace (path, snapshot, -1, &local))
    g_warning ("memres: cannot write the out-of-memory snapshot to MEMRES_OOM_SNAPSHOT: %s",
               local->message);
}

void
_memres_oom_report (MemresResource *mr, gsize size, GError *error)
{
  static gsize fork_part_once;
  Layer layers[MEMRES_STACK_MAX_LAYERS];
  Layer *culprit;
  GString *s;
  guint n = 0;
  guint64 cached_total = 0, dev_free = 0, dev_total = 0, whole = 0;
  gboolean have_device, host = FALSE, said = FALSE;
  Verdict verdict;
  char *old, *old_snapshot, *snapshot;
  gsize len;

  if (g_once_init_enter (&fork_part_once))
    {
      _memres_fork_add_part (MEMRES_FORK_REPORTS, reports_fork);
      g_once_init_leave (&fork_part_once, 1);
    }
  for (MemresResource *l = mr; l != NULL && n < G_N_ELEMENTS (layers); l = l->upstream)
    layer_read (&layers[n++], l, size);
  for (guint i = 0; i < n; i++)
    cached_total += layer_cached (&layers[i]);
  have_device = _memres_device_mem_info (layers[n - 1].mr, &dev_free, &dev_total);
  if (have_device && memory_is_device_only (layers[n - 1].mr))
    whole = dev_total;
  else if (memory_is_host (layers[n - 1].mr))
    {
      whole = host_total ();
      host = whole > 0;
    }
  verdict = judge (layers, n, size, whole, &culprit);

  s = g_string_new (error->message);
  len = s->len;
  while (len > 0 && (s->str[len - 1] == '.' || g_ascii_isspace (s->str[len - 1])))
    len--;
  g_string_truncate (s, len);
  g_string_append (s, ". Out of memory, ");
  append_verdict (s, verdict, culprit, size, have_device, dev_free, dev_total, whole, host,
                  &layers[n - 1]);
  g_string_append (s, ". Held: ");
  for (guint i = 0; i < n; i++)
    {
      gsize before = s->len;

      if (said)
        g_string_append (s, "; ");
      if (append_layer (s, &layers[i]))
        said = TRUE;
      else
        g_string_truncate (s, before);
    }
  if (have_device)
    {
      g_string_append_printf (s, "%sdevice %d has ", said ? "; " : "",
                              layers[n - 1].mr->info.device);
      append_bytes (s, dev_free);
      g_string_append (s, " free of ");
      append_bytes (s, dev_total);
      said = TRUE;
    }
  if (!said)
    g_string_append (s, "nothing the layers can say");
  g_string_append_c (s, '.');
  append_remedy (s, verdict, culprit, size, host, cached_total);
  for (guint i = 0; i < n; i++)
    {
      g_free (layers[i].f.figures);
      g_free (layers[i].f.remedy);
      g_free (layers[i].f.verdict);
    }

  g_free (error->message);
  error->message = g_string_free (s, FALSE);
  snapshot = _memres_snapshot_build_for_oom (mr, error->message);
  write_snapshot_file (snapshot);
  g_mutex_lock (&report_lock);
  old = mr->oom_report;
  mr->oom_report = g_strdup (error->message);
  old_snapshot = mr->oom_snapshot;
  mr->oom_snapshot = snapshot;
  g_mutex_unlock (&report_lock);
  g_free (old);
  g_free (old_snapshot);
}

/* A copy of what the last report left in *@field (the report or its snapshot), under the lock. */
static char *
kept_copy (char *const *field)
{
  char *copy;

  g_mutex_lock (&report_lock);
  copy = g_strdup (*field);
  g_mutex_unlock (&report_lock);
  return copy;
}

/**
 * memres_resource_get_oom_report:
 * @mr: a #MemresResource
 *
 * The message of the last %MEMRES_ERROR_OUT_OF_MEMORY that an allocation through @mr
 * (memres_resource_allocate(), memres_buffer_resize() of one of its buffers) returned, with its
 * report: one paragraph giving the verdict in words ("limit: `limit` allows 8 GiB, 7.9 GiB in use";
 * "fragmentation: 3.1 GiB free in `cache`, largest block 512 MiB, request 1 GiB"; "exhausted: the
 * device has 200 MiB free of 80 GiB"; "too large: the request of 100 GiB is more than the device
 * has in all (80 GiB)", for device memory, than the host's memory and swap together (sysinfo()),
 * for host memory, or than any memory holds, for a size above %G_MAXSSIZE: judged first, since
 * no raised limit or trim serves it), what each layer holds (used, cached and
 * reserved bytes from memres_resource_get_stats(), and what each layer's explain_oom slot adds: the
 * largest free block, a limit), the device's free and total bytes (cuMemGetInfo(), for device
 * memory) and the one remedy that fits (trim; a kind that does not strand memory; raise the limit;
 * split a request larger than the device or the host, or check how a size above %G_MAXSSIZE was
 * computed). The same text is the error's message; this keeps it for a caller that passed no
 * #GError or asks later, from any thread. Out-of-memory errors that an adaptor caught below the top
 * of the stack (the `cache` adaptor's flush, `retry`) make no report.
 *
 * Thread-safe.
 *
 * Returns: (transfer full) (nullable): the report (free it with `g_free`), or %NULL when no
 *   allocation through @mr ran out of memory yet
 *
 * Since: 2.0
 */
char *
memres_resource_get_oom_report (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);

  return kept_copy (&mr->oom_report);
}

/**
 * memres_resource_get_oom_snapshot:
 * @mr: a #MemresResource
 *
 * The snapshot (memres_resource_snapshot()) of @mr's stack taken when the last
 * %MEMRES_ERROR_OUT_OF_MEMORY of an allocation through @mr reached the application: the one
 * whose report memres_resource_get_oom_report() returns, taken right after the failure. Taken
 * only for the error that reaches the caller (never for one an adaptor catches below the top).
 * When the environment variable `MEMRES_OOM_SNAPSHOT` names a file (`%p` in it becomes the
 * process id), each such snapshot is also written there, replacing the file whole (written
 * beside it, then renamed; a symbolic link is followed to the regular file it leads to); a
 * directory, a FIFO, a device such as /dev/null or a link to nothing is refused and left as it
 * is; a file that cannot be written is a warning (`g_warning`), the allocation's error stays
 * what it was.
 *
 * Thread-safe.
 *
 * Returns: (transfer full) (nullable): the JSON text (free it with `g_free`), or %NULL when no
 *   allocation through @mr ran out of memory yet
 *
 * Since: 2.0
 */
char *
memres_resource_get_oom_snapshot (MemresResource *mr)
{
  g_return_val_if_fail (mr != NULL, NULL);

  return kept_copy (&mr->oom_snapshot);
}
