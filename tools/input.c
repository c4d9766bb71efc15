/* memres - CUDA memory resources
 * input.c: an input file a command reads whole (memres view's, trace's and replay's LOGs and
 * snapshots): a missing one named as missing, anything but a regular file refused before it is
 * opened (a FIFO or a device would be read without end, or wait for good), one larger than the
 * memory available refused before it is read, a leading UTF-8 byte order mark skipped. */
#include "memres-tool.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define UTF8_BOM "\xEF\xBB\xBF"

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

gboolean
memres_tool_read_input (const char *path, char **text, gsize *length, struct stat *file,
                        GError **error)
{
  g_autofree char *shown = memres_tool_show_input (path);
  struct stat own, *st = file != NULL ? file : &own;

  if (stat (path, st) != 0)
    {
      int errsv = errno;

      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", shown,
                   errsv == ENOENT ? "No such file" : g_strerror (errsv));
      return FALSE;
    }
  if (!S_ISREG (st->st_mode))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "%s: not a regular file",
                   shown);
      return FALSE;
    }
  /* read whole: a file larger than the memory there is (a sparse file of a terabyte) is refused
   * before it is read, rather than taking the machine's memory and swap to fail or be killed */
  {
    guint64 available = memory_available ();

    if (available > 0 && (guint64) st->st_size > available)
      {
        g_autofree char *size = memres_tool_format_size ((guint64) st->st_size);
        g_autofree char *free_bytes = memres_tool_format_size (available);

        g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOMEM,
                     "%s: %s is more than the memory available to read it into (%s): memres "
                     "reads its input whole",
                     shown, size, free_bytes);
        return FALSE;
      }
  }
  if (!g_file_get_contents (path, text, length, error))
    return FALSE;
  /* a UTF-8 byte order mark, which spreadsheets write before a CSV file they save (and some
   * editors before JSON): no part of the log's header or of the snapshot, as RMM's readers and
   * Python's utf-8-sig skip it. Lines are counted as before; a snapshot's byte offsets in
   * errors count from after it. */
  if (*length >= 3 && memcmp (*text, UTF8_BOM, 3) == 0)
    {
      *length -= 3;
      memmove (*text, *text + 3, *length + 1); /* with the NUL g_file_get_contents() adds */
    }
  return TRUE;
}
