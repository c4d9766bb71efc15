/* test-ipc-procs.c: the ipc kind between real processes (suite ipc). The test process is the
 * exporter; each case starts a child by running this same program again
 * (`test-ipc-procs --child MODE`, fd 3 = its end of a socketpair), never by forking a process
 * that has CUDA state. The two talk with memres_ipc_send_handle() and small fixed messages. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define KiB      ((gsize) 1024)
#define MiB      (1024 * KiB)
#define CHILD_FD MT_CHILD_FD

enum
{
  OP_IMPORT = 1, /* import desc; seed = pattern to expect */
  OP_DONE,       /* reply: value = status (0 ok), fds = the child's open fds */
  OP_QUIT,
  OP_CYCLE, /* a handle precedes; import pool and buffer, check, release all */
  OP_HOLD,  /* the exporter child's buffer: import it and keep it */
};

typedef struct
{
  guint32 op;
  guint32 seed;
  gint64 value;
  gint64 fds;
  guint8 desc[MEMRES_BUFFER_DESCRIPTOR_SIZE];
} Msg;

static void
send_msg (int sock, guint32 op, guint32 seed, gint64 value, const MemresBufferDescriptor *desc)
{
  Msg m;

  memset (&m, 0, sizeof m);
  m.op = op;
  m.seed = seed;
  m.value = value;
  m.fds = mt_count_open_fds ();
  if (desc != NULL)
    memcpy (m.desc, desc->bytes, sizeof m.desc);
  mt_send_all (sock, &m, sizeof m);
}

static Msg
recv_msg (int sock)
{
  Msg m;

  mt_recv_all (sock, &m, sizeof m);
  return m;
}

/* ---- the child ---------------------------------------------------------------------------- */

static MemresResource *
child_import_pool (int sock, MemresIpcFlags flags)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  MemresResource *mr;

  handle = memres_ipc_receive_handle_with_flags (sock, flags, &error);
  g_assert_no_error (error);
  mr = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IMPORTED);
  return mr;
}

static MemresBuffer *
child_import_buffer (MemresResource *mr, const Msg *m)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_buffer_import (mr, m->desc, sizeof m->desc, NULL, &error);

  g_assert_no_error (error);
  return buf;
}

