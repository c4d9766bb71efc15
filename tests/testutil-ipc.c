/* testutil-ipc.c: the test programs' helpers for IPC (see testutil.h): buffers as messages, the
 * IPC fault-sweep operations, child processes and their sockets (data and fds), little-endian
 * fields. */
#define _GNU_SOURCE /* struct ucred */
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

gboolean
mt_message_export (MemresBuffer *buf, MtMessage *m, GError **error)
{
  memset (m, 0, sizeof *m);
  return memres_buffer_export_message (buf, &m->bytes, &m->fds, &m->n_fds, error);
}

void
mt_message_clear (MtMessage *m)
{
  for (guint i = 0; i < m->n_fds; i++)
    g_assert_cmpint (close (m->fds[i]), ==, 0);
  g_clear_pointer (&m->fds, g_free);
  g_clear_pointer (&m->bytes, g_bytes_unref);
  m->n_fds = 0;
}

MemresBuffer *
mt_message_import (MemresResource *importer, const MtMessage *m, GError **error)
{
  gsize len;
  gconstpointer data = g_bytes_get_data (m->bytes, &len);

  return memres_buffer_import_message (importer, data, len, m->fds, m->n_fds, NULL, error);
}

gboolean
mt_op_export_handle (gpointer data, GError **error)
{
  MtIpcSweepData *d = data;

  d->made_handle = memres_resource_export_handle (d->exporter, error);
  return d->made_handle != NULL;
}

gboolean
mt_op_import_handle (gpointer data, GError **error)
{
  MtIpcSweepData *d = data;

  d->made_import = memres_resource_import_handle (d->handle, error);
  return d->made_import != NULL;
}

gboolean
mt_op_export_buffer (gpointer data, GError **error)
{
  MtIpcSweepData *d = data;

  return memres_buffer_export (d->buf, &d->desc, error);
}

gboolean
mt_op_import_buffer (gpointer data, GError **error)
{
  MtIpcSweepData *d = data;

  d->made_buf
      = memres_buffer_import (d->importer, d->desc.bytes, sizeof d->desc.bytes, NULL, error);
  return d->made_buf != NULL;
}

void
mt_undo_ipc (gpointer data)
{
  MtIpcSweepData *d = data;

  g_clear_pointer (&d->made_buf, memres_buffer_unref);
  g_clear_pointer (&d->made_import, memres_resource_unref);
  g_clear_pointer (&d->made_handle, memres_ipc_handle_free);
  mt_sync_ok (NULL);
}

GPid
mt_spawn_child (const char *mode, int *sock)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  const char *argv[] = { self, "--child", mode, NULL };
  GError *error = NULL;
  int sv[2];
  int source[1], target[1] = { MT_CHILD_FD };
  GPid pid;

  g_assert_nonnull (self);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  source[0] = sv[1];
  g_assert_true (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   NULL, NULL, -1, -1, -1, source, target, 1, &pid,
                                                   NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  close (sv[1]);
  *sock = sv[0];
  return pid;
}

void
mt_wait_child (GPid pid, int sock)
{
  int status = 0;

  close (sock);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    g_error ("child failed: %s %d", WIFEXITED (status) ? "exit status" : "signal",
             WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status));
}

void
mt_send_all (int sock, gconstpointer data, gsize n)
{
  const guint8 *p = data;

  while (n > 0)
    {
      gssize sent = send (sock, p, n, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR)
        continue;
      if (sent <= 0)
        g_error ("send: %s", g_strerror (errno));
      p += sent;
      n -= (gsize) sent;
    }
}

void
mt_recv_all (int sock, gpointer data, gsize n)
{
  guint8 *p = data;

  while (n > 0)
    {
      gssize got = recv (sock, p, n, 0);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        g_error ("recv: %s", got == 0 ? "the peer closed the connection" : g_strerror (errno));
      p += got;
      n -= (gsize) got;
    }
}

void
mt_send_raw (int sock, gconstpointer data, gsize len, const int *fds, int n_fds,
             gboolean with_creds)
{
  struct iovec iov = { (void *) data, len };
  struct msghdr msg = { 0 };
  g_autofree char *control = NULL;
  struct cmsghdr *cmsg;
  gsize size = 0;

  g_assert_cmpint (n_fds, >=, 0);
  if (n_fds > 0)
    size += CMSG_SPACE (sizeof (int) * n_fds);
  if (with_creds)
    size += CMSG_SPACE (sizeof (struct ucred));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (size > 0)
    {
      control = g_malloc0 (size);
      msg.msg_control = control;
      msg.msg_controllen = size;
      cmsg = CMSG_FIRSTHDR (&msg);
      if (n_fds > 0)
        {
          cmsg->cmsg_level = SOL_SOCKET;
          cmsg->cmsg_type = SCM_RIGHTS;
          cmsg->cmsg_len = CMSG_LEN (sizeof (int) * n_fds);
          memcpy (CMSG_DATA (cmsg), fds, sizeof (int) * n_fds);
          cmsg = CMSG_NXTHDR (&msg, cmsg);
        }
      if (with_creds)
        {
          struct ucred creds = { getpid (), geteuid (), getegid () };

          cmsg->cmsg_level = SOL_SOCKET;
          cmsg->cmsg_type = SCM_CREDENTIALS;
          cmsg->cmsg_len = CMSG_LEN (sizeof creds);
          memcpy (CMSG_DATA (cmsg), &creds, sizeof creds);
        }
    }
  g_assert_cmpint (sendmsg (sock, &msg, MSG_NOSIGNAL), ==, (gssize) len);
}

guint64
mt_get_le (const guint8 *p, int n)
{
  guint64 v = 0;

  for (int i = n - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

void
mt_put_le (guint8 *p, guint64 v, int n)
{
  for (int i = 0; i < n; i++)
    p[i] = (v >> (8 * i)) & 0xff;
}
