/* memres - CUDA memory resources
 * loader.c: which plugins are loaded, and loading them when a kind is first asked for: the
 * kinds embedded in libmemres at first use, memres_registry_lookup() and the listings, which
 * load from the search path, and memres_registry_register_kind(). Loads are serialized by a
 * load token (a mutex-protected owner plus a condition) so that no lock is held while plugin
 * code runs, and a plugin's init may itself look up other kinds. A plugin's load itself is
 * plugin.c's; the table of kinds is registry.c's. */
#include "memres-private.h"

#include <string.h>

static GMutex load_mutex;
static GCond load_cond;
static GThread *load_owner;
static guint load_depth;
static GHashTable *loaded_plugins; /* name -> MemresPlugin* (owned); load token owner only */
static GHashTable
    *loading_plugins;       /* names of the plugins whose load runs; load token owner only */
static gint embedded_state; /* 0 not yet, 1 loading, 2 done; load token owner only */

/* The load token: one thread at a time loads plugins; the owner may take it again (a plugin's
 * init may look up other kinds). load_owner is read and written atomically, so that what the
 * owner did (loaded_plugins, embedded_state) happens before the next owner's work even for
 * tools that do not see GMutex (ThreadSanitizer with GLib's futex-based mutex). */
static void
load_token_acquire (void)
{
  GThread *self = g_thread_self ();

  if (g_atomic_pointer_get (&load_owner) == self)
    {
      load_depth++;
      return;
    }
  G_GNUC_UNUSED g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&load_mutex);
  while (!g_atomic_pointer_compare_and_exchange (&load_owner, NULL, self))
    g_cond_wait (&load_cond, &load_mutex);
  load_depth = 1;
}

static void
load_token_release (void)
{
  if (--load_depth > 0)
    return;
  G_GNUC_UNUSED g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&load_mutex);
  g_atomic_pointer_set (&load_owner, NULL);
  g_cond_broadcast (&load_cond);
}

/* fork.c: prepare waits until no thread loads (unless this one does: a fork from a plugin's
 * init) and keeps load_mutex, so that none starts; parent and child release it. */
void
_memres_loader_fork (MemresResource *unused, MemresForkPhase phase)
{
  if (phase != MEMRES_FORK_PREPARE)
    {
      g_mutex_unlock (&load_mutex);
      return;
    }
  g_mutex_lock (&load_mutex);
  while (g_atomic_pointer_get (&load_owner) != NULL
         && g_atomic_pointer_get (&load_owner) != g_thread_self ())
    g_cond_wait (&load_cond, &load_mutex);
}

/* The plugins compiled into libmemres (host, and the adaptors with a C API: stats, track,
 * retry): MEMRES_PLUGIN_DEFINE_EMBEDDED puts a pointer to each one's descriptor in the section
 * `memres_embedded`, whose bounds the linker defines. The loader names no plugin. */
extern const MemresPluginDesc *const __start_memres_embedded[]
    __attribute__ ((visibility ("hidden")));
extern const MemresPluginDesc *const __stop_memres_embedded[]
    __attribute__ ((visibility ("hidden")));

/* Creates the tables of plugins and registers the kinds compiled into libmemres (the section
 * above) once, at first registry use: every use of the tables comes after this. */
static void
ensure_embedded (void)
{
  if (G_LIKELY (g_atomic_int_get (&embedded_state) == 2))
    return;

  load_token_acquire ();
  if (g_atomic_int_get (&embedded_state) == 0)
    {
      g_atomic_int_set (&embedded_state, 1);
      _memres_fork_add_part (MEMRES_FORK_LOADER, _memres_loader_fork);
      _memres_fork_add_part (MEMRES_FORK_REGISTRY, _memres_registry_fork);
      /* never destroyed: a plugin that loaded lives as long as the process, its kinds point to
       * it */
      loaded_plugins = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                              (GDestroyNotify) _memres_plugin_free);
      loading_plugins = g_hash_table_new (g_str_hash, g_str_equal);
      for (const MemresPluginDesc *const *embedded = __start_memres_embedded;
           embedded < __stop_memres_embedded; embedded++)
        {
          g_autoptr (GError) error = NULL;
          MemresPlugin *plugin = _memres_plugin_load_embedded (*embedded, &error);

          if (plugin == NULL)
            g_critical ("The embedded kind %s failed to register: %s", (*embedded)->name,
                        error->message);
          else
            g_hash_table_insert (loaded_plugins, g_strdup (plugin->name), plugin);
        }
      g_atomic_int_set (&embedded_state, 2);
    }
  load_token_release ();
}

