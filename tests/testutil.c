/* testutil.c: helpers shared by the test programs (see testutil.h): set-up, captured log
 * messages, resources and buffers that must work, patterns, errors and strings, files. The fake
 * driver and devices: testutil-fake.c; IPC messages and child processes: testutil-ipc.c. */
#define _GNU_SOURCE /* struct ucred */
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void
mt_init (int *argc, char ***argv)
{
  g_test_init (argc, argv, NULL);
}

/* mt_log_capture_*(): what was kept, NULL while not capturing. */
static GMutex capture_lock;
static GString *captured;
static guint captured_criticals;

static GLogWriterOutput
capture_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  const char *domain = NULL;
  const char *message = NULL;
  gboolean kept = FALSE;

  for (gsize i = 0; i < n_fields; i++)
    if (g_strcmp0 (fields[i].key, "GLIB_DOMAIN") == 0)
      domain = fields[i].value;
    else if (g_strcmp0 (fields[i].key, "MESSAGE") == 0)
      message = fields[i].value;
  g_mutex_lock (&capture_lock);
  if (captured != NULL && g_strcmp0 (domain, "memres") == 0 && message != NULL
      && (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)))
    {
      gboolean critical = (level & G_LOG_LEVEL_CRITICAL) != 0;

      g_string_append_printf (captured, "%s: %s\n", critical ? "CRITICAL" : "WARNING", message);
      captured_criticals += critical;
      kept = TRUE;
    }
  g_mutex_unlock (&capture_lock);
  return kept ? G_LOG_WRITER_HANDLED : g_log_writer_default (level, fields, n_fields, data);
}

void
mt_log_capture_init (void)
{
  g_log_set_writer_func (capture_writer, NULL, NULL);
}

void
mt_log_capture_begin (void)
{
  g_mutex_lock (&capture_lock);
  g_assert_null (captured);
  captured = g_string_new (NULL);
  captured_criticals = 0;
  g_mutex_unlock (&capture_lock);
}

char *
mt_log_capture_end (guint *n_criticals)
{
  char *text;

  g_mutex_lock (&capture_lock);
  g_assert_nonnull (captured);
  *n_criticals = captured_criticals;
  text = g_string_free (g_steal_pointer (&captured), FALSE);
  g_mutex_unlock (&capture_lock);
  return text;
}

