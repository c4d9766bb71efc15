/* testutil.h: helpers shared by the test programs. */
#pragma once

#include <memres/memres-plugin.h>
#include "fakecuda/fakecuda-control.h"

G_BEGIN_DECLS

/* g_test_init() plus the project's settings. */
void mt_init (int *argc, char ***argv);

/* The driver's table (memres_cuda_get_driver()), asserting that it loads. */
const MemresCudaDriver *mt_driver (void);

/* TRUE when MEMRES_CUDA_DRIVER names libfakecuda (the control functions resolve). */
gboolean mt_driver_is_fake (void);

/* TRUE when at least @n CUDA devices are usable. Otherwise, against the real driver, calls
 * g_test_skip() with the reason and returns FALSE; against the fake it fails the test
 * (the fake suite never skips). */
gboolean mt_require_devices (int n);

/* TRUE when device @peer can access device @device's memory (cuDeviceCanAccessPeer()), both
 * existing (mt_require_devices()); otherwise skips naming the devices (the fake fails). */
gboolean mt_require_peer_access (gint device, gint peer);

/* A new non-blocking stream of device @device, created in its primary context (pushed and
 * popped around the call). */
CUstream mt_stream_new_on (gint device);

/* TRUE when the driver is the fake; otherwise calls g_test_skip(@why) and returns FALSE. For
 * tests that need the fake's control (fault injection, changed attributes). */
gboolean mt_require_fake (const char *why);

/* The recommended VMM granularity of device 0's memory (cuMemGetAllocationGranularity), in bytes;
 * fails the test when the driver does not answer. */
gsize mt_device_granularity (void);

/* The value of attribute @attr of device 0 (cuDeviceGetAttribute()), asserting the calls. */
int mt_device_attribute (CUdevice_attribute attr);

/* An attribute of the fake's device 0 set for the rest of a test, its value remembered:
 * mt_override_attribute() stores @attr's value in @saved and sets it to @value (the fake only:
 * mt_fake_set_attribute()); mt_restore_attribute() sets it back. */
typedef struct
{
  CUdevice_attribute attr;
  int value;
} MtSavedAttribute;
void mt_override_attribute (MtSavedAttribute *saved, CUdevice_attribute attr, int value);
void mt_restore_attribute (const MtSavedAttribute *saved);

/* The fake's counts into @base where the driver is the fake; zeros on the real driver. For tests
 * that compare counts before and after only on the fake. */
void mt_fake_counts_begin (FakeCudaCounts *base);

/* A buffer's message (memres_buffer_export_message()) as the caller holds it: the bytes and the
 * fds, transfer full. */
typedef struct
{
  GBytes *bytes;
  gint *fds;
  guint n_fds;
} MtMessage;

/* memres_buffer_export_message() of @buf into @m (zeroed first). */
gboolean mt_message_export (MemresBuffer *buf, MtMessage *m, GError **error);
/* The caller's part of transfer full: every fd closed (asserted), the array and the bytes freed. */
void mt_message_clear (MtMessage *m);
/* memres_buffer_import_message() of @m into @importer (no credentials). */
MemresBuffer *mt_message_import (MemresResource *importer, const MtMessage *m, GError **error);

/* Fake control; each one fails the test when the driver is not the fake. */
void mt_fake_get_counts (FakeCudaCounts *counts);
void mt_fake_fail_call (const char *entry, int nth, CUresult result);
void mt_fake_reset_faults (void);
void mt_fake_set_attribute (int device, CUdevice_attribute attr, int value);
long mt_fake_call_count (const char *entry);
/* fakecuda_trace_begin() and fakecuda_trace_end(): the names of the calls made in between. */
void mt_fake_trace_begin (void);
int mt_fake_trace_end (const char ***names);

/* The fake's asynchronous stream mode (fakecuda_set_async): mt_fake_set_async() fails the test
 * on the real driver; mt_fake_is_async() is FALSE there; mt_fake_wait_idle() waits until every
 * stream of the fake ran its queue (no-op on the real driver and in the synchronous mode). */
void mt_fake_set_async (gboolean on);
gboolean mt_fake_is_async (void);
void mt_fake_wait_idle (void);
/* Calls of the fake that returned an error so far (fakecuda_failed_call_count). */
long mt_fake_failed_call_count (void);
/* mt_fake_trace_end() as the names joined with spaces (transfer full). */
char *mt_fake_trace_end_string (void);
/* mt_fake_trace_end() as a copy of the names (transfer full, NULL-terminated), their count in
 * *@n. */
