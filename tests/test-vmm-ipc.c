/* test-vmm-ipc.c: vmm buffers sent to other processes as their physical chunks
 * (memres_ipc_send_buffer(), memres_ipc_receive_buffer(), vmm with handle_type=posix_fd).
 * Suite ipc: the data cases start a child by running this same program again
 * (`test-vmm-ipc --child MODE`, fd 3 = its end of a socketpair), never by forking a process that
 * has CUDA state. The forged-message, refusal and fault cases run in one process: they send to
 * themselves over a socketpair. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

enum
{
  OP_IMPORT = 1, /* a buffer precedes: seed = pattern to expect, value = size */
  OP_DONE,       /* reply: value = status (0 ok), fds = the sender's open fds */
  OP_QUIT,
  OP_CYCLE, /* a buffer precedes: import, check first and last word == seed, close */
};

typedef struct
{
  guint32 op;
  guint32 seed;
  gint64 value;
  gint64 fds;
} Msg;

/* The layout record as documented in docs/ipc.md (little-endian). */
enum
{
  R_MAGIC = 0,
  R_VERSION = 4,
  R_LENGTH = 6,
  R_KIND = 8,
  R_UUID = 40,
  R_HANDLE_TYPE = 56,
  R_LOCATION_TYPE = 60,
  R_GRANULARITY = 64,
  R_SIZE = 72,
  R_N_CHUNKS = 80,
  R_RESERVED = 84,
  R_CHUNK_SIZES = 88,
  R_MAX = R_CHUNK_SIZES + 8 * MEMRES_IPC_MAX_CHUNKS,
};

static const MemresCudaDriver *drv;

static void
send_msg (int sock, guint32 op, guint32 seed, gint64 value)
{
  Msg m = { op, seed, value, mt_count_open_fds () };

  mt_send_all (sock, &m, sizeof m);
}

static Msg
recv_msg (int sock)
{
  Msg m;

  mt_recv_all (sock, &m, sizeof m);
  return m;
}

static gboolean
require_device (int n)
{
  if (!mt_require_devices (n))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  g_assert_nonnull (drv);
  return TRUE;
}

static void
sync_ok (void)
{
  GError *error = NULL;

  g_assert_true (memres_stream_synchronize (NULL, &error));
  g_assert_no_error (error);
}

static void
write_pattern (MemresBuffer *buf, guint32 seed)
{
  gsize size = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (size);
  GError *error = NULL;

  mt_fill_pattern (host, size, seed);
  g_assert_true (memres_buffer_write (buf, 0, host, size, NULL, &error));
  g_assert_no_error (error);
  sync_ok ();
}

static void
check_pattern (MemresBuffer *buf, guint32 seed)
{
  gsize size = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (size);
  GError *error = NULL;

  g_assert_true (memres_buffer_read (buf, 0, host, size, NULL, &error));
  g_assert_no_error (error);
  sync_ok ();
  mt_assert_pattern (host, size, seed);
}

static guint32
read_word (MemresBuffer *buf, gsize offset)
{
  guint32 word = 0;
  GError *error = NULL;

  g_assert_true (memres_buffer_read (buf, offset, &word, sizeof word, NULL, &error));
  g_assert_no_error (error);
  sync_ok ();
  return word;
}

static void
close_buffer (MemresBuffer *buf)
{
  GError *error = NULL;

  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  memres_buffer_unref (buf);
}

/* A buffer of three chunks of one granule each: allocated with one, grown to three. */
static MemresBuffer *
three_chunks (MemresResource *mr)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, mt_device_granularity (), NULL, &error);

  g_assert_no_error (error);
  g_assert_true (memres_buffer_resize (buf, 3 * mt_device_granularity (), NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * mt_device_granularity ());
  return buf;
}

static MemresResource *
exporter_new (void)
{
  return mt_new_printf_ok ("vmm:handle_type=posix_fd,chunk=%" G_GSIZE_FORMAT,
                           mt_device_granularity ());
}

