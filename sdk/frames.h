/* memres - CUDA memory resources
 * frames.h: the one test of whether a frame of a call stack is memres's own (its return address
 * in libmemres, or in another object named: a plugin's own), and where the caller's part of a
 * stack starts, for the stacks that start at the caller of memres_resource_allocate(): the
 * `track` adaptor's (memres_track_foreach_live()), the snapshot's (core/snapshot.c) and the
 * `log` adaptor's Backtrace column. Compiled into libmemres (not exported) and into the `log`
 * plugin. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* the objects kept: libmemres, and a plugin's own */
#define MEMRES_FRAMES_RANGES_MAX 8

typedef struct
{
  guintptr start, end; /* [start, end) */
} MemresFrameRange;

/* The address spans of the objects whose frames are memres's, found by memres_frames_init() and
 * only read after: safe to share between threads. */
typedef struct
{
  MemresFrameRange ranges[MEMRES_FRAMES_RANGES_MAX]; /* one per object */
  guint n_ranges;
} MemresFrames;

/* Fills @frames with the address span of each object (from dl_iterate_phdr(): from its first
 * loaded segment's start to its last one's end, as the loader reserved it and as dladdr() reads
 * it) that one of the @n_anchors addresses of @anchors lies in: a function of libmemres (any of
 * its public functions), and one of a plugin whose own frames count as memres's too. An anchor
 * in no loaded object (NULL) adds nothing; with none found, no frame is memres's. The objects
 * must stay loaded while @frames is used (libmemres; a plugin, which the core keeps resident).
 * Takes the loader's lock as dladdr() does: not for a hot path, whose callers keep @frames. */
void memres_frames_init (MemresFrames *frames, const gconstpointer *anchors, guint n_anchors);

/* Whether @pc lies in one of the objects of @frames: FALSE for NULL or any other address outside
 * them. For a return address (what backtrace() gives), the same answer as comparing dladdr()'s
 * dli_fbase with the object's, without dladdr()'s search of the objects under the loader's lock:
 * a compare with each object's two ends. */
gboolean memres_frames_contain (const MemresFrames *frames, gconstpointer pc);

/* The index in @pcs (@n return addresses, innermost first, as backtrace() gives them) of the
 * first frame past the outermost one of @frames's objects: where the caller's stack starts (the
 * frames before it are memres's: the slot calls of the layers and memres_resource_allocate()).
 * 0 when no frame is memres's; @n when every frame is (what such a stack shows is the caller's
 * choice). */
guint memres_frames_first_caller (const MemresFrames *frames, gpointer const *pcs, guint n);

G_END_DECLS
