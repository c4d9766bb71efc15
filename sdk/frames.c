/* memres - CUDA memory resources
 * frames.c: which frames of a call stack are memres's own (frames.h): the address span of each
 * object named by an address in it, found once with dl_iterate_phdr(), and a return address
 * tested against them. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "frames.h"

#include <link.h>
#include <stdint.h>

typedef struct
{
  MemresFrames *frames;
  const gconstpointer *anchors;
  guint n_anchors;
} Search;

/* @info's span: from its first loaded segment's start to its last one's end (where the loader
 * reserved the object's address space, gaps between segments included: dladdr()'s
 * [l_map_start, l_map_end)); empty when it has no loaded segment. */
static MemresFrameRange
object_span (const struct dl_phdr_info *info)
{
  MemresFrameRange span = { UINTPTR_MAX, 0 };

  for (int i = 0; i < info->dlpi_phnum; i++)
    {
      const ElfW (Phdr) *ph = &info->dlpi_phdr[i];
      guintptr start = info->dlpi_addr + ph->p_vaddr;

      if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
        continue;
      span.start = MIN (span.start, start);
      span.end = MAX (span.end, start + ph->p_memsz);
    }
  if (span.end == 0)
    span.start = 0;
  return span;
}

static int
on_object (struct dl_phdr_info *info, size_t size, void *data)
{
  Search *s = data;
  MemresFrameRange span = object_span (info);

  for (guint k = 0; k < s->n_anchors; k++)
    {
      guintptr anchor = (guintptr) s->anchors[k];

      if (anchor != 0 && anchor >= span.start && anchor < span.end
          && s->frames->n_ranges < MEMRES_FRAMES_RANGES_MAX)
        {
          s->frames->ranges[s->frames->n_ranges++] = span;
          break;
        }
    }
  return 0;
}

void
memres_frames_init (MemresFrames *frames, const gconstpointer *anchors, guint n_anchors)
{
  Search s = { frames, anchors, n_anchors };

  frames->n_ranges = 0;
  if (n_anchors > 0)
    dl_iterate_phdr (on_object, &s);
}

gboolean
memres_frames_contain (const MemresFrames *frames, gconstpointer pc)
{
  guintptr addr = (guintptr) pc;

  for (guint i = 0; i < frames->n_ranges; i++)
    if (addr >= frames->ranges[i].start && addr < frames->ranges[i].end)
      return TRUE;
  return FALSE;
}

guint
memres_frames_first_caller (const MemresFrames *frames, gpointer const *pcs, guint n)
{
  guint first = 0;

  for (guint i = 0; i < n; i++)
    if (memres_frames_contain (frames, pcs[i]))
      first = i + 1;
  return first;
}
