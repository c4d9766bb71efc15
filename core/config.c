/* memres - CUDA memory resources
 * config.c: named resources, `@NAME` layers of a spec. A key file read from $MEMRES_CONFIG,
 * else $XDG_CONFIG_HOME/memres/resources.conf, else the first memres/resources.conf of the
 * system config dirs ($XDG_CONFIG_DIRS, /etc/xdg):
 *
 *   # comments
 *   [training]
 *   spec=limit:max=60GiB>cache>dmr:device=0
 *   description=what the training job uses
 *
 * Every group is a name ([A-Za-z0-9_.-]+) and must have `spec`; `description` is optional; any
 * other key, a line that is none of these, a duplicate, a file that is not UTF-8 or larger
 * than 1 MiB is an error naming the file, the line and the key. The file is read at every
 * lookup (no cache): creating a resource by name is not a hot path, and a changed file or
 * environment takes effect at once. Values are read raw (g_key_file_get_value()): a spec is
 * written exactly as on a command line, backslash escapes included. */
#include "memres-private.h"

#include "../sdk/file-reader.h"

#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>

#define CONFIG_MAX_BYTES (1024 * 1024)
#define CONFIG_BASENAME  "resources.conf"

typedef struct
{
  char *name;
  char *spec;        /* NULL until its spec key is met */
  char *description; /* NULL: none */
  guint line;        /* of the spec key (of the group header while there is none) */
} Entry;

typedef struct
{
  char *path;          /* NULL: no file found (no names defined) */
  GPtrArray *list;     /* Entry*, in file order */
  GHashTable *by_name; /* name -> Entry* of @list */
} Config;

/* Where @e is defined: `FILE:LINE`. (transfer full) */
static char *
entry_origin (const Config *config, const Entry *e)
{
  return g_strdup_printf ("%s:%u", config->path, e->line);
}

static void
entry_free (gpointer data)
{
  Entry *e = data;

  g_free (e->name);
  g_free (e->spec);
  g_free (e->description);
  g_free (e);
}

static void
config_clear (Config *c)
{
  g_clear_pointer (&c->path, g_free);
  g_clear_pointer (&c->by_name, g_hash_table_unref);
  g_clear_pointer (&c->list, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Config, config_clear)

static gboolean bad_file (GError **error, const char *path, guint line, const char *key,
                          const char *format, ...) G_GNUC_PRINTF (5, 6);

/* MEMRES_ERROR_INVALID_ARGUMENT "PATH:LINE: key "KEY": WHY" (line 0: none, key NULL: none). */
static gboolean
bad_file (GError **error, const char *path, guint line, const char *key, const char *format, ...)
{
  g_autofree char *why = NULL;
  g_autofree char *where = NULL;
  g_autofree char *shown_key = key != NULL ? _memres_show_input (key) : NULL;
  g_autofree char *about_key = key != NULL ? g_strdup_printf (": key \"%s\"", shown_key) : NULL;
  va_list args;

  va_start (args, format);
  why = g_strdup_vprintf (format, args);
  va_end (args);
  where = line > 0 ? g_strdup_printf ("%s:%u", path, line) : g_strdup (path);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "config file %s%s: %s", where,
               about_key != NULL ? about_key : "", why);
  return FALSE;
}

