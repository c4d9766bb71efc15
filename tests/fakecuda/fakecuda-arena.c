/* fakecuda-arena.c: the fake's "device" address space.
 *
 * One large PROT_NONE mapping holds every address the fake hands out (cuMemAlloc, pool chunks,
 * pinned host memory, VMM reservations, imported pointers), so that an address inside it that
 * belongs to no live allocation is recognisably invalid rather than "host memory". The low
 * quarter serves allocations first-fit; the rest serves VMM reservations, each placed with free
 * room after it so that a later reservation at the address right after it (a hint) usually
 * succeeds, as growing a buffer in place needs. */
#include "fakecuda-private.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct
{
  uintptr_t base;
  size_t size;
} FkBlock;

static uintptr_t fk_arena_base;
static size_t fk_arena_size;
static uintptr_t fk_vmm_zone; /* start of the VMM zone */
static uintptr_t fk_vmm_next; /* bump pointer of the VMM zone */
static FkBlock *fk_blocks;    /* used blocks, sorted by base */
static size_t fk_n_blocks, fk_cap_blocks;

size_t
fk_page_size (void)
{
  static size_t page;
  if (page == 0)
    page = (size_t) sysconf (_SC_PAGESIZE);
  return page;
}

size_t
fk_round_up (size_t value, size_t multiple)
{
  size_t r = value % multiple;
  if (r == 0)
    return value;
  if (value > SIZE_MAX - (multiple - r))
    return 0;
  return value + (multiple - r);
}

bool
fk_is_power_of_two (size_t value)
{
  return value != 0 && (value & (value - 1)) == 0;
}

bool
fk_arena_init (void)
{
  if (fk_arena_base != 0)
    return true;
  /* As much address space as the process may map, from 16 TiB down to 1 GiB (valgrind, for
   * one, allows only tens of GiB). */
  for (size_t size = 16ull << 40; size >= FK_GIB; size /= 2)
    {
      void *p = mmap (NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED)
        {
          /* Align the usable part to 2 MiB (1 GiB when large) for large alignments. */
          size_t align = size >= 64 * FK_GIB ? FK_GIB : 2 * FK_MIB;
          uintptr_t base = fk_round_up ((uintptr_t) p, align);
          fk_arena_base = base;
          fk_arena_size = size - (base - (uintptr_t) p);
          fk_arena_size -= fk_arena_size % align;
          /* A quarter for allocations, the rest for VMM; half and half when small. */
          fk_vmm_zone
              = fk_arena_base + (size >= 256 * FK_GIB ? fk_arena_size / 4 : fk_arena_size / 2);
          fk_vmm_zone = fk_round_up (fk_vmm_zone, align);
          fk_vmm_next = fk_vmm_zone;
          return true;
        }
    }
  return false;
}

bool
fk_arena_contains (uintptr_t addr, size_t size)
{
  uintptr_t end = fk_arena_base + fk_arena_size;
  return addr < end && addr + size > fk_arena_base;
}

