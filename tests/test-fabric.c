/* test-fabric.c: fabric handles (CU_MEM_HANDLE_TYPE_FABRIC, docs/distributed.md): the probe a
 * `vmm` resource with handle_type=fabric makes at creation, what it reports
 * (MEMRES_MEMORY_FABRIC_HANDLES), the error naming the missing IMEX channel where the driver
 * refuses (CUDA_ERROR_NOT_PERMITTED), fabric_fallback=posix_fd; a buffer shared by fabric bytes
 * (memres_buffer_export_message() with no fd), forged, truncated and freed handles refused. The
 * fake driver grants fabric handles and refuses them when told (a failed call); the real one
 * decides for itself (the H200 machine, without an IMEX channel, refuses: the cases hold to
 * whichever it does). */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

/* The error of a driver that refuses fabric handles: the driver's code, and words that say what
 * is missing and what to do. */
static void
assert_refused (const GError *error)
{
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED);
  g_assert_nonnull (strstr (error->message, "IMEX channel"));
  g_assert_nonnull (strstr (error->message, "fabric_fallback=posix_fd"));
}

/* A buffer of @mr written and read back: the memory works whichever handle type it has. */
static void
use (MemresResource *mr)
{
  MemresBuffer *buf = mt_alloc_ok (mr, 2 * mt_device_granularity (), NULL);

  mt_write_pattern (buf, 0, 2 * mt_device_granularity (), 7, NULL);
  mt_check_pattern (buf, 0, 2 * mt_device_granularity (), 7, NULL);
  mt_close_ok (buf, NULL);
}

/* handle_type=fabric where the driver grants it: the flag says so; where it refuses, the error
 * names the IMEX channel (the real driver decides which). */
static void
test_probe (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_fake_counts_begin (&base);
  mr = memres_resource_new ("vmm:handle_type=fabric", &error);
  if (mr == NULL)
    {
      g_test_message ("the driver refuses fabric handles: %s", error->message);
      assert_refused (error);
      g_assert_false (mt_driver_is_fake ()); /* the fake grants them unless told */
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_resource_get_flags (mr) & MEMRES_MEMORY_FABRIC_HANDLES, ==,
                    MEMRES_MEMORY_FABRIC_HANDLES);
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  use (mr);
  g_clear_pointer (&mr, memres_resource_unref);
  if (mt_driver_is_fake ())
    mt_assert_fake_counts_equal (&base); /* the probe's granule was released */
}

/* The fake refuses as the H200 does (cuMemCreate of a fabric handle: CUDA_ERROR_NOT_PERMITTED),
 * or refuses the export alone: creation fails naming the IMEX channel, nothing left behind. */
static void
test_refused (void)
{
  const char *calls[] = { "cuMemCreate", "cuMemExportToShareableHandle" };
  FakeCudaCounts base;

  if (!mt_require_fake ("tells the driver to refuse fabric handles"))
    return;
  mt_fake_counts_begin (&base);
  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = NULL;

      mt_fake_fail_call (calls[i], 1, CUDA_ERROR_NOT_PERMITTED);
      mr = memres_resource_new ("vmm:handle_type=fabric,fabric_fallback=fail", &error);
      g_assert_null (mr);
      assert_refused (error);
      g_assert_nonnull (strstr (error->message, calls[i]));
      mt_fake_reset_faults ();
    }
  /* another failure of the probe is the driver's error, with no fallback */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (MemresResource) mr = NULL;

    mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    mr = memres_resource_new ("vmm:handle_type=fabric,fabric_fallback=posix_fd", &error);
    g_assert_null (mr);
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, "probing fabric handles"));
    mt_fake_reset_faults ();
  }
  mt_assert_fake_counts_equal (&base);
}

/* fabric_fallback=posix_fd where fabric is refused: a resource of POSIX-fd handles, which says
 * so (ipc-enabled, no fabric flag) and shares its buffers as one message with fds. On the real
 * driver, where fabric is granted, the resource is a fabric one. */
static void
test_fallback (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *spec = NULL;
  MemresBuffer *buf;
  GBytes *bytes;
  gint *fds;
  guint n_fds;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_fake_counts_begin (&base);
  if (mt_driver_is_fake ())
    mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_NOT_PERMITTED);
  spec = g_strdup_printf ("vmm:handle_type=fabric,fabric_fallback=posix_fd,chunk=%" G_GSIZE_FORMAT,
                          mt_device_granularity ());
  mr = mt_new_ok (spec);
  if (memres_resource_get_flags (mr) & MEMRES_MEMORY_FABRIC_HANDLES)
    {
      g_assert_false (mt_driver_is_fake ());
      g_test_message ("the driver grants fabric handles: no fallback to test here");
      use (mr);
      return;
    }
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  use (mr);
  buf = mt_alloc_ok (mr, 2 * mt_device_granularity (), NULL);
  g_assert_true (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_fds, ==, 2); /* one POSIX fd per chunk */
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_free (fds);
  g_bytes_unref (bytes);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  if (mt_driver_is_fake ())
    {
      mt_fake_reset_faults ();
      mt_assert_fake_counts_equal (&base);
    }
}

