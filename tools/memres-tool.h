/* memres-tool.h: the commands of the `memres` program and their shared output helpers. */
#pragma once

#include <memres/memres-plugin.h>

#include "../sdk/file-writer.h"
#include "../sdk/json-writer.h"

G_BEGIN_DECLS

/* Each command parses its own options from @argv (argv[0] is the command name) and returns
 * the process exit status. */
int memres_tool_kinds (int argc, char **argv);
int memres_tool_info (int argc, char **argv);
int memres_tool_alloc (int argc, char **argv);
int memres_tool_resources (int argc, char **argv);  /* cmd-resources.c */
int memres_tool_replay (int argc, char **argv);     /* cmd-replay.c */
int memres_tool_trace (int argc, char **argv);      /* cmd-trace.c */
int memres_tool_snapshot (int argc, char **argv);   /* cmd-snapshot.c */
int memres_tool_view (int argc, char **argv);       /* cmd-view.c */
int memres_tool_ipc_serve (int argc, char **argv);  /* cmd-ipc.c */
int memres_tool_ipc_attach (int argc, char **argv); /* cmd-ipc.c */

/* The exit status of a plugin file on the search path that does not load (memres kinds, and
 * any command whose kind's plugin fails to load). */
#define MEMRES_TOOL_EXIT_BROKEN_PLUGIN 3

/* Prints "memres: MESSAGE" on one line to stderr and returns the exit status: 3 for a plugin
 * that does not load (MEMRES_PLUGIN_ERROR, or the error the listing of the search path gives
 * a plugin file: a kind with an invalid option schema), 2 for
 * MEMRES_ERROR_INVALID_ARGUMENT (a bad operand: spec, option value, size, pattern, a file
 * named by the input that is missing, not a regular file or malformed), G_FILE_ERROR_NOENT
 * (a file named that does not exist, an -o FILE in a missing directory or a link to nothing),
 * G_FILE_ERROR_NOTDIR (a file named under a file, which does not exist either), and the other
 * -o FILEs that cannot be one (sdk/file-writer.c): G_FILE_ERROR_ISDIR (a directory),
 * G_FILE_ERROR_INVAL (a FIFO, a device, a socket), G_FILE_ERROR_LOOP and
 * G_FILE_ERROR_NAMETOOLONG; else 1 (an -o FILE that cannot be written: permission denied, a
 * full disk).
 * MESSAGE is made printable: control characters and bytes that are not UTF-8 escaped,
 * shortened past 4 KiB. Quote user input in a message of a command through
 * memres_tool_show_input(). With memres_tool_set_json_errors(), every error
 * (these and usage errors) is also printed on stdout as JSON: {"error": {"message", "domain",
 * "code", "code_name", "exit_status"}}. */
int memres_tool_fail (const GError *error);
/* The same for a message made from @format; returns 1. */
int memres_tool_failf (const char *format, ...) G_GNUC_PRINTF (1, 2);
/* User input quoted in a message the way memres's own messages quote it (transfer full). */
#define memres_tool_show_input(text) memres_printable ((text), MEMRES_INPUT_SHOWN_MAX)
/* main() calls it when the command line holds --json (or -j) before any "--". */
void memres_tool_set_json_errors (gboolean enabled);
/* @text made printable on one line and cut at 4 KiB, as memres_tool_fail() prints messages:
 * for messages printed in a command's output. (transfer full) */
char *memres_tool_one_line (const char *text);
/* "MEMRES_PLUGIN_ERROR_ABI_MISMATCH"-style name of @error's code, for MEMRES_CUDA_ERROR the
 * CUresult's name from the driver's cuGetErrorName ("CUDA_ERROR_INVALID_VALUE"); NULL for a
 * domain or code it does not know, or a CUDA error without a driver table to name it. */
const char *memres_tool_error_code_name (const GError *error);
/* g_option_context_parse() for a command, which leaves only the operands in @argv after
 * argv[0]: the first "--" ends the options and is dropped; before it an argument that starts
 * with '-' and a digit or '.' is an operand (a negative number, for the command to refuse as a
 * value, not an unknown option), any other that starts with '-' (not "-" alone) is an unknown
 * option. Errors: G_OPTION_ERROR. */
