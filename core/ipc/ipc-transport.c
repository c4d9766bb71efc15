/* memres - CUDA memory resources
 * ipc-transport.c: messages with file descriptors over a connected AF_UNIX socket, and the
 * MemresIpcHandle message on top of them. One message: a versioned record with the fds in
 * SCM_RIGHTS and the sender's credentials in SCM_CREDENTIALS. The receiver trusts nothing:
 * every piece of a message (every recvmsg()) must carry credentials of its uid, and every fd
 * that arrives has exactly one owner, the caller or close(). ipc-chunks.c sends whole buffers
 * the same way. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc-private.h"

/* Wire header, little-endian, 72 bytes: magic u32 'MRIH', version u16, length u16 (72),
 * kind char[32] (NUL-padded), pool_id[16], device_uuid[16]. */
#define HANDLE_MAGIC   MEMRES_HANDLE_MAGIC
#define HANDLE_VERSION 1
enum
{
  H_OFF_MAGIC = 0,
  H_OFF_VERSION = 4,
  H_OFF_LENGTH = 6,
  H_OFF_KIND = 8,
  H_OFF_POOL_ID = H_OFF_KIND + MEMRES_KIND_NAME_MAX,
  H_OFF_DEVICE_UUID = H_OFF_POOL_ID + MEMRES_IPC_ID_SIZE,
  HEADER_SIZE = H_OFF_DEVICE_UUID + MEMRES_IPC_ID_SIZE, /* 72 */
};
G_STATIC_ASSERT (HEADER_SIZE == MEMRES_HANDLE_RECORD_SIZE);

/* Room for one more fd than any message carries, so that a message with too many is seen (and
 * every fd closed) rather than truncated, plus the credentials. */
#define MAX_FDS      (MEMRES_IPC_MAX_CHUNKS + 1)
#define CONTROL_SIZE (CMSG_SPACE (sizeof (int) * MAX_FDS) + CMSG_SPACE (sizeof (struct ucred)))

static gboolean
check_socket (gint socket_fd, gint *type, GError **error)
{
  struct sockaddr_storage addr;
  socklen_t len = sizeof addr;
  socklen_t type_len = sizeof *type;

  if (socket_fd < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC transport: socket descriptor %d is negative", socket_fd);
      return FALSE;
    }
  memset (&addr, 0, sizeof addr);
  if (getsockname (socket_fd, (struct sockaddr *) &addr, &len) != 0
      || getsockopt (socket_fd, SOL_SOCKET, SO_TYPE, type, &type_len) != 0)
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC transport: descriptor %d is not a socket: %s", socket_fd,
                   g_strerror (saved));
      return FALSE;
    }
  if (addr.ss_family != AF_UNIX)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC transport: socket %d is not an AF_UNIX socket (family %d)", socket_fd,
                   addr.ss_family);
      return FALSE;
    }
  return TRUE;
}

gboolean
_memres_ipc_check_socket (gint socket_fd, GError **error)
{
  gint type;

  return check_socket (socket_fd, &type, error);
}

gboolean
_memres_ipc_send_message (gint socket_fd, const char *what, const guint8 *data, gsize len,
                          const gint *fds, guint n_fds, GError **error)
{
  union
  {
    char
        buf[CMSG_SPACE (sizeof (int) * MEMRES_IPC_MAX_CHUNKS) + CMSG_SPACE (sizeof (struct ucred))];
    struct cmsghdr align;
  } control;
  struct iovec iov = { (void *) data, len };
  struct msghdr msg = { 0 };
  struct cmsghdr *cmsg;
  struct ucred creds;
  gint type;
  ssize_t sent;

  g_return_val_if_fail (n_fds <= MEMRES_IPC_MAX_CHUNKS, FALSE);

  if (!check_socket (socket_fd, &type, error))
    return FALSE;

  memset (&control, 0, sizeof control);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen
      = (n_fds > 0 ? CMSG_SPACE (sizeof (int) * n_fds) : 0) + CMSG_SPACE (sizeof creds);
  cmsg = CMSG_FIRSTHDR (&msg);
  if (n_fds > 0) /* a message of fabric handles has none */
    {
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int) * n_fds);
      memcpy (CMSG_DATA (cmsg), fds, sizeof (int) * n_fds);
      cmsg = CMSG_NXTHDR (&msg, cmsg);
    }
  /* Our own credentials, so that the receiver sees who sent this message even when it enabled
   * SO_PASSCRED after we connected; the kernel refuses values that are not ours. */
  creds.pid = getpid ();
  creds.uid = geteuid ();
  creds.gid = getegid ();
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_CREDENTIALS;
  cmsg->cmsg_len = CMSG_LEN (sizeof creds);
  memcpy (CMSG_DATA (cmsg), &creds, sizeof creds);

  do
    sent = sendmsg (socket_fd, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent < 0)
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "IPC transport: sending the %s failed: sendmsg: %s", what, g_strerror (saved));
      return FALSE;
    }
  if ((gsize) sent != len)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "IPC transport: sent only %zd of %" G_GSIZE_FORMAT " bytes of the %s", sent, len,
                   what);
      return FALSE;
    }
  return TRUE;
}

