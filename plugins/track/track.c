/* memres - CUDA memory resources
 * track.c: the `track` adaptor: records every live allocation that goes through it (size,
 * stream, thread, time, tag (MEMRES_KIND_TAGGED), and with `backtrace=true` the call stack),
 * lists them with
 * memres_track_foreach_live(), and when it is finalized with allocations still live (an
 * adaptor above it that never gave them back) warns with their count and the largest, then
 * releases them. A free that fails below it (and releases nothing) keeps the buffer open, and
 * listed. Allocations pass through unchanged (MEMRES_KIND_PASSES_ALLOCATIONS); the
 * records are kept by address in a hash table under a mutex, each numbered in the order it was
 * made. Embedded in libmemres for its C API. */
#include <memres/memres-plugin.h>

#include <execinfo.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../sdk/frames.h"

#define TRACK_MAX_FRAMES 32

typedef struct
{
  MemresAllocation alloc; /* the upstream's record, for the release at finalize */
  MemresStream stream;
  guint64 seq; /* the order it was made in (the walk's order: times tie, and can go back) */
  guint64 thread;
  gint64 time;
  const char *tag; /* the buffer's (interned), or NULL */
  guint n_frames;
  gpointer frames[]; /* n_frames */
} Record;

typedef struct
{
  gboolean backtrace;
  GMutex lock;
  GHashTable *live; /* address (guint64*) -> Record* (owned) */
  guint64 next_seq; /* under @lock */
} TrackResource;

static const MemresOptionSpec track_options[] = {
  { "backtrace", MEMRES_OPTION_BOOL, "false",
    "record the call stack of each allocation (glibc backtrace(); costs microseconds)", NULL, 0,
    0 },
};

static guint
address_hash (gconstpointer key)
{
  guint64 a = *(const guint64 *) key;

  return (guint) ((a >> 4) ^ (a >> 32));
}

static gboolean
address_equal (gconstpointer a, gconstpointer b)
{
  return *(const guint64 *) a == *(const guint64 *) b;
}

static gboolean
track_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  TrackResource *self = memres_resource_get_private (mr);

  self->backtrace = memres_options_get_bool (options, "backtrace");
  g_mutex_init (&self->lock);
  /* the key points into the record (its alloc.address) */
  self->live = g_hash_table_new_full (address_hash, address_equal, NULL, g_free);
  return TRUE;
}

/* The ending of a noun after the count @n: "1 byte", "2 bytes". */
static const char *
plural (guint64 n)
{
  return n == 1 ? "" : "s";
}

static void
track_finalize (MemresResource *mr)
{
  TrackResource *self = memres_resource_get_private (mr);
  GHashTableIter iter;
  gpointer value;
  guint n = g_hash_table_size (self->live);

  if (n > 0)
    {
      Record *largest = NULL;
      guint64 bytes = 0;

      g_hash_table_iter_init (&iter, self->live);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        {
          Record *r = value;

          bytes += r->alloc.size;
          if (largest == NULL || r->alloc.size > largest->alloc.size)
            largest = r;
        }
      g_warning ("track: resource finalized with %u live allocation%s (%" G_GUINT64_FORMAT
                 " byte%s); the largest: %" G_GSIZE_FORMAT " byte%s at 0x%" G_GINT64_MODIFIER
                 "x, allocated by thread %" G_GUINT64_FORMAT "; releasing them",
                 n, plural (n), bytes, plural (bytes), largest->alloc.size,
                 plural (largest->alloc.size), largest->alloc.address, largest->thread);
      g_hash_table_iter_init (&iter, self->live);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        {
          Record *r = value;
          g_autoptr (GError) error = NULL;

          if (!memres_upstream_deallocate (mr, &r->alloc, r->stream, &error))
            g_warning ("track: releasing 0x%" G_GINT64_MODIFIER "x: %s", r->alloc.address,
                       error->message);
        }
    }
  g_hash_table_unref (self->live);
  g_mutex_clear (&self->lock);
}

