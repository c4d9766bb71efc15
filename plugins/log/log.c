/* memres - CUDA memory resources
 * log.c: the `log` adaptor: one CSV line per allocate and free that goes through it, with
 * RMM's column set, to the file named by option `path`:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   12345,10:04:05.123456,allocate,0x7f0000000000,1048576,0x0
 *   12345,10:04:05.123470,free,0x7f0000000000,1048576,0x0
 *
 * Thread is the kernel thread id, Time the local wall-clock time with microseconds, Action one
 * of RMM's `allocate`, `allocate failure` (Pointer then 0x0), `free` and `free failure` (the free
 * failed and released nothing: the buffer stays open), or memres's own, which RMM's readers do
 * not know (a reader of RMM's format that skips them reads the rest; RMM's log_parser.hpp refuses
 * them: `rmm=true` below): `out of memory` (right after the `allocate failure` of an allocation
 * that failed for lack of memory, same Size) and `trim` (a memres_resource_trim() through the layer
 * that succeeded: Size the bytes kept, Pointer and Stream 0x0); Pointer the address in hex,
 * Size bytes (what the upstream returned; the size asked for on a failure), Stream the stream
 * handle in hex. A free is logged once its outcome is known: `free` after the upstream freed
 * (also when it failed after releasing the allocation, which the core then closes), `free
 * failure` else. So that a `free` still comes before the `allocate` of another thread that got
 * the same address back, the address is marked as being freed under the mutex before the free,
 * and an allocate of a marked address waits for that free's line. Each line is formatted
 * without a lock, then written whole under the layer's mutex, so lines of many threads never
 * interleave; with `flush=true` every line is written
 * at once (survives a crash), else when the layer's 64 KiB buffer fills, when its counters are
 * read and when the layer is finalized. A line that cannot be written (a full disk, an I/O
 * error) is lost, not retried: the counters (memres_resource_get_counters()) say how many,
 * `lines_lost`, beside `lines_written` and the first error, `write_error`; the log is complete
 * when `lines_lost` is 0 (reading the counters writes what is buffered first, so they count
 * every line logged so far). The first failure is also one warning. A process that exits
 * without finalizing the layer still writes its lines (at exit, as stdio would).
 * `memres replay LOG SPEC` replays such a file. With `tags=true` a seventh column, Tag, follows
 * RMM's six (which RMM's readers read as before): the tag of the buffer each allocate, failure
 * and free is for (memres_allocation_get_tag(), MEMRES_KIND_TAGGED), empty for none and for a
 * trim; the tag is the last field, quoted as RFC 4180 quotes a field (in double quotes, a quote
 * doubled) where it holds a comma or a quote. With `backtrace=true` a column Backtrace
 * comes after Stream (before Tag, which stays last): for an allocate, an allocate failure and an
 * out of memory, the allocating call stack (log-backtrace.c: memres's own frames left out, at
 * most 32 frames as glibc's backtrace_symbols() writes them, innermost first, separated by ';',
 * '%', ',', ';', '"' and control bytes written %XX), empty on the other lines; it costs a
 * backtrace() per allocation and a backtrace_symbols() per frame not seen before
 * (bench/RESULTS.md). Two more of memres's actions tell of sleep and wake (memres-sleep.h), through
 * the layer's sleep and wake slots, which pass the call to the upstream and, once it succeeded,
 * write `sleep POLICY` or `wake POLICY` (POLICY discard, backup or file: the sleep's), Pointer and
 * Stream 0x0, Size the bytes of the allocations put to sleep or woken through the layer, the tag in
 * the Tag column (memres_sleep_call_get_tag()). With `segments=true` the layer subscribes to the
 * segment events of its upstream (memres-segments.h: the first layer below with segments) and
 * writes `segment mapped`, `segment grown` (Size the new length) and `segment unmapping`, Pointer
 * the segment's base, Size its length, Stream 0x0, Tag empty: `memres view` draws the segment map
 * at any moment from them. Those lines go on until the layer below is finalized, after this one:
 * what the layers below unmap at their finalize (a cache's free chunks) is logged, and the file is
 * closed after it, so that a log of a whole stack ends with its segments unmapped (an upstream
 * shared with another stack, and so finalized later, keeps the file open until then). Allocations
 * pass through unchanged (MEMRES_KIND_PASSES_ALLOCATIONS). RMM's own reader (its replay
 * benchmark's log_parser.hpp) reads the columns by name, so the Backtrace and Tag columns pass,
 * but throws at any Action other than allocate, allocate failure and free: with `rmm=true` the
 * lines of memres's own actions (and `free failure`) are not written. */
