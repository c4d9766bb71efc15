/* snapshot-streams.c: `snapshot-streams SPEC SNAPSHOT`: a fixed run over device memory (suite
 * fake) whose live buffers are on several streams, for tests/check-snapshot.py: on two streams of
 * its own (cuStreamCreate, non-blocking) and the legacy one it allocates 1 MiB and 64 KiB on each
 * and closes the 64 KiB buffer of each on its own stream, so that a caching kind keeps its block
 * free (or pending) for that stream; then writes the snapshot to SNAPSHOT, prints the two
 * streams' handles as the snapshot writes them ("0x..." on one line, space-separated) and closes
 * the rest. Exit status 0 when every call did what it should, 1 with the error on stderr. */
#include <memres/memres-plugin.h> /* the driver table, for the streams */

#include <stdio.h>

#define KIB 1024

static int
fail (const char *what, GError *error)
{
  fprintf (stderr, "snapshot-streams: %s: %s\n", what, error != NULL ? error->message : "failed");
  g_clear_error (&error);
  return 1;
}

int
main (int argc, char **argv)
{
  g_autoptr (MemresResource) mr = NULL;
  const MemresCudaDriver *drv;
  MemresBuffer *big[3] = { NULL }, *small[3] = { NULL };
  CUstream streams[3] = { NULL };
  GError *error = NULL;
  g_autofree char *text = NULL;
  gboolean pushed = FALSE;

  if (argc != 3)
    {
      fprintf (stderr, "usage: snapshot-streams SPEC SNAPSHOT\n");
      return 2;
    }
  if ((mr = memres_resource_new (argv[1], &error)) == NULL)
    return fail ("creating the resource", error);
  if ((drv = memres_cuda_get_driver (&error)) == NULL
      || !memres_cuda_push_context (memres_resource_get_device (mr), &pushed, &error))
    return fail ("the driver", error);
  for (guint i = 0; i < 2; i++)
    if (drv->cuStreamCreate (&streams[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
      return fail ("cuStreamCreate", NULL);
  streams[2] = (CUstream) MEMRES_STREAM_LEGACY;
  for (guint i = 0; i < 3; i++)
    if ((big[i] = memres_resource_allocate (mr, 1024 * KIB, (MemresStream) streams[i], &error))
            == NULL
        || (small[i] = memres_resource_allocate (mr, 64 * KIB, (MemresStream) streams[i], &error))
               == NULL)
      return fail ("allocating", error);
  for (guint i = 0; i < 3; i++)
    if (!memres_buffer_close (small[i], (MemresStream) streams[i], &error))
      return fail ("closing", error);
  if ((text = memres_resource_snapshot (mr, &error)) == NULL)
    return fail ("the snapshot", error);
  if (!g_file_set_contents (argv[2], text, -1, &error))
    return fail ("writing the snapshot", error);
  printf ("0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x\n", (guint64) (guintptr) streams[0],
          (guint64) (guintptr) streams[1]);
  for (guint i = 0; i < 3; i++)
    {
      memres_buffer_unref (small[i]);
      if (!memres_buffer_close (big[i], (MemresStream) streams[i], &error))
        return fail ("closing", error);
      memres_buffer_unref (big[i]);
      if (!memres_stream_synchronize ((MemresStream) streams[i], &error))
        return fail ("synchronizing", error);
    }
  g_clear_pointer (&mr, memres_resource_unref);
  for (guint i = 0; i < 2; i++)
    drv->cuStreamDestroy (streams[i]);
  memres_cuda_pop_context (pushed);
  return 0;
}
