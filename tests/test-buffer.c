/* test-buffer.c: buffer lifetime (close, unref, the resource reference), the closed state,
 * zero-size buffers, wrapped memory, and copy/fill/read/write on host memory; on the in-test
 * kind "tk" (testkind.h), which counts its slot calls, and on host. */
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testkind.h"
#include "testutil.h"

static void
test_zero_size_skips_kind (void)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;

  tk_reset ();
  mr = mt_new_ok ("tk");
  buf = mt_alloc_ok (mr, 0, NULL);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_true (memres_buffer_get_resource (buf) == mr);
  mt_close_ok (buf, NULL);
  /* neither allocate nor deallocate ran */
  g_assert_cmpint (tk.allocates, ==, 0);
  g_assert_cmpint (tk.deallocates, ==, 0);
  memres_resource_unref (mr);
  g_assert_cmpint (tk.finalizes, ==, 1);
}

static void
test_close_idempotent (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;

  tk_reset ();
  mr = mt_new_ok ("tk");
  buf = mt_alloc_ok (mr, 100, NULL);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  mt_close_ok (buf, MEMRES_STREAM_LEGACY);
  g_assert_cmpint (tk.allocates, ==, 1);
  g_assert_cmpint (tk.deallocates, ==, 1);
}

/* Flags that MemresCloseFlags does not define are refused, and the buffer stays open. */
static void
test_close_unknown_flags (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;

  tk_reset ();
  mr = mt_new_ok ("tk");
  buf = mt_alloc_ok (mr, 100, NULL);
  g_assert_false (memres_buffer_close_full (buf, NULL, (MemresCloseFlags) 0x80, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "0x80"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 100);
  g_assert_cmpint (tk.deallocates, ==, 0);
  g_assert_true (memres_buffer_close_full (buf, NULL, MEMRES_CLOSE_CALLER_ORDERED, &error));
  g_assert_no_error (error);
  g_assert_cmpint (tk.deallocates, ==, 1);
  /* on a closed buffer too: the flags are checked before the closed state */
  g_assert_false (memres_buffer_close_full (buf, NULL, (MemresCloseFlags) 0x2, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  memres_buffer_unref (buf);
  g_assert_cmpint (tk.deallocates, ==, 1);
}

static void
test_closed_buffer (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);
  g_autoptr (MemresBuffer) other = mt_alloc_ok (mr, 64, NULL);
  guint8 bytes[8] = { 0 };

  g_assert_true (memres_buffer_close (buf, NULL, &error));

  /* every call but close fails with CLOSED */
#define ASSERT_CLOSED(call)                                                                        \
  G_STMT_START                                                                                     \
  {                                                                                                \
    g_assert_false (call);                                                                         \
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);                                     \
    g_clear_error (&error);                                                                        \
  }                                                                                                \
  G_STMT_END
  ASSERT_CLOSED (memres_buffer_copy_to (buf, other, NULL, &error));
  ASSERT_CLOSED (memres_buffer_copy_to (other, buf, NULL, &error));
  ASSERT_CLOSED (memres_buffer_copy_from (buf, other, NULL, &error));
  ASSERT_CLOSED (memres_buffer_fill (buf, 1, 1, NULL, &error));
  ASSERT_CLOSED (memres_buffer_read (buf, 0, bytes, 8, NULL, &error));
  ASSERT_CLOSED (memres_buffer_write (buf, 0, bytes, 8, NULL, &error));
  ASSERT_CLOSED (memres_buffer_resize (buf, 128, NULL, &error));
  ASSERT_CLOSED (memres_buffer_set_deallocation_stream (buf, NULL, &error));
#undef ASSERT_CLOSED

  /* getters report nothing */
  g_assert_null (memres_buffer_get_pointer (buf));
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_null (memres_buffer_get_resource (buf));
  g_assert_cmpint (memres_buffer_get_flags (buf), ==, 0);
  g_assert_false (memres_buffer_is_host_accessible (buf));
  g_assert_null (memres_buffer_get_allocation (buf));
  /* close stays fine */
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
}

static void
test_buffer_holds_resource (void)
{
  MemresResource *mr;
  MemresBuffer *a, *b;

  tk_reset ();
  mr = mt_new_ok ("tk");
  a = mt_alloc_ok (mr, 10, NULL);
  b = mt_alloc_ok (mr, 20, NULL);
  memres_resource_unref (mr);
  /* the buffers keep the resource alive */
  g_assert_cmpint (tk.finalizes, ==, 0);
  g_assert_true (memres_buffer_close (a, NULL, NULL));
  g_assert_cmpint (tk.finalizes, ==, 0);
  memres_buffer_unref (a);
  memres_buffer_unref (b); /* the last unref closes b, then the resource goes */
  g_assert_cmpint (tk.deallocates, ==, 2);
  g_assert_cmpint (tk.finalizes, ==, 1);
}

/* A reference taken again, through an open buffer, of a resource whose last reference went
 * (memres_buffer_get_resource() says the pointer stays valid while the buffer is open): the
 * resource serves and counts again, and is finalized once, after the last of the references
 * and the buffers (it was finalized twice, or while a buffer made after was open) */
static void
test_ref_again_through_buffer (void)
{
  MemresResource *mr, *again;
  MemresBuffer *a, *b, *c;
  MemresStats stats;

  tk_reset ();
  mr = mt_new_ok ("stats>tk");
  a = mt_alloc_ok (mr, 10, NULL);
  memres_resource_unref (mr);
  g_assert_cmpint (tk.finalizes, ==, 0);
  again = memres_resource_ref (memres_buffer_get_resource (a));
  g_assert_true (again == mr);
  /* allocated with the reference taken again: it keeps the resource too */
  b = mt_alloc_ok (again, 20, NULL);
  g_assert_true (memres_resource_get_stats (again, &stats, NULL));
  g_assert_cmpuint (stats.n_buffers, ==, 2);
  g_assert_cmpuint (stats.used_current, ==, 30);
  mt_close_ok (a, NULL); /* and its unref */
  memres_resource_unref (again);
  g_assert_cmpint (tk.finalizes, ==, 0);
  /* and once more, through b, with a buffer allocated and closed on the way */
  again = memres_resource_ref (memres_buffer_get_resource (b));
  c = mt_alloc_ok (again, 30, NULL);
  mt_close_ok (b, NULL);
  g_assert_true (memres_resource_get_stats (again, &stats, NULL));
  g_assert_cmpuint (stats.n_buffers, ==, 1);
  g_assert_cmpuint (stats.used_current, ==, 30);
  memres_resource_unref (again);
  g_assert_cmpint (tk.finalizes, ==, 0);
  mt_close_ok (c, NULL);
  g_assert_cmpint (tk.allocates, ==, 3);
  g_assert_cmpint (tk.deallocates, ==, 3);
  g_assert_cmpint (tk.finalizes, ==, 1);
}

static void
test_ref_keeps_buffer (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;

  tk_reset ();
  mr = mt_new_ok ("tk");
  buf = mt_alloc_ok (mr, 10, NULL);
  g_assert_true (memres_buffer_ref (buf) == buf);
  memres_buffer_unref (buf);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpint (tk.deallocates, ==, 0);
  memres_buffer_unref (buf);
  g_assert_cmpint (tk.deallocates, ==, 1);
}

static void
test_deallocation_stream (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = NULL;
  MemresStream s = (MemresStream) GSIZE_TO_POINTER (0x1234);

  buf = mt_alloc_ok (mr, 8, MEMRES_STREAM_LEGACY);
  /* the allocation stream is recorded */
  g_assert_true (memres_buffer_get_deallocation_stream (buf) == MEMRES_STREAM_LEGACY);
  g_assert_true (memres_buffer_set_deallocation_stream (buf, s, &error));
  g_assert_true (memres_buffer_get_deallocation_stream (buf) == s);
}

/* Closing through the last unref logs a failed deallocation, but never the driver's
 * "deinitialized" at process exit. */
static void
test_unref_close_failure (void)
{
  if (g_test_subprocess ())
    {
      MemresResource *mr;
      MemresBuffer *buf;
      const char *mode = g_getenv ("TK_MODE");

      tk_register ();
      mr = mt_new_ok ("tk");
      buf = mt_alloc_ok (mr, 10, NULL);
      tk.dealloc_fail_code
          = g_strcmp0 (mode, "deinit") == 0 ? CUDA_ERROR_DEINITIALIZED : CUDA_ERROR_ILLEGAL_ADDRESS;
      memres_buffer_unref (buf);
      memres_resource_unref (mr);
      return;
    }
  g_setenv ("TK_MODE", "fail", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed (); /* the warning is fatal under g_test */
  g_test_trap_assert_stderr ("*Closing a buffer of 10 bytes failed*cuMemFreeAsync*");

  g_setenv ("TK_MODE", "deinit", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("");
  g_unsetenv ("TK_MODE");
}

static void
test_close_failure_reported (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk");
  buf = mt_alloc_ok (mr, 10, NULL);
  tk.dealloc_fail_code = CUDA_ERROR_ILLEGAL_ADDRESS;
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_ILLEGAL_ADDRESS);
  tk.dealloc_fail_code = 0;
  /* nothing was released: the buffer stays open, its memory and resource with it */
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_true (memres_buffer_get_resource (buf) == mr);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 10);
  g_clear_error (&error);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_true (memres_buffer_close (buf, NULL, &error)); /* idempotent */
  g_assert_no_error (error);
}

static void
test_copy (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) a = mt_alloc_ok (mr, 1000, NULL);
  g_autoptr (MemresBuffer) b = mt_alloc_ok (mr, 1000, NULL);
  g_autoptr (MemresBuffer) c = mt_alloc_ok (mr, 1000, NULL);
  guint8 *pa = memres_buffer_get_pointer (a);
  guint8 *pb = memres_buffer_get_pointer (b);
  guint8 *pc = memres_buffer_get_pointer (c);
  gsize i;

  for (i = 0; i < 1000; i++)
    pa[i] = (guint8) (i ^ 0x5a);
  memset (pb, 0, 1000);
  g_assert_true (memres_buffer_copy_to (a, b, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (pa, 1000, pb, 1000);
  memset (pc, 0, 1000);
  g_assert_true (memres_buffer_copy_from (c, b, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (pa, 1000, pc, 1000);
}

static void
test_copy_size_mismatch (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) a = mt_alloc_ok (mr, 100, NULL);
  g_autoptr (MemresBuffer) b = mt_alloc_ok (mr, 101, NULL);
  g_autoptr (MemresBuffer) empty = mt_alloc_ok (mr, 0, NULL);
  guint8 *pb = memres_buffer_get_pointer (b);

  memset (memres_buffer_get_pointer (a), 1, 100);
  memset (pb, 2, 101);
  g_assert_false (memres_buffer_copy_to (a, b, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "100"));
  g_assert_nonnull (strstr (error->message, "101"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_from (a, b, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (empty, a, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  /* nothing was written */
  g_assert_cmpint (pb[0], ==, 2);
  g_assert_cmpint (pb[100], ==, 2);
}

static void
test_fill (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);
  guint8 *p = memres_buffer_get_pointer (buf);
  gsize i;

  g_assert_true (memres_buffer_fill (buf, 0xab, 1, NULL, &error));
  g_assert_no_error (error);
  for (i = 0; i < 64; i++)
    g_assert_cmpint (p[i], ==, 0xab);

  g_assert_true (memres_buffer_fill (buf, 0x1234, 2, NULL, &error));
  g_assert_no_error (error);
  for (i = 0; i < 32; i++)
    g_assert_cmpint (((guint16 *) p)[i], ==, 0x1234);

  g_assert_true (memres_buffer_fill (buf, 0xdeadbeef, 4, NULL, &error));
  g_assert_no_error (error);
  for (i = 0; i < 16; i++)
    g_assert_cmpuint (((guint32 *) p)[i], ==, 0xdeadbeef);
}

static void
test_fill_invalid (void)
{
  static const guint widths[] = { 0, 3, 5, 8, 16 };
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);
  g_autoptr (MemresBuffer) odd = mt_alloc_ok (mr, 7, NULL);
  guint8 *p = memres_buffer_get_pointer (buf);
  gsize i;

  memset (p, 0x11, 64);
  for (i = 0; i < G_N_ELEMENTS (widths); i++)
    {
      g_assert_false (memres_buffer_fill (buf, 0, widths[i], NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "1, 2 or 4"));
      g_clear_error (&error);
    }
  /* a pattern wider than the width */
  g_assert_false (memres_buffer_fill (buf, 0x100, 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_fill (buf, 0x10000, 2, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* a size that is not a multiple of the width */
  g_assert_false (memres_buffer_fill (odd, 1, 2, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_fill (odd, 1, 4, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  /* nothing was written */
  for (i = 0; i < 64; i++)
    g_assert_cmpint (p[i], ==, 0x11);
}

static void
test_read_write (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 100, NULL);
  guint8 in[100], out[100];
  gsize i;

  for (i = 0; i < 100; i++)
    in[i] = (guint8) (3 * i + 1);
  g_assert_true (memres_buffer_write (buf, 0, in, 100, NULL, &error));
  g_assert_no_error (error);
  memset (out, 0, sizeof out);
  g_assert_true (memres_buffer_read (buf, 0, out, 100, NULL, &error));
  g_assert_cmpmem (in, 100, out, 100);
  /* partial ranges */
  g_assert_true (memres_buffer_write (buf, 90, in, 10, NULL, &error));
  g_assert_true (memres_buffer_read (buf, 90, out, 10, NULL, &error));
  g_assert_cmpmem (in, 10, out, 10);
  g_assert_true (memres_buffer_read (buf, 100, out, 0, NULL, &error));
  g_assert_no_error (error);

  /* out of range, including offsets that would overflow */
  g_assert_false (memres_buffer_read (buf, 1, out, 100, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 101, in, 0, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (buf, G_MAXSIZE, out, 2, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 2, in, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
}

/* A read or write of host memory whose host side is the buffer's own memory (Python's
 * buf.write(memoryview(buf)[0:64], offset=1)) moves the bytes as memmove() does, both ways.
 * It was a memcpy() of overlapping ranges: undefined, reported by AddressSanitizer
 * (memcpy-param-overlap) and valgrind. */
static void
test_read_write_overlap (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 100, NULL);
  guint8 *mem = memres_buffer_get_pointer (buf);
  guint8 want[100];

  for (gsize i = 0; i < 100; i++)
    mem[i] = want[i] = (guint8) (7 * i + 3);
  /* forward: [0, 64) written at 1 */
  memmove (want + 1, want, 64);
  g_assert_true (memres_buffer_write (buf, 1, mem, 64, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (mem, 100, want, 100);
  /* backward: [10, 90) read into [5, 85) */
  memmove (want + 5, want + 10, 80);
  g_assert_true (memres_buffer_read (buf, 10, mem + 5, 80, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (mem, 100, want, 100);
}

/* Memory described as managed: both accessible flags follow; without a driver the managed
 * calls fail with NO_DRIVER, except on an empty buffer, which needs no driver. */
static void
test_wrap_managed_no_driver (void)
{
  g_autoptr (GError) error = NULL;
  guint8 data[64];
  MemresLocation host = { MEMRES_LOCATION_HOST, 0 }, got = { 42, 42 };
  MemresBuffer *buf;
  gboolean mostly = TRUE;

  buf = memres_buffer_new_for_pointer (data, sizeof data, -1, MEMRES_MEMORY_MANAGED, NULL, NULL,
                                       &error);
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_flags (buf), ==,
                   MEMRES_MEMORY_MANAGED | MEMRES_MEMORY_HOST_ACCESSIBLE
                       | MEMRES_MEMORY_DEVICE_ACCESSIBLE);
  g_assert_true (memres_buffer_is_managed (buf));
  g_assert_false (memres_buffer_set_read_mostly (buf, TRUE, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_buffer_prefetch (buf, &host, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_false (memres_buffer_is_managed (buf));
  memres_buffer_unref (buf);

  buf = memres_buffer_new_for_pointer (NULL, 0, -1, MEMRES_MEMORY_MANAGED, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_set_read_mostly (buf, TRUE, &error));
  g_assert_true (memres_buffer_get_read_mostly (buf, &mostly, &error));
  g_assert_false (mostly);
  g_assert_true (memres_buffer_get_last_prefetch_location (buf, &got, &error));
  g_assert_no_error (error);
  g_assert_cmpint (got.type, ==, MEMRES_LOCATION_NONE);
  memres_buffer_unref (buf);

  /* other flags are still refused */
  g_assert_null (memres_buffer_new_for_pointer (
      data, 8, -1, MEMRES_MEMORY_MANAGED | MEMRES_MEMORY_RESIZABLE, NULL, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
}

static void
test_wrap_host_memory (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) dst = mt_alloc_ok (mr, 16, NULL);
  guint8 data[16];
  int released = 0;
  MemresBuffer *buf;

  memset (data, 0x42, sizeof data);
  /* flags 0 and no driver: pageable host memory */
  buf = memres_buffer_new_for_pointer (data, sizeof data, 3, 0, mt_count_release, &released,
                                       &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_pointer (buf) == data);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_cmpint (memres_buffer_get_flags (buf), ==, MEMRES_MEMORY_HOST_ACCESSIBLE);
  g_assert_null (memres_buffer_get_resource (buf));
  g_assert_true (memres_buffer_copy_to (buf, dst, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (((guint8 *) memres_buffer_get_pointer (dst))[15], ==, 0x42);
  g_assert_false (memres_buffer_resize (buf, 32, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_cmpint (released, ==, 0);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_cmpint (released, ==, 1);
  memres_buffer_unref (buf);
  g_assert_cmpint (released, ==, 1);

  /* the last unref closes too */
  buf = memres_buffer_new_for_pointer (data, 4, -1, MEMRES_MEMORY_HOST_ACCESSIBLE, mt_count_release,
                                       &released, &error);
  memres_buffer_unref (buf);
  g_assert_cmpint (released, ==, 2);

  /* empty and NULL */
  buf = memres_buffer_new_for_pointer (NULL, 0, -1, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  memres_buffer_unref (buf);
  g_assert_null (memres_buffer_new_for_pointer (NULL, 8, -1, 0, NULL, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* a range past the end of the address space, a bad device, flags wrapped memory cannot have;
   * the release function is not called for a refused wrap */
  released = 0;
  g_assert_null (memres_buffer_new_for_pointer (GSIZE_TO_POINTER (G_MAXSIZE - 15), 64, -1,
                                                MEMRES_MEMORY_HOST_ACCESSIBLE, mt_count_release,
                                                &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_buffer_new_for_pointer (data, 4, -2, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                                mt_count_release, &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_buffer_new_for_pointer (GSIZE_TO_POINTER (1), G_MAXSIZE - 1, -1,
                                                MEMRES_MEMORY_HOST_ACCESSIBLE, mt_count_release,
                                                &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_buffer_new_for_pointer (data, 4, -1, MEMRES_MEMORY_DEVICE_ACCESSIBLE,
                                                mt_count_release, &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_buffer_new_for_pointer (
      data, 4, -1, MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_IMPORTED, mt_count_release,
      &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (
      memres_buffer_new_for_pointer (data, 4, -1, 1 << 20, mt_count_release, &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpint (released, ==, 0);
}

/* What a release function of wrapped memory was called with. */
typedef struct
{
  gint calls;
  gpointer last_data;
} ReleaseLog;

static ReleaseLog release_log;

static void
release_logged (gpointer data)
{
  g_atomic_int_inc (&release_log.calls);
  release_log.last_data = data;
}

/* The device UUID of the pools of the in-test IPC kind "wrapipc". */
static const guint8 wrap_ipc_uuid[MEMRES_IPC_ID_SIZE] = { 0x77 };

/* Wrapped memory's release function and its data: called once, with that data, by the close
 * (or the last unref), never again; no other call reaches them, and the allocation record a
 * plugin may read shows no plugin data (the core's record of memory no kind allocated). */
static void
test_wrap_release_data (void)
{
  g_autoptr (MemresResource) host = mt_new_ok ("host");
  g_autoptr (MemresBuffer) other = mt_alloc_ok (host, 64, NULL);
  gpointer user_data = GINT_TO_POINTER (0x5eed);
  const MemresAllocation *alloc;
  MemresBufferDescriptor desc;
  GError *error = NULL;
  guint8 data[64], out[64];
  MemresBuffer *buf;

  memset (&release_log, 0, sizeof release_log);
  memset (data, 0x17, sizeof data);
  buf = memres_buffer_new_for_pointer (data, sizeof data, -1, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                       release_logged, user_data, &error);
  g_assert_no_error (error);
  g_assert_cmpuint ((guintptr) buf % 64, ==, 0);

  alloc = memres_buffer_get_allocation (buf);
  g_assert_nonnull (alloc);
  g_assert_cmpuint (alloc->address, ==, (guintptr) data);
  g_assert_cmpuint (alloc->size, ==, sizeof data);
  g_assert_null (alloc->plugin_data);

  /* every call on it, none reaching the release function */
  g_assert_true (memres_buffer_get_pointer (buf) == data);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, (guintptr) data);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, sizeof data);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_null (memres_buffer_get_resource (buf));
  g_assert_cmpint (memres_buffer_get_flags (buf), ==, MEMRES_MEMORY_HOST_ACCESSIBLE);
  g_assert_true (memres_buffer_is_host_accessible (buf));
  g_assert_false (memres_buffer_is_device_accessible (buf));
  g_assert_null (memres_buffer_get_deallocation_stream (buf));
  g_assert_true (memres_buffer_copy_to (buf, other, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_fill (other, 0x29, 1, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_copy_from (buf, other, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (data[63], ==, 0x29);
  g_assert_true (memres_buffer_write (buf, 8, "abc", 3, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_read (buf, 8, out, 3, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (out, 3, "abc", 3);
  g_assert_true (memres_buffer_fill (buf, 0x31, 1, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (data[0], ==, 0x31);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_ipc_send_buffer (-1, buf, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_resize (buf, 128, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_true (memres_buffer_set_deallocation_stream (buf, (MemresStream) 0x40, &error));
  g_assert_no_error (error);
  memres_buffer_unref (memres_buffer_ref (buf));
  g_assert_cmpint (release_log.calls, ==, 0);

  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (release_log.calls, ==, 1);
  g_assert_true (release_log.last_data == user_data);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_null (memres_buffer_get_allocation (buf));
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  memres_buffer_unref (buf);
  g_assert_cmpint (release_log.calls, ==, 1);

  /* NULL data, a NULL release function with data */
  buf = memres_buffer_new_for_pointer (data, 8, -1, 0, release_logged, NULL, &error);
  g_assert_no_error (error);
  memres_buffer_unref (buf);
  g_assert_cmpint (release_log.calls, ==, 2);
  g_assert_null (release_log.last_data);
  buf = memres_buffer_new_for_pointer (data, 8, -1, 0, NULL, user_data, &error);
  g_assert_no_error (error);
  g_assert_null (memres_buffer_get_allocation (buf)->plugin_data);
  mt_close_ok (buf, NULL);
  g_assert_cmpint (release_log.calls, ==, 2);
}

/* A wrapped buffer's structure, recycled for buffers of resources (the thread's cache of
 * structures hands back the last one freed): they neither call the old release function nor
 * take it for an IPC mapping (an export of an IPC kind's buffer asks the kind; an import is a
 * mapping of its own). The other way round too: a wrapped buffer made after imported ones
 * were freed has no mapping. */
static void
test_wrap_struct_recycled (void)
{
  g_autoptr (MemresResource) tkr = mt_new_ok ("tk");
  g_autoptr (MemresResource) exporter = mt_new_ok ("wrapipc");
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBufferDescriptor desc, again;
  GError *error = NULL;
  guint8 data[32];
  MemresBuffer *wrapped, *buf, *src, *imp;
  guintptr freed;

  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  importer = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  memset (&release_log, 0, sizeof release_log);
  tk_reset ();

  /* into an allocated buffer */
  wrapped = memres_buffer_new_for_pointer (data, sizeof data, -1, 0, release_logged, data, &error);
  g_assert_no_error (error);
  freed = (guintptr) wrapped;
  memres_buffer_unref (wrapped);
  g_assert_cmpint (release_log.calls, ==, 1);
  buf = mt_alloc_ok (tkr, 16, NULL);
  g_assert_cmpuint ((guintptr) buf, ==, freed);
  g_assert_cmpuint ((guintptr) buf % 64, ==, 0);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);
  g_assert_cmpint (tk.deallocates, ==, 1);
  g_assert_cmpint (release_log.calls, ==, 1);

  /* into an exported buffer: the export asks the kind */
  wrapped = memres_buffer_new_for_pointer (data, sizeof data, -1, 0, release_logged, data, &error);
  g_assert_no_error (error);
  freed = (guintptr) wrapped;
  memres_buffer_unref (wrapped);
  src = mt_alloc_ok (exporter, 4096, NULL);
  g_assert_cmpuint ((guintptr) src, ==, freed);
  mt_fill_pattern (memres_buffer_get_pointer (src), 4096, 5);
  g_assert_true (memres_buffer_export (src, &desc, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (mt_get_u64 (desc.bytes + OFF_SIZE), ==, 4096);
  g_assert_cmpuint (mt_get_u64 (desc.bytes + OFF_EXPORT_DATA), ==, memres_buffer_get_address (src));

  /* into an imported buffer: its own mapping, re-exported as it came */
  wrapped = memres_buffer_new_for_pointer (data, sizeof data, -1, 0, release_logged, data, &error);
  g_assert_no_error (error);
  freed = (guintptr) wrapped;
  memres_buffer_unref (wrapped);
  imp = memres_buffer_import (importer, desc.bytes, DESC_SIZE, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint ((guintptr) imp, ==, freed);
  g_assert_true (memres_buffer_export (imp, &again, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (again.bytes, DESC_SIZE, desc.bytes, DESC_SIZE);
  mt_assert_pattern (memres_buffer_get_pointer (imp), 4096, 5);
  g_assert_null (memres_buffer_get_allocation (imp)->plugin_data);
  mt_close_ok (imp, NULL);
  g_assert_cmpint (release_log.calls, ==, 3);

  /* an imported buffer's structure freed, then memory wrapped: released once, with its data */
  imp = memres_buffer_import (importer, desc.bytes, DESC_SIZE, NULL, &error);
  g_assert_no_error (error);
  memres_buffer_unref (imp);
  wrapped = memres_buffer_new_for_pointer (data, sizeof data, -1, 0, release_logged, data, &error);
  g_assert_no_error (error);
  g_assert_false (memres_buffer_export (wrapped, &again, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (wrapped, NULL);
  g_assert_cmpint (release_log.calls, ==, 4);
  g_assert_true (release_log.last_data == data);
  mt_close_ok (src, NULL);
  g_assert_cmpint (release_log.calls, ==, 4);
}

/* Threads race to close and drop the references of wrapped buffers: each release function runs
 * exactly once, with its own data. */
typedef struct
{
  MemresBuffer *buf;
  gint released;
} RaceItem;

static void
release_item (gpointer data)
{
  g_atomic_int_inc (&((RaceItem *) data)->released);
}

static gpointer
close_items_thread (gpointer data)
{
  RaceItem *items = data;

  for (guint i = 0; i < 2000; i++)
    {
      if (i % 2 == 0)
        g_assert_true (memres_buffer_close (items[i].buf, NULL, NULL));
      memres_buffer_unref (items[i].buf);
    }
  return NULL;
}

static void wrap_release_race_round (void);

static void
test_wrap_release_race (void)
{
  /* rounds: the two unrefs that both read a count of two and the one that then took it to zero
   * (which decremented a count of zero again at its end, GLib's critical) met in about 1 % of
   * single rounds */
  for (guint round = 0; round < 8; round++)
    wrap_release_race_round ();
}

static void
wrap_release_race_round (void)
{
  RaceItem *items = g_new0 (RaceItem, 2000);
  guint8 data[8];
  GThread *threads[2];

  for (guint i = 0; i < 2000; i++)
    {
      GError *error = NULL;

      items[i].buf = memres_buffer_new_for_pointer (data, sizeof data, -1, 0, release_item,
                                                    &items[i], &error);
      g_assert_no_error (error);
      memres_buffer_ref (items[i].buf);
    }
  for (guint t = 0; t < 2; t++)
    threads[t] = g_thread_new ("closer", close_items_thread, items);
  for (guint t = 0; t < 2; t++)
    g_thread_join (threads[t]);
  for (guint i = 0; i < 2000; i++)
    g_assert_cmpint (items[i].released, ==, 1);
  g_free (items);
}

static void
test_device_memory_without_driver (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) host = mt_alloc_ok (mr, 16, NULL);
  g_autoptr (MemresBuffer) dev = NULL;
  guint8 bytes[16];

  /* memory claimed to be on device 0: everything needs the driver, which is not there */
  dev = memres_buffer_new_for_pointer (GSIZE_TO_POINTER (0x10000), 16, 0,
                                       MEMRES_MEMORY_DEVICE_ACCESSIBLE, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (memres_buffer_get_device (dev), ==, 0);
  g_assert_false (memres_buffer_fill (dev, 0, 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (host, dev, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (dev, 0, bytes, 16, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (dev, 0, bytes, 16, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  /* Without a driver nothing can be pending on the default stream: synchronizing it succeeds,
   * so code written for a GPU runs on host memory too; a stream of its own needs a driver. */
  mt_sync_ok (NULL);
  mt_sync_ok (MEMRES_STREAM_LEGACY);
  g_assert_false (memres_stream_synchronize ((MemresStream) 0x1234, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
}

static void
test_allocation_record (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 48, NULL);
  const MemresAllocation *alloc = memres_buffer_get_allocation (buf);

  g_assert_nonnull (alloc);
  g_assert_cmpuint (alloc->address, ==, memres_buffer_get_address (buf));
  g_assert_cmpuint (alloc->size, ==, 48);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tk_register ();
  mt_ipc_kind_register ("wrapipc", wrap_ipc_uuid);

  g_test_add_func ("/buffer/allocate/zero-size", test_zero_size_skips_kind);
  g_test_add_func ("/buffer/close/idempotent", test_close_idempotent);
  g_test_add_func ("/buffer/close/failure", test_close_failure_reported);
  g_test_add_func ("/buffer/close/unknown-flags", test_close_unknown_flags);
  g_test_add_func ("/buffer/closed", test_closed_buffer);
  g_test_add_func ("/buffer/holds-resource", test_buffer_holds_resource);
  g_test_add_func ("/buffer/ref", test_ref_keeps_buffer);
  g_test_add_func ("/buffer/resource-ref-again", test_ref_again_through_buffer);
  g_test_add_func ("/buffer/unref/close-failure", test_unref_close_failure);
  g_test_add_func ("/buffer/deallocation-stream", test_deallocation_stream);
  g_test_add_func ("/buffer/copy", test_copy);
  g_test_add_func ("/buffer/copy/size-mismatch", test_copy_size_mismatch);
  g_test_add_func ("/buffer/fill", test_fill);
  g_test_add_func ("/buffer/fill/invalid", test_fill_invalid);
  g_test_add_func ("/buffer/read-write", test_read_write);
  g_test_add_func ("/buffer/read-write/overlap", test_read_write_overlap);
  g_test_add_func ("/buffer/wrap/host", test_wrap_host_memory);
  g_test_add_func ("/buffer/wrap/device-without-driver", test_device_memory_without_driver);
  g_test_add_func ("/buffer/wrap/release-data", test_wrap_release_data);
  g_test_add_func ("/buffer/wrap/struct-recycled", test_wrap_struct_recycled);
  g_test_add_func ("/buffer/wrap/release-race", test_wrap_release_race);
  g_test_add_func ("/buffer/allocation-record", test_allocation_record);
  g_test_add_func ("/buffer/wrap/managed-no-driver", test_wrap_managed_no_driver);
  return g_test_run ();
}