static gboolean
track_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  TrackResource *self = memres_resource_get_private (mr);
  gpointer frames[TRACK_MAX_FRAMES];
  guint n_frames = 0;
  Record *r;

  if (self->backtrace)
    n_frames = (guint) MAX (backtrace (frames, TRACK_MAX_FRAMES), 0);
  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    return FALSE;
  r = g_malloc (sizeof (Record) + n_frames * sizeof (gpointer));
  r->alloc = *alloc;
  r->stream = stream;
  r->thread = (guint64) syscall (SYS_gettid);
  r->time = g_get_real_time ();
  r->tag = memres_allocation_get_tag (alloc);
  r->n_frames = n_frames;
  memcpy (r->frames, frames, n_frames * sizeof (gpointer));
  g_mutex_lock (&self->lock);
  r->seq = self->next_seq++;
  g_hash_table_replace (self->live, &r->alloc.address, r);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
track_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  TrackResource *self = memres_resource_get_private (mr);
  guint64 address = alloc->address;
  Record *r = NULL;
  gboolean ok;

  /* Taken out before the free: once freed, another thread may get the same address and its
   * record must not be the one dropped here. */
  g_mutex_lock (&self->lock);
  g_hash_table_steal_extended (self->live, &address, NULL, (gpointer *) &r);
  g_mutex_unlock (&self->lock);
  ok = memres_upstream_deallocate (mr, alloc, stream, error);
  if (ok || alloc->address == 0)
    {
      /* freed, or failed after releasing it (address 0): the core closes the buffer */
      g_free (r);
      return ok;
    }
  /* failed, nothing released: the buffer stays open, its address still taken, and listed */
  if (r != NULL)
    {
      g_mutex_lock (&self->lock);
      g_hash_table_replace (self->live, &r->alloc.address, r);
      g_mutex_unlock (&self->lock);
    }
  return FALSE;
}

/* Accounting per buffer: a resize would move addresses behind the table. */
static void
track_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~MEMRES_MEMORY_RESIZABLE;
}

static void
track_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  if (mr != NULL)
    memres_fork_mutex (&((TrackResource *) memres_resource_get_private (mr))->lock, phase);
}

/* The snapshot slot: every live allocation a used block (its address, size, stream and tag), and
 * with `backtrace=true` its call stack (the return addresses, symbolized by the core later). */
static void
track_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  TrackResource *self = memres_resource_get_private (mr);
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&self->lock);
  g_hash_table_iter_init (&iter, self->live);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      const Record *r = value;

      memres_snapshot_add_tagged_block (layer, r->alloc.address, r->alloc.size, r->stream,
                                        MEMRES_BLOCK_USED, r->tag);
      if (r->n_frames > 0)
        memres_snapshot_add_block_stack (layer, r->alloc.address, r->frames, r->n_frames);
    }
  memres_snapshot_add_figure (layer, "live", g_hash_table_size (self->live));
  g_mutex_unlock (&self->lock);
}

static const MemresResourceOps track_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = track_init,
  .finalize = track_finalize,
  .allocate = track_allocate,
  .deallocate = track_deallocate,
  .query = track_query,
  .at_fork = track_at_fork,
  .snapshot = track_snapshot,
};

static const MemresKindInfo track_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "track",
  .description = "Adaptor: records every live allocation (size, stream, thread, time, stack)",
  .options = track_options,
  .n_options = G_N_ELEMENTS (track_options),
  .ops = &track_ops,
  .instance_size = sizeof (TrackResource),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_TAGGED,
};

/* The order the records were made in (not their times: allocations made within one microsecond
 * have the same, and the real-time clock can be set back). */
static gint
compare_seq (gconstpointer a, gconstpointer b)
{
  const Record *ra = *(Record *const *) a;
  const Record *rb = *(Record *const *) b;

  return ra->seq < rb->seq ? -1 : ra->seq > rb->seq;
}

