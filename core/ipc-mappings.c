/* memres - CUDA memory resources
 * ipc-mappings.c: the table of one resource's imported buffer mappings, keyed by the driver's
 * 64-byte export data. Every import and every close of an imported buffer goes through it, so
 * it is built for that: open addressing with linear probing (no allocation per lookup, the
 * stored hash compared before the key), deletion by backward shift (no tombstones, so a table
 * that fills and empties over and over never degrades or rehashes), and mapping records
 * recycled through a free list. It grows at half full and never shrinks: it stays at the size
 * of the most buffers of the resource mapped at once, and is freed with the resource. (An
 * index by mapped address as well, against forged export data that the driver maps to an
 * allocation mapped already, cost 17 ns per import + close once the working set left the
 * cache, measured with 4096 buffers in flight; forged export data can crash the driver
 * anyway: see docs/ipc.md.)
 *
 * Every function but init and clear is called with @t->lock held. */
#include <string.h>

#include "memres-private.h"

#define MIN_SLOTS 16

void
_memres_ipc_mappings_init (MemresIpcMappings *t)
{
  memset (t, 0, sizeof *t);
  g_mutex_init (&t->lock);
}

/* Called when the resource is finalized: every buffer (and so every mapping) is gone. */
void
_memres_ipc_mappings_clear (MemresIpcMappings *t)
{
  g_warn_if_fail (t->n_mappings == 0);
  while (t->free_list != NULL)
    {
      MemresIpcMapping *next = t->free_list->next_free;
      g_free (t->free_list);
      t->free_list = next;
    }
  g_free (t->slots);
  t->slots = NULL;
  g_mutex_clear (&t->lock);
}

/* A 64-bit hash of the export data: the eight words weighted by distinct odd constants
 * (independent multiplies, no chain through every word: this runs on every import), then
 * MurmurHash3's 64-bit finalizer, so that every input bit reaches the low bits the table
 * uses. A changed word always changes the sum (odd weights), and the finalizer is a bijection.
 * Only keys of allocations the driver did import are ever stored, so a peer cannot fill the
 * table with crafted collisions. */
guint64
_memres_ipc_mappings_hash (const guint8 key[MEMRES_EXPORT_DATA_SIZE])
{
  static const guint64 weights[MEMRES_EXPORT_DATA_SIZE / 8] = {
    G_GUINT64_CONSTANT (0x9e3779b97f4a7c15), G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9),
    G_GUINT64_CONSTANT (0x94d049bb133111eb), G_GUINT64_CONSTANT (0xd6e8feb86659fd93),
    G_GUINT64_CONSTANT (0xa0761d6478bd642f), G_GUINT64_CONSTANT (0xe7037ed1a0b428db),
    G_GUINT64_CONSTANT (0x8ebc6af09c88c6e3), G_GUINT64_CONSTANT (0x589965cc75374cc3),
  };
  guint64 h = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (weights); i++)
    {
      guint64 w;

      memcpy (&w, key + 8 * i, 8);
      h += w * weights[i];
    }
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT (0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT (0xc4ceb9fe1a85ec53);
  h ^= h >> 33;
  return h;
}

MemresIpcMapping *
_memres_ipc_mappings_lookup (const MemresIpcMappings *t, const guint8 key[MEMRES_EXPORT_DATA_SIZE],
                             guint64 hash)
{
  if (t->slots == NULL)
    return NULL;
  for (gsize i = hash & t->mask;; i = (i + 1) & t->mask)
    {
      MemresIpcMapping *m = t->slots[i];

      if (m == NULL)
        return NULL;
      if (m->hash == hash && memcmp (m->export_data, key, MEMRES_EXPORT_DATA_SIZE) == 0)
        return m;
    }
}

static void
place (MemresIpcMapping **slots, gsize mask, MemresIpcMapping *m)
{
  gsize i = m->hash & mask;

  while (slots[i] != NULL)
    i = (i + 1) & mask;
  slots[i] = m;
}

static void
grow (MemresIpcMappings *t)
{
  gsize n_slots = t->slots == NULL ? MIN_SLOTS : 2 * (t->mask + 1);
  MemresIpcMapping **slots = g_new0 (MemresIpcMapping *, n_slots);

  if (t->slots != NULL)
    for (gsize i = 0; i <= t->mask; i++)
      if (t->slots[i] != NULL)
        place (slots, n_slots - 1, t->slots[i]);
  g_free (t->slots);
  t->slots = slots;
  t->mask = n_slots - 1;
}

/* Adds a mapping of @exported (its export data is the key, which must not be in @t yet) that
 * maps @alloc, with one user. */
MemresIpcMapping *
_memres_ipc_mappings_add (MemresIpcMappings *t, guint64 hash, const MemresBufferExport *exported,
                          const MemresAllocation *alloc)
{
  MemresIpcMapping *m = t->free_list;

  if (m != NULL)
    t->free_list = m->next_free;
  else
    m = g_new (MemresIpcMapping, 1);
  m->hash = hash;
  m->alloc = *alloc;
  m->n_users = 1;
  m->next_free = NULL;
  m->waits = NULL;
  memcpy (m->export_data, exported->export_data, MEMRES_EXPORT_DATA_SIZE);

  if (t->slots == NULL || 2 * (t->n_mappings + 1) > t->mask + 1)
    grow (t);
  place (t->slots, t->mask, m);
  t->n_mappings++;
  t->mapped_bytes += alloc->size;
  t->mapped_high = MAX (t->mapped_high, t->mapped_bytes);
  return m;
}

/* Takes @m (which is in @t, its waits gone) out of the table; its record goes to the free
 * list. */
void
_memres_ipc_mappings_remove (MemresIpcMappings *t, MemresIpcMapping *m)
{
  gsize i = m->hash & t->mask;
  gsize j;

  g_warn_if_fail (m->waits == NULL);
  while (t->slots[i] != m)
    i = (i + 1) & t->mask;
  /* Backward shift: move later entries of the probe run into the hole when the hole lies
   * between their home slot and where they sit (cyclically). */
  for (j = (i + 1) & t->mask; t->slots[j] != NULL; j = (j + 1) & t->mask)
    {
      gsize home = t->slots[j]->hash & t->mask;

      if (((j - home) & t->mask) >= ((j - i) & t->mask))
        {
          t->slots[i] = t->slots[j];
          i = j;
        }
    }
  t->slots[i] = NULL;
  t->n_mappings--;
  t->mapped_bytes -= m->alloc.size;
  m->next_free = t->free_list;
  t->free_list = m;
}