/* A fabric vmm resource with chunks of one granule, or NULL (the test skipped) where the driver
 * refuses fabric handles. */
static MemresResource *
fabric_or_skip (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *spec = NULL;
  MemresResource *mr;

  if (!mt_require_devices (1))
    return NULL;
  spec
      = g_strdup_printf ("vmm:handle_type=fabric,chunk=%" G_GSIZE_FORMAT, mt_device_granularity ());
  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    {
      assert_refused (error);
      g_test_skip ("the driver refuses fabric handles (no IMEX channel)");
    }
  return mr;
}

typedef struct
{
  guint8 *data;
  gsize length;
} Bytes;

/* @buf's message: bytes only, the layout record then one fabric handle per chunk. */
static Bytes
export_fabric (MemresBuffer *buf, guint n_chunks)
{
  g_autoptr (GError) error = NULL;
  GBytes *bytes = NULL;
  gint *fds = (gint *) 1;
  guint n_fds = 99;
  Bytes b;

  g_assert_true (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_fds, ==, 0);
  g_assert_null (fds);
  b.data = g_bytes_unref_to_data (bytes, &b.length);
  g_assert_cmpuint (b.length, ==, 88 + 8 * n_chunks + 64 * n_chunks);
  g_assert_cmpuint (mt_get_le (b.data + 56, 4), ==, CU_MEM_HANDLE_TYPE_FABRIC);
  return b;
}

static void
import_fails (MemresResource *importer, const guint8 *data, gsize length, const gint *fds,
              guint n_fds, GQuark domain, gint code)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *got
      = memres_buffer_import_message (importer, data, length, fds, n_fds, NULL, &error);

  g_assert_null (got);
  if (code == -1) /* the real driver's code for bytes it does not know is its own */
    g_assert_true (error != NULL && error->domain == domain);
  else
    g_assert_error (error, domain, code);
  g_test_message ("refused: %s", error->message);
}

/* A buffer of three chunks shared by fabric bytes (in this process: the fake serves its own
 * handles; the real driver with an IMEX channel too) reads the same bytes. */
static void
test_roundtrip (void)
{
  g_autoptr (MemresResource) mr = fabric_or_skip ();
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *got;
  Bytes b;

  if (mr == NULL)
    return;
  importer = fabric_or_skip ();
  buf = mt_alloc_ok (mr, 3 * mt_device_granularity (), NULL);
  mt_write_pattern (buf, 0, 3 * mt_device_granularity (), 21, NULL);
  mt_sync_ok (NULL);
  b = export_fabric (buf, 3);
  got = memres_buffer_import_message (importer, b.data, b.length, NULL, 0, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 3 * mt_device_granularity ());
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  mt_check_pattern (got, 0, 3 * mt_device_granularity (), 21, NULL);
  mt_close_ok (got, NULL);
  mt_close_ok (buf, NULL);
  g_free (b.data);
}

/* memres_ipc_send_buffer() sends a fabric buffer as bytes with no fd (and its credentials);
 * memres_ipc_receive_buffer() maps it. */
static void
test_socket (void)
{
  g_autoptr (MemresResource) mr = fabric_or_skip ();
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *got;
  int sv[2];
  int fds_before;

  if (mr == NULL)
    return;
  importer = fabric_or_skip ();
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==, 0);
  buf = mt_alloc_ok (mr, 2 * mt_device_granularity (), NULL);
  mt_write_pattern (buf, 0, 2 * mt_device_granularity (), 31, NULL);
  mt_sync_ok (NULL);
  fds_before = mt_count_open_fds ();
  g_assert_true (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_no_error (error);
  g_assert_cmpint (mt_count_open_fds (), ==, fds_before); /* none made */
  got = memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, &error);
  g_assert_no_error (error);
  mt_check_pattern (got, 0, 2 * mt_device_granularity (), 31, NULL);
  mt_close_ok (got, NULL);
  mt_close_ok (buf, NULL);
  close (sv[0]);
  close (sv[1]);
}

