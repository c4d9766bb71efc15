/* fakecuda-graph.c: what a stream capture records (allocation, free, memset and copy nodes),
 * graphs, executable graphs and their launches, and the per-device graph memory that
 * cuDeviceGet/SetGraphMemAttribute report and cuDeviceGraphMemTrim releases.
 *
 * A graph allocation gets its address when it is captured; the address stays reserved (and in
 * the range table, as FK_RANGE_GRAPH_ALLOC) while any graph or executable graph names it, and
 * is backed with memory at the first launch that allocates it. Freeing it (a free node, or
 * cuMemFreeAsync/cuMemFree outside a graph) keeps the memory reserved for the next launch;
 * cuDeviceGraphMemTrim gives back what no live allocation uses. */
#include "fakecuda-private.h"

#include <stdlib.h>
#include <string.h>

typedef struct FkGraphAlloc
{
  struct FkGraphAlloc *next; /* every graph allocation, for trimming */
  uintptr_t base;
  size_t size;  /* as asked */
  size_t vsize; /* page-rounded: what used and reserved memory count */
  int device;
  int refs;            /* graphs and executable graphs with a node naming it */
  bool live;           /* allocated by a launch and not freed since */
  bool backed;         /* memory behind the address (reserved graph memory) */
  bool freed_in_graph; /* some graph has a free node for it */
} FkGraphAlloc;

typedef enum
{
  FK_NODE_ALLOC,
  FK_NODE_FREE,
  FK_NODE_MEMSET,
  FK_NODE_COPY,
} FkNodeKind;

typedef struct
{
  FkNodeKind kind;
  FkGraphAlloc *alloc; /* alloc and free nodes */
  uintptr_t dst, src;
  size_t count; /* memset: elements; copy: bytes */
  size_t width; /* memset element size */
  uint32_t value;
  int device; /* the capturing stream's device */
} FkNode;

typedef struct
{
  FkNode *nodes;
  size_t n, cap;
} FkNodeList;

struct CUgraph_st
{
  uint32_t magic;
  struct CUgraph_st *next;
  int device;
  int n_execs; /* live executable graphs instantiated from it */
  bool has_memory_nodes;
  FkNodeList list;
};

struct CUgraphExec_st
{
  uint32_t magic;
  struct CUgraphExec_st *next;
  struct CUgraph_st *graph; /* NULL once the graph is destroyed */
  unsigned long long flags;
  FkNodeList list;
};

#define FK_MAGIC_EXEC 0x46455845u

typedef struct
{
  uint64_t used, used_high, reserved, reserved_high;
} FkGraphMem;

static FkGraphAlloc *fk_graph_allocs;
static struct CUgraph_st *fk_graphs;
static struct CUgraphExec_st *fk_execs;
static FkGraphMem fk_graph_mem[FK_MAX_DEVICES];

/* Allocations */

static void
fk_graph_alloc_maybe_destroy (FkGraphAlloc *a)
{
  if (a->refs > 0 || a->live || a->backed)
    return;
  for (FkGraphAlloc **p = &fk_graph_allocs; *p; p = &(*p)->next)
    if (*p == a)
      {
        *p = a->next;
        break;
      }
  fk_range_remove (a->base);
  fk_va_free (a->base, a->vsize);
  free (a);
}

static void
fk_graph_alloc_unref (FkGraphAlloc *a)
{
  a->refs--;
  fk_graph_alloc_maybe_destroy (a);
}

/* Makes @a's memory live, as a launch does. */
static CUresult
fk_graph_alloc_materialize (FkGraphAlloc *a)
{
  FkGraphMem *m = &fk_graph_mem[a->device];
  FkDevice *d = &fk.devices[a->device];

  if (!a->backed)
    {
      if (a->vsize > d->total - d->used)
        return CUDA_ERROR_OUT_OF_MEMORY;
      if (!fk_va_back_anonymous (a->base, a->vsize))
        return CUDA_ERROR_OUT_OF_MEMORY;
      a->backed = true;
      d->used += a->vsize;
      m->reserved += a->vsize;
      if (m->reserved > m->reserved_high)
        m->reserved_high = m->reserved;
    }
  a->live = true;
  m->used += a->vsize;
  if (m->used > m->used_high)
    m->used_high = m->used;
  fk.counts.graph_allocations++;
  return CUDA_SUCCESS;
}