static gboolean
name_is_valid (const char *name)
{
  return name[0] != '\0'
         && name[strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")]
                == '\0';
}

/* Where the config file is: MEMRES_CONFIG (which must then exist), else the first that exists
 * of the user's and the system's. NULL when none does, and when MEMRES_CONFIG is set empty
 * (`MEMRES_CONFIG= prog`: no config file). */
static char *
config_path (gboolean *explicit)
{
  const char *env = g_getenv ("MEMRES_CONFIG");
  const char *const *system = g_get_system_config_dirs ();
  guint i;

  *explicit = env != NULL && env[0] != '\0';
  if (env != NULL)
    return *explicit ? g_strdup (env) : NULL;
  /* the user's dir (i 0), then the system's (i - 1) */
  for (i = 0; i == 0 || system[i - 1] != NULL; i++)
    {
      char *path = g_build_filename (i == 0 ? g_get_user_config_dir () : system[i - 1], "memres",
                                     CONFIG_BASENAME, NULL);

      if (g_file_test (path, G_FILE_TEST_EXISTS))
        return path;
      g_free (path);
    }
  return NULL;
}

/* Reads @path whole into @data (memres_file_read(): opened without blocking, refused on the
 * descriptor unless it is a regular file, so that a FIFO or a device is refused at once; a UTF-8
 * byte order mark dropped), at most CONFIG_MAX_BYTES. A file that cannot be opened or read, or is
 * not a regular file, is G_FILE_ERROR, "config file PATH: REASON"; a larger one, as a malformed
 * one, MEMRES_ERROR_INVALID_ARGUMENT (bad_file()). */
static gboolean
read_file (const char *path, GString *data, GError **error)
{
  g_autofree char *shown = g_strdup_printf ("config file %s", path);
  struct stat st;

  switch (memres_file_read (path, shown, CONFIG_MAX_BYTES, data, &st, error))
    {
    case MEMRES_FILE_READ_OK:
      return TRUE;
    case MEMRES_FILE_READ_TOO_LARGE:
      if (st.st_size > CONFIG_MAX_BYTES)
        return bad_file (error, path, 0, NULL,
                         "%" G_GINT64_FORMAT " bytes, larger than the %d allowed",
                         (gint64) st.st_size, CONFIG_MAX_BYTES);
      /* it grew since the fstat() */
      return bad_file (error, path, 0, NULL, "larger than the %d bytes allowed", CONFIG_MAX_BYTES);
    case MEMRES_FILE_READ_FAILED:
    default:
      return FALSE;
    }
}

/* A group (the entry @e) ends: FALSE with an error when it had no spec. */
static gboolean
group_end (const char *path, const Entry *e, GError **error)
{
  if (e != NULL && e->spec == NULL)
    return bad_file (error, path, e->line, "spec", "[%s] has no spec", e->name);
  return TRUE;
}

/* Checks every line (what GKeyFile's messages do not say: the line), filling @config with the
 * names and the line of each spec. */
static gboolean
scan_lines (const char *path, const GString *data, Config *config, GError **error)
{
  const char *nul = memchr (data->str, '\0', data->len);
  g_auto (GStrv) lines = NULL;
  Entry *current = NULL;
  gboolean has_description = FALSE;
  guint line;

  if (nul != NULL)
    {
      guint n = 1;
      for (const char *q = data->str; q < nul; q++)
        n += *q == '\n';
      return bad_file (error, path, n, NULL, "a NUL byte: not a text file");
    }
  lines = _memres_split (data->str, '\n', FALSE);
  for (line = 1; lines[line - 1] != NULL; line++)
    {
      char *s = lines[line - 1];
      char *eq;
      g_autofree char *key = NULL;
      gboolean is_spec;

      if (!g_utf8_validate (s, -1, NULL))
        return bad_file (error, path, line, NULL, "not UTF-8 text");
      s = g_strstrip (s);
      if (s[0] == '\0' || s[0] == '#')
        continue;
      if (s[0] == '[')
        {
          gsize len = strlen (s);
          g_autofree char *name = NULL;

          if (!group_end (path, current, error))
            return FALSE;
          if (s[len - 1] != ']')
            return bad_file (error, path, line, NULL, "a group header without its ']'");
          name = g_strndup (s + 1, len - 2);
          if (!name_is_valid (name))
            {
              g_autofree char *shown = _memres_show_input (name);
              return bad_file (error, path, line, NULL,
                               "invalid name [%s]: names are letters, digits, '_', '-' and '.'",
                               shown);
            }
          if (g_hash_table_contains (config->by_name, name))
            return bad_file (error, path, line, NULL, "[%s] is defined twice", name);
          current = g_new0 (Entry, 1);
          current->name = g_steal_pointer (&name);
          current->line = line;
          g_ptr_array_add (config->list, current);
          g_hash_table_insert (config->by_name, current->name, current);
          has_description = FALSE;
          continue;
        }
      eq = strchr (s, '=');
      if (eq == NULL)
        {
          g_autofree char *shown = _memres_show_input (s);
          return bad_file (error, path, line, NULL,
                           "\"%s\" is not a [name], a key=value or a # comment", shown);
        }
      key = g_strstrip (g_strndup (s, (gsize) (eq - s)));
      if (current == NULL)
        return bad_file (error, path, line, key, "outside any [name] group");
      is_spec = strcmp (key, "spec") == 0;
      if (!is_spec && strcmp (key, "description") != 0)
        return bad_file (error, path, line, key,
                         "unknown key in [%s] (valid keys are spec and description)",
                         current->name);
      if (is_spec ? current->spec != NULL : has_description)
        return bad_file (error, path, line, key, "given twice in [%s]", current->name);
      if (is_spec)
        {
          current->spec = g_strdup (""); /* the value is GKeyFile's, below */
          current->line = line;
        }
      else
        has_description = TRUE;
    }
  return group_end (path, current, error);
}

/* Reads the config file; a missing file at the default places defines no names. */
static gboolean
config_load (Config *config, GError **error)
{
  g_autoptr (GKeyFile) kf = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GString) data = g_string_new (NULL);
  gboolean explicit;
  guint i;

  config->list = g_ptr_array_new_with_free_func (entry_free);
  config->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  config->path = config_path (&explicit);
  if (config->path == NULL)
    return TRUE;
  if (!read_file (config->path, data, error))
    {
      if (explicit)
        g_prefix_error (error, "MEMRES_CONFIG: ");
      return FALSE;
    }
  if (!scan_lines (config->path, data, config, error))
    return FALSE;

  kf = g_key_file_new ();
  if (!g_key_file_load_from_data (kf, data->str, data->len, G_KEY_FILE_NONE, &local))
    return bad_file (error, config->path, 0, NULL, "%s", local->message);
  for (i = 0; i < config->list->len; i++)
    {
      Entry *e = g_ptr_array_index (config->list, i);
      g_autofree char *value = g_key_file_get_value (kf, e->name, "spec", &local);

      if (value == NULL)
        return bad_file (error, config->path, e->line, "spec", "%s", local->message);
      g_free (e->spec);
      e->spec = g_strstrip (g_steal_pointer (&value));
      e->description = g_key_file_get_value (kf, e->name, "description", NULL);
      if (e->description != NULL)
        g_strstrip (e->description);
      if (e->spec[0] == '\0')
        return bad_file (error, config->path, e->line, "spec", "[%s] has an empty spec", e->name);
    }
  return TRUE;
}