#include <memres/memres-plugin.h>

#include "log-backtrace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LOG_HEADER      "Thread,Time,Action,Pointer,Size,Stream"
#define LOG_LINE_MAX    (160 + 2 * MEMRES_TAG_NAME_MAX + 2) /* the Tag quoted */
#define LOG_BUFFER_SIZE (64 * 1024)

/* The writer of one log: the layer's private data points to it. The layer holds a reference,
 * and so does its subscription to the segment events below (`segments=true`), which lasts until
 * the layer it is on is finalized: the segments the layers below unmap at their finalize, which
 * follows this layer's, are in the log too (the file is closed after them). */
typedef struct
{
  gint refs;
  GMutex lock;
  int fd;
  char *path;
  gboolean flush;
  gboolean tags;         /* the Tag column */
  gboolean rmm;          /* RMM's actions alone (rmm=true) */
  gboolean backtrace;    /* the Backtrace column */
  char *buffer;          /* lines not yet written, LOG_BUFFER_SIZE bytes */
  gsize buffered;        /* bytes in buffer */
  guint64 lines_written; /* lines (the header included) that reached the file */
  guint64 lines_lost;    /* lines a write failed to take: not in the file */
  int write_errno;       /* the first failure's errno (0: none), warned once */
  pid_t pid;             /* of the process that created it: the one to write at exit */
  GHashTable *freeing;   /* addresses (guint64*, the freeing frame's) whose free is not logged */
  GCond freed;           /* signalled when one leaves freeing */
  /* the local time's offset from UTC in seconds, valid for the hour (UTC seconds / 3600) in
   * zone_hour + 1 (0: none yet); see format_line() */
  glong zone_offset;
  gint64 zone_hour;
} LogResource;

/* the layer's writer */
#define log_of(mr) (*(LogResource **) memres_resource_get_private (mr))

static const MemresOptionSpec log_options[] = {
  { "path", MEMRES_OPTION_STRING, NULL,
    "the CSV file to write (created or truncated; write ',', '>' and '\\' as '\\,', '\\>', "
    "'\\\\')",
    NULL, 0, 0 },
  { "append", MEMRES_OPTION_BOOL, "false",
    "append to an existing file instead of truncating it (refused where its header is not this "
    "layer's columns, or its last line was cut short)",
    NULL, 0, 0 },
  { "flush", MEMRES_OPTION_BOOL, "false", "flush every line at once", NULL, 0, 0 },
  { "tags", MEMRES_OPTION_BOOL, "false",
    "a seventh column, Tag: the allocation's tag (memres-tags.h), after RMM's six", NULL, 0, 0 },
  { "segments", MEMRES_OPTION_BOOL, "false",
    "lines for the segment events of the layers below (mapped, grown, unmapping), for the "
    "segment map of memres view",
    NULL, 0, 0 },
  { "backtrace", MEMRES_OPTION_BOOL, "false",
    "a column Backtrace before Tag: the allocating call stack of each allocate and allocate "
    "failure line (glibc backtrace(), symbolized; costs microseconds a line)",
    NULL, 0, 0 },
  { "rmm", MEMRES_OPTION_BOOL, "false",
    "RMM's actions alone (allocate, allocate failure, free), for RMM's log_parser.hpp, which "
    "refuses any other: no out of memory, free failure, trim, sleep or wake line (not with "
    "segments=true)",
    NULL, 0, 0 },
};

