/* memres - CUDA memory resources
 * file-reader.h: the one way memres reads a whole file a user names (the config file of @NAME
 * resources, the `memres` command's inputs): compiled into libmemres (not exported) and the
 * `memres` command, as file-writer.c is. */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

/* What memres_file_read() did. */
typedef enum
{
  MEMRES_FILE_READ_OK,        /* the whole file appended */
  MEMRES_FILE_READ_FAILED,    /* the error set */
  MEMRES_FILE_READ_TOO_LARGE, /* more than the bytes allowed: the error left unset, for the
                               * caller to word in its own domain */
} MemresFileRead;

/* Refuses @st (a stat() of the file @shown names) unless it is a regular file: FALSE with
 * G_FILE_ERROR_ISDIR for a directory, else G_FILE_ERROR_INVAL, "SHOWN: not a regular file
 * (TYPE)" (TYPE: memres_file_type_name()). TRUE for a regular file. */
gboolean memres_file_check_regular (const struct stat *st, const char *shown, GError **error);

/* Reads the file at @path whole, appending its bytes to @data (whose NUL stays after them):
 * opened without blocking (O_NONBLOCK, O_NOCTTY, O_CLOEXEC) and refused on the open descriptor
 * unless it is a regular file (memres_file_check_regular()), so that a FIFO, whose open or read
 * would wait for a writer, or a device, which would be read without end, is refused at once, even
 * one put in the place of a regular file a moment before; then read to its end, a read that a
 * signal interrupted (EINTR) made again, and at most @max_bytes + 1 bytes read: a file larger
 * than @max_bytes (by its size on the descriptor, or by what it gave, when it grew meanwhile) is
 * MEMRES_FILE_READ_TOO_LARGE, @data cut back to what it was. A leading UTF-8 byte order mark is
 * dropped (editors and spreadsheets write one before the text; it counts in @max_bytes). @opened,
 * when not NULL, gets the descriptor's fstat() (its st_size: the size the file had). Messages
 * name @shown ("SHOWN: REASON"); an open(), fstat() or read() that fails is G_FILE_ERROR with the
 * code g_file_error_from_errno() gives, "SHOWN: STRERROR". */
MemresFileRead memres_file_read (const char *path, const char *shown, gsize max_bytes,
                                 GString *data, struct stat *opened, GError **error);

G_END_DECLS