/* The entry of @name in the config file, loaded into @config. */
static const Entry *
config_find (Config *config, const char *name, GError **error)
{
  const Entry *e;

  /* a malformed name is a malformed spec, whatever the file defines */
  if (!name_is_valid (name))
    {
      g_autofree char *shown = _memres_show_input (name);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "invalid resource name \"@%s\": a name is one or more letters, digits, '_', "
                   "'-' and '.' (an @NAME layer takes no options)",
                   shown);
      return NULL;
    }
  if (!config_load (config, error))
    return NULL;
  e = g_hash_table_lookup (config->by_name, name);
  if (e == NULL)
    {
      g_autofree char *shown = _memres_show_input (name);
      g_autoptr (GString) names = g_string_new (NULL);
      guint i;

      for (i = 0; i < config->list->len; i++)
        g_string_append_printf (names, "%s@%s", i > 0 ? ", " : "",
                                ((Entry *) g_ptr_array_index (config->list, i))->name);
      if (config->path == NULL && g_getenv ("MEMRES_CONFIG") != NULL)
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "no resource named @%s: MEMRES_CONFIG is set to the empty string: no "
                     "config file is read",
                     shown);
      else if (config->path == NULL)
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "no resource named @%s: no config file defines names (set MEMRES_CONFIG "
                     "or write %s/memres/" CONFIG_BASENAME ")",
                     shown, g_get_user_config_dir ());
      else if (config->list->len == 0)
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "no resource named @%s: %s defines no names", shown, config->path);
      else
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "no resource named @%s in %s: defined are %s", shown, config->path,
                     names->str);
      return NULL;
    }
  return e;
}

char *
_memres_config_lookup (const char *name, char **origin, GError **error)
{
  g_auto (Config) config = { 0 };
  const Entry *e = config_find (&config, name, error);

  if (e == NULL)
    return NULL;
  if (origin != NULL)
    *origin = entry_origin (&config, e);
  return g_strdup (e->spec);
}

/**
 * memres_config_list_resources:
 * @path: (out) (optional) (nullable) (transfer full): return location for the file read, or
 *   %NULL when no config file exists; free with `g_free`
 * @error: return location for a #GError, or %NULL
 *
 * The names the config file defines, for `@NAME` layers of a spec (memres_resource_new()):
 * the file is `$MEMRES_CONFIG` when set, else `$XDG_CONFIG_HOME/memres/resources.conf`, else
 * the first `memres/resources.conf` of the system config dirs (`$XDG_CONFIG_DIRS`, /etc/xdg);
 * `$MEMRES_CONFIG` set to the empty string means no config file (none read, no names).
 * Each `[NAME]` group holds `spec=` (the stack, written as on a command line) and an optional
 * `description=`. The file is read at each call. Thread-safe (when nobody changes the
 * environment concurrently).
 *
 * Errors: %G_FILE_ERROR when the file cannot be opened or read, with the code
 * g_file_error_from_errno() gives the system's error (%G_FILE_ERROR_NOENT: $MEMRES_CONFIG names
 * no file; %G_FILE_ERROR_NOTDIR, %G_FILE_ERROR_ACCES: unreadable, ...), or is not a regular
 * file (%G_FILE_ERROR_ISDIR: a directory; %G_FILE_ERROR_INVAL: a FIFO, a device, a socket,
 * refused without blocking; the message says which); %MEMRES_ERROR_INVALID_ARGUMENT for a malformed
 * file (over 1 MiB, not UTF-8, a bad line, name or key, a duplicate, a group without `spec`). Every
 * message names the file (and, for a malformed one, the line and the key). A file only looked for
 * at the default places and absent is no error: no names.
 *
 * Returns: (transfer full) (element-type utf8) (nullable): the names in file order (empty
 *   when there is no file), or %NULL with @error set
 *
 * Since: 1.2
 */
