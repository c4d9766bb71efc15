/* test-lookup-inline.cc: memres-lookup-inline.h compiled as C++ (the build's C++ compiler; the
 * `header-compilers` test compiles it with g++ and clang++ besides) and run: memres_lookup_inline()
 * answers as memres_lookup() does at every 4 KiB of a cache's segment of its own (host memory,
 * 4 MiB: whole 1 MiB pages inside, answered by the inline code, and pages cut by its edges), just
 * outside it, and for NULL. Suite core: no driver. */
#include <memres/memres-lookup-inline.h>

#include <string.h>

static void
check_same (guint64 a)
{
  MemresLookupInfo want, got;
  gconstpointer p = (gconstpointer) (guintptr) a;
  gboolean found;

  memset (&want, 0xa5, sizeof want);
  memset (&got, 0x5a, sizeof got);
  found = memres_lookup (p, &want);
  g_assert_cmpint (memres_lookup_inline (p, &got), ==, found);
  if (found)
    {
      g_assert_true (got.resource == want.resource);
      g_assert_cmphex (got.segment.base, ==, want.segment.base);
      g_assert_cmpuint (got.segment.length, ==, want.segment.length);
      g_assert_cmpint (got.segment.device, ==, want.segment.device);
      g_assert_cmpuint (got.offset, ==, want.offset);
      g_assert_cmpuint (got.offset, ==, a - got.segment.base);
    }
  else
    g_assert_cmpuint (got.offset, ==, G_GUINT64_CONSTANT (0x5a5a5a5a5a5a5a5a));
}

static void
test_cxx (void)
{
  GError *error = NULL;
  MemresResource *mr = memres_resource_new ("cache:max_block=4KiB>host", &error);
  MemresBuffer *buf;
  guint64 a, n = 4u << 20;
  MemresLookupInfo info;

  g_assert_no_error (error);
  buf = memres_resource_allocate (mr, n, NULL, &error);
  g_assert_no_error (error);
  a = memres_buffer_get_address (buf);
  g_assert_cmpuint (memres_lookup_index.layout, ==, MEMRES_LOOKUP_LAYOUT);
  g_assert_true (memres_lookup_inline ((gconstpointer) (guintptr) (a + 5), &info));
  g_assert_true (info.resource == mr);
  g_assert_cmphex (info.segment.base, ==, a);
  g_assert_cmpuint (info.segment.length, ==, n);
  g_assert_cmpuint (info.offset, ==, 5);
  for (guint64 x = a - 4096; x <= a + n + 4096; x += 4096)
    check_same (x);
  check_same (a + n - 1);
  check_same (0);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  memres_buffer_unref (buf);
  check_same (a + 5);
  g_assert_false (memres_lookup_inline ((gconstpointer) (guintptr) (a + 5), &info));
  memres_resource_unref (mr);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/lookup-inline/cxx", test_cxx);
  return g_test_run ();
}
