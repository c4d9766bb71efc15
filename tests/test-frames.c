/* memres - CUDA memory resources
 * test-frames.c: sdk/frames.c on its own, the one test of which frames of a call stack are
 * memres's (the `track` adaptor's stacks, the snapshot's, the `log` adaptor's Backtrace column):
 * a function and a real return address of libmemres inside it, the test's own code, another
 * library's, the heap, the stack, NULL and garbage outside it, each answer checked against
 * dladdr()'s (what track and the snapshot compared before); a second object named; no object;
 * and where the caller's part of a stack starts. */
#define _GNU_SOURCE /* dladdr */
#include <memres/memres.h>

#include <dlfcn.h>
#include <execinfo.h>

#include "../sdk/frames.h"

#define CAPTURE_MAX 64

/* The base of the object @pc is in (dladdr()), or NULL. */
static gpointer
object_of (gconstpointer pc)
{
  Dl_info info;

  return dladdr (pc, &info) != 0 ? info.dli_fbase : NULL;
}

/* @frames's answer for @pc, asserted to be dladdr()'s: whether @pc is in the object at @base. */
static gboolean
contain_as_dladdr (const MemresFrames *frames, gconstpointer pc, gpointer base)
{
  gboolean in = memres_frames_contain (frames, pc);

  g_assert_cmpint (in, ==, base != NULL && object_of (pc) == base);
  return in;
}

static void
frames_of_libmemres (MemresFrames *frames)
{
  const gconstpointer anchor = (gconstpointer) memres_resource_new;

  memres_frames_init (frames, &anchor, 1);
}

static void
test_frames_libmemres (void)
{
  MemresFrames frames;
  gpointer memres = object_of ((gconstpointer) memres_resource_new);
  gpointer heap = g_malloc (64);
  int on_stack = 0;

  g_assert_nonnull (memres);
  g_assert_true (memres != object_of ((gconstpointer) test_frames_libmemres));
  frames_of_libmemres (&frames);
  /* its span: one range, the object dladdr() names at both ends */
  g_assert_cmpuint (frames.n_ranges, ==, 1);
  g_assert_cmpuint (frames.ranges[0].start, <, frames.ranges[0].end);
  g_assert_true (object_of (GSIZE_TO_POINTER (frames.ranges[0].start)) == memres);
  g_assert_true (object_of (GSIZE_TO_POINTER (frames.ranges[0].end - 1)) == memres);
  /* functions of libmemres: the anchor and others */
  g_assert_true (contain_as_dladdr (&frames, (gconstpointer) memres_resource_new, memres));
  g_assert_true (contain_as_dladdr (&frames, (gconstpointer) memres_buffer_close, memres));
  g_assert_true (contain_as_dladdr (&frames, (gconstpointer) memres_resource_snapshot, memres));
  /* outside: this program's code, GLib's, the heap, the stack, NULL, garbage */
  g_assert_false (contain_as_dladdr (&frames, (gconstpointer) test_frames_libmemres, memres));
  g_assert_false (contain_as_dladdr (&frames, (gconstpointer) g_hash_table_new, memres));
  g_assert_false (contain_as_dladdr (&frames, heap, memres));
  g_assert_false (contain_as_dladdr (&frames, &on_stack, memres));
  g_assert_false (memres_frames_contain (&frames, NULL));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (1)));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (0x1000)));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (G_MAXSIZE)));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (G_MAXSIZE - 4095)));
  /* the edges: the first byte and the last in, the bytes just outside out */
  g_assert_true (memres_frames_contain (&frames, GSIZE_TO_POINTER (frames.ranges[0].start)));
  g_assert_true (memres_frames_contain (&frames, GSIZE_TO_POINTER (frames.ranges[0].end - 1)));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (frames.ranges[0].end)));
  g_assert_false (memres_frames_contain (&frames, GSIZE_TO_POINTER (frames.ranges[0].start - 1)));
  g_free (heap);
}

typedef struct
{
  gpointer pcs[CAPTURE_MAX];
  guint n;
} Captured;

/* called by libmemres (memres_track_foreach_live()): the stack holds a return address into it */
static gboolean
capture (const MemresLiveAllocation *a, gpointer data)
{
  Captured *c = data;

  c->n = (guint) MAX (backtrace (c->pcs, CAPTURE_MAX), 0);
  return FALSE;
}

/* A real stack, innermost first: this test's callback (under ASan, after its interceptor of
 * backtrace()), libmemres's memres_track_foreach_live(), then this test again: the caller's part
 * starts past libmemres's outermost frame, on this test's code, as track's first_caller_frame() and
 * the snapshot's dladdr() loop found it. */