static long
imports_so_far (void)
{
  return mt_driver_is_fake () ? mt_fake_call_count ("cuMemImportFromShareableHandle") : 0;
}

static long
exports_so_far (void)
{
  return mt_driver_is_fake () ? mt_fake_call_count ("cuMemExportToShareableHandle") : 0;
}

static void
make_pair (int type, int sv[2])
{
  g_assert_cmpint (socketpair (AF_UNIX, type | SOCK_CLOEXEC, 0, sv), ==, 0);
}

static void
close_pair (int sv[2])
{
  close (sv[0]);
  close (sv[1]);
}

/* Sends @buf to this process and receives it into @importer. */
static MemresBuffer *
loopback (MemresBuffer *buf, MemresResource *importer, GError **error)
{
  int sv[2];
  MemresBuffer *got = NULL;

  make_pair (SOCK_STREAM, sv);
  if (memres_ipc_send_buffer (sv[0], buf, error))
    got = memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, error);
  close_pair (sv);
  return got;
}

/* ---- the children ------------------------------------------------------------------------- */

/* Imports the parent's buffer, checks its pattern, refuses to pass it on, writes the next
 * pattern. */
static int
child_roundtrip (int sock)
{
  g_autoptr (MemresResource) importer = NULL;
  MemresBufferDescriptor desc;
  GError *error = NULL;
  MemresBuffer *buf;
  long exports;
  int sv[2];
  Msg m;

  g_assert_true (require_device (1));
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  buf = memres_ipc_receive_buffer (sock, importer, MEMRES_IPC_NONE, NULL, &error);
  g_assert_no_error (error);
  m = recv_msg (sock);
  g_assert_cmpuint (m.op, ==, OP_IMPORT);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, (gsize) m.value);
  g_assert_true (memres_buffer_get_flags (buf) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_buffer_get_resource (buf) == importer);
  check_pattern (buf, m.seed);

  /* Memory of another process is not passed on, and cannot grow. */
  exports = exports_so_far ();
  make_pair (SOCK_STREAM, sv);
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  close_pair (sv);
  g_assert_cmpint (exports_so_far (), ==, exports);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_resize (buf, 4 * mt_device_granularity (), NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, (gsize) m.value);

  write_pattern (buf, m.seed + 1);
  close_buffer (buf);
  send_msg (sock, OP_DONE, 0, 0);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

static int
child_cycles (int sock)
{
  g_autoptr (MemresResource) importer = NULL;

  g_assert_true (require_device (1));
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  for (;;)
    {
      Msg m = recv_msg (sock);
      GError *error = NULL;
      MemresBuffer *buf;
      gboolean ok;

      if (m.op != OP_CYCLE)
        break;
      buf = memres_ipc_receive_buffer (sock, importer, MEMRES_IPC_NONE, NULL, &error);
      g_assert_no_error (error);
      ok = read_word (buf, 0) == m.seed
           && read_word (buf, memres_buffer_get_size (buf) - sizeof (guint32)) == m.seed;
      close_buffer (buf);
      send_msg (sock, OP_DONE, 0, ok ? 0 : 1);
    }
  return 0;
}

static int
child_main (const char *mode)
{
  if (strcmp (mode, "roundtrip") == 0)
    return child_roundtrip (MT_CHILD_FD);
  if (strcmp (mode, "cycles") == 0)
    return child_cycles (MT_CHILD_FD);
  g_printerr ("unknown child mode %s\n", mode);
  return 2;
}

/* ---- between processes -------------------------------------------------------------------- */