/* Imports, checks the exporter's pattern, writes the next one back. */
static int
child_roundtrip (int sock)
{
  g_autoptr (MemresResource) mr = child_import_pool (sock, MEMRES_IPC_NONE);
  Msg m = recv_msg (sock);
  MemresBuffer *buf;
  gsize size;

  g_assert_cmpuint (m.op, ==, OP_IMPORT);
  buf = child_import_buffer (mr, &m);
  size = memres_buffer_get_size (buf);
  g_assert_cmpuint (size, ==, (gsize) m.value);
  {
    GError *error = NULL;
    g_assert_null (memres_resource_allocate (mr, 4096, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
  }
  mt_check_pattern (buf, 0, size, m.seed, NULL);
  mt_write_pattern (buf, 0, size, m.seed + 1, NULL);
  /* Importers release before the exporter frees (the driver's rule). */
  g_assert_true (memres_buffer_close (buf, NULL, NULL));
  memres_buffer_unref (buf);
  mt_sync_ok (NULL);
  send_msg (sock, OP_DONE, 0, 0, NULL);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

/* Two imports of one buffer: one mapping; closing one keeps the other valid. */
static int
child_dedup (int sock)
{
  g_autoptr (MemresResource) mr = child_import_pool (sock, MEMRES_IPC_NONE);
  Msg m = recv_msg (sock);
  MemresBuffer *a, *b;
  gsize size = (gsize) m.value;
  gboolean same;

  a = child_import_buffer (mr, &m);
  b = child_import_buffer (mr, &m);
  same = a != b && memres_buffer_get_address (a) == memres_buffer_get_address (b);
  g_assert_true (memres_buffer_close (a, NULL, NULL));
  memres_buffer_unref (a);
  mt_sync_ok (NULL);
  mt_check_pattern (b, 0, size, m.seed, NULL);
  mt_write_pattern (b, 0, size, m.seed + 1, NULL);
  memres_buffer_unref (b);
  mt_sync_ok (NULL);
  send_msg (sock, OP_DONE, 0, same ? 0 : 1, NULL);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

/* The child as the exporter that exits while its importer (the parent) holds a buffer. */
static int
child_exporter (int sock)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  GError *error = NULL;
  Msg m;

  mr = mt_new_ok ("ipc:device=0");
  handle = memres_resource_export_handle (mr, &error);
  g_assert_no_error (error);
  g_assert_true (memres_ipc_send_handle (sock, handle, &error));
  buf = mt_alloc_ok (mr, 1 * MiB, NULL);
  mt_write_pattern (buf, 0, 1 * MiB, 77, NULL);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  send_msg (sock, OP_HOLD, 77, 1 * MiB, &desc);
  m = recv_msg (sock); /* the importer holds the buffer now */
  g_assert_cmpuint (m.op, ==, OP_DONE);
  /* Exit without closing anything: the process's end frees it all. */
  _exit (0);
}

static int
child_cycles (int sock)
{
  for (;;)
    {
      Msg m = recv_msg (sock);
      MemresResource *mr;
      MemresBuffer *buf;
      guint32 word = 0;
      GError *error = NULL;

      if (m.op != OP_CYCLE)
        break;
      mr = child_import_pool (sock, MEMRES_IPC_NONE);
      m = recv_msg (sock);
      buf = child_import_buffer (mr, &m);
      g_assert_true (memres_buffer_read (buf, 0, &word, sizeof word, NULL, &error));
      g_assert_no_error (error);
      mt_sync_ok (NULL);
      memres_buffer_unref (buf);
      memres_resource_unref (mr);
      mt_sync_ok (NULL);
      send_msg (sock, OP_DONE, 0, word == m.seed ? 0 : 1, NULL);
    }
  return 0;
}

/* Runs as uid 65534: refuses the root parent's handle by default, accepts it when told to. */
static int
child_other_uid (int sock)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresKind) kind = NULL;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  Msg m;

  /* Load what needs files before giving up root (the build tree may be root's only). */
  g_assert_nonnull (memres_cuda_get_driver (&error));
  kind = memres_registry_lookup ("ipc", &error);
  g_assert_no_error (error);
  if (setgid (65534) != 0 || setuid (65534) != 0)
    g_error ("setuid: %s", g_strerror (errno));
  prctl (PR_SET_DUMPABLE, 1); /* keep /proc/self readable by ourselves */

  handle = memres_ipc_receive_handle (sock, &error);
  g_assert_null (handle);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED);
  g_clear_error (&error);
  send_msg (sock, OP_DONE, 0, 0, NULL);

  mr = child_import_pool (sock, MEMRES_IPC_ALLOW_ANY_UID);
  m = recv_msg (sock);
  buf = child_import_buffer (mr, &m);
  mt_check_pattern (buf, 0, (gsize) m.value, m.seed, NULL);
  memres_buffer_unref (buf);
  memres_resource_unref (mr);
  mt_sync_ok (NULL);
  send_msg (sock, OP_DONE, 0, 0, NULL);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

/* Imports on the exporter's device, grants device 1 access, copies into device 1 memory. */
static int
child_peer (int sock)
{
  g_autoptr (MemresResource) mr = child_import_pool (sock, MEMRES_IPC_NONE);
  g_autoptr (MemresResource) other = NULL;
  MemresAccessDesc access = { 1, MEMRES_ACCESS_READWRITE };
  MemresBuffer *buf, *copy;
  GError *error = NULL;
  Msg m = recv_msg (sock);
  gint64 status = 0;

  buf = child_import_buffer (mr, &m);
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  if (!memres_resource_set_access (mr, &access, 1, &error))
    {
      /* no peer access between the two devices */
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      status = 2;
    }
  else
    {
      other = mt_new_ok ("dmr:device=1");
      copy = mt_alloc_ok (other, (gsize) m.value, NULL);
      g_assert_true (memres_buffer_copy_to (buf, copy, NULL, &error));
      g_assert_no_error (error);
      mt_sync_ok (NULL);
      mt_check_pattern (copy, 0, (gsize) m.value, m.seed, NULL);
      memres_buffer_unref (copy);
    }
  memres_buffer_unref (buf);
  mt_sync_ok (NULL);
  send_msg (sock, OP_DONE, 0, status, NULL);
  g_assert_cmpuint (recv_msg (sock).op, ==, OP_QUIT);
  return 0;
}

static int
child_main (const char *mode)
{
  static const struct
  {
    const char *name;
    int (*run) (int sock);
  } modes[] = {
    { "roundtrip", child_roundtrip }, { "dedup", child_dedup },
    { "exporter", child_exporter },   { "cycles", child_cycles },
    { "other-uid", child_other_uid }, { "peer", child_peer },
  };

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    if (strcmp (modes[i].name, mode) == 0)
      return modes[i].run (CHILD_FD);
  g_printerr ("unknown child mode %s\n", mode);
  return 2;
}

/* ---- the parent --------------------------------------------------------------------------- */

typedef struct
{
  GPid pid;
  int sock;
} Child;

static Child
spawn_child (const char *mode)
{
  Child c;

  c.pid = mt_spawn_child (mode, &c.sock);
  return c;
}

static void
wait_child (Child *c)
{
  mt_wait_child (c->pid, c->sock);
}

static void
send_pool (Child *c, MemresResource *mr)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;

  handle = memres_resource_export_handle (mr, &error);
  g_assert_no_error (error);
  g_assert_true (memres_ipc_send_handle (c->sock, handle, &error));
  g_assert_no_error (error);
}

