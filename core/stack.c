/* memres - CUDA memory resources
 * stack.c: stacks of resources, `LAYER[>LAYER]...`: the first layer is what the application
 * calls, every layer but the last an adaptor kind over the layer after it, the last a base kind.
 * A layer is `KIND[:KEY=VALUE,...]` (spec.c) or `@NAME` (config.c). Inside a value a backslash
 * takes the next character literally, so `\>`, `\,` and `\\` put those characters in a value.
 * The stack is validated whole before anything is created, then created from the last layer
 * up, each adaptor receiving the layer below as its upstream (memres_resource_new()); and the
 * upstream calls adaptors make at the allocation level (memres_upstream_allocate()). */
#include "memres-private.h"

#include <string.h>

/* `@a` naming `@b` naming ...: deeper than this is a cycle or absurd */
#define MAX_NAME_DEPTH MEMRES_STACK_MAX_LAYERS

/* Appends the layers of @spec to @layers, expanding `@name` layers (@chain: the names being
 * expanded, for cycles), and to @origins (when not NULL) for each layer where it came from:
 * @origin (NULL for the spec as the application wrote it, else the `@name` it came from, with
 * its definition and file). */
static gboolean
split_into (const char *spec, gboolean expand_names, GPtrArray *chain, GPtrArray *layers,
            GPtrArray *origins, const char *origin, GError **error)
{
  g_auto (GStrv) parts = NULL;
  gsize len = strlen (spec);
  gsize backslashes = 0;
  guint i, n;

  /* a lone backslash at the very end escapes nothing */
  while (backslashes < len && spec[len - 1 - backslashes] == '\\')
    backslashes++;
  if (backslashes % 2 == 1)
    return _memres_set_spec_error (error, spec,
                                   "it ends with a lone '\\' (write '\\\\' for a "
                                   "backslash in a value)");

  parts = _memres_split (spec, '>', TRUE);
  n = g_strv_length (parts);
  for (i = 0; i < n; i++)
    {
      const char *layer = parts[i];

      if (layer[0] == '\0' && n == 1)
        return _memres_set_spec_error (
            error, spec, "it names no kind (expected KIND[:KEY=VALUE,...][>KIND...])");
      if (layer[0] == '\0')
        return _memres_set_spec_error (error, spec, "layer %u of %u is empty (%s)", i + 1, n,
                                       i == n - 1
                                           ? "a trailing '>': the last layer must name a "
                                             "base kind"
                                           : "expected KIND[:KEY=VALUE,...] between two '>'");
      if (layer[0] == '@' && expand_names)
        {
          g_autofree char *named = NULL;
          g_autofree char *file = NULL;
          g_autofree char *from = NULL;
          guint j;

          if (g_ptr_array_find_with_equal_func (chain, layer + 1, g_str_equal, &j))
            {
              g_autoptr (GString) cycle = g_string_new (NULL);

              for (; j < chain->len; j++)
                g_string_append_printf (cycle, "@%s -> ", (char *) g_ptr_array_index (chain, j));
              g_string_append (cycle, layer);
              return _memres_set_spec_error (error, spec, "the named resources form a cycle (%s)",
                                             cycle->str);
            }
          if (chain->len >= MAX_NAME_DEPTH)
            return _memres_set_spec_error (error, spec, "named resources nest more than %d deep",
                                           MAX_NAME_DEPTH);
          named = _memres_config_lookup (layer + 1, &file, error);
          if (named == NULL)
            return FALSE;
          from = g_strdup_printf ("%s (%s, from %s)", layer, named,
                                  file != NULL ? file : "the config file");
          g_ptr_array_add (chain, (gpointer) (layer + 1));
          if (!split_into (named, TRUE, chain, layers, origins, from, error))
            {
              g_prefix_error (error, "%s: ", from);
              return FALSE;
            }
          g_ptr_array_remove_index (chain, chain->len - 1);
        }
      else
        {
          g_ptr_array_add (layers, g_strdup (layer));
          if (origins != NULL)
            g_ptr_array_add (origins, g_strdup (origin));
        }
      if (layers->len > MEMRES_STACK_MAX_LAYERS)
        break;
    }
  /* said once, of the spec the application wrote (a named resource inside may be short) */
  if (layers->len > MEMRES_STACK_MAX_LAYERS && chain->len == 0)
    {
      gboolean named = FALSE;

      for (i = 0; i < n; i++)
        named |= parts[i][0] == '@' && expand_names;
      return _memres_set_spec_error (error, spec, "more than %d layers%s", MEMRES_STACK_MAX_LAYERS,
                                     named ? " once its named resources (@name) are expanded" : "");
    }
  return TRUE;
}

