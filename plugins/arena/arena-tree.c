/* memres - CUDA memory resources
 * arena-tree.c: the AVL trees of arena-tree.h. Each node keeps its subtree's height; an
 * insertion or a removal rebalances the path above it by rotations, stopping where a subtree's
 * height and shape are unchanged, so every operation is O(log n) and none allocates. */
#include "arena-private.h"

#define NODE(t, r)  ((ArenaTreeNode *) ((guint8 *) (r) + (t)->offset))
#define RANGE(t, n) ((Range *) ((guint8 *) (n) - (t)->offset))

void
arena_tree_init (ArenaTree *t, ArenaOrder order, gsize offset)
{
  t->root = NULL;
  t->n = 0;
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
  n->height = 1 + MAX (height (n->left), height (n->right));
}

/* @parent's child @old (the root when @parent is NULL) replaced by @n. */
static inline void
child_replace (ArenaTree *t, ArenaTreeNode *parent, ArenaTreeNode *old, ArenaTreeNode *n)
{
  if (parent == NULL)
    t->root = n;
  else if (parent->left == old)
    parent->left = n;
  else
    parent->right = n;
  if (n != NULL)
    n->parent = parent;
}

/* @x's right child in its place, @x its left child; returns the subtree's new top. */
static ArenaTreeNode *
rotate_left (ArenaTree *t, ArenaTreeNode *x)
{
  ArenaTreeNode *y = x->right;

  x->right = y->left;
  if (y->left != NULL)
    y->left->parent = x;
  child_replace (t, x->parent, x, y);
  y->left = x;
  x->parent = y;
  height_fix (x);
  height_fix (y);
  return y;
}

static ArenaTreeNode *
rotate_right (ArenaTree *t, ArenaTreeNode *x)
{
  ArenaTreeNode *y = x->left;

  x->left = y->right;
  if (y->right != NULL)
    y->right->parent = x;
  child_replace (t, x->parent, x, y);
  y->right = x;
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
  gint lean = height (n->left) - height (n->right);

  if (lean > 1)
    {
      if (height (n->left->left) < height (n->left->right))
        rotate_left (t, n->left);
      return rotate_right (t, n);
    }
  if (lean < -1)
    {
      if (height (n->right->right) < height (n->right->left))
        rotate_right (t, n->right);
      return rotate_left (t, n);
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
      link = order_cmp (t, r, RANGE (t, p)) < 0 ? &p->left : &p->right;
    }
  n->left = n->right = NULL;
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

  if (n->left != NULL && n->right != NULL)
    {
      /* its successor, which has no left child, takes its place */
      ArenaTreeNode *s = n->right;

      while (s->left != NULL)
        s = s->left;
      if (s->parent == n)
        from = s;
      else
        {
          from = s->parent;
          child_replace (t, s->parent, s, s->right);
          s->right = n->right;
          s->right->parent = s;
        }
      s->left = n->left;
      s->left->parent = s;
      s->height = n->height;
      child_replace (t, n->parent, n, s);
    }
  else
    {
      from = n->parent;
      child_replace (t, n->parent, n, n->left != NULL ? n->left : n->right);
    }
  t->n--;
  rebalance_up (t, from);
}

Range *
arena_tree_first (const ArenaTree *t)
{
  ArenaTreeNode *n = t->root;

  if (n == NULL)
    return NULL;
  while (n->left != NULL)
    n = n->left;
  return RANGE (t, n);
}

Range *
arena_tree_last (const ArenaTree *t)
{
  ArenaTreeNode *n = t->root;

  if (n == NULL)
    return NULL;
  while (n->right != NULL)
    n = n->right;
  return RANGE (t, n);
}

/* The range after @r in @t's order (@r in @t), or NULL. */
Range *
arena_tree_next (const ArenaTree *t, const Range *r)
{
  ArenaTreeNode *n = NODE (t, r);

  if (n->right != NULL)
    {
      n = n->right;
      while (n->left != NULL)
        n = n->left;
      return RANGE (t, n);
    }
  while (n->parent != NULL && n == n->parent->right)
    n = n->parent;
  return n->parent != NULL ? RANGE (t, n->parent) : NULL;
}

/* The range before @r in @t's order (@r in @t), or NULL. */
Range *
arena_tree_prev (const ArenaTree *t, const Range *r)
{
  ArenaTreeNode *n = NODE (t, r);

  if (n->left != NULL)
    {
      n = n->left;
      while (n->right != NULL)
        n = n->right;
      return RANGE (t, n);
    }
  while (n->parent != NULL && n == n->parent->left)
    n = n->parent;
  return n->parent != NULL ? RANGE (t, n->parent) : NULL;
}

/* The first range of @t not before @key in its order (@key: a probe, not in @t), or NULL. */
Range *
arena_tree_lower_bound (const ArenaTree *t, const Range *key)
{
  ArenaTreeNode *n = t->root, *found = NULL;

  while (n != NULL)
    if (order_cmp (t, key, RANGE (t, n)) <= 0)
      {
        found = n;
        n = n->left;
      }
    else
      n = n->right;
  return found != NULL ? RANGE (t, found) : NULL;
}

/* The first range of @t after @key in its order, or NULL. */
Range *
arena_tree_upper_bound (const ArenaTree *t, const Range *key)
{
  ArenaTreeNode *n = t->root, *found = NULL;

  while (n != NULL)
    if (order_cmp (t, key, RANGE (t, n)) < 0)
      {
        found = n;
        n = n->left;
      }
    else
      n = n->right;
  return found != NULL ? RANGE (t, found) : NULL;
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
      n = c < 0 ? n->left : n->right;
    }
  return FALSE;
}

/* The errors of @n's subtree (parent links, order, heights, balance); its size in *@count. */
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
  errors += n->left != NULL && order_cmp (t, RANGE (t, n->left), RANGE (t, n)) > 0;
  errors += n->right != NULL && order_cmp (t, RANGE (t, n->right), RANGE (t, n)) < 0;
  errors += subtree_check (t, n->left, n, count) + subtree_check (t, n->right, n, count);
  errors += n->height != 1 + MAX (height (n->left), height (n->right));
  lean = height (n->left) - height (n->right);
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