int
mt_count_open_fds (void)
{
  DIR *dir = opendir ("/proc/self/fd");
  struct dirent *e;
  int n = 0;

  /* (In the fake's asynchronous mode, after the queued frees that close a pool's fds ran.) */
  mt_fake_wait_idle ();
  g_assert_nonnull (dir);
  while ((e = readdir (dir)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir (dir);
  return n - 1; /* the directory's own fd */
}

/* The pattern: each 32-bit word a hash of its index and the seed, so that shifted, repeated or
 * truncated copies differ. */
static guint32
pattern_word (gsize index, guint32 seed)
{
  guint32 x = (guint32) index ^ (guint32) (index >> 32) * 0x27d4eb2du ^ (seed * 0x9e3779b9u);

  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

static guint8
pattern_byte (gsize offset, guint32 seed)
{
  return (guint8) (pattern_word (offset / 4, seed) >> (8 * (offset % 4)));
}

void
mt_fill_pattern (guint8 *dest, gsize n, guint32 seed)
{
  gsize i = 0;

  for (; i + 4 <= n; i += 4)
    {
      guint32 w = pattern_word (i / 4, seed);
      dest[i] = (guint8) w;
      dest[i + 1] = (guint8) (w >> 8);
      dest[i + 2] = (guint8) (w >> 16);
      dest[i + 3] = (guint8) (w >> 24);
    }
  for (; i < n; i++)
    dest[i] = pattern_byte (i, seed);
}

void
mt_assert_pattern (const guint8 *data, gsize n, guint32 seed)
{
  gsize i = 0;

  /* Word by word while everything matches; the first differing byte is then found below. */
  for (; i + 4 <= n; i += 4)
    {
      guint32 w = pattern_word (i / 4, seed);
      if (data[i] != (guint8) w || data[i + 1] != (guint8) (w >> 8)
          || data[i + 2] != (guint8) (w >> 16) || data[i + 3] != (guint8) (w >> 24))
        break;
    }
  for (; i < n; i++)
    if (data[i] != pattern_byte (i, seed))
      {
        g_autofree char *msg = g_strdup_printf ("pattern %u differs at offset %" G_GSIZE_FORMAT
                                                " of %" G_GSIZE_FORMAT ": 0x%02x, expected 0x%02x",
                                                seed, i, n, data[i], pattern_byte (i, seed));
        g_assertion_message (G_LOG_DOMAIN, __FILE__, __LINE__, G_STRFUNC, msg);
        return;
      }
}

gboolean
mt_error_is_cuda (const GError *error, CUresult code)
{
  if (code == CUDA_ERROR_OUT_OF_MEMORY)
    return g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  return g_error_matches (error, MEMRES_CUDA_ERROR, code);
}

void
mt_assert_oom_cause_ (const char *file, int line, const GError *error, const char *cause)
{
  g_autofree char *want = g_strdup_printf ("%s. Out of memory, ", cause);

  if (!g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY)
      || !g_str_has_prefix (error->message, want))
    g_error ("%s:%d: an out-of-memory error starting \"%s\" expected, got: %s", file, line, want,
             error != NULL ? error->message : "no error");
}

MemresResource *
mt_new_ok (const char *spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  g_assert_no_error (error);
  g_assert_nonnull (mr);
  return mr;
}

MemresResource *
mt_new_printf_ok (const char *format, ...)
{
  g_autofree char *spec = NULL;
  va_list args;

  va_start (args, format);
  spec = g_strdup_vprintf (format, args);
  va_end (args);
  return mt_new_ok (spec);
}

void
mt_pairs (MemresResource *mr, gsize size, MemresStream stream, guint n)
{
  GError *error = NULL;

  for (guint i = 0; i < n; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

      g_assert_no_error (error);
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_no_error (error);
      memres_buffer_unref (buf);
    }
}

void
mt_new_fails (const char *spec, GQuark domain, gint code, const char *needle)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  if (mr != NULL)
    g_error ("spec \"%s\" was accepted", spec);
  g_assert_error (error, domain, code);
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("error for \"%s\" lacks \"%s\": %s", spec, needle, error->message);
}

void
mt_new_fails_short (const char *spec, const char *needle)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new (spec, &error);

  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_test_message ("%s", error->message);
  mt_assert_printable (error->message, 300);
  if (strstr (error->message, needle) == NULL)
    g_error ("message lacks \"%s\": %s", needle, error->message);
}

void
mt_shuffle_buffers (MemresBuffer **bufs, guint *tags, guint n)
{
  /* the last of the first @k trades places with one of them */
  for (guint k = n; k > 1; k--)
    {
      guint j = (guint) g_test_rand_int_range (0, (gint32) k);
      MemresBuffer *b = bufs[k - 1];
      guint t = tags[k - 1];

      bufs[k - 1] = bufs[j];
      tags[k - 1] = tags[j];
      bufs[j] = b;
      tags[j] = t;
    }
}

char *
mt_repeat (const char *prefix, const char *unit, gsize n, const char *suffix)
{
  GString *s = g_string_sized_new (strlen (prefix) + strlen (unit) * n + strlen (suffix) + 1);

  g_string_append (s, prefix);
  for (gsize i = 0; i < n; i++)
    g_string_append (s, unit);
  g_string_append (s, suffix);
  return g_string_free (s, FALSE);
}

void
mt_assert_printable (const char *text, gsize max_len)
{
  const char *p;

  g_assert_nonnull (text);
  if (strlen (text) >= max_len)
    g_error ("%" G_GSIZE_FORMAT " bytes, not under %" G_GSIZE_FORMAT ": %.200s...", strlen (text),
             max_len, text);
  g_assert_true (g_utf8_validate (text, -1, NULL));
  for (p = text; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (c < 0x20 || (c >= 0x7f && c < 0xa0))
        {
          g_autofree char *escaped = g_strescape (text, NULL);
          g_error ("control character U+%04X at byte %" G_GSIZE_FORMAT " of: %s", c,
                   (gsize) (p - text), escaped);
        }
    }
}

MemresBuffer *
mt_alloc_ok (MemresResource *mr, gsize size, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
  return buf;
}