static void write_line (LogResource *self, const char *action, guint64 address, gsize size,
                        MemresStream stream, const char *backtrace, const char *tag,
                        gboolean allocated, gboolean freed);

/* A segment event of the layers below (`segments=true`), on the thread that raised it. */
static void
log_segment_event (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                   guint64 previous_length, gpointer user_data)
{
  static const char *const actions[] = { "segment mapped", "segment grown", "segment unmapping" };

  if ((guint) event < G_N_ELEMENTS (actions))
    write_line (user_data, actions[event], segment->base, segment->length, NULL, NULL, NULL, FALSE,
                FALSE);
}

/* Whether the regular file @path (@st: the descriptor's, opened to append) that append=true writes
 * after its @st->st_size bytes can take this layer's lines: its first line is @header (this layer's
 * columns, ending in a newline; a UTF-8 byte order mark before it and a carriage return at its end
 * let through, as the readers let them through) and its last byte is a newline. Lines of other
 * columns under another header (a log of other options, or a file that is no log) and a line glued
 * to a last line cut short would make the whole log unreadable from there: refused
 * (INVALID_ARGUMENT) before anything is written. A file the process may write but not read is let
 * through unchecked. */
static gboolean
append_fits (const struct stat *st, const char *path, const char *header, GError **error)
{
  gsize want = strlen (header) - 1; /* the header's line without its newline */
  char first[512];
  char last = '\0';
  ssize_t n;
  int rfd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat rst;
  const char *line = first;
  const char *end;

  if (rfd < 0)
    return TRUE; /* written, never read: nothing to check it with */
  if (fstat (rfd, &rst) != 0 || rst.st_dev != st->st_dev || rst.st_ino != st->st_ino)
    {
      close (rfd);
      return TRUE; /* renamed over in between: not the file written */
    }
  n = pread (rfd, first, sizeof first - 1, 0);
  if (n > 0 && pread (rfd, &last, 1, st->st_size - 1) != 1)
    last = '\0';
  close (rfd);
  if (n < 0)
    return TRUE;
  first[n] = '\0';
  if (n >= 3 && memcmp (first, "\xEF\xBB\xBF", 3) == 0)
    line += 3;
  end = memchr (line, '\n', (gsize) (first + n - line));
  if (end != NULL && end > line && end[-1] == '\r')
    end--;
  if (end == NULL || (gsize) (end - line) != want || memcmp (line, header, want) != 0)
    {
      gsize len = end != NULL ? (gsize) (end - line) : strlen (line);
      g_autofree char *copy = g_strndup (line, len);
      g_autofree char *shown = memres_printable (copy, MEMRES_INPUT_SHOWN_MAX);

      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"log\": cannot append to \"%s\": its header is \"%s\"%s, not this "
                   "layer's \"%.*s\" (options tags and backtrace choose the columns): lines of "
                   "other columns would make the log unreadable; append with the options that "
                   "wrote it, or log to another file",
                   path, shown, end == NULL ? " (no newline in its first bytes)" : "", (int) want,
                   header);
      return FALSE;
    }
  if (last != '\n')
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"log\": cannot append to \"%s\": its header fits, but its last line "
                   "ends without a newline (the log was cut short): a line appended would be "
                   "glued to it",
                   path);
      return FALSE;
    }
  return TRUE;
}

/* @path opened for writing: a regular file (created, truncated unless @append; appended to
 * only where its header is @header: append_fits()) or a character device such as /dev/null. Opened
 * without blocking, so that a FIFO (whose open would wait for a reader) is refused instead, as is
 * anything else. A file that cannot be opened, truncated or be a log is G_FILE_ERROR (the code
 * of the system's error; G_FILE_ERROR_INVAL for one of another type; G_FILE_ERROR_AGAIN, flock()'s
 * EWOULDBLOCK, for a file another layer writes); one append=true cannot add to,
 * MEMRES_ERROR_INVALID_ARGUMENT (the spec's fault).
 * Returns the descriptor, or -1. */
