/* test-ipc.c: the ipc kind in one process, against the fake driver (suite fake) and the real
 * one (suite gpu): creation, options, the same process, what an imported pool refuses, adaptors
 * that hide sharing, sending pool buffers. Imports and descriptors: test-ipc-import.c. Several
 * processes: tests/test-ipc-procs.c. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "descriptor-layout.h"
#include "testutil.h"
#include "testutil-ipc-kind.h"

static void
test_create (void)
{
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  MemresBuffer *buf;
  MemresStats stats;
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("ipc:device=0,max_size=64MiB,release_threshold=1MiB");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_cmpint (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED
                       | MEMRES_MEMORY_IPC_ENABLED);
  buf = alloc_pattern (mr, 1 * MiB, 3);
  assert_buffer_pattern (buf, 0, 1 * MiB, 3, 0);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.used_current, >=, 1 * MiB);
  g_assert_cmpuint (stats.n_buffers, ==, 1);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_options (void)
{
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  g_assert_null (memres_resource_new ("ipc:device=0,pool=new", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_resource_new ("ipc:device=0,max_size=0", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_resource_new ("ipc:device=4096", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
}

/* A device without POSIX-fd pool handles cannot make an ipc pool (fake: attribute set to 0). */
static void
test_no_posix_fd_support (void)
{
  FakeCudaCounts base;
  GError *error = NULL;

  if (!mt_require_fake ("needs the fake driver to hide POSIX file descriptor support"))
    return;
  mt_counts_snapshot (&base);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
  g_assert_null (memres_resource_new ("ipc", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
  g_assert_null (memres_resource_new ("ipc", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
  mt_assert_fake_counts_equal (&base);
}

/* Export and import within one process: the import is a separate resource that maps the same
 * memory; writes through one are read through the other. */
static void
test_same_process (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf, *imported;
  MemresResource *again;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  fds = mt_count_open_fds ();
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  g_assert_true (memres_resource_get_flags (importer) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_resource_get_flags (importer) & MEMRES_MEMORY_IPC_ENABLED);
  g_assert_cmpint (memres_resource_get_device (importer), ==, 0);
  g_assert_cmpstr (memres_resource_get_kind_name (importer), ==, "ipc");

  /* Same pool again: the same resource. */
  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  again = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_assert_true (again == importer);
  memres_resource_unref (again);

  buf = alloc_pattern (exporter, 256 * KiB, 11);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  imported = memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (imported), ==, 256 * KiB);
  g_assert_true (memres_buffer_get_flags (imported) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_buffer_get_resource (imported) == importer);
  assert_buffer_pattern (imported, 0, 256 * KiB, 11, 0);

  /* Importer writes, exporter reads. */
  g_assert_true (memres_buffer_fill (imported, 0xabcd1234, 4, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  {
    guint32 words[4];
    g_assert_true (memres_buffer_read (buf, 64 * KiB, words, sizeof words, NULL, &error));
    mt_sync_ok (NULL);
    for (int i = 0; i < 4; i++)
      g_assert_cmphex (words[i], ==, 0xabcd1234);
  }

  /* The importer's buffer goes first (the driver's rule), then the exporter's. */
  mt_close_ok (imported, NULL);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  memres_buffer_unref (buf);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&importer, memres_resource_unref);
  /* The imported pool's fds are gone with it. The real driver opens descriptors of its own on
   * the first import of a process (two more on the H200, kept for the life of the process):
   * there, flatness is asserted over repeated cycles by /ipc-procs/cycles. */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  else
    g_assert_cmpint (mt_count_open_fds (), <=, fds + 4);
  g_clear_pointer (&exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_imported_cannot_allocate (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) empty = NULL;
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  g_assert_null (memres_resource_allocate (importer, 4096, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* Zero bytes are the core's business, the same for every kind. */
  empty = mt_alloc_ok (importer, 0, NULL);
  g_assert_cmpuint (memres_buffer_get_size (empty), ==, 0);
  /* The exporter cannot import its own buffers (it has them). */
  {
    g_autoptr (MemresBuffer) buf = alloc_pattern (exporter, 4096, 1);
    MemresBufferDescriptor desc;
    g_assert_true (memres_buffer_export (buf, &desc, &error));
    g_assert_null (memres_buffer_import (exporter, desc.bytes, sizeof desc.bytes, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
  }
}

/* Pools that are not shareable, and fds that are not pool handles: NOT_SUPPORTED, no crash,
 * no leak. */
static void
test_non_ipc_handle (void)
{
  g_autoptr (MemresResource) dmr = NULL;
  FakeCudaCounts base;
  MemresIpcHandle *handle;
  GError *error = NULL;
  guint8 id[MEMRES_IPC_ID_SIZE] = { 7 };
  guint8 uuid[MEMRES_IPC_ID_SIZE];
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  g_assert_true (memres_cuda_get_device_uuid (0, uuid, &error));
  g_assert_no_error (error);
  dmr = mt_new_ok ("dmr:device=0,pool=new");
  g_assert_null (memres_resource_export_handle (dmr, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  fds = mt_count_open_fds ();

  /* A handle that claims kind dmr: that kind cannot import. */
  handle
      = memres_ipc_handle_new ("dmr", memfd_create ("not-a-pool", MFD_CLOEXEC), id, uuid, &error);
  g_assert_no_error (error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* Kind ipc, but the fd is no pool's. */
  handle
      = memres_ipc_handle_new ("ipc", memfd_create ("not-a-pool", MFD_CLOEXEC), id, uuid, &error);
  g_assert_no_error (error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* A kind nobody provides. */
  handle = memres_ipc_handle_new ("nosuchkind", memfd_create ("x", MFD_CLOEXEC), id, uuid, &error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* A device UUID no device here has. */
  {
    g_autoptr (MemresResource) exporter = mt_new_ok ("ipc");
    g_autoptr (MemresIpcHandle) good = memres_resource_export_handle (exporter, &error);
    guint8 bad_uuid[MEMRES_IPC_ID_SIZE];
    int fd = fcntl (memres_ipc_handle_get_fd (good), F_DUPFD_CLOEXEC, 0);
    memset (bad_uuid, 0x5a, sizeof bad_uuid);
    handle
        = memres_ipc_handle_new ("ipc", fd, memres_ipc_handle_get_pool_id (good), bad_uuid, &error);
    g_assert_no_error (error);
    g_assert_null (memres_resource_import_handle (handle, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE);
    g_clear_error (&error);
    memres_ipc_handle_free (handle);
  }

  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_clear_pointer (&dmr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* memres_ipc_send_buffer() of a pool buffer: one message with the pool's handle record and the
 * buffer's descriptor; the receiver imports the pool (importer NULL) or uses the pool it
 * imported (importer that pool), then the buffer. */
static MemresBuffer *
send_receive (MemresBuffer *buf, MemresResource *importer, GError **error)
{
  MemresBuffer *got = NULL;
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  if (memres_ipc_send_buffer (sv[0], buf, error))
    got = memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, error);
  close (sv[0]);
  close (sv[1]);
  return got;
}

static void
test_send_pool_buffer (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) other = NULL;
  MemresBuffer *buf, *got, *again;
  MemresResource *pool;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  other = mt_new_ok ("ipc");
  buf = alloc_pattern (exporter, 256 * KiB, 17);
  /* The real driver opens descriptors of its own at the first import of a process and keeps
   * them (see /ipc/import/cycles): one cycle first there, then count */
  if (!mt_driver_is_fake () && (got = send_receive (buf, NULL, NULL)) != NULL)
    mt_close_ok (got, NULL);
  fds = mt_count_open_fds ();

  got = send_receive (buf, NULL, &error);
  if (got == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_error (&error);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 256 * KiB);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  assert_buffer_pattern (got, 0, 256 * KiB, 17, 0);
  pool = memres_buffer_get_resource (got);
  g_assert_true (pool != exporter);
  g_assert_true (memres_resource_get_flags (pool) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpstr (memres_resource_get_kind_name (pool), ==, "ipc");

  /* into the pool imported before: the same resource */
  again = send_receive (buf, pool, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_resource (again) == pool);
  assert_buffer_pattern (again, 0, 256 * KiB, 17, 0);
  mt_close_ok (again, NULL);

  /* into a resource that is not that pool's import: refused, nothing left open */
  g_assert_null (send_receive (buf, exporter, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_null (send_receive (buf, other, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);

  /* an imported buffer is not sent on */
  {
    int sv[2];

    g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    g_assert_false (memres_ipc_send_buffer (sv[0], got, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    close (sv[0]);
    close (sv[1]);
  }
  mt_close_ok (got, NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&other, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* The pool buffer message (MRPB) is checked before anything is imported: every forgery is
 * MEMRES_ERROR_INVALID_DESCRIPTOR, every fd that came with it is closed. */
enum
{
  PB_SIZE = 240,
  PB_HANDLE = 8,
  PB_DESC = 80,
  PB_H_POOL_ID = 8 + 32,
};

/* A genuine message for @buf, as memres_ipc_send_buffer() makes it, from the public pieces. */
static void
genuine_message (MemresBuffer *buf, guint8 out[PB_SIZE])
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  GError *error = NULL;
  const char *kind;

  handle = memres_resource_export_handle (memres_buffer_get_resource (buf), &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  memset (out, 0, PB_SIZE);
  memcpy (out, "MRPB", 4);
  mt_put_le (out + 4, 1, 2);
  mt_put_le (out + 6, PB_SIZE, 2);
  memcpy (out + PB_HANDLE, "MRIH", 4);
  mt_put_le (out + PB_HANDLE + 4, 1, 2);
  mt_put_le (out + PB_HANDLE + 6, 72, 2);
  kind = memres_ipc_handle_get_kind (handle);
  memcpy (out + PB_HANDLE + 8, kind, strlen (kind));
  memcpy (out + PB_HANDLE + 40, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (out + PB_HANDLE + 56, memres_ipc_handle_get_device_uuid (handle), MEMRES_IPC_ID_SIZE);
  memcpy (out + PB_DESC, desc.bytes, sizeof desc.bytes);
}

/* Sends @len bytes of @msg with @n_fds duplicates of a pool fd and expects the receive to fail
 * with @code, every fd closed; returns the buffer instead when @code is 0. */
static MemresBuffer *
receive_crafted (MemresResource *exporter, const guint8 *msg, gsize len, int n_fds, gint code,
                 int sock_type)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  MemresBuffer *got;
  int sv[2], fds[2], before;

  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  g_assert_cmpint (socketpair (AF_UNIX, sock_type | SOCK_CLOEXEC, 0, sv), ==, 0);
  before = mt_count_open_fds ();
  for (int i = 0; i < n_fds; i++)
    fds[i] = dup (memres_ipc_handle_get_fd (handle));
  mt_send_raw (sv[0], msg, len, fds, n_fds, TRUE);
  for (int i = 0; i < n_fds; i++)
    close (fds[i]);
  if (sock_type == SOCK_STREAM)
    shutdown (sv[0], SHUT_WR); /* a truncated message ends here */
  got = memres_ipc_receive_buffer (sv[1], NULL, MEMRES_IPC_NONE, NULL, &error);
  if (code == 0)
    g_assert_no_error (error);
  else
    {
      g_assert_null (got);
      g_assert_error (error, MEMRES_ERROR, code);
      g_test_message ("refused: %s", error->message);
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, before);
    }
  close (sv[0]);
  close (sv[1]);
  return got;
}

static void
test_send_pool_buffer_forged (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) other = NULL;
  guint8 msg[PB_SIZE], bad[PB_SIZE];
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  int types[] = { SOCK_STREAM, SOCK_SEQPACKET };

  if (!mt_require_devices (1) || !mt_driver_is_fake ())
    {
      g_test_skip ("crafted pool messages run against the fake driver");
      return;
    }
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  other = mt_new_ok ("ipc");
  buf = alloc_pattern (exporter, 64 * KiB, 23);
  genuine_message (buf, msg);

  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    {
      /* the control: the genuine bytes are received */
      got = receive_crafted (exporter, msg, sizeof msg, 1, 0, types[t]);
      g_assert_nonnull (got);
      assert_buffer_pattern (got, 0, 64 * KiB, 23, 0);
      mt_close_ok (got, NULL);

      /* truncated: cut inside the descriptor, and a length field that says so */
      receive_crafted (exporter, msg, PB_SIZE - 1, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      memcpy (bad, msg, sizeof bad);
      mt_put_le (bad + 6, PB_SIZE - 8, 2);
      receive_crafted (exporter, bad, PB_SIZE - 8, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* another version */
      memcpy (bad, msg, sizeof bad);
      mt_put_le (bad + 4, 2, 2);
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* wrong record order: the descriptor first, then the handle */
      memcpy (bad, msg, 8);
      memcpy (bad + 8, msg + PB_DESC, 160);
      memcpy (bad + 8 + 160, msg + PB_HANDLE, 72);
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* fd count mismatch: none, two */
      receive_crafted (exporter, msg, sizeof msg, 0, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      receive_crafted (exporter, msg, sizeof msg, 2, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* forged pool id: in the handle (the descriptor no longer matches), in the descriptor */
      memcpy (bad, msg, sizeof bad);
      bad[PB_HANDLE + PB_H_POOL_ID] ^= 0x5a;
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      memcpy (bad, msg, sizeof bad);
      bad[PB_DESC + 8 + 32] ^= 0x5a; /* the descriptor's pool_id */
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* another pool's handle with this pool's descriptor */
      {
        MemresBuffer *obuf = alloc_pattern (other, 4 * KiB, 1);
        guint8 omsg[PB_SIZE];

        genuine_message (obuf, omsg);
        memcpy (bad, omsg, PB_DESC);
        memcpy (bad + PB_DESC, msg + PB_DESC, 160);
        receive_crafted (other, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
        mt_close_ok (obuf, NULL);
      }
      /* a bad handle record inside (its magic) */
      memcpy (bad, msg, sizeof bad);
      bad[PB_HANDLE] ^= 0x01;
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
    }
  mt_close_ok (buf, NULL);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&other, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

#define CARVES                                                                                     \
  "\"cache\" carves its blocks out of larger allocations of the layer below (it does not pass "    \
  "allocations through, MEMRES_KIND_PASSES_ALLOCATIONS), "
#define HIDES_IPC                                                                                  \
  "which hides the sharing of kind \"ipc\" under it; share from the layer below "                  \
  "(memres_resource_get_upstream()), or use a stack without \"cache\""

/* Export and send refused with @want (NOT_SUPPORTED), leaving no fd open. */
static void
assert_not_shared (GError *error, const char *want)
{
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpstr (error->message, ==, want);
  g_error_free (error);
}

/* An adaptor that carves its blocks out of larger upstream allocations (cache) hides the
 * sharing of the pool below it: the pool's handle, a buffer's descriptor and its message are
 * each refused saying why and what to do, not suggesting the kind that is there; with no layer
 * below that shares either, the kinds that do. Refused before any driver export, no fd left
 * open; the layer below still shares. */
static void
test_adaptor_hides_sharing (void)
{
  MemresResource *mr;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;
  int sv[2], open_fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  mr = mt_new_ok ("cache>ipc");
  buf = mt_alloc_ok (mr, MiB, NULL);
  open_fds = mt_count_open_fds ();

  g_assert_null (memres_resource_export_handle (mr, &error));
  assert_not_shared (
      error,
      "resources of kind \"cache\" cannot be shared with other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be shared with other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_false (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_null (bytes);
  g_assert_null (fds);
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_cmpint (mt_count_open_fds (), ==, open_fds);
  /* what the message says: the layer below shares */
  {
    g_autoptr (MemresIpcHandle) handle
        = memres_resource_export_handle (memres_resource_get_upstream (mr), &error);

    g_assert_no_error (error);
    g_assert_nonnull (handle);
  }
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);

  /* nothing below shares either */
  mr = mt_new_ok ("cache>dmr");
  buf = mt_alloc_ok (mr, MiB, NULL);
  open_fds = mt_count_open_fds ();
  g_assert_null (memres_resource_export_handle (mr, &error));
  assert_not_shared (error,
                     "resources of kind \"cache\" cannot be shared with other processes: " CARVES
                     "and no layer below it shares either (use kind \"ipc\", in a "
                     "stack without \"cache\")");
  error = NULL;
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  assert_not_shared (error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES
                            "and no layer below it shares either (use kind \"ipc\", \"pinned\" "
                            "with ipc=true, or \"vmm\" with handle_type=posix_fd, in a stack "
                            "without \"cache\")");
  error = NULL;
  g_assert_cmpint (mt_count_open_fds (), ==, open_fds);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
  close (sv[0]);
  close (sv[1]);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  /* The fake gets two devices (peer tests); the real driver ignores this. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/ipc/create", test_create);
  g_test_add_func ("/ipc/options", test_options);
  g_test_add_func ("/ipc/no-posix-fd-support", test_no_posix_fd_support);
  g_test_add_func ("/ipc/same-process", test_same_process);
  g_test_add_func ("/ipc/imported-cannot-allocate", test_imported_cannot_allocate);
  g_test_add_func ("/ipc/non-ipc-handle", test_non_ipc_handle);
  g_test_add_func ("/ipc/adaptor-hides-sharing", test_adaptor_hides_sharing);
  g_test_add_func ("/ipc/send-buffer/pool", test_send_pool_buffer);
  g_test_add_func ("/ipc/send-buffer/pool-forged", test_send_pool_buffer_forged);
  return g_test_run ();
}