gboolean memres_tool_parse_options (GOptionContext *context, int *argc, char ***argv,
                                    GError **error);
/* Prints "memres COMMAND: MESSAGE" and a hint to run with --help (@command NULL: "memres:
 * MESSAGE" alone), with --json also the JSON error; returns 2. */
int memres_tool_usage_error (const char *command, const char *message);
/* memres_tool_usage_error() with the message @format, whose one %s is @input as the user wrote
 * it, shown printable (memres_tool_show_input()); returns 2. */
G_GNUC_PRINTF (2, 0)
int memres_tool_usage_error_input (const char *command, const char *format, const char *input);

/* logs.c: the `log` layers of a stack. memres_tool_check_log_paths(): FALSE with
 * MEMRES_ERROR_FAILED when a `log` layer of @spec names (through any link) the same file as
 * @file (its st_dev and st_ino), which the message calls @what ("the LOG being replayed");
 * checked from the spec alone (memres_spec_parse()), before the log would be created and
 * truncated; a spec that does not parse passes (memres_resource_new() reports it).
 * memres_tool_check_logs_complete(): FALSE with MEMRES_ERROR_FAILED when a `log` layer of the
 * stack @mr could not write every line (its counter lines_lost), naming the layer, the count
 * and the error. memres_tool_check_log_not_stdout(): memres_tool_check_log_paths() on the
 * file of the standard output, where a command writes its report or document, which a log's
 * lines would be mixed into (a pipe, a file, a terminal; not a device that keeps nothing such
 * as /dev/null). */
struct stat;
gboolean memres_tool_check_log_paths (const char *spec, const struct stat *file, const char *what,
                                      GError **error);
gboolean memres_tool_check_log_not_stdout (const char *spec, const char *what, GError **error);
gboolean memres_tool_check_logs_complete (MemresResource *mr, GError **error);
/* TRUE, with MEMRES_ERROR_INVALID_ARGUMENT "-o \"FILE\" is WHAT INDEX: refused, the MADE would
 * overwrite the NOUN it is made from", when -o @output is the file @input by any name
 * (st_dev and st_ino): a command refuses it before reading anything. */
gboolean memres_tool_output_is_input (const char *output, const char *input, const char *what,
                                      guint index, const char *made, const char *noun,
                                      GError **error);

/* log-csv.c: the CSV log of the `log` adaptor (plugins/log/log.c). Its header, RMM's columns
 * (memres_tool_log_header_ok() also takes them followed by ",Tag", `log:tags=true`, and says so
 * in @tagged: each line then has a seventh field, the allocation's tag, empty for none: quoted
 * as RFC 4180 quotes a field where it holds a comma or a quote, or, as older logs wrote it, the
 * rest of the line; any field quoted so is read unquoted; @tag is "" in a log of six columns); a
 * line's actions: RMM's four, then memres's (an allocation that ran out of memory, a trim with
 * the bytes kept as its Size and Pointer 0x0; `sleep POLICY` and `wake POLICY` with the bytes put
 * to sleep or woken as Size, Pointer 0x0, the tag in the Tag column; `segment mapped`, `segment
 * grown` and `segment unmapping` with the segment's base as Pointer and its length as Size, the
 * new length for a growth: the `log` row of README.md's adaptors). memres_tool_parse_log_line()
 * splits @line in place (the strings of @out point into it) and checks its fields: FALSE with the
 * reason in @why (transfer full) for a wrong count of fields, a Pointer or a Stream that is not
 * 0x-hex, a Size that is not a decimal count up to G_MAXSSIZE, an empty Thread, an unknown
 * Action, a malformed Backtrace.
 * With `log:backtrace=true` the header has ",Backtrace" after Stream (before ",Tag", which stays
 * last), said in @backtrace: each line then has that field, @backtrace of @out, empty on lines
 * without a stack ("" in a log without the column): frames innermost first, separated by ';',
 * '%', ',', ';' and control bytes written %XX (plugins/log/log-backtrace.c); refused: a '%' not
 * followed by two hex digits, %00, an empty frame, more than MEMRES_LOG_FRAMES_MAX frames.
 * memres_tool_log_frames() decodes a field that passed (transfer full; NULL for ""). */
