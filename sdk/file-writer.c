/* memres - CUDA memory resources
 * file-writer.c: a whole file written where a user names it (file-writer.h): a regular file
 * replaced by a rename, a link followed to the file it leads to, anything else refused, as is a
 * regular file another writer holds locked (flock(): a log layer's log, a sleep's file). */
#include "file-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
refuse (GError **error, const char *path, GFileError code, const char *why)
{
  g_autofree char *shown = g_filename_display_name (path);

  g_set_error (error, G_FILE_ERROR, code, "cannot write \"%s\": %s", shown, why);
  return FALSE;
}

const char *
memres_file_type_name (mode_t mode)
{
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISCHR (mode) || S_ISBLK (mode))
    return "a device";
  if (S_ISSOCK (mode))
    return "a socket";
  return "a file of another type";
}

/* Whether another writer holds @path locked with flock() (the log adaptor's log while a layer
 * writes it, a sleep's file until its wake): renamed over, its writer's lines would go on into a
 * file no name reaches. A file that cannot be opened to read is not known to be locked. */
static gboolean
is_locked (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  gboolean locked;

  if (fd < 0)
    return FALSE;
  locked = flock (fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close (fd); /* our shared lock, if taken, goes with it */
  return locked;
}

gboolean
memres_file_replace (const char *path, const char *contents, gssize length, GError **error)
{
  g_autofree char *target = NULL; /* where a link leads */
  g_autoptr (GError) local = NULL;
  struct stat st;
  int mode = 0666; /* a new file's, less the umask */

  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (contents != NULL, FALSE);

  if (path[0] == '\0')
    return refuse (error, path, G_FILE_ERROR_NOENT, "the path is empty");
  if (lstat (path, &st) != 0)
    {
      int errsv = errno;

      if (errsv != ENOENT)
        return refuse (error, path, g_file_error_from_errno (errsv), g_strerror (errsv));
    }
  else
    {
      if (S_ISLNK (st.st_mode))
        {
          char *real = realpath (path, NULL);
          int errsv = errno;

          if (real == NULL)
            return refuse (error, path, g_file_error_from_errno (errsv),
                           errsv == ENOENT
                               ? "a symbolic link to nothing: refused, to leave it as it is"
                               : g_strerror (errsv));
          target = g_strdup (real);
          free (real);
          if (stat (target, &st) != 0)
            {
              errsv = errno;
              return refuse (error, path, g_file_error_from_errno (errsv), g_strerror (errsv));
            }
        }
      if (S_ISDIR (st.st_mode))
        return refuse (error, path, G_FILE_ERROR_ISDIR, "a directory");
      if (!S_ISREG (st.st_mode))
        {
          g_autofree char *why
              = g_strdup_printf ("not a regular file but %s: refused, to leave it as it is",
                                 memres_file_type_name (st.st_mode));

          return refuse (error, path, G_FILE_ERROR_INVAL, why);
        }
      mode = (int) (st.st_mode & 0777);
      /* flock()'s EWOULDBLOCK: G_FILE_ERROR_AGAIN, as plugins/log/log.c refuses a second log
       * layer on the file */
      if (is_locked (target != NULL ? target : path))
        return refuse (error, path, g_file_error_from_errno (EWOULDBLOCK),
                       "a file another writer holds locked (a log layer writing its log, a "
                       "sleep's file): refused, to leave it as it is");
    }
  /* GLib writes a temporary file beside the target (created with @mode, less the umask), then
   * renames it over the target; its error names that temporary file, which the user never
   * named: the error names @path, with the system's reason (the end of GLib's message) */
  if (!g_file_set_contents_full (target != NULL ? target : path, contents, length,
                                 G_FILE_SET_CONTENTS_CONSISTENT, mode, &local))
    {
      const char *why = g_strrstr (local->message, ": ");

      return refuse (error, path, (GFileError) local->code, why != NULL ? why + 2 : local->message);
    }
  return TRUE;
}