char **mt_fake_trace_end_strv (int *n);

/* Asserts that @call, a gboolean call that sets the caller's `error`, succeeds; the error's
 * message shows when it does not. */
#define MT_CHECK(call)                                                                             \
  G_STMT_START                                                                                     \
  {                                                                                                \
    gboolean ok_ = (call);                                                                         \
    g_assert_no_error (error);                                                                     \
    g_assert_true (ok_);                                                                           \
  }                                                                                                \
  G_STMT_END

/* A driver entry point outside memres's table (cuEventQuery, cuStreamWaitValue32), resolved
 * with cuGetProcAddress at CUDA_VERSION from the driver the core loaded; NULL when it has none. */
gpointer mt_driver_proc (const char *name);

/* Holding a stream, on the fake (asynchronous mode) and the real driver alike:
 * mt_stream_hold() queues cuStreamWaitValue32(>= 1) on @stream on a word of
 * cuMemHostAlloc(PORTABLE | DEVICEMAP) memory (on the real driver from one slab allocated once,
 * so that no hold or release frees page-locked memory, which waits for the device), so work queued
 * on @stream after it waits, and records an event behind the wait; mt_stream_is_held() is TRUE
 * while that event is NOT_READY; mt_stream_release() writes 1 to the word from the host, waits for
 * the event and frees @hold. Every driver call is asserted. mt_require_stream_holds() is TRUE when
 * holds work here; on the fake outside the asynchronous mode it fails the test, on a driver without
 * the entry points it skips. Do not call a function synchronous with the legacy stream (cuMemcpy,
 * cuMemFree, a legacy-stream synchronize) while a blocking stream is held: it waits for the hold,
 * as on the real driver. */
typedef struct _MtStreamHold MtStreamHold;
MtStreamHold *mt_stream_hold (MemresStream stream);
gboolean mt_stream_is_held (MtStreamHold *hold);
void mt_stream_release (MtStreamHold *hold);
gboolean mt_require_stream_holds (void);
/* The stream hazard tests' set-up: a device (else the test skips), the fake's asynchronous mode
 * (mt_fake_set_async), stream holds (mt_require_stream_holds; else the mode is set back and FALSE
 * returned). After a TRUE, mt_hazard_end() sets the fake's streams synchronous again. */
gboolean mt_hazard_begin (void);
void mt_hazard_end (void);

/* The stream hazard of a caching kind (test-cache-hazard.c, test-arena.c): hold stream A, queue
 * a fill of a buffer of @size bytes from @spec on A, close it on A (A destroyed then, for
 * MT_HAZARD_DESTROYED), allocate the same size for B and fill it on B, release A: the bytes are
 * B's, and no allocation waited for the held stream. @expect_reuse: B's buffer must be the freed
 * one (its address); @fresh_stream: for MT_HAZARD_DESTROYED, a new stream then gets memory it
 * fills and reads back too; @trim: the resource trimmed before it is dropped. Skips as
 * mt_hazard_begin() does. */
typedef enum
{
  MT_HAZARD_STREAM,    /* A is a non-blocking stream */
  MT_HAZARD_LEGACY,    /* A is the legacy default stream */
  MT_HAZARD_DESTROYED, /* A is destroyed right after the free */
} MtHazardKind;
typedef struct
{
  const char *spec;
  gsize size;
  MtHazardKind kind;
  gboolean expect_reuse;
  gboolean fresh_stream;
  gboolean trim;
} MtHazard;
void mt_hazard_run (const MtHazard *h);

/* cuStreamSynchronize() and cuStreamDestroy() of @stream, asserted. */
void mt_stream_free (CUstream stream);

/* cuStreamBeginCapture(@stream) in relaxed mode, asserted; mt_capture_end() ends it with
 * cuStreamEndCapture(), asserting a graph came back (the capture was not invalidated), and
 * returns the graph (the caller's to destroy). */
void mt_capture_begin (CUstream stream);
CUgraph mt_capture_end (CUstream stream);

/* Asserts every live count of the fake equals the one in @baseline (no-op on the real driver;
 * in the fake's asynchronous mode after every queue ran). */
