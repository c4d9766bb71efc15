/* cmd-ipc.c: `memres ipc-serve` and `memres ipc-attach`: share one buffer of an ipc pool with
 * other processes over a UNIX socket, and check the bytes both ways.
 *
 * Protocol on each connection: the server sends the pool's handle (memres_ipc_send_handle()),
 * then 168 bytes: the buffer descriptor (160) and the pattern seed (u32 LE) and the buffer size
 * (u32 LE, KiB). The client imports, verifies the pattern, writes the pattern of seed + 1,
 * closes its import and answers one byte, 'D' (done) or 'F' (failed). The server then verifies
 * seed + 1, which becomes the seed for the next client. Byte i of the pattern of seed s is
 * (s * 131 + i * 7 + i / 256) mod 256. */
#define _GNU_SOURCE
#include "memres-tool.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TRAILER_SIZE (MEMRES_BUFFER_DESCRIPTOR_SIZE + 8)

static void
fill_pattern (guint8 *host, gsize n, guint32 seed)
{
  for (gsize i = 0; i < n; i++)
    host[i] = (guint8) (seed * 131 + i * 7 + i / 256);
}

/* Index of the first byte that differs from the pattern, or -1. */
static gssize
find_mismatch (const guint8 *host, gsize n, guint32 seed)
{
  for (gsize i = 0; i < n; i++)
    if (host[i] != (guint8) (seed * 131 + i * 7 + i / 256))
      return (gssize) i;
  return -1;
}

/* SIGINT or SIGTERM received: ipc-serve stops accepting (and talking to a client), removes its
 * socket and exits. */
static volatile sig_atomic_t stop_signal;

/* Seconds a peer may stay silent before ipc-serve or ipc-attach gives up on it (--timeout). */
#define DEFAULT_TIMEOUT 30

static gboolean
io_all (int fd, gpointer data, gsize n, gboolean writing, GError **error)
{
  guint8 *p = data;

  while (n > 0)
    {
      gssize k = writing ? send (fd, p, n, MSG_NOSIGNAL) : recv (fd, p, n, 0);
      if (k < 0 && errno == EINTR && !stop_signal)
        continue;
      if (k <= 0)
        {
          int saved = errno;
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "%s the peer: %s",
                       writing ? "sending to" : "receiving from",
                       k == 0                                    ? "connection closed"
                       : saved == EAGAIN || saved == EWOULDBLOCK ? "timed out (--timeout)"
                                                                 : g_strerror (saved));
          return FALSE;
        }
      p += k;
      n -= (gsize) k;
    }
  return TRUE;
}

/* A peer that stops talking must not hold this end forever: every send and receive on @fd
 * (memres_ipc_send_handle() and the others included) gives up after @seconds (0: never). */
static void
set_timeout (int fd, gint seconds)
{
  struct timeval tv = { seconds, 0 };

  if (seconds > 0)
    {
      (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      (void) setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
}

static gboolean
make_address (const char *path, struct sockaddr_un *addr, GError **error)
{
  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path[0] == '\0')
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "the socket path is empty: give the path of a UNIX socket");
      return FALSE;
    }
  if (strlen (path) >= sizeof addr->sun_path)
    {
      g_autofree char *shown = memres_tool_show_input (path);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "socket path \"%s\" is longer than %zu bytes", shown, sizeof addr->sun_path - 1);
      return FALSE;
    }
  strcpy (addr->sun_path, path);
  return TRUE;
}

/* Sets the error of a SOCKET @path that cannot be one, judged by the system's @errsv for it:
 * G_FILE_ERROR from errno ("cannot listen on"/"cannot connect to" PATH: reason), which
 * memres_tool_fail() makes exit status 2 where no socket can ever be there (a missing
 * directory, a path under a file, a loop of links, a name too long), as for an -o FILE, and 1
 * where the system refuses (permission denied). */
static gboolean
socket_path_error (const char *path, const char *what, int errsv, GError **error)
{
  g_autofree char *shown = memres_tool_show_input (path);

  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "cannot %s \"%s\": %s", what,
               shown, g_strerror (errsv));
  return FALSE;
}

/* The SOCKET operand of ipc-serve checked before any work (the resource, the buffer): FALSE
 * with MEMRES_ERROR_INVALID_ARGUMENT for a file there that is not a socket, the error of
 * socket_path_error() for a path where no socket can be made (its directory missing or not a
 * directory). A socket there, live or stale, passes (judged after). */
