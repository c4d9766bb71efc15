/* memres - CUDA memory resources
 * kind.c: a registered resource kind: its name, schema, ops table and IPC table. */
#include "memres-private.h"

#include <stddef.h>
#include <string.h>

/* The smallest MemresKindInfo the core understands (ABI 2.0: every field; a later minor
 * appends, and the copy below zero-fills what an older plugin lacks), and the size of each
 * version of MemresResourceOps: version 1 (ABI 2.0) ends after get_counters, version 2 after
 * at_fork, version 3 after explain_oom, version 4 after snapshot, version 5 after wake. */
#define KIND_INFO_MIN_SIZE (offsetof (MemresKindInfo, flags) + sizeof (MemresKindFlags))
#define OPS_V1_SIZE        (offsetof (MemresResourceOps, get_counters) + sizeof (gpointer))
#define OPS_V2_SIZE        (offsetof (MemresResourceOps, at_fork) + sizeof (gpointer))
#define OPS_V3_SIZE        (offsetof (MemresResourceOps, explain_oom) + sizeof (gpointer))
#define OPS_V4_SIZE        (offsetof (MemresResourceOps, snapshot) + sizeof (gpointer))
#define OPS_V5_SIZE        (offsetof (MemresResourceOps, wake) + sizeof (gpointer))
G_STATIC_ASSERT (OPS_V5_SIZE == sizeof (MemresResourceOps));

