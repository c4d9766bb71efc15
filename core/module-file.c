/* memres - CUDA memory resources
 * module-file.c: what a file about to be dlopen()ed is. dlopen() of a FIFO blocks in open()
 * forever, and its errors for a directory, a symbolic link loop or a dangling link do not say
 * what the file is: the loader and the driver loader look first, without blocking. */
#include "memres-private.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *
file_type_name (mode_t mode)
{
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISSOCK (mode))
    return "a socket";
  if (S_ISCHR (mode))
    return "a character device";
  if (S_ISBLK (mode))
    return "a block device";
  return "not a regular file";
}

/* NULL when @path is a regular file this process can read; otherwise, in a new string, what it
 * is instead ("a FIFO", "a directory", "a dangling symbolic link", "a symbolic link loop",
 * "unreadable (Permission denied)", ...). Never blocks: the file is opened with O_NONBLOCK and
 * looked at with fstat(). */
char *
_memres_module_file_problem (const char *path)
{
  struct stat st;
  int fd, saved;

  fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    {
      saved = errno;
      if (saved == ELOOP)
        return g_strdup ("a symbolic link loop");
      if (saved == ENOENT && lstat (path, &st) == 0 && S_ISLNK (st.st_mode))
        return g_strdup ("a dangling symbolic link");
      if (saved == ENXIO) /* a socket, or a FIFO opened for writing */
        return g_strdup ("not a regular file");
      return g_strdup_printf ("unreadable (%s)", g_strerror (saved));
    }
  if (fstat (fd, &st) != 0)
    {
      saved = errno;
      close (fd);
      return g_strdup_printf ("unreadable (%s)", g_strerror (saved));
    }
  close (fd);
  if (!S_ISREG (st.st_mode))
    return g_strdup (file_type_name (st.st_mode));
  return NULL;
}
