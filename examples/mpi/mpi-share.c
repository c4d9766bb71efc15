/* memres - CUDA memory resources
 * mpi-share.c: memres buffers between MPI ranks (mpi-share.h): the pairs' UNIX sockets set up
 * through MPI, a message's bytes through MPI and its fds through the pair's socket. */
#define _GNU_SOURCE
#include "mpi-share.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct _MpiShare
{
  MPI_Comm comm;
  int rank;
  int size;
  int *socks;     /* per rank of @comm: the pair's socket, -1 for itself and ranks of other nodes */
  int timeout_ms; /* how long a receive waits for a message's fds (SO_RCVTIMEO of the sockets) */
};

typedef struct
{
  guint64 length;
  guint64 n_fds;
} Header;

#define MAX_MESSAGE        (1u << 20) /* far above any memres message (docs/ipc.md) */
#define DEFAULT_TIMEOUT_MS 60000

static gboolean set_timeout (int sock, int ms);

static gboolean
set_errno_error (GError **error, const char *what)
{
  int e = errno;

  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "%s: %s", what, g_strerror (e));
  return FALSE;
}

static gboolean
check_mpi (int rc, const char *what, GError **error)
{
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;

  if (rc == MPI_SUCCESS)
    return TRUE;
  MPI_Error_string (rc, text, &len);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "%s: %.*s", what, len, text);
  return FALSE;
}

/* The peer of @sock runs under this process's effective uid. */
static gboolean
check_peer (int sock, GError **error)
{
  struct ucred cred;
  socklen_t len = sizeof cred;

  if (getsockopt (sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return set_errno_error (error, "SO_PEERCRED");
  if (cred.uid != geteuid ())
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                   "the rank's socket peer runs under uid %u, not %u", (unsigned) cred.uid,
                   (unsigned) geteuid ());
      return FALSE;
    }
  return TRUE;
}

static void
socket_path (struct sockaddr_un *addr, const char *dir, int rank)
{
  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  g_snprintf (addr->sun_path, sizeof addr->sun_path, "%s/%d", dir, rank);
}

/* This rank's part of the mesh of one node: listens at DIR/RANK, connects to each lower rank
 * of @node (sending its own rank), accepts each higher one (reading its rank). */
static gboolean
connect_node (MpiShare *share, MPI_Comm node, const char *dir, GError **error)
{
  struct sockaddr_un addr;
  int node_rank, node_size, n_higher = 0, listener;
  int *ranks;
  gboolean ok = TRUE;

  MPI_Comm_rank (node, &node_rank);
  MPI_Comm_size (node, &node_size);
  ranks = g_new (int, node_size); /* the world rank of each rank of @node */
  MPI_Allgather (&share->rank, 1, MPI_INT, ranks, 1, MPI_INT, node);

  socket_path (&addr, dir, share->rank);
  listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind (listener, (struct sockaddr *) &addr, sizeof addr) != 0
      || listen (listener, SOMAXCONN) != 0)
    ok = set_errno_error (error, "listening socket");
  MPI_Allreduce (MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, node);
  for (int i = 0; ok && i < node_size; i++)
    {
      int sock;

      if (ranks[i] > share->rank)
        n_higher++;
      if (ranks[i] >= share->rank)
        continue;
      socket_path (&addr, dir, ranks[i]);
      sock = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (sock < 0 || connect (sock, (struct sockaddr *) &addr, sizeof addr) != 0
          || send (sock, &share->rank, sizeof share->rank, MSG_NOSIGNAL)
                 != (ssize_t) sizeof share->rank)
        ok = set_errno_error (error, "connecting to a rank");
      if (sock >= 0)
        share->socks[ranks[i]] = sock;
      ok = ok && check_peer (sock, error);
      if (ok && !set_timeout (sock, share->timeout_ms))
        ok = set_errno_error (error, "SO_RCVTIMEO");
    }
  for (int i = 0; ok && i < n_higher; i++)
    {
      int peer = -1;
      int sock = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);

      if (sock < 0 || recv (sock, &peer, sizeof peer, MSG_WAITALL) != (ssize_t) sizeof peer)
        ok = set_errno_error (error, "accepting a rank");
      else if (peer <= share->rank || peer >= share->size || share->socks[peer] >= 0)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED,
                       "a connection names rank %d, which this rank does not expect", peer);
          ok = FALSE;
        }
      else
        {
          share->socks[peer] = sock;
          sock = -1;
          ok = check_peer (share->socks[peer], error);
          if (ok && !set_timeout (share->socks[peer], share->timeout_ms))
            ok = set_errno_error (error, "SO_RCVTIMEO");
        }
      if (sock >= 0)
        close (sock);
    }
  if (listener >= 0)
    close (listener);
  MPI_Allreduce (MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, node);
  socket_path (&addr, dir, share->rank);
  unlink (addr.sun_path); /* every peer is connected: the path serves no one now */
  g_free (ranks);
  if (!ok && error != NULL && *error == NULL)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "another rank failed to connect");
  return ok;
}

