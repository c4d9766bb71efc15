/* memres - CUDA memory resources
 * snapshot.c: snapshots (memres_resource_snapshot()): what every layer of a stack holds, as one
 * JSON document (docs/snapshot.md, docs/snapshot.schema.json). Each layer in turn, top first:
 * its statistics, its segments (copied from segments.c's index), the imports of an imported pool
 * (the IPC state's snapshot hook) and what its kind's snapshot slot adds (blocks, holes,
 * figures, what it cannot see) into a MemresSnapshotLayer, whose calls only copy into arrays;
 * then, with no lock held, the figures derived from the blocks (the free bytes, the largest
 * free block, the fragmentation index), the blocks' call stacks symbolized (each distinct frame
 * and stack once) and the text. No lock is held across two layers: an allocation waits at most
 * for one layer's copy. The core names no kind. */
#include "memres-private.h"

#include <execinfo.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc.h"
#include "../sdk/frames.h"
#include "../sdk/json-writer.h"

/* The version of the document's layout (its "memres_snapshot" member): incremented when a
 * member changes meaning or goes; members are added without it. */
#define SNAPSHOT_FORMAT 1

typedef struct
{
  guint64 address, size;
  MemresStream stream;
  MemresBlockState state;
  const char *tag; /* interned, or NULL */
  gint stack;      /* an index into the document's stacks, or -1 */
} Block;

/* A used block's call stack as a kind added it: @n return addresses from @first of the layer's
 * stack_frames. */
typedef struct
{
  guint64 address;
  guint first, n;
} StackRef;

typedef struct
{
  guint64 address, size;
} Range;

typedef struct
{
  char *name;
  guint64 value;
} Figure;

struct _MemresSnapshotLayer
{
  GArray *blocks;  /* Block */
  GArray *holes;   /* Range */
  GArray *imports; /* Range */
  GArray *figures; /* Figure */
  char *unseen;
  GArray *stack_refs;   /* StackRef */
  GArray *stack_frames; /* gpointer: the return addresses of every StackRef */
};

/* One layer as the document shows it. */
typedef struct
{
  MemresResource *mr;
  gboolean own_stats; /* the statistics are the layer's own, not its upstream's */
  MemresStats stats;
  gboolean described; /* its kind has the snapshot slot */
  GArray *segments;   /* MemresSegment */
  MemresSnapshotLayer l;
  GVariant *counters; /* the kind's own counters (a{sv}), or NULL: a kind without the slot */
  guint64 free_bytes, largest_free;
  gboolean largest_known; /* every free block of the layer is in @l.blocks */
} Layer;

/* The device's free and total bytes (also for oom-report.c) (cuMemGetInfo in its primary context),
 * when the memory of
 * @base is a device's. */
gboolean
_memres_device_mem_info (MemresResource *base, guint64 *free_bytes, guint64 *total)
{
  const MemresCudaDriver *drv;
  gboolean pushed = FALSE;
  size_t f = 0, t = 0;
  CUresult r;

  if (base->info.device < 0 || !(base->info.flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE)
      || _memres_fork_driver_lost ())
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  if (drv == NULL || !memres_cuda_push_context (base->info.device, &pushed, NULL))
    return FALSE;
  r = drv->cuMemGetInfo (&f, &t);
  memres_cuda_pop_context (pushed);
  *free_bytes = f;
  *total = t;
  return r == CUDA_SUCCESS;
}