#define MEMRES_LOG_FRAMES_MAX 64
#define MEMRES_LOG_HEADER     "Thread,Time,Action,Pointer,Size,Stream"
typedef enum
{
  MEMRES_LOG_ALLOCATE,
  MEMRES_LOG_FREE,
  MEMRES_LOG_ALLOCATE_FAILURE,
  MEMRES_LOG_FREE_FAILURE,
  MEMRES_LOG_OUT_OF_MEMORY,
  MEMRES_LOG_TRIM,
  MEMRES_LOG_SLEEP,
  MEMRES_LOG_WAKE,
  MEMRES_LOG_SEGMENT_MAPPED,
  MEMRES_LOG_SEGMENT_GROWN,
  MEMRES_LOG_SEGMENT_UNMAPPING,
} MemresLogAction;
typedef struct
{
  const char *thread, *time, *pointer_text, *stream_text, *tag;
  const char *backtrace; /* the Backtrace field as written ("" for none) */
  MemresLogAction action;
  const char *action_name; /* the Action as written (static) */
  const char *policy;      /* sleep and wake: "discard", "backup" or "file"; else NULL */
  guint64 pointer, size, stream;
} MemresLogLine;
gboolean memres_tool_log_bad_line (GError **error, const char *log, guint line, const char *format,
                                   ...) G_GNUC_PRINTF (4, 5);
gboolean memres_tool_log_header_ok (const char *line, gboolean *tagged, gboolean *backtrace);
gboolean memres_tool_parse_log_line (char *line, gboolean tagged, gboolean backtrace,
                                     MemresLogLine *out, char **why);
GStrv memres_tool_log_frames (const char *field);

/* log-walk.c: a whole log (@text, @length bytes, modified in place: the strings of each event
 * point into it) walked line by line, the one check of a log's lines (`memres replay`, `trace`
 * and `view` read them alike): @func gets each line but the header and blank lines. An
 * event's @ts is the Time in microseconds since midnight of the first line's day, a day added
 * each time the Time goes back by more than 12 hours (past midnight), and never before the
 * line before's (a Time that goes back by less is taken as the line before's: lines keep the
 * log's order); @used and @buffers the
 * bytes and allocations live after it; @counted for an allocate and a free of an allocation of
 * the log, which for a free also gives that allocation's size, Time, line and Tag (a free of a
 * Pointer not allocated in the log, allocated before it began, comes with @counted FALSE);
 * @mapped the bytes of the segments mapped after it (`segment` lines, `log:segments=true`), and
 * for a segment line @segment_previous the segment's length before it (0: new). Errors
 * (INVALID_ARGUMENT "LOG:LINE: why"): no header, a NUL byte, a malformed line, an invalid Time, a
 * Pointer allocated twice, a free whose Size is not its allocate's, live sizes past 2^64, times
 * that pass midnight more than 1,000 times (a log of more than 1,000 days); and whatever @func
 * sets when it returns FALSE. */
typedef struct
{
  MemresLogLine l;
  gboolean tagged; /* the log has the Tag column */
  guint line;
  gint64 ts;
  guint64 used, buffers, mapped;
  gboolean counted;
  guint64 alloc_size;
  gint64 alloc_ts;
  guint alloc_line;
  const char *alloc_tag;
  guint64 segment_previous;
} MemresLogEvent;
typedef gboolean (*MemresLogEventFunc) (const MemresLogEvent *event, gpointer user_data,
                                        GError **error);
gboolean memres_tool_walk_log (const char *path, char *text, gsize length, MemresLogEventFunc func,
                               gpointer user_data, GError **error);

/* view-map.c: the segment lines and the allocations of the logs `memres view` reads, for the
 * page's segment map at a chosen moment: memres_view_map_add() gets every event of a log (its
 * layer: the log's index among the inputs), memres_view_map_extent() widens [@t0, @t1] to the
 * segment lines' times, memres_view_map_write() appends the member "map" (times relative to
 * @t0), memres_view_map_empty() says whether no log had segment lines. */
