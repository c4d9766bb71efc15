/* counting.c: the `counting` memory resource kind, an out-of-tree memres plugin.
 *
 * A counting resource forwards every allocation to an upstream resource and counts what goes
 * through it: live bytes and their high-water mark (memres_resource_get_stats() and
 * memres_resource_reset_stats()), calls of allocate and deallocate, and allocations refused.
 * It can also cap the bytes live at once.
 *
 *   counting                                   upstream "host", no limit
 *   counting:upstream=dmr                      upstream "dmr" with its defaults
 *   counting:upstream=dmr:device=1;release_threshold=1GiB,limit=4GiB
 *
 * Options:
 *   upstream  the spec of the upstream resource. A spec's options are separated by ',', which
 *             cannot appear inside a value, so write ';' between the upstream's options: each
 *             ';' becomes ',' before the upstream is created. One level of nesting only.
 *   limit     the most bytes live at once (requested sizes); beyond it allocate fails with
 *             MEMRES_ERROR_OUT_OF_MEMORY. Default `max`: no limit.
 *
 * The allocate and deallocate call counts have no field in MemresStats: they are logged, as
 * structured fields, when the resource is finalized (see log_counts()).
 *
 * Everything here is static except the one symbol MEMRES_PLUGIN_DEFINE() exports. */
#include <memres/memres-plugin.h>

/* The private data of one counting resource (MemresKindInfo.instance_size bytes, zero-filled
 * by the core, reached with memres_resource_get_private()). */
typedef struct
{
  MemresResource *upstream; /* owned; set in init, dropped in finalize */
  guint64 limit;            /* bytes; G_MAXUINT64 for none */

  GMutex lock; /* protects the counters: slots run concurrently on any thread */
  guint64 live_bytes;
  guint64 high_bytes;
  guint64 n_allocate;   /* successful allocations */
  guint64 n_deallocate; /* deallocations */
  guint64 n_failed;     /* refused allocations (limit or upstream) */
} Counting;

static const MemresOptionSpec counting_options[] = {
  {
      .name = "upstream",
      .type = MEMRES_OPTION_STRING,
      .default_value = "host",
      .doc = "spec of the resource to forward to, ';' between its options",
  },
  {
      .name = "limit",
      .type = MEMRES_OPTION_SIZE,
      .default_value = "max",
      .doc = "most bytes live at once; more fails with out-of-memory",
  },
};

static gboolean
counting_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Counting *self = memres_resource_get_private (mr);
  /* The options are valid during init only: copy what is kept. */
  g_autofree char *spec = g_strdup (memres_options_get_string (options, "upstream"));

  g_strdelimit (spec, ";", ',');
  self->upstream = memres_resource_new (spec, error);
  if (self->upstream == NULL)
    {
      /* Nothing was acquired: the core frees the instance without calling finalize. */
      g_prefix_error (error, "counting: upstream \"%s\": ", spec);
      return FALSE;
    }
  self->limit = memres_options_get_size (options, "limit");
  g_mutex_init (&self->lock);
  return TRUE;
}

/* Logs the call counts with structured fields that a program can read through its own log
 * writer (g_log_set_writer_func()); shown with G_MESSAGES_DEBUG=memres-counting. */
static void
log_counts (Counting *self)
{
  char allocations[24], deallocations[24], failed[24], high[24];

  g_snprintf (allocations, sizeof allocations, "%" G_GUINT64_FORMAT, self->n_allocate);
  g_snprintf (deallocations, sizeof deallocations, "%" G_GUINT64_FORMAT, self->n_deallocate);
  g_snprintf (failed, sizeof failed, "%" G_GUINT64_FORMAT, self->n_failed);
  g_snprintf (high, sizeof high, "%" G_GUINT64_FORMAT, self->high_bytes);
  g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_DEBUG, "MEMRES_COUNTING_ALLOCATIONS", allocations,
                    "MEMRES_COUNTING_DEALLOCATIONS", deallocations, "MEMRES_COUNTING_FAILED",
                    failed, "MEMRES_COUNTING_HIGH_BYTES", high, "MESSAGE",
                    "counting: %s allocations, %s deallocations, %s refused, high-water %s bytes",
                    allocations, deallocations, failed, high);
}

static void
counting_finalize (MemresResource *mr)
{
  Counting *self = memres_resource_get_private (mr);

  /* Every buffer is gone (each held a reference on this resource): nothing is live. */
  log_counts (self);
  g_mutex_clear (&self->lock);
  g_clear_pointer (&self->upstream, memres_resource_unref);
}

