/* memres - CUDA memory resources
 * pool-options.c: the options of the pool kinds, declared once: the table each kind picks its
 * entries from when it registers (pool_register_kind()), and their reading into a PoolConfig. */
#include "pool.h"

static const char *const pool_choices[] = { "current", "new", NULL };

/* Every pool option, with the PoolOptions bit that picks it, in the order kinds list them. */
static const struct
{
  PoolOptions set;
  MemresOptionSpec spec;
} pool_options[] = {
  { POOL_OPTION_POOL,
    { "pool", MEMRES_OPTION_ENUM, "current",
      "current: the location's current pool (shared with other users, never destroyed); new: a "
      "pool of its own, destroyed after the resource's last buffer",
      pool_choices, 0, 0 } },
  { POOL_OPTION_MAX_SIZE,
    { "max_size", MEMRES_OPTION_SIZE, NULL,
      "most bytes of live buffers the pool serves, exactly as given (enforced by memres: the "
      "driver rounds a small maxSize up, so what the pool reserves may be somewhat more); a pool "
      "the resource creates, not a wrapped current pool; unset: the driver's default",
      NULL, 0, 0 } },
  { POOL_OPTION_RELEASE_THRESHOLD,
    { "release_threshold", MEMRES_OPTION_SIZE, NULL,
      "bytes of unused memory the pool keeps reserved across synchronizations, or max; unset: "
      "the driver's value, except max for a pinned pool (page-locking memory is slow) and for a "
      "wrapped current pool whose threshold is 0 (at 0 the pool returns its memory to the system "
      "at every synchronization and allocation gets slow) until the last resource on it is gone, "
      "which sets it back to 0; a value given for a current pool stays after the resource",
      NULL, 0, 0 } },
  { POOL_OPTION_REUSE,
    { "reuse_follow_event_dependencies", MEMRES_OPTION_BOOL, NULL,
      "reuse memory freed on another stream once an event orders the two (unset: driver "
      "default)",
      NULL, 0, 0 } },
  { POOL_OPTION_REUSE,
    { "reuse_allow_opportunistic", MEMRES_OPTION_BOOL, NULL,
      "reuse memory whose free already completed on another stream (unset: driver default)", NULL,
      0, 0 } },
  { POOL_OPTION_REUSE,
    { "reuse_allow_internal_dependencies", MEMRES_OPTION_BOOL, NULL,
      "let the driver add dependencies to reuse memory freed on another stream (unset: driver "
      "default)",
      NULL, 0, 0 } },
};

/**
 * pool_register_kind:
 * @plugin: the plugin whose init function runs
 * @info: the kind, whose option table holds one %POOL_OPTIONS_HERE entry
 * @which: the pool options the kind offers
 * @error: return location for a #GError
 *
 * Registers @info (memres_plugin_register_kind()) with the pool options of @which in place of
 * its %POOL_OPTIONS_HERE entry; the core copies the table it is given.
 *
 * Returns: %TRUE on success; %FALSE with the errors of memres_plugin_register_kind().
 */
gboolean
pool_register_kind (MemresPlugin *plugin, const MemresKindInfo *info, PoolOptions which,
                    GError **error)
{
  g_autofree MemresOptionSpec *specs
      = g_new (MemresOptionSpec, info->n_options + G_N_ELEMENTS (pool_options));
  MemresKindInfo kind = *info;
  guint n = 0;

  for (guint i = 0; i < info->n_options; i++)
    {
      if (info->options[i].name != NULL)
        {
          specs[n++] = info->options[i];
          continue;
        }
      for (guint j = 0; j < G_N_ELEMENTS (pool_options); j++)
        if (which & pool_options[j].set)
          specs[n++] = pool_options[j].spec;
    }
  kind.options = specs;
  kind.n_options = n;
  return memres_plugin_register_kind (plugin, &kind, error);
}

/**
 * pool_options_first_set:
 * @options: the validated options of a resource (transfer none)
 * @which: pool options the kind offers
 *
 * Returns: (nullable): the name of the first option of @which that @options sets, %NULL when
 *   none is set; for a kind whose other implementation takes none of them
 */
const char *
pool_options_first_set (const MemresOptions *options, PoolOptions which)
{
  for (guint i = 0; i < G_N_ELEMENTS (pool_options); i++)
    if ((which & pool_options[i].set) && memres_options_is_set (options, pool_options[i].spec.name))
      return pool_options[i].spec.name;
  return NULL;
}

/**
 * pool_config_set_options:
 * @config: a configuration from pool_config_init_device() or _init_host()
 * @options: the validated options of the resource being created (transfer none)
 * @which: the pool options the kind offers (those it gave pool_register_kind())
 * @error: return location for a #GError
 *
 * Reads the pool options into @config: `pool` into @config->create, the attributes into their
 * fields; options left unset keep @config's values. Makes no driver call.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_INVALID_ARGUMENT when `max_size` is
 *   given for a current pool (it applies to new pools only), or is 0.
 */
gboolean
pool_config_set_options (PoolConfig *config, const MemresOptions *options, PoolOptions which,
                         GError **error)
{
  gint *reuse_fields[] = {
    &config->reuse_follow_event_dependencies,
    &config->reuse_allow_opportunistic,
    &config->reuse_allow_internal_dependencies,
  };
  guint reuse = 0;

  for (guint i = 0; i < G_N_ELEMENTS (pool_options); i++)
    {
      const char *name = pool_options[i].spec.name;
      PoolOptions set = pool_options[i].set;
      gint *reuse_field = set == POOL_OPTION_REUSE ? reuse_fields[reuse++] : NULL;

      if (!(which & set))
        continue;
      if (set == POOL_OPTION_POOL)
        config->create = g_strcmp0 (memres_options_get_string (options, name), "new") == 0;
      else if (!memres_options_is_set (options, name))
        continue;
      else if (set == POOL_OPTION_MAX_SIZE)
        {
          config->max_size = memres_options_get_size (options, name);
          if (!config->create)
            {
              g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                   "max_size applies to new pools only: add pool=new");
              return FALSE;
            }
          if (config->max_size == 0)
            {
              g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                   "max_size must be at least 1 byte (leave it unset for "
                                   "the driver's default)");
              return FALSE;
            }
        }
      else if (set == POOL_OPTION_RELEASE_THRESHOLD)
        {
          config->release_threshold_set = TRUE;
          config->release_threshold = memres_options_get_size (options, name);
        }
      else
        *reuse_field = memres_options_get_bool (options, name) ? 1 : 0;
    }
  return TRUE;
}
