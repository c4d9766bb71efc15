/* test-fabric.c: fabric handles (CU_MEM_HANDLE_TYPE_FABRIC, docs/distributed.md) for the three
 * kinds that offer them, `vmm`, `arena` (its exportable buffers) and `ipc` (its pool): the probe
 * each makes at creation (plugins/common/fabric.h), what it reports
 * (MEMRES_MEMORY_FABRIC_HANDLES), the error naming the missing IMEX channel where the driver
 * refuses (CUDA_ERROR_NOT_PERMITTED), fabric_fallback=posix_fd; a buffer shared by fabric bytes
 * (memres_buffer_export_message() with no fd), forged, truncated and closed handles refused,
 * every driver call of creation and of a round trip failed in turn. The fake driver grants
 * fabric handles and refuses them where told (FAKECUDA_NO_IMEX, or a failed call); the real one
 * decides for itself (the H200 machine, without an IMEX channel, refuses: the cases hold to
 * whichever it does). */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

/* One kind with handle_type=fabric: its spec (%s: the granularity, for vmm's chunk), the bytes of
 * the buffer the round trips share, the length of that buffer's message, the call the driver
 * refuses without an IMEX channel (the H200 refuses vmm's cuMemCreate and the pool's export). */
typedef struct
{
  const char *name;
  const char *spec;
  guint granules;
  guint chunks; /* of the buffer's message; 0 for a pool buffer */
  const char *refused_call;
  gboolean pool;
} FabricKind;

static const FabricKind kinds[] = {
  /* three chunks of one granule */
  { "vmm", "vmm:handle_type=fabric,chunk=%" G_GSIZE_FORMAT, 3, 3, "cuMemCreate", FALSE },
  /* an exportable buffer (above max_block) is one chunk */
  { "arena", "arena:handle_type=fabric", 2, 1, "cuMemCreate", FALSE },
  /* a granule of fabric memory is probed before the pool is created */
  { "ipc", "ipc:handle_type=fabric", 3, 0, "cuMemCreate", TRUE },
};

/* The length of @kind's buffer message: the layout record, 8 bytes a chunk and 64 a handle; a
 * pool buffer's: MRPB version 2, its header, the handle record, the descriptor, the pool's
 * fabric handle. */
static gsize
message_length (const FabricKind *kind)
{
  return kind->pool ? 8 + 72 + 160 + 64 : 88 + kind->chunks * (8 + 64);
}

/* @kind's spec with @extra options appended (may be ""). */
static char *
kind_spec (const FabricKind *kind, const char *extra)
{
  g_autofree char *spec = g_strdup_printf (kind->spec, mt_device_granularity ());

  return g_strconcat (spec, extra, NULL);
}

/* The error of a driver that refuses fabric handles: the driver's code, and words that say what
 * is missing and what to do. */
static void
assert_refused (const GError *error)
{
  g_test_message ("refused: %s", error->message);
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
test_probe (gconstpointer data)
{
  const FabricKind *kind = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *spec = NULL;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  spec = kind_spec (kind, "");
  mt_fake_counts_begin (&base);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    {
      g_test_message ("the driver refuses fabric handles: %s", error->message);
      assert_refused (error);
      g_assert_nonnull (strstr (error->message, kind->refused_call));
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

/* The fake refuses as the H200 does (FAKECUDA_NO_IMEX: vmm's and arena's cuMemCreate of a fabric
 * handle, ipc's probe granule: CUDA_ERROR_NOT_PERMITTED), or refuses the export alone: creation
 * fails naming the IMEX channel and the call, nothing left behind. */
static void
test_refused (gconstpointer data)
{
  const FabricKind *kind = data;
  /* a pool kind: its probe's granule, then the pool's creation and its export */
  const char *calls[]
      = { kind->refused_call, kind->pool ? "cuMemPoolCreate" : "cuMemExportToShareableHandle",
          kind->pool ? "cuMemPoolExportToShareableHandle" : NULL };
  g_autofree char *spec = NULL;
  FakeCudaCounts base;

  if (!mt_require_fake ("tells the driver to refuse fabric handles"))
    return;
  spec = kind_spec (kind, ",fabric_fallback=fail");
  mt_fake_counts_begin (&base);
  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    for (guint by_env = 0; by_env < 2; by_env++)
      {
        g_autoptr (GError) error = NULL;
        g_autoptr (MemresResource) mr = NULL;

        if (calls[i] == NULL || (by_env && i > 0))
          continue; /* the environment refuses the first call */
        if (by_env)
          g_setenv ("FAKECUDA_NO_IMEX", "1", TRUE);
        else
          mt_fake_fail_call (calls[i], 1, CUDA_ERROR_NOT_PERMITTED);
        mr = memres_resource_new (spec, &error);
        g_unsetenv ("FAKECUDA_NO_IMEX");
        mt_fake_reset_faults ();
        g_assert_null (mr);
        assert_refused (error);
        g_assert_nonnull (strstr (error->message, calls[i]));
        g_assert_true (g_str_has_prefix (error->message, kind->name));
      }
  /* another failure of the probe is the driver's error, with no fallback */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (MemresResource) mr = NULL;
    g_autofree char *fallback = kind_spec (kind, ",fabric_fallback=posix_fd");

    mt_fake_fail_call (kind->refused_call, 1, CUDA_ERROR_OUT_OF_MEMORY);
    mr = memres_resource_new (fallback, &error);
    mt_fake_reset_faults ();
    g_assert_null (mr);
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, kind->refused_call));
  }
  mt_assert_fake_counts_equal (&base);
}

