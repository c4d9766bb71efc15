/* test-log.c: the `log` adaptor's own: its lines and files, odd paths, threads, a failed free,
 * the Backtrace column, segment lines at finalize, lines lost and the file written at exit, the
 * log as RMM's own reader reads it (rmm=true) (suites core, fake and gpu; in-test kinds:
 * testutil-adaptors.c). */
#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include "testutil-adaptors.h"

static char *
temp_path (const char *name)
{
  static char *dir;

  if (dir == NULL)
    dir = g_dir_make_tmp ("memres-test-adaptors-XXXXXX", NULL);
  return g_build_filename (dir, name, NULL);
}

/* ---- log ---- */

/* The log's file: a FIFO (whose open would wait for a reader), a directory, a path in a
 * missing directory or under a regular file, a symbolic link to nothing is refused at once, GLib's
 * file error with the system's code, kept under the stack's "layer N of M" prefix; append=true adds
 * lines after one header. */
static void
test_log_odd_paths (void)
{
  g_autofree char *fifo = temp_path ("log-fifo");
  g_autofree char *dir = temp_path ("log-dir");
  g_autofree char *file = temp_path ("log-append.csv");
  g_autofree char *missing = temp_path ("log-nonexistent-dir/x.csv");
  g_autofree char *under_file = g_build_filename (file, "x.csv", NULL);
  g_autofree char *dangling = temp_path ("log-dangling.csv");
  g_autofree char *nothing = temp_path ("log-dangling-target.csv");
  const char *const refused[] = { fifo, dir, missing, under_file, dangling };
  const gint codes[] = { G_FILE_ERROR_NXIO, G_FILE_ERROR_ISDIR, G_FILE_ERROR_NOENT,
                         G_FILE_ERROR_NOTDIR, G_FILE_ERROR_NOENT };
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autofree char *spec = NULL;
  MemresResource *mr;

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (file, "", -1, NULL));
  /* a symbolic link to nothing: refused, and the file it names not created */
  g_assert_cmpint (symlink (nothing, dangling), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autofree char *bad = g_strdup_printf ("log:path=%s>host", refused[i]);
      g_autofree char *deeper = g_strdup_printf ("stats>log:path=%s>host", refused[i]);
      g_autofree char *alone = g_strdup_printf ("log:path=%s", refused[i]);
      g_autoptr (GError) error = NULL;

      g_assert_null (memres_resource_new (bad, &error));
      g_assert_error (error, G_FILE_ERROR, codes[i]);
      g_assert_true (g_str_has_prefix (error->message, "layer 1 of 2 (kind \"log\"): "));
      g_assert_nonnull (strstr (error->message, refused[i]));
      g_clear_error (&error);
      g_assert_null (memres_resource_new (deeper, &error));
      g_assert_error (error, G_FILE_ERROR, codes[i]);
      g_assert_true (g_str_has_prefix (error->message, "layer 2 of 3 (kind \"log\"): "));
      g_clear_error (&error);
      /* an adaptor alone is a bad spec, refused before its file is opened */
      g_assert_null (memres_resource_new (alone, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    }
  for (guint round = 0; round < 2; round++)
    {
      g_free (spec);
      spec = g_strdup_printf ("log:path=%s,append=%s>host", file, round == 0 ? "false" : "true");
      mr = mt_new_ok (spec);
      mt_close_ok (mt_alloc_ok (mr, 100, NULL), NULL);
      memres_resource_unref (mr);
    }
  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  /* one header, then two lines per round */
  g_assert_true (g_str_has_prefix (text, "Thread,Time,Action,Pointer,Size,Stream\n"));
  g_assert_null (strstr (text + 1, "Thread,Time"));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 6); /* 5 lines, each ending in a newline */
  g_remove (fifo);
  g_rmdir (dir);
  g_remove (file);
  g_assert_false (g_file_test (nothing, G_FILE_TEST_EXISTS));
  g_remove (dangling);
}

/* append=true onto a file of other columns (a log of other options, or not a log at all) is
 * refused before a line is written, the file left as it was: lines of other columns under its
 * header would make the whole log unreadable (replay, trace and view refuse it at its first
 * such line, RMM's readers misread it). A file of the same header takes the lines. */
