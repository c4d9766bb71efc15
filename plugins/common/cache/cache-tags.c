/* memres - CUDA memory resources
 * cache-tags.c: a small index per tag for the kinds on the cache parts (Block.tag, the `arena`'s
 * granules and slabs): the interned names memres_allocation_get_tag() gives, each given the next
 * index at its first use in this plugin. The names are interned by the core for the life of the
 * process, so a name is its own key: an index is found by comparing pointers, without a lock;
 * a new one is appended under a lock and published by the count. */
#include "cache-parts.h"

static const char *names[MEMRES_TAGS_MAX + 1];
static guint n_names; /* indices 1 to n_names are set (read with acquire) */
static GMutex names_lock;

static guint
find (const char *name, guint n)
{
  for (guint i = 1; i <= n; i++)
    if (names[i] == name)
      return i;
  return 0;
}

guint
cache_tag_index (const char *name)
{
  guint i, n;

  if (name == NULL)
    return 0;
  if ((i = find (name, __atomic_load_n (&n_names, __ATOMIC_ACQUIRE))) != 0)
    return i;
  g_mutex_lock (&names_lock);
  n = n_names;
  if ((i = find (name, n)) == 0 && n < MEMRES_TAGS_MAX)
    {
      names[i = n + 1] = name;
      __atomic_store_n (&n_names, n + 1, __ATOMIC_RELEASE);
    }
  g_mutex_unlock (&names_lock);
  return i; /* the core has at most MEMRES_TAGS_MAX names: never 0 here */
}

const char *
cache_tag_name (guint index)
{
  return index == 0 || index > __atomic_load_n (&n_names, __ATOMIC_ACQUIRE) ? NULL : names[index];
}
