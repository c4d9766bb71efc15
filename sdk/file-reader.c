/* memres - CUDA memory resources
 * file-reader.c: a whole file read where a user names it (file-reader.h): opened without
 * blocking, refused unless it is a regular file, read to its end up to a size cap. */
#include "file-reader.h"

#include "file-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (64 * 1024) /* bytes a read asks for beyond the size the file had */
#define UTF8_BOM   "\xEF\xBB\xBF"

/* G_FILE_ERROR for the system's error @errsv on the file @shown names. */
static MemresFileRead
errno_error (GError **error, const char *shown, int errsv)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", shown,
               g_strerror (errsv));
  return MEMRES_FILE_READ_FAILED;
}

gboolean
memres_file_check_regular (const struct stat *st, const char *shown, GError **error)
{
  if (S_ISREG (st->st_mode))
    return TRUE;
  g_set_error (error, G_FILE_ERROR, S_ISDIR (st->st_mode) ? G_FILE_ERROR_ISDIR : G_FILE_ERROR_INVAL,
               "%s: not a regular file (%s)", shown, memres_file_type_name (st->st_mode));
  return FALSE;
}

/* Appends what @fd (a regular file of @size bytes by its fstat(), at most @max_bytes) gives, to
 * its end, to @data: at most @max_bytes + 1 bytes, the one more telling that it is too large. */
static MemresFileRead
read_fd (int fd, const char *shown, gsize size, gsize max_bytes, GString *data, GError **error)
{
  gsize start = data->len;

  for (;;)
    {
      gsize got = data->len - start;
      gsize want;
      gssize n;

      if (got > max_bytes)
        return MEMRES_FILE_READ_TOO_LARGE;
      /* the rest of the size it had and a chunk beyond (its end, or what it grew by) */
      want = MIN ((got < size ? size - got : 0) + READ_CHUNK, max_bytes + 1 - got);
      g_string_set_size (data, start + got + want);
      n = read (fd, data->str + start + got, want);
      if (n < 0)
        {
          int errsv = errno;

          g_string_set_size (data, start + got);
          if (errsv == EINTR)
            continue;
          return errno_error (error, shown, errsv);
        }
      g_string_set_size (data, start + got + (gsize) n);
      if (n == 0)
        return MEMRES_FILE_READ_OK;
    }
}

MemresFileRead
memres_file_read (const char *path, const char *shown, gsize max_bytes, GString *data,
                  struct stat *opened, GError **error)
{
  struct stat own, *st = opened != NULL ? opened : &own;
  gsize start = data->len;
  MemresFileRead result;
  int fd;

  g_return_val_if_fail (max_bytes <= G_MAXSSIZE, MEMRES_FILE_READ_FAILED);
  fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return errno_error (error, shown, errno);
  if (fstat (fd, st) != 0)
    result = errno_error (error, shown, errno);
  else if (!memres_file_check_regular (st, shown, error))
    result = MEMRES_FILE_READ_FAILED;
  else if ((guint64) st->st_size > max_bytes)
    result = MEMRES_FILE_READ_TOO_LARGE;
  else
    result = read_fd (fd, shown, (gsize) st->st_size, max_bytes, data, error);
  close (fd);
  if (result != MEMRES_FILE_READ_OK)
    g_string_truncate (data, start);
  else if (data->len - start >= 3 && memcmp (data->str + start, UTF8_BOM, 3) == 0)
    g_string_erase (data, (gssize) start, 3);
  return result;
}
