/* memres - CUDA memory resources
 * plugin.c: a plugin's whole lifetime. Its file is checked (what it is, its ELF note: ABI
 * version and name; module-file.c) before any of its code runs, the module opened bound-now and
 * made resident, its descriptor checked, its init run (memres_plugin_register_kind()), and the
 * kinds it registered handed to the registry (registry.c) all at once. A plugin that loaded
 * lives as long as the process (loader.c keeps it); one whose load fails is freed with its
 * kinds, which nothing else saw: a kind's plugin pointer is never left dangling. */
#include "memres-private.h"

#include <stddef.h>
#include <string.h>

/* The smallest descriptor of ABI 1.0: up to and including the init pointer. */
#define DESC_MIN_SIZE (offsetof (MemresPluginDesc, init) + sizeof (MemresPluginInitFunc))

typedef const MemresPluginDesc *(*GetDescFunc) (void);

/* Frees a plugin whose load failed, with the kinds it registered (none of them reached the
 * registry). Its module, once opened, stays resident. */
void
_memres_plugin_free (MemresPlugin *plugin)
{
  g_clear_pointer (&plugin->kinds, g_ptr_array_unref);
  g_clear_error (&plugin->register_error);
  /* A resident module stays mapped: g_module_close() only drops GModule's reference. */
  g_clear_pointer (&plugin->module, g_module_close);
  g_free ((gpointer) plugin->desc);
  g_free (plugin->name);
  g_free (plugin->path);
  g_free (plugin);
}

/* The ABI rule: the core's major, a minor up to the core's. */
static gboolean
check_abi (guint32 major, guint32 minor, const char *name, const char *where, GError **error)
{
  if (major != MEMRES_PLUGIN_ABI_MAJOR || minor > MEMRES_PLUGIN_ABI_MINOR)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s) was built for plugin ABI %u.%u; this memres accepts %d.0 "
                   "to %d.%d",
                   name, where, major, minor, MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MAJOR,
                   MEMRES_PLUGIN_ABI_MINOR);
      return FALSE;
    }
  return TRUE;
}

/* The name a plugin's note or descriptor gives itself, @claimed (shown as @shown), must be the
 * name of its file, @name: MEMRES_PLUGIN_ERROR_NAME_MISMATCH. */
static gboolean
check_name (const char *name, const char *where, const char *claimed, const char *shown,
            GError **error)
{
  if (claimed != NULL && strcmp (claimed, name) == 0)
    return TRUE;
  g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
               "plugin file libmemres-%s.so (%s) names itself \"%s\": file name, symbol and "
               "descriptor name must agree",
               name, where, shown);
  return FALSE;
}

/* The checks of the plugin's ELF note, when it has one (MEMRES_PLUGIN_DEFINE of headers 1.2
 * and later), made on the file before it is opened: the ABI version and the name. */
static gboolean
check_note (const char *name, const char *path, GError **error)
{
  g_autofree char *shown = NULL;
  MemresPluginNote note;

  if (!_memres_module_file_read_note (path, &note))
    return TRUE;
  if (!check_abi (note.abi_major, note.abi_minor, name, path, error))
    return FALSE;
  shown = _memres_show_input (note.name);
  return check_name (name, path, note.name, shown, error);
}

/* Checks @raw (as returned by the plugin) and copies the fields this core knows into a new
 * descriptor; reads no field past raw->struct_size. */