static gboolean
check_serve_path (const char *path, GError **error)
{
  g_autofree char *dir = NULL;
  struct stat st;

  if (lstat (path, &st) == 0)
    {
      if (S_ISSOCK (st.st_mode))
        return TRUE;
      /* an operand that names a file which cannot be one: bad input, as a LOG that is not a
       * regular file (the server's absence, at ipc-attach, is the work failing) */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s exists and is not a socket", path);
      return FALSE;
    }
  if (errno != ENOENT)
    return socket_path_error (path, "listen on", errno, error);
  dir = g_path_get_dirname (path);
  if (stat (dir, &st) != 0)
    return socket_path_error (path, "listen on", errno, error);
  if (!S_ISDIR (st.st_mode))
    return socket_path_error (path, "listen on", ENOTDIR, error);
  return TRUE;
}

static gboolean
buffer_put (MemresBuffer *buf, guint32 seed, GError **error)
{
  gsize size = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (size);

  fill_pattern (host, size, seed);
  return memres_buffer_write (buf, 0, host, size, NULL, error)
         && memres_stream_synchronize (NULL, error);
}

static gboolean
buffer_check (MemresBuffer *buf, guint32 seed, GError **error)
{
  gsize size = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (size);
  gssize bad;

  if (!memres_buffer_read (buf, 0, host, size, NULL, error)
      || !memres_stream_synchronize (NULL, error))
    return FALSE;
  bad = find_mismatch (host, size, seed);
  if (bad >= 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "byte %" G_GSSIZE_FORMAT " is 0x%02x, the pattern of seed %u has 0x%02x", bad,
                   host[bad], seed, (guint8) (seed * 131 + bad * 7 + bad / 256));
      return FALSE;
    }
  return TRUE;
}

/* One client: handle, descriptor + seed, wait for its answer, verify its write-back. */
static gboolean
serve_client (int fd, MemresResource *mr, MemresBuffer *buf, guint32 *seed, GError **error)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  guint8 trailer[TRAILER_SIZE];
  guint32 kib = (guint32) (memres_buffer_get_size (buf) / 1024);
  char answer = 0;

  handle = memres_resource_export_handle (mr, error);
  if (handle == NULL || !memres_ipc_send_handle (fd, handle, error))
    return FALSE;
  if (!memres_buffer_export (buf, &desc, error))
    return FALSE;
  memcpy (trailer, desc.bytes, sizeof desc.bytes);
  for (int i = 0; i < 4; i++)
    {
      trailer[MEMRES_BUFFER_DESCRIPTOR_SIZE + i] = (*seed >> (8 * i)) & 0xff;
      trailer[MEMRES_BUFFER_DESCRIPTOR_SIZE + 4 + i] = (kib >> (8 * i)) & 0xff;
    }
  if (!io_all (fd, trailer, sizeof trailer, TRUE, error) || !io_all (fd, &answer, 1, FALSE, error))
    return FALSE;
  if (answer != 'D')
    {
      if (answer == 'F')
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                     "the client reported a failure (see its output)");
      else
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                     "the client answered 0x%02x, neither 'D' (done) nor 'F' (failed): not a "
                     "memres ipc-attach",
                     (guint8) answer);
      return FALSE;
    }
  if (!buffer_check (buf, *seed + 1, error))
    {
      g_prefix_error (error, "the client's write-back: ");
      return FALSE;
    }
  *seed += 1;
  return TRUE;
}

/* A live server holds, besides its socket, an abstract-namespace socket named after the socket
 * file's device and inode: the kernel drops it when the server exits, however it exits, so a
 * socket file whose lock nobody holds is stale. Checking needs no connection (which the live
 * server would count as a client). Binds the lock on @lock_fd (a new socket) and returns TRUE,
 * or returns FALSE with errno set (EADDRINUSE: a live server holds it). */
