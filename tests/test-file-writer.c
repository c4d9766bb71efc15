/* memres - CUDA memory resources
 * test-file-writer.c: sdk/file-writer.c, the one writer of the whole files a user names (memres
 * view/trace/snapshot -o, MEMRES_OOM_SNAPSHOT, memres_allocator_write_snapshot()): a new file and
 * a regular file replaced (permissions kept), a symbolic link followed and kept, and what is
 * refused and left as it was: a directory, a FIFO, a device (/dev/null through a link, never
 * /dev/null itself), a link to nothing, a path in a missing directory, a file another writer
 * holds locked. */
#include "../sdk/file-writer.h"

#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

static char *dir;

static char *
in_dir (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

static void
assert_contents (const char *path, const char *want)
{
  g_autofree char *got = NULL;

  g_assert_true (g_file_get_contents (path, &got, NULL, NULL));
  g_assert_cmpstr (got, ==, want);
}

static void
test_new_and_regular (void)
{
  g_autofree char *path = in_dir ("plain");
  g_autoptr (GError) error = NULL;
  struct stat st;

  g_assert_true (memres_file_replace (path, "one", -1, &error));
  g_assert_no_error (error);
  assert_contents (path, "one");
  g_assert_cmpint (g_chmod (path, 0640), ==, 0);
  g_assert_true (memres_file_replace (path, "two!", 4, &error));
  assert_contents (path, "two!");
  g_assert_cmpint (lstat (path, &st), ==, 0);
  g_assert_true (S_ISREG (st.st_mode));
  g_assert_cmpint (st.st_mode & 0777, ==, 0640);
  g_remove (path);
}

static void
test_link_followed (void)
{
  g_autofree char *target = in_dir ("target");
  g_autofree char *link = in_dir ("link");
  g_autoptr (GError) error = NULL;
  g_autofree char *read_back = NULL;
  struct stat st;

  g_assert_true (g_file_set_contents (target, "old", -1, NULL));
  g_assert_cmpint (symlink ("target", link), ==, 0);
  g_assert_true (memres_file_replace (link, "new", -1, &error));
  g_assert_no_error (error);
  /* the link is still a link, to the same name, and the file it leads to has the bytes */
  g_assert_cmpint (lstat (link, &st), ==, 0);
  g_assert_true (S_ISLNK (st.st_mode));
  read_back = g_file_read_link (link, NULL);
  g_assert_cmpstr (read_back, ==, "target");
  assert_contents (target, "new");
  g_remove (link);
  g_remove (target);
}

static void
test_refused (void)
{
  g_autofree char *fifo = in_dir ("fifo");
  g_autofree char *devlink = in_dir ("devnull");
  g_autofree char *dangling = in_dir ("dangling");
  g_autofree char *sub = in_dir ("sub");
  g_autofree char *missing = in_dir ("missing/file");
  g_autofree char *nowhere = in_dir ("nowhere");
  g_autofree char *read_back = NULL;
  GError *error = NULL;
  struct stat st;

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_false (memres_file_replace (fifo, "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_nonnull (strstr (error->message, "FIFO"));
  g_clear_error (&error);
  g_assert_cmpint (lstat (fifo, &st), ==, 0);
  g_assert_true (S_ISFIFO (st.st_mode));

  /* a device, reached through a link: the link and the device stay */
  g_assert_cmpint (symlink ("/dev/null", devlink), ==, 0);
  g_assert_false (memres_file_replace (devlink, "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_nonnull (strstr (error->message, "device"));
  g_clear_error (&error);
  g_assert_cmpint (lstat (devlink, &st), ==, 0);
  g_assert_true (S_ISLNK (st.st_mode));
  g_assert_cmpint (stat ("/dev/null", &st), ==, 0);
  g_assert_true (S_ISCHR (st.st_mode));

  g_assert_cmpint (symlink ("nowhere", dangling), ==, 0);
  g_assert_false (memres_file_replace (dangling, "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_clear_error (&error);
  read_back = g_file_read_link (dangling, NULL);
  g_assert_cmpstr (read_back, ==, "nowhere");
  g_assert_false (g_file_test (nowhere, G_FILE_TEST_EXISTS));

  g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
  g_assert_false (memres_file_replace (sub, "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_ISDIR);
  g_clear_error (&error);
  g_assert_true (g_file_test (sub, G_FILE_TEST_IS_DIR));

  g_assert_false (memres_file_replace (missing, "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  /* the path given, not GLib's temporary file beside it */
  {
    g_autofree char *want
        = g_strdup_printf ("cannot write \"%s\": No such file or directory", missing);

    g_assert_cmpstr (error->message, ==, want);
  }
  g_clear_error (&error);

  g_assert_false (memres_file_replace ("", "x", -1, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_clear_error (&error);

  g_remove (fifo);
  g_remove (devlink);
  g_remove (dangling);
  g_rmdir (sub);
}

/* A regular file another writer holds locked (flock(): a log layer writing its log, a sleep's
 * file until its wake), directly or through a link: refused and left as it is, its writer's
 * lines not renamed away from under it (MEMRES_OOM_SNAPSHOT set to the path of the log of the
 * stack that failed replaced the log with the snapshot, the log's last lines written to a file
 * no name reached), G_FILE_ERROR_AGAIN (g_file_error_from_errno() of flock()'s EWOULDBLOCK, as
 * the log layer's own refusal); once the lock goes, it is replaced. */
static void
test_locked (void)
{
  g_autofree char *path = in_dir ("locked.csv");
  g_autofree char *link = in_dir ("locked-link");
  GError *error = NULL;
  int fd;

  g_assert_true (g_file_set_contents (path, "Thread,Time\n", -1, NULL));
  g_assert_cmpint (symlink ("locked.csv", link), ==, 0);
  fd = open (path, O_WRONLY | O_APPEND);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX), ==, 0);
  for (guint i = 0; i < 2; i++)
    {
      g_assert_false (memres_file_replace (i == 0 ? path : link, "{}", -1, &error));
      /* flock()'s EWOULDBLOCK, as a log layer's second writer is refused */
      g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_AGAIN);
      g_assert_nonnull (strstr (error->message, "locked"));
      g_clear_error (&error);
    }
  g_assert_cmpint (write (fd, "1,2\n", 4), ==, 4);
  assert_contents (path, "Thread,Time\n1,2\n");
  close (fd);
  g_assert_true (memres_file_replace (link, "{}", -1, &error));
  g_assert_no_error (error);
  assert_contents (path, "{}");
  g_remove (link);
  g_remove (path);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  dir = g_dir_make_tmp ("memres-file-writer-XXXXXX", NULL);
  g_test_add_func ("/file-writer/new-and-regular", test_new_and_regular);
  g_test_add_func ("/file-writer/link-followed", test_link_followed);
  g_test_add_func ("/file-writer/refused", test_refused);
  g_test_add_func ("/file-writer/locked", test_locked);
  status = g_test_run ();
  g_rmdir (dir);
  g_free (dir);
  return status;
}
