/* test-track.c: the `track` adaptor's own: the live allocations it lists, the ones left open at
 * finalize, and a close that fails below it (suites core, fake and gpu; in-test kinds:
 * testutil-adaptors.c). */
#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>
#include "testutil-adaptors.h"

/* ---- track ---- */

typedef struct
{
  guint n;
  gsize sizes[8];
  guint64 threads[8];
  gint64 times[8];
  gboolean backtraces;
} Seen;

static gboolean
collect (const MemresLiveAllocation *a, gpointer data)
{
  Seen *seen = data;

  g_assert_cmpuint (seen->n, <, 8);
  seen->sizes[seen->n] = a->size;
  seen->threads[seen->n] = a->thread;
  seen->times[seen->n] = a->time;
  if (a->backtrace != NULL && strchr (a->backtrace, '\n') != NULL)
    seen->backtraces = TRUE;
  seen->n++;
  return TRUE;
}

static gboolean
stop_at_first (const MemresLiveAllocation *a, gpointer data)
{
  (*(guint *) data)++;
  return FALSE;
}

static void
test_track_live (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("stats>track:backtrace=true>host");
  MemresBuffer *a, *b, *c;
  Seen seen = { 0 };
  GError *error = NULL;
  guint calls = 0;

  a = mt_alloc_ok (mr, 111, NULL);
  b = mt_alloc_ok (mr, 222, NULL);
  c = mt_alloc_ok (mr, 333, NULL);
  mt_close_ok (b, NULL); /* a and c are left open */
  g_assert_true (memres_track_foreach_live (mr, collect, &seen, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (seen.n, ==, 2);
  g_assert_cmpuint (seen.sizes[0], ==, 111);
  g_assert_cmpuint (seen.sizes[1], ==, 333);
  g_assert_cmpuint (seen.threads[0], !=, 0);
  g_assert_cmpuint (seen.threads[0], ==, seen.threads[1]);
  g_assert_cmpint (seen.times[0], <=, seen.times[1]);
  g_assert_cmpint (seen.times[0], >, 0);
  g_assert_true (seen.backtraces);
  g_assert_true (memres_track_foreach_live (mr, stop_at_first, &calls, &error));
  g_assert_cmpuint (calls, ==, 1);
  mt_close_ok (a, NULL);
  mt_close_ok (c, NULL);
  seen.n = 0;
  g_assert_true (memres_track_foreach_live (mr, collect, &seen, &error));
  g_assert_cmpuint (seen.n, ==, 0);
}

/* A free that fails below track leaves the buffer open, and track still lists it; once the
 * free succeeds (or fails after releasing it: address 0), track lists it no more. */
static void
test_track_failed_close (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("track>balky>host");
  g_autoptr (MemresResource) crumbly = mt_new_ok ("track>crumbly>host");
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = mt_alloc_ok (mr, 1000, NULL);
  Seen seen = { 0 };

  g_atomic_int_set (&balky_calls, 0);
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (memres_track_foreach_live (mr, collect, &seen, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (seen.n, ==, 1);
  g_assert_cmpuint (seen.sizes[0], ==, 1000);
  mt_close_ok (buf, NULL);
  seen.n = 0;
  g_assert_true (memres_track_foreach_live (mr, collect, &seen, &error));
  g_assert_cmpuint (seen.n, ==, 0);

  buf = mt_alloc_ok (crumbly, 2000, NULL);
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (memres_buffer_is_closed (buf)); /* crumbly released it before failing */
  memres_buffer_unref (buf);
  g_assert_true (memres_track_foreach_live (crumbly, collect, &seen, &error));
  g_assert_cmpuint (seen.n, ==, 0);
}

/* Finalized with an allocation still live (an adaptor above never gave it back): a warning
 * with the count and the largest, and the memory released (the leak checkers see no leak). */
static void
test_track_left_open (void)
{
  if (g_test_subprocess ())
    {
      MemresResource *mr = mt_new_ok ("leaky>track>host");
      MemresBuffer *small = mt_alloc_ok (mr, 100, NULL);
      MemresBuffer *big = mt_alloc_ok (mr, 4096, NULL);
      Seen seen = { 0 };

      mt_close_ok (small, NULL);
      mt_close_ok (big, NULL);
      g_assert_true (memres_track_foreach_live (mr, collect, &seen, NULL));
      g_assert_cmpuint (seen.n, ==, 2);
      /* the warning is what is tested: not fatal here */
      g_log_set_always_fatal (G_LOG_FATAL_MASK);
      memres_resource_unref (mr);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*track: resource finalized with 2 live allocations (4196 bytes); "
                             "the largest: 4096 bytes at 0x*releasing them*");
}

/* One allocation of 1 byte left live: the warning counts in the singular. */
static void
test_track_left_open_one_byte (void)
{
  if (g_test_subprocess ())
    {
      MemresResource *mr = mt_new_ok ("leaky>track>host");
      MemresBuffer *tiny = mt_alloc_ok (mr, 1, NULL);

      mt_close_ok (tiny, NULL);
      g_log_set_always_fatal (G_LOG_FATAL_MASK);
      memres_resource_unref (mr);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*track: resource finalized with 1 live allocation (1 byte); "
                             "the largest: 1 byte at 0x*releasing them*");
}

/* The figures RMM's tracking adaptor is held to: nothing listed at first; 10 buffers of 10 MiB,
 * every other closed: 5 listed, 50 MiB, each with its call stack under backtrace=true and none
 * without; all closed: none. Two layers (track>track>host): buffers of the lower layer are listed
 * there alone, those of the top in both. An empty buffer reaches no layer: not listed. */
typedef struct
{
  guint n;
  guint64 bytes;
  guint with_stack;
} Tally;

static gboolean
tally (const MemresLiveAllocation *a, gpointer data)
{
  Tally *t = data;

  t->n++;
  t->bytes += a->size;
  t->with_stack += a->backtrace != NULL;
  return TRUE;
}

static void
assert_live (MemresResource *mr, guint n, guint64 bytes, guint with_stack)
{
  g_autoptr (GError) error = NULL;
  Tally t = { 0 };

  g_assert_true (memres_track_foreach_live (mr, tally, &t, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (t.n, ==, n);
  g_assert_cmpuint (t.bytes, ==, bytes);
  g_assert_cmpuint (t.with_stack, ==, with_stack);
}

static void
test_track_outstanding (void)
{
  const guint64 ten = 10 << 20;
  MemresBuffer *bufs[15];

  for (guint stacks = 0; stacks < 2; stacks++)
    {
      g_autoptr (MemresResource) mr
          = mt_new_ok (stacks ? "track:backtrace=true>host" : "track>host");

      assert_live (mr, 0, 0, 0);
      for (guint i = 0; i < 10; i++)
        bufs[i] = mt_alloc_ok (mr, ten, NULL);
      for (guint i = 0; i < 10; i += 2)
        mt_close_ok (bufs[i], NULL);
      assert_live (mr, 5, 5 * ten, stacks ? 5 : 0);
      bufs[0] = mt_alloc_ok (mr, 0, NULL);
      assert_live (mr, 5, 5 * ten, stacks ? 5 : 0);
      mt_close_ok (bufs[0], NULL);
      for (guint i = 1; i < 10; i += 2)
        mt_close_ok (bufs[i], NULL);
      assert_live (mr, 0, 0, 0);
    }
  {
    g_autoptr (MemresResource) mr = mt_new_ok ("track>track:backtrace=true>host");
    MemresResource *lower = memres_resource_get_upstream (mr);

    for (guint i = 0; i < 10; i++)
      bufs[i] = mt_alloc_ok (lower, ten, NULL);
    for (guint i = 10; i < 15; i++)
      bufs[i] = mt_alloc_ok (mr, ten, NULL);
    assert_live (lower, 15, 15 * ten, 15);
    assert_live (mr, 5, 5 * ten, 0);
    for (guint i = 0; i < 15; i++)
      mt_close_ok (bufs[i], NULL);
    assert_live (lower, 0, 0, 0);
    assert_live (mr, 0, 0, 0);
  }
}

/* "downward": base kind of a static region handed out top down, 256 bytes a slot, never
 * reused: each allocation below the one before */
#define DOWNWARD_SLOTS 4096

static guint8 downward_mem[DOWNWARD_SLOTS * 256] __attribute__ ((aligned (256)));
static guint downward_next;

static gboolean
downward_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  downward_next = 0;
  return TRUE;
}

static void
downward_finalize (MemresResource *mr)
{
}

static gboolean
downward_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                   GError **error)
{
  if (size > 256 || downward_next >= DOWNWARD_SLOTS)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "downward: full");
      return FALSE;
    }
  downward_next++;
  alloc->address = (guint64) (guintptr) &downward_mem[(DOWNWARD_SLOTS - downward_next) * 256];
  alloc->size = size;
  return TRUE;
}

static gboolean
downward_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                     GError **error)
{
  return TRUE;
}

static void
downward_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static void
register_downward (void)
{
  static const MemresResourceOps ops = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = downward_init,
    .finalize = downward_finalize,
    .allocate = downward_allocate,
    .deallocate = downward_deallocate,
    .query = downward_query,
  };
  const MemresKindInfo info = {
    .struct_size = sizeof info,
    .name = "downward",
    .description = "host memory handed out top down",
    .ops = &ops,
  };
  GError *error = NULL;

  if (!memres_registry_register_kind (&info, &error))
    g_error ("%s", error->message);
}