static gboolean
bind_socket_lock (const char *path, int *lock_fd)
{
  struct sockaddr_un lock_addr;
  struct stat st;
  socklen_t len;
  int fd, saved;

  *lock_fd = -1;
  if (stat (path, &st) != 0)
    return FALSE;
  memset (&lock_addr, 0, sizeof lock_addr);
  lock_addr.sun_family = AF_UNIX;
  /* sun_path[0] stays 0: the abstract namespace */
  len = (socklen_t) g_snprintf (lock_addr.sun_path + 1, sizeof lock_addr.sun_path - 1,
                                "memres-ipc-serve-%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
                                (guint64) st.st_dev, (guint64) st.st_ino);
  len += (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return FALSE;
  if (bind (fd, (struct sockaddr *) &lock_addr, len) != 0)
    {
      saved = errno;
      close (fd);
      errno = saved;
      return FALSE;
    }
  *lock_fd = fd;
  return TRUE;
}

/* TRUE when a live server (one holding the socket's lock) listens on @path. */
static gboolean
socket_is_live (const char *path)
{
  int fd;

  if (bind_socket_lock (path, &fd))
    {
      close (fd);
      return FALSE;
    }
  return errno == EADDRINUSE;
}

/* Binds and listens on a socket under a temporary name beside @addr's path, takes its lock
 * (bind_socket_lock()), then renames it into place: the socket file appears only once a client
 * can connect and a second server sees the lock, never half set up. Returns FALSE with errno
 * set, leaving no file behind. */
static gboolean
listen_locked (const struct sockaddr_un *addr, int *listener, int *lock_fd)
{
  g_autofree char *dir = g_path_get_dirname (addr->sun_path);
  g_autofree char *tmp = g_strdup_printf ("%s/.memres-%d.sock", dir, (int) getpid ());
  struct sockaddr_un tmp_addr = { .sun_family = AF_UNIX };
  mode_t old;
  int fd, r, saved;

  *listener = *lock_fd = -1;
  if (strlen (tmp) >= sizeof tmp_addr.sun_path)
    {
      errno = ENAMETOOLONG;
      return FALSE;
    }
  memcpy (tmp_addr.sun_path, tmp, strlen (tmp) + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return FALSE;
  unlink (tmp); /* a leftover of a killed server with this pid */
  old = umask (0077);
  r = bind (fd, (struct sockaddr *) &tmp_addr, sizeof tmp_addr);
  saved = errno;
  umask (old);
  if (r == 0)
    {
      if (listen (fd, 8) == 0 && bind_socket_lock (tmp, lock_fd)
          && rename (tmp, addr->sun_path) == 0)
        {
          *listener = fd;
          return TRUE;
        }
      saved = errno;
      unlink (tmp);
    }
  if (*lock_fd >= 0)
    close (*lock_fd);
  *lock_fd = -1;
  close (fd);
  errno = saved;
  return FALSE;
}

/* TRUE when something accepts connections on @addr (not a memres server: socket_is_live()
 * says that without connecting, which a memres server would count as a client). */
static gboolean
socket_accepts (const struct sockaddr_un *addr)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  gboolean live;

  if (fd < 0)
    return FALSE;
  live = connect (fd, (const struct sockaddr *) addr, sizeof *addr) == 0;
  close (fd);
  return live;
}

static void
on_stop_signal (int signum)
{
  stop_signal = signum;
}

/* Without SA_RESTART: a blocked accept() returns EINTR and the loop sees stop_signal. */
static void
catch_stop_signals (void)
{
  struct sigaction sa;

  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
}

/**
 * memres_tool_ipc_serve:
 * @argc: number of arguments, the command name included
 * @argv: `ipc-serve [--spec SPEC] [--size SIZE] [--count N] [--json] SOCKET`
 *
 * Creates an ipc pool (SPEC, default `ipc:device=0`) and one buffer of SIZE bytes (default
 * 1MiB) holding the pattern of seed 1, listens on the UNIX socket SOCKET (created with mode
 * 0600; a stale socket file there is replaced, a socket where a server listens or any other
 * file is an error) and serves each client in turn (see the protocol above), N clients
 * (N at least 1; without --count until SIGINT or SIGTERM, which remove the socket and exit). A
 * client that fails is reported and the server goes on with the next.
 *
 * Returns: the exit status: 0 when every client succeeded, 1 on an error, 2 for bad usage (a
 *   SOCKET that exists and is not a socket, or in a missing directory, under a file that is
 *   not a directory, behind a loop of links or too long, among them: checked before the pool
 *   is made, as an -o FILE is)
 */
int
memres_tool_ipc_serve (int argc, char **argv)
{
  g_autofree char *spec = NULL;
  g_autofree char *size_text = NULL;
  g_autofree char *count_text = NULL;
  gint count = 0 /* forever */, timeout = DEFAULT_TIMEOUT;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "spec", 's', 0, G_OPTION_ARG_FILENAME, &spec, "the pool (default ipc:device=0)", "SPEC" },
    { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout,
      "give up on a client that stays silent this many seconds (default 30; 0: never)", "S" },
    { "size", 'n', 0, G_OPTION_ARG_FILENAME, &size_text,
      "bytes of the buffer, a multiple of 1KiB (default 1MiB)", "SIZE" },
    { "count", 'c', 0, G_OPTION_ARG_FILENAME, &count_text,
      "serve N clients, then exit (default: forever)", "N" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "print the summary as JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = g_option_context_new ("SOCKET");
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  g_autoptr (GError) error = NULL;
  struct sockaddr_un addr;
  struct stat st;
  guint64 size = 1024 * 1024;
  guint32 seed = 1;
  int served = 0, failed = 0;
  int listener, lock_fd;
  g_autoptr (GPtrArray) client_errors = g_ptr_array_new_with_free_func (g_free);

  g_option_context_set_summary (context, "Share a buffer of an ipc pool with the clients of a "
                                         "UNIX socket (memres ipc-attach).");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("ipc-serve", error->message);
  if (argc != 2)
    return memres_tool_usage_error ("ipc-serve", "give exactly one SOCKET path");
  if (count_text != NULL)
    {
      gint64 n;

      /* 0 would be "forever", which is what leaving --count out means */
      if (!g_ascii_string_to_signed (count_text, 10, 1, G_MAXINT, &n, NULL))
        return memres_tool_usage_error_input (
            "ipc-serve",
            "--count \"%s\": expected a number of clients, 1 or more "
            "(without --count: serve until SIGINT or SIGTERM)",
            count_text);
      count = (gint) n;
    }
  if (timeout < 0)
    return memres_tool_usage_error ("ipc-serve", "--timeout must be 0 or more seconds");
  /* memres_parse_size()'s own message offers max, which no buffer here can be */
  if (size_text != NULL && !memres_parse_size (size_text, &size, NULL))
    return memres_tool_usage_error_input (
        "ipc-serve",
        "--size: invalid size \"%s\": expected a non-zero multiple of "
        "1KiB, in bytes with an optional B, KiB, MiB, GiB or TiB suffix",
        size_text);
  if (size == 0 || size % 1024 != 0 || size / 1024 > G_MAXUINT32)
    return memres_tool_usage_error ("ipc-serve", "--size must be a non-zero multiple of 1KiB, "
                                                 "at most 4 TiB - 1 KiB (the protocol counts "
                                                 "KiB in 32 bits)");
  if (!make_address (argv[1], &addr, &error))
    return memres_tool_fail (error);
  /* the operands before any work: a spec that does not parse (memres_spec_parse() loads
   * nothing), then a SOCKET where no socket can be made */
  {
    g_autoptr (GVariant) layers = memres_spec_parse (spec != NULL ? spec : "ipc:device=0", &error);

    if (layers == NULL)
      {
        if (spec != NULL)
          g_prefix_error (&error, "--spec: ");
        return memres_tool_fail (error);
      }
  }
  if (!check_serve_path (addr.sun_path, &error))
    return memres_tool_fail (error);

  mr = memres_resource_new (spec != NULL ? spec : "ipc:device=0", &error);
  if (mr == NULL)
    {
      if (spec != NULL)
        g_prefix_error (&error, "--spec: ");
      return memres_tool_fail (error);
    }
  buf = memres_resource_allocate (mr, size, NULL, &error);
  if (buf == NULL)
    return memres_tool_fail (error);
  /* A resource that cannot be shared fails now, before listening, not at every client. */
  {
    g_autoptr (MemresIpcHandle) probe = memres_resource_export_handle (mr, &error);
    MemresBufferDescriptor desc;

    if (probe == NULL || !memres_buffer_export (buf, &desc, &error))
      return memres_tool_fail (error);
  }
  if (!buffer_put (buf, seed, &error))
    return memres_tool_fail (error);

  /* checked again: the path may have changed while the buffer was made */
  if (!check_serve_path (addr.sun_path, &error))
    return memres_tool_fail (error);
  if (lstat (addr.sun_path, &st) == 0)
    {
      if (socket_is_live (addr.sun_path))
        return memres_tool_failf ("a server is already listening on %s", addr.sun_path);
      if (socket_accepts (&addr))
        return memres_tool_failf ("another program listens on %s: not taking it over",
                                  addr.sun_path);
      unlink (addr.sun_path); /* stale: nobody listens */
    }
  /* before the socket file appears: a stop signal sent as soon as it exists (a supervisor, the
   * tests) must end the server cleanly, removing the file, not kill it and leave the file */
  catch_stop_signals ();
  if (!listen_locked (&addr, &listener, &lock_fd))
    {
      socket_path_error (addr.sun_path, "listen on", errno, &error);
      return memres_tool_fail (error);
    }
  if (!json)
    {
      g_autofree char *path_shown = memres_tool_one_line (addr.sun_path);
      g_print ("serving %" G_GUINT64_FORMAT " bytes of %s on %s\n", size,
               memres_resource_get_kind_name (mr), path_shown);
    }

  while ((count == 0 || served + failed < count) && !stop_signal)
    {
      int fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0)
        {
          if (errno == EINTR)
            continue; /* a stop signal ends the loop */
          g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "accept: %s", g_strerror (errno));
          break;
        }
      set_timeout (fd, timeout);
      if (serve_client (fd, mr, buf, &seed, &error))
        {
          served++;
          if (!json)
            g_print ("client %d: ok\n", served + failed);
        }
      else
        {
          failed++;
          /* with --json, stdout is the one summary document below */
          if (json)
            {
              g_autofree char *message = memres_tool_one_line (error->message);
              g_printerr ("memres: client %d: %s\n", served + failed, message);
              g_ptr_array_add (client_errors, g_strdup (error->message));
            }
          else
            memres_tool_failf ("client %d: %s", served + failed, error->message);
          g_clear_error (&error);
          if (!buffer_put (buf, seed, &error)) /* restore the pattern for the next one */
            {
              close (fd);
              break;
            }
        }
      close (fd);
    }
  unlink (addr.sun_path);
  close (listener);
  close (lock_fd);

  /* a fatal error is the one document (memres_tool_fail()) */
  if (json && error == NULL)
    {
      MemresJson j;
      g_autofree char *text = NULL;
      memres_json_init (&j);
      memres_json_begin_object (&j, NULL);
      memres_json_string (&j, "socket", addr.sun_path);
      memres_json_uint (&j, "size", size);
      memres_json_int (&j, "served", served);
      memres_json_int (&j, "failed", failed);
      memres_json_begin_array (&j, "client_errors");
      for (guint i = 0; i < client_errors->len; i++)
        memres_json_string (&j, NULL, g_ptr_array_index (client_errors, i));
      memres_json_end_array (&j);
      memres_json_end_object (&j);
      text = memres_json_finish (&j);
      g_print ("%s", text);
    }
  if (error != NULL)
    return memres_tool_fail (error);
  return failed == 0 ? 0 : 1;
}