void
mt_close_ok (MemresBuffer *buf, MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_close (buf, stream, &error));
  g_assert_no_error (error);
  memres_buffer_unref (buf);
}

MemresStats
mt_stats_ok (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats stats;

  memset (&stats, 0xff, sizeof stats);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.reserved_high, >=, stats.reserved_current);
  g_assert_cmpuint (stats.used_high, >=, stats.used_current);
  g_assert_cmpuint (stats.reserved_current, >=, stats.used_current);
  return stats;
}

void
mt_sync_ok (MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_stream_synchronize (stream, &error));
  g_assert_no_error (error);
}

void
mt_fill_byte_ok (MemresBuffer *buf, guint8 byte, MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_fill (buf, byte, 1, stream, &error));
  g_assert_no_error (error);
}

void
mt_assert_bytes (MemresBuffer *buf, guint8 byte, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  gsize n = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (n);

  g_assert_true (memres_buffer_read (buf, 0, host, n, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
  for (gsize i = 0; i < n; i++)
    if (host[i] != byte)
      g_error ("byte %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " is 0x%02x, expected 0x%02x", i, n,
               host[i], byte);
}

void
mt_write_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *host = g_malloc (n);

  mt_fill_pattern (host, n, seed);
  g_assert_true (memres_buffer_write (buf, offset, host, n, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
}

void
mt_check_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *host = g_malloc0 (n);

  g_assert_true (memres_buffer_read (buf, offset, host, n, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
  mt_assert_pattern (host, n, seed);
}

gboolean
mt_op_new (gpointer data, GError **error)
{
  MtSweepData *d = data;

  d->mr = memres_resource_new (d->spec, error);
  return d->mr != NULL;
}

void
mt_undo_new (gpointer data)
{
  MtSweepData *d = data;

  g_clear_pointer (&d->mr, memres_resource_unref);
}

gboolean
mt_op_allocate (gpointer data, GError **error)
{
  MtSweepData *d = data;

  d->buf = memres_resource_allocate (d->mr, d->size, d->stream, error);
  return d->buf != NULL;
}

void
mt_undo_allocate (gpointer data)
{
  MtSweepData *d = data;

  mt_close_ok (g_steal_pointer (&d->buf), d->stream);
  mt_sync_ok (d->stream);
}

gboolean
mt_op_allocate_close (gpointer data, GError **error)
{
  MtSweepData *d = data;
  MemresBuffer *buf = memres_resource_allocate (d->mr, d->size, NULL, error);
  gboolean ok;

  if (buf == NULL)
    return FALSE;
  ok = memres_buffer_close (buf, NULL, error);
  memres_buffer_unref (buf);
  return ok;
}

void
mt_make_odd_files (const char *dir, const char *fifo, const char *loop, const char *dangling)
{
  if (fifo != NULL)
    {
      g_autofree char *path = g_build_filename (dir, fifo, NULL);
      g_assert_cmpint (mkfifo (path, 0600), ==, 0);
    }
  if (loop != NULL)
    {
      g_autofree char *path = g_build_filename (dir, loop, NULL);
      g_assert_cmpint (symlink (path, path), ==, 0);
    }
  if (dangling != NULL)
    {
      g_autofree char *path = g_build_filename (dir, dangling, NULL);
      g_autofree char *target = g_build_filename (dir, "nothing-here", NULL);
      g_assert_cmpint (symlink (target, path), ==, 0);
    }
}

void
mt_remove_dir (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *entry;

  if (d == NULL)
    return;
  while ((entry = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, entry, NULL);
      if (g_remove (path) != 0)
        g_warning ("cannot remove %s", path);
    }
  g_rmdir (dir);
}

void
mt_count_release (gpointer data)
{
  (*(int *) data)++;
}

const MtReservation mt_reservations[MT_N_RESERVATIONS] = {
  { "default-reserve", "the default reservation, twice the device", "arena", 0 },
  { "h100-80GiB", "an 80 GiB H100's reservation", "arena:reserve=160GiB",
    G_GUINT64_CONSTANT (160) << 30 },
  { "h200-141GiB", "a 141 GiB H200's reservation", "arena:reserve=282GiB",
    G_GUINT64_CONSTANT (282) << 30 },
};