static void
test_log_append_other_columns (void)
{
  g_autofree char *file = temp_path ("log-append-columns.csv");
  const char *const plain = "Thread,Time,Action,Pointer,Size,Stream\n"
                            "1,00:00:00.000001,allocate,0x1000,16,0x0\n";
  const struct
  {
    const char *contents;
    const char *options;
  } refused[] = {
    { plain, "tags=true" },
    { plain, "backtrace=true" },
    { "Thread,Time,Action,Pointer,Size,Stream,Tag\n", "tags=false" },
    { "Thread,Time,Action,Pointer,Size,Stream,Tag\n", "backtrace=true,tags=true" },
    { "name,score\nada,3\n", "tags=false" },
    { "Thread,Time,Action,Pointer,Size,Stream", "tags=false" }, /* no newline: cut short */
  };

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autofree char *spec
          = g_strdup_printf ("log:path=%s,append=true,%s>host", file, refused[i].options);
      g_autoptr (GError) error = NULL;
      g_autofree char *text = NULL;

      g_assert_true (g_file_set_contents (file, refused[i].contents, -1, NULL));
      g_assert_null (memres_resource_new (spec, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, file));
      g_assert_nonnull (strstr (error->message, "header"));
      g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
      g_assert_cmpstr (text, ==, refused[i].contents);
    }
  /* a last line cut short: a line appended would be glued to it */
  {
    g_autofree char *spec = g_strdup_printf ("log:path=%s,append=true>host", file);
    const char *cut = "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.000001,allo";
    g_autoptr (GError) error = NULL;
    g_autofree char *text = NULL;

    g_assert_true (g_file_set_contents (file, cut, -1, NULL));
    g_assert_null (memres_resource_new (spec, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "without a newline"));
    g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
    g_assert_cmpstr (text, ==, cut);
  }
  /* the same columns: appended after the existing lines, no second header */
  {
    g_autofree char *spec = g_strdup_printf ("log:path=%s,append=true,tags=true>host", file);
    g_autofree char *text = NULL;
    g_auto (GStrv) lines = NULL;
    MemresResource *mr;

    g_assert_true (
        g_file_set_contents (file, "Thread,Time,Action,Pointer,Size,Stream,Tag\n", -1, NULL));
    mr = mt_new_ok (spec);
    mt_close_ok (mt_alloc_ok (mr, 100, NULL), NULL);
    memres_resource_unref (mr);
    g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
    lines = g_strsplit (text, "\n", -1);
    g_assert_cmpuint (g_strv_length (lines), ==, 4); /* header, allocate, free, "" */
    g_assert_cmpstr (lines[0], ==, "Thread,Time,Action,Pointer,Size,Stream,Tag");
    g_assert_nonnull (strstr (lines[1], ",allocate,"));
    g_assert_true (g_str_has_suffix (lines[2], ",0x0,"));
  }
  g_remove (file);
}

/* One writer per log file: a second log layer on the file of one that is open (in the same stack,
 * in another stack, by another name) is refused before it truncates or writes anything, as each
 * layer writes at its own offset and the two overwrote each other's lines (a stack of two log
 * layers on one file left one layer's lines, exit 0); once the first is finalized the file is
 * free again. */
static void
test_log_one_writer (void)
{
  g_autofree char *file = temp_path ("log-one-writer.csv");
  g_autofree char *link = temp_path ("log-one-writer-link.csv");
  g_autofree char *both = NULL;
  g_autofree char *first = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  MemresResource *mr, *again;

  g_assert_cmpint (symlink (file, link), ==, 0);
  /* two layers of one stack */
  both = g_strdup_printf ("log:path=%s>cache>log:path=%s>host", link, file);
  {
    g_autoptr (GError) error = NULL;

    g_assert_null (memres_resource_new (both, &error));
    g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_AGAIN); /* flock()'s EWOULDBLOCK */
    g_assert_nonnull (strstr (error->message, link));
    g_assert_nonnull (strstr (error->message, "another log layer"));
  }
  /* a layer of another stack, appending or not: the first's lines stay whole */
  first = g_strdup_printf ("log:path=%s>host", file);
  mr = mt_new_ok (first);
  mt_close_ok (mt_alloc_ok (mr, 100, NULL), NULL);
  for (guint append = 0; append < 2; append++)
    {
      g_autofree char *spec
          = g_strdup_printf ("log:path=%s,append=%s>host", link, append ? "true" : "false");
      g_autoptr (GError) error = NULL;

      g_assert_null (memres_resource_new (spec, &error));
      g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_AGAIN);
      g_assert_nonnull (strstr (error->message, "another log layer"));
    }
  mt_close_ok (mt_alloc_ok (mr, 200, NULL), NULL);
  memres_resource_unref (mr);
  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 6); /* header, 2 x (allocate, free), "" */
  g_assert_nonnull (strstr (lines[1], ",allocate,"));
  g_assert_nonnull (strstr (lines[3], ",allocate,"));
  g_assert_true (g_str_has_suffix (lines[4], ",200,0x0"));
  /* the first finalized: the file is free */
  again = mt_new_ok (first);
  memres_resource_unref (again);
  g_remove (link);
  g_remove (file);
}

