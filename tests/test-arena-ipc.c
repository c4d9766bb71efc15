/* test-arena-ipc.c: exportable buffers of the `arena` kind (handle_type=posix_fd, docs/arena.md):
 * memory of their own, sent to another process as one chunk (memres_ipc_send_buffer(),
 * memres_ipc_receive_buffer()) and imported by an arena there. Suite ipc: the round trip starts
 * a child by running this same program again (`test-arena-ipc --child roundtrip`, fd 3 = its
 * end of a socketpair), never by forking a process that has CUDA state. The neighbour, refusal
 * and fault cases run in one process, through the message API. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#include "arena-check.h"

#define MiB ((gsize) 1 << 20)

enum
{
  OP_IMPORT = 1, /* a buffer precedes: seed = pattern to expect, value = size */
  OP_DONE,
  OP_QUIT,
};

typedef struct
{
  guint32 op;
  guint32 seed;
  gint64 value;
} Msg;

#define EXPORTER "arena:handle_type=posix_fd"

static void
send_msg (int sock, guint32 op, guint32 seed, gint64 value)
{
  Msg m = { op, seed, value };

  mt_send_all (sock, &m, sizeof m);
}

static Msg
recv_msg (int sock)
{
  Msg m;

  mt_recv_all (sock, &m, sizeof m);
  return m;
}

typedef struct
{
  GBytes *bytes;
  gint *fds;
  guint n_fds;
} Message;

static gboolean
export_message (MemresBuffer *buf, Message *m, GError **error)
{
  memset (m, 0, sizeof *m);
  return memres_buffer_export_message (buf, &m->bytes, &m->fds, &m->n_fds, error);
}

static void
message_clear (Message *m)
{
  for (guint i = 0; i < m->n_fds; i++)
    g_assert_cmpint (close (m->fds[i]), ==, 0);
  g_clear_pointer (&m->fds, g_free);
  g_clear_pointer (&m->bytes, g_bytes_unref);
  m->n_fds = 0;
}

static MemresBuffer *
import_message (MemresResource *importer, const Message *m, GError **error)
{
  gsize len;
  gconstpointer data = g_bytes_get_data (m->bytes, &len);

  return memres_buffer_import_message (importer, data, len, m->fds, m->n_fds, NULL, error);
}

/* The chunk sizes of a message's layout record (docs/ipc.md: the count at 80, the sizes from
 * 88, little-endian). */
static guint64
message_chunk (const Message *m, guint i, guint *n)
{
  gsize len;
  const guint8 *b = g_bytes_get_data (m->bytes, &len);

  *n = (guint) mt_get_le (b + 80, 4);
  return mt_get_le (b + 88 + 8 * i, 8);
}

/* ---- between processes -------------------------------------------------------------------- */