/* The handle record of @handle (see ipc-private.h). */
void
_memres_ipc_handle_encode (const MemresIpcHandle *handle, guint8 record[MEMRES_HANDLE_RECORD_SIZE])
{
  const char *kind = memres_ipc_handle_get_kind (handle);

  memset (record, 0, MEMRES_HANDLE_RECORD_SIZE);
  _memres_put_le (record + H_OFF_MAGIC, HANDLE_MAGIC, 4);
  _memres_put_le (record + H_OFF_VERSION, HANDLE_VERSION, 2);
  _memres_put_le (record + H_OFF_LENGTH, HEADER_SIZE, 2);
  memcpy (record + H_OFF_KIND, kind, strnlen (kind, MEMRES_KIND_NAME_MAX - 1));
  memcpy (record + H_OFF_POOL_ID, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (record + H_OFF_DEVICE_UUID, memres_ipc_handle_get_device_uuid (handle),
          MEMRES_IPC_ID_SIZE);
}

/**
 * memres_ipc_send_handle:
 * @socket_fd: a connected `AF_UNIX` socket (stream or seqpacket)
 * @handle: (transfer none): the handle to send; it keeps its fd (the peer receives a duplicate)
 * @error: return location for a #GError
 *
 * Sends @handle to the peer in one sendmsg(): a small versioned header (kind, pool identity,
 * device UUID), the fd in `SCM_RIGHTS` and this process's credentials in `SCM_CREDENTIALS`.
 * Blocks while the socket's buffer is full (unless @socket_fd is non-blocking, which fails
 * with `EAGAIN`). Never raises `SIGPIPE` (`MSG_NOSIGNAL`). No driver call. Thread safety: safe
 * from any thread; concurrent sends on one socket are each one message but their order is
 * unspecified.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @socket_fd is not an `AF_UNIX` socket or the
 * handle's fd is negative (stolen) or not open; %MEMRES_ERROR_FAILED when sendmsg() fails
 * (for example because the peer closed the connection) or sends only part of the message.
 *
 * Returns: %TRUE when the whole message was sent
 *
 * Since: 1.0
 */
gboolean
memres_ipc_send_handle (gint socket_fd, const MemresIpcHandle *handle, GError **error)
{
  guint8 header[HEADER_SIZE];
  gint fd, type;

  g_return_val_if_fail (handle != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!check_socket (socket_fd, &type, error))
    return FALSE;
  fd = memres_ipc_handle_get_fd (handle);
  if (fd < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC transport: the handle holds no file descriptor (%d)", fd);
      return FALSE;
    }
  if (!_memres_fd_is_open (fd))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC transport: the handle's file descriptor %d is not open", fd);
      return FALSE;
    }

  _memres_ipc_handle_encode (handle, header);
  return _memres_ipc_send_message (socket_fd, "handle", header, sizeof header, &fd, 1, error);
}

/* The state of one receive: every fd that arrived, and what each piece is checked against. */
typedef struct
{
  GArray *fds;
  MemresIpcFlags flags;
  const char *what;
  gint type;       /* SOCK_STREAM, else read as datagrams */
  uid_t self;      /* this process's effective uid */
  guint n_pieces;  /* pieces received so far */
  GError *refusal; /* why the first refused piece was refused, or NULL */
} Received;