static int
open_log (const char *path, gboolean append, const char *header, gboolean *empty, GError **error)
{
  int flags = O_WRONLY | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : 0);
  int fd = open (path, flags);
  gboolean dangling = FALSE;
  struct stat st;

  /* a missing file is created, never through a symbolic link to nothing (O_EXCL does not follow
   * one): such a link is refused, as sdk/file-writer.c refuses it, rather than have the log
   * create whatever file it names; EEXIST for a regular file is one made meanwhile */
  if (fd < 0 && errno == ENOENT)
    fd = open (path, flags | O_CREAT | O_EXCL, 0666);
  if (fd < 0 && errno == EEXIST)
    {
      fd = open (path, flags);
      dangling = fd < 0 && errno == ENOENT;
    }
  if (fd < 0)
    {
      int saved = errno;

      /* a file that cannot be opened (a missing directory, a component that is not one, a
       * directory itself, a FIFO without a reader, a link to nothing, no permission): GLib's
       * file domain, the code of the system's error */
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved),
                   "kind \"log\": cannot open \"%s\": %s%s", path, g_strerror (saved),
                   saved == ENXIO ? " (a FIFO without a reader, or a device that is not there: the "
                                    "log must be a regular file or a character device)"
                   : dangling     ? " (a symbolic link to nothing: refused, to leave it as it is)"
                                  : "");
      return -1;
    }
  if (fstat (fd, &st) != 0 || !(S_ISREG (st.st_mode) || S_ISCHR (st.st_mode)))
    {
      /* a FIFO with a reader, a socket...: a file that cannot be a log (as sdk/file-writer.c
       * refuses one) */
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                   "kind \"log\": \"%s\" is not a regular file (nor a character device such "
                   "as /dev/null)",
                   path);
      close (fd);
      return -1;
    }
  /* one writer per file: each layer writes at its own offset (or, appending, its own lines into
   * a log of its own), so two layers on one file, of one stack or of two, in this process or
   * another, would overwrite or mix each other's lines. An exclusive flock(), held while the
   * descriptor is open (until the layer's writer goes), taken before the file is truncated. */
  if (S_ISREG (st.st_mode) && flock (fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    {
      /* the system's error, as for a file that cannot be opened: G_FILE_ERROR_AGAIN, the file
       * busy while its writer lives (sdk/file-writer.c refuses a locked file the same way) */
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (EWOULDBLOCK),
                   "kind \"log\": \"%s\" is the file of another log layer (of this stack, "
                   "another one, or another process) that is writing it: two layers would "
                   "overwrite each other's lines; give each its own file",
                   path);
      close (fd);
      return -1;
    }
  if (!append && S_ISREG (st.st_mode) && ftruncate (fd, 0) != 0)
    {
      int saved = errno;

      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved),
                   "kind \"log\": cannot truncate \"%s\": %s", path, g_strerror (saved));
      close (fd);
      return -1;
    }
  if (append && S_ISREG (st.st_mode) && st.st_size > 0 && !append_fits (&st, path, header, error))
    {
      close (fd);
      return -1;
    }
  *empty = !append || st.st_size == 0; /* the header goes first */
  (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

static guint64
count_lines (const char *text, gsize len)
{
  guint64 n = 0;
  const char *end = text + len;

  while ((text = memchr (text, '\n', (gsize) (end - text))) != NULL)
    {
      n++;
      text++;
    }
  return n;
}

/* Writes the buffered lines, under the lock. A write that fails loses the lines it did not
 * take whole (counted in lines_lost; the first failure is warned about once); the buffer is
 * empty afterwards either way. */
static void
flush_locked (LogResource *self)
{
  gsize done = 0;

  while (done < self->buffered)
    {
      ssize_t n = write (self->fd, self->buffer + done, self->buffered - done);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int saved = n < 0 ? errno : EIO;

          self->lines_lost += count_lines (self->buffer + done, self->buffered - done);
          if (self->write_errno == 0)
            {
              self->write_errno = saved;
              g_warning ("log: writing \"%s\": %s (lines are lost: the layer's counter "
                         "lines_lost counts them; further errors are not reported)",
                         self->path, g_strerror (saved));
            }
          break;
        }
      done += (gsize) n;
    }
  self->lines_written += count_lines (self->buffer, done);
  self->buffered = 0;
}