gboolean
_memres_stack_split (const char *spec, gboolean expand_names, GPtrArray **layers,
                     GPtrArray **origins, GError **error)
{
  g_autoptr (GPtrArray) chain = g_ptr_array_new ();
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) from = origins != NULL ? g_ptr_array_new_with_free_func (g_free) : NULL;

  g_return_val_if_fail (spec != NULL, FALSE);

  if (!split_into (spec, expand_names, chain, out, from, NULL, error))
    return FALSE;
  *layers = g_steal_pointer (&out);
  if (origins != NULL)
    *origins = g_steal_pointer (&from);
  return TRUE;
}

gboolean
_memres_stack_check_layer (MemresKind *kind, guint position, guint n_layers, GError **error)
{
  gboolean adaptor = (kind->flags & MEMRES_KIND_ADAPTOR) != 0;
  gboolean last = position + 1 == n_layers;

  if (position + 1 < n_layers && !adaptor)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "kind \"%s\" is a base kind: it can only be the last layer, not layer %u of "
                 "%u (only adaptor kinds go above another layer)",
                 kind->name, position + 1, n_layers);
  else if (last && adaptor && n_layers == 1)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "kind \"%s\" is an adaptor: it needs a resource below it (for example "
                 "\"%s>host\")",
                 kind->name, kind->name);
  else if (last && adaptor)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "kind \"%s\" is an adaptor: it cannot be the last layer (%u of %u); end "
                 "the stack with a base kind",
                 kind->name, position + 1, n_layers);
  else
    return TRUE;
  return FALSE;
}

typedef struct
{
  MemresKind *kind;
  MemresOptions *options;
  char *normalized; /* the layer as memres_resource_to_string() writes it */
} Layer;

static void
layer_clear (Layer *layer)
{
  g_clear_pointer (&layer->options, _memres_options_free);
  g_clear_pointer (&layer->kind, memres_kind_unref);
  g_clear_pointer (&layer->normalized, g_free);
}

/* Parses and validates one layer; errors name it when the stack has more than one. */
static gboolean
layer_prepare (const char *text, guint position, guint n_layers, Layer *layer, GError **error)
{
  g_autofree char *name = NULL;
  g_autoptr (GPtrArray) keys = NULL;
  g_autoptr (GPtrArray) values = NULL;
  g_autofree char *opts = NULL;

  if (!_memres_spec_parse (text, &name, &keys, &values, error))
    goto fail;
  layer->kind = memres_registry_lookup (name, error);
  if (layer->kind == NULL)
    goto fail;
  if (!_memres_stack_check_layer (layer->kind, position, n_layers, error))
    goto fail;
  layer->options = _memres_options_new (layer->kind, keys, values, error);
  if (layer->options == NULL)
    goto fail;
  opts = _memres_options_to_string (layer->options);
  layer->normalized = opts[0] != '\0' ? g_strconcat (name, ":", opts, NULL) : g_strdup (name);
  return TRUE;

fail:
  if (n_layers > 1)
    {
      g_autofree char *shown = _memres_show_input (name != NULL ? name : text);
      g_prefix_error (error, "layer %u of %u (%s\"%s\"): ", position + 1, n_layers,
                      name != NULL ? "kind " : "", shown);
    }
  return FALSE;
}

