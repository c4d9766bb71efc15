/* test-mpi.c: two MPI ranks share memres buffers (examples/mpi/mpi-share.h): the message's bytes
 * through MPI, its fds through the pair's UNIX socket. Run as
 *   mpirun -np 2 --allow-run-as-root --oversubscribe test-mpi
 * on the fake driver (suite mpi) or the real one. First rank 0 sends broken frames by hand
 * (bytes fewer or more than the header says, headers of the wrong size, a message above the
 * limit, an fd announced and never sent), each refused by rank 1 with its error, no abort from
 * MPI and no hang, the next good message whole with its own fd. Rank 0 exports a pool buffer (kind
 * ipc), a vmm buffer of POSIX fds, and a pool buffer and a vmm buffer of fabric handles (bytes
 * only, no socket: `ipc:handle_type=fabric`, `vmm:handle_type=fabric`; skipped where the driver
 * refuses fabric handles); each rank writes its half of each and reads the other's half back; then
 * rank 0 sends forged and truncated messages, which rank 1 refuses with the error the issue names;
 * for fabric handles, rank 1 imports a message again after rank 0 closed its export (the vmm
 * buffer; the pool buffer and its pool) and the driver refuses it.
 * Exits 0 when every check passed on both ranks, 77 (skip) on both when there is no device;
 * any failed check aborts its rank, and mpirun the job. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

/* The wire frames of mpi-share.c, sent by hand to break them: a header (the message's length
 * and fd count, two u64) and the bytes, each one MPI message of tag MPI_SHARE_TAG. */
static void
send_frames (const void *header, int header_size, const void *data, int length)
{
  MPI_Send (header, header_size, MPI_BYTE, 1, MPI_SHARE_TAG, MPI_COMM_WORLD);
  if (data != NULL)
    MPI_Send (data, length, MPI_BYTE, 1, MPI_SHARE_TAG, MPI_COMM_WORLD);
}

/* An fd of rank 0's for rank 1, told by its inode: a pipe's read end (rank 0 keeps the pipe). */
static int wire_pipe[2];

static void
send_pipe_fd (MpiShare *share, const guint64 *data, guint64 length)
{
  GError *error = NULL;

  g_assert_true (mpi_share_send_message (share, 1, data, length, &wire_pipe[0], 1, &error));
  g_assert_no_error (error);
}