/**
 * memres_snapshot_add_block:
 * @layer: the layer being described
 * @address: the block's first address (a `CUdeviceptr`, or a host pointer as an integer)
 * @size: its size in bytes
 * @stream: the stream it was allocated or freed on, as the layer knows it (%NULL: the legacy
 *   default stream, or not known)
 * @state: whether it is in a live allocation (%MEMRES_BLOCK_USED), held free
 *   (%MEMRES_BLOCK_FREE, %MEMRES_BLOCK_PENDING), a second address of memory listed elsewhere
 *   (%MEMRES_BLOCK_WITHHELD), or held but out of any allocation's reach (%MEMRES_BLOCK_UNUSED)
 *
 * For the snapshot slot (#MemresResourceOps.snapshot): one block of the layer. Blocks of one
 * layer do not overlap; add them in any order (the core sorts them). Copies the arguments, no
 * more: call it with the layer's lock held. Thread-safe for one @layer per thread.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_block (MemresSnapshotLayer *layer, guint64 address, guint64 size,
                           MemresStream stream, MemresBlockState state)
{
  memres_snapshot_add_tagged_block (layer, address, size, stream, state, NULL);
}

/**
 * memres_snapshot_add_tagged_block:
 * @layer: the layer being described
 * @address: the block's first address
 * @size: its size in bytes
 * @stream: the stream it was allocated or freed on (%NULL: the legacy default stream, or not
 *   known)
 * @state: whether it is in a live allocation or held free
 * @tag: (nullable): the tag of the buffer a used block is (memres_allocation_get_tag() in the
 *   allocate slot, with %MEMRES_KIND_TAGGED), %NULL or "" for none
 *
 * memres_snapshot_add_block() with the buffer's tag: the snapshot shows it on this block and on
 * the used blocks of the other layers at the same address that do not know it (a `cache` below a
 * `track` layer: the same buffer). Pass tag names only: the name is interned (kept for the life
 * of the process, as tags are). Thread-safe for one @layer per thread.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_tagged_block (MemresSnapshotLayer *layer, guint64 address, guint64 size,
                                  MemresStream stream, MemresBlockState state, const char *tag)
{
  Block b = {
    address, size, stream, state, tag != NULL && tag[0] != '\0' ? g_intern_string (tag) : NULL, -1
  };

  g_return_if_fail (layer != NULL);
  g_array_append_val (layer->blocks, b);
}

/**
 * memres_snapshot_add_hole:
 * @layer: the layer being described
 * @address: the first address of the hole
 * @size: its size in bytes
 *
 * For the snapshot slot: a range of address space the layer reserved and has no memory mapped
 * at (a `vmm` buffer's room to grow, an `arena`'s unmapped granules). Copies the arguments.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_hole (MemresSnapshotLayer *layer, guint64 address, guint64 size)
{
  Range r = { address, size };

  g_return_if_fail (layer != NULL);
  g_array_append_val (layer->holes, r);
}

/**
 * memres_snapshot_add_import:
 * @layer: the layer being described
 * @address: the first address of the imported memory in this process
 * @size: its size in bytes
 *
 * For the snapshot slot: memory the layer mapped from another process (an imported buffer).
 * Copies the arguments.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_import (MemresSnapshotLayer *layer, guint64 address, guint64 size)
{
  Range r = { address, size };

  g_return_if_fail (layer != NULL);
  g_array_append_val (layer->imports, r);
}

/**
 * memres_snapshot_add_figure:
 * @layer: the layer being described
 * @name: the figure's name, lower case with underscores (`limit`, `granularity`,
 *   `untracked_used`); copied
 * @value: its value (bytes, or a count; the kind documents it)
 *
 * For the snapshot slot: a figure of the layer that its blocks do not show (a limit, a
 * granularity, the bytes of allocations it counts but does not list). A name given twice keeps
 * both; readers take the last.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_figure (MemresSnapshotLayer *layer, const char *name, guint64 value)
{
  Figure f;

  g_return_if_fail (layer != NULL);
  g_return_if_fail (name != NULL);
  f.name = g_strdup (name);
  f.value = value;
  g_array_append_val (layer->figures, f);
}

/**
 * memres_snapshot_set_unseen:
 * @layer: the layer being described
 * @what: what the layer holds and cannot list, in a few words without a final full stop ("the
 *   driver's pool lists no blocks"); copied
 *
 * For the snapshot slot: says that the blocks listed are not all the layer holds, and what is
 * missing. Without it a layer with the slot is taken as complete. Called twice, the last wins.
 *
 * Since: 2.0
 */
void
memres_snapshot_set_unseen (MemresSnapshotLayer *layer, const char *what)
{
  g_return_if_fail (layer != NULL);
  g_return_if_fail (what != NULL);
  g_free (layer->unseen);
  layer->unseen = g_strdup (what);
}