static void
fk_graph_alloc_release (FkGraphAlloc *a)
{
  a->live = false;
  fk_graph_mem[a->device].used -= a->vsize;
  fk.counts.graph_allocations--;
}

bool
fk_graph_alloc_accessible (void *alloc, int device)
{
  FkGraphAlloc *a = alloc;

  /* Only the owning device's work reaches graph memory, and only while it is allocated. */
  return a->live && device == a->device;
}

int
fk_graph_alloc_device (void *alloc)
{
  return ((FkGraphAlloc *) alloc)->device;
}

bool
fk_graph_alloc_is_live (void *alloc)
{
  return ((FkGraphAlloc *) alloc)->live;
}

CUresult
fk_graph_free_outside (uintptr_t ptr)
{
  FkRange *r = fk_range_find (ptr);
  FkGraphAlloc *a;

  if (r == NULL || r->base != ptr || r->kind != FK_RANGE_GRAPH_ALLOC)
    return CUDA_ERROR_INVALID_VALUE;
  a = r->obj;
  /* An allocation a graph frees cannot be freed outside it; one not allocated cannot be freed. */
  if (a->freed_in_graph || !a->live)
    return CUDA_ERROR_INVALID_VALUE;
  fk_graph_alloc_release (a);
  fk_graph_alloc_maybe_destroy (a);
  return CUDA_SUCCESS;
}

/* Node lists */