static gboolean invalid (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

/* Sets @error to MEMRES_ERROR_INVALID_ARGUMENT with the message @format; returns FALSE. */
static gboolean
invalid (GError **error, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (
      error, g_error_new_valist (MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, format, args));
  va_end (args);
  return FALSE;
}

/* An enum's choices: at least one, none empty (a spec could not tell it from no value), none
 * twice. */
static gboolean
check_choices (const char *kind, const MemresOptionSpec *spec, GError **error)
{
  if (spec->choices == NULL || spec->choices[0] == NULL)
    return invalid (error, "kind \"%s\": enum option \"%s\" has no choices", kind, spec->name);
  for (guint c = 0; spec->choices[c] != NULL; c++)
    {
      const char *choice = spec->choices[c];

      if (choice[0] == '\0')
        return invalid (error, "kind \"%s\": enum option \"%s\" has an empty choice", kind,
                        spec->name);
      for (guint d = 0; d < c; d++)
        if (strcmp (spec->choices[d], choice) == 0)
          {
            g_autofree char *shown = _memres_show_input (choice);

            return invalid (error, "kind \"%s\": enum option \"%s\" lists the choice \"%s\" twice",
                            kind, spec->name, shown);
          }
    }
  return TRUE;
}

static gboolean
validate_schema (const char *kind, const MemresOptionSpec *options, guint n_options, GError **error)
{
  if (n_options > 0 && options == NULL)
    return invalid (error, "kind \"%s\" declares %u options but no option table", kind, n_options);
  for (guint i = 0; i < n_options; i++)
    {
      const MemresOptionSpec *spec = &options[i];

      if (!_memres_key_is_valid (spec->name))
        return invalid (error, "kind \"%s\": option %u has an invalid name \"%s\"", kind, i,
                        spec->name != NULL ? spec->name : "(null)");
      for (guint j = 0; j < i; j++)
        if (strcmp (options[j].name, spec->name) == 0)
          return invalid (error, "kind \"%s\": option \"%s\" is declared twice", kind, spec->name);
      if ((guint) spec->type > MEMRES_OPTION_INT_LIST)
        return invalid (error, "kind \"%s\": option \"%s\" has an unknown type %d", kind,
                        spec->name, (gint) spec->type);
      if (spec->type == MEMRES_OPTION_ENUM && !check_choices (kind, spec, error))
        return FALSE;
      if ((spec->type == MEMRES_OPTION_INT || spec->type == MEMRES_OPTION_INT_LIST)
          && spec->min > spec->max)
        return invalid (error, "kind \"%s\": option \"%s\" has min > max", kind, spec->name);
      if (spec->default_value != NULL
          && !_memres_parse_option_value (spec, spec->default_value, error))
        {
          g_prefix_error (error, "kind \"%s\": default of option \"%s\": ", kind, spec->name);
          return FALSE;
        }
    }
  return TRUE;
}

/* Copies @info into @ki (zero-filled by the caller) after validating everything in it but the
 * IPC table. Reads no field of @info past info->struct_size. */
static gboolean
check_info (const MemresKindInfo *info, MemresKindInfo *ki, GError **error)
{
  if (info == NULL || info->struct_size < KIND_INFO_MIN_SIZE)
    return invalid (error,
                    "MemresKindInfo is %s (struct_size %" G_GSIZE_FORMAT
                    ", at least %" G_GSIZE_FORMAT " expected)",
                    info == NULL ? "missing" : "too small", info != NULL ? info->struct_size : 0,
                    (gsize) KIND_INFO_MIN_SIZE);
  memcpy (ki, info, MIN (info->struct_size, sizeof *ki));

  if (!_memres_kind_name_check (ki->name, error))
    return FALSE;
  if (ki->ops == NULL || ki->ops->version < 1)
    return invalid (error, "kind \"%s\" has no ops table (or its version is 0)", ki->name);
  if (ki->ops->version > MEMRES_RESOURCE_OPS_VERSION)
    /* a table newer than this core with a plugin whose ABI this core accepts: a lie, and
     * the slots past this core's would be ignored silently */
    return invalid (error,
                    "kind \"%s\": ops table version %u is newer than this memres's %d (set "
                    "version to MEMRES_RESOURCE_OPS_VERSION of the headers you build with)",
                    ki->name, ki->ops->version, MEMRES_RESOURCE_OPS_VERSION);
  if ((ki->flags
       & ~(MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_OWN_USAGE
           | MEMRES_KIND_SEGMENTS | MEMRES_KIND_COUNTED | MEMRES_KIND_TAGGED))
          != 0
      || ((ki->flags & MEMRES_KIND_OWN_USAGE) && ki->ops->get_stats == NULL)
      || ((ki->flags & MEMRES_KIND_PASSES_ALLOCATIONS) && !(ki->flags & MEMRES_KIND_ADAPTOR)))
    return invalid (error,
                    "kind \"%s\" has invalid flags 0x%x (MEMRES_KIND_PASSES_ALLOCATIONS needs "
                    "MEMRES_KIND_ADAPTOR, MEMRES_KIND_OWN_USAGE a get_stats slot; no other "
                    "flag exists)",
                    ki->name, (guint) ki->flags);
  /* query is optional for adaptors: they start from the upstream's information */
  /* a counted pass-through adaptor may leave allocate and deallocate to the core (both) */
  if (ki->ops->init == NULL || ki->ops->finalize == NULL
      || ((ki->ops->allocate == NULL || ki->ops->deallocate == NULL)
          && !(ki->ops->allocate == NULL && ki->ops->deallocate == NULL
               && (ki->flags & MEMRES_KIND_COUNTED)
               && (ki->flags & MEMRES_KIND_PASSES_ALLOCATIONS)))
      || (ki->ops->query == NULL && !(ki->flags & MEMRES_KIND_ADAPTOR)))
    return invalid (error,
                    "kind \"%s\" lacks a required slot (init, finalize, allocate, deallocate, "
                    "query)",
                    ki->name);
  return validate_schema (ki->name, ki->options, ki->n_options, error);
}

/* Creates a kind from @info after validating everything in it. Reads no field of @info past
 * info->struct_size, no slot of the ops table newer than ops->version, and the IPC table only
 * through the IPC layer (_memres_ipc_ops_copy()). */
MemresKind *
_memres_kind_new (MemresPlugin *plugin, const MemresKindInfo *info, GError **error)
{
  MemresKindInfo ki = { 0 };
  MemresIpcOps ipc;
  MemresKind *kind;

  if (!check_info (info, &ki, error)
      || !_memres_ipc_ops_copy (ki.name, ki.ipc, (ki.flags & MEMRES_KIND_ADAPTOR) != 0, &ipc,
                                error))
    return NULL;

  kind = g_new0 (MemresKind, 1);
  g_atomic_ref_count_init (&kind->ref);
  kind->name = g_strdup (ki.name);
  memcpy (kind->name_field, ki.name, strlen (ki.name)); /* checked: shorter than the field */
  kind->description = g_strdup (ki.description != NULL ? ki.description : "");
  kind->n_options = ki.n_options;
  kind->options = g_memdup2 (ki.options, sizeof (MemresOptionSpec) * ki.n_options);
  /* Only the slots of the plugin's version are read (a table of an older version is shorter).
   * kind->ops is zero-filled: missing slots are NULL. */
  memcpy (&kind->ops, ki.ops,
          ki.ops->version >= 5   ? OPS_V5_SIZE
          : ki.ops->version == 4 ? OPS_V4_SIZE
          : ki.ops->version == 3 ? OPS_V3_SIZE
          : ki.ops->version == 2 ? OPS_V2_SIZE
                                 : OPS_V1_SIZE);
  kind->ops.version = ki.ops->version;
  kind->ipc = ipc;
  kind->instance_size = ki.instance_size;
  kind->flags = ki.flags;
  kind->plugin = plugin;
  if (kind->ops.at_fork != NULL)
    _memres_fork_add_kind (kind);
  return kind;
}

/**
 * memres_kind_ref:
 * @kind: a #MemresKind
 *
 * Adds a reference. Thread-safe.
 *
 * Returns: (transfer full): @kind
 *
 * Since: 1.0
 */
MemresKind *
memres_kind_ref (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);

  g_atomic_ref_count_inc (&kind->ref);
  return kind;
}

