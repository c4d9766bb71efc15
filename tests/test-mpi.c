/* test-mpi.c: two MPI ranks share memres buffers (examples/mpi/mpi-share.h): the message's bytes
 * through MPI, its fds through the pair's UNIX socket. Run as
 *   mpirun -np 2 --allow-run-as-root --oversubscribe test-mpi
 * on the fake driver (suite mpi) or the real one. Rank 0 exports a pool buffer (kind ipc), a
 * vmm buffer of POSIX fds, and a pool buffer and a vmm buffer of fabric handles (bytes only, no
 * socket: `ipc:handle_type=fabric`, `vmm:handle_type=fabric`; skipped where the driver refuses
 * fabric handles); each rank writes its half of each and reads the other's half back; then
 * rank 0 sends forged and truncated messages, which rank 1 refuses with the error the issue names.
 * Exits 0 when every check passed on both ranks, 77 (skip) on both when there is no device;
 * any failed check aborts its rank, and mpirun the job. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mpi-share.h"
#include "testutil.h"

#define KiB 1024

static int rank;

static void
say (const char *format, ...)
{
  va_list args;
  g_autofree char *text = NULL;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  printf ("rank %d: %s\n", rank, text);
  fflush (stdout);
}

/* Rank 0 owns @buf (rank 1 passes its import): each writes its half, then reads the other's. */
static void
write_halves (MemresBuffer *buf, gsize size, const char *what)
{
  gsize half = size / 2;

  mt_write_pattern (buf, rank * half, half, 100 + rank, NULL);
  mt_sync_ok (NULL);
  MPI_Barrier (MPI_COMM_WORLD);
  mt_check_pattern (buf, (1 - rank) * half, half, 100 + (1 - rank), NULL);
  MPI_Barrier (MPI_COMM_WORLD);
  say ("ok %s: each rank read the other's half (%" G_GSIZE_FORMAT " bytes)", what, half);
}

/* Rank 0: @buf's message sent forged (its version changed) and truncated (its last byte
 * cut); rank 1: both refused with MEMRES_ERROR_INVALID_DESCRIPTOR, nothing imported. */
static void
bad_messages (MpiShare *share, MemresBuffer *buf, MemresResource *importer, const char *what)
{
  GError *error = NULL;

  for (int round = 0; round < 2; round++)
    {
      if (rank == 0)
        {
          GBytes *bytes;
          gint *fds;
          guint n_fds;
          gsize length;
          g_autofree guint8 *data = NULL;

          g_assert_true (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
          g_assert_no_error (error);
          data = g_bytes_unref_to_data (bytes, &length);
          if (round == 0)
            data[4] ^= 0x40; /* the version: both families' records start magic u32, version u16 */
          else
            length--;
          g_assert_true (mpi_share_send_message (share, 1, data, length, fds, n_fds, &error));
          g_assert_no_error (error);
          for (guint i = 0; i < n_fds; i++)
            close (fds[i]);
          g_free (fds);
        }
      else
        {
          GBytes *bytes;
          gint *fds;
          guint n_fds;
          gsize length;
          gconstpointer data;
          MemresBuffer *got;

          g_assert_true (mpi_share_receive_message (share, 0, &bytes, &fds, &n_fds, &error));
          g_assert_no_error (error);
          data = g_bytes_get_data (bytes, &length);
          got = memres_buffer_import_message (importer, data, length, fds, n_fds, NULL, &error);
          g_assert_null (got);
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
          say ("ok %s %s message refused: %s", what, round == 0 ? "forged" : "truncated",
               error->message);
          g_clear_error (&error);
          for (guint i = 0; i < n_fds; i++)
            close (fds[i]);
          g_free (fds);
          g_bytes_unref (bytes);
        }
    }
}

/* A buffer of @spec (rank 0) shared with rank 1 (imported through @import_spec, or the pool
 * the message names when NULL), written by halves, then the bad messages. */
static void
share_one (MpiShare *share, const char *spec, const char *import_spec, gsize size, const char *what)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf = NULL;
  GError *error = NULL;

  if (rank == 0)
    {
      mr = mt_new_ok (spec);
      buf = mt_alloc_ok (mr, size, NULL);
      g_assert_true (mpi_share_send_buffer (share, 1, buf, &error));
      g_assert_no_error (error);
    }
  else
    {
      if (import_spec != NULL)
        importer = mt_new_ok (import_spec);
      buf = mpi_share_receive_buffer (share, 0, importer, NULL, &error);
      g_assert_no_error (error);
      g_assert_nonnull (buf);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
      g_assert_true (memres_buffer_get_flags (buf) & MEMRES_MEMORY_IMPORTED);
      /* a fabric message maps through a resource of fabric handles */
      g_assert_cmpint (strstr (spec, "handle_type=fabric") != NULL, ==,
                       (memres_resource_get_flags (memres_buffer_get_resource (buf))
                        & MEMRES_MEMORY_FABRIC_HANDLES)
                           != 0);
    }
  write_halves (buf, size, what);
  bad_messages (share, buf, importer, what);
  if (rank == 1)
    mt_close_ok (buf, NULL);
  MPI_Barrier (MPI_COMM_WORLD); /* the importer unmapped before the exporter frees */
  if (rank == 0)
    mt_close_ok (buf, NULL);
}

/* share_one() of a resource of fabric handles, @spec, where every rank's driver grants them
 * (the fake does; a machine without an IMEX channel does not): bytes through MPI alone. */
static void
share_fabric (MpiShare *share, const char *spec, const char *import_spec, gsize size,
              const char *what)
{
  GError *error = NULL;
  MemresResource *probe = memres_resource_new (spec, &error);
  int fabric = probe != NULL;

  g_clear_pointer (&probe, memres_resource_unref);
  MPI_Allreduce (MPI_IN_PLACE, &fabric, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (fabric)
    share_one (share, spec, import_spec, size, what);
  else
    say ("skip %s: %s", what, error != NULL ? error->message : "another rank");
  g_clear_error (&error);
}

int
main (int argc, char **argv)
{
  MpiShare *share;
  GError *error = NULL;
  int size, have_device;
  gsize gran;
  g_autofree char *vmm = NULL;

  MPI_Init (&argc, &argv);
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &size);
  if (size != 2)
    {
      say ("run with mpirun -np 2");
      MPI_Abort (MPI_COMM_WORLD, 1);
    }
  have_device = memres_cuda_get_driver (NULL) != NULL;
  MPI_Allreduce (MPI_IN_PLACE, &have_device, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!have_device)
    {
      say ("skip: no CUDA driver or device");
      MPI_Finalize ();
      return 77;
    }

  share = mpi_share_open (MPI_COMM_WORLD, &error);
  g_assert_no_error (error);
  g_assert_nonnull (share);

  share_one (share, "ipc", NULL, 64 * KiB, "ipc pool buffer");
  gran = mt_device_granularity ();
  vmm = g_strdup_printf ("vmm:handle_type=posix_fd,chunk=%" G_GSIZE_FORMAT, gran);
  share_one (share, vmm, vmm, 2 * gran, "vmm buffer");

  /* fabric handles: bytes through MPI alone, no socket */
  share_fabric (share, "ipc:handle_type=fabric", NULL, 64 * KiB, "ipc fabric pool buffer");
  g_free (vmm);
  vmm = g_strdup_printf ("vmm:handle_type=fabric,chunk=%" G_GSIZE_FORMAT, gran);
  share_fabric (share, vmm, vmm, 2 * gran, "vmm fabric buffer");

  mpi_share_close (share);
  MPI_Finalize ();
  return 0;
}