/**
 * memres_resource_new:
 * @spec: a stack of layers joined by `>`, the first what the application calls, the last a
 *   base kind: `LAYER[>LAYER]...`, each layer `KIND[:KEY=VALUE[,KEY=VALUE]...]` or `@NAME`, such
 *   as "dmr:device=0,release_threshold=1GiB" or "stats>limit:max=8GiB>dmr:device=0"
 * @error: return location for a #GError, or %NULL
 *
 * Creates a memory resource by name: parses @spec, finds each layer's kind (loading its plugin
 * on first use, see memres_registry_lookup()), validates the options against the kind's schema
 * (sizes take bytes, B/KiB/MiB/GiB/TiB/PiB suffixes or `max`; booleans true/false, yes/no, on/off,
 * 1/0; missing keys get their defaults) and runs the kinds' init, from the last layer up: every
 * layer but the last must be an adaptor kind (#MEMRES_KIND_ADAPTOR), which gets the resource
 * below as its upstream (memres_resource_get_upstream()); the last must be a base kind. At most
 * 16 layers. Inside a value, a backslash takes the next character literally (`\,`, `\>`,
 * `\\`), so a value may hold any text. A `@NAME` layer stands for the stack the config file
 * names NAME (see memres_config_list_resources()). Nothing is created unless the whole spec is
 * valid; when a layer's init fails, the layers already created are released. The returned resource
 * is the first layer, holding the rest. Driver calls are the kinds'. Thread-safe.
 *
 * A kind's init (or import_handle) may create resources itself, which may do the same: such
 * creations nest at most 32 deep on a thread. A creation while 32 kinds' inits run on the calling
 * thread, one inside the other, is refused before anything of it is made, so that a kind whose
 * init creates a resource of its own kind (directly, in a stack or through a `@NAME`) fails
 * instead of recursing until the stack overflows (since 2.0).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a malformed spec (an empty layer, `>>`, a trailing
 * `>`, more than 16 layers, an adaptor last, a base kind above another layer), an unknown or
 * repeated key, a missing `=` or a bad value (the message names the layer, by position and
 * kind, the key and what is valid); those of memres_registry_lookup(); for `@NAME`, those of
 * reading the config file (memres_config_list_resources(): %G_FILE_ERROR for one that cannot be
 * read) and %MEMRES_ERROR_NOT_FOUND for an undefined name; whatever a kind's init sets
 * (%MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NO_DEVICE, %MEMRES_CUDA_ERROR, %G_FILE_ERROR for a
 * file it cannot open, such as the `log` adaptor's, with the system's code: %G_FILE_ERROR_AGAIN,
 * flock()'s EWOULDBLOCK, for a file another `log` layer is writing, ...), its domain and code kept
 * under the message's "layer N of M" prefix; %MEMRES_ERROR_FAILED for a creation nested more than
 * 32 deep in kinds' inits (the message names the kind refused and the kind whose init asked).
 *
 * Returns: (transfer full) (nullable): a new resource, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresResource *
memres_resource_new (const char *spec, GError **error)
{
  g_autoptr (GPtrArray) texts = NULL;
  g_autoptr (GPtrArray) origins = NULL;
  Layer layers[MEMRES_STACK_MAX_LAYERS] = { { 0 } };
  MemresResource *upstream = NULL;
  guint n, i;

  g_return_val_if_fail (spec != NULL, NULL);

  if (!_memres_stack_split (spec, TRUE, &texts, &origins, error))
    return NULL;
  n = texts->len;
  g_assert (n >= 1 && n <= MEMRES_STACK_MAX_LAYERS);

  for (i = 0; i < n; i++)
    if (!layer_prepare (g_ptr_array_index (texts, i), i, n, &layers[i], error))
      {
        const char *here = g_ptr_array_index (origins, i);

        /* `@a>host` with @a ending in a base kind: the fault is what follows the name */
        if (error != NULL && *error != NULL && layers[i].kind != NULL && here != NULL && i + 1 < n
            && !(layers[i].kind->flags & MEMRES_KIND_ADAPTOR)
            && g_strcmp0 (here, g_ptr_array_index (origins, i + 1)) != 0)
          {
            char *message = g_strdup_printf ("%s; the named stack ends in a base kind, so "
                                             "nothing can follow it (layer %u comes after it)",
                                             (*error)->message, i + 2);

            g_free ((*error)->message);
            (*error)->message = message;
          }
        goto named;
      }

  for (i = n; i-- > 0;)
    {
      MemresResource *mr = _memres_resource_new_layer (layers[i].kind, layers[i].options, upstream,
                                                       layers[i].normalized, error);
      if (mr == NULL)
        {
          if (n > 1)
            g_prefix_error (error, "layer %u of %u (kind \"%s\"): ", i + 1, n,
                            layers[i].kind->name);
          g_clear_pointer (&upstream, memres_resource_unref);
          goto named;
        }
      upstream = mr; /* holds the layer below, if any */
    }
  goto out;

