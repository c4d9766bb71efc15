/* test-ipc-transport.c: MemresIpcHandle and its transport over AF_UNIX sockets (no driver):
 * framing, fd ownership, and who may send (every piece of a message checked for the sender's
 * uid, peers under uid 65534 when run as root), for handles and for the buffer message. */
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
  mt_send_raw (sv[0], data, len, fds, n_fds, TRUE);
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

/* The raw format is the documented one: a hand-made valid message, with the sender's
 * credentials attached as the documentation says, is accepted. */
static void
test_raw_valid (void)
{
  Header h = valid_header ();
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  int sv[2];
  int fd = make_memfd ("raw");

  make_pair (SOCK_STREAM, sv);
  mt_send_raw (sv[0], h.b, sizeof h.b, &fd, 1, TRUE);
  handle = memres_ipc_receive_handle (sv[1], &error);
  g_assert_no_error (error);
  assert_same_file (fd, memres_ipc_handle_get_fd (handle));
  close (fd);
  close_pair (sv);
}

/* The same hand-made message without SCM_CREDENTIALS, sent before the receiver turned
 * SO_PASSCRED on: nobody can tell who sent it, so it is refused (its fd closed) like a message
 * of another uid, and accepted with MEMRES_IPC_ALLOW_ANY_UID. A user who writes messages by
 * hand must attach credentials, as memres's own senders do. */
static void
no_credentials_round (int type)
{
  Header h = valid_header ();
  GError *error = NULL;
  MemresIpcHandle *handle;
  int sv[2];
  int fd = make_memfd ("anonymous");
  int before;

  make_pair (type, sv);
  before = mt_count_open_fds ();
  mt_send_raw (sv[0], h.b, sizeof h.b, &fd, 1, FALSE);
  g_assert_null (memres_ipc_receive_handle (sv[1], &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED);
  g_assert_nonnull (strstr (error->message, "without the sender's credentials"));
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, before);

  /* Again on a new pair, so that the message goes before SO_PASSCRED is on. */
  close_pair (sv);
  make_pair (type, sv);
  mt_send_raw (sv[0], h.b, sizeof h.b, &fd, 1, FALSE);
  handle = memres_ipc_receive_handle_with_flags (sv[1], MEMRES_IPC_ALLOW_ANY_UID, &error);
  g_assert_no_error (error);
  g_assert_nonnull (handle);
  assert_same_file (fd, memres_ipc_handle_get_fd (handle));
  memres_ipc_handle_free (handle);
  close (fd);
  close_pair (sv);
}