static gboolean
counting_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                   GError **error)
{
  Counting *self = memres_resource_get_private (mr);
  MemresBuffer *buf;
  guint64 live;

  /* Reserve the bytes first, so that concurrent allocations cannot pass the limit together;
   * never call out (into the upstream) with the lock held. */
  g_mutex_lock (&self->lock);
  if (self->live_bytes > self->limit || size > self->limit - self->live_bytes)
    {
      live = self->live_bytes;
      self->n_failed++;
      g_mutex_unlock (&self->lock);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "counting: %" G_GSIZE_FORMAT
                   " more bytes would pass the limit of %" G_GUINT64_FORMAT
                   " bytes (%" G_GUINT64_FORMAT " live)",
                   size, self->limit, live);
      return FALSE;
    }
  self->live_bytes += size;
  g_mutex_unlock (&self->lock);

  buf = memres_resource_allocate (self->upstream, size, stream, error);

  g_mutex_lock (&self->lock);
  if (buf == NULL)
    {
      self->live_bytes -= size;
      self->n_failed++;
      g_mutex_unlock (&self->lock);
      return FALSE;
    }
  /* Count the buffer's size, which an upstream that rounds up makes larger than asked. */
  self->live_bytes += memres_buffer_get_size (buf) - size;
  self->high_bytes = MAX (self->high_bytes, self->live_bytes);
  self->n_allocate++;
  g_mutex_unlock (&self->lock);

  alloc->address = memres_buffer_get_address (buf);
  alloc->size = memres_buffer_get_size (buf);
  alloc->plugin_data = buf; /* the upstream buffer, owned until deallocate */
  return TRUE;
}

static gboolean
counting_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                     GError **error)
{
  Counting *self = memres_resource_get_private (mr);
  MemresBuffer *buf = alloc->plugin_data;
  gboolean ok;

  /* @stream is already resolved; NULL is the legacy default stream here, while NULL to
   * memres_buffer_close() would mean the upstream buffer's own recorded stream. */
  ok = memres_buffer_close (buf, stream != NULL ? stream : MEMRES_STREAM_LEGACY, error);
  memres_buffer_unref (buf);

  /* The allocation is gone whatever close returned: count it as such. */
  g_mutex_lock (&self->lock);
  self->live_bytes -= alloc->size;
  self->n_deallocate++;
  g_mutex_unlock (&self->lock);
  return ok;
}

static void
counting_query (MemresResource *mr, MemresResourceInfo *info)
{
  Counting *self = memres_resource_get_private (mr);

  info->device = memres_resource_get_device (self->upstream);
  /* Only what forwarding allocate and deallocate keeps true: no IPC, no resize. */
  info->flags = memres_resource_get_flags (self->upstream)
                & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE
                   | MEMRES_MEMORY_STREAM_ORDERED);
}

/* used_*: the bytes in this resource's buffers. reserved_*: the upstream's, when it keeps
 * statistics; otherwise the same as used. */
static gboolean
counting_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Counting *self = memres_resource_get_private (mr);
  MemresStats upstream = { 0 };
  GError *local = NULL;
  gboolean have_upstream;

  have_upstream = memres_resource_get_stats (self->upstream, &upstream, &local);
  if (!have_upstream)
    {
      if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_propagate_prefixed_error (error, local, "counting: upstream: ");
          return FALSE;
        }
      g_clear_error (&local);
    }

  g_mutex_lock (&self->lock);
  stats->used_current = self->live_bytes;
  stats->used_high = self->high_bytes;
  g_mutex_unlock (&self->lock);
  stats->reserved_current = have_upstream ? upstream.reserved_current : stats->used_current;
  stats->reserved_high = have_upstream ? upstream.reserved_high : stats->used_high;
  return TRUE;
}

static gboolean
counting_reset_stats (MemresResource *mr, GError **error)
{
  Counting *self = memres_resource_get_private (mr);
  GError *local = NULL;

  g_mutex_lock (&self->lock);
  self->high_bytes = self->live_bytes;
  g_mutex_unlock (&self->lock);

  if (!memres_resource_reset_stats (self->upstream, &local))
    {
      if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_propagate_prefixed_error (error, local, "counting: upstream: ");
          return FALSE;
        }
      g_clear_error (&local);
    }
  return TRUE;
}

static const MemresResourceOps counting_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = counting_init,
  .finalize = counting_finalize,
  .allocate = counting_allocate,
  .deallocate = counting_deallocate,
  .query = counting_query,
  .get_stats = counting_get_stats,
  .reset_stats = counting_reset_stats,
};

static const MemresKindInfo counting_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "counting",
  .description = "Forwards to an upstream resource and counts bytes and calls",
  .options = counting_options,
  .n_options = G_N_ELEMENTS (counting_options),
  .ops = &counting_ops,
  .instance_size = sizeof (Counting),
};

static gboolean
counting_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &counting_kind, error);
}

MEMRES_PLUGIN_DEFINE (counting, "A counting wrapper around any memory resource",
                      counting_plugin_init)