static CUresult
fk_nodes_append (FkNodeList *list, const FkNode *node)
{
  if (list->n == list->cap)
    {
      size_t cap = list->cap ? 2 * list->cap : 8;
      FkNode *nodes = realloc (list->nodes, cap * sizeof *nodes);
      if (nodes == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
      list->nodes = nodes;
      list->cap = cap;
    }
  list->nodes[list->n++] = *node;
  if (node->alloc != NULL)
    node->alloc->refs++;
  return CUDA_SUCCESS;
}

static void
fk_nodes_clear (FkNodeList *list)
{
  for (size_t i = 0; i < list->n; i++)
    if (list->nodes[i].alloc != NULL)
      fk_graph_alloc_unref (list->nodes[i].alloc);
  free (list->nodes);
  *list = (FkNodeList){ NULL, 0, 0 };
}

/* Capture */

struct CUgraph_st *
fk_graph_new (int device)
{
  struct CUgraph_st *g = calloc (1, sizeof *g);

  if (g == NULL)
    return NULL;
  g->magic = FK_MAGIC_GRAPH;
  g->device = device;
  g->next = fk_graphs;
  fk_graphs = g;
  fk.counts.graphs++;
  return g;
}

static bool
fk_graph_valid (CUgraph graph)
{
  for (struct CUgraph_st *g = fk_graphs; g; g = g->next)
    if (g == graph)
      return true;
  return false;
}

void
fk_graph_free (struct CUgraph_st *graph)
{
  for (struct CUgraph_st **p = &fk_graphs; *p; p = &(*p)->next)
    if (*p == graph)
      {
        *p = graph->next;
        break;
      }
  for (struct CUgraphExec_st *e = fk_execs; e; e = e->next)
    if (e->graph == graph)
      e->graph = NULL;
  fk_nodes_clear (&graph->list);
  graph->magic = 0;
  free (graph);
  fk.counts.graphs--;
}

CUresult
fk_graph_capture_alloc (struct CUgraph_st *graph, size_t size, uintptr_t *out)
{
  size_t vsize = fk_round_up (size, fk_page_size ());
  FkGraphAlloc *a;
  FkNode node = { .kind = FK_NODE_ALLOC, .device = graph->device };
  CUresult r;

  if (vsize < size)
    return CUDA_ERROR_OUT_OF_MEMORY;
  a = calloc (1, sizeof *a);
  if (a == NULL)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *a = (FkGraphAlloc){ .base = fk_va_alloc (vsize, fk_page_size (), 0, false),
                       .size = size,
                       .vsize = vsize,
                       .device = graph->device };
  if (a->base == 0)
    {
      free (a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  if (!fk_range_add (a->base, size, FK_RANGE_GRAPH_ALLOC, a))
    {
      fk_va_free (a->base, vsize);
      free (a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  a->next = fk_graph_allocs;
  fk_graph_allocs = a;
  node.alloc = a;
  r = fk_nodes_append (&graph->list, &node);
  if (r != CUDA_SUCCESS)
    {
      fk_graph_alloc_maybe_destroy (a);
      return r;
    }
  graph->has_memory_nodes = true;
  *out = a->base;
  return CUDA_SUCCESS;
}

CUresult
fk_graph_capture_free (struct CUgraph_st *graph, uintptr_t ptr)
{
  FkRange *range = fk_range_find (ptr);
  FkNode node = { .kind = FK_NODE_FREE, .device = graph->device };
  FkGraphAlloc *a;
  CUresult r;

  /* Free nodes free graph allocations only, each at most once across all graphs. */
  if (range == NULL || range->base != ptr || range->kind != FK_RANGE_GRAPH_ALLOC)
    return CUDA_ERROR_INVALID_VALUE;
  a = range->obj;
  if (a->freed_in_graph)
    return CUDA_ERROR_INVALID_VALUE;
  node.alloc = a;
  r = fk_nodes_append (&graph->list, &node);
  if (r != CUDA_SUCCESS)
    return r;
  a->freed_in_graph = true;
  graph->has_memory_nodes = true;
  return CUDA_SUCCESS;
}

CUresult
fk_graph_capture_memset (struct CUgraph_st *graph, uintptr_t dst, uint32_t value, size_t width,
                         size_t count)
{
  FkNode node = { .kind = FK_NODE_MEMSET,
                  .dst = dst,
                  .value = value,
                  .width = width,
                  .count = count,
                  .device = graph->device };

  if (dst == 0 || dst % width != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return fk_nodes_append (&graph->list, &node);
}

CUresult
fk_graph_capture_copy (struct CUgraph_st *graph, uintptr_t dst, uintptr_t src, size_t n)
{
  FkNode node
      = { .kind = FK_NODE_COPY, .dst = dst, .src = src, .count = n, .device = graph->device };

  if (dst == 0 || src == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return fk_nodes_append (&graph->list, &node);
}

/* Entry points */

CUresult
fk_cuGraphDestroy (CUgraph hGraph)
{
  FK_ENTER (cuGraphDestroy);
  if (hGraph == NULL || !fk_graph_valid (hGraph))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  fk_graph_free (hGraph);
  FK_RETURN (CUDA_SUCCESS);
}

static bool
fk_exec_valid (CUgraphExec exec)
{
  for (struct CUgraphExec_st *e = fk_execs; e; e = e->next)
    if (e == exec)
      return true;
  return false;
}

CUresult
fk_cuGraphInstantiateWithFlags (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
  unsigned long long known
      = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
        | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  struct CUgraphExec_st *e;

  FK_ENTER (cuGraphInstantiateWithFlags);
  if (phGraphExec == NULL || hGraph == NULL || !fk_graph_valid (hGraph) || (flags & ~known) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* UPLOAD belongs to cuGraphInstantiateWithParams; DEVICE_LAUNCH excludes AUTO_FREE. */
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
      || ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
          && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* A graph with memory nodes has at most one executable graph at a time. */
  if (hGraph->has_memory_nodes && hGraph->n_execs > 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  e = calloc (1, sizeof *e);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  e->magic = FK_MAGIC_EXEC;
  e->graph = hGraph;
  e->flags = flags;
  for (size_t i = 0; i < hGraph->list.n; i++)
    if (fk_nodes_append (&e->list, &hGraph->list.nodes[i]) != CUDA_SUCCESS)
      {
        fk_nodes_clear (&e->list);
        free (e);
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      }
  hGraph->n_execs++;
  e->next = fk_execs;
  fk_execs = e;
  fk.counts.graph_execs++;
  *phGraphExec = e;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuGraphExecDestroy (CUgraphExec hGraphExec)
{
  FK_ENTER (cuGraphExecDestroy);
  for (struct CUgraphExec_st **p = &fk_execs; *p; p = &(*p)->next)
    if (*p == hGraphExec)
      {
        struct CUgraphExec_st *e = *p;
        *p = e->next;
        if (e->graph != NULL)
          e->graph->n_execs--;
        /* Allocations a launch left live stay allocated: the application frees them. */
        fk_nodes_clear (&e->list);
        e->magic = 0;
        free (e);
        fk.counts.graph_execs--;
        FK_RETURN (CUDA_SUCCESS);
      }
  FK_RETURN (CUDA_ERROR_INVALID_VALUE);
}

static CUresult
fk_node_run (const FkNode *node)
{
  switch (node->kind)
    {
    case FK_NODE_ALLOC:
      return fk_graph_alloc_materialize (node->alloc);
    case FK_NODE_FREE:
      if (!node->alloc->live)
        return CUDA_ERROR_INVALID_VALUE;
      fk_graph_alloc_release (node->alloc);
      return CUDA_SUCCESS;
    case FK_NODE_MEMSET:
      return fk_fill (node->dst, node->value, node->width, node->count, node->device);
    case FK_NODE_COPY:
      return fk_copy (node->dst, node->src, node->count, node->device);
    }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult
fk_cuGraphLaunch (CUgraphExec hGraphExec, CUstream hStream)
{
  struct CUgraphExec_st *e = hGraphExec;
  int device;
  CUresult r;

  FK_ENTER (cuGraphLaunch);
  if (hGraphExec == NULL || !fk_exec_valid (hGraphExec))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_for_work (hStream, &device);
  if (r == CUDA_SUCCESS)
    r = fk_stream_wait_queue (hStream, device); /* asynchronous mode: after the queued work */
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  /* Allocations of an earlier launch still live: freed first with AUTO_FREE_ON_LAUNCH, else the
   * launch fails before running anything. */
  for (size_t i = 0; i < e->list.n; i++)
    if (e->list.nodes[i].kind == FK_NODE_ALLOC && e->list.nodes[i].alloc->live
        && !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < e->list.n; i++)
    if (e->list.nodes[i].kind == FK_NODE_ALLOC && e->list.nodes[i].alloc->live)
      fk_graph_alloc_release (e->list.nodes[i].alloc);
  /* The nodes run in capture order (a capture on one stream is a chain). */
  for (size_t i = 0; i < e->list.n; i++)
    {
      r = fk_node_run (&e->list.nodes[i]);
      if (r != CUDA_SUCCESS)
        FK_RETURN (r);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGraphMemTrim (CUdevice device)
{
  FK_ENTER (cuDeviceGraphMemTrim);
  if (!fk_device_valid (device))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  /* Nothing is executing once a call returns: every block no live allocation uses goes back. */
  for (FkGraphAlloc *a = fk_graph_allocs, *next; a; a = next)
    {
      next = a->next;
      if (a->device != device || !a->backed || a->live)
        continue;
      fk_va_unback (a->base, a->vsize);
      a->backed = false;
      fk.devices[device].used -= a->vsize;
      fk_graph_mem[device].reserved -= a->vsize;
      fk_graph_alloc_maybe_destroy (a);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetGraphMemAttribute (CUdevice device, CUgraphMem_attribute attr, void *value)
{
  FkGraphMem *m;

  FK_ENTER (cuDeviceGetGraphMemAttribute);
  if (!fk_device_valid (device))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  if (value == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m = &fk_graph_mem[device];
  switch (attr)
    {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *(cuuint64_t *) value = m->used;
      break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *(cuuint64_t *) value = m->used_high;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *(cuuint64_t *) value = m->reserved;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *(cuuint64_t *) value = m->reserved_high;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceSetGraphMemAttribute (CUdevice device, CUgraphMem_attribute attr, void *value)
{
  FkGraphMem *m;

  FK_ENTER (cuDeviceSetGraphMemAttribute);
  if (!fk_device_valid (device))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  /* Only the high watermarks, only with 0, which resets them to the current value. */
  if (value == NULL || *(cuuint64_t *) value != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m = &fk_graph_mem[device];
  switch (attr)
    {
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      m->used_high = m->used;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      m->reserved_high = m->reserved;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}
