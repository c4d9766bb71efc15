/* testutil.h: helpers shared by the test programs. */
#pragma once

#include <memres/memres-plugin.h>
#include "fakecuda/fakecuda-control.h"

G_BEGIN_DECLS

/* g_test_init() plus the project's settings. */
void mt_init(int *argc, char ***argv);

/* TRUE when MEMRES_CUDA_DRIVER names libfakecuda (the control functions resolve). */
gboolean mt_driver_is_fake(void);

/* TRUE when at least @n CUDA devices are usable. Otherwise, against the real driver, calls
 * g_test_skip() with the reason and returns FALSE; against the fake it fails the test
 * (the fake suite never skips). */
gboolean mt_require_devices(int n);

/* Fake control; each one fails the test when the driver is not the fake. */
void mt_fake_get_counts(FakeCudaCounts *counts);
void mt_fake_fail_call(const char *entry, int nth, CUresult result);
void mt_fake_reset_faults(void);
void mt_fake_set_attribute(int device, CUdevice_attribute attr, int value);
long mt_fake_call_count(const char *entry);

/* Asserts every live count of the fake equals the one in @baseline (no-op on the real driver). */
void mt_assert_fake_counts_equal(const FakeCudaCounts *baseline);

/* Number of open file descriptors of this process (/proc/self/fd). */
int mt_count_open_fds(void);

/* Fills @n bytes at @dest with a pattern derived from @seed; mt_check_pattern() verifies it
 * and reports the first differing offset. */
void mt_fill_pattern(guint8 *dest, gsize n, guint32 seed);
void mt_assert_pattern(const guint8 *data, gsize n, guint32 seed);

/* Child processes for the IPC tests: never a bare fork() after CUDA init. mt_spawn_child() runs
 * this same program again as `PROGRAM --child MODE` with its end of a stream socketpair as fd
 * MT_CHILD_FD, and returns this end in *@sock; the test's main() dispatches on the arguments
 * before mt_init(). mt_wait_child() closes @sock, reaps the child and fails the test unless it
 * exited with status 0. mt_send_all()/mt_recv_all() move exactly @n bytes (g_error otherwise). */
#define MT_CHILD_FD 3
GPid mt_spawn_child(const char *mode, int *sock);
void mt_wait_child(GPid pid, int sock);
void mt_send_all(int sock, gconstpointer data, gsize n);
void mt_recv_all(int sock, gpointer data, gsize n);

/* Fault sweep (fake only; skips on the real driver). @op performs one plugin operation and
 * returns TRUE on success; @undo reverts a successful @op. The sweep records the driver calls
 * @op makes, then for each call in turn makes exactly that call fail with
 * CUDA_ERROR_OUT_OF_MEMORY (or @code when not 0) and asserts that @op fails with
 * MEMRES_CUDA_ERROR and that code, that no fake count moved, and that @op then succeeds again.
 * Entry points in @ignore (NULL-terminated, may be NULL) are not failed: queries whose failure
 * the operation tolerates by design. Returns the number of calls swept. */
typedef gboolean (*MtOp)(gpointer data, GError **error);
typedef void (*MtUndo)(gpointer data);
int mt_fault_sweep(const char *what, MtOp op, MtUndo undo, gpointer data, CUresult code,
                   const char *const *ignore);

G_END_DECLS
