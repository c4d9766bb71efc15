/* memres - CUDA memory resources
 * retry.c: the `retry` adaptor: when an allocation from below fails for lack of memory
 * (MEMRES_ERROR_OUT_OF_MEMORY, which is also how every kind reports the driver's
 * CUDA_ERROR_OUT_OF_MEMORY: memres_cuda_set_error()), it calls
 * the handlers the application registered (memres_retry_add_handler()), in order, until one
 * says to retry, and tries again, at most `max_retries` times. With no handler registered the
 * default one trims every layer below (memres_resource_trim() to 0) and retries once something
 * was trimmed. A handler runs without locks and may allocate; an allocation through the same
 * layer that runs out of memory inside a handler (on the same thread) fails at once, without
 * handlers (no recursion), while another retry layer runs its own handlers.
 * Allocations pass through unchanged (MEMRES_KIND_PASSES_ALLOCATIONS). Embedded in libmemres
 * for its C API. */
#include <memres/memres-plugin.h>

typedef struct
{
  gatomicrefcount ref;
  guint id;
  MemresOomHandler func;
  gpointer data;
  GDestroyNotify destroy;
} Handler;

typedef struct
{
  guint max_retries;
  GMutex lock;
  GPtrArray *handlers; /* Handler* (a reference each), in registration order */
  guint next_id;
} RetryResource;

/* The layers whose handlers this thread runs, innermost first: a list through the frames of
 * run_handlers() */
typedef struct Running Running;
struct Running
{
  MemresResource *mr;
  const Running *outer;
};

static __thread const Running *running;

/* Whether this thread is running @mr's handlers (an allocation of theirs through @mr must not
 * call them again) */
static gboolean
in_handlers (MemresResource *mr)
{
  for (const Running *r = running; r != NULL; r = r->outer)
    if (r->mr == mr)
      return TRUE;
  return FALSE;
}

static const MemresOptionSpec retry_options[] = {
  { "max_retries", MEMRES_OPTION_INT, "3",
    "times an allocation is tried again after it ran out of memory", NULL, 0, 1000 },
};

static void
handler_unref (gpointer data)
{
  Handler *h = data;

  if (!g_atomic_ref_count_dec (&h->ref))
    return;
  if (h->destroy != NULL)
    h->destroy (h->data);
  g_free (h);
}

static gboolean
retry_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  RetryResource *self = memres_resource_get_private (mr);

  self->max_retries = (guint) memres_options_get_int (options, "max_retries");
  g_mutex_init (&self->lock);
  self->handlers = g_ptr_array_new_with_free_func (handler_unref);
  self->next_id = 1;
  return TRUE;
}

static void
retry_finalize (MemresResource *mr)
{
  RetryResource *self = memres_resource_get_private (mr);

  g_ptr_array_unref (self->handlers);
  g_mutex_clear (&self->lock);
}

/* The default handler: trims every layer below; TRUE when one of them could. */
static gboolean
trim_below (MemresResource *mr)
{
  gboolean trimmed = FALSE;
  MemresResource *layer;

  for (layer = memres_resource_get_upstream (mr); layer != NULL;
       layer = memres_resource_get_upstream (layer))
    {
      g_autoptr (GError) error = NULL;

      /* a layer without a trim slot of its own passes the call down: trim only the layers
       * that have one, each once */
      if (memres_kind_get_ops (memres_resource_get_kind (layer))->trim == NULL)
        continue;
      if (memres_resource_trim (layer, 0, &error))
        trimmed = TRUE;
      else
        g_debug ("retry: trimming layer \"%s\": %s", memres_resource_get_kind_name (layer),
                 error->message);
    }
  return trimmed;
}

/* Runs the handlers for failure @attempt; TRUE when one asks for a retry. */
static gboolean
run_handlers (MemresResource *mr, RetryResource *self, gsize size, guint attempt, const GError *why)
{
  g_autoptr (GPtrArray) snapshot = g_ptr_array_new_with_free_func (handler_unref);
  gboolean retry = FALSE;
  Running me;
  guint i;

  g_mutex_lock (&self->lock);
  for (i = 0; i < self->handlers->len; i++)
    {
      Handler *h = g_ptr_array_index (self->handlers, i);
      g_atomic_ref_count_inc (&h->ref);
      g_ptr_array_add (snapshot, h);
    }
  g_mutex_unlock (&self->lock);

  me.mr = mr;
  me.outer = running;
  running = &me;
  if (snapshot->len == 0)
    retry = trim_below (mr);
  for (i = 0; !retry && i < snapshot->len; i++)
    {
      Handler *h = g_ptr_array_index (snapshot, i);
      retry = h->func (mr, size, attempt, why, h->data);
    }
  running = me.outer;
  return retry;
}

