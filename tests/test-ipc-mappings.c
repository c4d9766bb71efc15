/* test-ipc-mappings.c: the table of imported buffer mappings (core/ipc-mappings.c), against a
 * plain array as the model. Hashes are chosen by the test so that keys collide, probe runs
 * wrap around the end of the slot array, and removal has to shift entries back. */
#include <string.h>

#include "memres-private.h"

#define N_KEYS 200

typedef struct
{
  MemresIpcMappings table;
  MemresIpcMapping *present[N_KEYS]; /* the model: key i is in the table iff present[i] */
} Fixture;

static void
make_key (guint i, MemresBufferExport *e)
{
  memset (e, 0, sizeof *e);
  memcpy (e->export_data, &i, sizeof i);
  e->export_data[63] = 0x5a;
}

/* The address key @i is mapped at. */
static guint64
address_of (guint i)
{
  return 0x10000 + (guint64) i * 4096;
}

/* Hash @i of a bucket scheme: @n_buckets distinct values, all near the end of the table so
 * that runs wrap. */
static guint64
forced_hash (guint i, guint n_buckets)
{
  return G_GUINT64_CONSTANT (0xfffffffffffffff0) + (i % n_buckets);
}

static void
assert_model (Fixture *f, guint n_buckets)
{
  gsize n = 0;

  for (guint i = 0; i < N_KEYS; i++)
    {
      MemresBufferExport e;
      MemresIpcMapping *m;

      make_key (i, &e);
      m = _memres_ipc_mappings_lookup (&f->table, e.export_data, forced_hash (i, n_buckets));
      g_assert_true (m == f->present[i]);
      if (m != NULL)
        {
          g_assert_cmpmem (m->export_data, sizeof m->export_data, e.export_data,
                           sizeof e.export_data);
          g_assert_cmpuint (m->alloc.address, ==, address_of (i));
          g_assert_cmpuint (m->alloc.size, ==, 1000 + i);
          n++;
        }
    }
  g_assert_cmpuint (f->table.n_mappings, ==, n);
}

static void
add (Fixture *f, guint i, guint n_buckets)
{
  MemresBufferExport e;
  MemresAllocation alloc = { address_of (i), 1000 + i, NULL };
  MemresIpcMapping *m;

  make_key (i, &e);
  m = _memres_ipc_mappings_add (&f->table, forced_hash (i, n_buckets), &e, &alloc);
  g_assert_cmpuint (m->n_users, ==, 1);
  f->present[i] = m;
}

static void
run_model (guint n_buckets, guint n_ops)
{
  Fixture f = { 0 };

  _memres_ipc_mappings_init (&f.table);
  g_assert_null (_memres_ipc_mappings_lookup (&f.table, (const guint8[64]){ 0 }, 0));
  for (guint op = 0; op < n_ops; op++)
    {
      guint i = (guint) g_test_rand_int_range (0, N_KEYS);

      if (f.present[i] == NULL)
        add (&f, i, n_buckets);
      else
        {
          _memres_ipc_mappings_remove (&f.table, f.present[i]);
          f.present[i] = NULL;
        }
      assert_model (&f, n_buckets);
    }
  for (guint i = 0; i < N_KEYS; i++)
    if (f.present[i] != NULL)
      {
        _memres_ipc_mappings_remove (&f.table, f.present[i]);
        f.present[i] = NULL;
        assert_model (&f, n_buckets);
      }
  g_assert_cmpuint (f.table.n_mappings, ==, 0);
  _memres_ipc_mappings_clear (&f.table);
}

/* Every key in one bucket: one long run. */
static void
test_one_bucket (void)
{
  run_model (1, 3000);
}

/* A few buckets next to each other: runs merge, and removal shifts entries of other buckets. */
static void
test_few_buckets (void)
{
  run_model (7, 5000);
}

/* Distinct hashes, real and forced: the growth path. */
static void
test_distinct (void)
{
  run_model (N_KEYS, 5000);
}

/* A removed record is reused by the next add, and the table never shrinks, so filling and
 * emptying it again allocates nothing. */
static void
test_reuse (void)
{
  Fixture f = { 0 };
  MemresIpcMapping *first;
  MemresIpcMapping **slots;
  gsize mask;

  _memres_ipc_mappings_init (&f.table);
  for (guint i = 0; i < 100; i++)
    add (&f, i, N_KEYS);
  slots = f.table.slots;
  mask = f.table.mask;
  g_assert_cmpuint (mask + 1, >=, 2 * 100);
  first = f.present[0];
  _memres_ipc_mappings_remove (&f.table, first);
  f.present[0] = NULL;
  add (&f, 0, N_KEYS);
  g_assert_true (f.present[0] == first);
  for (guint i = 0; i < 100; i++)
    {
      _memres_ipc_mappings_remove (&f.table, f.present[i]);
      f.present[i] = NULL;
    }
  for (guint i = 0; i < 100; i++)
    add (&f, i, N_KEYS);
  assert_model (&f, N_KEYS);
  g_assert_true (f.table.slots == slots);
  g_assert_cmpuint (f.table.mask, ==, mask);
  for (guint i = 0; i < 100; i++)
    _memres_ipc_mappings_remove (&f.table, f.present[i]);
  _memres_ipc_mappings_clear (&f.table);
}

/* The hash depends on every word of the key. */
static void
test_hash (void)
{
  guint8 key[MEMRES_EXPORT_DATA_SIZE] = { 0 };
  guint64 base = _memres_ipc_mappings_hash (key);

  g_assert_cmpuint (_memres_ipc_mappings_hash (key), ==, base);
  for (guint i = 0; i < MEMRES_EXPORT_DATA_SIZE; i++)
    {
      key[i] = 1;
      g_assert_cmpuint (_memres_ipc_mappings_hash (key), !=, base);
      key[i] = 0;
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ipc-mappings/one-bucket", test_one_bucket);
  g_test_add_func ("/ipc-mappings/few-buckets", test_few_buckets);
  g_test_add_func ("/ipc-mappings/distinct", test_distinct);
  g_test_add_func ("/ipc-mappings/reuse", test_reuse);
  g_test_add_func ("/ipc-mappings/hash", test_hash);
  return g_test_run ();
}