static gboolean
attach (int fd, MemresIpcFlags flags, guint64 *size_out, guint32 *seed_out, GError **error)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  guint8 trailer[TRAILER_SIZE];
  guint32 seed = 0, kib = 0;

  handle = memres_ipc_receive_handle_with_flags (fd, flags, error);
  if (handle == NULL)
    return FALSE;
  mr = memres_resource_import_handle (handle, error);
  if (mr == NULL || !io_all (fd, trailer, sizeof trailer, FALSE, error))
    return FALSE;
  for (int i = 3; i >= 0; i--)
    {
      seed = (seed << 8) | trailer[MEMRES_BUFFER_DESCRIPTOR_SIZE + i];
      kib = (kib << 8) | trailer[MEMRES_BUFFER_DESCRIPTOR_SIZE + 4 + i];
    }
  buf = memres_buffer_import (mr, trailer, MEMRES_BUFFER_DESCRIPTOR_SIZE, NULL, error);
  if (buf == NULL)
    return FALSE;
  if (memres_buffer_get_size (buf) != (gsize) kib * 1024)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "the buffer has %" G_GSIZE_FORMAT " bytes, the server said %u KiB",
                   memres_buffer_get_size (buf), kib);
      return FALSE;
    }
  if (!buffer_check (buf, seed, error) || !buffer_put (buf, seed + 1, error))
    return FALSE;
  /* Release the import before the server may free the buffer. */
  if (!memres_buffer_close (buf, NULL, error) || !memres_stream_synchronize (NULL, error))
    return FALSE;
  *size_out = (guint64) kib * 1024;
  *seed_out = seed;
  return TRUE;
}