static void
test_no_credentials (void)
{
  no_credentials_round (SOCK_STREAM);
  no_credentials_round (SOCK_SEQPACKET);
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

static gboolean
require_root (void)
{
  if (geteuid () == 0)
    return TRUE;
  g_test_skip ("needs root to run a peer under another uid");
  return FALSE;
}

static void
test_other_uid (void)
{
  if (!require_root ())
    return;
  other_uid_round (MEMRES_IPC_NONE, FALSE);
  other_uid_round (MEMRES_IPC_ALLOW_ANY_UID, TRUE);
}

/* Forks a child that drops to uid and gid 65534 and sends @len bytes at @data on @sock in one
 * sendmsg() with a new memfd holding @text and, when @with_creds, its own credentials; waits
 * for it. The bytes are queued in the socket when this returns. The child makes no CUDA call. */
static void
send_as_other_uid (int sock, gconstpointer data, gsize len, const char *text, gboolean with_creds)
{
  int status;
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      int fd;

      if (setgid (65534) != 0 || setuid (65534) != 0)
        _exit (3);
      fd = make_memfd (text);
      mt_send_raw (sock, data, len, &fd, 1, with_creds);
      _exit (0);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
}

/* Receives one handle on @sock with @flags and asserts that it is refused with
 * PERMISSION_DENIED, the message naming @needle, and every fd that came closed. */
static void
expect_denied (int sock, MemresIpcFlags flags, const char *needle)
{
  GError *error = NULL;
  int before = mt_count_open_fds ();

  g_assert_null (memres_ipc_receive_handle_with_flags (sock, flags, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED);
  g_test_message ("refused: %s", error->message);
  g_assert_nonnull (strstr (error->message, needle));
  g_clear_error (&error);
  g_assert_cmpint (mt_count_open_fds (), ==, before);
}

/* Receives one handle on @sock with @flags, asserting that it is accepted and that its fd holds
 * @text. */
static void
expect_accepted (int sock, MemresIpcFlags flags, const char *text)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autofree char *content = NULL;
  GError *error = NULL;

  handle = memres_ipc_receive_handle_with_flags (sock, flags, &error);
  g_assert_no_error (error);
  g_assert_nonnull (handle);
  content = read_fd (memres_ipc_handle_get_fd (handle));
  g_assert_cmpstr (content, ==, text);
}

/* A peer under another uid writes a well-formed handle message with one fd and no
 * SCM_CREDENTIALS before the receiver enabled SO_PASSCRED, on a socket pair this process (root)
 * made: SO_PEERCRED names root, the message names nobody. Refused: only the message's own
 * credentials tell who sent it. */
static void
test_other_uid_no_credentials (void)
{
  Header h = valid_header ();
  int sv[2];

  if (!require_root ())
    return;
  make_pair (SOCK_STREAM, sv);
  send_as_other_uid (sv[0], h.b, sizeof h.b, "other", FALSE);
  expect_denied (sv[1], MEMRES_IPC_NONE, "piece 1 of the handle message (72 bytes at offset 0)");
  close_pair (sv);
}

/* Queues a stream message in two pieces on a new pair: this process writes the first 8 bytes of
 * the header (SO_PASSCRED is on, so the kernel attaches its credentials), a child under uid
 * 65534 the other 64 with the fd, attaching its credentials when @with_creds (otherwise the
 * kernel attaches them). The kernel delivers the pieces in two reads, each with its writer's
 * credentials. */
static void
queue_split_message (int sv[2], gboolean with_creds)
{
  Header h = valid_header ();
  int one = 1;

  make_pair (SOCK_STREAM, sv);
  g_assert_cmpint (setsockopt (sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), ==, 0);
  mt_send_raw (sv[0], h.b, 8, NULL, 0, FALSE);
  send_as_other_uid (sv[0], h.b + 8, sizeof h.b - 8, "other", with_creds);
}

/* Every piece is checked, not only the first: the second one's uid refuses the message. */
static void
test_other_uid_second_piece (void)
{
  int sv[2];

  if (!require_root ())
    return;
  for (int with_creds = 0; with_creds < 2; with_creds++)
    {
      queue_split_message (sv, with_creds);
      expect_denied (sv[1], MEMRES_IPC_NONE,
                     "piece 2 of the handle message (64 bytes at offset 8) was sent by pid");
      close_pair (sv);
    }
}

/* The same message with MEMRES_IPC_ALLOW_ANY_UID: accepted. */
static void
test_pieces_any_uid (void)
{
  int sv[2];

  if (!require_root ())
    return;
  for (int with_creds = 0; with_creds < 2; with_creds++)
    {
      queue_split_message (sv, with_creds);
      expect_accepted (sv[1], MEMRES_IPC_ALLOW_ANY_UID, "other");
      close_pair (sv);
    }
}

/* The first piece from another uid (explicit credentials), the rest, with the fd, from this
 * process: refused, and the whole message is taken off the stream, so that the next one is
 * read as it was sent. A foreign piece followed by the end of the stream is refused for its
 * uid, not for the truncation. */
static void
test_other_uid_first_piece (void)
{
  g_autoptr (MemresIpcHandle) next = make_handle ("next");
  Header h = valid_header ();
  GError *error = NULL;
  int sv[2], fd;

  if (!require_root ())
    return;
  make_pair (SOCK_STREAM, sv);
  send_as_other_uid (sv[0], h.b, 40, "other", TRUE);
  fd = make_memfd ("mine");
  mt_send_raw (sv[0], h.b + 40, sizeof h.b - 40, &fd, 1, TRUE);
  close (fd);
  g_assert_true (memres_ipc_send_handle (sv[0], next, &error));
  g_assert_no_error (error);
  expect_denied (sv[1], MEMRES_IPC_NONE,
                 "piece 1 of the handle message (40 bytes at offset 0) was sent by pid");
  expect_accepted (sv[1], MEMRES_IPC_NONE, "next");

  send_as_other_uid (sv[0], h.b, 40, "other", TRUE);
  shutdown (sv[0], SHUT_WR);
  expect_denied (sv[1], MEMRES_IPC_NONE, "was sent by pid");
  close_pair (sv);
}

/* A message in three pieces, all from this uid: the fd in the first (the kernel ends a read
 * after a piece that carries fds), the second with this process's explicit credentials, the
 * third with those the kernel attaches (SO_PASSCRED is on by then). Accepted. */
static void
test_pieces_same_uid (void)
{
  Header h = valid_header ();
  int sv[2], fd, one = 1;
  int before;

  make_pair (SOCK_STREAM, sv);
  before = mt_count_open_fds ();
  g_assert_cmpint (setsockopt (sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), ==, 0);
  fd = make_memfd ("pieces");
  mt_send_raw (sv[0], h.b, 8, &fd, 1, TRUE);
  close (fd);
  mt_send_raw (sv[0], h.b + 8, 32, NULL, 0, TRUE);
  mt_send_raw (sv[0], h.b + 40, sizeof h.b - 40, NULL, 0, FALSE);
  expect_accepted (sv[1], MEMRES_IPC_NONE, "pieces");
  g_assert_cmpint (mt_count_open_fds (), ==, before);
  close_pair (sv);
}

/* A buffer's layout record (memres_ipc_send_buffer()) goes through the same receive: sent by
 * another uid it is refused before the importer is even looked at. The control, the same
 * record from this uid, gets as far as the importer (a host resource, which cannot import
 * chunks: NOT_SUPPORTED). */
static void
test_buffer_other_uid (void)
{
  const guint64 gran = 2 << 20;
  guint8 rec[96] = { 'M', 'R', 'C', 'B', 1, 0, 96, 0, 'v', 'm', 'm' };
  g_autoptr (MemresResource) host = NULL;
  GError *error = NULL;
  int sv[2], fd, before;

  if (!require_root ())
    return;
  memcpy (rec + 40, device_uuid, MEMRES_IPC_ID_SIZE);
  rec[56] = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  rec[60] = CU_MEM_LOCATION_TYPE_DEVICE;
  for (int i = 0; i < 8; i++)
    {
      rec[64 + i] = (gran >> (8 * i)) & 0xff; /* granularity */
      rec[72 + i] = (gran >> (8 * i)) & 0xff; /* size */
      rec[88 + i] = (gran >> (8 * i)) & 0xff; /* the one chunk */
    }
  rec[80] = 1; /* n_chunks */
  host = mt_new_ok ("host");

  for (int t = 0; t < 2; t++)
    {
      int type = t == 0 ? SOCK_STREAM : SOCK_SEQPACKET;

      make_pair (type, sv);
      before = mt_count_open_fds ();
      send_as_other_uid (sv[0], rec, sizeof rec, "other", TRUE);
      g_assert_null (memres_ipc_receive_buffer (sv[1], host, MEMRES_IPC_NONE, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED);
      g_test_message ("refused: %s", error->message);
      g_assert_nonnull (strstr (error->message, "piece 1 of the buffer message"));
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, before);

      fd = make_memfd ("mine");
      mt_send_raw (sv[0], rec, sizeof rec, &fd, 1, TRUE);
      close (fd);
      g_assert_null (memres_ipc_receive_buffer (sv[1], host, MEMRES_IPC_NONE, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, before);
      close_pair (sv);
    }
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
  g_test_add_func ("/ipc-transport/receive/no-credentials", test_no_credentials);
  g_test_add_func ("/ipc-transport/receive/pieces-same-uid", test_pieces_same_uid);
  g_test_add_func ("/ipc-transport/receive/other-uid", test_other_uid);
  g_test_add_func ("/ipc-transport/receive/other-uid-no-credentials",
                   test_other_uid_no_credentials);
  g_test_add_func ("/ipc-transport/receive/other-uid-first-piece", test_other_uid_first_piece);
  g_test_add_func ("/ipc-transport/receive/other-uid-second-piece", test_other_uid_second_piece);
  g_test_add_func ("/ipc-transport/receive/pieces-any-uid", test_pieces_any_uid);
  g_test_add_func ("/ipc-transport/receive-buffer/other-uid", test_buffer_other_uid);
  g_test_add_func ("/ipc-transport/fd-count-flat", test_fd_count_flat);
  return g_test_run ();
}