/* fabric_fallback=posix_fd where fabric is refused (FAKECUDA_NO_IMEX): a resource of POSIX-fd
 * handles, which says so (ipc-enabled, no fabric flag) and shares its buffers as one message
 * with fds. On the real driver, where fabric is granted, the resource is a fabric one. */
static void
test_fallback (gconstpointer data)
{
  const FabricKind *kind = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *spec = NULL;
  MemresBuffer *buf;
  MtMessage m;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_fake_counts_begin (&base);
  spec = kind_spec (kind, ",fabric_fallback=posix_fd");
  if (mt_driver_is_fake ())
    g_setenv ("FAKECUDA_NO_IMEX", "1", TRUE);
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
  buf = mt_alloc_ok (mr, kind->granules * mt_device_granularity (), NULL);
  g_assert_true (mt_message_export (buf, &m, &error));
  g_assert_no_error (error);
  /* one POSIX fd per chunk, or the pool's */
  g_assert_cmpuint (m.n_fds, ==, kind->pool ? 1 : kind->chunks);
  mt_message_clear (&m);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  g_unsetenv ("FAKECUDA_NO_IMEX");
  if (mt_driver_is_fake ())
    mt_assert_fake_counts_equal (&base);
}

/* A resource of @kind, or NULL (the test skipped) where the driver refuses fabric handles. */
static MemresResource *
kind_or_skip (const FabricKind *kind)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *spec = NULL;
  MemresResource *mr;

  if (!mt_require_devices (1))
    return NULL;
  spec = kind_spec (kind, "");
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

/* @buf's message, of a resource of @kind: bytes only (a layout record then one fabric handle per
 * chunk, or a pool message of version 2). */
static Bytes
export_fabric (const FabricKind *kind, MemresBuffer *buf)
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
  g_assert_cmpuint (b.length, ==, message_length (kind));
  if (kind->pool)
    g_assert_cmpuint (mt_get_le (b.data + 4, 2), ==, 2); /* MRPB version 2 */
  else
    g_assert_cmpuint (mt_get_le (b.data + 56, 4), ==, CU_MEM_HANDLE_TYPE_FABRIC);
  return b;
}

/* @value (@width bytes, little-endian) written at @offset of @forged, a copy of @b's message; where
 * the message held that value already (a random pool identity's byte is 0xff once in 256 runs),
 * the byte is flipped instead, so that the forgery always changes the message. */