/**
 * memres_snapshot_add_block_stack:
 * @layer: the layer being described
 * @address: the first address of a used block the layer adds (memres_snapshot_add_block(),
 *   before or after this call)
 * @frames: (array length=n_frames): the return addresses of the block's allocation, innermost
 *   first, as glibc's backtrace function captured them in the allocate slot
 * @n_frames: how many; at most %MEMRES_SNAPSHOT_STACK_FRAMES are kept (the innermost)
 *
 * For the snapshot slot of a kind that records where its allocations were made (`track` with
 * `backtrace=true`): the call stack of the allocation at @address. Copies the addresses, no
 * more (call it with the layer's lock held). After every layer was read, with no lock held,
 * the core leaves out the frames of libmemres (every frame up to the outermost one in it: the
 * stack starts at the caller of memres_resource_allocate()), symbolizes the rest as glibc's
 * backtrace_symbols function writes them ("OBJECT(FUNCTION+0xOFFSET) [0xADDRESS]"; a function's
 * name only where the object exports it) and puts each distinct frame and each distinct stack
 * once in the document's `frames` and `stacks`, the block's `stack` an index into them (also
 * on the used blocks of the other layers at the same address, the same buffer). A stack for an
 * address without a used block of the layer is dropped. Thread-safe for one @layer per
 * thread.
 *
 * Since: 2.0
 */
void
memres_snapshot_add_block_stack (MemresSnapshotLayer *layer, guint64 address,
                                 gpointer const *frames, guint n_frames)
{
  StackRef r;

  g_return_if_fail (layer != NULL);
  g_return_if_fail (frames != NULL || n_frames == 0);
  n_frames = MIN (n_frames, MEMRES_SNAPSHOT_STACK_FRAMES);
  if (n_frames == 0)
    return;
  r.address = address;
  r.first = layer->stack_frames->len;
  r.n = n_frames;
  g_array_append_vals (layer->stack_frames, frames, n_frames);
  g_array_append_val (layer->stack_refs, r);
}

static gint
block_cmp (gconstpointer a, gconstpointer b)
{
  const Block *x = a, *y = b;

  return x->address < y->address ? -1 : x->address > y->address;
}

static gint
range_cmp (gconstpointer a, gconstpointer b)
{
  const Range *x = a, *y = b;

  return x->address < y->address ? -1 : x->address > y->address;
}

/* Reads @mr into @l: statistics, segments, imports, the slot's description; then sorts and
 * derives, with no lock held. */
static void
layer_read (Layer *l, MemresResource *mr)
{
  memset (l, 0, sizeof *l);
  l->mr = mr;
  l->l.blocks = g_array_new (FALSE, FALSE, sizeof (Block));
  l->l.holes = g_array_new (FALSE, FALSE, sizeof (Range));
  l->l.imports = g_array_new (FALSE, FALSE, sizeof (Range));
  l->l.figures = g_array_new (FALSE, FALSE, sizeof (Figure));
  l->l.stack_refs = g_array_new (FALSE, FALSE, sizeof (StackRef));
  l->l.stack_frames = g_array_new (FALSE, FALSE, sizeof (gpointer));
  l->own_stats = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (get_stats), FALSE) == mr
                 && memres_resource_get_stats (mr, &l->stats, NULL);
  l->segments = _memres_segments_copy (mr);
  /* the layer's own counters only: an adaptor without the slot would show its upstream's */
  if (mr->ops->get_counters != NULL && !_memres_resource_is_inherited (mr))
    l->counters = memres_resource_get_counters (mr, NULL);
  if (mr->ipc != NULL && mr->ipc->hooks->snapshot != NULL)
    mr->ipc->hooks->snapshot (mr, &l->l);
  l->described = mr->ops->snapshot != NULL && !_memres_resource_is_inherited (mr);
  if (l->described)
    mr->ops->snapshot (mr, &l->l);

  g_array_sort (l->l.blocks, block_cmp);
  g_array_sort (l->l.holes, range_cmp);
  g_array_sort (l->l.imports, range_cmp);
  for (guint i = 0; i < l->l.blocks->len; i++)
    {
      const Block *b = &g_array_index (l->l.blocks, Block, i);

      if (b->state != MEMRES_BLOCK_FREE && b->state != MEMRES_BLOCK_PENDING)
        continue;
      l->free_bytes += b->size;
      l->largest_free = MAX (l->largest_free, b->size);
    }
  /* a layer that lists its free blocks completely knows its largest one; one that does not
   * (no slot, or what it cannot see): its free bytes are what its statistics hold beyond its
   * use, where that is more than it lists */
  l->largest_known = l->described;
  if ((!l->described || l->l.unseen != NULL) && l->own_stats
      && l->stats.reserved_current - MIN (l->stats.reserved_current, l->stats.used_current)
             > l->free_bytes)
    {
      l->free_bytes = l->stats.reserved_current - l->stats.used_current;
      l->largest_known = FALSE;
    }
}

