/* memres - CUDA memory resources
 * input.c: an input file a command reads whole (memres view's, trace's and replay's LOGs and
 * snapshots): a missing one named as missing, anything but a regular file refused before it is
 * opened (a FIFO or a device would be read without end, or wait for good: G_FILE_ERROR_ISDIR
 * for a directory, G_FILE_ERROR_INVAL for the others, as a config file's), and checked again on
 * the descriptor, opened without blocking (a FIFO put in its place meanwhile is refused, not
 * waited on), one larger than the memory available refused before it is read, a leading UTF-8
 * byte order mark skipped (the open, the checks on the descriptor and the read are
 * sdk/file-reader.c's memres_file_read(), as a config file's). */
#include "memres-tool.h"

#include "../sdk/file-reader.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* The memory the kernel says could be given to this process now (/proc/meminfo's MemAvailable,
 * in bytes), or 0 when it does not say. */
static guint64
memory_available (void)
{
  g_autofree char *meminfo = NULL;
  const char *line;
  guint64 kib;

  if (!g_file_get_contents ("/proc/meminfo", &meminfo, NULL, NULL)
      || (line = strstr (meminfo, "MemAvailable:")) == NULL)
    return 0;
  kib = g_ascii_strtoull (line + strlen ("MemAvailable:"), NULL, 10);
  return kib > G_MAXUINT64 / 1024 ? G_MAXUINT64 : kib * 1024;
}

/* G_FILE_ERROR for @errsv, the system's error on @shown; returns FALSE. */
static gboolean
errno_error (GError **error, const char *shown, int errsv)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", shown,
               errsv == ENOENT ? "No such file" : g_strerror (errsv));
  return FALSE;
}

/* G_FILE_ERROR_NOMEM for a file @shown of at least @size bytes, more than the @available bytes
 * of memory; returns FALSE. */
static gboolean
too_large (GError **error, const char *shown, guint64 size, guint64 available)
{
  g_autofree char *size_text = memres_tool_format_size (size);
  g_autofree char *free_text = memres_tool_format_size (available);

  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOMEM,
               "%s: %s is more than the memory available to read it into (%s): memres reads its "
               "input whole",
               shown, size_text, free_text);
  return FALSE;
}

gboolean
memres_tool_read_input (const char *path, char **text, gsize *length, struct stat *file,
                        GError **error)
{
  g_autofree char *shown = memres_tool_show_input (path);
  g_autoptr (GString) data = g_string_new (NULL);
  struct stat own, *st = file != NULL ? file : &own;
  struct stat opened;
  /* read whole: a file larger than the memory there is (a sparse file of a terabyte) is refused
   * before it is read, rather than taking the machine's memory and swap to fail or be killed */
  guint64 available = memory_available ();
  gsize max_bytes = available > 0 && available < G_MAXSSIZE ? (gsize) available : G_MAXSSIZE;

  /* refused before it is opened, too: the open of a device may act on it */
  if (stat (path, st) != 0)
    return errno_error (error, shown, errno);
  if (!memres_file_check_regular (st, shown, error))
    return FALSE;
  if ((guint64) st->st_size > max_bytes)
    return too_large (error, shown, (guint64) st->st_size, available);
  /* a FIFO put in the file's place since the stat is refused on the descriptor */
  switch (memres_file_read (path, shown, max_bytes, data, &opened, error))
    {
    case MEMRES_FILE_READ_OK:
      break;
    case MEMRES_FILE_READ_TOO_LARGE:
      return too_large (error, shown, MAX ((guint64) opened.st_size, (guint64) max_bytes + 1),
                        available);
    case MEMRES_FILE_READ_FAILED:
    default:
      return FALSE;
    }
  /* a UTF-8 byte order mark, which spreadsheets write before a CSV file they save (and some
   * editors before JSON), was dropped: no part of the log's header or of the snapshot, as RMM's
   * readers and Python's utf-8-sig skip it. Lines are counted as before; a snapshot's byte
   * offsets in errors count from after it. */
  *length = data->len;
  *text = g_string_free (g_steal_pointer (&data), FALSE);
  return TRUE;
}