static void
forge (guint8 *forged, Bytes b, gsize offset, guint64 value, int width)
{
  mt_put_le (forged + offset, value, width);
  if (memcmp (forged, b.data, b.length) == 0)
    forged[offset] ^= 0x55;
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

/* A message of fabric bytes @b refused by @importer (NULL: a pool's own import) when cut short
 * by one byte, by 64 bytes (a whole fabric handle or record), one byte too long, and with @fd
 * beside it (a message of fabric handles carries none). */
static void
import_fails_reshaped (MemresResource *importer, Bytes b, gint fd)
{
  g_autofree guint8 *longer = g_malloc0 (b.length + 1);

  import_fails (importer, b.data, b.length - 1, NULL, 0, MEMRES_ERROR,
                MEMRES_ERROR_INVALID_DESCRIPTOR);
  import_fails (importer, b.data, b.length - 64, NULL, 0, MEMRES_ERROR,
                MEMRES_ERROR_INVALID_DESCRIPTOR);
  memcpy (longer, b.data, b.length);
  import_fails (importer, longer, b.length + 1, NULL, 0, MEMRES_ERROR,
                MEMRES_ERROR_INVALID_DESCRIPTOR);
  import_fails (importer, b.data, b.length, &fd, 1, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

/* A buffer shared by fabric bytes (in this process: the fake serves its own handles; the real
 * driver with an IMEX channel too) reads the same bytes: through a second resource of the kind,
 * or for a pool through the pool imported from the message (NULL importer), which shares by
 * fabric bytes too. */
static void
test_roundtrip (gconstpointer data)
{
  const FabricKind *kind = data;
  g_autoptr (MemresResource) mr = kind_or_skip (kind);
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *got;
  gsize size;
  Bytes b;

  if (mr == NULL)
    return;
  size = kind->granules * mt_device_granularity ();
  if (!kind->pool)
    importer = kind_or_skip (kind);
  buf = mt_alloc_ok (mr, size, NULL);
  mt_write_pattern (buf, 0, size, 21, NULL);
  mt_sync_ok (NULL);
  b = export_fabric (kind, buf);
  got = memres_buffer_import_message (importer, b.data, b.length, NULL, 0, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, size);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  mt_check_pattern (got, 0, size, 21, NULL);
  if (kind->pool)
    {
      MemresResource *pool = memres_buffer_get_resource (got);
      MemresBuffer *again;

      g_assert_true (memres_resource_get_flags (pool) & MEMRES_MEMORY_FABRIC_HANDLES);
      /* a pool of fabric handles has no fd to export, here or there */
      for (guint i = 0; i < 2; i++)
        {
          g_assert_null (memres_resource_export_handle (i == 0 ? mr : pool, &error));
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
          g_assert_nonnull (strstr (error->message, "memres_buffer_export_message"));
          g_clear_error (&error);
        }
      /* the imported pool imports the next message itself; the importer writes, the exporter
       * reads */
      again = memres_buffer_import_message (pool, b.data, b.length, NULL, 0, NULL, &error);
      g_assert_no_error (error);
      mt_write_pattern (again, 0, size, 22, NULL);
      mt_sync_ok (NULL);
      mt_check_pattern (buf, 0, size, 22, NULL);
      mt_close_ok (again, NULL);
    }
  mt_close_ok (got, NULL);
  mt_close_ok (buf, NULL);
  g_free (b.data);
}

/* memres_ipc_send_buffer() sends a fabric buffer as bytes with no fd (and its credentials);
 * memres_ipc_receive_buffer() maps it. */
static void
test_socket (void)
{
  g_autoptr (MemresResource) mr = kind_or_skip (&kinds[0]);
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *got;
  int sv[2];
  int fds_before;

  if (mr == NULL)
    return;
  importer = kind_or_skip (&kinds[0]);
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
  g_autoptr (MemresResource) mr = kind_or_skip (&kinds[0]);
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) posix = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  long imports;
  gint fd;
  Bytes b;

  if (mr == NULL)
    return;
  importer = kind_or_skip (&kinds[0]);
  posix = mt_new_ok ("vmm:handle_type=posix_fd");
  buf = mt_alloc_ok (mr, 3 * mt_device_granularity (), NULL);
  b = export_fabric (&kinds[0], buf);
  mt_fake_counts_begin (&base);
  imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemImportFromShareableHandle") : 0;

  fd = dup (1);
  import_fails_reshaped (importer, b, fd);
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
      { 4, 2, 2 }, { 80, 4, 2 }, { 80, 4, 0 }, { 80, 4, 65 }, { 56, 4, 1 }, { 56, 4, 4 },
    };

    for (guint i = 0; i < G_N_ELEMENTS (forgeries); i++)
      {
        g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

        forge (forged, b, forgeries[i].offset, forgeries[i].value, forgeries[i].width);
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

    forged[88 + 3 * 8 + 64 + 3] ^= 0x55; /* the second handle */
    import_fails (importer, forged, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                  mt_driver_is_fake () ? CUDA_ERROR_INVALID_VALUE : -1);
  }
  /* the fake's handle names its process, memfd and inode (tests/fakecuda): the second handle
   * made to name another process (the parent: its fd of that number is another file, or none)
   * and then this process's fd 0, each with the right inode, is refused: a handle does not
   * reach another process's files, nor this one's other files; nothing imported */
  if (mt_driver_is_fake ())
    {
      g_autofree guint8 *forged = g_memdup2 (b.data, b.length);
      guint8 *second = forged + 88 + 3 * 8 + 64;

      mt_put_le (second + 8, (guint64) getppid (), 4);
      import_fails (importer, forged, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                    CUDA_ERROR_INVALID_VALUE);
      mt_put_le (second + 8, (guint64) getpid (), 4);
      mt_put_le (second + 12, 0, 4);
      import_fails (importer, forged, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                    CUDA_ERROR_INVALID_VALUE);
    }
  mt_assert_fake_counts_equal (&base);
  mt_close_ok (buf, NULL);
  g_free (b.data);
}

/* A handle whose export was closed is refused: vmm and arena release a buffer's physical memory
 * at its close, a pool is destroyed with its resource (and its last buffer). */
static void
test_closed (gconstpointer data)
{
  const FabricKind *kind = data;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  FakeCudaCounts base;
  MemresBuffer *buf;
  Bytes b;

  mt_fake_counts_begin (&base);
  mr = kind_or_skip (kind);
  if (mr == NULL)
    return;
  if (!kind->pool)
    importer = kind_or_skip (kind);
  buf = mt_alloc_ok (mr, kind->granules * mt_device_granularity (), NULL);
  b = export_fabric (kind, buf);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  if (kind->pool)
    g_clear_pointer (&mr, memres_resource_unref);
  import_fails (importer, b.data, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                mt_driver_is_fake () ? CUDA_ERROR_INVALID_VALUE : -1);
  if (mt_driver_is_fake () && kind->pool)
    mt_assert_fake_counts_equal (&base); /* the pool gone, nothing imported */
  g_free (b.data);
}

/* A pool buffer's fabric message forged or cut short is refused before any driver call, as
 * strictly as its POSIX-fd form (test-ipc-message.c): the length against the version, an fd
 * with it, the version, the records' order and identities; fabric bytes the driver does not
 * know are its error, nothing imported. */
static void
test_ipc_forged (void)
{
  const FabricKind *kind = &kinds[2];
  g_autoptr (MemresResource) mr = kind_or_skip (kind);
  MemresBuffer *buf;
  FakeCudaCounts base;
  long imports = 0;
  gint fd;
  Bytes b;

  if (mr == NULL)
    return;
  buf = mt_alloc_ok (mr, mt_device_granularity (), NULL);
  b = export_fabric (kind, buf);
  mt_fake_counts_begin (&base);
  if (mt_driver_is_fake ())
    imports = mt_fake_call_count ("cuMemPoolImportFromShareableHandle");

  fd = dup (1);
  import_fails_reshaped (NULL, b, fd);
  /* version 1 (a pool's fd expected) with its fd and the fabric bytes: the length is wrong */
  {
    g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

    mt_put_le (forged + 4, 1, 2);
    import_fails (NULL, forged, b.length, &fd, 1, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
    mt_put_le (forged + 6, 240, 2); /* and cut to version 1's length: no fd is no pool */
    import_fails (NULL, forged, 240, NULL, 0, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  }
  close (fd);
  {
    const struct
    {
      gsize offset;
      int width;
      guint64 value;
    } forgeries[] = {
      { 4, 2, 3 },         /* a version this library does not read */
      { 6, 2, 240 },       /* the length of version 1 */
      { 8, 4, 0 },         /* the handle record's magic */
      { 12, 2, 2 },        /* its version */
      { 16, 1, 'X' },      /* its kind, no kind name */
      { 8 + 40, 1, 0xff }, /* its pool identity, not the descriptor's */
      { 8 + 56, 1, 0xff }, /* its device UUID, not the descriptor's */
      { 80, 4, 0 },        /* the descriptor's magic */
      { 80 + 8, 1, 'v' },  /* the descriptor's kind, not the pool's */
    };

    for (guint i = 0; i < G_N_ELEMENTS (forgeries); i++)
      {
        g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

        forge (forged, b, forgeries[i].offset, forgeries[i].value, forgeries[i].width);
        import_fails (NULL, forged, b.length, NULL, 0, MEMRES_ERROR,
                      MEMRES_ERROR_INVALID_DESCRIPTOR);
      }
  }
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportFromShareableHandle"), ==, imports);

  /* fabric bytes the driver does not know: its error, nothing imported */
  {
    g_autofree guint8 *forged = g_memdup2 (b.data, b.length);

    forged[240 + 9] ^= 0x55;
    import_fails (NULL, forged, b.length, NULL, 0, MEMRES_CUDA_ERROR,
                  mt_driver_is_fake () ? CUDA_ERROR_INVALID_VALUE : -1);
  }
  mt_assert_fake_counts_equal (&base);
  mt_close_ok (buf, NULL);
  g_free (b.data);
}

/* The fault sweeps' operands: the kind, its spec, the exporter's buffer and what was imported. */
typedef struct
{
  const FabricKind *kind;
  char *spec;
  MemresResource *mr, *importer;
  MemresBuffer *buf, *got;
} SweepData;

static gboolean
op_new (gpointer data, GError **error)
{
  SweepData *d = data;

  d->mr = memres_resource_new (d->spec, error);
  return d->mr != NULL;
}

static void
undo_new (gpointer data)
{
  SweepData *d = data;

  g_clear_pointer (&d->mr, memres_resource_unref);
}

/* A round trip by fabric bytes: the buffer's message made and imported. */
static gboolean
op_roundtrip (gpointer data, GError **error)
{
  SweepData *d = data;
  MtMessage m;

  if (!mt_message_export (d->buf, &m, error))
    return FALSE;
  g_assert_cmpuint (m.n_fds, ==, 0);
  d->got = mt_message_import (d->importer, &m, error);
  mt_message_clear (&m);
  return d->got != NULL;
}

static void
undo_roundtrip (gpointer data)
{
  SweepData *d = data;

  mt_close_ok (g_steal_pointer (&d->got), NULL);
  mt_sync_ok (NULL);
}

/* Every driver call of a creation with handle_type=fabric (the probe's among them) and of a
 * round trip by fabric bytes failed in turn: the operation fails with that call's error and
 * leaves nothing behind (rolled back, nothing leaked), then succeeds. */
static void
test_faults (gconstpointer data)
{
  /* a failed release after the probe is a warning by design; a capture query is tolerated; the
   * arena halves a reservation the driver refuses and tries again */
  static const char *const ignore[]
      = { "cuMemRelease", "cuStreamIsCapturing", "cuMemAddressReserve#1", NULL };
  SweepData d = { data };

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  d.spec = kind_spec (d.kind, "");
  g_assert_cmpint (mt_fault_sweep ("create", op_new, undo_new, &d, 0, ignore), >=, 2);
  d.mr = mt_new_ok (d.spec);
  if (!d.kind->pool)
    d.importer = mt_new_ok (d.spec);
  d.buf = mt_alloc_ok (d.mr, d.kind->granules * mt_device_granularity (), NULL);
  g_assert_cmpint (mt_fault_sweep ("fabric round trip", op_roundtrip, undo_roundtrip, &d, 0, NULL),
                   >=, 2);
  mt_close_ok (g_steal_pointer (&d.buf), NULL);
  g_clear_pointer (&d.importer, memres_resource_unref);
  g_clear_pointer (&d.mr, memres_resource_unref);
  g_free (d.spec);
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
  for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      static const struct
      {
        const char *name;
        GTestDataFunc func;
      } cases[] = {
        { "probe", test_probe },         { "refused", test_refused }, { "fallback", test_fallback },
        { "roundtrip", test_roundtrip }, { "closed", test_closed },   { "faults", test_faults },
      };

      for (guint j = 0; j < G_N_ELEMENTS (cases); j++)
        {
          g_autofree char *path = g_strdup_printf ("/fabric/%s/%s", kinds[i].name, cases[j].name);

          g_test_add_data_func (path, &kinds[i], cases[j].func);
        }
    }
  g_test_add_func ("/fabric/vmm/options", test_options);
  g_test_add_func ("/fabric/vmm/socket", test_socket);
  g_test_add_func ("/fabric/vmm/forged", test_forged);
  g_test_add_func ("/fabric/ipc/forged", test_ipc_forged);
  return g_test_run ();
}
