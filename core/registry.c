/* memres - CUDA memory resources
 * registry.c: the kinds by name, a GHashTable under a GRWLock, and nothing else: the one check
 * of a name already taken, all-or-nothing inserts, lookups and sorted lists of what is
 * registered, and the plugin search path. It never loads anything: loader.c loads plugins
 * (plugin.c) on demand and hands their kinds here. */
#include "memres-private.h"

#include <string.h>

static GRWLock registry_lock;

/* The child cannot release the writer lock its parent's thread took (glibc's rwlock knows its
 * writer by thread id, which the child's thread does not have): it starts a new one. */
void
_memres_registry_fork (MemresResource *unused, MemresForkPhase phase)
{
  if (phase == MEMRES_FORK_PREPARE)
    g_rw_lock_writer_lock (&registry_lock);
  else if (phase == MEMRES_FORK_PARENT)
    g_rw_lock_writer_unlock (&registry_lock);
  else
    {
      static gpointer volatile stale G_GNUC_UNUSED; /* the parent's, kept reachable */

      stale = registry_lock.p;
      g_rw_lock_init (&registry_lock);
    }
}

/* The table of kinds, name -> MemresKind* (strong), created at first use. */
static GHashTable *
registry_kinds (void)
{
  static GHashTable *table;

  if (g_once_init_enter (&table))
    g_once_init_leave (&table, g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                      (GDestroyNotify) memres_kind_unref));
  return table;
}

/* The one check of a duplicate kind name: @name is taken when a registered kind has it or
 * one of the first @n_pending kinds of @pending (kinds not inserted yet) does. The caller holds
 * registry_lock. MEMRES_ERROR_EXISTS. */
static gboolean
check_name_free (const char *name, GPtrArray *pending, guint n_pending, GError **error)
{
  gboolean taken = g_hash_table_contains (registry_kinds (), name);

  for (guint i = 0; !taken && i < n_pending; i++)
    taken = strcmp (((MemresKind *) g_ptr_array_index (pending, i))->name, name) == 0;
  if (taken)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS,
                 "a kind named \"%s\" is already registered", name);
  return !taken;
}

/* FALSE with MEMRES_ERROR_EXISTS when a kind named @name is registered or in @pending (may be
 * NULL): what a plugin's init learns at once; _memres_registry_insert() checks again. */
gboolean
_memres_registry_check_name (const char *name, GPtrArray *pending, GError **error)
{
  G_GNUC_UNUSED g_autoptr (GRWLockReaderLocker) locker
      = g_rw_lock_reader_locker_new (&registry_lock);

  return check_name_free (name, pending, pending != NULL ? pending->len : 0, error);
}

/* Inserts every kind of @kinds, or none when a name is taken or repeated (MEMRES_ERROR_EXISTS). */
gboolean
_memres_registry_insert (GPtrArray *kinds, GError **error)
{
  G_GNUC_UNUSED g_autoptr (GRWLockWriterLocker) locker
      = g_rw_lock_writer_locker_new (&registry_lock);

  for (guint i = 0; i < kinds->len; i++)
    if (!check_name_free (((MemresKind *) g_ptr_array_index (kinds, i))->name, kinds, i, error))
      return FALSE;
  for (guint i = 0; i < kinds->len; i++)
    {
      MemresKind *kind = g_ptr_array_index (kinds, i);
      g_hash_table_insert (registry_kinds (), kind->name, memres_kind_ref (kind));
    }
  return TRUE;
}

/* A new reference to the registered kind @name, or NULL. */
MemresKind *
_memres_registry_find (const char *name)
{
  G_GNUC_UNUSED g_autoptr (GRWLockReaderLocker) locker
      = g_rw_lock_reader_locker_new (&registry_lock);
  MemresKind *kind = g_hash_table_lookup (registry_kinds (), name);

  return kind != NULL ? memres_kind_ref (kind) : NULL;
}

static gint
compare_kinds (gconstpointer a, gconstpointer b)
{
  const MemresKind *ka = *(MemresKind *const *) a;
  const MemresKind *kb = *(MemresKind *const *) b;

  return strcmp (ka->name, kb->name);
}

/* New references to every registered kind, sorted by name (free with g_ptr_array_unref()). */
GPtrArray *
_memres_registry_list (void)
{
  GPtrArray *result = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_kind_unref);
  GHashTableIter iter;
  gpointer value;

  g_rw_lock_reader_lock (&registry_lock);
  g_hash_table_iter_init (&iter, registry_kinds ());
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (result, memres_kind_ref (value));
  g_rw_lock_reader_unlock (&registry_lock);
  g_ptr_array_sort (result, compare_kinds);
  return result;
}

/* The directory memres_registry_set_plugin_dir() set (owned), or NULL; under registry_lock. */
static char *extra_plugin_dir;

/**
 * memres_registry_set_plugin_dir:
 * @dir: (nullable): a directory holding plugins (`libmemres-<name>.so`), or %NULL for none
 *
 * Adds @dir to the plugin search path (memres_registry_get_search_path()), after the entries of
 * `MEMRES_PLUGIN_PATH` and before the installed plugin directory, replacing the directory an
 * earlier call set; %NULL removes it. For a program or package that carries its plugins with
 * it, in a place it knows only at run time (the Python package finds them beside itself): the
 * environment still comes first. The string is copied. Plugins already loaded stay loaded; the
 * next lookup of a kind not yet registered searches the new path. Thread-safe.
 *
 * Since: 2.0
 */
void
memres_registry_set_plugin_dir (const char *dir)
{
  char *copy = g_strdup (dir);
  char *old;

  g_rw_lock_writer_lock (&registry_lock);
  old = extra_plugin_dir;
  extra_plugin_dir = copy;
  g_rw_lock_writer_unlock (&registry_lock);
  g_free (old);
}

/**
 * memres_registry_get_search_path:
 *
 * The directories searched for plugins, in order: the entries of the environment variable
 * `MEMRES_PLUGIN_PATH` (colon-separated, empty entries skipped), then the directory
 * memres_registry_set_plugin_dir() set, if any, then the installed plugin directory (the
 * pkg-config variable `plugindir` of memres-2). The environment is read on each call.
 * Thread-safe.
 *
 * Returns: (transfer full) (array zero-terminated=1): the directories; free with `g_strfreev`
 *
 * Since: 1.0
 */
gchar **
memres_registry_get_search_path (void)
{
  g_autoptr (GStrvBuilder) dirs = g_strv_builder_new ();
  const char *env = g_getenv ("MEMRES_PLUGIN_PATH");

  if (env != NULL)
    {
      g_auto (GStrv) parts = g_strsplit (env, G_SEARCHPATH_SEPARATOR_S, -1);
      for (guint i = 0; parts[i] != NULL; i++)
        if (parts[i][0] != '\0')
          g_strv_builder_add (dirs, parts[i]);
    }
  g_rw_lock_reader_lock (&registry_lock);
  if (extra_plugin_dir != NULL)
    g_strv_builder_add (dirs, extra_plugin_dir);
  g_rw_lock_reader_unlock (&registry_lock);
  g_strv_builder_add (dirs, MEMRES_PLUGINDIR);
  return g_strv_builder_end (dirs);
}