MpiShare *
mpi_share_open (MPI_Comm comm, GError **error)
{
  MpiShare *share = g_new0 (MpiShare, 1);
  char dir[sizeof ((struct sockaddr_un *) NULL)->sun_path - 16] = "";
  MPI_Comm node;
  int node_rank;
  gboolean ok = TRUE;

  share->comm = comm;
  share->timeout_ms = DEFAULT_TIMEOUT_MS;
  MPI_Comm_rank (comm, &share->rank);
  MPI_Comm_size (comm, &share->size);
  share->socks = g_new (int, share->size);
  for (int i = 0; i < share->size; i++)
    share->socks[i] = -1;
  if (!check_mpi (MPI_Comm_split_type (comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                  "MPI_Comm_split_type", error))
    {
      mpi_share_close (share);
      return NULL;
    }
  MPI_Comm_rank (node, &node_rank);
  if (node_rank == 0)
    {
      g_autofree char *made = g_dir_make_tmp ("memres-mpi-XXXXXX", NULL);

      if (made == NULL || strlen (made) >= sizeof dir)
        dir[0] = '\0';
      else
        strcpy (dir, made);
    }
  MPI_Bcast (dir, sizeof dir, MPI_CHAR, 0, node);
  if (dir[0] == '\0')
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "the node's first rank could not make a directory for the sockets");
      ok = FALSE;
    }
  ok = ok && connect_node (share, node, dir, error);
  MPI_Barrier (node);
  if (node_rank == 0 && dir[0] != '\0')
    rmdir (dir);
  MPI_Comm_free (&node);
  if (!ok)
    {
      mpi_share_close (share);
      return NULL;
    }
  return share;
}

void
mpi_share_close (MpiShare *share)
{
  if (share == NULL)
    return;
  for (int i = 0; i < share->size; i++)
    if (share->socks[i] >= 0)
      close (share->socks[i]);
  g_free (share->socks);
  g_free (share);
}

static gboolean
set_timeout (int sock, int ms)
{
  struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

  return setsockopt (sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0;
}

gboolean
mpi_share_set_timeout (MpiShare *share, int timeout_ms, GError **error)
{
  if (timeout_ms <= 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "a timeout of %d ms: it must be positive", timeout_ms);
      return FALSE;
    }
  for (int i = 0; i < share->size; i++)
    if (share->socks[i] >= 0 && !set_timeout (share->socks[i], timeout_ms))
      return set_errno_error (error, "SO_RCVTIMEO");
  share->timeout_ms = timeout_ms;
  return TRUE;
}

static gboolean
check_peer_rank (MpiShare *share, int peer, guint n_fds, GError **error)
{
  if (peer < 0 || peer >= share->size || peer == share->rank)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "no rank %d to share with",
                   peer);
      return FALSE;
    }
  if (n_fds > 0 && share->socks[peer] < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "rank %d is on another node: file descriptors cannot reach it (share by "
                   "fabric handles)",
                   peer);
      return FALSE;
    }
  return TRUE;
}