static MemresPluginDesc *
check_desc (const MemresPluginDesc *raw, const char *name, const char *where, GError **error)
{
  g_autofree MemresPluginDesc *desc = NULL;

  if (raw == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_SYMBOL,
                   "plugin \"%s\" (%s): memres_plugin_%s_get_desc returned no descriptor", name,
                   where, name);
      return NULL;
    }
  /* abi_major, abi_minor and struct_size open every version of the descriptor. */
  if (!check_abi (raw->abi_major, raw->abi_minor, name, where, error))
    return NULL;
  if (raw->struct_size < DESC_MIN_SIZE)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s): descriptor struct_size %u is smaller than ABI %u.%u's "
                   "%" G_GSIZE_FORMAT " bytes",
                   name, where, raw->struct_size, raw->abi_major, raw->abi_minor,
                   (gsize) DESC_MIN_SIZE);
      return NULL;
    }

  desc = g_new0 (MemresPluginDesc, 1);
  memcpy (desc, raw, MIN ((gsize) raw->struct_size, sizeof *desc));

  if (!check_name (name, where, desc->name, desc->name != NULL ? desc->name : "(null)", error))
    return NULL;
  if (desc->reserved != 0)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "plugin \"%s\" (%s): descriptor field reserved is %u, must be 0 (a descriptor "
                   "not made by MEMRES_PLUGIN_DEFINE)",
                   name, where, desc->reserved);
      return NULL;
    }
  if (desc->init == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                   "plugin \"%s\" (%s) has no init function", name, where);
      return NULL;
    }
  return g_steal_pointer (&desc);
}

/* Runs the plugin's init with no memres lock held, then registers what it registered. */
static gboolean
run_init (MemresPlugin *plugin, const char *where, GError **error)
{
  g_autoptr (GPtrArray) kinds = NULL;
  g_autoptr (GError) local = NULL;
  gboolean ok;

  plugin->kinds = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_kind_unref);
  ok = plugin->desc->init (plugin, &local);
  kinds = g_steal_pointer (&plugin->kinds);

  if (plugin->register_error != NULL)
    /* A kind name already taken (or a bad kind): report that, whatever init returned. */
    g_propagate_error (error, g_error_copy (plugin->register_error));
  else if (!ok)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                   "plugin \"%s\" (%s) failed to initialize: %s", plugin->name, where,
                   local != NULL ? local->message : "no reason given");
      return FALSE;
    }
  else
    {
      if (local != NULL)
        g_warning ("plugin \"%s\" init succeeded but set an error: %s", plugin->name,
                   local->message);
      if (_memres_registry_insert (kinds, error))
        return TRUE;
    }
  /* the registry's error (or the one registration set) names no plugin: prefix it */
  g_prefix_error (error, "plugin \"%s\" (%s): ", plugin->name, where);
  return FALSE;
}

/* A new plugin @name from @path (NULL: embedded in libmemres) and @module, its descriptor @raw
 * checked and its init run; NULL (the plugin freed) when either fails. */
static MemresPlugin *
plugin_new (const char *name, const char *path, GModule *module, const MemresPluginDesc *raw,
            GError **error)
{
  MemresPlugin *plugin = g_new0 (MemresPlugin, 1);
  const char *where = path != NULL ? path : "embedded in libmemres";

  plugin->name = g_strdup (name);
  plugin->path = g_strdup (path);
  plugin->module = module;
  plugin->desc = check_desc (raw, name, where, error);
  if (plugin->desc == NULL || !run_init (plugin, where, error))
    {
      _memres_plugin_free (plugin);
      return NULL;
    }
  return plugin;
}

/* Opens @path as plugin @name, checks it and runs its init. The caller holds the load token
 * (loader.c). Returns the new plugin, made resident.
 *
 * The file is looked at first (a FIFO would block dlopen() forever), and its ELF note checked
 * (ABI version, name): a plugin refused by its note is never opened. It is opened with
 * G_MODULE_BIND_LOCAL and without G_MODULE_BIND_LAZY: every symbol is bound now, so a plugin
 * that calls a function its dependencies do not have fails here, naming the symbol, instead of
 * killing the process at its first call. Once the module opened, its code may have run (ELF
 * constructors, g_module_check_init(), the descriptor function, init) and left pointers into it
 * in process-wide state (a GQuark of a static string, a GType): it stays resident even when the
 * load fails. */
