/* test-ipc-message.c: a buffer's IPC message, bytes plus fds, without the transport
 * (memres_buffer_export_message(), memres_buffer_import_message()) for both families: vmm with
 * handle_type=posix_fd (chunks), ipc and pinned with ipc=true (pools). One process: the message
 * is exported and imported back here (the real driver may refuse to import a pool into the
 * process that made it: that case skips). The forged messages run against the fake driver,
 * which counts every import, so that "refused before any driver call" is asserted. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define KiB 1024

/* The records' first fields as docs/ipc.md documents them (little-endian). */
enum
{
  M_MAGIC = 0,
  M_VERSION = 4,
  M_LENGTH = 6,
  LAYOUT_HEADER = 88,
  POOL_MESSAGE = 240,
};

static MemresResource *
vmm_exporter (void)
{
  g_autofree char *spec = g_strdup_printf ("vmm:handle_type=posix_fd,chunk=%" G_GSIZE_FORMAT,
                                           mt_device_granularity ());

  return mt_new_ok (spec);
}

/* A vmm buffer of three chunks (one granule each) holding the pattern of @seed. */
static MemresBuffer *
three_chunks (MemresResource *mr, guint32 seed)
{
  GError *error = NULL;
  MemresBuffer *buf = mt_alloc_ok (mr, mt_device_granularity (), NULL);

  g_assert_true (memres_buffer_resize (buf, 3 * mt_device_granularity (), NULL, &error));
  g_assert_no_error (error);
  mt_write_pattern (buf, 0, 3 * mt_device_granularity (), seed, NULL);
  return buf;
}

static gboolean
fd_is_open (int fd)
{
  return fcntl (fd, F_GETFD) != -1;
}

static void
export_ok (MemresBuffer *buf, MtMessage *m)
{
  GError *error = NULL;

  g_assert_true (mt_message_export (buf, m, &error));
  g_assert_no_error (error);
  g_assert_nonnull (m->bytes);
  g_assert_nonnull (m->fds);
  for (guint i = 0; i < m->n_fds; i++)
    g_assert_true (fd_is_open (m->fds[i]));
}

/* The first bytes of @m: its magic, version and length as the family's record has them. */
static void
assert_framing (const MtMessage *m, const char *magic, gsize length)
{
  gsize len;
  const guint8 *b = g_bytes_get_data (m->bytes, &len);

  g_assert_cmpuint (len, ==, length);
  g_assert_cmpmem (b + M_MAGIC, 4, magic, 4);
  g_assert_cmpuint (mt_get_le (b + M_VERSION, 2), ==, 1);
  g_assert_cmpuint (mt_get_le (b + M_LENGTH, 2), ==, length);
}

/* The message memres_ipc_send_buffer() puts on a seqpacket socket: its bytes, and how many fds
 * came with them (closed here). */