static void
test_log_lines (void)
{
  g_autofree char *path = temp_path ("lines,with>odd\\chars.csv");
  g_autofree char *escaped = NULL;
  g_autofree char *spec = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_auto (GStrv) fields = NULL;
  MemresResource *mr;
  MemresBuffer *a, *b, *fail;
  g_autoptr (GError) error = NULL;

  /* the path holds ',', '>' and '\': written escaped */
  {
    GString *s = g_string_new (NULL);
    for (const char *p = path; *p; p++)
      {
        if (*p == ',' || *p == '>' || *p == '\\')
          g_string_append_c (s, '\\');
        g_string_append_c (s, *p);
      }
    escaped = g_string_free (s, FALSE);
  }
  spec = g_strdup_printf ("log:path=%s>limit:max=10000>host", escaped);
  mr = mt_new_ok (spec);
  a = mt_alloc_ok (mr, 1000, NULL);
  b = mt_alloc_ok (mr, 2000, NULL);
  fail = memres_resource_allocate (mr, 9000, NULL, &error);
  g_assert_null (fail);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  /* a trim through the layer: logged once the layers below did it (host has nothing to trim) */
  g_assert_false (memres_resource_trim (mr, 0, NULL));
  memres_resource_unref (mr);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 8); /* header, 6 lines, "" after the last \n */
  g_assert_cmpstr (lines[0], ==, "Thread,Time,Action,Pointer,Size,Stream");
  fields = g_strsplit (lines[1], ",", -1);
  g_assert_cmpuint (g_strv_length (fields), ==, 6);
  g_assert_cmpstr (fields[2], ==, "allocate");
  g_assert_true (g_str_has_prefix (fields[3], "0x"));
  g_assert_cmpstr (fields[4], ==, "1000");
  g_assert_cmpstr (fields[5], ==, "0x0");
  g_assert_nonnull (strstr (lines[3], ",allocate failure,0x0,9000,"));
  /* memres's action beside RMM's: the failure was for lack of memory (limit) */
  g_assert_nonnull (strstr (lines[4], ",out of memory,0x0,9000,"));
  g_assert_nonnull (strstr (lines[5], ",free,"));
  g_assert_nonnull (strstr (lines[6], ",2000,"));
  g_assert_cmpstr (lines[7], ==, "");
  /* as RMM's log: each free names its allocate's Pointer and Size, on its Thread and Stream */
  for (guint i = 0; i < 2; i++)
    {
      g_auto (GStrv) alloc = g_strsplit (lines[1 + i], ",", -1);
      g_auto (GStrv) freed = g_strsplit (lines[5 + i], ",", -1);

      g_assert_cmpstr (alloc[2], ==, "allocate");
      g_assert_cmpstr (freed[2], ==, "free");
      g_assert_cmpstr (freed[0], ==, alloc[0]);
      g_assert_cmpstr (freed[3], ==, alloc[3]);
      g_assert_cmpstr (freed[4], ==, alloc[4]);
      g_assert_cmpstr (freed[5], ==, alloc[5]);
      g_assert_cmpstr (alloc[4], ==, i == 0 ? "1000" : "2000");
    }

  /* over a cache, the trim succeeds: a `trim` line with the bytes kept */
  g_free (spec);
  spec = g_strdup_printf ("log:path=%s>cache>host", escaped);
  mr = mt_new_ok (spec);
  mt_close_ok (mt_alloc_ok (mr, 1000, NULL), NULL);
  g_assert_true (memres_resource_trim (mr, 4096, NULL));
  memres_resource_unref (mr);
  g_free (text);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, ",trim,0x0,4096,0x0\n"));
}

