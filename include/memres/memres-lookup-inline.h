/* memres - CUDA memory resources
 * memres-lookup-inline.h: memres_lookup_inline(), the common case of memres_lookup() compiled
 * into the caller, and the one exported object it reads (memres_lookup_index). Opt-in:
 * memres.h does not include it. Also the code of that case inside libmemres
 * (core/segment-lookup.c includes it), so there is one copy of it. Full documentation: the
 * reference (share/gtk-doc/html/memres), memres-lookup-inline. All Since: 2.0. */
#pragma once

#include <memres/memres.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-lookup-inline
 * @title: Inline lookup
 * @short_description: memres_lookup() of a segment over a whole 1 MiB page, without a call
 * @section_id: memres-memres-lookup-inline
 * @include: memres/memres-lookup-inline.h
 *
 * memres_lookup_inline() answers as memres_lookup() does, with the common case compiled into
 * the caller: an address below 2^48 in a 1 MiB page that one segment covers whole and shares
 * with no other (a `cache` over `dmr`'s 1 MiB blocks and chunks, a `vmm` buffer's or an
 * `arena` granule's inner pages). Everything else (a page cut by a segment's edge, nested
 * segments, a segment of 64 MiB or more, an address above 2^48, no segment, a change of the
 * index under way) it hands to memres_lookup(). Include this header on its own
 * (`#include <memres/memres-lookup-inline.h>`, which includes memres.h): memres.h does not.
 *
 * What is ABI, and what is not. The inline code reads libmemres's segment index, whose layout
 * is libmemres's own and may change in any release. It reads it only when the first word of
 * #memres_lookup_index, the layout number, equals %MEMRES_LOOKUP_LAYOUT of the header it was
 * compiled with; otherwise every call is a call of memres_lookup(), so a program built against
 * this header stays correct with any later libmemres of the same major, only slower. The ABI
 * is: the symbol `memres_lookup_index`, its size (16 bytes on 64-bit platforms: a program may
 * hold a copy of it, made by a copy relocation), the place of the layout word in it
 * (its first 4 bytes) and that word's meaning (a number naming one layout; the layout it names
 * never changes). Everything the word names (the @words of #MemresLookupIndex, the index behind
 * it, this header's internal constants) belongs to that layout alone.
 *
 * The cost on the direct path: no call and no lock; the layout word and the index's address
 * (constant: a loop keeps them in registers where it can), the count of changes done, the flat
 * table's entry of the address's GiB, the page slot's negated base and its 48-byte answer in
 * three 16-byte loads, then the count of changes begun. 32 instructions a lookup in the loop of
 * bench/bench-lookup.c, against 39 through memres_lookup() (x86-64, gcc 12 -O2); fewer where
 * the caller reads little of the answer (the compiler drops the rest). Off the direct path it
 * costs its own work before memres_lookup()'s (about 6 instructions more on a page cut into
 * runs, 18 on a segment of 64 MiB or more). It needs GCC or Clang (C or C++); with another
 * compiler memres_lookup_inline() is a call of memres_lookup().
 */

/**
 * MEMRES_LOOKUP_LAYOUT:
 *
 * The number of the layout of the segment index that this header's memres_lookup_inline()
 * reads: the value #memres_lookup_index's layout word must have for it to read the index.
 * A libmemres whose index is laid out otherwise has another number there, and the inline code
 * then calls memres_lookup() for every address.
 *
 * Since: 2.0
 */
#define MEMRES_LOOKUP_LAYOUT 1

typedef struct _MemresLookupIndex MemresLookupIndex;

/**
 * MemresLookupIndex:
 * @layout: the number of the layout of the index @words leads to (%MEMRES_LOOKUP_LAYOUT for the
 *   one this header reads); part of the ABI: always the object's first 4 bytes
 * @reserved: 0
 * @words: the index, of layout @layout: read-only for everyone but libmemres, which changes it
 *   at any time under a sequence count; what lies there is not part of the ABI
 *
 * The type of #memres_lookup_index. Its size (16 bytes) and the place of @layout are frozen;
 * what @words points to is described only by the layout @layout names.
 *
 * Since: 2.0
 */
struct _MemresLookupIndex
{
  guint32 layout;
  guint32 reserved;
  const guint64 *words;
};

/**
 * memres_lookup_index:
 *
 * Where memres_lookup_inline() finds libmemres's segment index: its layout number, then its
 * address. Constant for the life of the process; never written by applications. Read it only
 * through memres_lookup_inline().
 *
 * Since: 2.0
 */