named:
  /* a layer from a `@name` says which, with its definition and file */
  if (g_ptr_array_index (origins, i) != NULL)
    g_prefix_error (error, "%s: ", (char *) g_ptr_array_index (origins, i));

out:
  for (i = 0; i < n; i++)
    layer_clear (&layers[i]);
  return upstream;
}

/**
 * memres_spec_parse:
 * @spec: a spec, as memres_resource_new() takes it
 * @error: return location for a #GError, or %NULL
 *
 * The layers of @spec as the grammar reads them, without creating anything: no plugin is
 * loaded, no kind's init runs, no file (a `log` layer's) is opened. `@NAME` layers are expanded
 * through the config file (which is read), so that a program can look at what a stack would
 * do before creating it: the file a `log` layer would write, for one. Keys are not checked
 * against the kinds' schemas and missing keys get no defaults (memres_resource_new() does
 * that); a key given twice appears twice. Thread-safe.
 *
 * The result has the type `a(sa{say})`: one `(KIND, OPTIONS)` per layer, the first what the
 * application calls, each value as given with its escapes undone, as a byte string (a value
 * such as a path need not be UTF-8): `g_variant_lookup (options, "path", "^ay", &path)`.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a malformed spec (an empty layer, `>>`, a trailing
 * `>` or `\`, more than 16 layers, a bad kind name or key, a missing `=`, a cycle of names);
 * for `@NAME`, those of reading the config file (%G_FILE_ERROR for one that cannot be read:
 * memres_config_list_resources()) and %MEMRES_ERROR_NOT_FOUND for an undefined name.
 *
 * Returns: (transfer full) (nullable): a new non-floating variant (free with
 *   `g_variant_unref`), or %NULL with @error set
 *
 * Since: 2.0
 */
GVariant *
memres_spec_parse (const char *spec, GError **error)
{
  g_autoptr (GPtrArray) texts = NULL;
  GVariantBuilder builder;
  guint i, j;

  g_return_val_if_fail (spec != NULL, NULL);

  if (!_memres_stack_split (spec, TRUE, &texts, NULL, error))
    return NULL;
  g_variant_builder_init (&builder, G_VARIANT_TYPE ("a(sa{say})"));
  for (i = 0; i < texts->len; i++)
    {
      g_autofree char *kind = NULL;
      g_autoptr (GPtrArray) keys = NULL;
      g_autoptr (GPtrArray) values = NULL;

      if (!_memres_spec_parse (g_ptr_array_index (texts, i), &kind, &keys, &values, error))
        {
          g_variant_builder_clear (&builder);
          return NULL;
        }
      g_variant_builder_open (&builder, G_VARIANT_TYPE ("(sa{say})"));
      g_variant_builder_add (&builder, "s", kind);
      g_variant_builder_open (&builder, G_VARIANT_TYPE ("a{say}"));
      for (j = 0; j < keys->len; j++)
        g_variant_builder_add (&builder, "{s^ay}", (const char *) g_ptr_array_index (keys, j),
                               (const char *) g_ptr_array_index (values, j));
      g_variant_builder_close (&builder);
      g_variant_builder_close (&builder);
    }
  return g_variant_ref_sink (g_variant_builder_end (&builder));
}

/* The cold paths of memres_upstream_allocate() and memres_upstream_deallocate(), out of line
 * so that their hot paths stay a few instructions around the slot call. */
