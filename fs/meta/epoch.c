/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * epoch.c — epoch-based reclamation: a global epoch and one slot per thread
 * that has ever read (never freed; reused after its thread exits).
 *
 * Slot word: 0 when the thread is outside any read section, else
 * (epoch << 1) | 1 with the epoch it entered in. The proof in short: a writer
 * unpublishes X, then reads the epoch E (the tag). A reader that can hold X
 * published its slot before loading X's pointer, so its slot says an epoch
 * <= E and, while it stays inside, the epoch cannot pass E + 1 (advancing
 * from E + 1 requires every active slot at E + 1). So at E + 2 it has left,
 * and X can be freed.
 *
 * "Before" costs the reader nothing where the kernel has membarrier(2)'s
 * private expedited command: the reader stores its slot with a compiler
 * barrier only, and the advancer runs membarrier() before it reads the
 * slots, which puts a full barrier on every CPU running one of our threads:
 * either a reader's slot store is visible to the scan, or its later loads
 * come after the barrier and see X unpublished. Without membarrier the slot
 * store is sequentially consistent (xchg on x86, ~20 ns a section).
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs/meta/epoch.h"
#include "fs/base/assert.h"

struct epoch_slot {
	_Atomic uint64_t word;	 /* 0 or epoch << 1 | 1 */
	_Atomic bool taken;	 /* owned by a live thread */
	struct epoch_slot *next; /* [const after publishing] registry link */
} __attribute__((aligned(64)));

static _Atomic uint64_t global_epoch = 2;
static _Atomic(struct epoch_slot *) registry;
static pthread_key_t slot_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static __thread struct epoch_slot *my_slot;
static __thread unsigned my_depth;

/* membarrier(2) registered: readers need no fence (see the top). Set once,
 * before any slot exists. */
static bool asymmetric;
static pthread_once_t barrier_once = PTHREAD_ONCE_INIT;

static void barrier_register(void)
{
#ifndef __SANITIZE_THREAD__ /* ThreadSanitizer does not see membarrier's order */
	asymmetric = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

/* Thread exit: the slot goes back for the next thread (it is idle: a thread
 * never exits inside a read section). */
static void slot_release(void *p)
{
	struct epoch_slot *s = p;

	atomic_store(&s->word, 0);
	atomic_store(&s->taken, false);
}

static void key_create(void)
{
	CFS_ASSERT(pthread_key_create(&slot_key, slot_release) == 0);
	pthread_once(&barrier_once, barrier_register);
}

static struct epoch_slot *slot_acquire(void)
{
	struct epoch_slot *s;

	pthread_once(&key_once, key_create);
	for (s = atomic_load(&registry); s; s = s->next) {
		bool free_slot = false;

		if (atomic_compare_exchange_strong(&s->taken, &free_slot, true))
			break;
	}
	if (!s) {
		struct epoch_slot *head;

		s = aligned_alloc(64, sizeof(*s));
		CFS_ASSERT(s != NULL);
		atomic_init(&s->word, 0);
		atomic_init(&s->taken, true);
		head = atomic_load(&registry);
		do {
			s->next = head;
		} while (!atomic_compare_exchange_weak(&registry, &head, s));
	}
	pthread_setspecific(slot_key, s);
	my_slot = s;
	return s;
}

void cfs_epoch_enter(void)
{
	struct epoch_slot *s = my_slot;

	if (my_depth++)
		return;
	if (__builtin_expect(!s, 0))
		s = slot_acquire();
	if (__builtin_expect(asymmetric, 1)) {
		/* The advancer's membarrier() orders it for us. */
		atomic_store_explicit(&s->word, atomic_load(&global_epoch) << 1 | 1,
				      memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		return;
	}
	/* seq_cst: visible before any load of the section. */
	atomic_store(&s->word, atomic_load(&global_epoch) << 1 | 1);
}

void cfs_epoch_exit(void)
{
	CFS_ASSERT(my_depth > 0);
	if (--my_depth)
		return;
	atomic_store_explicit(&my_slot->word, 0, memory_order_release);
}

uint64_t cfs_epoch_now(void)
{
	return atomic_load(&global_epoch);
}

bool cfs_epoch_try_advance(void)
{
	uint64_t e = atomic_load(&global_epoch);

	pthread_once(&barrier_once, barrier_register);
	if (asymmetric && atomic_load(&registry))
		syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);

	for (struct epoch_slot *s = atomic_load(&registry); s; s = s->next) {
		uint64_t w = atomic_load(&s->word);

		if ((w & 1) && (w >> 1) != e)
			return false;
	}
	return atomic_compare_exchange_strong(&global_epoch, &e, e + 1);
}

bool cfs_epoch_safe(uint64_t tag)
{
	return atomic_load(&global_epoch) >= tag + 2;
}