static MemresBuffer *
alloc_export (MemresResource *mr, gsize size, guint32 seed, MemresBufferDescriptor *desc)
{
  GError *error = NULL;
  MemresBuffer *buf = mt_alloc_ok (mr, size, NULL);

  mt_write_pattern (buf, 0, size, seed, NULL);
  g_assert_true (memres_buffer_export (buf, desc, &error));
  g_assert_no_error (error);
  return buf;
}

/* Data both ways: the child reads the parent's bytes and writes its own back. */
static void
test_roundtrip (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  FakeCudaCounts base;
  Child c;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("ipc:device=0");
  c = spawn_child ("roundtrip");
  send_pool (&c, mr);
  buf = alloc_export (mr, 2 * MiB, 21, &desc);
  send_msg (c.sock, OP_IMPORT, 21, 2 * MiB, &desc);
  g_assert_cmpuint (recv_msg (c.sock).op, ==, OP_DONE);
  mt_check_pattern (buf, 0, 2 * MiB, 22, NULL);
  send_msg (c.sock, OP_QUIT, 0, 0, NULL);
  wait_child (&c);
  memres_buffer_unref (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_dedup (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  Msg m;
  Child c;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("ipc:device=0");
  c = spawn_child ("dedup");
  send_pool (&c, mr);
  buf = alloc_export (mr, 256 * KiB, 31, &desc);
  send_msg (c.sock, OP_IMPORT, 31, 256 * KiB, &desc);
  m = recv_msg (c.sock);
  g_assert_cmpuint (m.op, ==, OP_DONE);
  g_assert_cmpint (m.value, ==, 0); /* two buffers, one address */
  mt_check_pattern (buf, 0, 256 * KiB, 32, NULL);
  send_msg (c.sock, OP_QUIT, 0, 0, NULL);
  wait_child (&c);
  memres_buffer_unref (buf);
}

/* The exporter (a child) exits while this process holds an imported buffer: the bytes stay
 * readable here until this process releases them, and releasing does not crash. */
static void
test_exporter_exits (void)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresResource *mr;
  MemresBuffer *held;
  GError *error = NULL;
  FakeCudaCounts base;
  int fds;
  Msg m;
  Child c;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  c = spawn_child ("exporter");
  handle = memres_ipc_receive_handle (c.sock, &error);
  g_assert_no_error (error);
  mr = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  m = recv_msg (c.sock);
  g_assert_cmpuint (m.op, ==, OP_HOLD);
  held = memres_buffer_import (mr, m.desc, sizeof m.desc, NULL, &error);
  g_assert_no_error (error);
  send_msg (c.sock, OP_DONE, 0, 0, NULL);
  wait_child (&c); /* the exporter is gone */

  mt_check_pattern (held, 0, 1 * MiB, 77, NULL);
  if (!memres_buffer_close (held, NULL, &error))
    {
      g_test_message ("closing after the exporter exited: %s", error->message);
      g_clear_error (&error);
    }
  memres_buffer_unref (held);
  memres_resource_unref (mr);
  memres_stream_synchronize (NULL, NULL);
  /* (The real driver may keep fds of its own open after a first import: count on the fake.) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

static int
n_cycles (void)
{
  const char *env = g_getenv ("MEMRES_TEST_IPC_CYCLES");

  if (env != NULL)
    return atoi (env);
  return 10000;
}

/* export -> send -> import -> close, many times: both processes' fd counts stay flat. */
static void
test_cycles (void)
{
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  int n = n_cycles ();
  gint64 child_fds = -1;
  int fds;
  Child c;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("ipc:device=0");
  c = spawn_child ("cycles");
  mt_counts_snapshot (&base);
  fds = -1;
  for (int i = 0; i < n; i++)
    {
      MemresBufferDescriptor desc;
      MemresBuffer *buf;
      GError *error = NULL;
      Msg m;

      buf = mt_alloc_ok (mr, 4096, NULL);
      g_assert_true (memres_buffer_fill (buf, (guint32) i, 4, NULL, &error));
      mt_sync_ok (NULL);
      if (!memres_buffer_export (buf, &desc, &error))
        g_error ("cycle %d: %s", i, error->message);
      send_msg (c.sock, OP_CYCLE, 0, 0, NULL);
      send_pool (&c, mr);
      send_msg (c.sock, OP_IMPORT, (guint32) i, 4096, &desc);
      m = recv_msg (c.sock);
      g_assert_cmpuint (m.op, ==, OP_DONE);
      g_assert_cmpint (m.value, ==, 0);
      if (child_fds < 0)
        child_fds = m.fds; /* after the first cycle: libraries loaded, driver up */
      else if (m.fds != child_fds)
        g_error ("cycle %d: the child has %" G_GINT64_FORMAT " fds open, %" G_GINT64_FORMAT
                 " after the first cycle",
                 i, m.fds, child_fds);
      memres_buffer_unref (buf);
      if (fds < 0)
        fds = mt_count_open_fds (); /* after the first cycle, as for the child */
      else if (mt_count_open_fds () != fds)
        g_error ("cycle %d: %d fds open, %d after the first cycle", i, mt_count_open_fds (), fds);
    }
  send_msg (c.sock, OP_QUIT, 0, 0, NULL);
  wait_child (&c);
  mt_sync_ok (NULL);
  g_test_message ("%d cycles; fds: parent %d, child %" G_GINT64_FORMAT, n, fds, child_fds);
  mt_assert_fake_counts_equal (&base);
}

/* A peer of another uid: refused by default, accepted with MEMRES_IPC_ALLOW_ANY_UID. */
static void
test_other_uid (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  Child c;

  if (!mt_require_devices (1))
    return;
  if (geteuid () != 0)
    {
      g_test_skip ("needs root to run a peer under another uid");
      return;
    }
  mr = mt_new_ok ("ipc:device=0");
  c = spawn_child ("other-uid");
  send_pool (&c, mr);
  g_assert_cmpuint (recv_msg (c.sock).op, ==, OP_DONE); /* refused */
  send_pool (&c, mr);
  buf = alloc_export (mr, 16 * KiB, 51, &desc);
  send_msg (c.sock, OP_IMPORT, 51, 16 * KiB, &desc);
  g_assert_cmpuint (recv_msg (c.sock).op, ==, OP_DONE); /* accepted, bytes checked */
  send_msg (c.sock, OP_QUIT, 0, 0, NULL);
  wait_child (&c);
  memres_buffer_unref (buf);
}

/* Two GPUs: the importer maps the pool on the exporter's device (found by UUID) and reads it
 * from the other device through peer access. */
static void
test_peer (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  Msg m;
  Child c;

  if (!mt_require_devices (2))
    return;
  mr = mt_new_ok ("ipc:device=0");
  c = spawn_child ("peer");
  send_pool (&c, mr);
  buf = alloc_export (mr, 1 * MiB, 61, &desc);
  send_msg (c.sock, OP_IMPORT, 61, 1 * MiB, &desc);
  m = recv_msg (c.sock);
  g_assert_cmpuint (m.op, ==, OP_DONE);
  send_msg (c.sock, OP_QUIT, 0, 0, NULL);
  wait_child (&c);
  memres_buffer_unref (buf);
  if (m.value == 2)
    g_test_skip ("devices 0 and 1 have no peer access");
  else
    g_assert_cmpint (m.value, ==, 0);
}

int
main (int argc, char **argv)
{
  /* The fake gets two devices (the peer case); the real driver ignores this. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  if (argc >= 3 && strcmp (argv[1], "--child") == 0)
    return child_main (argv[2]);

  mt_init (&argc, &argv);
  g_test_add_func ("/ipc-procs/roundtrip", test_roundtrip);
  g_test_add_func ("/ipc-procs/dedup", test_dedup);
  g_test_add_func ("/ipc-procs/exporter-exits", test_exporter_exits);
  g_test_add_func ("/ipc-procs/cycles", test_cycles);
  g_test_add_func ("/ipc-procs/other-uid", test_other_uid);
  g_test_add_func ("/ipc-procs/peer", test_peer);
  return g_test_run ();
}