GPtrArray *
memres_config_list_resources (char **path, GError **error)
{
  return memres_config_list_resources_full (path, NULL, NULL, error);
}

/**
 * memres_config_list_resources_full:
 * @path: (out) (optional) (nullable) (transfer full): as for memres_config_list_resources()
 * @specs: (out) (optional) (transfer full) (element-type utf8): return location for each
 *   name's spec, as written (what memres_config_get_resource_spec() returns), in the same order
 * @origins: (out) (optional) (transfer full) (element-type utf8): return location for where
 *   each is defined, `FILE:LINE`, in the same order
 * @error: return location for a #GError, or %NULL
 *
 * memres_config_list_resources() with every name's spec and origin, from one read of the file
 * (a listing through memres_config_get_resource_spec() reads it once per name). Thread-safe.
 *
 * Errors: those of memres_config_list_resources(); @specs and @origins are left unset then.
 *
 * Returns: (transfer full) (element-type utf8) (nullable): the names in file order, or %NULL
 *   with @error set
 *
 * Since: 1.2
 */
GPtrArray *
memres_config_list_resources_full (char **path, GPtrArray **specs, GPtrArray **origins,
                                   GError **error)
{
  g_auto (Config) config = { 0 };
  GPtrArray *names;
  guint i;

  if (path != NULL)
    *path = NULL;
  if (!config_load (&config, error))
    return NULL;
  names = g_ptr_array_new_with_free_func (g_free);
  if (specs != NULL)
    *specs = g_ptr_array_new_with_free_func (g_free);
  if (origins != NULL)
    *origins = g_ptr_array_new_with_free_func (g_free);
  for (i = 0; i < config.list->len; i++)
    {
      const Entry *e = g_ptr_array_index (config.list, i);

      g_ptr_array_add (names, g_strdup (e->name));
      if (specs != NULL)
        g_ptr_array_add (*specs, g_strdup (e->spec));
      if (origins != NULL)
        g_ptr_array_add (*origins, entry_origin (&config, e));
    }
  if (path != NULL)
    *path = g_steal_pointer (&config.path);
  return names;
}

/**
 * memres_config_get_resource_spec:
 * @name: a name of the config file, without the `@`
 * @origin: (out) (optional) (transfer full): return location for where it is defined,
 *   `FILE:LINE`; free with `g_free`
 * @error: return location for a #GError, or %NULL
 *
 * The spec the config file (see memres_config_list_resources()) gives @name, as written (it
 * may itself name other `@NAME`s: memres_resource_new() expands them). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @name is not a name (one or more ASCII letters,
 * digits, `_`, `-` and `.`; the file is not read); %MEMRES_ERROR_NOT_FOUND when @name is not
 * defined (the message lists the names that are); those of memres_config_list_resources().
 *
 * Returns: (transfer full) (nullable): the spec, or %NULL with @error set
 *
 * Since: 1.2
 */
char *
memres_config_get_resource_spec (const char *name, char **origin, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);

  if (origin != NULL)
    *origin = NULL;
  return _memres_config_lookup (name, origin, error);
}

/**
 * memres_config_get_resource_description:
 * @name: a name of the config file, without the `@`
 * @description: (out) (transfer full) (nullable): return location for the name's
 *   `description=`, as written (surrounding blanks stripped), or %NULL when the group has
 *   none; free with `g_free`
 * @error: return location for a #GError, or %NULL
 *
 * The description the config file (see memres_config_list_resources()) gives @name: text for
 * people (`memres resources` shows it); memres reads nothing else from it. Thread-safe.
 *
 * Errors: those of memres_config_get_resource_spec(); *@description is %NULL then.
 *
 * Returns: %TRUE when @name is defined (with or without a description), else %FALSE with
 *   @error set
 *
 * Since: 2.0
 */
gboolean
memres_config_get_resource_description (const char *name, char **description, GError **error)
{
  g_auto (Config) config = { 0 };
  const Entry *e;

  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (description != NULL, FALSE);

  *description = NULL;
  e = config_find (&config, name, error);
  if (e == NULL)
    return FALSE;
  *description = g_strdup (e->description);
  return TRUE;
}
