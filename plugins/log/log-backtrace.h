/* memres - CUDA memory resources
 * log-backtrace.h: the `log` adaptor's Backtrace column (log-backtrace.c). */
#pragma once

#include <memres/memres-plugin.h>

/* the most frames of a Backtrace field, and the most bytes of a frame's text (before escapes) */
#define LOG_BACKTRACE_FRAMES 32
#define LOG_FRAME_MAX        256
/* the most bytes of a Backtrace field: every byte of every frame escaped, and the separators */
#define LOG_BACKTRACE_MAX (LOG_BACKTRACE_FRAMES * (3 * LOG_FRAME_MAX + 1))

/* The calling thread's stack, memres's frames left out, as the Backtrace field (transfer full;
 * "" when no frame is left or glibc cannot symbolize). Thread-safe; allocates. */
G_GNUC_INTERNAL char *_log_backtrace (void);
/* The kind's at_fork (@mr NULL): the lock of the frames' texts. */
G_GNUC_INTERNAL void _log_backtrace_at_fork (MemresForkPhase phase);
