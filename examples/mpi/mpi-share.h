/* memres - CUDA memory resources
 * mpi-share.h: memres buffers shared between the ranks of an MPI job (an example to copy into
 * an application; docs/distributed.md). The bytes of a buffer's message
 * (memres_buffer_export_message()) travel through MPI; its file descriptors (POSIX-fd handles)
 * through a UNIX socket between the two ranks, which the ranks set up through MPI. A message of
 * fabric handles has no fd: it needs MPI alone, and crosses nodes.
 *
 * Not part of libmemres: MPI implementations differ in ABI (Open MPI, MPICH), so this code is
 * built by the application against its own MPI. Thread safety: as MPI's; one thread per
 * MpiShare at a time. */
#pragma once

#include <mpi.h>
#include <memres/memres.h>

G_BEGIN_DECLS

typedef struct _MpiShare MpiShare;

/* Collective over @comm: every rank listens on a UNIX socket in a directory rank 0 makes (its
 * path broadcast), connects to every lower rank and accepts every higher one, so that each
 * pair of ranks of one host has a socket for file descriptors. A peer on another node gets no
 * socket (fabric messages need none). Errors: MEMRES_ERROR_FAILED (a socket call or MPI
 * failed; every rank fails together). */
MpiShare *mpi_share_open (MPI_Comm comm, GError **error);
void mpi_share_close (MpiShare *share);
/* How long a receive waits for the fds its message announced (the sockets' SO_RCVTIMEO; 60 s
 * from mpi_share_open()), in milliseconds, > 0. Errors: MEMRES_ERROR_INVALID_ARGUMENT,
 * MEMRES_ERROR_FAILED (setsockopt). */
gboolean mpi_share_set_timeout (MpiShare *share, int timeout_ms, GError **error);

/* A message to @peer: its length, fd count and bytes through MPI (tag MPI_SHARE_TAG), its fds
 * (lent: they stay the caller's) in SCM_RIGHTS over the pair's socket. */
gboolean mpi_share_send_message (MpiShare *share, int peer, gconstpointer data, gsize length,
                                 const gint *fds, guint n_fds, GError **error);
/* The next message from @peer: *@bytes and *@fds (g_new'd; the caller closes them). Each MPI
 * message is probed and taken whole, so that one longer or shorter than its header says is an
 * error here, not a truncation in MPI (which aborts the job under MPI's default handler). Errors:
 * MEMRES_ERROR_INVALID_DESCRIPTOR (a header of the wrong size; a message above 1 MiB, with more
 * fds than MEMRES_IPC_MAX_CHUNKS, or whose bytes are not as many as its header says: its fds,
 * if they come, are taken and closed; fds that did not come as announced),
 * MEMRES_ERROR_PERMISSION_DENIED (the socket's peer runs under another uid), MEMRES_ERROR_FAILED
 * (MPI failed; the announced fds did not come within the timeout, mpi_share_set_timeout(); the
 * peer closed its socket). A rank that dies is MPI's to report: Open MPI's mpirun ends the job. */
gboolean mpi_share_receive_message (MpiShare *share, int peer, GBytes **bytes, gint **fds,
                                    guint *n_fds, GError **error);

/* @buf as one message to @peer (memres_buffer_export_message() + mpi_share_send_message()). */
gboolean mpi_share_send_buffer (MpiShare *share, int peer, MemresBuffer *buf, GError **error);
/* The buffer @peer sent, mapped through @importer (memres_buffer_import_message(): %NULL for a
 * pool buffer, the resource that maps chunks for vmm). */
MemresBuffer *mpi_share_receive_buffer (MpiShare *share, int peer, MemresResource *importer,
                                        MemresStream stream, GError **error);

#define MPI_SHARE_TAG 0x6d72 /* "mr" */

G_END_DECLS