/* A new reference to the registered kind @name, or NULL; loads no plugin file (only the
 * embedded kinds, at first use). */
MemresKind *
_memres_registry_lookup_loaded (const char *name)
{
  ensure_embedded ();
  return _memres_registry_find (name);
}

/* Loads plugin @name from @path unless a plugin of that name is loaded already. Holds the load
 * token. A plugin whose load is running (its init looks up its own kind, or lists the kinds) is
 * not loaded again: MEMRES_ERROR_NOT_FOUND, its kinds are not registered yet. */
static gboolean
load_plugin (const char *name, const char *path, GError **error)
{
  MemresPlugin *plugin;

  if (g_hash_table_contains (loaded_plugins, name))
    return TRUE;
  if (g_hash_table_contains (loading_plugins, name))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                   "no kind \"%s\" yet: plugin \"%s\" is still initializing (its kinds are "
                   "registered when its init returns; init cannot look them up)",
                   name, name);
      return FALSE;
    }
  g_hash_table_add (loading_plugins, (gpointer) name);
  plugin = _memres_plugin_load (name, path, error);
  g_hash_table_remove (loading_plugins, name);
  if (plugin != NULL)
    g_hash_table_insert (loaded_plugins, g_strdup (name), plugin);
  return plugin != NULL;
}

/**
 * memres_registry_lookup:
 * @name: a kind name, matching `[a-z][a-z0-9_]*`
 * @error: return location for a #GError, or %NULL
 *
 * Finds the kind @name. The embedded kinds (`host`, `stats`, `track`, `retry`) are found
 * first: a `libmemres-<name>.so` of theirs is never loaded (memres_registry_list_kinds_full()
 * reports it). A kind not registered yet is loaded from the first
 * `libmemres-<name>.so` on the search path (memres_registry_get_search_path()): the module is
 * opened with `G_MODULE_BIND_LOCAL`, its descriptor checked (symbol, ABI version, struct size,
 * name) before its init runs, and made resident once init succeeded. Loads are serialized;
 * no lock is held while plugin code runs. After any failure the registry stays usable and a
 * later lookup tries again. Thread-safe.
 *
 * A file of the plugin's name that is not a regular, readable file (a FIFO, a directory, a
 * dangling symbolic link, a link loop) is refused without blocking, with a message saying what
 * it is (%MEMRES_PLUGIN_ERROR_MODULE). A plugin's init may look up other plugins' kinds (the
 * loads nest); a lookup of one of its own kinds from its init fails (%MEMRES_ERROR_NOT_FOUND:
 * they are registered when init returns) and lists made from its init omit them.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a malformed name (`/`, `..`, upper case, ...);
 * %MEMRES_ERROR_NOT_FOUND when no plugin file provides the kind (or when the plugin that
 * provides it is still running its init); %MEMRES_ERROR_EXISTS when the
 * plugin registers a kind name already taken; in the %MEMRES_PLUGIN_ERROR domain:
 * %MEMRES_PLUGIN_ERROR_MODULE (the module does not open), %MEMRES_PLUGIN_ERROR_SYMBOL (no
 * `memres_plugin_<name>_get_desc`), %MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
 * %MEMRES_PLUGIN_ERROR_NAME_MISMATCH, %MEMRES_PLUGIN_ERROR_INIT_FAILED.
 *
 * Returns: (transfer full) (nullable): a new reference to the kind, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresKind *
memres_registry_lookup (const char *name, GError **error)
{
  g_auto (GStrv) dirs = NULL;
  g_autofree char *file = NULL;
  g_autofree char *path = NULL;
  MemresKind *kind;

  g_return_val_if_fail (name != NULL, NULL);

  if (!_memres_kind_name_check (name, error))
    return NULL;

  kind = _memres_registry_lookup_loaded (name);
  if (kind != NULL)
    return kind;

  dirs = memres_registry_get_search_path ();
  file = g_strdup_printf ("libmemres-%s.so", name);
  for (guint i = 0; dirs[i] != NULL && path == NULL; i++)
    {
      g_autofree char *candidate = g_build_filename (dirs[i], file, NULL);
      /* anything of that name counts (a dangling link, a FIFO, a directory): the load says what
       * is wrong with it rather than "no such kind" */
      if (g_file_test (candidate, G_FILE_TEST_EXISTS | G_FILE_TEST_IS_SYMLINK))
        path = g_steal_pointer (&candidate);
    }
  if (path == NULL)
    {
      g_autofree char *where = g_strjoinv (":", dirs);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                   "no kind \"%s\": no %s in the plugin search path %s (set MEMRES_PLUGIN_PATH "
                   "to add directories)",
                   name, file, where);
      return NULL;
    }

  load_token_acquire ();
  kind = _memres_registry_lookup_loaded (name);
  if (kind == NULL && load_plugin (name, path, error))
    {
      kind = _memres_registry_lookup_loaded (name);
      if (kind == NULL)
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "no kind \"%s\": plugin %s registers no kind of that name", name, path);
    }
  load_token_release ();
  return kind;
}