MemresPlugin *
_memres_plugin_load (const char *name, const char *path, GError **error)
{
  g_autofree char *symbol = NULL;
  g_autofree char *problem = _memres_module_file_problem (path);
  gpointer get_desc = NULL;
  GModule *module;

  if (problem != NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                   "plugin \"%s\" could not be opened: %s is %s, not a shared module", name, path,
                   problem);
      return NULL;
    }
  if (!check_note (name, path, error))
    return NULL;
  module = g_module_open (path, G_MODULE_BIND_LOCAL);
  if (module == NULL)
    {
      /* dlerror() names the plugin file for a bad file, but only the dependency or the symbol
       * for a missing dependency or symbol: name the plugin file in every case. */
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                   "plugin \"%s\" (%s) could not be opened: %s", name, path, g_module_error ());
      return NULL;
    }
  g_module_make_resident (module);

  symbol = g_strdup_printf ("memres_plugin_%s_get_desc", name);
  if (!g_module_symbol (module, symbol, &get_desc) || get_desc == NULL)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_SYMBOL,
                   "plugin \"%s\" (%s) has no entry point %s", name, path, symbol);
      g_module_close (module); /* it stays resident */
      return NULL;
    }
  return plugin_new (name, path, module, ((GetDescFunc) get_desc) (), error);
}

/* Registers a plugin compiled into libmemres (host) through the same checks and init. */
MemresPlugin *
_memres_plugin_load_embedded (const MemresPluginDesc *desc, GError **error)
{
  return plugin_new (desc->name, NULL, NULL, desc, error);
}

/**
 * memres_plugin_register_kind:
 * @plugin: the plugin whose init function is running (transfer none)
 * @info: the kind: name, description, option schema, ops table, private data size
 * @error: return location for a #GError, or %NULL
 *
 * Registers a kind; call it only from the plugin's init function. The kind becomes visible to
 * lookups once init returned successfully. The core keeps pointers to @info's strings, schema
 * and ops table: they must be static. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a bad name, a missing required slot, a bad
 * option schema (a default that does not parse, an enum without choices, ...) or a bad IPC
 * table (a slot without its pair, a table on an adaptor); %MEMRES_PLUGIN_ERROR_ABI_MISMATCH
 * for an IPC table whose version is 0 or newer than the core's; %MEMRES_ERROR_EXISTS when a kind of
 * that name is already registered (the whole load then fails with that error); %MEMRES_ERROR_FAILED
 * when called outside init.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_plugin_register_kind (MemresPlugin *plugin, const MemresKindInfo *info, GError **error)
{
  GError *local = NULL;
  MemresKind *kind;

  g_return_val_if_fail (plugin != NULL, FALSE);
  g_return_val_if_fail (info != NULL, FALSE);

  if (plugin->kinds == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "plugin \"%s\": kinds can only be registered while the plugin's init runs",
                   plugin->name);
      return FALSE;
    }

  kind = _memres_kind_new (plugin, info, &local);
  if (kind != NULL && !_memres_registry_check_name (kind->name, plugin->kinds, &local))
    g_clear_pointer (&kind, memres_kind_unref);
  if (kind == NULL)
    {
      if (plugin->register_error == NULL)
        plugin->register_error = g_error_copy (local);
      g_propagate_error (error, local);
      return FALSE;
    }
  g_ptr_array_add (plugin->kinds, kind);
  return TRUE;
}

/**
 * memres_plugin_get_name:
 * @plugin: a #MemresPlugin
 *
 * The name of the plugin whose init slot is running, for messages and for the kinds it registers.
 * Thread-safe; sets no error.
 *
 * Returns: (transfer none): the plugin's name (the `<name>` of `libmemres-<name>.so`)
 *
 * Since: 1.0
 */
const char *
memres_plugin_get_name (MemresPlugin *plugin)
{
  g_return_val_if_fail (plugin != NULL, NULL);
  return plugin->name;
}