static G_GNUC_NO_INLINE gboolean
upstream_refused (MemresResource *mr, gsize size, GError **error)
{
  if (mr->upstream == NULL)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "kind \"%s\" has no upstream (it is not an adaptor)", mr->kind->name);
  else if (size == 0)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "cannot allocate 0 bytes from an upstream");
  else
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                 "cannot allocate %" G_GSIZE_FORMAT " bytes from a resource of kind \"%s\"", size,
                 mr->upstream->kind->name);
  return FALSE;
}

/* memres_upstream_allocate(), and for memres_upstream_allocate_for_tag() (@for_tag) with the
 * record marked as the tagged buffer's record is */
G_ALWAYS_INLINE static inline gboolean
upstream_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                   gboolean for_tag, GError **error)
{
  MemresResource *up = mr->upstream;

  /* one compare for both 0 and above G_MAXSSIZE */
  if (G_UNLIKELY (up == NULL || size - 1 >= (gsize) G_MAXSSIZE))
    return upstream_refused (mr, size, error);
  memset (alloc, 0, sizeof *alloc);
  /* the mark of a tagged buffer's record (buffer.c) travels with it */
  if (G_UNLIKELY (for_tag || alloc == _memres_thread.call_record))
    alloc->size = MEMRES_ALLOCATION_TAGGED;
  if (!_memres_resource_call_allocate (up, size, stream, alloc, error))
    return FALSE;
  /* the upstream's statistics count what its slot handed out, buffer or not */
  _memres_resource_count_used (up, (gint64) alloc->size);
  return TRUE;
}

/**
 * memres_upstream_allocate:
 * @mr: the adaptor's own instance (the @mr its allocate slot received)
 * @size: bytes, 1 to `G_MAXSSIZE`
 * @stream: the stream the allocation is ordered on, as the adaptor received it
 * @alloc: (out caller-allocates): the record to fill: an adaptor with
 *   %MEMRES_KIND_PASSES_ALLOCATIONS passes the record its allocate slot received
 * @error: return location for a #GError, or %NULL
 *
 * For adaptor kinds: calls the allocate slot of @mr's upstream (memres_resource_get_upstream())
 * for @size bytes, filling @alloc (zero-filled first, but marked %MEMRES_ALLOCATION_TAGGED when it
 * is the record of the tagged buffer whose slot call runs) with the upstream's record, which must
 * go back to memres_upstream_deallocate() exactly once. No #MemresBuffer is created and no
 * reference taken: the adaptor holds its upstream for its whole life. The result is checked as
 * the core checks its own allocate calls (the same code): a slot failing without an error gets
 * one, a record of address 0 or smaller than @size is released and refused. The bytes are counted
 * in the upstream's statistics (memres_resource_get_stats()), as a buffer's are in its
 * resource's, until memres_upstream_deallocate() takes them back. Thread-safe, no lock
 * held: call it from the adaptor's slots on any thread. The driver calls are the upstream's.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT (@mr has no upstream, @size 0),
 * %MEMRES_ERROR_OUT_OF_MEMORY (@size above `G_MAXSSIZE`), %MEMRES_ERROR_FAILED (an upstream
 * that returned no memory), and whatever the upstream's allocate sets
 * (%MEMRES_ERROR_OUT_OF_MEMORY, a %MEMRES_CUDA_ERROR, ...).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
MEMRES_HOT gboolean
memres_upstream_allocate (MemresResource *mr, gsize size, MemresStream stream,
                          MemresAllocation *alloc, GError **error)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (alloc != NULL, FALSE);

  return upstream_allocate (mr, size, stream, alloc, FALSE, error);
}

/* memres_upstream_allocate_for_tag() (@allocate) and memres_upstream_deallocate_for_tag(): the
 * upstream call with @alloc the thread's record of @tag (tags.h) for its duration; no tag: the
 * plain call */
