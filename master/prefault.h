/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file prefault.h
 * Memory made ready ahead of a load of the record (prefault.c): an HA
 * standby touches the heap its takeover's restore will fill while it
 * waits, so the takeover does not spend its time in page faults (the
 * kernel zeroing fresh pages: a quarter to a third of a large restore on
 * a VM). One set per process, on the heap of the thread that calls: the
 * follower and the loader are both the master's main thread.
 *
 * Not thread-safe: one thread calls all three.
 */
#ifndef MST_PREFAULT_H
#define MST_PREFAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Bytes to have ready for loading a record of `objects` objects and
 *  record_bytes on disk, capped by half of what is ready plus the memory
 *  available now (*capped says whether it was): the system's
 *  (MemAvailable) or, when less, what the process's memory cgroups allow
 *  (a container's limit; v2 and v1). */
size_t mst_prefault_want(uint64_t objects, uint64_t record_bytes, bool *capped);

/** Touch up to step more bytes of heap, while fewer than want are ready.
 *  Returns the bytes ready. When malloc refuses a block (an address-space
 *  limit), *refused is set and 16 MiB of what was ready goes back, so the
 *  process's own allocations still succeed; the caller then stops growing
 *  until it wants more. */
size_t mst_prefault_grow(size_t want, size_t step, bool *refused);

/** Before the load: the memory goes back to malloc, which then serves
 *  the load from it. Without memory ready, nothing happens. */
void mst_prefault_use(void);

/** After the load: what it left unused goes back to the system. */
void mst_prefault_end(void);

#endif