/* That @frame (as glibc's backtrace_symbols() writes it, "OBJECT(SYMBOL+0xOFF) [0xPC]") is in
 * the object at @path. */
static void
assert_frame_of (const char *frame, const char *path)
{
  const char *paren = strchr (frame, '(');
  g_autofree char *object = g_strndup (frame, paren != NULL ? (gsize) (paren - frame) : 0);
  g_autofree char *name = g_path_get_basename (object);
  g_autofree char *want = g_path_get_basename (path);

  g_assert_nonnull (paren);
  g_assert_cmpstr (name, ==, want);
}

/* `log:backtrace=true`: a column Backtrace after Stream, before Tag (which stays last): an
 * allocate's, an allocate failure's and an out of memory's call stack, memres's own frames left
 * out, so that it starts in this program; the frames of GLib's test runner and of libc beneath
 * it as backtrace_symbols() names them; empty on a free and a trim. Without the option, no
 * column. */
static void
test_log_backtrace (void)
{
  g_autofree char *path = temp_path ("backtrace.csv");
  g_autofree char *spec
      = g_strdup_printf ("log:path=%s,backtrace=true,tags=true>limit:max=10000>host", path);
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GError) error = NULL;
  MemresResource *mr = mt_new_ok (spec);
  MemresBuffer *a;
  gboolean glib = FALSE, libc = FALSE;

  a = mt_alloc_ok (mr, 1000, NULL);
  g_assert_null (memres_resource_allocate (mr, 9500, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  mt_close_ok (a, NULL);
  memres_resource_unref (mr);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 6); /* header, 4 lines, "" */
  g_assert_cmpstr (lines[0], ==, "Thread,Time,Action,Pointer,Size,Stream,Backtrace,Tag");
  for (guint i = 1; i <= 3; i++) /* allocate, allocate failure, out of memory */
    {
      g_auto (GStrv) fields = g_strsplit (lines[i], ",", -1);
      g_auto (GStrv) frames = NULL;
      guint n;

      g_assert_cmpuint (g_strv_length (fields), ==, 8);
      g_assert_cmpstr (fields[2], ==,
                       i == 1   ? "allocate"
                       : i == 2 ? "allocate failure"
                                : "out of memory");
      g_assert_cmpstr (fields[7], ==, "");
      frames = g_strsplit (fields[6], ";", -1);
      n = g_strv_length (frames);
      g_assert_cmpuint (n, >=, 3);
      g_assert_cmpuint (n, <=, 32);
      /* the innermost frame is this program's (backtrace_symbols() names it as it was run) */
      assert_frame_of (frames[0], self);
      for (guint f = 0; f < n; f++)
        {
          g_assert_null (strstr (frames[f], "libmemres"));
          g_assert_null (strstr (frames[f], "log_allocate"));
          glib = glib
                 || (strstr (frames[f], "libglib-2.0.so") != NULL
                     && strstr (frames[f], "(g_test_run_suite+0x") != NULL);
          libc = libc || strstr (frames[f], "libc.so.6(") != NULL;
        }
      /* the failure and its out of memory: the same stack */
      if (i == 3)
        {
          g_auto (GStrv) failure = g_strsplit (lines[2], ",", -1);
          g_assert_cmpstr (fields[6], ==, failure[6]);
        }
    }
  g_assert_true (glib);
  g_assert_true (libc);
  /* the free: its Backtrace and Tag fields empty */
  g_assert_nonnull (strstr (lines[4], ",free,"));
  g_assert_true (g_str_has_suffix (lines[4], ",1000,0x0,,"));
  g_assert_cmpstr (lines[5], ==, "");

  /* the same call site twice: the second stack's frames are the texts kept from the first's,
   * the same field */
  {
    char *fields[2] = { NULL, NULL };

    for (guint round = 0; round < 2; round++)
      {
        g_auto (GStrv) split = NULL;
        g_auto (GStrv) line = NULL;

        mr = mt_new_ok (spec);
        mt_close_ok (mt_alloc_ok (mr, 1000, NULL), NULL);
        memres_resource_unref (mr);
        g_free (text);
        g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
        split = g_strsplit (text, "\n", -1);
        g_assert_cmpuint (g_strv_length (split), ==, 4);
        line = g_strsplit (split[1], ",", -1);
        g_assert_cmpuint (g_strv_length (line), ==, 8);
        g_assert_cmpstr (line[2], ==, "allocate");
        fields[round] = g_strdup (line[6]);
      }
    g_assert_cmpstr (fields[0], ==, fields[1]);
    assert_frame_of (fields[0], self);
    g_free (fields[0]);
    g_free (fields[1]);
  }

  /* without the option (the default): RMM's six columns */
  g_free (spec);
  spec = g_strdup_printf ("log:path=%s>host", path);
  mr = mt_new_ok (spec);
  mt_close_ok (mt_alloc_ok (mr, 1000, NULL), NULL);
  memres_resource_unref (mr);
  g_free (text);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (g_str_has_prefix (text, "Thread,Time,Action,Pointer,Size,Stream\n"));
  g_assert_true (g_str_has_suffix (text, ",1000,0x0\n"));
}

