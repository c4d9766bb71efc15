/* memres - CUDA memory resources
 * arena-tree.h: the ordered indexes of the `arena` kind's free ranges (the best-fit tree, the run
 * index, the address tree: arena-heap.c, arena-runs.c), as AVL trees whose nodes live in the
 * ranges themselves. A free range joins and leaves the heap at nearly every large allocation and
 * close; GTree allocated and freed a node each time and compared through a callback
 * (with their callers, 3.01M -> 2.64M instructions a steady resnet18 step under place=stable on
 * the fake, callgrind). Here an insertion or removal allocates nothing, the neighbours of a range
 * in its order are a walk of links (no search), and the two orders are compared inline. Not thread
 * safe: the arena's parts.lock guards every tree. */
#pragma once

#include <glib.h>

/* A range's place in one tree: its children (child[0] before it, child[1] after it), its parent
 * and its subtree's height. */
typedef struct _ArenaTreeNode ArenaTreeNode;
struct _ArenaTreeNode
{
  ArenaTreeNode *child[2], *parent;
  gint height;
};

/* The two orders: by (tag, size, address), best fit per tag; by address. */
typedef enum
{
  ARENA_ORDER_FIT,
  ARENA_ORDER_ADDR,
} ArenaOrder;

/* A tree of ranges: @offset, where its node lies in a range (offsetof). */
typedef struct
{
  ArenaTreeNode *root;
  guint n;
  ArenaOrder order;
  gsize offset;
} ArenaTree;

struct _Range;

void arena_tree_init (ArenaTree *t, ArenaOrder order, gsize offset);
void arena_tree_clear (ArenaTree *t);
void arena_tree_insert (ArenaTree *t, struct _Range *r);
void arena_tree_remove (ArenaTree *t, struct _Range *r);
struct _Range *arena_tree_first (const ArenaTree *t);
struct _Range *arena_tree_last (const ArenaTree *t);
struct _Range *arena_tree_next (const ArenaTree *t, const struct _Range *r);
struct _Range *arena_tree_prev (const ArenaTree *t, const struct _Range *r);
struct _Range *arena_tree_lower_bound (const ArenaTree *t, const struct _Range *key);
struct _Range *arena_tree_upper_bound (const ArenaTree *t, const struct _Range *key);
gboolean arena_tree_holds (const ArenaTree *t, const struct _Range *r);
guint arena_tree_check (const ArenaTree *t);