static void
test_frames_return_address (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("track>host", &error);
  g_autoptr (MemresBuffer) buf = NULL;
  gpointer memres = object_of ((gconstpointer) memres_resource_new);
  gpointer self = object_of ((gconstpointer) test_frames_return_address);
  MemresFrames frames;
  Captured c = { { 0 }, 0 };
  guint first, first_dladdr = 0, n_memres = 0;
  gboolean callback_seen = FALSE;

  g_assert_no_error (error);
  buf = memres_resource_allocate (mr, 256, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_track_foreach_live (mr, capture, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.n, >=, 3);
  frames_of_libmemres (&frames);
  for (guint i = 0; i < c.n; i++)
    if (contain_as_dladdr (&frames, c.pcs[i], memres))
      {
        first_dladdr = i + 1;
        n_memres++;
      }
  g_assert_cmpuint (n_memres, >=, 1);
  first = memres_frames_first_caller (&frames, c.pcs, c.n);
  g_assert_cmpuint (first, ==, first_dladdr);
  g_assert_cmpuint (first, >=, 2);
  g_assert_cmpuint (first, <, c.n);
  g_assert_true (memres_frames_contain (&frames, c.pcs[first - 1]));
  g_assert_false (memres_frames_contain (&frames, c.pcs[first]));
  g_assert_true (object_of (c.pcs[first]) == self); /* this test, which called libmemres */
  /* and below libmemres's frames, the callback's own, this program's (the innermost one, or
   * after a sanitizer's interceptor of backtrace()) */
  for (guint i = 0; i + 1 < first && !callback_seen; i++)
    callback_seen = object_of (c.pcs[i]) == self && !memres_frames_contain (&frames, c.pcs[i]);
  g_assert_true (callback_seen);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
}

/* Two objects named (as the `log` plugin names libmemres and itself): the frames of both. */
static void
test_frames_two_objects (void)
{
  const gconstpointer anchors[]
      = { (gconstpointer) memres_resource_new, (gconstpointer) test_frames_two_objects };
  MemresFrames one, both;

  frames_of_libmemres (&one);
  memres_frames_init (&both, anchors, G_N_ELEMENTS (anchors));
  g_assert_cmpuint (one.n_ranges, ==, 1);
  g_assert_cmpuint (both.n_ranges, ==, 2);
  g_assert_true (memres_frames_contain (&both, (gconstpointer) memres_buffer_close));
  g_assert_true (memres_frames_contain (&both, (gconstpointer) test_frames_libmemres));
  g_assert_false (memres_frames_contain (&one, (gconstpointer) test_frames_libmemres));
  g_assert_false (memres_frames_contain (&both, (gconstpointer) g_hash_table_new));
  g_assert_false (memres_frames_contain (&both, NULL));
}

/* No object named, or an anchor in none: no frame is memres's. */
static void
test_frames_none (void)
{
  const gconstpointer null_anchor = NULL, garbage_anchor = GSIZE_TO_POINTER (0x10);
  gpointer pcs[] = { (gpointer) memres_resource_new, (gpointer) test_frames_none };
  MemresFrames frames;

  memres_frames_init (&frames, NULL, 0);
  g_assert_cmpuint (frames.n_ranges, ==, 0);
  memres_frames_init (&frames, &null_anchor, 1);
  g_assert_cmpuint (frames.n_ranges, ==, 0);
  g_assert_false (memres_frames_contain (&frames, (gconstpointer) memres_resource_new));
  g_assert_cmpuint (memres_frames_first_caller (&frames, pcs, G_N_ELEMENTS (pcs)), ==, 0);
  memres_frames_init (&frames, &garbage_anchor, 1);
  g_assert_cmpuint (frames.n_ranges, ==, 0);
  g_assert_false (memres_frames_contain (&frames, (gconstpointer) memres_resource_new));
}

/* Where the caller's part starts: past the outermost frame in libmemres, wherever the others. */
static void
test_frames_first_caller (void)
{
  gpointer in = (gpointer) memres_resource_new, out = (gpointer) test_frames_first_caller;
  gpointer mixed[] = { out, in, in, out, in, out, out };
  gpointer all_in[] = { in, in, in };
  gpointer all_out[] = { out, out };
  gpointer garbage[] = { NULL, GSIZE_TO_POINTER (1), in, GSIZE_TO_POINTER (G_MAXSIZE) };
  MemresFrames frames;

  frames_of_libmemres (&frames);
  g_assert_cmpuint (memres_frames_first_caller (&frames, mixed, G_N_ELEMENTS (mixed)), ==, 5);
  g_assert_cmpuint (memres_frames_first_caller (&frames, all_in, G_N_ELEMENTS (all_in)), ==, 3);
  g_assert_cmpuint (memres_frames_first_caller (&frames, all_out, G_N_ELEMENTS (all_out)), ==, 0);
  g_assert_cmpuint (memres_frames_first_caller (&frames, garbage, G_N_ELEMENTS (garbage)), ==, 3);
  g_assert_cmpuint (memres_frames_first_caller (&frames, mixed, 1), ==, 0);
  g_assert_cmpuint (memres_frames_first_caller (&frames, mixed, 0), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/frames/libmemres", test_frames_libmemres);
  g_test_add_func ("/frames/return-address", test_frames_return_address);
  g_test_add_func ("/frames/two-objects", test_frames_two_objects);
  g_test_add_func ("/frames/none", test_frames_none);
  g_test_add_func ("/frames/first-caller", test_frames_first_caller);
  return g_test_run ();
}
