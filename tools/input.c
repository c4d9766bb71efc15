/* memres - CUDA memory resources
 * input.c: an input file a command reads whole (memres view's, trace's and replay's LOGs and
 * snapshots): a missing one named as missing, anything but a regular file refused before it is
 * opened (a FIFO or a device would be read without end, or wait for good: G_FILE_ERROR_ISDIR
 * for a directory, G_FILE_ERROR_INVAL for the others, as a config file's), and checked again on
 * the descriptor, opened without blocking (a FIFO put in its place meanwhile is refused, not
 * waited on), one larger than the memory available refused before it is read, a leading UTF-8
 * byte order mark skipped. */
#include "memres-tool.h"

#include "../sdk/file-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* G_FILE_ERROR for @errsv, the system's error on @shown; returns FALSE. */
static gboolean
errno_error (GError **error, const char *shown, int errsv)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", shown,
               errsv == ENOENT ? "No such file" : g_strerror (errsv));
  return FALSE;
}

/* Refuses @st when it is no regular file: G_FILE_ERROR_ISDIR for a directory, else
 * G_FILE_ERROR_INVAL, the message saying what it is. */
static gboolean
regular_file (GError **error, const char *shown, const struct stat *st)
{
  if (S_ISREG (st->st_mode))
    return TRUE;
  g_set_error (error, G_FILE_ERROR, S_ISDIR (st->st_mode) ? G_FILE_ERROR_ISDIR : G_FILE_ERROR_INVAL,
               "%s: not a regular file (%s)", shown, memres_file_type_name (st->st_mode));
  return FALSE;
}

/* Reads the open @fd to its end into @text (NUL-terminated) and @length. */
static gboolean
read_fd (int fd, const char *shown, gsize size, char **text, gsize *length, GError **error)
{
  g_autoptr (GString) data = g_string_sized_new (size + 1);
  char chunk[65536];
  gssize n;

  while ((n = read (fd, chunk, sizeof chunk)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno_error (error, shown, errno);
      g_string_append_len (data, chunk, n);
    }
  *length = data->len;
  *text = g_string_free (g_steal_pointer (&data), FALSE);
  return TRUE;
}

gboolean
memres_tool_read_input (const char *path, char **text, gsize *length, struct stat *file,
                        GError **error)
{
  g_autofree char *shown = memres_tool_show_input (path);
  struct stat own, *st = file != NULL ? file : &own;
  struct stat opened;
  gboolean ok;
  int fd;

  if (stat (path, st) != 0)
    return errno_error (error, shown, errno);
  if (!regular_file (error, shown, st))
    return FALSE;
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
  /* without blocking: a FIFO put in the file's place since the stat opens at once, and is
   * refused on the descriptor */
  fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return errno_error (error, shown, errno);
  if (fstat (fd, &opened) != 0)
    ok = errno_error (error, shown, errno);
  else
    ok = regular_file (error, shown, &opened)
         && read_fd (fd, shown, (gsize) opened.st_size, text, length, error);
  close (fd);
  if (!ok)
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
