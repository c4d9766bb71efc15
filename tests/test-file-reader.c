/* memres - CUDA memory resources
 * test-file-reader.c: sdk/file-reader.c, the one reader of the whole files a user names (the
 * config file of @NAME resources, the `memres` command's inputs): a regular file read whole and
 * appended (a leading UTF-8 byte order mark dropped, a file of more than one read's bytes), the
 * size cap (at it, one byte past it: TOO_LARGE with no error and the string as it was), and what
 * is refused with GLib's file error and the type named: a directory (ISDIR), a FIFO (INVAL, at
 * once, never waited on), a device (INVAL), a missing file (NOENT); memres_file_check_regular() on
 * a stat() alike. */
#include "../sdk/file-reader.h"

#include <errno.h>
#include <string.h>
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
test_whole (void)
{
  g_autofree char *path = in_dir ("text");
  g_autofree char *bom = in_dir ("bom");
  g_autofree char *big = in_dir ("big");
  g_autoptr (GString) data = g_string_new ("kept:");
  g_autoptr (GString) big_text = g_string_new (NULL);
  g_autoptr (GError) error = NULL;
  struct stat st;

  g_assert_true (g_file_set_contents (path, "a\nb\n", -1, NULL));
  g_assert_cmpint (memres_file_read (path, "shown", 100, data, &st, &error), ==,
                   MEMRES_FILE_READ_OK);
  g_assert_no_error (error);
  g_assert_cmpstr (data->str, ==, "kept:a\nb\n");
  g_assert_cmpint (st.st_size, ==, 4);
  g_assert_true (S_ISREG (st.st_mode));

  /* the mark is dropped, and only at the start of the file (not of the string) */
  g_assert_true (g_file_set_contents (bom, "\xEF\xBB\xBFx=1\n", -1, NULL));
  g_string_assign (data, "\xEF\xBB\xBF");
  g_assert_cmpint (memres_file_read (bom, "shown", 100, data, NULL, &error), ==,
                   MEMRES_FILE_READ_OK);
  g_assert_no_error (error);
  g_assert_cmpstr (data->str, ==, "\xEF\xBB\xBFx=1\n");

  /* more than one read asks for (64 KiB beyond the size): every byte, in order */
  for (guint i = 0; i < 50000; i++)
    g_string_append_printf (big_text, "%u\n", i);
  g_assert_true (g_file_set_contents (big, big_text->str, (gssize) big_text->len, NULL));
  g_string_truncate (data, 0);
  g_assert_cmpint (memres_file_read (big, "shown", big_text->len, data, NULL, &error), ==,
                   MEMRES_FILE_READ_OK);
  g_assert_no_error (error);
  g_assert_cmpuint (data->len, ==, big_text->len);
  g_assert_cmpmem (data->str, data->len, big_text->str, big_text->len);
  g_assert_cmpint (data->str[data->len], ==, '\0');
}

static void
test_cap (void)
{
  g_autofree char *path = in_dir ("ten");
  g_autoptr (GString) data = g_string_new ("kept");
  g_autoptr (GError) error = NULL;
  struct stat st;

  g_assert_true (g_file_set_contents (path, "0123456789", -1, NULL));
  g_assert_cmpint (memres_file_read (path, "shown", 10, data, NULL, &error), ==,
                   MEMRES_FILE_READ_OK);
  g_assert_cmpstr (data->str, ==, "kept0123456789");
  g_string_assign (data, "kept");
  g_assert_cmpint (memres_file_read (path, "shown", 9, data, &st, &error), ==,
                   MEMRES_FILE_READ_TOO_LARGE);
  g_assert_no_error (error); /* the caller words it */
  g_assert_cmpstr (data->str, ==, "kept");
  g_assert_cmpint (st.st_size, ==, 10);
  g_assert_cmpint (memres_file_read (path, "shown", 0, data, NULL, &error), ==,
                   MEMRES_FILE_READ_TOO_LARGE);
  g_assert_cmpstr (data->str, ==, "kept");
}

/* @path refused by memres_file_read() with @code and "SHOWN: @why", the string untouched. */
static void
assert_refused (const char *path, gint code, const char *why)
{
  g_autoptr (GString) data = g_string_new ("kept");
  g_autoptr (GError) error = NULL;
  g_autofree char *want = g_strdup_printf ("config file %s: %s", path, why);
  g_autofree char *shown = g_strdup_printf ("config file %s", path);

  g_assert_cmpint (memres_file_read (path, shown, 100, data, NULL, &error), ==,
                   MEMRES_FILE_READ_FAILED);
  g_assert_error (error, G_FILE_ERROR, code);
  g_assert_cmpstr (error->message, ==, want);
  g_assert_cmpstr (data->str, ==, "kept");
}

static void
test_refused (void)
{
  g_autofree char *fifo = in_dir ("fifo");
  g_autofree char *missing = in_dir ("missing");
  g_autoptr (GError) error = NULL;
  struct stat st;

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  assert_refused (dir, G_FILE_ERROR_ISDIR, "not a regular file (a directory)");
  assert_refused (fifo, G_FILE_ERROR_INVAL,
                  "not a regular file (a FIFO)"); /* no writer: would block */
  assert_refused ("/dev/null", G_FILE_ERROR_INVAL, "not a regular file (a device)");
  assert_refused (missing, G_FILE_ERROR_NOENT, g_strerror (ENOENT));

  /* on a stat() */
  g_assert_cmpint (stat (fifo, &st), ==, 0);
  g_assert_false (memres_file_check_regular (&st, "F", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_cmpstr (error->message, ==, "F: not a regular file (a FIFO)");
  g_clear_error (&error);
  g_assert_cmpint (stat (dir, &st), ==, 0);
  g_assert_false (memres_file_check_regular (&st, "D", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_ISDIR);
  g_clear_error (&error);
  g_assert_cmpint (stat ("/dev/null", &st), ==, 0);
  g_assert_false (memres_file_check_regular (&st, "N", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_cmpstr (error->message, ==, "N: not a regular file (a device)");
  g_clear_error (&error);
  g_remove (fifo);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  dir = g_dir_make_tmp ("memres-test-file-reader-XXXXXX", NULL);
  g_assert_nonnull (dir);
  g_test_add_func ("/file-reader/whole", test_whole);
  g_test_add_func ("/file-reader/cap", test_cap);
  g_test_add_func ("/file-reader/refused", test_refused);
  status = g_test_run ();
  {
    const char *names[] = { "text", "bom", "big", "ten", "fifo" };

    for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
      {
        g_autofree char *path = in_dir (names[i]);
        g_remove (path);
      }
  }
  g_rmdir (dir);
  g_free (dir);
  return status;
}
