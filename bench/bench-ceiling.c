/* memres-bench: the machine's ceiling for section (k), and the CPU topology the bench sees.
 *
 * The ceiling is the pair's control: the same worker threads run, instead of allocate+close, a
 * loop that shares nothing between threads (every byte it reads or writes lies on the worker's
 * own stack) and lasts about as long as one thread's pair. What the aggregate of T threads of
 * it gains over one thread is what the machine gives code of that length: all-core turbo, SMT
 * siblings, other runnable threads (the driver's, the bench's main thread) cap it, and the pair
 * cannot scale better than that. A unit is @rounds rounds of a private free-list pop + push
 * with a buffer-sized structure filled in between (stores, loads and integer work, as a pair's
 * buffer structure and front cache are), calibrated by bench_ceiling_calibrate(). */
#define _GNU_SOURCE /* sched_getaffinity() */
#include "bench-common.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#define CEILING_NODES 16

typedef struct _CeilingNode CeilingNode;
struct _CeilingNode
{
  CeilingNode *next;
  guint64 fields[7]; /* one 64-byte line a node */
};

/* One unit: @rounds times, pop two nodes off the private list, fill the first from the second
 * and a xorshift state, push both back in the other order. The list's head is the dependency
 * that chains the rounds, as a front cache's bin chains a thread's pairs. */
static guint64
ceiling_rounds (CeilingNode **head, guint64 *state, guint rounds)
{
  guint64 x = *state, acc = 0;

  for (guint r = 0; r < rounds; r++)
    {
      CeilingNode *a = *head, *b = a->next;

      *head = b->next;
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      for (guint f = 0; f < G_N_ELEMENTS (a->fields); f++)
        a->fields[f] = b->fields[f] + x + f;
      acc += a->fields[r % G_N_ELEMENTS (a->fields)];
      b->next = *head;
      a->next = b;
      *head = a;
      /* the stores stay stores: the compiler may not keep the list in registers */
      __asm__ volatile("" : : "r"(head) : "memory");
    }
  *state = x;
  return acc;
}

/**
 * bench_ceiling_run:
 * @rounds: rounds a unit (from bench_ceiling_calibrate())
 * @units: units to run
 *
 * Runs @units units of the ceiling loop on the calling thread, on a node list on its own stack.
 *
 * Returns: a value derived from every round (for the caller to keep, so that nothing is
 *   optimized away)
 */
guint64
bench_ceiling_run (guint rounds, guint64 units)
{
  CeilingNode nodes[CEILING_NODES] __attribute__ ((aligned (64)));
  CeilingNode *head = &nodes[0];
  guint64 state = G_GUINT64_CONSTANT (0x9e3779b97f4a7c15), acc = 0;

  for (guint i = 0; i < CEILING_NODES; i++)
    {
      nodes[i].next = i + 1 < CEILING_NODES ? &nodes[i + 1] : NULL;
      for (guint f = 0; f < G_N_ELEMENTS (nodes[i].fields); f++)
        nodes[i].fields[f] = i * 8 + f;
    }
  for (guint64 u = 0; u < units; u++)
    acc += ceiling_rounds (&head, &state, rounds);
  return acc;
}

/* The median of 5 runs of about 20 ms (at @per_round ns a round) of units of @rounds rounds:
 * ns of the thread's CPU time a unit. */
static gdouble
unit_cost (guint rounds, gdouble per_round)
{
  gdouble runs[5];
  guint64 sink = 0;

  for (guint i = 0; i < G_N_ELEMENTS (runs); i++)
    {
      guint64 units = (guint64) MAX (1, 20e6 / (per_round * rounds));
      gint64 t0 = bench_thread_cpu_ns ();

      sink += bench_ceiling_run (rounds, units);
      runs[i] = (gdouble) (bench_thread_cpu_ns () - t0) / units;
    }
  __asm__ volatile("" : : "r"(sink)); /* the runs' results are used */
  return bench_median (runs, G_N_ELEMENTS (runs));
}

/**
 * bench_ceiling_calibrate:
 * @unit_ns: the time one unit should take on one thread (the one-thread pair's), in ns
 * @unit_ns_out: (out): what one unit of the rounds returned took here, in ns
 *
 * Finds the rounds a unit needs to last about @unit_ns on the calling thread, in the thread's
 * CPU time: a round's cost from the fastest of 3 runs of 2^20 rounds, then the median of 5
 * runs of 20 ms at the count it gives, corrected once from that median.
 *
 * Returns: rounds a unit, at least 1
 */