static GBytes *
sent_bytes (MemresBuffer *buf, int *n_fds)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * MEMRES_IPC_MAX_CHUNKS) + CMSG_SPACE (64)];
    struct cmsghdr align;
  } control;
  guint8 bytes[LAYOUT_HEADER + 8 * MEMRES_IPC_MAX_CHUNKS];
  struct iovec iov = { bytes, sizeof bytes };
  struct msghdr msg = { 0 };
  GError *error = NULL;
  gssize n;
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_true (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_no_error (error);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  n = recvmsg (sv[1], &msg, MSG_CMSG_CLOEXEC);
  g_assert_cmpint (n, >, 0);
  *n_fds = 0;
  for (struct cmsghdr *h = CMSG_FIRSTHDR (&msg); h != NULL; h = CMSG_NXTHDR (&msg, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
      {
        int got = (int) ((h->cmsg_len - CMSG_LEN (0)) / sizeof (int));
        int fds[MEMRES_IPC_MAX_CHUNKS];

        memcpy (fds, CMSG_DATA (h), sizeof (int) * got);
        for (int i = 0; i < got; i++)
          close (fds[i]);
        *n_fds += got;
      }
  close (sv[0]);
  close (sv[1]);
  return g_bytes_new (bytes, (gsize) n);
}

/* ---- round trips --------------------------------------------------------------------------- */

/* A vmm buffer of three chunks: its layout record and three fds; imported (twice, from the same
 * message: the fds stay the caller's) the bytes written before the export read back. */
static void
test_vmm_roundtrip (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf, *got, *again;
  FakeCudaCounts base;
  GError *error = NULL;
  MtMessage m;
  GBytes *sent;
  int fds, n_sent;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = vmm_exporter ();
  importer = mt_new_ok ("vmm:handle_type=posix_fd");
  buf = three_chunks (mr, 41);
  fds = mt_count_open_fds ();

  export_ok (buf, &m);
  g_assert_cmpuint (m.n_fds, ==, 3);
  assert_framing (&m, "MRCB", LAYOUT_HEADER + 3 * 8);
  g_assert_cmpint (mt_count_open_fds (), ==, fds + 3);

  got = mt_message_import (importer, &m, &error);
  g_assert_no_error (error);
  g_assert_nonnull (got);
  for (guint i = 0; i < m.n_fds; i++)
    g_assert_true (fd_is_open (m.fds[i])); /* borrowed, not taken */
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 3 * mt_device_granularity ());
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_buffer_get_resource (got) == importer);
  mt_check_pattern (got, 0, 3 * mt_device_granularity (), 41, NULL);
  /* the same message again: a mapping of its own, readable after the first one closed */
  again = mt_message_import (importer, &m, &error);
  g_assert_no_error (error);
  g_assert_true (again != got);
  mt_message_clear (&m);
  mt_close_ok (got, NULL);
  mt_check_pattern (again, 0, 3 * mt_device_granularity (), 41, NULL);
  mt_close_ok (again, NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  /* memres_ipc_send_buffer() sends these very bytes, with as many fds */
  export_ok (buf, &m);
  sent = sent_bytes (buf, &n_sent);
  g_assert_true (g_bytes_equal (sent, m.bytes));
  g_assert_cmpint (n_sent, ==, (int) m.n_fds);
  g_bytes_unref (sent);
  mt_message_clear (&m);

  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* A pool buffer of @spec: the MRPB record and the pool's fd; imported with a NULL importer (the
 * pool imported from the message) and into that pool again, the bytes read back. */
static void
pool_roundtrip (const char *spec)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *got, *again;
  MemresResource *pool;
  FakeCudaCounts base;
  GBytes *sent;
  MtMessage m;
  int fds, n_sent;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    {
      g_test_skip_printf ("%s: %s", spec, error->message);
      return;
    }
  g_assert_no_error (error);
  buf = mt_alloc_ok (mr, 256 * KiB, NULL);
  mt_write_pattern (buf, 0, 256 * KiB, 29, NULL);
  /* the real driver opens descriptors of its own at a process's first import: one first */
  if (!mt_driver_is_fake ())
    {
      export_ok (buf, &m);
      got = mt_message_import (NULL, &m, NULL);
      if (got != NULL)
        mt_close_ok (got, NULL);
      mt_message_clear (&m);
    }
  fds = mt_count_open_fds ();

  export_ok (buf, &m);
  g_assert_cmpuint (m.n_fds, ==, 1);
  assert_framing (&m, "MRPB", POOL_MESSAGE);
  got = mt_message_import (NULL, &m, &error);
  if (got == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      mt_message_clear (&m);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  g_assert_true (fd_is_open (m.fds[0])); /* borrowed, not taken */
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 256 * KiB);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  pool = memres_buffer_get_resource (got);
  g_assert_true (pool != mr);
  g_assert_cmpstr (memres_resource_get_kind_name (pool), ==, memres_resource_get_kind_name (mr));
  mt_check_pattern (got, 0, 256 * KiB, 29, NULL);
  /* into the pool imported before: the same resource */
  again = mt_message_import (pool, &m, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_resource (again) == pool);
  mt_check_pattern (again, 0, 256 * KiB, 29, NULL);
  /* an imported buffer is not exported again */
  {
    GBytes *bytes = NULL;
    gint *out = NULL;
    guint n = 7;

    g_assert_false (memres_buffer_export_message (got, &bytes, &out, &n, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    g_assert_null (bytes);
    g_assert_null (out);
    g_assert_cmpuint (n, ==, 7);
  }
  mt_message_clear (&m);
  mt_close_ok (again, NULL);
  mt_close_ok (got, NULL);

  /* memres_ipc_send_buffer() sends these very bytes, with one fd */
  export_ok (buf, &m);
  sent = sent_bytes (buf, &n_sent);
  g_assert_true (g_bytes_equal (sent, m.bytes));
  g_assert_cmpint (n_sent, ==, 1);
  g_bytes_unref (sent);
  mt_message_clear (&m);

  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_ipc_roundtrip (void)
{
  pool_roundtrip ("ipc");
}

static void
test_pinned_roundtrip (void)
{
  pool_roundtrip ("pinned:ipc=true");
}

/* ---- refusals ------------------------------------------------------------------------------ */

static long
imports_so_far (void)
{
  return mt_fake_call_count ("cuMemImportFromShareableHandle")
         + mt_fake_call_count ("cuMemPoolImportFromShareableHandle")
         + mt_fake_call_count ("cuMemPoolImportPointer");
}

/* memres_buffer_import_message() of @len bytes at @data with @n_fds fds at @fds fails with
 * @code before any driver import, and no fd is opened or closed (they stay the caller's). */
static void
expect_refused (MemresResource *importer, const guint8 *data, gsize len, const gint *fds,
                guint n_fds, gint code)
{
  GError *error = NULL;
  long imports = imports_so_far ();
  int before = mt_count_open_fds ();

  g_assert_null (memres_buffer_import_message (importer, data, len, fds, n_fds, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpint (imports_so_far (), ==, imports);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
}

/* Each forgery of the genuine message @m (for @importer) is refused with its code. */
static void
forge (MemresResource *importer, const MtMessage *m)
{
  gint fds[MEMRES_IPC_MAX_CHUNKS + 1];
  gsize len;
  const guint8 *genuine = g_bytes_get_data (m->bytes, &len);
  g_autofree guint8 *bad = g_memdup2 (genuine, len);
  int closed;

  /* truncated: one byte short, within the header, nothing at all */
  expect_refused (importer, genuine, len - 1, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (importer, genuine, 8, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (importer, NULL, 0, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  /* a forged length field: longer than the bytes, and shorter with the bytes cut to it */
  mt_put_le (bad + M_LENGTH, len + 8, 2);
  expect_refused (importer, bad, len, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  mt_put_le (bad + M_LENGTH, len - 8, 2);
  expect_refused (importer, bad, len - 8, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  mt_put_le (bad + M_LENGTH, 0xffff, 2);
  expect_refused (importer, bad, len, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  /* one fd too few, one too many, far too many */
  expect_refused (importer, genuine, len, m->fds, m->n_fds - 1, MEMRES_ERROR_INVALID_DESCRIPTOR);
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    fds[i] = m->fds[i % m->n_fds];
  expect_refused (importer, genuine, len, fds, m->n_fds + 1, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (importer, genuine, len, fds, G_N_ELEMENTS (fds), MEMRES_ERROR_INVALID_DESCRIPTOR);
  /* an fd that is not open: a caller's mistake */
  closed = dup (m->fds[0]);
  g_assert_cmpint (closed, >=, 0);
  close (closed);
  memcpy (fds, m->fds, sizeof (gint) * m->n_fds);
  fds[m->n_fds - 1] = closed;
  expect_refused (importer, genuine, len, fds, m->n_fds, MEMRES_ERROR_INVALID_ARGUMENT);
  fds[m->n_fds - 1] = -1;
  expect_refused (importer, genuine, len, fds, m->n_fds, MEMRES_ERROR_INVALID_ARGUMENT);
  /* another version */
  memcpy (bad, genuine, len);
  mt_put_le (bad + M_VERSION, 2, 2);
  expect_refused (importer, bad, len, m->fds, m->n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  for (guint i = 0; i < m->n_fds; i++)
    g_assert_true (fd_is_open (m->fds[i])); /* still the caller's, after every refusal */
}

static void
test_forged (void)
{
  g_autoptr (MemresResource) vmm = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) pool = NULL;
  MemresBuffer *vbuf, *pbuf, *got;
  FakeCudaCounts base;
  GError *error = NULL;
  MtMessage vm, pm;
  int fds;

  if (!mt_require_devices (1) || !mt_require_fake ("forged messages count the fake's imports"))
    return;
  mt_counts_snapshot (&base);
  vmm = vmm_exporter ();
  importer = mt_new_ok ("vmm:handle_type=posix_fd");
  pool = mt_new_ok ("ipc");
  vbuf = three_chunks (vmm, 5);
  pbuf = mt_alloc_ok (pool, 64 * KiB, NULL);
  mt_write_pattern (pbuf, 0, 64 * KiB, 6, NULL);
  fds = mt_count_open_fds ();
  export_ok (vbuf, &vm);
  export_ok (pbuf, &pm);

  forge (importer, &vm);
  forge (NULL, &pm);
  /* each family's own refusals: chunks into no importer, into a pool, a pool message into a
   * resource that is not that pool's import */
  {
    gsize len;
    const guint8 *b = g_bytes_get_data (vm.bytes, &len);

    expect_refused (NULL, b, len, vm.fds, vm.n_fds, MEMRES_ERROR_INVALID_ARGUMENT);
    expect_refused (pool, b, len, vm.fds, vm.n_fds, MEMRES_ERROR_NOT_SUPPORTED);
    b = g_bytes_get_data (pm.bytes, &len);
    expect_refused (importer, b, len, pm.fds, pm.n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
    expect_refused (pool, b, len, pm.fds, pm.n_fds, MEMRES_ERROR_INVALID_DESCRIPTOR);
  }

  /* A chunk size forged to another multiple of the granularity passes every check before the
   * driver (nothing tells an imported chunk's size): the driver refuses to map it, and the
   * import is rolled back (the fake's live handles, checked at the end, and the fds). */
  {
    gsize len;
    gconstpointer data = g_bytes_get_data (vm.bytes, &len);
    /* len is read only once the call above set it (the order of a call's arguments is not) */
    g_autofree guint8 *bad = g_memdup2 (data, len);
    int before = mt_count_open_fds ();

    mt_put_le (bad + LAYOUT_HEADER, 2 * mt_device_granularity (),
               8); /* chunk 0: two granules, one sent */
    g_assert_null (
        memres_buffer_import_message (importer, bad, len, vm.fds, vm.n_fds, NULL, &error));
    g_assert_nonnull (error);
    g_assert_true (error->domain == MEMRES_CUDA_ERROR);
    g_assert_nonnull (strstr (error->message, "cuMemMap"));
    g_clear_error (&error);
    /* a total no address space holds: the reservation runs out of memory */
    mt_put_le (bad + LAYOUT_HEADER,
               (G_GUINT64_CONSTANT (1) << 62) / mt_device_granularity () * mt_device_granularity (),
               8);
    g_assert_null (
        memres_buffer_import_message (importer, bad, len, vm.fds, vm.n_fds, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, "cuMemAddressReserve"));
    g_clear_error (&error);
    g_assert_cmpint (mt_count_open_fds (), ==, before);
  }

  /* the control: after every refusal the genuine messages still import */
  got = mt_message_import (importer, &vm, &error);
  g_assert_no_error (error);
  mt_check_pattern (got, 0, 3 * mt_device_granularity (), 5, NULL);
  mt_close_ok (got, NULL);
  got = mt_message_import (NULL, &pm, &error);
  g_assert_no_error (error);
  mt_check_pattern (got, 0, 64 * KiB, 6, NULL);
  mt_close_ok (got, NULL);

  mt_message_clear (&vm);
  mt_message_clear (&pm);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (vbuf, NULL);
  mt_close_ok (pbuf, NULL);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&vmm, memres_resource_unref);
  g_clear_pointer (&pool, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* What cannot be exported as a message: refused with its code, the out arguments untouched,
 * no fd left open. */
static void
expect_export_refused (MemresBuffer *buf, gint code)
{
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 99;
  GError *error = NULL;
  int before = mt_count_open_fds ();

  g_assert_false (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_clear_error (&error);
  g_assert_null (bytes);
  g_assert_null (fds);
  g_assert_cmpuint (n_fds, ==, 99);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
}

static void
test_export_refused (void)
{
  const char *const refused[] = { "dmr", "pinned", "vmm", "host" };
  guint8 host[64];
  MemresBuffer *buf;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (refused[i]);

      buf = mt_alloc_ok (mr, mt_device_granularity (), NULL);
      expect_export_refused (buf, MEMRES_ERROR_NOT_SUPPORTED);
      memres_buffer_ref (buf);
      mt_close_ok (buf, NULL);
      /* a closed buffer */
      expect_export_refused (buf, MEMRES_ERROR_CLOSED);
      memres_buffer_unref (buf);
    }
  {
    GError *error = NULL;

    buf = memres_buffer_new_for_pointer (host, sizeof host, -1, MEMRES_MEMORY_HOST_ACCESSIBLE, NULL,
                                         NULL, &error);
    g_assert_no_error (error);
  }
  expect_export_refused (buf, MEMRES_ERROR_NOT_SUPPORTED);
  memres_buffer_unref (buf);
  mt_assert_fake_counts_equal (&base);
}

/* memres_buffer_export() of a buffer shared by chunks, and memres_resource_export_handle() of
 * its resource (no pool handle): NOT_SUPPORTED, naming the calls that share it, with no driver
 * call and no fd left open. */
static void
test_export_chunked (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBufferDescriptor desc;
  const char *const specs[] = { "vmm:handle_type=posix_fd", "stats>vmm:handle_type=posix_fd" };
  GError *error = NULL;
  MemresBuffer *buf;
  long exports;
  int fds;

  if (!mt_require_devices (1) || !mt_require_fake ("the export count is the fake's"))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      mr = mt_new_ok (specs[i]);
      buf = mt_alloc_ok (mr, mt_device_granularity (), NULL);
      fds = mt_count_open_fds ();
      exports = mt_fake_call_count ("cuMemExportToShareableHandle");
      g_assert_false (memres_buffer_export (buf, &desc, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_assert_nonnull (strstr (error->message, "memres_buffer_export_message()"));
      g_assert_nonnull (strstr (error->message, "memres_ipc_send_buffer()"));
      g_clear_error (&error);
      g_assert_null (memres_resource_export_handle (mr, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_assert_cmpstr (error->message, ==,
                       "resources of kind \"vmm\" have no pool handle to share: their buffers are "
                       "shared whole, as their physical chunks (one file descriptor each): send a "
                       "buffer with memres_ipc_send_buffer(), or make its message with "
                       "memres_buffer_export_message() (docs/ipc.md)");
      g_clear_error (&error);
      g_assert_cmpint (mt_fake_call_count ("cuMemExportToShareableHandle"), ==, exports);
      g_assert_cmpint (mt_count_open_fds (), ==, fds);
      mt_close_ok (buf, NULL);
      g_clear_pointer (&mr, memres_resource_unref);
    }
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/ipc-message/vmm/roundtrip", test_vmm_roundtrip);
  g_test_add_func ("/ipc-message/ipc/roundtrip", test_ipc_roundtrip);
  g_test_add_func ("/ipc-message/pinned/roundtrip", test_pinned_roundtrip);
  g_test_add_func ("/ipc-message/forged", test_forged);
  g_test_add_func ("/ipc-message/export-refused", test_export_refused);
  g_test_add_func ("/ipc-message/export-chunked", test_export_chunked);
  return g_test_run ();
}