static int
child_roundtrip (int sock)
{
  g_autoptr (MemresResource) importer = NULL;
  GError *error = NULL;
  MemresBuffer *buf;
  gsize size;
  Msg m;

  g_assert_true (mt_require_devices (1));
  importer = mt_new_ok (EXPORTER);
  buf = memres_ipc_receive_buffer (sock, importer, MEMRES_IPC_NONE, NULL, &error);
  g_assert_no_error (error);
  m = recv_msg (sock);
  g_assert_cmpuint (m.op, ==, OP_IMPORT);
  size = memres_buffer_get_size (buf);
  g_assert_cmpuint (size, ==, (gsize) m.value);
  g_assert_true (memres_buffer_get_flags (buf) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpuint (counter (importer, "imported"), >=, size);
  mt_check_pattern (buf, 0, size, m.seed, NULL);
  mt_write_pattern (buf, 0, size, m.seed + 1, NULL);
  mt_sync_ok (NULL);
  /* memory of another process is not resized, nor passed on */
  g_assert_false (memres_buffer_resize (buf, 2 * size, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);
  g_assert_cmpuint (counter (importer, "imported"), ==, 0);
  send_msg (sock, OP_DONE, 0, 0);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

/* A buffer of three granules and a bit to a child: it reads the bytes and writes its own back. */
static void
test_roundtrip (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  gsize size;
  int sock;
  GPid pid;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (EXPORTER);
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  size = 3 * gran (mr) + 1000;
  buf = mt_alloc_ok (mr, size, NULL);
  g_assert_cmpuint (counter (mr, "exportable_buffers"), ==, 1);
  mt_write_pattern (buf, 0, size, 21, NULL);
  pid = mt_spawn_child ("roundtrip", &sock);
  g_assert_true (memres_ipc_send_buffer (sock, buf, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (counter (mr, "exports"), ==, 1);
  send_msg (sock, OP_IMPORT, 21, (gint64) size);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_DONE);
  mt_check_pattern (buf, 0, size, 22, NULL);
  send_msg (sock, OP_QUIT, 0, 0);
  mt_wait_child (pid, sock);
  mt_close_ok (buf, NULL);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* ---- one process -------------------------------------------------------------------------- */

/* An exported buffer lies alone in its granules: neighbours allocated before and after it (small
 * blocks, large buffers) never touch them, the message's one chunk is the buffer rounded up to
 * the granularity, the import sees its bytes only, and once the exporter closes it, nothing the
 * exporter allocates next lands in the memory the importer still maps. */
static void
test_no_neighbour (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *before_small, *before_large, *buf, *after_small, *after_large, *got;
  MemresBuffer *later[8];
  FakeCudaCounts base;
  GError *error = NULL;
  guint64 addr, end, chunk;
  gsize g, size;
  Message m;
  guint n;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (EXPORTER ",export_min=4MiB");
  importer = mt_new_ok (EXPORTER);
  g = gran (mr);
  size = 2 * g + 4096 + 100;
  before_small = mt_alloc_ok (mr, 1000, NULL);
  before_large = mt_alloc_ok (mr, g + 300, NULL); /* under export_min: shares granules */
  buf = mt_alloc_ok (mr, size, NULL);
  after_small = mt_alloc_ok (mr, 2000, NULL);
  after_large = mt_alloc_ok (mr, 100 * 1024, NULL);
  mt_fill_byte_ok (before_small, 0x11, NULL);
  mt_fill_byte_ok (before_large, 0x22, NULL);
  mt_fill_byte_ok (after_small, 0x33, NULL);
  mt_fill_byte_ok (after_large, 0x44, NULL);
  mt_write_pattern (buf, 0, size, 7, NULL);

  addr = memres_buffer_get_address (buf);
  g_assert_cmpuint (addr % g, ==, 0);
  g_assert_true (export_message (buf, &m, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (m.n_fds, ==, 1);
  chunk = message_chunk (&m, 0, &n);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpuint (chunk, ==, 3 * g);
  end = addr + chunk;
  {
    MemresBuffer *others[] = { before_small, before_large, after_small, after_large };

    for (guint i = 0; i < G_N_ELEMENTS (others); i++)
      {
        guint64 a = memres_buffer_get_address (others[i]);
        guint64 e = a + memres_buffer_get_size (others[i]);

        g_assert_true (e <= addr || a >= end);
      }
  }
  /* one segment, the buffer's granules and nothing else */
  {
    MemresLookupInfo info;

    g_assert_true (memres_lookup ((gconstpointer) (guintptr) (addr + size - 1), &info));
    g_assert_true (info.resource == mr);
    g_assert_cmphex (info.segment.base, ==, addr);
    g_assert_cmpuint (info.segment.length, ==, chunk);
    g_assert_cmpuint (info.segment.handle_types, ==, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  }

  got = import_message (importer, &m, &error);
  g_assert_no_error (error);
  message_clear (&m);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, size);
  mt_check_pattern (got, 0, size, 7, NULL);

  /* the exporter closes first (the importer keeps the memory alive) and fills new buffers of
   * every sort: the importer's bytes stay the buffer's */
  mt_close_ok (buf, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (later); i++)
    {
      later[i] = mt_alloc_ok (mr, i % 2 ? 3 * g : 1500 + i, NULL);
      mt_fill_byte_ok (later[i], 0x5a, NULL);
    }
  mt_check_pattern (got, 0, size, 7, NULL);
  mt_assert_bytes (before_small, 0x11, NULL);
  mt_assert_bytes (before_large, 0x22, NULL);
  mt_assert_bytes (after_small, 0x33, NULL);
  mt_assert_bytes (after_large, 0x44, NULL);
  mt_close_ok (got, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (later); i++)
    {
      mt_close_ok (later[i], NULL);
    }
  mt_close_ok (before_small, NULL);
  mt_close_ok (before_large, NULL);
  mt_close_ok (after_small, NULL);
  mt_close_ok (after_large, NULL);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
assert_export_refused (MemresResource *mr, gsize size)
{
  MemresBuffer *buf = mt_alloc_ok (mr, size, NULL);
  GError *error = NULL;
  Message m;
  int fds = mt_count_open_fds ();

  g_assert_false (export_message (buf, &m, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_test_message ("%" G_GSIZE_FORMAT " bytes: %s", size, error->message);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (buf, NULL);
}

/* What is not exportable says so (MEMRES_ERROR_NOT_SUPPORTED), before any driver call: an arena
 * without handle_type=posix_fd, a block of the size classes, a large buffer under export_min;
 * imports into an arena that cannot take them are refused too. */
static void
test_refused (void)
{
  g_autoptr (MemresResource) plain = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) big_blocks = NULL;
  g_autoptr (MemresResource) vmm = NULL;
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  GError *error = NULL;
  long exports;
  Message m;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  plain = mt_new_ok ("arena");
  mr = mt_new_ok (EXPORTER ",export_min=8MiB");
  g_assert_false (memres_resource_get_flags (plain) & MEMRES_MEMORY_IPC_ENABLED);
  exports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemExportToShareableHandle") : 0;
  assert_export_refused (plain, 3 * MiB);
  assert_export_refused (plain, 1000);
  assert_export_refused (mr, 1000);    /* a block of the size classes */
  assert_export_refused (mr, 4 * MiB); /* large, under export_min: shares granules */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemExportToShareableHandle"), ==, exports);
  g_assert_cmpuint (counter (mr, "exportable_buffers"), ==, 0);

  /* a message of 1 MiB into an arena whose classes go up to 2 MiB; into one that cannot import;
   * into another kind */
  big_blocks = mt_new_ok (EXPORTER ",max_block=2MiB");
  vmm = mt_new_ok ("vmm:handle_type=posix_fd");
  {
    g_autoptr (MemresResource) small = mt_new_ok (EXPORTER);

    buf = mt_alloc_ok (small, 1 * MiB, NULL);
    g_assert_true (export_message (buf, &m, &error));
    g_assert_no_error (error);
    g_assert_null (import_message (big_blocks, &m, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    g_assert_null (import_message (plain, &m, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    g_assert_null (import_message (vmm, &m, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
    g_clear_error (&error);
    got = import_message (small, &m, &error);
    g_assert_no_error (error);
    /* an import is not exported again */
    message_clear (&m);
    g_assert_false (export_message (got, &m, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    mt_close_ok (got, NULL);
    mt_close_ok (buf, NULL);
  }
  g_clear_pointer (&vmm, memres_resource_unref);
  g_clear_pointer (&big_blocks, memres_resource_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&plain, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Resize of an exportable buffer moves it to memory of its own again, bytes kept; statistics
 * count its granules as reserved and its rounded bytes as used. */
static void
test_resize_and_stats (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  GError *error = NULL;
  MemresStats st;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok (EXPORTER);
  g = gran (mr);
  buf = mt_alloc_ok (mr, g + 512, NULL);
  st = stats_ok (mr);
  g_assert_cmpuint (st.reserved_current, ==, 2 * g);
  g_assert_cmpuint (st.used_current, ==, g + 512);
  mt_write_pattern (buf, 0, g + 512, 3, NULL);
  g_assert_true (memres_buffer_resize (buf, 3 * g, NULL, &error));
  g_assert_no_error (error);
  mt_check_pattern (buf, 0, g + 512, 3, NULL);
  st = stats_ok (mr);
  g_assert_cmpuint (st.reserved_current, ==, 3 * g);
  g_assert_cmpuint (st.used_current, ==, 3 * g);
  g_assert_cmpuint (counter (mr, "exportable_buffers"), ==, 2);
  mt_close_ok (buf, NULL);
  st = stats_ok (mr);
  g_assert_cmpuint (st.reserved_current, ==, 0);
  g_assert_cmpuint (st.used_current, ==, 0);
}

/* ---- fault sweeps ------------------------------------------------------------------------- */

typedef struct
{
  MemresResource *importer;
  MemresBuffer *buf, *got;
} SweepData;

static gboolean
op_send_receive (gpointer data, GError **error)
{
  SweepData *d = data;
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  d->got = NULL;
  if (memres_ipc_send_buffer (sv[0], d->buf, error))
    d->got = memres_ipc_receive_buffer (sv[1], d->importer, MEMRES_IPC_NONE, NULL, error);
  close (sv[0]);
  close (sv[1]);
  return d->got != NULL;
}

static void
undo_receive (gpointer data)
{
  SweepData *d = data;

  mt_check_pattern (d->got, 0, memres_buffer_get_size (d->got), 61, NULL);
  mt_close_ok (d->got, NULL);
  d->got = NULL;
}

/* Every driver call of an exportable allocation, and of a send + receive, fails in turn: each
 * failure is reported, nothing leaks (fake counts, fds), and the next attempt works. */
static void
test_faults (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MtSweepData a = { 0 };
  SweepData d = { 0 };
  FakeCudaCounts base;
  int n, fds;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (EXPORTER);
  /* create, reserve, map, set access (an out-of-memory create is retried after a flush) */
  a.mr = mr;
  a.size = 3 * gran (mr) + 100;
  n = mt_fault_sweep ("arena exportable allocate", mt_op_allocate, mt_undo_allocate, &a,
                      CUDA_ERROR_UNKNOWN, NULL);
  g_assert_cmpint (n, >=, 4);

  d.importer = mt_new_ok (EXPORTER);
  d.buf = mt_alloc_ok (mr, 2 * gran (mr) + 100, NULL);
  mt_write_pattern (d.buf, 0, memres_buffer_get_size (d.buf), 61, NULL);
  fds = mt_count_open_fds ();
  /* export, import, reserve, map, set access (and the UUID queries) */
  n = mt_fault_sweep ("arena send + receive", op_send_receive, undo_receive, &d, 0, NULL);
  g_assert_cmpint (n, >=, 5);
  n = mt_fault_sweep ("arena send + receive (OS error)", op_send_receive, undo_receive, &d,
                      CUDA_ERROR_OPERATING_SYSTEM, NULL);
  g_assert_cmpint (n, >=, 5);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (d.buf, NULL);
  g_clear_pointer (&d.importer, memres_resource_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* A close whose unmap fails leaves the buffer open, mapped and found by memres_lookup(); the
 * next close works. */
static void
test_close_fault (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  MemresLookupInfo info;
  guint64 addr;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (EXPORTER);
  buf = mt_alloc_ok (mr, 3 * MiB, NULL);
  mt_fill_byte_ok (buf, 0x3c, NULL);
  addr = memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_true (memres_lookup ((gconstpointer) (guintptr) addr, &info));
  mt_assert_bytes (buf, 0x3c, NULL);
  mt_close_ok (buf, NULL);
  g_assert_false (memres_lookup ((gconstpointer) (guintptr) addr, &info));
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static int
child_main (const char *mode)
{
  if (strcmp (mode, "roundtrip") == 0)
    return child_roundtrip (MT_CHILD_FD);
  g_printerr ("unknown child mode %s\n", mode);
  return 2;
}

int
main (int argc, char **argv)
{
  if (argc >= 3 && strcmp (argv[1], "--child") == 0)
    return child_main (argv[2]);

  mt_init (&argc, &argv);
  g_test_add_func ("/arena-ipc/roundtrip", test_roundtrip);
  g_test_add_func ("/arena-ipc/no-neighbour", test_no_neighbour);
  g_test_add_func ("/arena-ipc/refused", test_refused);
  g_test_add_func ("/arena-ipc/resize-and-stats", test_resize_and_stats);
  g_test_add_func ("/arena-ipc/faults", test_faults);
  g_test_add_func ("/arena-ipc/close-fault", test_close_fault);
  return g_test_run ();
}