extern const MemresLookupIndex memres_lookup_index;

#ifndef __GTK_DOC_IGNORE__
/* Layout 1, as far as the direct path reads it (core/segment-index-layout.h holds the whole
 * layout and checks these against it at compile time). @words is the empty node (every word 0)
 * that the flat table's empty entries lead to; 64 bytes before it, the count of changes begun
 * and the count of changes done (a writer adds one to the first before its change and one to the
 * second after it); at byte MEMRES_LOOKUP_TOP_AT_ from it the flat table: for each GiB below
 * 2^48, the address of its node less the empty node's (0: none, the empty node). A node's first
 * 1,024 64-byte lines are the slots of its GiB's 1 MiB pages; a slot whose word 7 (its negated
 * base) is negative as a signed number holds one segment over its whole page, whose answer (the
 * first 48 bytes of a #MemresLookupInfo) is its words 0 to 5, and the address plus that word is
 * the offset. Every place is a constant distance from @words, the displacement of a load. */
#define MEMRES_LOOKUP_BEGUN_WORD_    (-8)
#define MEMRES_LOOKUP_DONE_WORD_     (-7)
#define MEMRES_LOOKUP_TOP_AT_        66688 /* the empty node's size: 1,040 slots, a 128-byte bitmap */
#define MEMRES_LOOKUP_TOP_BITS_      18
#define MEMRES_LOOKUP_PAGE_SHIFT_    20
#define MEMRES_LOOKUP_NODE_SHIFT_    10
#define MEMRES_LOOKUP_GIB_SHIFT_     (MEMRES_LOOKUP_PAGE_SHIFT_ + MEMRES_LOOKUP_NODE_SHIFT_)
#define MEMRES_LOOKUP_SLOT_SHIFT_    6
#define MEMRES_LOOKUP_NEG_BASE_WORD_ 7

/* what _memres_lookup_slot_() found */
#define MEMRES_LOOKUP_ANSWERED_   0 /* the answer is in the caller's info */
#define MEMRES_LOOKUP_NOT_DIRECT_ 1 /* the slot is of another kind (or the empty node's) */
#define MEMRES_LOOKUP_CHANGED_    2 /* a change began meanwhile: nothing read counts */

#endif /* __GTK_DOC_IGNORE__ */

/* The code, for GCC and Clang (their vector types and atomic builtins). No conditional inside:
 * gtk-doc's scanner ends an ignored block at the first nested #endif. */
#if !defined(__GTK_DOC_IGNORE__) && defined(__GNUC__)
#define MEMRES_LOOKUP_INLINE_ 1

/* 16 bytes of an answer, copied in one move */
typedef gint64 MemresLookupPart_ __attribute__ ((vector_size (16), aligned (8), may_alias));

/* The slot of the page of @addr (below 2^48) in layout 1's flat table at @words: the GiB's entry,
 * with no test (an entry of 0 leads to the empty node's slot), added to the page's place in its
 * node. One plain load: an entry is 0 or a node's place, set once, and a node is never freed, so
 * the slot's loads may follow it before the sequence is checked (core/segment-lookup.c, the
 * readers' rule); they depend on it by their address, which orders them after it. */
static inline __attribute__ ((always_inline)) const guint64 *
_memres_lookup_flat_slot_ (const guint64 *words, guint64 addr)
{
  guint64 gib = addr >> MEMRES_LOOKUP_GIB_SHIFT_;
  /* the place of the page's slot in its node: the page number in the GiB times 64 */
  guint64 at = (addr >> (MEMRES_LOOKUP_PAGE_SHIFT_ - MEMRES_LOOKUP_SLOT_SHIFT_))
               & (((G_GUINT64_CONSTANT (1) << MEMRES_LOOKUP_NODE_SHIFT_) - 1)
                  << MEMRES_LOOKUP_SLOT_SHIFT_);
  guintptr rel = ((const guintptr *) ((const char *) words + MEMRES_LOOKUP_TOP_AT_))[gib];

  return (const guint64 *) ((const char *) words + (rel + at));
}

/* The direct case at @slot (a page's or a region's 64-byte line of layout 1) for @addr, begun at
 * @seq (the count of changes done, read with acquire before anything of the index): when the
 * slot's negated base is negative, its answer copied into @info with the offset, if no change
 * began meanwhile (MEMRES_LOOKUP_ANSWERED_; MEMRES_LOOKUP_CHANGED_ when one did, @info
 * untouched); MEMRES_LOOKUP_NOT_DIRECT_ for any other slot. Plain loads (a torn copy is what the
 * final check throws away), an acquire fence, then the count begun compared with @seq. */