static gboolean
retry_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  RetryResource *self = memres_resource_get_private (mr);
  GError *local = NULL;
  guint attempt;

  for (attempt = 1;; attempt++)
    {
      if (G_LIKELY (memres_upstream_allocate (mr, size, stream, alloc, &local)))
        return TRUE;
      if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY) || in_handlers (mr)
          || attempt > self->max_retries || !run_handlers (mr, self, size, attempt, local))
        break;
      g_clear_error (&local);
    }
  if (attempt > 1 && g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    g_prefix_error (&local, "after %u attempt%s: ", attempt, attempt == 1 ? "" : "s");
  g_propagate_error (error, local);
  return FALSE;
}

static gboolean
retry_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

static void
retry_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  if (mr != NULL)
    memres_fork_mutex (&((RetryResource *) memres_resource_get_private (mr))->lock, phase);
}

static const MemresResourceOps retry_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = retry_init,
  .finalize = retry_finalize,
  .allocate = retry_allocate,
  .deallocate = retry_deallocate,
  .at_fork = retry_at_fork,
};

static const MemresKindInfo retry_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "retry",
  .description = "Adaptor: on out-of-memory, calls handlers that may free memory, then retries",
  .options = retry_options,
  .n_options = G_N_ELEMENTS (retry_options),
  .ops = &retry_ops,
  .instance_size = sizeof (RetryResource),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
};

/**
 * memres_retry_add_handler:
 * @mr: a resource whose stack has a `retry` layer at or below it
 * @handler: (scope notified): called when an allocation through that layer runs out of memory
 * @user_data: passed to @handler
 * @destroy: (nullable): frees @user_data once the handler is removed and no call of it runs
 * @error: return location for a #GError, or %NULL
 *
 * Registers @handler on the first `retry` layer at or below @mr. On an out-of-memory failure
 * the layer calls its handlers in registration order until one returns %TRUE, then tries the
 * allocation again (at most `max_retries` times; then the last error is returned); when all
 * return %FALSE, the allocation fails. Registering a handler replaces the default behaviour
 * (trimming every layer below). Thread-safe; a handler added while another thread's
 * allocation runs its handlers is called from the next failure on.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when the stack has no `retry` layer there; @user_data then
 * stays the caller's (@destroy is not called).
 *
 * Returns: an id for memres_retry_remove_handler() (never 0), or 0 with @error set
 *
 * Since: 1.2
 */
guint
memres_retry_add_handler (MemresResource *mr, MemresOomHandler handler, gpointer user_data,
                          GDestroyNotify destroy, GError **error)
{
  MemresResource *layer;
  RetryResource *self;
  Handler *h;

  g_return_val_if_fail (mr != NULL, 0);
  g_return_val_if_fail (handler != NULL, 0);

  layer = memres_resource_find_layer (mr, "retry", error);
  if (layer == NULL)
    return 0;
  self = memres_resource_get_private (layer);
  h = g_new0 (Handler, 1);
  g_atomic_ref_count_init (&h->ref);
  h->func = handler;
  h->data = user_data;
  h->destroy = destroy;
  g_mutex_lock (&self->lock);
  h->id = self->next_id++;
  g_ptr_array_add (self->handlers, h);
  g_mutex_unlock (&self->lock);
  return h->id;
}

/**
 * memres_retry_remove_handler:
 * @mr: a resource whose stack has a `retry` layer at or below it
 * @id: what memres_retry_add_handler() returned for that layer
 * @error: return location for a #GError, or %NULL
 *
 * Removes a handler; its destroy function runs once no call of it is in progress.
 * Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when the stack has no `retry` layer there or the layer has
 * no handler @id.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_retry_remove_handler (MemresResource *mr, guint id, GError **error)
{
  MemresResource *layer;
  RetryResource *self;
  Handler *found = NULL;
  guint i;

  g_return_val_if_fail (mr != NULL, FALSE);

  layer = memres_resource_find_layer (mr, "retry", error);
  if (layer == NULL)
    return FALSE;
  self = memres_resource_get_private (layer);
  g_mutex_lock (&self->lock);
  for (i = 0; i < self->handlers->len; i++)
    if (((Handler *) g_ptr_array_index (self->handlers, i))->id == id)
      {
        found = g_ptr_array_steal_index (self->handlers, i);
        break;
      }
  g_mutex_unlock (&self->lock);
  if (found == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND, "the retry layer has no handler %u",
                   id);
      return FALSE;
    }
  handler_unref (found);
  return TRUE;
}

static gboolean
retry_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &retry_kind, error);
}

MEMRES_PLUGIN_DEFINE_EMBEDDED (retry, "Out-of-memory retry adaptor, embedded in libmemres",
                               retry_plugin_init);