/* Index of the first block whose end is after @addr. */
static size_t
fk_block_index (uintptr_t addr)
{
  size_t lo = 0, hi = fk_n_blocks;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      if (fk_blocks[mid].base + fk_blocks[mid].size <= addr)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static bool
fk_va_is_free (uintptr_t base, size_t size, uintptr_t lo, uintptr_t hi)
{
  size_t i;
  if (base < lo || base > hi || size > hi - base)
    return false;
  i = fk_block_index (base);
  return i == fk_n_blocks || fk_blocks[i].base >= base + size;
}

static void
fk_block_insert (uintptr_t base, size_t size)
{
  size_t i = fk_block_index (base);
  if (fk_n_blocks == fk_cap_blocks)
    {
      fk_cap_blocks = fk_cap_blocks ? 2 * fk_cap_blocks : 64;
      fk_blocks = realloc (fk_blocks, fk_cap_blocks * sizeof *fk_blocks);
    }
  memmove (&fk_blocks[i + 1], &fk_blocks[i], (fk_n_blocks - i) * sizeof *fk_blocks);
  fk_blocks[i] = (FkBlock){ base, size };
  fk_n_blocks++;
}

/* First fit in [lo, hi) for @size bytes aligned to @align followed by @room free bytes. */
static uintptr_t
fk_first_fit (uintptr_t from, uintptr_t lo, uintptr_t hi, size_t size, size_t align, size_t room)
{
  uintptr_t candidate = fk_round_up (from > lo ? from : lo, align);
  size_t i = fk_block_index (candidate);

  for (;;)
    {
      uintptr_t gap_end = i < fk_n_blocks ? fk_blocks[i].base : hi;
      if (gap_end > hi)
        gap_end = hi;
      if (candidate < gap_end && gap_end - candidate >= size && gap_end - candidate - size >= room)
        return candidate;
      if (i >= fk_n_blocks || fk_blocks[i].base >= hi)
        return 0;
      candidate = fk_round_up (fk_blocks[i].base + fk_blocks[i].size, align);
      if (candidate == 0 || candidate >= hi)
        return 0;
      i++;
      while (i < fk_n_blocks && fk_blocks[i].base + fk_blocks[i].size <= candidate)
        i++;
    }
}

uintptr_t
fk_va_alloc (size_t size, size_t align, uintptr_t hint, bool vmm)
{
  uintptr_t lo = vmm ? fk_vmm_zone : fk_arena_base;
  uintptr_t hi = vmm ? fk_arena_base + fk_arena_size : fk_vmm_zone;
  uintptr_t addr = 0;

  if (size == 0 || size > fk_arena_size)
    return 0;
  if (align < fk_page_size ())
    align = fk_page_size ();
  if (hint != 0 && hint % fk_page_size () == 0
      && fk_va_is_free (hint, size, fk_arena_base, fk_arena_base + fk_arena_size))
    addr = hint;
  if (addr == 0 && vmm)
    {
      /* Room after it to grow into: as much again, at most 64 GiB. */
      size_t room = size < 64 * FK_GIB ? size : 64 * FK_GIB;
      addr = fk_first_fit (fk_vmm_next, lo, hi, size, align, room);
      if (addr == 0)
        addr = fk_first_fit (lo, lo, hi, size, align, room);
      if (addr == 0)
        addr = fk_first_fit (lo, lo, hi, size, align, 0);
      if (addr != 0)
        fk_vmm_next = addr + size + room;
    }
  else if (addr == 0)
    addr = fk_first_fit (lo, lo, hi, size, align, 0);
  if (addr != 0)
    fk_block_insert (addr, size);
  return addr;
}

void
fk_va_free (uintptr_t base, size_t size)
{
  size_t i = fk_block_index (base);
  if (i < fk_n_blocks && fk_blocks[i].base == base && fk_blocks[i].size == size)
    {
      fk_va_unback (base, size);
      memmove (&fk_blocks[i], &fk_blocks[i + 1], (fk_n_blocks - i - 1) * sizeof *fk_blocks);
      fk_n_blocks--;
    }
}

bool
fk_va_back_anonymous (uintptr_t base, size_t size)
{
  return mmap ((void *) base, size, PROT_READ | PROT_WRITE,
               MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
         != MAP_FAILED;
}

bool
fk_va_back_fd (uintptr_t base, size_t size, int fd, uint64_t offset, bool accessible)
{
  return mmap ((void *) base, size, accessible ? PROT_READ | PROT_WRITE : PROT_NONE,
               MAP_FIXED | MAP_SHARED, fd, (off_t) offset)
         != MAP_FAILED;
}

void
fk_va_unback (uintptr_t base, size_t size)
{
  /* Replacing the pages drops their contents and makes the range inaccessible again. */
  mmap ((void *) base, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
        0);
}