/* Loads every libmemres-<name>.so of @dir whose name is not in @seen (names of earlier
 * directories: the first file on the path counts) and not loaded yet. A file that does not load
 * (or whose name cannot be a kind's, or is an embedded plugin's) is skipped with a debug message
 * and, when @failures is not NULL, added to it: path -> GError. Holds the load token. */
static void
load_directory (const char *dir, GHashTable *seen, GHashTable *failures)
{
  g_autoptr (GDir) d = NULL;
  g_autoptr (GError) dir_error = NULL;
  const char *entry;

  d = g_dir_open (dir, 0, &dir_error);
  if (d == NULL)
    {
      /* a directory that is not there is normal (the installed one, before any install) */
      if (g_error_matches (dir_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return;
      g_debug ("Skipping plugin directory %s: %s", dir, dir_error->message);
      if (failures != NULL)
        g_hash_table_insert (failures, g_strdup (dir),
                             g_error_new (MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                                          "plugin directory %s on the search path cannot be "
                                          "read: %s",
                                          dir, dir_error->message));
      return;
    }
  while ((entry = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *name = NULL;
      g_autofree char *path = NULL;
      g_autoptr (GError) error = NULL;
      const MemresPlugin *loaded;
      gsize len = strlen (entry);
      const gsize prefix = strlen ("libmemres-"), suffix = strlen (".so");

      if (len <= prefix + suffix || !g_str_has_prefix (entry, "libmemres-")
          || !g_str_has_suffix (entry, ".so"))
        continue;
      name = g_strndup (entry + prefix, len - prefix - suffix);
      path = g_build_filename (dir, entry, NULL);
      if (!_memres_kind_name_check (name, &error))
        g_prefix_error (&error, "plugin file %s: ", path);
      else if ((loaded = g_hash_table_lookup (loaded_plugins, name)) != NULL
               && loaded->path == NULL)
        /* a plugin embedded in libmemres (host, stats, track, retry), in any directory: it
         * shadows each such file, which is never loaded */
        g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_EXISTS,
                     "plugin file %s is not loaded: plugin \"%s\" is embedded in libmemres, "
                     "whose kinds take the name (give the file and its plugin another name)",
                     path, name);
      /* the first file of a name on the path counts; a plugin listed from its own init: not
       * yet */
      else if (!g_hash_table_add (seen, g_strdup (name))
               || g_hash_table_contains (loading_plugins, name) || load_plugin (name, path, &error))
        continue;
      g_debug ("Skipping plugin %s: %s", path, error->message);
      if (failures != NULL)
        g_hash_table_insert (failures, g_steal_pointer (&path), g_steal_pointer (&error));
    }
}

/**
 * memres_registry_list_kinds:
 * @error: return location for a #GError, or %NULL
 *
 * Loads every plugin on the search path (memres_registry_get_search_path(); a broken plugin is
 * skipped with a debug message; for a name present in several directories only the first
 * counts) and lists every registered kind: the embedded host kind, the plugins' kinds and
 * those the application registered. memres_registry_list_kinds_full() also tells which plugin
 * files did not load, and why. Thread-safe.
 *
 * Errors: none at present; the parameter is there for future failures.
 *
 * Returns: (transfer full) (element-type MemresKind): new references to every kind, sorted by
 *   name; free with `g_ptr_array_unref`
 *
 * Since: 1.0
 */
GPtrArray *
memres_registry_list_kinds (GError **error)
{
  return memres_registry_list_kinds_full (NULL, error);
}

/**
 * memres_registry_list_kinds_full:
 * @failures: (out) (optional) (transfer full) (element-type filename GError): return location
 *   for the plugin files that did not load, or %NULL
 * @error: return location for a #GError, or %NULL
 *
 * memres_registry_list_kinds(), and in @failures a new hash table (empty when every plugin
 * loaded) that maps the path of each plugin file on the search path that did not load to the
 * #GError of that attempt: the errors of memres_registry_lookup() (%MEMRES_PLUGIN_ERROR_MODULE,
 * %MEMRES_PLUGIN_ERROR_SYMBOL, %MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
 * %MEMRES_PLUGIN_ERROR_NAME_MISMATCH, %MEMRES_PLUGIN_ERROR_INIT_FAILED, %MEMRES_ERROR_EXISTS),
 * or %MEMRES_ERROR_INVALID_ARGUMENT for a `libmemres-<name>.so` whose name cannot be a kind's,
 * %MEMRES_ERROR_EXISTS for one whose name is a plugin embedded in libmemres (`host`, `stats`,
 * `track`, `retry`: the file is never opened, the embedded kinds are used; in every directory);
 * and a directory of the search path that exists but cannot be read maps to a
 * %MEMRES_PLUGIN_ERROR_MODULE saying why.
 * A failed file is tried again on each call (it may have been replaced); a file shadowed by
 * one of the same name in an earlier directory is neither loaded nor listed. A failure here is
 * not a failure of the call: @error is not set for it. Thread-safe.
 *
 * Errors: none at present; the parameter is there for future failures.
 *
 * Returns: (transfer full) (element-type MemresKind): new references to every kind, sorted by
 *   name; free with `g_ptr_array_unref`; free @failures with `g_hash_table_unref`
 *
 * Since: 1.1
 */
GPtrArray *
memres_registry_list_kinds_full (GHashTable **failures, GError **error)
{
  g_auto (GStrv) dirs = NULL;
  g_autoptr (GHashTable) seen = NULL;
  g_autoptr (GHashTable) failed = NULL;

  ensure_embedded ();
  dirs = memres_registry_get_search_path ();
  if (failures != NULL)
    failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_error_free);

  load_token_acquire ();
  seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; dirs[i] != NULL; i++)
    load_directory (dirs[i], seen, failed);
  load_token_release ();

  if (failures != NULL)
    *failures = g_steal_pointer (&failed);
  return _memres_registry_list ();
}

/**
 * memres_registry_register_kind:
 * @info: the kind: name, description, option schema, ops table, private data size
 * @error: return location for a #GError, or %NULL
 *
 * Registers a kind defined inside the application (or a test) rather than in a plugin file.
 * The core keeps pointers to @info's strings, schema and ops table: they must stay valid for
 * the life of the process. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a bad name, a missing required slot, a bad
 * option schema or a bad IPC table (a slot without its pair, a table on an adaptor);
 * %MEMRES_PLUGIN_ERROR_ABI_MISMATCH for an IPC table whose version is 0 or newer than the
 * core's; %MEMRES_ERROR_EXISTS when the name is taken (the embedded kinds are always
 * registered first).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_registry_register_kind (const MemresKindInfo *info, GError **error)
{
  g_autoptr (GPtrArray) kinds = NULL;
  MemresKind *kind;

  g_return_val_if_fail (info != NULL, FALSE);

  ensure_embedded ();
  kind = _memres_kind_new (NULL, info, error);
  if (kind == NULL)
    return FALSE;
  kinds = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_kind_unref);
  g_ptr_array_add (kinds, kind);
  return _memres_registry_insert (kinds, error);
}