/* Appends one line (@n bytes, newline included) to the buffer, under the lock. */
static void
append_locked (LogResource *self, const char *line, gsize n)
{
  if (self->buffered + n > LOG_BUFFER_SIZE)
    flush_locked (self);
  memcpy (self->buffer + self->buffered, line, n);
  self->buffered += n;
  if (self->flush)
    flush_locked (self);
}

/* The layers alive, for what they buffer to be written when the process exits without
 * finalizing them (as stdio writes its buffers at exit): a program that never releases its
 * resources loses no line. */
static GMutex live_lock;
static GPtrArray *live_logs; /* LogResource* */

static void
flush_at_exit (void)
{
  guint i;

  g_mutex_lock (&live_lock);
  for (i = 0; live_logs != NULL && i < live_logs->len; i++)
    {
      LogResource *self = g_ptr_array_index (live_logs, i);

      /* a forked child's copy of the buffer is the parent's to write */
      if (self->pid != getpid ())
        continue;
      g_mutex_lock (&self->lock);
      flush_locked (self);
      g_mutex_unlock (&self->lock);
    }
  g_mutex_unlock (&live_lock);
}

static void
track_live (LogResource *self, gboolean alive)
{
  g_mutex_lock (&live_lock);
  if (live_logs == NULL)
    {
      live_logs = g_ptr_array_new ();
      atexit (flush_at_exit); /* the plugin stays resident: the function stays */
    }
  if (alive)
    g_ptr_array_add (live_logs, self);
  else
    g_ptr_array_remove_fast (live_logs, self);
  g_mutex_unlock (&live_lock);
}

/* A reference fewer on @data (a LogResource); the last one writes what is buffered (nobody
 * else uses the writer any more) and closes the file. */
static void
log_unref (gpointer data)
{
  LogResource *self = data;

  if (!g_atomic_int_dec_and_test (&self->refs))
    return;
  track_live (self, FALSE);
  flush_locked (self);
  if (close (self->fd) != 0 && errno != EINTR && self->write_errno == 0)
    g_warning ("log: closing \"%s\": %s", self->path, g_strerror (errno));
  g_free (self->buffer);
  g_free (self->path);
  g_hash_table_unref (self->freeing);
  g_cond_clear (&self->freed);
  g_mutex_clear (&self->lock);
  g_free (self);
}

static gboolean
log_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  LogResource *self;
  const char *path = memres_options_get_string (options, "path");
  gboolean append = memres_options_get_bool (options, "append");
  gboolean tags = memres_options_get_bool (options, "tags");
  gboolean backtrace = memres_options_get_bool (options, "backtrace");
  gboolean empty;
  g_autofree char *header = NULL;
  int fd;

  if (path == NULL || path[0] == '\0')
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   path == NULL ? "kind \"log\" needs option \"path\" (the CSV file to write)"
                                : "option \"path\" of kind \"log\" is empty (it names the CSV "
                                  "file to write)");
      return FALSE;
    }
  /* segment lines are memres's own: refused before the file is opened */
  if (memres_options_get_bool (options, "rmm") && memres_options_get_bool (options, "segments"))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "options \"rmm\" and \"segments\" of kind \"log\" exclude each other: "
                   "segment lines are memres's own, which rmm=true leaves out");
      return FALSE;
    }
  header = g_strconcat (LOG_HEADER, backtrace ? ",Backtrace" : "", tags ? ",Tag" : "", "\n", NULL);
  fd = open_log (path, append, header, &empty, error);
  if (fd < 0)
    return FALSE;
  self = log_of (mr) = g_new0 (LogResource, 1);
  self->refs = 1;
  self->fd = fd;
  self->path = g_strdup (path);
  self->flush = memres_options_get_bool (options, "flush");
  self->tags = tags;
  self->rmm = memres_options_get_bool (options, "rmm");
  self->backtrace = backtrace;
  self->buffer = g_malloc (LOG_BUFFER_SIZE);
  if (empty) /* nobody else sees it yet */
    append_locked (self, header, strlen (header));
  g_mutex_init (&self->lock);
  g_cond_init (&self->freed);
  self->freeing = g_hash_table_new (g_int64_hash, g_int64_equal);
  self->pid = getpid ();
  track_live (self, TRUE);
  if (memres_options_get_bool (options, "segments"))
    {
      MemresResource *upstream = memres_resource_get_upstream (mr);

      /* the segments the layers below have now are told first, as mapped; NOT_SUPPORTED, the
       * one error with a callback given: no layer below has segments (log:segments=true>host),
       * nothing to tell. The subscription holds a reference on the writer until the layer it
       * is on is finalized, after this one (its finalize's unmaps logged). */
      g_atomic_int_inc (&self->refs);
      if (memres_resource_subscribe_segments (upstream, log_segment_event, self, log_unref, NULL)
          == 0)
        (void) g_atomic_int_dec_and_test (&self->refs);
    }
  return TRUE;
}