/**
 * memres_kind_unref:
 * @kind: (transfer full): a #MemresKind
 *
 * Drops a reference; the last one frees the kind (the registry holds one while the kind is
 * registered). Thread-safe.
 *
 * Since: 1.0
 */
void
memres_kind_unref (MemresKind *kind)
{
  g_return_if_fail (kind != NULL);

  if (!g_atomic_ref_count_dec (&kind->ref))
    return;
  if (kind->ops.at_fork != NULL)
    _memres_fork_remove_kind (kind);
  g_free (kind->name);
  g_free (kind->description);
  g_free (kind->options);
  g_free (kind);
}

/**
 * memres_kind_get_name:
 * @kind: a #MemresKind
 *
 * The name the kind is registered under, the first word of a layer in a spec string (`dmr` in
 * `dmr:release_threshold=1GiB`). A kind is immutable once registered: thread-safe; sets no error.
 *
 * Returns: (transfer none): the kind's name, such as "dmr"
 *
 * Since: 1.0
 */
const char *
memres_kind_get_name (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);
  return kind->name;
}

/**
 * memres_kind_get_description:
 * @kind: a #MemresKind
 *
 * The one line the kind's plugin registered for it (as `memres kinds` prints it). Thread-safe;
 * sets no error.
 *
 * Returns: (transfer none): one line describing the kind
 *
 * Since: 1.0
 */
const char *
memres_kind_get_description (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);
  return kind->description;
}

/**
 * memres_kind_get_plugin_name:
 * @kind: a #MemresKind
 *
 * Which plugin the kind came from. Thread-safe; sets no error.
 *
 * Returns: (transfer none) (nullable): the name of the plugin that registered the kind, or
 *   %NULL for a kind registered by the application with memres_registry_register_kind()
 *
 * Since: 1.0
 */
const char *
memres_kind_get_plugin_name (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);
  return kind->plugin != NULL ? kind->plugin->name : NULL;
}

/**
 * memres_kind_get_plugin_path:
 * @kind: a #MemresKind
 *
 * Where the kind's plugin was loaded from, for diagnostics (`memres kinds`). Thread-safe; sets no
 * error.
 *
 * Returns: (transfer none) (nullable): the file the kind's plugin was loaded from, or %NULL
 *   for a kind embedded in libmemres (host) or registered by the application
 *
 * Since: 1.0
 */
const char *
memres_kind_get_plugin_path (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);
  return kind->plugin != NULL ? kind->plugin->path : NULL;
}

/**
 * memres_kind_get_options:
 * @kind: a #MemresKind
 * @n_options: (out) (optional): return location for the number of entries
 *
 * The kind's option schema: name, type, default and documentation of every key a spec may
 * give.
 *
 * Returns: (transfer none) (array length=n_options): the schema, valid while @kind lives
 *
 * Since: 1.0
 */
const MemresOptionSpec *
memres_kind_get_options (MemresKind *kind, guint *n_options)
{
  g_return_val_if_fail (kind != NULL, NULL);

  if (n_options != NULL)
    *n_options = kind->n_options;
  return kind->options;
}

/**
 * memres_kind_get_flags:
 * @kind: a #MemresKind
 *
 * What the kind is: a base kind (0) or an adaptor (%MEMRES_KIND_ADAPTOR, possibly with
 * %MEMRES_KIND_PASSES_ALLOCATIONS), and whether it counts its own used bytes
 * (%MEMRES_KIND_OWN_USAGE), as its plugin registered it. Thread-safe.
 *
 * Returns: the kind's #MemresKindFlags
 *
 * Since: 1.2
 */
MemresKindFlags
memres_kind_get_flags (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, 0);
  return kind->flags;
}

/**
 * memres_kind_get_ops:
 * @kind: a #MemresKind
 *
 * The kind's functions, as the core copied them at registration (slots newer than its plugin's
 * headers are %NULL): for a plugin that must know whether a layer of its stack implements an
 * optional slot itself (an adaptor that leaves a slot %NULL passes the call down, see
 * #MemresResourceOps). Call nothing through the table: the core's entry points
 * (memres_resource_trim() and the like) call the slots. No driver call. Thread-safe.
 *
 * Returns: (transfer none): the ops table, valid while @kind is
 *
 * Since: 2.0
 */
const MemresResourceOps *
memres_kind_get_ops (MemresKind *kind)
{
  g_return_val_if_fail (kind != NULL, NULL);
  return &kind->ops;
}