/* The call stacks of the document: each distinct frame once (frames, its text), each distinct
 * stack once (stacks: its count of frames, then their indexes into frames, innermost first), as
 * memres view's page holds a log's. */
typedef struct
{
  GPtrArray *frames;    /* char* (owned), the symbolized text */
  GPtrArray *stacks;    /* GArray of guint (owned): the frames' indexes */
  GHashTable *frame_of; /* a kept return address -> its index in frames + 1 */
  GHashTable *stack_of; /* "I,J,..." (owned) -> its index in stacks + 1 */
  MemresFrames memres;  /* libmemres's code, whose frames are cut (sdk/frames.h) */
  GArray *pending;      /* gpointer: the return addresses of frames not yet symbolized */
} Stacks;

static gint
stacks_add (Stacks *st, gpointer const *pcs, guint n)
{
  g_autoptr (GString) key = g_string_new (NULL);
  GArray *frames;
  gpointer found;
  guint first = memres_frames_first_caller (&st->memres, pcs, n);

  if (first == n)
    return -1;
  frames = g_array_sized_new (FALSE, FALSE, sizeof (guint), n - first);
  for (guint i = first; i < n; i++)
    {
      guint index;

      if ((found = g_hash_table_lookup (st->frame_of, pcs[i])) != NULL)
        index = GPOINTER_TO_UINT (found) - 1;
      else
        {
          index = st->frames->len + st->pending->len;
          g_array_append_val (st->pending, pcs[i]);
          g_hash_table_insert (st->frame_of, pcs[i], GUINT_TO_POINTER (index + 1));
        }
      g_array_append_val (frames, index);
      g_string_append_printf (key, "%u,", index);
    }
  if ((found = g_hash_table_lookup (st->stack_of, key->str)) != NULL)
    {
      g_array_unref (frames);
      return GPOINTER_TO_INT (found) - 1;
    }
  g_ptr_array_add (st->stacks, frames);
  g_hash_table_insert (st->stack_of, g_strdup (key->str), GINT_TO_POINTER (st->stacks->len));
  return (gint) st->stacks->len - 1;
}

/* The used block of @l at @address, or NULL (the blocks are sorted by address). */
static Block *
find_used_block (Layer *l, guint64 address)
{
  guint lo = 0, hi = l->l.blocks->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      Block *b = &g_array_index (l->l.blocks, Block, mid);

      if (b->address == address)
        return b->state == MEMRES_BLOCK_USED ? b : NULL;
      if (b->address < address)
        lo = mid + 1;
      else
        hi = mid;
    }
  return NULL;
}

/* The stacks the layers' kinds added, each on its used block, symbolized (one
 * backtrace_symbols() call for every distinct frame). After the reads, with no lock. */