void
_memres_ipc_close_fds (GArray *fds)
{
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, int, i));
  g_array_set_size (fds, 0);
}

/* Appends every fd of @msg to @r->fds (all of them, so that all get closed whatever follows) and
 * returns the credentials that came with it, or NULL. pid 0 counts as none: the kernel had no
 * credentials for these bytes (the sender attached none and SO_PASSCRED was off when it sent). */
static const struct ucred *
collect_control (struct msghdr *msg, Received *r, struct ucred *creds)
{
  gboolean have_creds = FALSE;

  for (struct cmsghdr *c = CMSG_FIRSTHDR (msg); c != NULL; c = CMSG_NXTHDR (msg, c))
    {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_len < CMSG_LEN (0))
        continue;
      if (c->cmsg_type == SCM_RIGHTS)
        {
          gsize n = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
          for (gsize i = 0; i < n; i++)
            {
              int fd;
              memcpy (&fd, CMSG_DATA (c) + i * sizeof (int), sizeof fd);
              g_array_append_val (r->fds, fd);
            }
        }
      else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN (sizeof (struct ucred))
               && !have_creds)
        {
          memcpy (creds, CMSG_DATA (c), sizeof *creds);
          have_creds = creds->pid != 0;
        }
    }
  return have_creds ? creds : NULL;
}

/* Checks one piece of a message, the @n bytes at @offset of it, as it arrives: written by a
 * process of this uid (unless MEMRES_IPC_ALLOW_ANY_UID), and with all its control data. The
 * first refusal is kept in @r->refusal; the rest of the message is still read, so that the next
 * message on a stream stays readable, and the message is refused once read. */
static void
check_piece (Received *r, const struct msghdr *msg, const struct ucred *creds, gsize offset,
             gsize n)
{
  gboolean any_uid = (r->flags & MEMRES_IPC_ALLOW_ANY_UID) != 0;

  if (r->refusal != NULL)
    return;
  if (!any_uid && creds != NULL && creds->uid != r->self)
    g_set_error (&r->refusal, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                 "IPC transport: piece %u of the %s message (%" G_GSIZE_FORMAT
                 " bytes at offset %" G_GSIZE_FORMAT ") was sent by pid %d as uid %u, this "
                 "process runs as uid %u (pass MEMRES_IPC_ALLOW_ANY_UID to accept it)",
                 r->n_pieces, r->what, n, offset, (int) creds->pid, (unsigned) creds->uid,
                 (unsigned) r->self);
  else if (msg->msg_flags & MSG_CTRUNC)
    g_set_error (&r->refusal, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                 "IPC transport: invalid %s message: piece %u carries more control data than "
                 "a message does (more than %d fds)",
                 r->what, r->n_pieces, MAX_FDS);
  else if (!any_uid && creds == NULL)
    g_set_error (&r->refusal, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                 "IPC transport: piece %u of the %s message (%" G_GSIZE_FORMAT
                 " bytes at offset %" G_GSIZE_FORMAT ") came without the sender's credentials: "
                 "it was sent without SCM_CREDENTIALS before this socket had SO_PASSCRED on, so "
                 "who sent it is unknown (memres senders always attach theirs; pass "
                 "MEMRES_IPC_ALLOW_ANY_UID to accept it)",
                 r->n_pieces, r->what, n, offset);
}

/* One recvmsg of up to @len bytes into @buf, bytes @offset.. of the message, collecting its fds
 * and checking the piece (check_piece()). Returns the bytes read (@len + 1 for a datagram longer
 * than @len, which the caller refuses), 0 at end of stream, or -1 with @error set when recvmsg
 * failed. */