typedef struct _MemresViewMap MemresViewMap;
MemresViewMap *memres_view_map_new (void);
void memres_view_map_free (MemresViewMap *m);
void memres_view_map_add (MemresViewMap *m, guint layer, const MemresLogEvent *e);
void memres_view_map_extent (const MemresViewMap *m, gint64 *t0, gint64 *t1);
gboolean memres_view_map_empty (const MemresViewMap *m);
void memres_view_map_write (const MemresViewMap *m, GString *out, gint64 t0);

/* json-check.c: TRUE when @text (@length bytes, UTF-8 not checked) is exactly one JSON value,
 * blanks around it allowed; else FALSE with the byte offset where it goes wrong and why (a
 * static string). Nesting deeper than 512 is refused. */
gboolean memres_tool_json_check (const char *text, gsize length, gsize *offset, const char **why);
/* input.c: reads the input file @path whole: G_FILE_ERROR_NOENT "PATH: No such file" when it
 * is missing (other G_FILE_ERROR codes with the system's reason: G_FILE_ERROR_NOTDIR for a path
 * under a file), MEMRES_ERROR_INVALID_ARGUMENT "PATH: not a regular file" for a directory, a
 * FIFO, a device, before opening it; G_FILE_ERROR_NOMEM for a file larger than the memory
 * available (/proc/meminfo's MemAvailable), before reading it. A leading UTF-8 byte order mark (a
 * spreadsheet's CSV) is not part of the text. @file (nullable): the file's stat(), for a command
 * that must know the file by identity (replay refuses a log layer on its LOG). */
gboolean memres_tool_read_input (const char *path, char **text, gsize *length, struct stat *file,
                                 GError **error);
/* Calls @func with each member of the object @text holds (a text memres_tool_json_check()
 * passed): its name as written between the quotes (@name_len bytes, escapes not undone) and
 * its value's text (@value_len bytes). FALSE when @text is not an object. */
typedef void (*MemresJsonMemberFunc) (const char *name, gsize name_len, const char *value,
                                      gsize value_len, gpointer data);
gboolean memres_tool_json_members (const char *text, gsize length, MemresJsonMemberFunc func,
                                   gpointer data);
/* Calls @func with each element of the array @text holds (a text memres_tool_json_check()
 * passed): its index and its value's text. FALSE when @text is not an array. */
typedef void (*MemresJsonElementFunc) (guint index, const char *value, gsize value_len,
                                       gpointer data);
gboolean memres_tool_json_elements (const char *text, gsize length, MemresJsonElementFunc func,
                                    gpointer data);
/* snapshot-check.c: whether the input @path's text (@length bytes), which the page would show as
 * a snapshot, is one: a snapshot of format 1 (docs/snapshot.md) or the allocator shim's file of
 * them, every member docs/snapshot.schema.json requires present and of its type (members it does
 * not name are let through: format 1 grows without a new format). Else FALSE with
 * MEMRES_ERROR_INVALID_ARGUMENT naming @path and the JSON path of the first wrong value
 * ("layers[0].kind"). */
gboolean memres_tool_check_snapshot (const char *path, const char *text, gsize length,
                                     GError **error);

/* the JSON writer: sdk/json-writer.h */

/* "HOST_ACCESSIBLE|STREAM_ORDERED"-style names of @flags, as a NULL-terminated array. */
GStrv memres_tool_flag_names (MemresMemoryFlags flags);
/* The exact count: "67108864 bytes", "1 byte" */
char *memres_tool_format_bytes (guint64 bytes);
/* "64.0 MiB (67108864 bytes)"; below 1 KiB the count alone: "100 bytes", "1 byte" */
char *memres_tool_format_size (guint64 bytes);
/* TRUE when @text is written as a size (decimal digits and an optional B, KiB, MiB, GiB, TiB or
 * PiB) that memres_parse_size() refuses: more than 64 bits of bytes ("99999999999PiB"), which a
 * command's error calls too large rather than malformed. */
gboolean memres_tool_size_too_large (const char *text);

G_END_DECLS