void mt_assert_fake_counts_equal (const FakeCudaCounts *baseline);

/* Number of open file descriptors of this process (/proc/self/fd; in the fake's asynchronous mode
 * once every queue ran). */
int mt_count_open_fds (void);

/* @n bytes at @p as a little-endian number (the IPC records' byte order), read and written,
 * for tests that forge fields of a record. */
guint64 mt_get_le (const guint8 *p, int n);
void mt_put_le (guint8 *p, guint64 v, int n);

/* Fills @n bytes at @dest with a pattern derived from @seed; mt_check_pattern() verifies it
 * and reports the first differing offset. */
void mt_fill_pattern (guint8 *dest, gsize n, guint32 seed);
void mt_assert_pattern (const guint8 *data, gsize n, guint32 seed);

/* Stores the fake's live counts now in @counts (all zero on the real driver): the baseline a
 * test takes at its start for mt_assert_fake_counts_equal() at its end. */
void mt_counts_snapshot (FakeCudaCounts *base);

/* memres_resource_new(@spec), asserting no error and a resource. Returns (transfer full). */
MemresResource *mt_new_ok (const char *spec);

/* mt_new_ok() of the spec that @format and the arguments make (printf). */
MemresResource *mt_new_printf_ok (const char *format, ...) G_GNUC_PRINTF (1, 2);

/* @n allocate+close pairs of @size bytes from @mr, each allocated on @stream and closed on the
 * legacy stream (NULL), every call asserted: the body of the tests' pair threads. */
void mt_pairs (MemresResource *mr, gsize size, MemresStream stream, guint n);

/* Asserts that memres_resource_new(@spec) returns NULL with @domain/@code and, when @needle is
 * not NULL, that the error's message contains @needle. */
void mt_new_fails (const char *spec, GQuark domain, gint code, const char *needle);

/* Asserts that memres_resource_new(@spec) returns NULL with MEMRES_ERROR_INVALID_ARGUMENT and a
 * message that is printable and under 300 bytes (mt_assert_printable()), whatever the size of
 * @spec, and contains @needle. */
void mt_new_fails_short (const char *spec, const char *needle);

/* @prefix, then @n copies of @unit (of any length), then @suffix: inputs of any size for the
 * parsers. Returns (transfer full) a new string. */
char *mt_repeat (const char *prefix, const char *unit, gsize n, const char *suffix);

/* Asserts that @text (an error message, a line of the memres command) is valid UTF-8, shorter
 * than @max_len bytes and holds no control character (C0, DEL, C1): what a message quoting user
 * input of any size and content must be. */
void mt_assert_printable (const char *text, gsize max_len);

/* Shuffles the @n buffers at @bufs (Fisher-Yates, drawing with g_test_rand_int_range()) and the
 * @n numbers at @tags alike: @tags[i] stays the number of @bufs[i]. */
void mt_shuffle_buffers (MemresBuffer **bufs, guint *tags, guint n);

/* The warnings and criticals of memres (log domain "memres"), which structured logging sends
 * past g_test_expect_message(): mt_log_capture_init(), once in main() before anything logs,
 * installs a writer that passes every message on to GLib's default writer, except that between
 * mt_log_capture_begin() and mt_log_capture_end() it keeps memres's warnings and criticals
 * (then not fatal) instead. mt_log_capture_end() returns them, one line each, criticals as
 * "CRITICAL: MESSAGE" and warnings as "WARNING: MESSAGE" (transfer full), and stores the number
 * of criticals in @n_criticals. */
void mt_log_capture_init (void);
void mt_log_capture_begin (void);
char *mt_log_capture_end (guint *n_criticals);

/* memres_resource_allocate(@mr, @size, @stream), asserting no error, a buffer and that its size
 * is @size bytes. Returns (transfer full). */
MemresBuffer *mt_alloc_ok (MemresResource *mr, gsize size, MemresStream stream);

/* memres_buffer_close(@buf, @stream), asserting success and no error, then drops the caller's
 * reference to @buf. */
void mt_close_ok (MemresBuffer *buf, MemresStream stream);

/* memres_resource_get_stats(@mr), asserting success, no error and statistics that hold together:
 * each high mark at least its current value, reserved at least used. */
MemresStats mt_stats_ok (MemresResource *mr);