/* The segment lines (`segments=true`) of how many of @text's lines are @action at @pointer. */
static guint
count_segment_lines (const char *text, const char *action, const char *pointer)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *needle = g_strdup_printf (",%s,%s,", action, pointer);
  guint n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    n += strstr (lines[i], needle) != NULL;
  return n;
}

/* log:segments=true over a cache: the chunk the cache still holds when the stack goes is
 * unmapped by the cache's finalize, which follows the log's: the log has its `segment unmapping`
 * line, so that its segment map ends empty. Over an upstream that outlives the log (shared), the
 * line comes when the upstream goes, and the file is complete then. */
static void
test_log_segments_at_finalize (void)
{
  g_autofree char *path = temp_path ("segments-finalize.csv");
  g_autofree char *spec = g_strdup_printf ("log:path=%s,segments=true>cache>host", path);
  g_autofree char *text = NULL;
  g_autofree char *pointer = NULL;
  g_auto (GStrv) fields = NULL;
  MemresResource *mr, *cache;
  const char *mapped;

  for (guint round = 0; round < 2; round++)
    {
      mr = mt_new_ok (spec);
      mt_close_ok (mt_alloc_ok (mr, 1000, NULL), NULL); /* a chunk, kept by the cache */
      cache = round == 1 ? memres_resource_ref (memres_resource_get_upstream (mr)) : NULL;
      memres_resource_unref (mr);
      g_clear_pointer (&text, g_free);
      g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
      mapped = strstr (text, ",segment mapped,");
      g_assert_nonnull (mapped);
      g_clear_pointer (&fields, g_strfreev);
      fields = g_strsplit (mapped + 1, ",", 4);
      g_clear_pointer (&pointer, g_free);
      pointer = g_strdup (fields[1]);
      g_assert_true (g_str_has_prefix (pointer, "0x"));
      g_assert_cmpuint (count_segment_lines (text, "segment mapped", pointer), ==, 1);
      if (round == 1)
        {
          /* the cache lives on: its chunk is still mapped, and not told otherwise */
          g_assert_cmpuint (count_segment_lines (text, "segment unmapping", pointer), ==, 0);
          memres_resource_unref (cache);
          g_clear_pointer (&text, g_free);
          g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
        }
      g_assert_cmpuint (count_segment_lines (text, "segment unmapping", pointer), ==, 1);
      g_assert_true (g_str_has_suffix (text, "\n"));
    }
  g_remove (path);
}

/* A free is logged once its outcome is known: a free that fails and releases nothing is a
 * "free failure" line (the buffer stays open), the retry that succeeds a "free"; a free that
 * fails after releasing the allocation (address 0: the core closes the buffer) a "free". */
static void
test_log_failed_free (void)
{
  g_autofree char *path = temp_path ("failed-free.csv");
  g_autofree char *spec = g_strdup_printf ("log:path=%s>balky>crumbly>host", path);
  g_autofree char *text = NULL;
  g_autofree char *expected = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GError) error = NULL;
  MemresResource *mr = mt_new_ok (spec);
  MemresBuffer *buf = mt_alloc_ok (mr, 1000, NULL);
  guint64 address = memres_buffer_get_address (buf);

  g_atomic_int_set (&balky_calls, 0);
  g_assert_false (memres_buffer_close (buf, NULL, &error)); /* balky refuses */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "balky refuses"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_close (buf, NULL, &error)); /* crumbly frees, then fails */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "crumbly freed it"));
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);
  memres_resource_unref (mr);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 5); /* header, 3 lines, "" */
  expected = g_strdup_printf (",0x%" G_GINT64_MODIFIER "x,1000,0x0", address);
  g_assert_nonnull (strstr (lines[1], ",allocate,"));
  g_assert_true (g_str_has_suffix (lines[1], expected));
  g_assert_nonnull (strstr (lines[2], ",free failure,"));
  g_assert_true (g_str_has_suffix (lines[2], expected));
  g_assert_nonnull (strstr (lines[3], ",free,"));
  g_assert_true (g_str_has_suffix (lines[3], expected));
  g_assert_cmpstr (lines[4], ==, "");
}