static gssize
receive_piece (gint socket_fd, guint8 *buf, gsize offset, gsize len, Received *r, GError **error)
{
  union
  {
    char buf[CONTROL_SIZE];
    struct cmsghdr align;
  } control;
  struct iovec iov = { buf, len };
  struct msghdr msg = { 0 };
  const struct ucred *creds;
  struct ucred storage;
  gssize n;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  do
    n = recvmsg (socket_fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int saved = errno;

      /* EAGAIN on a blocking socket: its receive timeout (SO_RCVTIMEO) ran out */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "IPC transport: receiving a %s failed: recvmsg: %s", r->what,
                   saved == EAGAIN || saved == EWOULDBLOCK
                       ? "timed out (the socket's receive timeout passed)"
                       : g_strerror (saved));
      return -1;
    }
  creds = collect_control (&msg, r, &storage);
  /* End of stream. A stream read of 0 bytes is one (the kernel may add empty credentials to it);
   * on a seqpacket socket, where SO_PASSCRED is on, every datagram, even an empty one, comes
   * with a credentials message. */
  if (n == 0 && (r->type == SOCK_STREAM || msg.msg_controllen == 0))
    return 0;
  r->n_pieces++;
  check_piece (r, &msg, creds, offset, (gsize) n);
  if (msg.msg_flags & MSG_TRUNC)
    return (gssize) len + 1;
  return n;
}

/* Checks who holds the other end of the socket (SO_PEERCRED: who created or connected it), on
 * top of the pieces' senders. */
static gboolean
check_peer (gint socket_fd, const Received *r, GError **error)
{
  struct ucred peer;
  socklen_t len = sizeof peer;

  if (r->flags & MEMRES_IPC_ALLOW_ANY_UID)
    return TRUE;
  if (getsockopt (socket_fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || len < sizeof peer)
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                   "IPC transport: cannot read the peer's credentials (SO_PEERCRED): %s",
                   g_strerror (saved));
      return FALSE;
    }
  if (peer.uid != r->self)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                   "IPC transport: the peer (pid %d) runs as uid %u, this process as uid %u "
                   "(pass MEMRES_IPC_ALLOW_ANY_UID to accept it)",
                   (int) peer.pid, (unsigned) peer.uid, (unsigned) r->self);
      return FALSE;
    }
  return TRUE;
}

static gboolean
peer_closed (const char *what, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
               "IPC transport: the peer closed the connection before sending a %s", what);
  return FALSE;
}

static gboolean
truncated (const char *what, gsize have, gsize want, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
               "IPC transport: invalid %s message: truncated after %" G_GSIZE_FORMAT
               " of %" G_GSIZE_FORMAT " bytes",
               what, have, want);
  return FALSE;
}

/* Reads the bytes [have, want) of a message from a stream socket, piece by piece. */
static gboolean
read_stream (gint socket_fd, guint8 *buf, gsize have, gsize want, Received *r, GError **error)
{
  while (have < want)
    {
      gssize n = receive_piece (socket_fd, buf + have, have, want - have, r, error);

      if (n < 0)
        return FALSE;
      if (n == 0 && have == 0)
        return peer_closed (r->what, error);
      if (n == 0)
        return truncated (r->what, have, want, error);
      have += (gsize) n;
    }
  return TRUE;
}

/* Reads one datagram (seqpacket) of @header_len to @max_len bytes; *@len gets its length. */
static gboolean
read_datagram (gint socket_fd, guint8 *buf, gsize header_len, gsize max_len, gsize *len,
               Received *r, GError **error)
{
  gssize n = receive_piece (socket_fd, buf, 0, max_len, r, error);

  if (n < 0)
    return FALSE;
  if (n == 0 && r->n_pieces == 0)
    return peer_closed (r->what, error);
  if ((gsize) n > max_len)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid %s message: longer than %" G_GSIZE_FORMAT " bytes",
                   r->what, max_len);
      return FALSE;
    }
  if ((gsize) n < header_len)
    return truncated (r->what, (gsize) n, header_len, error);
  *len = (gsize) n;
  return TRUE;
}