static void
stacks_resolve (Stacks *st, Layer *layers, guint n)
{
  const gconstpointer anchor = (gconstpointer) memres_resource_snapshot;
  char **symbols;

  memres_frames_init (&st->memres, &anchor, 1);
  st->frames = g_ptr_array_new_with_free_func (g_free);
  st->stacks = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  st->frame_of = g_hash_table_new (g_direct_hash, g_direct_equal);
  st->stack_of = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  st->pending = g_array_new (FALSE, FALSE, sizeof (gpointer));
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < layers[i].l.stack_refs->len; j++)
      {
        const StackRef *r = &g_array_index (layers[i].l.stack_refs, StackRef, j);
        Block *b = find_used_block (&layers[i], r->address);

        if (b != NULL)
          b->stack = stacks_add (st, &g_array_index (layers[i].l.stack_frames, gpointer, r->first),
                                 r->n);
      }
  if (st->pending->len == 0)
    return;
  symbols = backtrace_symbols ((gpointer *) st->pending->data, (int) st->pending->len);
  for (guint i = 0; i < st->pending->len; i++)
    g_ptr_array_add (st->frames,
                     symbols != NULL
                         ? g_strdup (symbols[i])
                         : g_strdup_printf ("[%p]", g_array_index (st->pending, gpointer, i)));
  free (symbols);
}

static void
stacks_clear (Stacks *st)
{
  g_ptr_array_unref (st->frames);
  g_ptr_array_unref (st->stacks);
  g_hash_table_unref (st->frame_of);
  g_hash_table_unref (st->stack_of);
  g_array_unref (st->pending);
}

/* The tag and the stack a layer knows for a used block (track's) also on the used blocks of the
 * other layers at the same address that do not know them: the same buffer, seen by a layer that
 * cannot know them (a cache's block under it). After the reads, with no lock. */
static void
share_blocks (Layer *layers, guint n)
{
  g_autoptr (GHashTable) known = NULL; /* address -> the Block that knows */

  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < layers[i].l.blocks->len; j++)
      {
        Block *b = &g_array_index (layers[i].l.blocks, Block, j);
        Block *k;

        if (b->state != MEMRES_BLOCK_USED || (b->tag == NULL && b->stack < 0))
          continue;
        if (known == NULL)
          known = g_hash_table_new (g_int64_hash, g_int64_equal);
        if ((k = g_hash_table_lookup (known, &b->address)) == NULL)
          g_hash_table_insert (known, &b->address, b);
        else
          {
            /* two layers that know something of the same buffer: the first keeps both */
            k->tag = k->tag != NULL ? k->tag : b->tag;
            k->stack = k->stack >= 0 ? k->stack : b->stack;
          }
      }
  if (known == NULL)
    return;
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < layers[i].l.blocks->len; j++)
      {
        Block *b = &g_array_index (layers[i].l.blocks, Block, j);
        const Block *k;

        if (b->state != MEMRES_BLOCK_USED || (k = g_hash_table_lookup (known, &b->address)) == NULL)
          continue;
        b->tag = b->tag != NULL ? b->tag : k->tag;
        b->stack = b->stack >= 0 ? b->stack : k->stack;
      }
}

static void
layer_clear (Layer *l)
{
  for (guint i = 0; i < l->l.figures->len; i++)
    g_free (g_array_index (l->l.figures, Figure, i).name);
  g_array_unref (l->l.blocks);
  g_array_unref (l->l.holes);
  g_array_unref (l->l.imports);
  g_array_unref (l->l.figures);
  g_array_unref (l->segments);
  g_array_unref (l->l.stack_refs);
  g_array_unref (l->l.stack_frames);
  g_free (l->l.unseen);
  g_clear_pointer (&l->counters, g_variant_unref);
}

static const char *
state_name (MemresBlockState state)
{
  switch (state)
    {
    case MEMRES_BLOCK_USED:
      return "used";
    case MEMRES_BLOCK_FREE:
      return "free";
    case MEMRES_BLOCK_PENDING:
      return "pending";
    case MEMRES_BLOCK_WITHHELD:
      return "withheld";
    case MEMRES_BLOCK_UNUSED:
      return "unused";
    }
  return "unknown";
}

static void
write_stream (MemresJson *json, MemresStream stream)
{
  if (stream == NULL)
    memres_json_string (json, "stream", "default");
  else if (stream == MEMRES_STREAM_LEGACY)
    memres_json_string (json, "stream", "legacy");
  else if (stream == CU_STREAM_PER_THREAD)
    memres_json_string (json, "stream", "per-thread");
  else
    memres_json_hex (json, "stream", (guint64) (guintptr) stream);
}

