/* memres - CUDA memory resources
 * arena-tree.c: the AVL trees of arena-tree.h. Each node keeps its subtree's height; an
 * insertion or a removal rebalances the path above it by rotations, stopping where a subtree's
 * height and top are unchanged, so every operation is O(log n) and none allocates. A node's
 * children are child[0] (before it in the order) and child[1] (after it): each operation that
 * has a mirror image (a rotation, a step to the next or previous range, the first or last range)
 * is written once for a side @d, the mirror taking 1 - @d. */
#include "arena-private.h"

#define NODE(t, r)  ((ArenaTreeNode *) ((guint8 *) (r) + (t)->offset))
#define RANGE(t, n) ((Range *) ((guint8 *) (n) - (t)->offset))

/* @t emptied of every range (their nodes are theirs: nothing is freed); its order kept. */
void
arena_tree_clear (ArenaTree *t)
{
  t->root = NULL;
  t->n = 0;
}

/* @t empty, of @order, its node at @offset in a range. */
void
arena_tree_init (ArenaTree *t, ArenaOrder order, gsize offset)
{
  arena_tree_clear (t);
  t->order = order;
  t->offset = offset;
}

static inline gint
order_cmp (const ArenaTree *t, const Range *x, const Range *y)
{
  return arena_range_order (t->order, x, y);
}

static inline gint
height (const ArenaTreeNode *n)
{
  return n != NULL ? n->height : 0;
}

static inline void
height_fix (ArenaTreeNode *n)
{
  n->height = 1 + MAX (height (n->child[0]), height (n->child[1]));
}

/* @parent's child @old (the root when @parent is NULL) replaced by @n. */
static inline void
child_replace (ArenaTree *t, ArenaTreeNode *parent, ArenaTreeNode *old, ArenaTreeNode *n)
{
  if (parent == NULL)
    t->root = n;
  else
    parent->child[parent->child[1] == old] = n;
  if (n != NULL)
    n->parent = parent;
}

/* @x's child on side 1 - @d in its place, @x that child's child on side @d (@d 0: a left
 * rotation); returns the subtree's new top. */
static ArenaTreeNode *
rotate (ArenaTree *t, ArenaTreeNode *x, guint d)
{
  ArenaTreeNode *y = x->child[1 - d];

  x->child[1 - d] = y->child[d];
  if (y->child[d] != NULL)
    y->child[d]->parent = x;
  child_replace (t, x->parent, x, y);
  y->child[d] = x;
  x->parent = y;
  height_fix (x);
  height_fix (y);
  return y;
}

/* @n's height fixed and its subtree rotated back into balance (its two sides' heights at most
 * one apart); returns the subtree's top. */
static ArenaTreeNode *
balance (ArenaTree *t, ArenaTreeNode *n)
{
  gint lean = height (n->child[0]) - height (n->child[1]);

  if (lean > 1 || lean < -1)
    {
      guint heavy = lean < 0; /* the taller side */
      ArenaTreeNode *c = n->child[heavy];

      /* its child leaning the other way first turned to lean this way */
      if (height (c->child[heavy]) < height (c->child[1 - heavy]))
        rotate (t, c, heavy);
      return rotate (t, n, 1 - heavy);
    }
  height_fix (n);
  return n;
}

/* Balance restored from @n up: each subtree on the way rebalanced, up to the first whose height
 * and top stay as they were (nothing above it changed). */
static void
rebalance_up (ArenaTree *t, ArenaTreeNode *n)
{
  while (n != NULL)
    {
      gint before = n->height;
      ArenaTreeNode *top = balance (t, n);

      if (top == n && n->height == before)
        return;
      n = top->parent;
    }
}

/* @r into @t (not in it). Ranges equal in the order are kept, the newer after. */
void
arena_tree_insert (ArenaTree *t, Range *r)
{
  ArenaTreeNode *n = NODE (t, r), *p = NULL, **link = &t->root;

  while (*link != NULL)
    {
      p = *link;
      link = &p->child[order_cmp (t, r, RANGE (t, p)) >= 0];
    }
  n->child[0] = n->child[1] = NULL;
  n->parent = p;
  n->height = 1;
  *link = n;
  t->n++;
  rebalance_up (t, p);
}

/* @r out of @t (in it). */
void
arena_tree_remove (ArenaTree *t, Range *r)
{
  ArenaTreeNode *n = NODE (t, r), *from;

  if (n->child[0] != NULL && n->child[1] != NULL)
    {
      /* its successor, which has no child before it, takes its place */
      ArenaTreeNode *s = n->child[1];

      while (s->child[0] != NULL)
        s = s->child[0];
      if (s->parent == n)
        from = s;
      else
        {
          from = s->parent;
          child_replace (t, s->parent, s, s->child[1]);
          s->child[1] = n->child[1];
          s->child[1]->parent = s;
        }
      s->child[0] = n->child[0];
      s->child[0]->parent = s;
      s->height = n->height;
      child_replace (t, n->parent, n, s);
    }
  else
    {
      from = n->parent;
      child_replace (t, n->parent, n, n->child[n->child[0] == NULL]);
    }
  t->n--;
  rebalance_up (t, from);
}