/* The first of @n frames that is the caller's: past every frame up to the outermost one in
 * libmemres (the slot calls of the layers above and memres_resource_allocate()), as a snapshot
 * and the log cut their stacks; 0 when every frame is memres's (an allocation libmemres made
 * itself: its whole stack, rather than none). */
static guint
first_caller_frame (gpointer const *frames, guint n)
{
  static MemresFrames memres; /* libmemres's code (sdk/frames.h), found once */
  static gsize once;
  guint first;

  if (g_once_init_enter (&once))
    {
      const gconstpointer anchor = (gconstpointer) memres_track_foreach_live;

      memres_frames_init (&memres, &anchor, 1);
      g_once_init_leave (&once, 1);
    }
  first = memres_frames_first_caller (&memres, frames, n);
  return first < n ? first : 0;
}

/**
 * memres_track_foreach_live:
 * @mr: a resource whose stack has a `track` layer at or below it
 * @func: (scope call): called once per live allocation, oldest first, until it returns %FALSE
 * @user_data: passed to @func
 * @error: return location for a #GError, or %NULL
 *
 * Calls @func on every allocation the first `track` layer at or below @mr has seen allocated
 * and not yet freed, in the order they were made (as the layer recorded them: also those made
 * within one microsecond, whose #MemresLiveAllocation.time is the same). The records are copied
 * first: @func runs without any lock held and may allocate and free (what it does is not in
 * this walk). With `backtrace=true`, each record's stack is symbolized (glibc
 * `backtrace_symbols`) for the call, from the caller of memres_resource_allocate() out: the
 * frames of libmemres are left out (every frame up to the outermost one in it), as in a
 * snapshot and the `log` adaptor's Backtrace column. No driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when the stack has no `track` layer there.
 *
 * Returns: %TRUE on success (also when @func stopped early)
 *
 * Since: 1.2
 */
gboolean
memres_track_foreach_live (MemresResource *mr, MemresLiveFunc func, gpointer user_data,
                           GError **error)
{
  g_autoptr (GPtrArray) copy = g_ptr_array_new_with_free_func (g_free);
  MemresResource *layer;
  TrackResource *self;
  GHashTableIter iter;
  gpointer value;
  guint i;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (func != NULL, FALSE);

  layer = memres_resource_find_layer (mr, "track", error);
  if (layer == NULL)
    return FALSE;
  self = memres_resource_get_private (layer);
  g_mutex_lock (&self->lock);
  g_hash_table_iter_init (&iter, self->live);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Record *r = value;
      g_ptr_array_add (copy, g_memdup2 (r, sizeof (Record) + r->n_frames * sizeof (gpointer)));
    }
  g_mutex_unlock (&self->lock);
  g_ptr_array_sort (copy, compare_seq);

  for (i = 0; i < copy->len; i++)
    {
      Record *r = g_ptr_array_index (copy, i);
      g_autofree char *text = NULL;
      MemresLiveAllocation live = {
        .address = r->alloc.address,
        .size = r->alloc.size,
        .stream = r->stream,
        .thread = r->thread,
        .time = r->time,
      };

      guint first = r->n_frames > 0 ? first_caller_frame (r->frames, r->n_frames) : 0;

      if (r->n_frames > 0)
        {
          char **symbols = backtrace_symbols (r->frames + first, (int) (r->n_frames - first));
          if (symbols != NULL)
            {
              GString *str = g_string_new (NULL);
              for (guint f = 0; f < r->n_frames - first; f++)
                g_string_append_printf (str, "%s\n", symbols[f]);
              free (symbols);
              text = g_string_free (str, FALSE);
            }
        }
      live.backtrace = text;
      if (!func (&live, user_data))
        break;
    }
  return TRUE;
}

static gboolean
track_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &track_kind, error);
}

MEMRES_PLUGIN_DEFINE_EMBEDDED (track, "Allocation tracking adaptor, embedded in libmemres",
                               track_plugin_init);