/* A log as RMM's replay benchmark reads it (its log_parser.hpp, through rapidcsv): the header
 * names the columns and each is read by its name (extra columns pass), Thread and Size decimal,
 * Pointer hex, and the Action one of "allocate", "allocate failure" and "free": any other is
 * "Invalid action string" and the whole log is refused. The number of lines it would read, or -1
 * where it would refuse the log. */
static gint
rmm_read (const char *text)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_auto (GStrv) header = g_strsplit (lines[0], ",", -1);
  gint col[6], n = 0;
  static const char *const names[] = { "Thread", "Time", "Action", "Pointer", "Size", "Stream" };

  for (guint c = 0; c < G_N_ELEMENTS (names); c++)
    {
      col[c] = -1;
      for (guint h = 0; header[h] != NULL; h++)
        if (strcmp (header[h], names[c]) == 0)
          col[c] = (gint) h;
      g_assert_cmpint (col[c], ==, (gint) c); /* RMM's six first, in its order */
    }
  for (guint i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], ",", -1);
      guint64 v;

      g_assert_cmpuint (g_strv_length (f), >=, 6);
      g_assert_true (g_ascii_string_to_unsigned (f[col[0]], 10, 0, G_MAXUINT64, &v, NULL));
      g_assert_true (g_ascii_string_to_unsigned (f[col[4]], 10, 0, G_MAXUINT64, &v, NULL));
      g_assert_true (g_str_has_prefix (f[col[3]], "0x"));
      if (strcmp (f[col[2]], "allocate") != 0 && strcmp (f[col[2]], "allocate failure") != 0
          && strcmp (f[col[2]], "free") != 0)
        return -1;
      n++;
    }
  return n;
}

/* rmm=true: RMM's actions alone, so that RMM's own reader reads the log (the out of memory
 * after an allocate failure, a trim and a failed free made it refuse the log); the Tag and
 * Backtrace columns pass, being read by no name of RMM's; with segments=true (memres's own
 * lines) refused. */
static void
test_log_rmm (void)
{
  g_autofree char *path = temp_path ("rmm.csv");
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  static const char *const specs[] = { "log:path=%s%s>limit:max=10000>cache>host",
                                       "log:path=%s%s,tags=true,backtrace=true>limit:max=10000>"
                                       "cache>host" };

  for (guint rmm = 0; rmm < 2; rmm++)
    for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
      {
        g_autofree char *spec = g_strdup_printf (specs[i], path, rmm ? ",rmm=true" : "");
        MemresResource *mr = mt_new_ok (spec);
        MemresBuffer *a = mt_alloc_ok (mr, 1000, NULL);

        g_assert_null (memres_resource_allocate (mr, 9500, NULL, NULL));
        mt_close_ok (a, NULL);
        g_assert_true (memres_resource_trim (mr, 0, NULL));
        memres_resource_unref (mr);
        g_clear_pointer (&text, g_free);
        g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
        g_test_message ("%s:\n%s", spec, text);
        /* allocate, allocate failure, free: read; without rmm=true, refused at the out of
         * memory line */
        g_assert_cmpint (rmm_read (text), ==, rmm ? 3 : -1);
        g_assert_true ((strstr (text, ",out of memory,") == NULL) == rmm);
        g_assert_true ((strstr (text, ",trim,") == NULL) == rmm);
        g_assert_nonnull (strstr (text, ",allocate failure,0x0,9500,"));
      }
  {
    g_autofree char *spec = g_strdup_printf ("log:path=%s,rmm=true,segments=true>cache>host", path);

    g_assert_null (memres_resource_new (spec, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "exclude each other"));
  }
}

/* Many threads through one log layer: every line whole, none lost. */
typedef struct
{
  MemresResource *mr;
  guint rounds;
} LogWorker;