static void
log_finalize (MemresResource *mr)
{
  LogResource *self = log_of (mr);

  /* what is buffered reaches the file now, whatever the layers below do next */
  g_mutex_lock (&self->lock);
  flush_locked (self);
  g_mutex_unlock (&self->lock);
  log_unref (self);
}

/* The Tag field of @tag as RFC 4180 writes it: @tag itself, or where it holds a comma, a quote
 * or a line break (a tag holds no control byte, but the field is made right for any), @tag in
 * quotes with each quote doubled, in @buf (of 2 * strlen (@tag) + 3 bytes at least). */
static const char *
csv_field (const char *tag, char *buf)
{
  char *w = buf;

  if (tag[strcspn (tag, ",\"\r\n")] == '\0')
    return tag;
  *w++ = '"';
  for (const char *r = tag; *r != '\0'; r++)
    {
      if (*r == '"')
        *w++ = '"';
      *w++ = *r;
    }
  *w++ = '"';
  *w = '\0';
  return buf;
}

/* The line's local time of day comes from the offset of the local time from UTC, asked of
 * localtime_r() once an hour under the layer's lock: glibc's localtime_r() takes a process-wide
 * lock that a fork() leaves taken in the child when another thread was inside it, and the
 * layer's at_fork holds the layer's lock, so no thread of this layer is in it then. */
static int
format_line (LogResource *self, char *line, gsize max, const char *action, guint64 address,
             gsize size, MemresStream stream, const char *backtrace, const char *tag)
{
  const char *tag_field = NULL;
  gint64 now = g_get_real_time ();
  time_t secs = (time_t) (now / G_USEC_PER_SEC);
  gint64 local, hour = (gint64) secs / 3600 + 1;
  struct tm tm;
  /* a tag's name is at most MEMRES_TAG_NAME_MAX bytes: its field quoted fits */
  char quoted[2 * MEMRES_TAG_NAME_MAX + 3];
  g_autofree char *long_quoted = NULL;

  if (__atomic_load_n (&self->zone_hour, __ATOMIC_ACQUIRE) != hour)
    {
      g_mutex_lock (&self->lock);
      localtime_r (&secs, &tm);
      __atomic_store_n (&self->zone_offset, tm.tm_gmtoff, __ATOMIC_RELAXED);
      __atomic_store_n (&self->zone_hour, hour, __ATOMIC_RELEASE);
      g_mutex_unlock (&self->lock);
    }
  local = (gint64) secs + __atomic_load_n (&self->zone_offset, __ATOMIC_RELAXED);
  if (self->tags && tag != NULL)
    {
      gsize len = strlen (tag);

      tag_field = csv_field (
          tag, 2 * len + 3 <= sizeof quoted ? quoted : (long_quoted = g_malloc (2 * len + 3)));
    }
  return g_snprintf (line, max,
                     "%ld,%02d:%02d:%02d.%06d,%s,0x%" G_GINT64_MODIFIER "x,%" G_GSIZE_FORMAT
                     ",0x%" G_GINT64_MODIFIER "x%s%s%s%s\n",
                     (long) syscall (SYS_gettid), (int) (local / 3600 % 24),
                     (int) (local / 60 % 60), (int) (local % 60), (int) (now % G_USEC_PER_SEC),
                     action, address, size, (guint64) (guintptr) stream, self->backtrace ? "," : "",
                     backtrace != NULL ? backtrace : "", self->tags ? "," : "",
                     self->tags && tag != NULL ? tag_field : "");
}

