/* memres - CUDA memory resources
 * loader.c: opens a plugin module, checks its descriptor before any of its code runs beyond
 * the descriptor function, runs its init and hands the kinds it registered to the registry. */
#include "memres-private.h"

#include <stddef.h>
#include <string.h>

/* The smallest descriptor of ABI 1.0: up to and including the init pointer. */
#define DESC_MIN_SIZE (offsetof (MemresPluginDesc, init) + sizeof (MemresPluginInitFunc))

typedef const MemresPluginDesc *(*GetDescFunc) (void);

static MemresPlugin *
plugin_new (const char *name, const char *path, GModule *module)
{
  MemresPlugin *plugin = g_new0 (MemresPlugin, 1);

  g_atomic_ref_count_init (&plugin->ref);
  plugin->name = g_strdup (name);
  plugin->path = g_strdup (path);
  plugin->module = module;
  return plugin;
}

MemresPlugin *
_memres_plugin_ref (MemresPlugin *plugin)
{
  g_atomic_ref_count_inc (&plugin->ref);
  return plugin;
}

void
_memres_plugin_unref (MemresPlugin *plugin)
{
  if (!g_atomic_ref_count_dec (&plugin->ref))
    return;
  g_clear_pointer (&plugin->kinds, g_ptr_array_unref);
  g_clear_error (&plugin->register_error);
  /* A resident module stays mapped: g_module_close() only drops GModule's reference. */
  if (plugin->module != NULL)
    g_module_close (plugin->module);
  g_free ((gpointer) plugin->desc);
  g_free (plugin->name);
  g_free (plugin->path);
  g_free (plugin);
}

/* Checks @raw (as returned by the plugin) and copies the fields this core knows into a new
 * descriptor; reads no field past raw->struct_size. */
static MemresPluginDesc *
check_desc (const MemresPluginDesc *raw, const char *name, const char *where, GError **error)
{
  MemresPluginDesc *desc;
  guint32 major, minor, size;

  if (raw == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_SYMBOL,
                   "plugin \"%s\" (%s): memres_plugin_%s_get_desc returned no descriptor", name,
                   where, name);
      return NULL;
    }
  /* abi_major, abi_minor and struct_size open every version of the descriptor. */
  major = raw->abi_major;
  minor = raw->abi_minor;
  size = raw->struct_size;
  if (major != MEMRES_PLUGIN_ABI_MAJOR || minor > MEMRES_PLUGIN_ABI_MINOR)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s) was built for plugin ABI %u.%u; this memres accepts %d.0 "
                   "to %d.%d",
                   name, where, major, minor, MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MAJOR,
                   MEMRES_PLUGIN_ABI_MINOR);
      return NULL;
    }
  if (size < DESC_MIN_SIZE)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s): descriptor struct_size %u is smaller than ABI %u.%u's "
                   "%" G_GSIZE_FORMAT " bytes",
                   name, where, size, major, minor, (gsize) DESC_MIN_SIZE);
      return NULL;
    }

  if (raw->reserved != 0)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s): descriptor field reserved is 0x%x (it must be 0)", name,
                   where, raw->reserved);
      return NULL;
    }

  desc = g_new0 (MemresPluginDesc, 1);
  memcpy (desc, raw, MIN ((gsize) size, sizeof *desc));

  if (desc->name == NULL || strcmp (desc->name, name) != 0)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
                   "plugin file libmemres-%s.so (%s) names itself \"%s\": file name, symbol and "
                   "descriptor name must agree",
                   name, where, desc->name != NULL ? desc->name : "(null)");
      g_free (desc);
      return NULL;
    }
  if (desc->init == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                   "plugin \"%s\" (%s) has no init function", name, where);
      g_free (desc);
      return NULL;
    }
  return desc;
}

/* Runs the plugin's init with no memres lock held, then registers what it registered. */
static gboolean
run_init (MemresPlugin *plugin, const char *where, GError **error)
{
  g_autoptr (GPtrArray) kinds = NULL;
  GError *local = NULL;
  gboolean ok;

  plugin->kinds = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_kind_unref);
  ok = plugin->desc->init (plugin, &local);
  kinds = g_steal_pointer (&plugin->kinds);

  if (plugin->register_error != NULL)
    {
      /* A kind name already taken (or a bad kind): report that, whatever init returned. */
      g_clear_error (&local);
      g_propagate_error (error, g_error_copy (plugin->register_error));
      return FALSE;
    }
  if (!ok)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                   "plugin \"%s\" (%s) failed to initialize: %s", plugin->name, where,
                   local != NULL ? local->message : "no reason given");
      g_clear_error (&local);
      return FALSE;
    }
  if (local != NULL)
    {
      g_warning ("plugin \"%s\" init succeeded but set an error: %s", plugin->name, local->message);
      g_clear_error (&local);
    }
  return _memres_registry_insert (kinds, error);
}

/* Opens @path as plugin @name, checks it and runs its init. The caller holds the registry's
 * load token. Returns a new reference to the plugin, made resident. */
MemresPlugin *
_memres_plugin_load (const char *name, const char *path, GError **error)
{
  g_autofree char *symbol = NULL;
  gpointer get_desc = NULL;
  MemresPlugin *plugin;
  GModule *module;

  module = g_module_open (path, G_MODULE_BIND_LOCAL | G_MODULE_BIND_LAZY);
  if (module == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                   "plugin \"%s\" could not be opened: %s", name, g_module_error ());
      return NULL;
    }
  plugin = plugin_new (name, path, module);

  symbol = g_strdup_printf ("memres_plugin_%s_get_desc", name);
  if (!g_module_symbol (module, symbol, &get_desc) || get_desc == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_SYMBOL,
                   "plugin \"%s\" (%s) has no entry point %s", name, path, symbol);
      goto fail;
    }
  plugin->desc = check_desc (((GetDescFunc) get_desc) (), name, path, error);
  if (plugin->desc == NULL)
    goto fail;
  if (!run_init (plugin, path, error))
    goto fail;

  g_module_make_resident (module);
  return plugin;

fail:
  _memres_plugin_unref (plugin);
  return NULL;
}

/* Registers a plugin compiled into libmemres (host) through the same checks and init. */
MemresPlugin *
_memres_plugin_load_embedded (const MemresPluginDesc *desc, GError **error)
{
  MemresPlugin *plugin;
  const char *name = desc->name;

  plugin = plugin_new (name, NULL, NULL);
  plugin->desc = check_desc (desc, name, "embedded in libmemres", error);
  if (plugin->desc == NULL || !run_init (plugin, "embedded in libmemres", error))
    {
      _memres_plugin_unref (plugin);
      return NULL;
    }
  return plugin;
}