/**
 * memres_tool_ipc_attach:
 * @argc: number of arguments, the command name included
 * @argv: `ipc-attach [--allow-any-uid] [--json] SOCKET`
 *
 * Connects to a `memres ipc-serve` on the UNIX socket SOCKET, imports its pool and buffer,
 * verifies the pattern, writes the next pattern back and reports to the server. The server must
 * run under this uid unless --allow-any-uid is given.
 *
 * Returns: the exit status: 0 on success, 1 on an error (no server listening on SOCKET: a
 *   missing socket, in a missing directory too), 2 for bad usage (a SOCKET that is another
 *   file, under a file that is not a directory, behind a loop of links)
 */
int
memres_tool_ipc_attach (int argc, char **argv)
{
  gboolean any_uid = FALSE, json = FALSE;
  gint timeout = DEFAULT_TIMEOUT;
  GOptionEntry entries[] = {
    { "allow-any-uid", 0, 0, G_OPTION_ARG_NONE, &any_uid,
      "accept a server running under another uid", NULL },
    { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout,
      "give up on a server that stays silent this many seconds (default 30; 0: never)", "S" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "print the result as JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = g_option_context_new ("SOCKET");
  g_autoptr (GError) error = NULL;
  struct sockaddr_un addr;
  guint64 size = 0;
  guint32 seed = 0;
  gboolean ok;
  int fd;

  g_option_context_set_summary (context, "Import the buffer a memres ipc-serve shares, verify it "
                                         "and write back.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("ipc-attach", error->message);
  if (argc != 2)
    return memres_tool_usage_error ("ipc-attach", "give exactly one SOCKET path");
  if (timeout < 0)
    return memres_tool_usage_error ("ipc-attach", "--timeout must be 0 or more seconds");
  if (!make_address (argv[1], &addr, &error))
    return memres_tool_fail (error);

  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) != 0)
    {
      int saved = errno;
      struct stat st;

      if (fd >= 0)
        close (fd);
      /* a file that cannot be a socket is a bad operand, as at ipc-serve (it was "Connection
       * refused", exit status 1, as if a server were missing) */
      if (saved == ECONNREFUSED && stat (addr.sun_path, &st) == 0 && !S_ISSOCK (st.st_mode))
        {
          g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "%s exists and is not a socket", addr.sun_path);
          return memres_tool_fail (error);
        }
      /* a path where no socket can ever be (under a file, a loop of links, too long): a bad
       * operand, 2; a missing socket, or a missing directory, is a server not (yet) listening,
       * 1 as documented */
      if (saved == ENOTDIR || saved == ELOOP || saved == ENAMETOOLONG)
        {
          socket_path_error (addr.sun_path, "connect to", saved, &error);
          return memres_tool_fail (error);
        }
      memres_tool_failf ("connecting to %s: %s", addr.sun_path, g_strerror (saved));
      return 1;
    }
  set_timeout (fd, timeout);
  ok = attach (fd, any_uid ? MEMRES_IPC_ALLOW_ANY_UID : MEMRES_IPC_NONE, &size, &seed, &error);
  (void) io_all (fd, ok ? "D" : "F", 1, TRUE, NULL);
  close (fd);
  if (!ok)
    return memres_tool_fail (error);

  if (json)
    {
      MemresJson j;
      g_autofree char *text = NULL;
      memres_json_init (&j);
      memres_json_begin_object (&j, NULL);
      memres_json_string (&j, "socket", addr.sun_path);
      memres_json_uint (&j, "size", size);
      memres_json_uint (&j, "seed", seed);
      memres_json_bool (&j, "verified", TRUE);
      memres_json_end_object (&j);
      text = memres_json_finish (&j);
      g_print ("%s", text);
    }
  else
    g_print ("verified %" G_GUINT64_FORMAT " bytes (seed %u) and wrote seed %u back\n", size, seed,
             seed + 1);
  return 0;
}