/* Writes one line (@backtrace: its Backtrace field, or NULL for an empty one). An allocate
 * (@allocated) first waits until no free of its address is still unlogged; a free's line
 * (@freed) takes its address out of the freeing set in the same critical section. */
static void
write_line (LogResource *self, const char *action, guint64 address, gsize size, MemresStream stream,
            const char *backtrace, const char *tag, gboolean allocated, gboolean freed)
{
  char small[LOG_LINE_MAX];
  gsize max = LOG_LINE_MAX + (backtrace != NULL ? strlen (backtrace) : 0);
  g_autofree char *big = backtrace != NULL ? g_malloc (max) : NULL;
  char *line = big != NULL ? big : small;
  int n = format_line (self, line, max, action, address, size, stream, backtrace, tag);

  g_mutex_lock (&self->lock);
  if (allocated && g_hash_table_contains (self->freeing, &address))
    {
      while (g_hash_table_contains (self->freeing, &address))
        g_cond_wait (&self->freed, &self->lock);
      g_mutex_unlock (&self->lock); /* format_line() may take it */
      /* its time after the free's */
      n = format_line (self, line, max, action, address, size, stream, backtrace, tag);
      g_mutex_lock (&self->lock);
    }
  if (freed)
    {
      g_hash_table_remove (self->freeing, &address);
      g_cond_broadcast (&self->freed);
    }
  /* rmm=true: memres's own actions left out (RMM's log_parser.hpp throws "Invalid action string"
   * at them); "allocate failure" is RMM's, and the only action that begins with "allocate " */
  if (!self->rmm || strcmp (action, "allocate") == 0 || strcmp (action, "free") == 0
      || strcmp (action, "allocate failure") == 0)
    append_locked (self, line, (gsize) n);
  g_mutex_unlock (&self->lock);
}

static gboolean
log_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
              GError **error)
{
  LogResource *self = log_of (mr);
  const char *tag = self->tags ? memres_allocation_get_tag (alloc) : NULL;
  g_autofree char *backtrace = NULL;

  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    {
      backtrace = self->backtrace ? _log_backtrace () : NULL;
      write_line (self, "allocate failure", 0, size, stream, backtrace, tag, FALSE, FALSE);
      /* memres's action beside RMM's, for traces: the failure was for lack of memory */
      if (error != NULL && g_error_matches (*error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
        write_line (self, "out of memory", 0, size, stream, backtrace, tag, FALSE, FALSE);
      return FALSE;
    }
  backtrace = self->backtrace ? _log_backtrace () : NULL;
  write_line (self, "allocate", alloc->address, alloc->size, stream, backtrace, tag, TRUE, FALSE);
  return TRUE;
}

static gboolean
log_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  LogResource *self = log_of (mr);
  const char *tag = self->tags ? memres_allocation_get_tag (alloc) : NULL;
  guint64 address = alloc->address;
  gsize size = alloc->size;
  gboolean ok;

  /* marked before the free: once freed, another thread may get the same address, and its
   * allocate line must come after this free's */
  g_mutex_lock (&self->lock);
  g_hash_table_add (self->freeing, &address);
  g_mutex_unlock (&self->lock);
  ok = memres_upstream_deallocate (mr, alloc, stream, error);
  /* failed after releasing it (address 0): gone all the same, the core closes the buffer */
  write_line (self, ok || alloc->address == 0 ? "free" : "free failure", address, size, stream,
              NULL, tag, FALSE, TRUE);
  return ok;
}

/* A trim of the layers below (memres_resource_trim() of the upstream, with its errors), logged
 * when it succeeded: a `trim` line, Pointer 0x0, Size the bytes to keep, Stream 0x0. */
static gboolean
log_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  LogResource *self = log_of (mr);

  if (!memres_resource_trim (memres_resource_get_upstream (mr), bytes_to_keep, error))
    return FALSE;
  write_line (self, "trim", 0, bytes_to_keep, NULL, NULL, NULL, FALSE, FALSE);
  return TRUE;
}