gboolean
_memres_ipc_receive_message (gint socket_fd, MemresIpcFlags flags, const char *what, guint8 *buf,
                             gsize header_len, gsize max_len, MemresIpcLengthFunc length_of,
                             gsize *length, GArray *fds, GError **error)
{
  Received r = { 0 };
  GError *local = NULL;
  gsize total, got = 0;
  gint type;
  int one = 1;

  g_return_val_if_fail (fds != NULL && fds->len == 0, FALSE);
  g_return_val_if_fail (header_len > 0 && header_len <= max_len, FALSE);

  if (!check_socket (socket_fd, &type, error))
    return FALSE;
  r.fds = fds;
  r.type = type;
  r.flags = flags;
  r.what = what;
  r.self = geteuid ();
  /* Without it the kernel passes no credentials up, not even those the sender attached, and
   * every piece would be refused as anonymous. */
  if (setsockopt (socket_fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0
      && !(flags & MEMRES_IPC_ALLOW_ANY_UID))
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                   "IPC transport: cannot enable SO_PASSCRED on socket %d, so the sender of a "
                   "%s cannot be checked: %s",
                   socket_fd, what, g_strerror (saved));
      return FALSE;
    }

  if (type == SOCK_STREAM)
    {
      if (!read_stream (socket_fd, buf, 0, header_len, &r, &local))
        goto fail;
    }
  else if (!read_datagram (socket_fd, buf, header_len, max_len, &got, &r, &local))
    goto fail;

  total = length_of (buf);
  if (total < header_len || total > max_len)
    {
      g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid %s message: its header declares %" G_GSIZE_FORMAT
                   " bytes (%" G_GSIZE_FORMAT " to %" G_GSIZE_FORMAT " expected)",
                   what, total, header_len, max_len);
      goto fail;
    }
  if (type == SOCK_STREAM)
    {
      if (!read_stream (socket_fd, buf, header_len, total, &r, &local))
        goto fail;
    }
  else if (got != total)
    {
      g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid %s message: %" G_GSIZE_FORMAT
                   " bytes, its header declares %" G_GSIZE_FORMAT,
                   what, got, total);
      goto fail;
    }

  if (r.refusal != NULL || !check_peer (socket_fd, &r, &local))
    goto fail;
  *length = total;
  return TRUE;

fail:
  /* A refused piece is the reason, whatever went wrong after it. */
  if (r.refusal != NULL)
    {
      g_clear_error (&local);
      g_propagate_error (error, r.refusal);
    }
  else
    g_propagate_error (error, local);
  _memres_ipc_close_fds (fds);
  return FALSE;
}

MemresIpcHandle *
_memres_ipc_handle_decode (const guint8 *header, gint fd, GError **error)
{
  guint64 magic = _memres_get_le (header + H_OFF_MAGIC, 4);
  guint64 version = _memres_get_le (header + H_OFF_VERSION, 2);
  guint64 length = _memres_get_le (header + H_OFF_LENGTH, 2);
  const guint8 *kind = header + H_OFF_KIND;
  const guint8 *nul;

  if (magic != HANDLE_MAGIC)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid handle message: magic 0x%08x (expected 0x%08x)",
                   (guint32) magic, HANDLE_MAGIC);
      return NULL;
    }
  if (version != HANDLE_VERSION || length != HEADER_SIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid handle message: version %u, length %u (this library "
                   "reads version %d, length %d)",
                   (guint) version, (guint) length, HANDLE_VERSION, HEADER_SIZE);
      return NULL;
    }
  nul = memchr (kind, '\0', MEMRES_KIND_NAME_MAX);
  if (nul == NULL || !_memres_kind_name_is_valid ((const char *) kind))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC transport: invalid handle message: the kind is not a valid kind name");
      return NULL;
    }
  for (const guint8 *p = nul; p < kind + MEMRES_KIND_NAME_MAX; p++)
    if (*p != 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                     "IPC transport: invalid handle message: the kind's padding is not zero");
        return NULL;
      }
  if (fd == -1) /* a pool shared by its fabric handle: the record's identity alone */
    return _memres_ipc_handle_new_identity ((const char *) kind, header + H_OFF_POOL_ID,
                                            header + H_OFF_DEVICE_UUID);
  return memres_ipc_handle_new ((const char *) kind, fd, header + H_OFF_POOL_ID,
                                header + H_OFF_DEVICE_UUID, error);
}

/* The handle message has one length; _memres_ipc_handle_decode() checks the length field. */
static gsize
handle_length (const guint8 *header)
{
  return HEADER_SIZE;
}

