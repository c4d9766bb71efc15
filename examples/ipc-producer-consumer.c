/* ipc-producer-consumer.c: share device memory between two processes with the `ipc` kind.
 *
 *   ipc-producer-consumer [SPEC]        (default SPEC: ipc:device=0)
 *
 * The program forks BEFORE either process touches CUDA (the driver does not survive fork), and
 * the two talk over a socketpair:
 *
 *   producer (parent)                         consumer (child)
 *   memres_resource_new (SPEC)
 *   memres_resource_export_handle ──handle──▶ memres_ipc_receive_handle
 *                                             memres_resource_import_handle
 *   allocate, fill with bytes i*7+1
 *   memres_buffer_export ─────160 bytes────▶ memres_buffer_import
 *                                             verify, write bytes i*7+2 back, close
 *   verify i*7+2 ◀──────────"done"──────────
 *   close
 *
 * Order matters across processes: the producer synchronizes after filling before sending the
 * descriptor, and frees its buffer only after the consumer said it closed its import (the
 * driver's rule: importers release first). */
#include <memres/memres.h>

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (4 * 1024 * 1024)

static int
fail (const char *who, GError *error)
{
  fprintf (stderr, "%s: %s\n", who, error != NULL ? error->message : "failed");
  g_clear_error (&error);
  return 1;
}

static gboolean
write_all (int fd, const void *data, gsize n)
{
  const guint8 *p = data;
  while (n > 0)
    {
      ssize_t k = write (fd, p, n);
      if (k <= 0)
        return FALSE;
      p += k;
      n -= (gsize) k;
    }
  return TRUE;
}

static gboolean
read_all (int fd, void *data, gsize n)
{
  guint8 *p = data;
  while (n > 0)
    {
      ssize_t k = read (fd, p, n);
      if (k <= 0)
        return FALSE;
      p += k;
      n -= (gsize) k;
    }
  return TRUE;
}

static void
fill (guint8 *host, guint8 add)
{
  for (gsize i = 0; i < SIZE; i++)
    host[i] = (guint8) (i * 7 + add);
}

static gboolean
check (const guint8 *host, guint8 add, const char *who)
{
  for (gsize i = 0; i < SIZE; i++)
    if (host[i] != (guint8) (i * 7 + add))
      {
        fprintf (stderr, "%s: byte %zu is %u, expected %u\n", who, i, host[i],
                 (guint8) (i * 7 + add));
        return FALSE;
      }
  return TRUE;
}

static int
consumer (int sock)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  g_autofree guint8 *host = g_malloc (SIZE);
  guint8 desc[MEMRES_BUFFER_DESCRIPTOR_SIZE];
  GError *error = NULL;

  handle = memres_ipc_receive_handle (sock, &error);
  if (handle == NULL)
    return fail ("consumer: receiving the pool", error);
  mr = memres_resource_import_handle (handle, &error);
  if (mr == NULL)
    return fail ("consumer: importing the pool", error);
  if (!read_all (sock, desc, sizeof desc))
    return fail ("consumer: reading the descriptor", NULL);
  /* The descriptor is untrusted input: memres_buffer_import validates it. */
  buf = memres_buffer_import (mr, desc, sizeof desc, NULL, &error);
  if (buf == NULL)
    return fail ("consumer: importing the buffer", error);

  if (!memres_buffer_read (buf, 0, host, SIZE, NULL, &error)
      || !memres_stream_synchronize (NULL, &error))
    return fail ("consumer: reading", error);
  if (!check (host, 1, "consumer"))
    return 1;
  fill (host, 2);
  if (!memres_buffer_write (buf, 0, host, SIZE, NULL, &error)
      || !memres_stream_synchronize (NULL, &error))
    return fail ("consumer: writing", error);
  if (!memres_buffer_close (buf, NULL, &error) || !memres_stream_synchronize (NULL, &error))
    return fail ("consumer: closing", error);
  printf ("consumer: read %d bytes from the producer, wrote them back changed\n", SIZE);
  return write_all (sock, "D", 1) ? 0 : 1;
}

static int
producer (int sock, const char *spec)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  g_autofree guint8 *host = g_malloc (SIZE);
  MemresBufferDescriptor desc;
  GError *error = NULL;
  char done = 0;

  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    return fail ("producer: creating the pool", error);
  handle = memres_resource_export_handle (mr, &error);
  if (handle == NULL || !memres_ipc_send_handle (sock, handle, &error))
    return fail ("producer: sending the pool", error);

  buf = memres_resource_allocate (mr, SIZE, NULL, &error);
  if (buf == NULL)
    return fail ("producer: allocating", error);
  fill (host, 1);
  if (!memres_buffer_write (buf, 0, host, SIZE, NULL, &error)
      || !memres_stream_synchronize (NULL, &error))
    return fail ("producer: writing", error);
  if (!memres_buffer_export (buf, &desc, &error))
    return fail ("producer: exporting the buffer", error);
  if (!write_all (sock, desc.bytes, sizeof desc.bytes))
    return fail ("producer: sending the descriptor", NULL);

  if (!read_all (sock, &done, 1) || done != 'D')
    return fail ("producer: the consumer did not finish", NULL);
  if (!memres_buffer_read (buf, 0, host, SIZE, NULL, &error)
      || !memres_stream_synchronize (NULL, &error))
    return fail ("producer: reading back", error);
  if (!check (host, 2, "producer"))
    return 1;
  printf ("producer: the consumer's bytes arrived\n");
  return memres_buffer_close (buf, NULL, &error) ? 0 : fail ("producer: closing", error);
}

int
main (int argc, char **argv)
{
  const char *spec = argc > 1 ? argv[1] : "ipc:device=0";
  int sv[2], status = 0, result;
  pid_t pid;

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    {
      perror ("socketpair");
      return 1;
    }
  pid = fork (); /* before any CUDA call in either process */
  if (pid < 0)
    {
      perror ("fork");
      return 1;
    }
  if (pid == 0)
    {
      int status;
      close (sv[0]);
      status = consumer (sv[1]);
      fflush (stdout); /* _exit() does not flush stdio */
      _exit (status);
    }
  close (sv[1]);
  result = producer (sv[0], spec);
  close (sv[0]);
  if (waitpid (pid, &status, 0) != pid || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
    result = 1;
  printf ("%s\n", result == 0 ? "ok" : "FAILED");
  return result;
}