static inline __attribute__ ((always_inline)) int
_memres_lookup_slot_ (const guint64 *words, const guint64 *slot, guint64 addr,
                      MemresLookupInfo *info, guint64 seq)
{
  guint64 neg_base = slot[MEMRES_LOOKUP_NEG_BASE_WORD_];
  MemresLookupPart_ a0, a1, a2;

  /* one load, its sign test fused with the branch, and later its sum with the address */
  if (__builtin_expect ((gint64) neg_base >= 0, 0))
    return MEMRES_LOOKUP_NOT_DIRECT_;
  a0 = ((const MemresLookupPart_ *) slot)[0];
  a1 = ((const MemresLookupPart_ *) slot)[1];
  a2 = ((const MemresLookupPart_ *) slot)[2];
  __atomic_thread_fence (__ATOMIC_ACQUIRE);
  /* a plain load of one aligned word, folded into the compare */
  if (__builtin_expect (words[MEMRES_LOOKUP_BEGUN_WORD_] != seq, 0))
    return MEMRES_LOOKUP_CHANGED_;
  ((MemresLookupPart_ *) info)[0] = a0;
  ((MemresLookupPart_ *) info)[1] = a1;
  ((MemresLookupPart_ *) info)[2] = a2;
  info->offset = addr + neg_base;
  return MEMRES_LOOKUP_ANSWERED_;
}

#endif /* __GTK_DOC_IGNORE__, __GNUC__ */

/**
 * memres_lookup_inline:
 * @ptr: an address: a device pointer (`(gconstpointer) (guintptr) cudeviceptr`) or a host
 *   pointer
 * @info: (out caller-allocates): where the answer goes; untouched when %FALSE is returned
 *
 * memres_lookup(), with its common case compiled into the caller: the same answers, the same
 * thread safety and the same borrowed @info->resource. Where @ptr lies below 2^48 in a 1 MiB
 * page that one segment covers whole and shares with no other, and libmemres's index has the
 * layout this header was compiled for (#memres_lookup_index's layout word equals
 * %MEMRES_LOOKUP_LAYOUT), it reads the index itself: the count of changes done, the page's slot,
 * its answer, then the count of changes begun, and answers when no change began meanwhile.
 * Everything else (another layout, another kind of page or slot, an address above 2^48, no
 * segment, %NULL, a change under way) is one call of memres_lookup().
 *
 * Cost: on the inline path no call, no lock and nothing shared written; the layout word and
 * the index's address are constant loads that a loop keeps in its registers where it can. An
 * @info at a 16-byte boundary never has one of the answer's 16-byte stores cross a cache line.
 * Thread-safe: any thread, at any time, concurrently with anything; an answer is never older than
 * the index at the call.
 *
 * What is ABI: only the place and meaning of #memres_lookup_index's layout word (and the
 * object's name and size); the index's layout is not (see the section's description).
 *
 * Returns: %TRUE and @info filled when @ptr lies in a segment; %FALSE when it does not.
 *
 * Since: 2.0
 */
static inline gboolean
memres_lookup_inline (gconstpointer ptr, MemresLookupInfo *info)
{
#ifdef MEMRES_LOOKUP_INLINE_
  guint64 addr = (guint64) (guintptr) ptr;
  const guint64 *words = memres_lookup_index.words;

  /* the layout word first: @words is not read unless it is this header's (a plain load of a
   * constant object) */
  if (__builtin_expect (memres_lookup_index.layout == MEMRES_LOOKUP_LAYOUT && info != NULL
                            && (addr >> MEMRES_LOOKUP_GIB_SHIFT_)
                                   < (G_GUINT64_CONSTANT (1) << MEMRES_LOOKUP_TOP_BITS_),
                        1))
    {
      guint64 seq = __atomic_load_n (&words[MEMRES_LOOKUP_DONE_WORD_], __ATOMIC_ACQUIRE);

      if (__builtin_expect (
              _memres_lookup_slot_ (words, _memres_lookup_flat_slot_ (words, addr), addr, info, seq)
                  == MEMRES_LOOKUP_ANSWERED_,
              1))
        return TRUE;
    }
#endif
  return memres_lookup (ptr, info);
}

G_END_DECLS