/* memres_stream_synchronize(@stream), asserting success and no error. */
void mt_sync_ok (MemresStream stream);

/* memres_buffer_fill(@buf, @byte, 1, @stream), asserting success; mt_assert_bytes() reads all
 * of @buf back on @stream, synchronizes it and asserts that every byte is @byte. */
void mt_fill_byte_ok (MemresBuffer *buf, guint8 byte, MemresStream stream);
void mt_assert_bytes (MemresBuffer *buf, guint8 byte, MemresStream stream);

/* Writes mt_fill_pattern(@seed) to @n bytes of @buf at @offset on @stream, then synchronizes
 * @stream; mt_check_pattern() reads the same range back on @stream, synchronizes and asserts
 * the pattern. Both assert that every call succeeds without an error. */
void mt_write_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed, MemresStream stream);
void mt_check_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed, MemresStream stream);

/* Child processes for the IPC tests: never a bare fork() after CUDA init. mt_spawn_child() runs
 * this same program again as `PROGRAM --child MODE` with its end of a stream socketpair as fd
 * MT_CHILD_FD, and returns this end in *@sock; the test's main() dispatches on the arguments
 * before mt_init(). mt_wait_child() closes @sock, reaps the child and fails the test unless it
 * exited with status 0. mt_send_all()/mt_recv_all() move exactly @n bytes (g_error otherwise). */
#define MT_CHILD_FD 3
GPid mt_spawn_child (const char *mode, int *sock);
void mt_wait_child (GPid pid, int sock);
void mt_send_all (int sock, gconstpointer data, gsize n);
void mt_recv_all (int sock, gpointer data, gsize n);

/* For tests that hand-craft IPC messages: sends @len bytes at @data in one sendmsg() with the
 * @n_fds fds at @fds in SCM_RIGHTS (none when 0) and, when @with_creds, this process's
 * credentials in SCM_CREDENTIALS, as memres's own senders always attach them (the receiver
 * refuses a message without, unless MEMRES_IPC_ALLOW_ANY_UID). Asserts that all @len bytes
 * went. */
void mt_send_raw (int sock, gconstpointer data, gsize len, const int *fds, int n_fds,
                  gboolean with_creds);

/* Whether @error is how memres reports a driver call that failed with @code: the out-of-memory
 * rule (memres_cuda_set_error()) makes CUDA_ERROR_OUT_OF_MEMORY a MEMRES_ERROR_OUT_OF_MEMORY,
 * every other CUresult a MEMRES_CUDA_ERROR of that code. */
gboolean mt_error_is_cuda (const GError *error, CUresult code);

/* Asserts that @error is a MEMRES_ERROR_OUT_OF_MEMORY whose message is @cause (the words of the
 * layer that failed) followed by the report the core appends (core/oom-report.c). */
#define mt_assert_oom_cause(error, cause) mt_assert_oom_cause_ (__FILE__, __LINE__, error, cause)
void mt_assert_oom_cause_ (const char *file, int line, const GError *error, const char *cause);

/* Which call of its name @calls[@i] is among @calls[0..@i] (1 for the first): the nth that
 * mt_fake_fail_call() takes to fail that call of a traced sequence. */
int mt_call_ordinal (char *const *calls, guint i);

/* Fault sweep (fake only; skips on the real driver). @op performs one plugin operation and
 * returns TRUE on success; @undo reverts a successful @op. The sweep records the driver calls
 * @op makes, then for each call in turn makes exactly that call fail with
 * CUDA_ERROR_OUT_OF_MEMORY (or @code when not 0) and asserts that @op fails with the error of
 * that code (mt_error_is_cuda()), that no fake count moved, and that @op then succeeds again.
 * Entry points in @ignore (NULL-terminated, may be NULL) are not failed: queries whose failure
 * the operation tolerates by design; "ENTRY#N" spares only the Nth call of ENTRY in the
 * operation. Returns the number of calls swept. */
typedef gboolean (*MtOp) (gpointer data, GError **error);
typedef void (*MtUndo) (gpointer data);
int mt_fault_sweep (const char *what, MtOp op, MtUndo undo, gpointer data, CUresult code,
                    const char *const *ignore);