gboolean
mpi_share_send_message (MpiShare *share, int peer, gconstpointer data, gsize length,
                        const gint *fds, guint n_fds, GError **error)
{
  Header h = { length, n_fds };

  if (!check_peer_rank (share, peer, n_fds, error))
    return FALSE;
  if (length > MAX_MESSAGE || n_fds > MEMRES_IPC_MAX_CHUNKS)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "a message of %" G_GSIZE_FORMAT " bytes and %u fds is too large", length, n_fds);
      return FALSE;
    }
  if (!check_mpi (MPI_Send (&h, sizeof h, MPI_BYTE, peer, MPI_SHARE_TAG, share->comm), "MPI_Send",
                  error)
      || !check_mpi (MPI_Send (data, (int) length, MPI_BYTE, peer, MPI_SHARE_TAG, share->comm),
                     "MPI_Send", error))
    return FALSE;
  if (n_fds > 0)
    {
      char byte = 'F';
      struct iovec iov = { &byte, 1 };
      union
      {
        char buf[CMSG_SPACE (sizeof (int) * MEMRES_IPC_MAX_CHUNKS)];
        struct cmsghdr align;
      } control;
      struct msghdr msg = { 0 };
      struct cmsghdr *c;

      memset (&control, 0, sizeof control);
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE (sizeof (int) * n_fds);
      c = CMSG_FIRSTHDR (&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN (sizeof (int) * n_fds);
      memcpy (CMSG_DATA (c), fds, sizeof (int) * n_fds);
      if (sendmsg (share->socks[peer], &msg, MSG_NOSIGNAL) != 1)
        return set_errno_error (error, "sending file descriptors");
    }
  return TRUE;
}

/* The @n_fds fds announced for the message, from @sock, into @fds; an error when they do not
 * come within the sockets' timeout (@timeout_ms, for the message). */
static gboolean
receive_fds (int sock, gint *fds, guint n_fds, int timeout_ms, GError **error)
{
  char byte;
  struct iovec iov = { &byte, 1 };
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * MEMRES_IPC_MAX_CHUNKS)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = { 0 };
  guint got = 0;
  ssize_t n;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  do
    n = recvmsg (sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "receiving file descriptors: timed out (none came within %d ms)", timeout_ms);
      return FALSE;
    }
  if (n != 1)
    return n < 0 ? set_errno_error (error, "receiving file descriptors")
                 : (g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                                 "the rank closed its socket"),
                    FALSE);
  for (struct cmsghdr *c = CMSG_FIRSTHDR (&msg); c != NULL; c = CMSG_NXTHDR (&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      {
        guint k = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        int *in = (int *) (void *) CMSG_DATA (c);

        for (guint i = 0; i < k; i++)
          {
            if (got < n_fds)
              fds[got++] = in[i];
            else
              close (in[i]), got = n_fds + 1;
          }
      }
  if (got != n_fds || (msg.msg_flags & MSG_CTRUNC))
    {
      for (guint i = 0; i < MIN (got, n_fds); i++)
        close (fds[i]);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "the message announced %u file descriptors, others came", n_fds);
      return FALSE;
    }
  return TRUE;
}

/* The next MPI message from @peer, whole whatever its size (probed first, so that neither a
 * longer nor a shorter one than expected fails in MPI, whose default handler aborts the job):
 * *@out (g_malloc'd) and its *@count of bytes. */