/* Sleep and wake (memres-sleep.h): the upstream's slots, then, when they succeeded, a line with
 * the bytes put to sleep or woken through this layer, the call's policy and tag. */
static gboolean
log_sleep_or_wake (MemresResource *mr, gboolean sleep, MemresAllocation *const *allocs, gsize n,
                   GError **error)
{
  static const char *const policies[] = { "discard", "backup", "file" };
  LogResource *self = log_of (mr);
  MemresSleepMode mode = MEMRES_SLEEP_DISCARD;
  const char *tag = memres_sleep_call_get_tag (&mode);
  char action[32];
  guint64 bytes = 0;

  if (!(sleep ? memres_upstream_sleep (mr, allocs, n, error)
              : memres_upstream_wake (mr, allocs, n, error)))
    return FALSE;
  for (gsize i = 0; i < n; i++)
    bytes += allocs[i]->size;
  g_snprintf (action, sizeof action, "%s %s", sleep ? "sleep" : "wake",
              (guint) mode < G_N_ELEMENTS (policies) ? policies[mode] : "discard");
  write_line (self, action, 0, bytes, NULL, NULL, tag, FALSE, FALSE);
  return TRUE;
}

static gboolean
log_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n, GError **error)
{
  return log_sleep_or_wake (mr, TRUE, allocs, n, error);
}

static gboolean
log_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n, GError **error)
{
  return log_sleep_or_wake (mr, FALSE, allocs, n, error);
}

/* Counters (memres_resource_get_counters()), after writing what is buffered: lines_written and
 * lines_lost (`t`, the header included), write_error (`s`, the first write's error, "" when
 * none). */
static gboolean
log_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  LogResource *self = log_of (mr);
  guint64 written, lost;
  int saved;

  g_mutex_lock (&self->lock);
  flush_locked (self);
  written = self->lines_written;
  lost = self->lines_lost;
  saved = self->write_errno;
  g_mutex_unlock (&self->lock);
  g_variant_dict_insert (counters, "lines_written", "t", written);
  g_variant_dict_insert (counters, "lines_lost", "t", lost);
  g_variant_dict_insert (counters, "write_error", "s", saved != 0 ? g_strerror (saved) : "");
  return TRUE;
}

/* A resize would not be logged. */
static void
log_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~MEMRES_MEMORY_RESIZABLE;
}

/* fork(): the lock; in the child, the frees other threads had under way never end (and an
 * allocate of their address would wait for them forever). */
static void
log_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  LogResource *self;

  if (mr == NULL) /* once for the kind */
    {
      _log_backtrace_at_fork (phase);
      return;
    }
  self = log_of (mr);
  if (phase == MEMRES_FORK_CHILD)
    g_hash_table_remove_all (self->freeing);
  memres_fork_mutex (&self->lock, phase);
}

static const MemresResourceOps log_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = log_init,
  .finalize = log_finalize,
  .allocate = log_allocate,
  .deallocate = log_deallocate,
  .query = log_query,
  .trim = log_trim,
  .get_counters = log_get_counters,
  .at_fork = log_at_fork,
  .sleep = log_sleep,
  .wake = log_wake,
};

static const MemresKindInfo log_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "log",
  .description = "Adaptor: one CSV line per allocate and free (RMM's columns), for memres replay",
  .options = log_options,
  .n_options = G_N_ELEMENTS (log_options),
  .ops = &log_ops,
  .instance_size = sizeof (LogResource *),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_TAGGED,
};

static gboolean
log_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &log_kind, error);
}

MEMRES_PLUGIN_DEFINE (log, "Logging adaptor: a CSV line per allocate and free", log_plugin_init)