static gboolean
collect_addresses (const MemresLiveAllocation *a, gpointer data)
{
  g_array_append_val ((GArray *) data, a->address);
  return TRUE;
}

/* memres_track_foreach_live() walks the allocations in the order they were made, also those
 * made within the same microsecond at falling addresses (it sorted by the time, then by the
 * address, so that such allocations came out last first) */
static void
test_track_order (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("track>downward");
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) made = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) walked = g_array_new (FALSE, FALSE, sizeof (guint64));
  MemresBuffer *bufs[DOWNWARD_SLOTS];

  for (guint i = 0; i < DOWNWARD_SLOTS; i++)
    {
      guint64 address;

      bufs[i] = mt_alloc_ok (mr, 100, NULL);
      address = memres_buffer_get_address (bufs[i]);
      g_array_append_val (made, address);
    }
  g_assert_true (memres_track_foreach_live (mr, collect_addresses, walked, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (walked->len, ==, DOWNWARD_SLOTS);
  for (guint i = 0; i < DOWNWARD_SLOTS; i++)
    g_assert_cmpuint (g_array_index (walked, guint64, i), ==, g_array_index (made, guint64, i));
  for (guint i = 0; i < DOWNWARD_SLOTS; i++)
    mt_close_ok (bufs[i], NULL);
}

static gboolean
first_backtrace (const MemresLiveAllocation *a, gpointer data)
{
  *(char **) data = g_strdup (a->backtrace);
  return FALSE;
}

/* backtrace=true: the stack memres_track_foreach_live() gives starts at the caller of
 * memres_resource_allocate(), memres's own frames left out, as in a snapshot and the log */
static void
test_track_backtrace_caller (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("track:backtrace=true>stats>host");
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) frames = NULL;
  MemresBuffer *buf = mt_alloc_ok (mr, 100, NULL);

  g_assert_true (memres_track_foreach_live (mr, first_backtrace, &text, &error));
  g_assert_no_error (error);
  g_assert_nonnull (text);
  g_test_message ("%s", text);
  frames = g_strsplit (text, "\n", -1);
  g_assert_nonnull (strstr (frames[0], "test-track"));
  g_assert_null (strstr (text, "libmemres"));
  mt_close_ok (buf, NULL);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  register_kinds ();
  register_downward ();
  g_test_add_func ("/adaptors/track-live", test_track_live);
  g_test_add_func ("/adaptors/track-left-open", test_track_left_open);
  g_test_add_func ("/adaptors/track-left-open-one-byte", test_track_left_open_one_byte);
  g_test_add_func ("/adaptors/track-failed-close", test_track_failed_close);
  g_test_add_func ("/adaptors/track-outstanding", test_track_outstanding);
  g_test_add_func ("/adaptors/track-order", test_track_order);
  g_test_add_func ("/adaptors/track-backtrace-caller", test_track_backtrace_caller);
  return g_test_run ();
}
