/* memres - CUDA memory resources
 * file-writer.h: the one way memres writes a whole file a user names (memres view, trace and
 * snapshot's -o, MEMRES_OOM_SNAPSHOT, memres_allocator_write_snapshot()): compiled into libmemres
 * (not exported), the `memres` command and the allocator shim, as json-writer.c is. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Writes @length bytes of @contents (-1: up to the NUL) to @path as one whole file.
 * - A new name, or a regular file, is replaced atomically: written to a temporary file beside
 *   it, then renamed over it (a reader never sees half of it; a failure leaves the old file as
 *   it was; an existing file keeps its permission bits, those the umask allows; a new one gets
 *   0666 less the umask).
 * - A symbolic link is followed: the regular file it leads to is replaced that way, and the link
 *   stays a link.
 * - Anything else is refused and left as it is: a directory (G_FILE_ERROR_ISDIR), a FIFO, a
 *   device such as /dev/null, a socket (G_FILE_ERROR_INVAL: "not a regular file"), a link to
 *   nothing (G_FILE_ERROR_NOENT), a regular file another writer holds locked with flock(), a
 *   log layer's log or a sleep's file (G_FILE_ERROR_AGAIN, flock()'s EWOULDBLOCK, as a second
 *   log layer on the file is refused: renamed over, its writer would go on writing into a file
 *   no name reaches).
 * Other failures are the system's, as a #GFileError; every message names @path. */
gboolean memres_file_replace (const char *path, const char *contents, gssize length,
                              GError **error);

/* What a file of @mode (a stat()'s st_mode) that is not a regular file is, for a message: "a
 * directory", "a FIFO", "a device" (character or block), "a socket", or "a file of another
 * type". The one wording of the refusals of sdk/file-writer.c, the `memres` command's inputs
 * (tools/input.c) and a sleep's file (core/sleep-contents.c). */
const char *memres_file_type_name (mode_t mode);

G_END_DECLS