static gpointer
log_worker (gpointer data)
{
  LogWorker *w = data;

  for (guint i = 0; i < w->rounds; i++)
    mt_close_ok (mt_alloc_ok (w->mr, 16 + i % 100, NULL), NULL);
  return NULL;
}

static void
test_log_threads (void)
{
  g_autofree char *path = temp_path ("threads.csv");
  g_autofree char *spec = g_strdup_printf ("log:path=%s>host", path);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  MemresResource *mr = mt_new_ok (spec);
  LogWorker w = { mr, 500 };
  GThread *threads[8];
  g_autoptr (GHashTable) live = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint i, allocs = 0, frees = 0;

  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("log", log_worker, &w);
  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  memres_resource_unref (mr);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 2 + 2 * 8 * 500);
  for (i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], ",", -1);

      g_assert_cmpuint (g_strv_length (f), ==, 6);
      g_assert_true (g_str_has_prefix (f[3], "0x"));
      allocs += strcmp (f[2], "allocate") == 0;
      frees += strcmp (f[2], "free") == 0;
      /* in the file's order, an address is freed only while allocated, and allocated again
       * only once freed (the free is logged after it, before another thread's allocate) */
      if (strcmp (f[2], "allocate") == 0)
        g_assert_true (g_hash_table_add (live, g_strdup (f[3])));
      else
        g_assert_true (g_hash_table_remove (live, f[3]));
    }
  g_assert_cmpuint (g_hash_table_size (live), ==, 0);
  g_assert_cmpuint (allocs, ==, 8 * 500);
  g_assert_cmpuint (frees, ==, 8 * 500);
}

/* memres_resource_get_counters() of @mr, which must succeed. (transfer full) */
static GVariant *
log_counters (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  GVariant *counters = memres_resource_get_counters (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (counters);
  return counters;
}

/* A log whose writes fail (a full disk: /dev/full) counts the lines it lost, and says whether it
 * is complete, in its counters: read at any time, they first write what is buffered; the first
 * failure of a layer is one warning (in a subprocess, whose stderr shows it: structured
 * logging bypasses g_test_expect_message()). A log that writes counts its lines, the header
 * included, and loses none. */
static void
test_log_lines_lost (void)
{
  g_autofree char *path = temp_path ("counted.csv");
  g_autofree char *spec = g_strdup_printf ("log:path=%s>host", path);
  MemresResource *mr;
  GVariant *counters;
  guint64 written = 0, lost = 0;
  const char *why = NULL;

  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr ("*log: writing \"/dev/full\": *lines_lost*"
                                 "log: writing \"/dev/full\": *lines_lost*");
      g_test_trap_assert_stderr_unmatched ("*writing*writing*writing*");
      return;
    }
  g_log_set_always_fatal (G_LOG_FATAL_MASK); /* the warning is what is tested */
  for (guint flush = 0; flush < 2; flush++)
    {
      g_autofree char *full
          = g_strdup_printf ("log:path=/dev/full,flush=%s>host", flush ? "true" : "false");

      mr = mt_new_ok (full);
      mt_close_ok (mt_alloc_ok (mr, 100, NULL), NULL);
      mt_close_ok (mt_alloc_ok (mr, 200, NULL), NULL);
      counters = log_counters (mr);
      g_assert_true (g_variant_lookup (counters, "lines_lost", "t", &lost));
      g_assert_true (g_variant_lookup (counters, "lines_written", "t", &written));
      g_assert_true (g_variant_lookup (counters, "write_error", "&s", &why));
      g_assert_cmpuint (lost, ==, 5); /* the header, 2 allocates, 2 frees */
      g_assert_cmpuint (written, ==, 0);
      g_assert_cmpstr (why, ==, g_strerror (ENOSPC));
      g_variant_unref (counters);
      /* more lines, no more warnings: counted */
      mt_close_ok (mt_alloc_ok (mr, 300, NULL), NULL);
      counters = log_counters (mr);
      g_assert_true (g_variant_lookup (counters, "lines_lost", "t", &lost));
      g_assert_cmpuint (lost, ==, 7);
      g_variant_unref (counters);
      memres_resource_unref (mr);
    }

  mr = mt_new_ok (spec);
  mt_close_ok (mt_alloc_ok (mr, 100, NULL), NULL);
  counters = log_counters (mr);
  g_assert_true (g_variant_lookup (counters, "lines_lost", "t", &lost));
  g_assert_true (g_variant_lookup (counters, "lines_written", "t", &written));
  g_assert_true (g_variant_lookup (counters, "write_error", "&s", &why));
  g_assert_cmpuint (lost, ==, 0);
  g_assert_cmpuint (written, ==, 3);
  g_assert_cmpstr (why, ==, "");
  g_variant_unref (counters);
  /* the counters' read wrote them: the file holds the 3 lines while the layer lives */
  {
    g_autofree char *text = NULL;
    g_auto (GStrv) lines = NULL;

    g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
    lines = g_strsplit (text, "\n", -1);
    g_assert_cmpuint (g_strv_length (lines), ==, 4);
  }
  memres_resource_unref (mr);
  g_remove (path);
}