/* Operands of the fault-sweep operations below (unused fields stay zero). */
typedef struct
{
  const char *spec;    /* mt_op_new: the resource to create */
  MemresResource *mr;  /* mt_op_new's result; the resource mt_op_allocate allocates from */
  gsize size;          /* mt_op_allocate: bytes */
  MemresStream stream; /* mt_op_allocate, mt_undo_allocate: the stream */
  MemresBuffer *buf;   /* mt_op_allocate's result */
} MtSweepData;

/* MtOp/MtUndo pairs on an MtSweepData. mt_op_new sets ->mr to memres_resource_new(->spec);
 * mt_undo_new drops it. mt_op_allocate sets ->buf to memres_resource_allocate(->mr, ->size,
 * ->stream); mt_undo_allocate closes it on ->stream (mt_close_ok), synchronizes ->stream
 * (mt_sync_ok) and clears ->buf. */
gboolean mt_op_new (gpointer data, GError **error);
void mt_undo_new (gpointer data);
gboolean mt_op_allocate (gpointer data, GError **error);
void mt_undo_allocate (gpointer data);
/* An MtOp with no undo: allocates ->size bytes from ->mr (NULL stream) and closes the buffer at
 * once (a failing close must still leave nothing behind). */
gboolean mt_op_allocate_close (gpointer data, GError **error);

/* Operands and results of the IPC fault-sweep operations below. */
typedef struct
{
  MemresResource *exporter;     /* mt_op_export_handle: the pool to export */
  MemresBuffer *buf;            /* mt_op_export_buffer: the buffer to export (into ->desc) */
  MemresIpcHandle *handle;      /* mt_op_import_handle: the handle to import */
  MemresResource *importer;     /* mt_op_import_buffer: the resource to import ->desc into */
  MemresBufferDescriptor desc;  /* mt_op_import_buffer's input, mt_op_export_buffer's output */
  MemresIpcHandle *made_handle; /* mt_op_export_handle's result */
  MemresResource *made_import;  /* mt_op_import_handle's result */
  MemresBuffer *made_buf;       /* mt_op_import_buffer's result */
} MtIpcSweepData;

/* MtOp's on an MtIpcSweepData: memres_resource_export_handle, memres_resource_import_handle,
 * memres_buffer_export and memres_buffer_import (on the default stream). mt_undo_ipc drops
 * every made_* result and synchronizes the default stream. */
gboolean mt_op_export_handle (gpointer data, GError **error);
gboolean mt_op_import_handle (gpointer data, GError **error);
gboolean mt_op_export_buffer (gpointer data, GError **error);
gboolean mt_op_import_buffer (gpointer data, GError **error);
void mt_undo_ipc (gpointer data);

/* Creates in @dir the odd files a search path may hold, each name NULL to skip: a FIFO
 * @fifo, a symbolic link to itself @loop, a symbolic link to a file that does not exist
 * @dangling. mt_remove_dir() removes @dir's entries (not recursively) and then @dir. */
void mt_make_odd_files (const char *dir, const char *fifo, const char *loop, const char *dangling);
void mt_remove_dir (const char *dir);

/* A GDestroyNotify for wrapped memory: adds one to the int @data points to. */
void mt_count_release (gpointer data);

/* In the child of a fork() made by a test: @cond must hold, else it prints the check on stderr
 * and exits with status 1 (the parent's test fails on the status). */
#define CHILD_CHECK(cond)                                                                          \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (!(cond))                                                                                   \
      {                                                                                            \
        fprintf (stderr, "child: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
        _exit (1);                                                                                 \
      }                                                                                            \
  }                                                                                                \
  G_STMT_END

G_END_DECLS

/* The `arena` reservations that its memory figures are asserted at: the kind's default (twice
 * the device's memory: the test's small fake device) and those it makes on real cards (an
 * 80 GiB H100's, a 141 GiB H200's). Placement depends on where the settled rest of the
 * reservation lies against the buffers, so a figure held at a toy device only can miss on a
 * card (/arena/memory/kv-growth did until h-kvreal). */
typedef struct
{
  const char *name;   /* a test path's last component */
  const char *device; /* what it stands for */
  const char *spec;   /* "arena" with its reserve option */
  guint64 bytes;      /* the reservation's bytes; 0: the default */
} MtReservation;

#define MT_N_RESERVATIONS 3
extern const MtReservation mt_reservations[MT_N_RESERVATIONS];