guint
bench_ceiling_calibrate (gdouble unit_ns, gdouble *unit_ns_out)
{
  const guint64 probe_rounds = 1 << 20;
  gdouble per_round = 0, cost;
  guint64 sink = 0;
  guint rounds, better;

  for (guint i = 0; i < 3; i++)
    {
      gint64 t0 = bench_thread_cpu_ns ();
      gdouble ns;

      sink += bench_ceiling_run (probe_rounds, 1);
      ns = (gdouble) (bench_thread_cpu_ns () - t0) / probe_rounds;
      per_round = i == 0 ? ns : MIN (per_round, ns);
    }
  __asm__ volatile("" : : "r"(sink));
  per_round = MAX (per_round, 0.01);
  rounds = (guint) CLAMP (unit_ns / per_round + 0.5, 1, 1 << 16);
  cost = unit_cost (rounds, per_round);
  better = (guint) CLAMP (rounds * unit_ns / MAX (cost, 0.01) + 0.5, 1, 1 << 16);
  if (better != rounds)
    {
      per_round = MAX (cost / rounds, 0.01);
      rounds = better;
      cost = unit_cost (rounds, per_round);
    }
  *unit_ns_out = cost;
  return rounds;
}

static gint
compare_first_cpu (gconstpointer a, gconstpointer b)
{
  guint64 x = g_ascii_strtoull (*(char *const *) a, NULL, 10);
  guint64 y = g_ascii_strtoull (*(char *const *) b, NULL, 10);

  return (x > y) - (x < y);
}

/* The distinct contents of the CPUs' topology/thread_siblings_list (one a core), joined by
 * spaces, and their count in @n_cores; NULL where sysfs does not tell. */
static char *
sibling_sets (guint *n_cores)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GDir) dir = g_dir_open ("/sys/devices/system/cpu", 0, NULL);
  g_autoptr (GPtrArray) order = g_ptr_array_new ();
  const char *name;

  *n_cores = 0;
  if (dir == NULL)
    return NULL;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = NULL, *text = NULL;

      if (!g_str_has_prefix (name, "cpu") || !g_ascii_isdigit (name[3]))
        continue;
      path = g_strdup_printf ("/sys/devices/system/cpu/%s/topology/thread_siblings_list", name);
      if (!g_file_get_contents (path, &text, NULL, NULL))
        continue; /* an offline CPU has no topology */
      g_strstrip (text);
      if (!g_hash_table_contains (seen, text))
        {
          g_ptr_array_add (order, text);
          g_hash_table_add (seen, g_steal_pointer (&text));
        }
    }
  if (order->len == 0)
    return NULL;
  *n_cores = order->len;
  /* in CPU order of their first member, for a reader */
  g_ptr_array_sort (order, compare_first_cpu);
  for (guint i = 0; i < order->len; i++)
    {
      if (i == 8)
        {
          g_string_append_printf (out, " ... (%u more)", order->len - 8);
          break;
        }
      g_string_append_printf (out, "%s{%s}", i ? " " : "", (char *) order->pdata[i]);
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* The first "model name" of /proc/cpuinfo, or NULL. */
static char *
cpu_model (void)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/cpuinfo", &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "model name") && strchr (lines[i], ':') != NULL)
      return g_strdup (g_strstrip (strchr (lines[i], ':') + 1));
  return NULL;
}

/**
 * bench_cpu_topology:
 *
 * What the bench sees of the machine's CPUs: the model, online CPUs (sysconf), those the
 * process may run on (sched_getaffinity), and the distinct thread_siblings_list sets of sysfs
 * (physical cores as the kernel sees them; fewer sets than CPUs means SMT siblings: two
 * workers may share a core; a VM may hide SMT the host has).
 *
 * Returns: (transfer full): one line of text
 */
char *
bench_cpu_topology (void)
{
  cpu_set_t allowed;
  long online = sysconf (_SC_NPROCESSORS_ONLN);
  int n_allowed = sched_getaffinity (0, sizeof allowed, &allowed) == 0 ? CPU_COUNT (&allowed) : -1;
  guint n_cores = 0;
  g_autofree char *sets = sibling_sets (&n_cores);
  g_autofree char *model = cpu_model ();

  if (sets == NULL)
    return g_strdup_printf ("CPUs (%s): %ld online, %d this process may use; "
                            "thread_siblings_list unreadable (cores and SMT unknown)",
                            model ? model : "model unknown", online, n_allowed);
  return g_strdup_printf ("CPUs (%s): %ld online, %d this process may use; %u distinct "
                          "thread_siblings_list sets (%s): %s",
                          model ? model : "model unknown", online, n_allowed, n_cores,
                          online > (long) n_cores ? "SMT: workers may share a core"
                                                  : "no SMT visible; a VM may hide it",
                          sets);
}