/* Forged and truncated fabric messages are refused as strictly as POSIX-fd ones, before any
 * driver call (the fake counts imports); forged handle bytes are the driver's to refuse, and
 * nothing stays imported. */
static void
test_forged (void)
{
  g_autoptr (MemresResource) mr = fabric_or_skip ();
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) posix = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  long imports;
  gint fd;
  Bytes b;

  if (mr == NULL)
    return;
  importer = fabric_or_skip ();
  posix = mt_new_ok ("vmm:handle_type=posix_fd");
  buf = mt_alloc_ok (mr, 2 * mt_device_granularity (), NULL);
  b = export_fabric (buf, 2);
  mt_fake_counts_begin (&base);
  imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemImportFromShareableHandle") : 0;

  /* cut short by one byte, by a whole handle, and one byte too long */
  import_fails (importer, b.data, b.length - 1, NULL, 0, MEMRES_ERROR,
                MEMRES_ERROR_INVALID_DESCRIPTOR);
  import_fails (importer, b.data, b.length - 64, NULL, 0, MEMRES_ERROR,
                MEMRES_ERROR_INVALID_DESCRIPTOR);
  {
    g_autofree guint8 *longer = g_malloc0 (b.length + 1);

    memcpy (longer, b.data, b.length);
    import_fails (importer, longer, b.length + 1, NULL, 0, MEMRES_ERROR,
                  MEMRES_ERROR_INVALID_DESCRIPTOR);
  }
  /* an fd with a message of fabric handles */
  fd = dup (1);
  import_fails (importer, b.data, b.length, &fd, 1, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  close (fd);
  /* the version, the chunk count, the handle type changed (to POSIX fds: the length no longer
   * matches), a handle type that is neither */
  {
    const struct
    {
      gsize offset;
      int width;
      guint64 value;
    } forgeries[] = {
      { 4, 2, 2 }, { 80, 4, 3 }, { 80, 4, 0 }, { 80, 4, 65 }, { 56, 4, 1 }, { 56, 4, 4 },
    };

    for (guint i = 0; i < G_N_ELEMENTS (forgeries); i++)
      {
        g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

        mt_put_le (forged + forgeries[i].offset, forgeries[i].value, forgeries[i].width);
        import_fails (importer, forged, b.length, NULL, 0, MEMRES_ERROR,
                      MEMRES_ERROR_INVALID_DESCRIPTOR);
      }
  }
  /* a POSIX-fd importer refuses fabric handles, before any driver call */
  import_fails (posix, b.data, b.length, NULL, 0, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemImportFromShareableHandle"), ==, imports);

  /* handle bytes the driver does not know: its error, nothing imported */
  {
    g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

    forged[88 + 2 * 8 + 64 + 3] ^= 0x55; /* the second handle */
    import_fails (importer, forged, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                  mt_driver_is_fake () ? CUDA_ERROR_INVALID_VALUE : -1);
  }
  mt_assert_fake_counts_equal (&base);
  mt_close_ok (buf, NULL);
  g_free (b.data);
}

/* A handle whose memory was freed (the export closed) is refused. */
static void
test_closed (void)
{
  g_autoptr (MemresResource) mr = fabric_or_skip ();
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf;
  Bytes b;

  if (mr == NULL)
    return;
  importer = fabric_or_skip ();
  buf = mt_alloc_ok (mr, mt_device_granularity (), NULL);
  b = export_fabric (buf, 1);
  mt_close_ok (buf, NULL); /* vmm releases the physical memory at close */
  import_fails (importer, b.data, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                mt_driver_is_fake () ? CUDA_ERROR_INVALID_VALUE : -1);
  g_free (b.data);
}

/* Bad option values and combinations, refused before any driver call. */
static void
test_options (void)
{
  mt_new_fails ("vmm:handle_type=fabric,fabric_fallback=maybe", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "fabric_fallback");
  if (!mt_require_devices (1))
    return;
  mt_new_fails ("vmm:location=host,handle_type=fabric", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "handle_type");
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/fabric/vmm/probe", test_probe);
  g_test_add_func ("/fabric/vmm/refused", test_refused);
  g_test_add_func ("/fabric/vmm/fallback", test_fallback);
  g_test_add_func ("/fabric/vmm/options", test_options);
  g_test_add_func ("/fabric/vmm/roundtrip", test_roundtrip);
  g_test_add_func ("/fabric/vmm/socket", test_socket);
  g_test_add_func ("/fabric/vmm/forged", test_forged);
  g_test_add_func ("/fabric/vmm/closed", test_closed);
  return g_test_run ();
}