/* Rank 1: the next message refused with @code, its message containing @needle. */
static void
receive_refused (MpiShare *share, int code, const char *needle, const char *what)
{
  GError *error = NULL;
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;

  g_assert_false (mpi_share_receive_message (share, 0, &bytes, &fds, &n_fds, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_assert_nonnull (strstr (error->message, needle));
  g_assert_null (bytes);
  g_assert_null (fds);
  say ("ok %s refused: %s", what, error->message);
  g_clear_error (&error);
}

/* Rank 0 breaks the wire (bytes fewer or more than the header says, a header of the wrong size,
 * a message above the limit, fds announced and not sent); rank 1 gets an error each time, no
 * abort from MPI, no hang, and the next well-formed message (with an fd) still arrives whole,
 * its own fd with it (the refused messages' fds were taken). */
static void
bad_frames (MpiShare *share)
{
  guint64 payload[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
  GError *error = NULL;
  struct stat st;

  g_assert_cmpint (pipe (wire_pipe), ==, 0);
  g_assert_cmpint (fstat (wire_pipe[0], &st), ==, 0);
  payload[7] = st.st_ino;
  MPI_Bcast (&payload[7], 1, MPI_UINT64_T, 0, MPI_COMM_WORLD); /* rank 1 learns the good inode */
  if (rank == 0)
    {
      guint64 header[2];
      g_autofree guint8 *big = g_malloc0 ((1u << 20) + 8);
      int other[2];

      /* fewer bytes than announced, announcing an fd; the one fd on the socket comes with the
       * next message (0 bytes), and the refused message takes it */
      g_assert_cmpint (pipe (other), ==, 0);
      header[0] = sizeof payload, header[1] = 1;
      send_frames (header, sizeof header, payload, sizeof payload - 8);
      g_assert_true (mpi_share_send_message (share, 1, payload, 0, other, 1, &error));
      g_assert_no_error (error);
      close (other[0]);
      close (other[1]);
      /* more bytes than announced */
      header[0] = sizeof payload - 8, header[1] = 0;
      send_frames (header, sizeof header, payload, sizeof payload);
      /* a header cut short, then a header too long (no bytes follow either) */
      send_frames (header, sizeof header - 1, NULL, 0);
      send_frames (payload, sizeof payload, NULL, 0);
      /* above the limit, every byte sent */
      header[0] = (1u << 20) + 8, header[1] = 0;
      send_frames (header, sizeof header, big, (1u << 20) + 8);
      /* an fd announced that never comes */
      header[0] = sizeof payload, header[1] = 1;
      send_frames (header, sizeof header, payload, sizeof payload);
      MPI_Barrier (MPI_COMM_WORLD); /* rank 1 timed out */
      send_pipe_fd (share, payload, sizeof payload);
    }
  else
    {
      GBytes *bytes = NULL;
      gint *fds = NULL;
      guint n_fds = 0;
      gsize length;

      g_assert_true (mpi_share_set_timeout (share, 300, &error));
      g_assert_no_error (error);
      g_assert_false (mpi_share_set_timeout (share, 0, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      receive_refused (share, MEMRES_ERROR_INVALID_DESCRIPTOR, "and sent 56 bytes",
                       "bytes fewer than announced");
      /* the refused message took the one fd on the socket (mpi_share_send_message()'s, sent
       * after it): that message's own fd never comes (without the take, it would arrive and
       * the refused message's fd would be taken for the next message's) */
      receive_refused (share, MEMRES_ERROR_FAILED, "timed out",
                       "a message whose fd the refused one took");
      receive_refused (share, MEMRES_ERROR_INVALID_DESCRIPTOR, "and sent 64 bytes",
                       "bytes more than announced");
      receive_refused (share, MEMRES_ERROR_INVALID_DESCRIPTOR, "a header of 15 bytes",
                       "a header cut short");
      receive_refused (share, MEMRES_ERROR_INVALID_DESCRIPTOR, "a header of 64 bytes",
                       "a header too long");
      receive_refused (share, MEMRES_ERROR_INVALID_DESCRIPTOR, "1048584 bytes",
                       "a message above the limit");
      receive_refused (share, MEMRES_ERROR_FAILED, "timed out", "an fd that never came");
      MPI_Barrier (MPI_COMM_WORLD);
      g_assert_true (mpi_share_set_timeout (share, 60000, &error));
      g_assert_true (mpi_share_receive_message (share, 0, &bytes, &fds, &n_fds, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (g_bytes_get_data (bytes, &length), g_bytes_get_size (bytes), payload,
                       sizeof payload);
      g_assert_cmpuint (n_fds, ==, 1);
      g_assert_cmpint (fstat (fds[0], &st), ==, 0);
      g_assert_cmpuint (st.st_ino, ==, payload[7]); /* its own fd, not a refused message's */
      close (fds[0]);
      g_free (fds);
      g_bytes_unref (bytes);
      say ("ok the next message came whole with its own fd");
    }
  close (wire_pipe[0]);
  close (wire_pipe[1]);
  MPI_Barrier (MPI_COMM_WORLD);
}

/* MEMRES_TEST_MPI_DEAD_RANK: rank 0 dies (_exit (3)) halfway through a message (its header sent,
 * announcing bytes and an fd, nothing after), while rank 1 receives it. What the test (should_fail)
 * holds is that nothing hangs: the job ends non-zero well before its timeout (Open MPI's mpirun
 * ends it when a rank dies: 2 s here); a hang is its one failure. Rank 1 says what its receive
 * gave if it returns at all. */
static int
dead_rank (MpiShare *share)
{
  guint64 header[2] = { 64, 1 };
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;
  GError *error = NULL;

  if (rank == 0)
    {
      MPI_Send (header, sizeof header, MPI_BYTE, 1, MPI_SHARE_TAG, MPI_COMM_WORLD);
      say ("dying halfway through a message");
      _exit (3);
    }
  g_assert_true (mpi_share_set_timeout (share, 2000, NULL));
  if (mpi_share_receive_message (share, 0, &bytes, &fds, &n_fds, &error))
    {
      say ("the receive succeeded from a dead rank");
      return 0;
    }
  say ("the receive failed: %s", error->message);
  g_clear_error (&error);
  return 4;
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

/* Fabric bytes replayed after their export closed, in another process: rank 0 sends a buffer's
 * message, rank 1 imports it (and reads the pattern), unmaps it; rank 0 closes the buffer (and
 * for a pool, drops the resource: the pool goes); rank 1's import of the same bytes again is
 * refused by the driver (MEMRES_CUDA_ERROR), nothing imported. */
static void
replay_after_close (MpiShare *share, const char *spec, const char *import_spec, gsize size,
                    const char *what)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) importer = NULL;
  MemresBuffer *buf = NULL;
  GError *error = NULL;
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;

  if (rank == 0)
    {
      mr = mt_new_ok (spec);
      buf = mt_alloc_ok (mr, size, NULL);
      mt_write_pattern (buf, 0, size, 77, NULL);
      mt_sync_ok (NULL);
      g_assert_true (mpi_share_send_buffer (share, 1, buf, &error));
      g_assert_no_error (error);
    }
  else
    {
      MemresBuffer *got;

      if (import_spec != NULL)
        importer = mt_new_ok (import_spec);
      g_assert_true (mpi_share_receive_message (share, 0, &bytes, &fds, &n_fds, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (n_fds, ==, 0); /* fabric: bytes alone */
      got = memres_buffer_import_message (importer, g_bytes_get_data (bytes, NULL),
                                          g_bytes_get_size (bytes), NULL, 0, NULL, &error);
      g_assert_no_error (error);
      mt_check_pattern (got, 0, size, 77, NULL);
      mt_close_ok (got, NULL);
    }
  MPI_Barrier (MPI_COMM_WORLD); /* rank 1 unmapped its import */
  if (rank == 0)
    {
      mt_close_ok (buf, NULL);
      mt_sync_ok (NULL);
      g_clear_pointer (&mr, memres_resource_unref);
    }
  MPI_Barrier (MPI_COMM_WORLD); /* the export closed */
  if (rank == 1)
    {
      MemresBuffer *got
          = memres_buffer_import_message (importer, g_bytes_get_data (bytes, NULL),
                                          g_bytes_get_size (bytes), NULL, 0, NULL, &error);

      g_assert_null (got);
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
      say ("ok %s replayed after its export closed refused: %s", what, error->message);
      g_clear_error (&error);
      g_bytes_unref (bytes);
      g_free (fds);
    }
  MPI_Barrier (MPI_COMM_WORLD);
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
    {
      share_one (share, spec, import_spec, size, what);
      replay_after_close (share, spec, import_spec, size, what);
    }
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

  if (g_getenv ("MEMRES_TEST_MPI_DEAD_RANK") != NULL)
    return dead_rank (share); /* no MPI_Finalize: its peer is gone */
  bad_frames (share);
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