static gboolean
receive_whole (MpiShare *share, int peer, guint8 **out, int *count, GError **error)
{
  MPI_Message message;
  MPI_Status status;

  if (!check_mpi (MPI_Mprobe (peer, MPI_SHARE_TAG, share->comm, &message, &status), "MPI_Mprobe",
                  error))
    return FALSE;
  MPI_Get_count (&status, MPI_BYTE, count);
  *out = g_malloc (MAX (*count, 1));
  if (!check_mpi (MPI_Mrecv (*out, *count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv",
                  error))
    {
      g_clear_pointer (out, g_free);
      return FALSE;
    }
  return TRUE;
}

gboolean
mpi_share_receive_message (MpiShare *share, int peer, GBytes **bytes, gint **fds, guint *n_fds,
                           GError **error)
{
  Header h;
  guint8 *frame, *data;
  int count;
  gint *received;

  if (!check_peer_rank (share, peer, 0, error)
      || !receive_whole (share, peer, &frame, &count, error))
    return FALSE;
  if (count != (int) sizeof h)
    {
      g_free (frame);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "rank %d sent a header of %d bytes, not %" G_GSIZE_FORMAT, peer, count,
                   sizeof h);
      return FALSE;
    }
  memcpy (&h, frame, sizeof h);
  g_free (frame);
  /* the bytes come whatever the header says: taken whole, so that the next message is read whole */
  if (!receive_whole (share, peer, &data, &count, error))
    return FALSE;
  received = g_new (gint, MAX (MIN (h.n_fds, MEMRES_IPC_MAX_CHUNKS), 1));
  if (h.length > MAX_MESSAGE || h.n_fds > MEMRES_IPC_MAX_CHUNKS || (guint64) count != h.length)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "rank %d announced a message of %" G_GUINT64_FORMAT
                   " bytes and %" G_GUINT64_FORMAT " fds, and sent %d bytes",
                   peer, h.length, h.n_fds, count);
      /* its fds, which a sender of this code sends after the bytes, taken and closed, so that
       * the next message's fds are its own (they wait no longer than the timeout) */
      if (h.n_fds > 0 && h.n_fds <= MEMRES_IPC_MAX_CHUNKS && share->socks[peer] >= 0
          && receive_fds (share->socks[peer], received, (guint) h.n_fds, share->timeout_ms, NULL))
        for (guint i = 0; i < h.n_fds; i++)
          close (received[i]);
      g_free (data);
      g_free (received);
      return FALSE;
    }
  if (h.n_fds > 0
      && (!check_peer_rank (share, peer, (guint) h.n_fds, error)
          || !receive_fds (share->socks[peer], received, (guint) h.n_fds, share->timeout_ms,
                           error)))
    {
      g_free (data);
      g_free (received);
      return FALSE;
    }
  *bytes = g_bytes_new_take (data, h.length);
  *fds = received;
  *n_fds = (guint) h.n_fds;
  return TRUE;
}

gboolean
mpi_share_send_buffer (MpiShare *share, int peer, MemresBuffer *buf, GError **error)
{
  GBytes *bytes;
  gint *fds;
  guint n_fds;
  gboolean ok;

  if (!memres_buffer_export_message (buf, &bytes, &fds, &n_fds, error))
    return FALSE;
  ok = mpi_share_send_message (share, peer, g_bytes_get_data (bytes, NULL),
                               g_bytes_get_size (bytes), fds, n_fds, error);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]); /* the peer holds duplicates */
  g_free (fds);
  g_bytes_unref (bytes);
  return ok;
}

MemresBuffer *
mpi_share_receive_buffer (MpiShare *share, int peer, MemresResource *importer, MemresStream stream,
                          GError **error)
{
  GBytes *bytes;
  gint *fds;
  guint n_fds;
  gsize length;
  gconstpointer data;
  MemresBuffer *buf;

  if (!mpi_share_receive_message (share, peer, &bytes, &fds, &n_fds, error))
    return NULL;
  data = g_bytes_get_data (bytes, &length);
  buf = memres_buffer_import_message (importer, data, length, fds, n_fds, stream, error);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]); /* the import only borrowed them */
  g_free (fds);
  g_bytes_unref (bytes);
  return buf;
}
