/* test-ipc-transport.c: MemresIpcHandle and its transport over AF_UNIX sockets (no driver). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memres/memres.h>
#include "testutil.h"

static const guint8 pool_id[MEMRES_IPC_ID_SIZE]
    = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const guint8 device_uuid[MEMRES_IPC_ID_SIZE]
    = { 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42 };

/* A memfd holding @text, standing in for a pool's shareable handle. */
static int
make_memfd (const char *text)
{
  int fd = memfd_create ("test-ipc-transport", MFD_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, text, strlen (text)), ==, (gssize) strlen (text));
  return fd;
}

static MemresIpcHandle *
make_handle (const char *text)
{
  GError *error = NULL;
  int fd = make_memfd (text);
  MemresIpcHandle *handle = memres_ipc_handle_new ("ipc", fd, pool_id, device_uuid, &error);
  g_assert_no_error (error);
  g_assert_nonnull (handle);
  g_assert_cmpint (memres_ipc_handle_get_fd (handle), ==, fd);
  return handle;
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

/* Reads the whole content of @fd from offset 0. */
static char *
read_fd (int fd)
{
  char buf[256];
  gssize n = pread (fd, buf, sizeof buf - 1, 0);
  g_assert_cmpint (n, >=, 0);
  buf[n] = '\0';
  return g_strdup (buf);
}

static void
assert_same_file (int a, int b)
{
  struct stat sa, sb;
  g_assert_cmpint (fstat (a, &sa), ==, 0);
  g_assert_cmpint (fstat (b, &sb), ==, 0);
  g_assert_cmpuint (sa.st_dev, ==, sb.st_dev);
  g_assert_cmpuint (sa.st_ino, ==, sb.st_ino);
}

static void
round_trip (int type)
{
  g_autoptr (MemresIpcHandle) sent = make_handle ("pool bytes");
  g_autoptr (MemresIpcHandle) received = NULL;
  g_autofree char *content = NULL;
  GError *error = NULL;
  int sv[2];
  int before = mt_count_open_fds ();
  int flags;

  make_pair (type, sv);
  g_assert_true (memres_ipc_send_handle (sv[0], sent, &error));
  g_assert_no_error (error);
  received = memres_ipc_receive_handle (sv[1], &error);
  g_assert_no_error (error);
  g_assert_nonnull (received);

  g_assert_cmpstr (memres_ipc_handle_get_kind (received), ==, "ipc");
  g_assert_cmpmem (memres_ipc_handle_get_pool_id (received), MEMRES_IPC_ID_SIZE, pool_id,
                   MEMRES_IPC_ID_SIZE);
  g_assert_cmpmem (memres_ipc_handle_get_device_uuid (received), MEMRES_IPC_ID_SIZE, device_uuid,
                   MEMRES_IPC_ID_SIZE);
  /* A new descriptor for the same file; the sender keeps its own. */
  g_assert_cmpint (memres_ipc_handle_get_fd (received), !=, memres_ipc_handle_get_fd (sent));
  assert_same_file (memres_ipc_handle_get_fd (received), memres_ipc_handle_get_fd (sent));
  content = read_fd (memres_ipc_handle_get_fd (received));
  g_assert_cmpstr (content, ==, "pool bytes");
  flags = fcntl (memres_ipc_handle_get_fd (received), F_GETFD);
  g_assert_true (flags & FD_CLOEXEC);

  g_clear_pointer (&received, memres_ipc_handle_free);
  close_pair (sv);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
}

static void
test_round_trip_stream (void)
{
  round_trip (SOCK_STREAM);
}

static void
test_round_trip_seqpacket (void)
{
  round_trip (SOCK_SEQPACKET);
}

static void
test_handle_new_invalid (void)
{
  GError *error = NULL;
  int fd = make_memfd ("x");
  int before;

  g_assert_null (memres_ipc_handle_new ("ipc", -1, pool_id, device_uuid, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_null (memres_ipc_handle_new ("Bad Kind", fd, pool_id, device_uuid, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_ipc_handle_new ("a_kind_name_that_is_far_too_long_for_it", fd, pool_id,
                                        device_uuid, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* On failure the caller still owns the fd: it is open. */
  g_assert_cmpint (fcntl (fd, F_GETFD), !=, -1);

  before = mt_count_open_fds ();
  close (fd);
  g_assert_null (memres_ipc_handle_new ("ipc", fd, pool_id, device_uuid, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, before - 1);
}

static void
test_steal (void)
{
  MemresIpcHandle *handle = make_handle ("x");
  int fd = memres_ipc_handle_get_fd (handle);
  int before = mt_count_open_fds ();

  g_assert_cmpint (memres_ipc_handle_steal_fd (handle), ==, fd);
  g_assert_cmpint (memres_ipc_handle_get_fd (handle), ==, -1);
  g_assert_cmpint (memres_ipc_handle_steal_fd (handle), ==, -1);
  memres_ipc_handle_free (handle);
  /* free did not close the stolen fd */
  g_assert_cmpint (fcntl (fd, F_GETFD), !=, -1);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
  close (fd);
}

static void
test_send_negative_fd (void)
{
  MemresIpcHandle *handle = make_handle ("x");
  GError *error = NULL;
  int sv[2];
  int stolen;

  make_pair (SOCK_STREAM, sv);
  stolen = memres_ipc_handle_steal_fd (handle);
  g_assert_false (memres_ipc_send_handle (sv[0], handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);
  close (stolen);

  /* Nothing was queued: the receiver sees end of stream once the sender is gone. */
  close (sv[0]);
  g_assert_null (memres_ipc_receive_handle (sv[1], &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_clear_error (&error);
  close (sv[1]);
}

static void
test_send_closed_fd (void)
{
  MemresIpcHandle *handle = make_handle ("x");
  GError *error = NULL;
  int sv[2];

  make_pair (SOCK_STREAM, sv);
  /* Closed behind the handle's back. */
  g_assert_cmpint (close (memres_ipc_handle_get_fd (handle)), ==, 0);
  g_assert_false (memres_ipc_send_handle (sv[0], handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  memres_ipc_handle_steal_fd (handle);
  memres_ipc_handle_free (handle);
  close_pair (sv);
}

static void
test_bad_socket (void)
{
  g_autoptr (MemresIpcHandle) handle = make_handle ("x");
  GError *error = NULL;
  int pipefd[2];
  int inet;

  g_assert_false (memres_ipc_send_handle (-1, handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_ipc_receive_handle (-5, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_cmpint (pipe (pipefd), ==, 0);
  g_assert_false (memres_ipc_send_handle (pipefd[1], handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_ipc_receive_handle (pipefd[0], &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  close (pipefd[0]);
  close (pipefd[1]);

  inet = socket (AF_INET, SOCK_STREAM, 0);
  if (inet >= 0)
    {
      g_assert_false (memres_ipc_send_handle (inet, handle, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      close (inet);
    }
}

static void
test_peer_closed (void)
{
  g_autoptr (MemresIpcHandle) handle = make_handle ("x");
  GError *error = NULL;
  int sv[2];

  make_pair (SOCK_STREAM, sv);
  close (sv[1]);
  g_assert_false (memres_ipc_send_handle (sv[0], handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_clear_error (&error);
  close (sv[0]);
}

/* The wire header, written out here independently of the library (a second reading of the
 * documented format): magic "MRIH", version 1, length 72, kind[32], pool_id[16], uuid[16]. */
typedef struct
{
  guint8 b[72];
} Header;

static Header
valid_header (void)
{
  Header h;
  memset (&h, 0, sizeof h);
  memcpy (h.b, "MRIH", 4);
  h.b[4] = 1;
  h.b[6] = 72;
  memcpy (h.b + 8, "ipc", 3);
  memcpy (h.b + 40, pool_id, 16);
  memcpy (h.b + 56, device_uuid, 16);
  return h;
}

/* Sends @len bytes with @n_fds fds attached, raw. */
static void
raw_send (int sock, const void *data, gsize len, const int *fds, int n_fds)
{
  struct iovec iov = { (void *) data, len };
  struct msghdr msg = { 0 };
  g_autofree char *control = NULL;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (n_fds > 0)
    {
      struct cmsghdr *cmsg;
      control = g_malloc0 (CMSG_SPACE (sizeof (int) * n_fds));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE (sizeof (int) * n_fds);
      cmsg = CMSG_FIRSTHDR (&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int) * n_fds);
      memcpy (CMSG_DATA (cmsg), fds, sizeof (int) * n_fds);
    }
  g_assert_cmpint (sendmsg (sock, &msg, MSG_NOSIGNAL), ==, (gssize) len);
}

/* Sends a raw message and asserts that receiving it fails with @code, leaving this process
 * with exactly the fds it had before (every received fd closed). */
static void
expect_refused (int type, const void *data, gsize len, int n_fds, gboolean close_after, int code)
{
  GError *error = NULL;
  int sv[2];
  int fds[32];
  int before;

  g_assert_cmpint (n_fds, <=, (int) G_N_ELEMENTS (fds));
  make_pair (type, sv);
  for (int i = 0; i < n_fds; i++)
    fds[i] = make_memfd ("x");
  raw_send (sv[0], data, len, fds, n_fds);
  for (int i = 0; i < n_fds; i++)
    close (fds[i]);
  if (close_after)
    shutdown (sv[0], SHUT_WR);
  before = mt_count_open_fds ();
  g_assert_null (memres_ipc_receive_handle (sv[1], &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
  close_pair (sv);
}

static void
test_truncated (void)
{
  Header h = valid_header ();

  /* A stream that ends inside the header. */
  expect_refused (SOCK_STREAM, h.b, 10, 1, TRUE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (SOCK_STREAM, h.b, 71, 1, TRUE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  /* A record that is too short. */
  expect_refused (SOCK_SEQPACKET, h.b, 40, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

static void
test_oversized (void)
{
  guint8 big[100];
  Header h = valid_header ();

  memset (big, 0, sizeof big);
  memcpy (big, h.b, sizeof h.b);
  expect_refused (SOCK_SEQPACKET, big, sizeof big, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

static void
test_no_fd (void)
{
  Header h = valid_header ();

  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 0, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (SOCK_SEQPACKET, h.b, sizeof h.b, 0, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

static void
test_extra_fds (void)
{
  Header h = valid_header ();

  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 2, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  expect_refused (SOCK_SEQPACKET, h.b, sizeof h.b, 3, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  /* More than the receiver makes room for: the kernel truncates the control data. */
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 20, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

static void
test_bad_header (void)
{
  Header h;

  h = valid_header ();
  h.b[0] = 'X';
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  h.b[4] = 2;
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  h.b[6] = 71;
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  memcpy (h.b + 8, "IPC", 3); /* not a kind name */
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  memset (h.b + 8, 'a', 32); /* no terminating NUL */
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  h.b[8 + 20] = 'z'; /* garbage after the NUL */
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
  h = valid_header ();
  memset (h.b + 8, 0, 32); /* empty kind */
  expect_refused (SOCK_STREAM, h.b, sizeof h.b, 1, FALSE, MEMRES_ERROR_INVALID_DESCRIPTOR);
}

/* The raw format is the documented one: a hand-made valid message is accepted. */
static void
test_raw_valid (void)
{
  Header h = valid_header ();
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  int sv[2];
  int fd = make_memfd ("raw");

  make_pair (SOCK_STREAM, sv);
  raw_send (sv[0], h.b, sizeof h.b, &fd, 1);
  handle = memres_ipc_receive_handle (sv[1], &error);
  g_assert_no_error (error);
  assert_same_file (fd, memres_ipc_handle_get_fd (handle));
  close (fd);
  close_pair (sv);
}

/* Two handles queued back to back on a stream arrive as two handles. */
static void
test_back_to_back (void)
{
  g_autoptr (MemresIpcHandle) a = make_handle ("first");
  g_autoptr (MemresIpcHandle) b = make_handle ("second");
  g_autoptr (MemresIpcHandle) ra = NULL;
  g_autoptr (MemresIpcHandle) rb = NULL;
  g_autofree char *ca = NULL;
  g_autofree char *cb = NULL;
  GError *error = NULL;
  int sv[2];

  make_pair (SOCK_STREAM, sv);
  g_assert_true (memres_ipc_send_handle (sv[0], a, &error));
  g_assert_true (memres_ipc_send_handle (sv[0], b, &error));
  g_assert_no_error (error);
  ra = memres_ipc_receive_handle (sv[1], &error);
  g_assert_no_error (error);
  rb = memres_ipc_receive_handle (sv[1], &error);
  g_assert_no_error (error);
  ca = read_fd (memres_ipc_handle_get_fd (ra));
  cb = read_fd (memres_ipc_handle_get_fd (rb));
  g_assert_cmpstr (ca, ==, "first");
  g_assert_cmpstr (cb, ==, "second");
  close_pair (sv);
}

/* A child that drops to another uid sends a handle; by default the receiver refuses it. */
static void
other_uid_round (MemresIpcFlags flags, gboolean expect_ok)
{
  GError *error = NULL;
  MemresIpcHandle *received;
  int sv[2];
  int status;
  int before;
  pid_t pid;

  make_pair (SOCK_STREAM, sv);
  before = mt_count_open_fds ();
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      MemresIpcHandle *handle;
      close (sv[1]);
      if (setgid (65534) != 0 || setuid (65534) != 0)
        _exit (3);
      gboolean sent;

      handle = memres_ipc_handle_new ("ipc", make_memfd ("other"), pool_id, device_uuid, NULL);
      sent = handle != NULL && memres_ipc_send_handle (sv[0], handle, NULL);
      g_clear_pointer (&handle, memres_ipc_handle_free);
      _exit (sent ? 0 : 4);
    }
  received = memres_ipc_receive_handle_with_flags (sv[1], flags, &error);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  if (expect_ok)
    {
      g_autofree char *content = NULL;
      g_assert_no_error (error);
      content = read_fd (memres_ipc_handle_get_fd (received));
      g_assert_cmpstr (content, ==, "other");
      memres_ipc_handle_free (received);
    }
  else
    {
      g_assert_null (received);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED);
      g_test_message ("refused: %s", error->message);
      g_clear_error (&error);
    }
  g_assert_cmpint (mt_count_open_fds (), ==, before);
  close_pair (sv);
}

static void
test_other_uid (void)
{
  if (geteuid () != 0)
    {
      g_test_skip ("needs root to run a peer under another uid");
      return;
    }
  other_uid_round (MEMRES_IPC_NONE, FALSE);
  other_uid_round (MEMRES_IPC_ALLOW_ANY_UID, TRUE);
}

static void
test_fd_count_flat (void)
{
  GError *error = NULL;
  int sv[2];
  int before;

  make_pair (SOCK_STREAM, sv);
  before = mt_count_open_fds ();
  for (int i = 0; i < 1000; i++)
    {
      MemresIpcHandle *sent = make_handle ("cycle");
      MemresIpcHandle *received;
      g_assert_true (memres_ipc_send_handle (sv[0], sent, &error));
      g_assert_no_error (error);
      received = memres_ipc_receive_handle (sv[1], &error);
      g_assert_no_error (error);
      g_assert_nonnull (received);
      memres_ipc_handle_free (sent);
      memres_ipc_handle_free (received);
    }
  g_assert_cmpint (mt_count_open_fds (), ==, before);
  close_pair (sv);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/ipc-transport/round-trip/stream", test_round_trip_stream);
  g_test_add_func ("/ipc-transport/round-trip/seqpacket", test_round_trip_seqpacket);
  g_test_add_func ("/ipc-transport/round-trip/raw-format", test_raw_valid);
  g_test_add_func ("/ipc-transport/round-trip/back-to-back", test_back_to_back);
  g_test_add_func ("/ipc-transport/handle/new-invalid", test_handle_new_invalid);
  g_test_add_func ("/ipc-transport/handle/steal", test_steal);
  g_test_add_func ("/ipc-transport/send/negative-fd", test_send_negative_fd);
  g_test_add_func ("/ipc-transport/send/closed-fd", test_send_closed_fd);
  g_test_add_func ("/ipc-transport/send/peer-closed", test_peer_closed);
  g_test_add_func ("/ipc-transport/bad-socket", test_bad_socket);
  g_test_add_func ("/ipc-transport/receive/truncated", test_truncated);
  g_test_add_func ("/ipc-transport/receive/oversized", test_oversized);
  g_test_add_func ("/ipc-transport/receive/no-fd", test_no_fd);
  g_test_add_func ("/ipc-transport/receive/extra-fds", test_extra_fds);
  g_test_add_func ("/ipc-transport/receive/bad-header", test_bad_header);
  g_test_add_func ("/ipc-transport/receive/other-uid", test_other_uid);
  g_test_add_func ("/ipc-transport/fd-count-flat", test_fd_count_flat);
  return g_test_run ();
}