/* A process that exits with a log layer alive (never released, as a program that leaves its
 * resources to the exit) still writes the lines the layer buffered. */
static MemresBuffer *volatile left_open; /* volatile: the store must stay */

static void
test_log_written_at_exit (void)
{
  const char *path = g_getenv ("MEMRES_TEST_AT_EXIT_LOG");
  g_autofree char *own = NULL;
  g_autofree char *spec = NULL;
  MemresResource *mr;

  if (!g_test_subprocess ())
    {
      g_autofree char *text = NULL;
      g_auto (GStrv) lines = NULL;

      own = temp_path ("at-exit.csv");
      g_setenv ("MEMRES_TEST_AT_EXIT_LOG", own, TRUE);
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      g_assert_true (g_file_get_contents (own, &text, NULL, NULL));
      lines = g_strsplit (text, "\n", -1);
      g_assert_cmpuint (g_strv_length (lines), ==, 3); /* header, allocate, "" */
      g_assert_cmpstr (lines[0], ==, "Thread,Time,Action,Pointer,Size,Stream");
      g_assert_nonnull (strstr (lines[1], ",allocate,"));
      g_remove (own);
      return;
    }
  g_assert_nonnull (path);
  spec = g_strdup_printf ("log:path=%s>host", path);
  mr = mt_new_ok (spec);
  /* neither the buffer nor the resource is released: the exit writes the line. The static keeps
   * the buffer reachable, so that LeakSanitizer does not count what the test leaves on purpose. */
  left_open = mt_alloc_ok (mr, 100, NULL);
  g_assert_nonnull (left_open);
}

/* A request above G_MAXSSIZE (more than any memory holds) is refused by the core before any
 * layer: no line, where a request below it that the layer below refuses is an `allocate
 * failure` (the rule memres_resource_allocate() states; RMM's logging adaptor logs both) */
static void
test_log_too_large (void)
{
  g_autofree char *path = temp_path ("too-large.csv");
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) lines = NULL;
  MemresResource *mr = mt_new_printf_ok ("log:path=%s>limit:max=1000>host", path);

  g_assert_null (memres_resource_allocate (mr, (gsize) G_MAXSSIZE + 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  memres_resource_unref (mr);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 4); /* header, failure, out of memory, "" */
  g_assert_nonnull (strstr (lines[1], ",allocate failure,0x0,9223372036854775807,"));
  g_assert_nonnull (strstr (lines[2], ",out of memory,0x0,9223372036854775807,"));
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  register_kinds ();
  g_test_add_func ("/adaptors/log-lines", test_log_lines);
  g_test_add_func ("/adaptors/log-odd-paths", test_log_odd_paths);
  g_test_add_func ("/adaptors/log-append-other-columns", test_log_append_other_columns);
  g_test_add_func ("/adaptors/log-one-writer", test_log_one_writer);
  g_test_add_func ("/adaptors/log-threads", test_log_threads);
  g_test_add_func ("/adaptors/log-failed-free", test_log_failed_free);
  g_test_add_func ("/adaptors/log-rmm", test_log_rmm);
  g_test_add_func ("/adaptors/log-backtrace", test_log_backtrace);
  g_test_add_func ("/adaptors/log-segments-at-finalize", test_log_segments_at_finalize);
  g_test_add_func ("/adaptors/log-lines-lost", test_log_lines_lost);
  g_test_add_func ("/adaptors/log-too-large", test_log_too_large);
  g_test_add_func ("/adaptors/log-written-at-exit", test_log_written_at_exit);
  return g_test_run ();
}