/**
 * memres_ipc_receive_handle_with_flags:
 * @socket_fd: a connected `AF_UNIX` socket (stream or seqpacket)
 * @flags: #MemresIpcFlags: %MEMRES_IPC_ALLOW_ANY_UID accepts a message from any sender
 * @error: return location for a #GError
 *
 * Receives one handle sent with memres_ipc_send_handle(). Blocks until a message arrives
 * (unless @socket_fd is non-blocking). Enables `SO_PASSCRED` on @socket_fd (and leaves it on)
 * so that the kernel passes the senders' credentials up. The message is untrusted: the header
 * must be complete with the right magic, version, length and a valid kind name, and exactly
 * one fd must come with it.
 *
 * Unless @flags has %MEMRES_IPC_ALLOW_ANY_UID, the message must also have been sent entirely by
 * processes running under this process's effective uid. Each piece of it is checked: one
 * recvmsg() reads one piece (a seqpacket message is one piece; a stream message may arrive in
 * several, written by different processes, and the kernel never mixes writers in one read).
 * Every piece must come with `SCM_CREDENTIALS` naming this uid: those the sender attached
 * (memres_ipc_send_handle() always attaches its own; the kernel refuses a uid that is not the
 * sender's real, effective or saved uid unless it has `CAP_SETUID`) or, for bytes written after
 * `SO_PASSCRED` was on, those the kernel attached. A piece without credentials (written without
 * `SCM_CREDENTIALS` before `SO_PASSCRED` was on) is refused: nobody can tell who wrote it. The
 * socket's peer
 * (`SO_PEERCRED`: who created or connected it, not necessarily who wrote) must run under this
 * uid too. A refused message is still read to its end, so that the next message on a stream
 * stays readable; the first refused piece is the error reported, whatever else is wrong with
 * the message.
 *
 * Received fds are close-on-exec (`MSG_CMSG_CLOEXEC`). On any failure every fd that arrived is
 * closed. No driver call. Thread safety: safe from any thread; receive on one socket from one
 * thread at a time.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @socket_fd is not an `AF_UNIX` socket;
 * %MEMRES_ERROR_FAILED when recvmsg() fails or the peer closed the connection before sending
 * anything; %MEMRES_ERROR_INVALID_DESCRIPTOR for a short, oversized or malformed message, a
 * message with no fd or with more than one; %MEMRES_ERROR_PERMISSION_DENIED (never with
 * %MEMRES_IPC_ALLOW_ANY_UID) for a piece sent under another uid (the message names the piece,
 * its bytes, the sender's pid and uid) or without credentials, for a peer of another uid, or
 * when `SO_PASSCRED` cannot be enabled.
 *
 * Returns: (transfer full) (nullable): a new handle owning the received fd, or %NULL
 *
 * Since: 1.0
 */
MemresIpcHandle *
memres_ipc_receive_handle_with_flags (gint socket_fd, MemresIpcFlags flags, GError **error)
{
  guint8 header[HEADER_SIZE];
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (int));
  MemresIpcHandle *handle = NULL;
  gsize length;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!_memres_ipc_receive_message (socket_fd, flags, "handle", header, HEADER_SIZE, HEADER_SIZE,
                                    handle_length, &length, fds, error))
    return NULL;
  if (fds->len != 1)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                 "IPC transport: invalid handle message: %u file descriptors attached "
                 "(expected 1)",
                 fds->len);
  else
    handle = _memres_ipc_handle_decode (header, g_array_index (fds, int, 0), error);
  if (handle != NULL)
    g_array_set_size (fds, 0); /* the handle owns the fd now */
  _memres_ipc_close_fds (fds);
  return handle;
}

/**
 * memres_ipc_receive_handle:
 * @socket_fd: a connected `AF_UNIX` socket
 * @error: return location for a #GError
 *
 * memres_ipc_receive_handle_with_flags() with %MEMRES_IPC_NONE: every piece of the message
 * must come with the sender's credentials naming this process's effective uid, and the peer
 * must run under it. See there for the semantics and the errors.
 *
 * Returns: (transfer full) (nullable): a new handle owning the received fd, or %NULL
 *
 * Since: 1.0
 */
MemresIpcHandle *
memres_ipc_receive_handle (gint socket_fd, GError **error)
{
  return memres_ipc_receive_handle_with_flags (socket_fd, MEMRES_IPC_NONE, error);
}