static void
write_ranges (MemresJson *json, const char *key, GArray *ranges)
{
  memres_json_begin_array (json, key);
  for (guint i = 0; i < ranges->len; i++)
    {
      const Range *r = &g_array_index (ranges, Range, i);

      memres_json_begin_object (json, NULL);
      memres_json_hex (json, "address", r->address);
      memres_json_uint (json, "size", r->size);
      memres_json_end_object (json);
    }
  memres_json_end_array (json);
}

/* The fragmentation index: 1 - largest free block / free bytes (0 when nothing is free). */
static double
fragmentation (guint64 largest, guint64 free_bytes)
{
  return free_bytes == 0 ? 0.0 : 1.0 - (double) largest / (double) free_bytes;
}

/* The member "counters": the kind's counters (memres_resource_get_counters()) whose values are
 * numbers, booleans or strings, by name; the others (a `cache`'s per-class array) are left out. */
static void
write_counters (MemresJson *json, GVariant *counters)
{
  GVariantIter iter;
  const char *name;
  GVariant *v;

  memres_json_begin_object (json, "counters");
  g_variant_iter_init (&iter, counters);
  while (g_variant_iter_next (&iter, "{&sv}", &name, &v))
    {
      if (g_variant_is_of_type (v, G_VARIANT_TYPE_UINT64))
        memres_json_uint (json, name, g_variant_get_uint64 (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32))
        memres_json_uint (json, name, g_variant_get_uint32 (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_INT64))
        memres_json_int (json, name, g_variant_get_int64 (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_INT32))
        memres_json_int (json, name, g_variant_get_int32 (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_DOUBLE))
        memres_json_double (json, name, g_variant_get_double (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN))
        memres_json_bool (json, name, g_variant_get_boolean (v));
      else if (g_variant_is_of_type (v, G_VARIANT_TYPE_STRING))
        memres_json_string (json, name, g_variant_get_string (v, NULL));
      g_variant_unref (v);
    }
  memres_json_end_object (json);
}

static void
write_layer (MemresJson *json, const Layer *l, guint position)
{
  MemresResource *mr = l->mr;

  memres_json_begin_object (json, NULL);
  memres_json_uint (json, "position", position);
  memres_json_string (json, "kind", mr->kind->name);
  memres_json_string (json, "spec", mr->spec);
  memres_json_bool (json, "adaptor", mr->upstream != NULL);
  memres_json_int (json, "device", mr->info.device);
  memres_json_bool (json, "own_stats", l->own_stats);
  if (l->own_stats)
    {
      memres_json_uint (json, "reserved", l->stats.reserved_current);
      memres_json_uint (json, "used", l->stats.used_current);
      memres_json_uint (json, "reserved_high", l->stats.reserved_high);
      memres_json_uint (json, "used_high", l->stats.used_high);
      memres_json_uint (json, "n_buffers", l->stats.n_buffers);
    }
  else
    {
      memres_json_string (json, "reserved", NULL);
      memres_json_string (json, "used", NULL);
    }
  memres_json_uint (json, "cached", l->free_bytes);
  memres_json_bool (json, "described", l->described);
  memres_json_bool (json, "complete", l->described && l->l.unseen == NULL);
  memres_json_string (json, "unseen",
                      l->described ? l->l.unseen : "the kind does not describe its memory");
  if (l->largest_known)
    {
      memres_json_uint (json, "largest_free", l->largest_free);
      memres_json_double (json, "fragmentation", fragmentation (l->largest_free, l->free_bytes));
    }
  else
    {
      memres_json_string (json, "largest_free", NULL);
      memres_json_string (json, "fragmentation", NULL);
    }

  memres_json_begin_array (json, "segments");
  for (guint i = 0; i < l->segments->len; i++)
    {
      const MemresSegment *s = &g_array_index (l->segments, MemresSegment, i);

      memres_json_begin_object (json, NULL);
      memres_json_hex (json, "address", s->base);
      memres_json_uint (json, "size", s->length);
      memres_json_int (json, "device", s->device);
      memres_json_string (json, "tag", s->tag != NULL ? s->tag : "");
      memres_json_end_object (json);
    }
  memres_json_end_array (json);

  memres_json_begin_array (json, "blocks");
  for (guint i = 0; i < l->l.blocks->len; i++)
    {
      const Block *b = &g_array_index (l->l.blocks, Block, i);

      memres_json_begin_object (json, NULL);
      memres_json_hex (json, "address", b->address);
      memres_json_uint (json, "size", b->size);
      write_stream (json, b->stream);
      memres_json_string (json, "tag", b->tag != NULL ? b->tag : "");
      memres_json_string (json, "state", state_name (b->state));
      if (b->stack >= 0)
        memres_json_int (json, "stack", b->stack);
      memres_json_end_object (json);
    }
  memres_json_end_array (json);
  write_ranges (json, "holes", l->l.holes);
  write_ranges (json, "imports", l->l.imports);

  memres_json_begin_object (json, "figures");
  for (guint i = 0; i < l->l.figures->len; i++)
    {
      const Figure *f = &g_array_index (l->l.figures, Figure, i);

      memres_json_uint (json, f->name, f->value);
    }
  memres_json_end_object (json);
  if (l->counters != NULL)
    write_counters (json, l->counters);
  memres_json_end_object (json);
}