/* The range at the end @d of @n's subtree (0: its first in the order, 1: its last). */
static ArenaTreeNode *
subtree_end (ArenaTreeNode *n, guint d)
{
  while (n->child[d] != NULL)
    n = n->child[d];
  return n;
}

/* The range after @r in @t's order (@d 1) or before it (@d 0), or NULL. */
static Range *
step (const ArenaTree *t, const Range *r, guint d)
{
  ArenaTreeNode *n = NODE (t, r);

  if (n->child[d] != NULL)
    return RANGE (t, subtree_end (n->child[d], 1 - d));
  while (n->parent != NULL && n == n->parent->child[d])
    n = n->parent;
  return n->parent != NULL ? RANGE (t, n->parent) : NULL;
}

Range *
arena_tree_first (const ArenaTree *t)
{
  return t->root != NULL ? RANGE (t, subtree_end (t->root, 0)) : NULL;
}

Range *
arena_tree_last (const ArenaTree *t)
{
  return t->root != NULL ? RANGE (t, subtree_end (t->root, 1)) : NULL;
}

/* The range after @r in @t's order (@r in @t), or NULL. */
Range *
arena_tree_next (const ArenaTree *t, const Range *r)
{
  return step (t, r, 1);
}

/* The range before @r in @t's order (@r in @t), or NULL. */
Range *
arena_tree_prev (const ArenaTree *t, const Range *r)
{
  return step (t, r, 0);
}

/* The first range of @t after @key in its order, or not before it with @equal too (@key: a
 * probe, not in @t), or NULL. */
static Range *
bound (const ArenaTree *t, const Range *key, gboolean equal)
{
  ArenaTreeNode *n = t->root, *found = NULL;

  while (n != NULL)
    {
      gint c = order_cmp (t, key, RANGE (t, n));

      if (c < 0 || (c == 0 && equal))
        {
          found = n;
          n = n->child[0];
        }
      else
        n = n->child[1];
    }
  return found != NULL ? RANGE (t, found) : NULL;
}

/* The first range of @t not before @key in its order (@key: a probe, not in @t), or NULL. */
Range *
arena_tree_lower_bound (const ArenaTree *t, const Range *key)
{
  return bound (t, key, TRUE);
}

/* The first range of @t after @key in its order, or NULL. */
Range *
arena_tree_upper_bound (const ArenaTree *t, const Range *key)
{
  return bound (t, key, FALSE);
}

/* Whether @r is in @t: searched by its key, so a range that is not there but whose node's links
 * are stale is not taken for one that is. */
gboolean
arena_tree_holds (const ArenaTree *t, const Range *r)
{
  ArenaTreeNode *n = t->root;

  while (n != NULL)
    {
      gint c = order_cmp (t, r, RANGE (t, n));

      if (c == 0)
        return RANGE (t, n) == r;
      n = n->child[c > 0];
    }
  return FALSE;
}

/* The errors of @n's subtree (parent links, order with its children, heights, balance); its
 * size in *@count. */
static guint
subtree_check (const ArenaTree *t, const ArenaTreeNode *n, const ArenaTreeNode *parent,
               guint *count)
{
  guint errors = 0;
  gint lean;

  if (n == NULL)
    return 0;
  (*count)++;
  errors += n->parent != parent;
  errors += n->child[0] != NULL && order_cmp (t, RANGE (t, n->child[0]), RANGE (t, n)) > 0;
  errors += n->child[1] != NULL && order_cmp (t, RANGE (t, n->child[1]), RANGE (t, n)) < 0;
  errors += subtree_check (t, n->child[0], n, count) + subtree_check (t, n->child[1], n, count);
  errors += n->height != 1 + MAX (height (n->child[0]), height (n->child[1]));
  lean = height (n->child[0]) - height (n->child[1]);
  errors += lean > 1 || lean < -1;
  return errors;
}

/* The disagreements in @t's structure: parent links, order between each node and its children
 * and along the walk of arena_tree_next(), heights, balance and the count. 0 unless the tree has
 * a bug (arena_heap_check()). */
guint
arena_tree_check (const ArenaTree *t)
{
  guint count = 0, walked = 0, errors = subtree_check (t, t->root, NULL, &count);
  const Range *prev = NULL;

  for (const Range *r = arena_tree_first (t); r != NULL && walked <= t->n;
       prev = r, r = arena_tree_next (t, r))
    {
      walked++;
      errors += prev != NULL && order_cmp (t, prev, r) >= 0;
    }
  return errors + (count != t->n) + (walked != t->n);
}