/* Three chunks to a child: it reads the bytes and writes its own back. */
static void
test_roundtrip (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds, sock;
  GPid pid;

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  buf = three_chunks (mr);
  write_pattern (buf, 21);
  pid = mt_spawn_child ("roundtrip", &sock);
  fds = mt_count_open_fds ();
  g_assert_true (memres_ipc_send_buffer (sock, buf, &error));
  g_assert_no_error (error);
  /* the exported fds are closed again (the real driver may open fds of its own at a first
   * export: counted on the fake; /vmm-ipc/cycles checks the real driver after a first cycle) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  send_msg (sock, OP_IMPORT, 21, (gint64) memres_buffer_get_size (buf));
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_DONE);
  check_pattern (buf, 22);
  send_msg (sock, OP_QUIT, 0, 0);
  mt_wait_child (pid, sock);
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static int
n_cycles (void)
{
  const char *env = g_getenv ("MEMRES_TEST_VMM_IPC_CYCLES");

  return env != NULL ? atoi (env) : 1000;
}

/* send -> import -> close, many times: both processes' fd counts stay flat. */
static void
test_cycles (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  gint64 child_fds = -1;
  int n = n_cycles ();
  int fds = -1, sock;
  GPid pid;

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  buf = three_chunks (mr);
  pid = mt_spawn_child ("cycles", &sock);
  for (int i = 0; i < n; i++)
    {
      GError *error = NULL;
      Msg m;

      g_assert_true (memres_buffer_fill (buf, (guint32) i, 4, NULL, &error));
      g_assert_no_error (error);
      sync_ok ();
      send_msg (sock, OP_CYCLE, (guint32) i, 0);
      if (!memres_ipc_send_buffer (sock, buf, &error))
        g_error ("cycle %d: %s", i, error->message);
      m = recv_msg (sock);
      g_assert_cmpuint (m.op, ==, OP_DONE);
      g_assert_cmpint (m.value, ==, 0);
      if (child_fds < 0)
        child_fds = m.fds; /* after the first cycle: libraries loaded, driver up */
      else if (m.fds != child_fds)
        g_error ("cycle %d: the child has %" G_GINT64_FORMAT " fds open, %" G_GINT64_FORMAT
                 " after the first cycle",
                 i, m.fds, child_fds);
      if (fds < 0)
        fds = mt_count_open_fds ();
      else if (mt_count_open_fds () != fds)
        g_error ("cycle %d: %d fds open, %d after the first cycle", i, mt_count_open_fds (), fds);
    }
  send_msg (sock, OP_QUIT, 0, 0);
  mt_wait_child (pid, sock);
  g_test_message ("%d cycles; fds: parent %d, child %" G_GINT64_FORMAT, n, fds, child_fds);
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* ---- one process: refusals ---------------------------------------------------------------- */

static void
assert_send_refused (MemresBuffer *buf, int socket_fd, gint code)
{
  GError *error = NULL;
  long exports = exports_so_far ();
  int fds = mt_count_open_fds ();

  g_assert_false (memres_ipc_send_buffer (socket_fd, buf, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_assert_cmpint (exports_so_far (), ==, exports);
}

/* What cannot be sent: fails before any export, leaving no fd behind. */
static void
test_send_refused (void)
{
  g_autoptr (MemresResource) plain = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) dmr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  int sv[2];

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  make_pair (SOCK_STREAM, sv);

  /* handle_type=none (the default): the chunks have no shareable handle */
  plain = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, mt_device_granularity ());
  g_assert_false (memres_resource_get_flags (plain) & MEMRES_MEMORY_IPC_ENABLED);
  buf = three_chunks (plain);
  assert_send_refused (buf, sv[0], MEMRES_ERROR_NOT_SUPPORTED);
  close_buffer (buf);

  /* another kind */
  dmr = memres_resource_new ("dmr", &error);
  g_assert_no_error (error);
  buf = memres_resource_allocate (dmr, 4096, NULL, &error);
  g_assert_no_error (error);
  assert_send_refused (buf, sv[0], MEMRES_ERROR_NOT_SUPPORTED);
  close_buffer (buf);

  mr = exporter_new ();
  /* empty, closed, not a socket */
  buf = memres_resource_allocate (mr, 0, NULL, &error);
  g_assert_no_error (error);
  assert_send_refused (buf, sv[0], MEMRES_ERROR_INVALID_ARGUMENT);
  close_buffer (buf);
  buf = three_chunks (mr);
  assert_send_refused (buf, -1, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_send_refused (buf, STDERR_FILENO, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_true (memres_buffer_close (buf, NULL, NULL));
  assert_send_refused (buf, sv[0], MEMRES_ERROR_CLOSED);
  memres_buffer_unref (buf);

  close_pair (sv);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&plain, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* More chunks than one message carries. */
static void
test_too_many_chunks (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  long exports;
  int sv[2], fds;

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  buf = memres_resource_allocate (mr, (MEMRES_IPC_MAX_CHUNKS + 1) * mt_device_granularity (), NULL,
                                  &error);
  g_assert_no_error (error);
  make_pair (SOCK_STREAM, sv);
  exports = exports_so_far ();
  fds = mt_count_open_fds ();
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_cmpint (exports_so_far (), ==, exports);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  close_pair (sv);
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* An imported buffer is not exported again (before any driver call) and cannot grow; the
 * importer's own access applies, not the exporter's. */
/* Through an adaptor that passes allocations (stats), the vmm layer below serves the send (the
 * first layer with an IPC table) and the stack says it can share (MEMRES_MEMORY_IPC_ENABLED);
 * an adaptor cannot receive (it has no IPC table). */
static void
test_through_adaptor (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) adaptor_importer = NULL;
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("stats>vmm:handle_type=posix_fd,chunk=%" G_GSIZE_FORMAT,
                         mt_device_granularity ());
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  adaptor_importer = mt_new_printf_ok ("stats>vmm:handle_type=posix_fd");
  buf = memres_resource_allocate (mr, 3 * mt_device_granularity (), NULL,
                                  &error); /* three chunks of mt_device_granularity () */
  g_assert_no_error (error);
  write_pattern (buf, 43);
  got = loopback (buf, importer, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 3 * mt_device_granularity ());
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  check_pattern (got, 43);
  close_buffer (got);

  fds = mt_count_open_fds ();
  g_assert_null (loopback (buf, adaptor_importer, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&adaptor_importer, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_imported (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
  unsigned long long access = 0;
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  GError *error = NULL;
  int sv[2];

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd,access=ro");
  buf = three_chunks (mr);
  write_pattern (buf, 41);
  got = loopback (buf, importer, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 3 * mt_device_granularity ());
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpuint (memres_buffer_get_address (got), !=, memres_buffer_get_address (buf));
  check_pattern (got, 41);

  g_assert_cmpint (drv->cuMemGetAccess (&access, &location, memres_buffer_get_address (got)), ==,
                   CUDA_SUCCESS);
  g_assert_cmpuint (access, ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
  g_assert_cmpint (drv->cuMemGetAccess (&access, &location, memres_buffer_get_address (buf)), ==,
                   CUDA_SUCCESS);
  g_assert_cmpuint (access, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  make_pair (SOCK_STREAM, sv);
  assert_send_refused (got, sv[0], MEMRES_ERROR_NOT_SUPPORTED);
  close_pair (sv);
  g_assert_false (memres_buffer_resize (got, 4 * mt_device_granularity (), NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  close_buffer (got);
  check_pattern (buf, 41); /* the exporter's memory is untouched by the importer's close */
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&importer, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* A shrunk buffer keeps a partly used last chunk: the importer maps it whole and sees the size
 * the exporter has. */
static void
test_shrunk (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf, *got;
  GError *error = NULL;
  gsize size;

  if (!require_device (1))
    return;
  mr = mt_new_printf_ok ("vmm:handle_type=posix_fd,chunk=%" G_GSIZE_FORMAT,
                         2 * mt_device_granularity ());
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  buf = memres_resource_allocate (mr, 4 * mt_device_granularity (), NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_resize (buf, 3 * mt_device_granularity (), NULL, &error));
  g_assert_no_error (error);
  size = memres_buffer_get_size (buf);
  g_assert_cmpuint (size, ==, 3 * mt_device_granularity ());
  write_pattern (buf, 43);
  got = loopback (buf, importer, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, size);
  check_pattern (got, 43);
  close_buffer (got);
  close_buffer (buf);
}

/* The importer must be on the device the memory is on, and able to import. */
static void
test_importer_refused (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) plain = NULL;
  g_autoptr (MemresResource) dmr = NULL;
  g_autoptr (MemresResource) other = NULL;
  MemresResource *importers[3];
  gint codes[3]
      = { MEMRES_ERROR_NOT_SUPPORTED, MEMRES_ERROR_NOT_SUPPORTED, MEMRES_ERROR_WRONG_DEVICE };
  MemresBuffer *buf;
  FakeCudaCounts base;
  guint n = 2;
  gint n_devices = 0;

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  buf = three_chunks (mr);
  importers[0] = plain = mt_new_printf_ok ("vmm");
  importers[1] = dmr = memres_resource_new ("dmr", NULL);
  g_assert_nonnull (dmr);
  g_assert_true (memres_cuda_get_device_count (&n_devices, NULL));
  if (n_devices >= 2)
    importers[n++] = other = mt_new_printf_ok ("vmm:device=1,handle_type=posix_fd");
  else
    g_test_message ("one device: the wrong-device case is not run");

  for (guint i = 0; i < n; i++)
    {
      GError *error = NULL;
      long imports = imports_so_far ();
      int fds = mt_count_open_fds ();

      g_assert_null (loopback (buf, importers[i], &error));
      g_assert_error (error, MEMRES_ERROR, codes[i]);
      g_test_message ("refused: %s", error->message);
      g_clear_error (&error);
      g_assert_cmpint (imports_so_far (), ==, imports);
      g_assert_cmpint (mt_count_open_fds (), ==, fds);
    }
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* ---- one process: forged messages --------------------------------------------------------- */

/* A real message, taken off the socket: the record's bytes and the chunks' fds (owned here). */
typedef struct
{
  guint8 bytes[R_MAX];
  gsize len;
  int fds[MEMRES_IPC_MAX_CHUNKS];
  int n_fds;
} Capture;

static void
capture (MemresBuffer *buf, Capture *c)
{
  union
  {
    char
        buf[CMSG_SPACE (sizeof (int) * MEMRES_IPC_MAX_CHUNKS) + CMSG_SPACE (sizeof (struct ucred))];
    struct cmsghdr align;
  } control;
  struct iovec iov = { c->bytes, sizeof c->bytes };
  struct msghdr msg = { 0 };
  GError *error = NULL;
  int sv[2];
  gssize n;

  make_pair (SOCK_SEQPACKET, sv);
  g_assert_true (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_no_error (error);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  n = recvmsg (sv[1], &msg, MSG_CMSG_CLOEXEC);
  g_assert_cmpint (n, >, 0);
  c->len = (gsize) n;
  c->n_fds = 0;
  for (struct cmsghdr *h = CMSG_FIRSTHDR (&msg); h != NULL; h = CMSG_NXTHDR (&msg, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
      {
        c->n_fds = (int) ((h->cmsg_len - CMSG_LEN (0)) / sizeof (int));
        memcpy (c->fds, CMSG_DATA (h), sizeof (int) * c->n_fds);
      }
  close_pair (sv);
}

/* Sends @len bytes of @rec with @n_fds of the captured fds (a socket of @type; a stream is shut
 * down after it, so that a short message ends) and asserts that receiving it into @importer
 * fails with @code, before any import, with every received fd closed. */
static void
expect_refused (MemresResource *importer, const Capture *c, int type, const guint8 *rec, gsize len,
                int n_fds, gint code)
{
  FakeCudaCounts base;
  GError *error = NULL;
  long imports;
  int sv[2], fds;

  make_pair (type, sv);
  mt_send_raw (sv[0], rec, len, c->fds, n_fds, TRUE);
  if (type == SOCK_STREAM)
    shutdown (sv[0], SHUT_WR);
  mt_fake_counts_begin (&base);
  imports = imports_so_far ();
  fds = mt_count_open_fds ();
  g_assert_null (memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_assert_cmpint (imports_so_far (), ==, imports);
  mt_assert_fake_counts_equal (&base);
  close_pair (sv);
}

typedef void (*Forge) (guint8 *rec, gsize *len, int *n_fds);

static void
forge_magic (guint8 *rec, gsize *len, int *n_fds)
{
  rec[R_MAGIC] ^= 0xff;
}

static void
forge_version (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_VERSION, 2, 2);
}

static void
forge_length_field (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_LENGTH, *len - 8, 2);
}

static void
forge_fewer_fds (guint8 *rec, gsize *len, int *n_fds)
{
  *n_fds -= 1;
}

static void
forge_more_fds (guint8 *rec, gsize *len, int *n_fds)
{
  *n_fds += 1; /* the test captured one fd more than the record names */
}

static void
forge_no_fds (guint8 *rec, gsize *len, int *n_fds)
{
  *n_fds = 0;
}

static void
forge_count_up (guint8 *rec, gsize *len, int *n_fds)
{
  /* four chunks declared and described, three fds */
  mt_put_le (rec + R_N_CHUNKS, 4, 4);
  mt_put_le (rec + R_CHUNK_SIZES + 24, mt_get_le (rec + R_CHUNK_SIZES, 8), 8);
  *len += 8;
  mt_put_le (rec + R_LENGTH, *len, 2);
}

static void
forge_zero_chunks (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_N_CHUNKS, 0, 4);
  *len = R_CHUNK_SIZES;
  mt_put_le (rec + R_LENGTH, *len, 2);
  *n_fds = 0;
}

static void
forge_too_many_chunks (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_N_CHUNKS, MEMRES_IPC_MAX_CHUNKS + 1, 4);
}

static void
forge_zero_size_chunk (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_CHUNK_SIZES + 8, 0, 8);
}

static void
forge_unaligned_chunk (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_CHUNK_SIZES + 8, mt_get_le (rec + R_CHUNK_SIZES + 8, 8) + 4096, 8);
  mt_put_le (rec + R_SIZE, 4096, 8);
}

/* Aligned to the granularity the record claims, not to the importer's. */
static void
forge_small_granularity (guint8 *rec, gsize *len, int *n_fds)
{
  guint64 g = mt_get_le (rec + R_GRANULARITY, 8);

  mt_put_le (rec + R_GRANULARITY, 4096, 8);
  mt_put_le (rec + R_CHUNK_SIZES, g - 4096, 8);
  mt_put_le (rec + R_SIZE, g, 8);
}

static void
forge_granularity (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_GRANULARITY, 3 * 4096, 8);
}

static void
forge_size_over_sum (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_SIZE, mt_get_le (rec + R_SIZE, 8) + 1, 8);
}

static void
forge_size_zero (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_SIZE, 0, 8);
}

static void
forge_overflow (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_CHUNK_SIZES, G_GUINT64_CONSTANT (1) << 63, 8);
  mt_put_le (rec + R_CHUNK_SIZES + 8, G_GUINT64_CONSTANT (1) << 63, 8);
}

static void
forge_handle_type (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_HANDLE_TYPE, CU_MEM_HANDLE_TYPE_FABRIC, 4);
}

static void
forge_location (guint8 *rec, gsize *len, int *n_fds)
{
  mt_put_le (rec + R_LOCATION_TYPE, CU_MEM_LOCATION_TYPE_HOST_NUMA, 4);
}

static void
forge_kind (guint8 *rec, gsize *len, int *n_fds)
{
  memcpy (rec + R_KIND, "dmr", 4);
}

static void
forge_kind_padding (guint8 *rec, gsize *len, int *n_fds)
{
  rec[R_KIND + 20] = 'x';
}

static void
forge_reserved (guint8 *rec, gsize *len, int *n_fds)
{
  rec[R_RESERVED] = 1;
}

static const struct
{
  const char *name;
  Forge forge;
  gint code;
} forgeries[] = {
  { "magic", forge_magic, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "version", forge_version, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "length field", forge_length_field, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "fewer fds", forge_fewer_fds, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "more fds", forge_more_fds, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "no fds", forge_no_fds, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "count up", forge_count_up, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "zero chunks", forge_zero_chunks, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "too many chunks", forge_too_many_chunks, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "zero-size chunk", forge_zero_size_chunk, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "unaligned chunk", forge_unaligned_chunk, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "importer granularity", forge_small_granularity, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "granularity", forge_granularity, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "size over sum", forge_size_over_sum, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "size zero", forge_size_zero, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "overflow", forge_overflow, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "handle type", forge_handle_type, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "location", forge_location, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "kind", forge_kind, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "kind padding", forge_kind_padding, MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "reserved", forge_reserved, MEMRES_ERROR_INVALID_DESCRIPTOR },
};

/* Every forged variant of a real message is refused before any import, with no fd left open; the
 * unmodified message (the control) is accepted and maps the right bytes. */
static void
test_forged (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  GError *error = NULL;
  Capture c;
  guint8 rec[R_MAX];
  int fds, sv[2];

  if (!require_device (1))
    return;
  mt_fake_counts_begin (&base);
  fds = mt_count_open_fds ();
  mr = exporter_new ();
  importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  buf = three_chunks (mr);
  write_pattern (buf, 51);
  capture (buf, &c);

  /* The record is the documented one. */
  g_assert_cmpint (c.n_fds, ==, 3);
  g_assert_cmpuint (c.len, ==, R_CHUNK_SIZES + 3 * 8);
  g_assert_cmpuint (mt_get_le (c.bytes + R_MAGIC, 4), ==, 0x4243524d);
  g_assert_cmpuint (mt_get_le (c.bytes + R_VERSION, 2), ==, 1);
  g_assert_cmpuint (mt_get_le (c.bytes + R_LENGTH, 2), ==, c.len);
  g_assert_cmpstr ((const char *) c.bytes + R_KIND, ==, "vmm");
  g_assert_cmpuint (mt_get_le (c.bytes + R_HANDLE_TYPE, 4), ==,
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  g_assert_cmpuint (mt_get_le (c.bytes + R_LOCATION_TYPE, 4), ==, CU_MEM_LOCATION_TYPE_DEVICE);
  g_assert_cmpuint (mt_get_le (c.bytes + R_GRANULARITY, 8), ==, mt_device_granularity ());
  g_assert_cmpuint (mt_get_le (c.bytes + R_SIZE, 8), ==, 3 * mt_device_granularity ());
  g_assert_cmpuint (mt_get_le (c.bytes + R_N_CHUNKS, 4), ==, 3);
  g_assert_cmpuint (mt_get_le (c.bytes + R_RESERVED, 4), ==, 0);
  for (int i = 0; i < 3; i++)
    g_assert_cmpuint (mt_get_le (c.bytes + R_CHUNK_SIZES + 8 * i, 8), ==, mt_device_granularity ());
  c.fds[3] = dup (c.fds[0]); /* for "more fds" */

  /* Short and long messages. */
  expect_refused (importer, &c, SOCK_STREAM, c.bytes, 50, 3, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (importer, &c, SOCK_STREAM, c.bytes, c.len - 4, 3,
                  MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (importer, &c, SOCK_SEQPACKET, c.bytes, 50, 3, MEMRES_ERROR_INVALID_DESCRIPTOR);
  memcpy (rec, c.bytes, c.len);
  memset (rec + c.len, 0, 8);
  expect_refused (importer, &c, SOCK_SEQPACKET, rec, c.len + 8, 3, MEMRES_ERROR_INVALID_DESCRIPTOR);
  mt_put_le (rec + R_LENGTH, 10, 2);
  expect_refused (importer, &c, SOCK_STREAM, rec, c.len, 3, MEMRES_ERROR_INVALID_DESCRIPTOR);

  for (guint i = 0; i < G_N_ELEMENTS (forgeries); i++)
    for (guint t = 0; t < 2; t++)
      {
        int type = t == 0 ? SOCK_STREAM : SOCK_SEQPACKET;
        gsize len = c.len;
        int n_fds = 3;

        g_test_message ("forged: %s (%s)", forgeries[i].name,
                        type == SOCK_STREAM ? "stream" : "seqpacket");
        memcpy (rec, c.bytes, sizeof rec);
        forgeries[i].forge (rec, &len, &n_fds);
        expect_refused (importer, &c, type, rec, len, n_fds, forgeries[i].code);
      }

  /* A UUID that no device has. */
  memcpy (rec, c.bytes, c.len);
  rec[R_UUID] ^= 0xff;
  expect_refused (importer, &c, SOCK_STREAM, rec, c.len, 3, MEMRES_ERROR_WRONG_DEVICE);

  /* The control: the real message is accepted. */
  make_pair (SOCK_STREAM, sv);
  mt_send_raw (sv[0], c.bytes, c.len, c.fds, 3, TRUE);
  got = memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, &error);
  g_assert_no_error (error);
  close_pair (sv);
  check_pattern (got, 51);
  close_buffer (got);

  for (int i = 0; i < 4; i++)
    close (c.fds[i]);
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&importer, memres_resource_unref);
  if (mt_driver_is_fake ()) /* the real driver may keep fds of its own after a first import */
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

/* ---- one process: faults ------------------------------------------------------------------ */

typedef struct
{
  MemresResource *importer;
  MemresBuffer *buf;
  MemresBuffer *got;
} SweepData;

static gboolean
op_send_receive (gpointer data, GError **error)
{
  SweepData *d = data;

  d->got = loopback (d->buf, d->importer, error);
  return d->got != NULL;
}

static void
undo_receive (gpointer data)
{
  SweepData *d = data;

  check_pattern (d->got, 61);
  close_buffer (d->got);
  d->got = NULL;
}

/* Every driver call of send + receive fails in turn: each failure is reported, nothing leaks
 * (fake counts, fds), and the next attempt works. */
static void
test_faults (void)
{
  g_autoptr (MemresResource) mr = NULL;
  SweepData d = { 0 };
  FakeCudaCounts base;
  int n, fds;

  if (!require_device (1))
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  mt_fake_counts_begin (&base);
  mr = exporter_new ();
  d.importer = mt_new_printf_ok ("vmm:handle_type=posix_fd");
  d.buf = three_chunks (mr);
  write_pattern (d.buf, 61);
  fds = mt_count_open_fds ();
  n = mt_fault_sweep ("vmm send + receive", op_send_receive, undo_receive, &d, 0, NULL);
  /* 3 exports, 3 imports, reserve, 3 maps, set access (and the UUID queries) */
  g_assert_cmpint (n, >=, 11);
  n = mt_fault_sweep ("vmm send + receive (OS error)", op_send_receive, undo_receive, &d,
                      CUDA_ERROR_OPERATING_SYSTEM, NULL);
  g_assert_cmpint (n, >=, 11);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  close_buffer (d.buf);
  g_clear_pointer (&d.importer, memres_resource_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  /* The fake gets two devices (the wrong-device case); the real driver ignores this. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  if (argc >= 3 && strcmp (argv[1], "--child") == 0)
    return child_main (argv[2]);

  mt_init (&argc, &argv);
  g_test_add_func ("/vmm-ipc/roundtrip", test_roundtrip);
  g_test_add_func ("/vmm-ipc/cycles", test_cycles);
  g_test_add_func ("/vmm-ipc/send-refused", test_send_refused);
  g_test_add_func ("/vmm-ipc/too-many-chunks", test_too_many_chunks);
  g_test_add_func ("/vmm-ipc/imported", test_imported);
  g_test_add_func ("/vmm-ipc/through-adaptor", test_through_adaptor);
  g_test_add_func ("/vmm-ipc/shrunk", test_shrunk);
  g_test_add_func ("/vmm-ipc/importer-refused", test_importer_refused);
  g_test_add_func ("/vmm-ipc/forged", test_forged);
  g_test_add_func ("/vmm-ipc/faults", test_faults);
  return g_test_run ();
}