/* The members "frames" (each distinct frame's text) and "stacks" (each distinct stack: its
 * count of frames, then their indexes into frames, innermost first). */
static void
write_stacks (MemresJson *json, const Stacks *st)
{
  memres_json_begin_array (json, "frames");
  for (guint i = 0; i < st->frames->len; i++)
    memres_json_string (json, NULL, g_ptr_array_index (st->frames, i));
  memres_json_end_array (json);
  memres_json_begin_array (json, "stacks");
  for (guint i = 0; i < st->stacks->len; i++)
    {
      const GArray *frames = g_ptr_array_index (st->stacks, i);

      memres_json_begin_array (json, NULL);
      memres_json_uint (json, NULL, frames->len);
      for (guint f = 0; f < frames->len; f++)
        memres_json_uint (json, NULL, g_array_index (frames, guint, f));
      memres_json_end_array (json);
    }
  memres_json_end_array (json);
}

char *
_memres_snapshot_build (MemresResource *mr)
{
  return _memres_snapshot_build_for_oom (mr, NULL);
}

char *
_memres_snapshot_build_for_oom (MemresResource *mr, const char *oom_report)
{
  Layer layers[MEMRES_STACK_MAX_LAYERS];
  g_autofree char *spec = memres_resource_to_string (mr);
  guint n = 0;
  guint64 dev_free = 0, dev_total = 0, free_total = 0, largest = 0;
  gboolean have_device, largest_known = TRUE;
  Stacks stacks;
  MemresJson json;

  /* one layer at a time: each takes (in its slot) and releases its own lock */
  for (MemresResource *l = mr; l != NULL && n < G_N_ELEMENTS (layers); l = l->upstream)
    layer_read (&layers[n++], l);
  have_device = _memres_device_mem_info (layers[n - 1].mr, &dev_free, &dev_total);
  stacks_resolve (&stacks, layers, n);
  share_blocks (layers, n);
  for (guint i = 0; i < n; i++)
    {
      free_total += layers[i].free_bytes;
      largest = MAX (largest, layers[i].largest_free);
      if (layers[i].free_bytes > 0 && !layers[i].largest_known)
        largest_known = FALSE;
    }

  memres_json_init (&json);
  memres_json_begin_object (&json, NULL);
  memres_json_int (&json, "memres_snapshot", SNAPSHOT_FORMAT);
  memres_json_string (&json, "spec", spec);
  memres_json_int (&json, "time_us", g_get_real_time ());
  if (oom_report != NULL)
    memres_json_string (&json, "oom_report", oom_report);
  memres_json_int (&json, "device", mr->info.device);
  if (have_device)
    {
      memres_json_begin_object (&json, "driver");
      memres_json_uint (&json, "free", dev_free);
      memres_json_uint (&json, "total", dev_total);
      memres_json_end_object (&json);
    }
  else
    memres_json_string (&json, "driver", NULL);

  memres_json_begin_object (&json, "summary");
  /* what the stack holds: the lowest layer's own reserve; what it hands out: the highest
   * layer's own use (an adaptor without statistics of its own shows its upstream's) */
  for (guint i = n; i-- > 0;)
    if (layers[i].own_stats)
      {
        memres_json_uint (&json, "reserved", layers[i].stats.reserved_current);
        break;
      }
    else if (i == 0)
      memres_json_string (&json, "reserved", NULL);
  for (guint i = 0; i < n; i++)
    if (layers[i].own_stats)
      {
        memres_json_uint (&json, "used", layers[i].stats.used_current);
        break;
      }
    else if (i == n - 1)
      memres_json_string (&json, "used", NULL);
  memres_json_uint (&json, "cached", free_total);
  /* unknown where a layer holds free bytes it does not list */
  if (largest_known)
    {
      memres_json_uint (&json, "largest_free", largest);
      memres_json_double (&json, "fragmentation", fragmentation (largest, free_total));
    }
  else
    {
      memres_json_string (&json, "largest_free", NULL);
      memres_json_string (&json, "fragmentation", NULL);
    }
  memres_json_end_object (&json);

  memres_json_begin_array (&json, "layers");
  for (guint i = 0; i < n; i++)
    write_layer (&json, &layers[i], i);
  memres_json_end_array (&json);
  if (stacks.stacks->len > 0)
    write_stacks (&json, &stacks);
  memres_json_end_object (&json);

  for (guint i = 0; i < n; i++)
    layer_clear (&layers[i]);
  stacks_clear (&stacks);
  return memres_json_finish (&json);
}