static gboolean
upstream_for_tag (MemresResource *mr, gboolean allocate, gsize size, MemresStream stream,
                  const char *tag, MemresAllocation *alloc, GError **error)
{
  g_autoptr (GError) local = NULL;
  MemresTagRecord was = { NULL, 0 };
  guint id = 0;
  gboolean ok;

  if (tag != NULL && (id = _memres_tag_find (tag, &local)) == 0)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local),
                                  "memory of its own for a tag from an upstream: ");
      return FALSE;
    }
  if (id != 0)
    was = _memres_tag_record_set ((MemresTagRecord){ alloc, id });
  ok = allocate ? upstream_allocate (mr, size, stream, alloc, id != 0, error)
                : memres_upstream_deallocate (mr, alloc, stream, error);
  if (id != 0)
    _memres_tag_record_set (was);
  return ok;
}

/**
 * memres_upstream_allocate_for_tag:
 * @mr: the adaptor's own instance (the @mr its slot received)
 * @size: bytes, 1 to `G_MAXSSIZE`
 * @stream: the stream the allocation is ordered on
 * @tag: (nullable): the tag the memory serves: a name used as a tag in this process
 *   (memres_allocation_get_tag() gives the buffer's), or %NULL for none (then this is
 *   memres_upstream_allocate())
 * @alloc: (out caller-allocates): the record to fill, the adaptor's own (not the record its slot
 *   received)
 * @error: return location for a #GError, or %NULL
 *
 * memres_upstream_allocate() for memory of the adaptor's own that serves the buffers of one tag
 * only, as a caching layer's chunk does in a stack that can sleep (memres-sleep.h): @alloc
 * arrives at the upstream's allocate slot marked %MEMRES_ALLOCATION_TAGGED, and for the duration
 * of the call memres_allocation_get_tag() on @alloc returns @tag, in the upstream's slot and in
 * the slots of the layers below it that @alloc is passed on to. So the kinds below place and
 * describe the memory by its tag: `vmm` tells its segment (#MemresSegment.tag, its events and
 * memres_lookup()) with @tag; the `log` adaptor writes it. The layers that count per tag
 * (memres_resource_get_tag_counts()) do not count it under @tag: the buffers carved from it are
 * counted under theirs. Give the memory back with memres_upstream_deallocate_for_tag() and the
 * same @tag. Thread-safe, no lock held; the tag is the calling thread's for the call only (calls
 * nest). The driver calls are the upstream's.
 *
 * Errors: %MEMRES_TAG_ERROR_INVALID (@tag is not a tag's name), %MEMRES_TAG_ERROR_UNKNOWN (@tag
 * was never used in this process), nothing allocated; those of memres_upstream_allocate().
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_upstream_allocate_for_tag (MemresResource *mr, gsize size, MemresStream stream,
                                  const char *tag, MemresAllocation *alloc, GError **error)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (alloc != NULL, FALSE);

  return upstream_for_tag (mr, TRUE, size, stream, tag, alloc, error);
}

/**
 * memres_upstream_deallocate:
 * @mr: the adaptor's own instance (the @mr its deallocate slot received)
 * @alloc: a record memres_upstream_allocate() filled for @mr, not yet deallocated
 * @stream: the stream the free is ordered on, as the adaptor received it
 * @error: return location for a #GError, or %NULL
 *
 * For adaptor kinds: calls the deallocate slot of @mr's upstream on @alloc, its result checked
 * as the core checks its own deallocate calls. As the deallocate slot's contract says, a failure
 * released nothing and leaves @alloc as it was (pass it again later), unless the upstream set
 * @alloc->address to 0 (released half-way: gone). An upstream that breaks that contract, failing
 * without setting an error or changing the address to another nonzero value, is reported as
 * memres_buffer_close() reports it (a critical warning, `contract_breaches` in
 * memres_resource_get_counters()) and its allocation taken as gone, never deallocated again.
 * Whenever the allocation is gone (success, half-way, breach) @alloc is zeroed (read what you
 * need of it before): a record passed again is refused instead of freeing the memory twice. So
 * after a failure, @alloc->address as it was means kept, 0 means gone. Thread-safe, no lock
 * held. The driver calls are the upstream's.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT (@mr has no upstream; @alloc is a zeroed record, one
 * already freed: a plugin bug); %MEMRES_ERROR_FAILED for an upstream that broke the contract
 * without an error (since 2.0); whatever the upstream's deallocate sets (a
 * %MEMRES_CUDA_ERROR).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
MEMRES_HOT gboolean
memres_upstream_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                            GError **error)
{
  MemresResource *up;
  guint64 address;
  gsize size;
  gboolean ok;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (alloc != NULL, FALSE);

  up = mr->upstream;
  if (G_UNLIKELY (up == NULL))
    return upstream_refused (mr, 1, error);
  if (G_UNLIKELY (alloc->address == 0 && alloc->size == 0 && alloc->plugin_data == NULL))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"%s\": memres_upstream_deallocate() of a record already freed (or "
                   "never filled): a plugin bug",
                   mr->kind->name);
      return FALSE;
    }
  address = alloc->address;
  size = alloc->size;
  ok = _memres_resource_call_deallocate (up, alloc, stream, error);
  /* a failure that released half-way (the address set to 0) or broke the contract (zeroed):
   * gone all the same */
  if (ok || alloc->address != address)
    {
      _memres_resource_count_used (up, -(gint64) size);
      memset (alloc, 0, sizeof *alloc);
    }
  return ok;
}