/**
 * memres_resource_snapshot:
 * @mr: a #MemresResource (the top of a stack, or any layer: the snapshot describes it and the
 *   layers below)
 * @error: return location for a #GError
 *
 * A snapshot of what every layer of @mr's stack holds, as one JSON document (its layout:
 * docs/snapshot.md and the JSON schema docs/snapshot.schema.json). For the stack: its spec, the
 * time, the device, the driver's free and total bytes for that device (cuMemGetInfo() in its
 * primary context; `null` for memory no device owns), and a summary (the bytes the bottom
 * layer reserved, the bytes the top layer hands out, the free bytes of every layer, the
 * largest free block, the fragmentation index: 1 - largest free block / free bytes). For each
 * layer, top first: its kind and spec; its reserved, used and high-water bytes
 * (memres_resource_get_stats(), `null` where they are its upstream's); its segments
 * (memres-segments.h); its blocks (address, size, stream, tag, state: used, free, pending,
 * withheld: a second address of memory listed at another, or unused: held, but no allocation can
 * take it),
 * holes (reserved address space with nothing mapped) and imports (memory mapped from another
 * process), as its kind describes them (#MemresResourceOps.snapshot); figures of its own; the
 * free bytes, the largest free block and the fragmentation index derived from its blocks; and
 * whether the list is complete, with what it cannot see (a driver's pool lists no blocks; a
 * kind without the slot describes nothing). Addresses and streams are strings of hex digits
 * ("0x7f0000000000": JSON numbers lose bits past 2^53), sizes are numbers of bytes. Tags are
 * empty strings until memory has tags.
 *
 * Taking it blocks no allocation for longer than one layer takes to copy its tables (each
 * layer's slot runs alone under its own lock; no lock is held across layers), so the layers
 * are read one after another, not at one instant: under concurrent allocations two layers may
 * disagree by the allocations made in between. Driver calls: cuMemGetInfo(), and what a
 * layer's slot makes (pool attributes).
 *
 * Thread-safe.
 *
 * Returns: (transfer full): the JSON text, ending with a newline (free it with `g_free`), or
 *   %NULL with %MEMRES_ERROR_FORKED when @mr was inherited through fork() from a parent that
 *   had initialized the driver
 *
 * Since: 2.0
 */
char *
memres_resource_snapshot (MemresResource *mr, GError **error)
{
  g_return_val_if_fail (mr != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!_memres_resource_check_usable (mr, "a snapshot", error))
    return NULL;
  return _memres_snapshot_build (mr);
}