/**
 * memres_upstream_deallocate_for_tag:
 * @mr: the adaptor's own instance (the @mr its slot received)
 * @alloc: a record memres_upstream_allocate_for_tag() filled for @mr with @tag, not yet
 *   deallocated
 * @tag: (nullable): the tag it was allocated for (%NULL: memres_upstream_deallocate())
 * @stream: the stream the free is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * memres_upstream_deallocate() of memory that memres_upstream_allocate_for_tag() gave for @tag:
 * for the duration of the call memres_allocation_get_tag() on @alloc returns @tag, in the
 * upstream's deallocate slot and in those below it (the `log` adaptor writes the free with the tag
 * it wrote the allocation with). Otherwise exactly memres_upstream_deallocate(): the record zeroed
 * when the memory is gone, left as it was when the upstream kept it. Thread-safe, no lock held.
 * The driver calls are the upstream's.
 *
 * Errors: %MEMRES_TAG_ERROR_INVALID, %MEMRES_TAG_ERROR_UNKNOWN (@tag is no tag of this process:
 * nothing released, @alloc as it was); those of memres_upstream_deallocate().
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_upstream_deallocate_for_tag (MemresResource *mr, MemresAllocation *alloc, const char *tag,
                                    MemresStream stream, GError **error)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (alloc != NULL, FALSE);

  return upstream_for_tag (mr, FALSE, 0, stream, tag, alloc, error);
}

/**
 * memres_resource_find_layer:
 * @mr: a #MemresResource
 * @kind_name: the name of a kind, as in a spec (`"stats"`)
 * @error: return location for a #GError, or %NULL
 *
 * Finds the first layer of @mr's stack, from @mr itself down through its upstreams
 * (memres_resource_get_upstream()), whose kind is named @kind_name. For the C API of an adaptor
 * (memres_stats_get_counters() and the like), which acts on the first layer of its kind at or
 * below the resource an application holds. No driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when no layer there is of that kind (the message names
 * @kind_name and the stack).
 *
 * Returns: (transfer none) (nullable): the layer, valid while @mr is, or %NULL with @error set
 *
 * Since: 2.0
 */
MemresResource *
memres_resource_find_layer (MemresResource *mr, const char *kind_name, GError **error)
{
  MemresResource *layer;
  g_autofree char *stack = NULL;

  g_return_val_if_fail (mr != NULL, NULL);
  g_return_val_if_fail (kind_name != NULL, NULL);

  for (layer = mr; layer != NULL; layer = layer->upstream)
    if (strcmp (layer->kind->name, kind_name) == 0)
      return layer;
  stack = memres_resource_to_string (mr);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
               "no \"%s\" layer at or below the resource \"%s\"", kind_name, stack);
  return NULL;
}
