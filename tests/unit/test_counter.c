/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_counter.c — unit tests of fs/base/counter.h: adds from several threads
 * at once lose nothing, the maximum and minimum end at the extreme value any
 * thread offered, and a gauge's high-water mark sees every thread in flight
 * at once.
 */
#include <pthread.h>

#include <criterion/criterion.h>

#include "fs/base/counter.h"

#define THREADS 4
#define ROUNDS 1000000u

static uint64_t total, high, low = UINT64_MAX, now, now_max;
static pthread_barrier_t all_start, all_in, all_up;

static void *bump(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;

	pthread_barrier_wait(&all_start); /* all at once, not one after another */
	/* Tight loops, so the threads hit one counter at the same moments. */
	for (uint64_t i = 0; i < ROUNDS; i++)
		cfs_counter_add(&total, 3);
	for (uint64_t i = 0; i < ROUNDS; i++)
		cfs_counter_sub(&total, 1);
	for (uint64_t i = 0; i < ROUNDS; i++) {
		cfs_counter_max(&high, id * ROUNDS + i);
		cfs_counter_min(&low, (THREADS - id) * ROUNDS - i);
	}
	/* Every thread up before any comes down: the mark must see them all. */
	pthread_barrier_wait(&all_in);
	cfs_gauge_up(&now, &now_max);
	pthread_barrier_wait(&all_up);
	cfs_gauge_down(&now);
	return NULL;
}

Test(counter, threads_lose_nothing)
{
	pthread_t t[THREADS];

	pthread_barrier_init(&all_start, NULL, THREADS);
	pthread_barrier_init(&all_in, NULL, THREADS);
	pthread_barrier_init(&all_up, NULL, THREADS);
	for (uintptr_t i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, bump, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(cfs_counter_load(&total), 2ull * THREADS * ROUNDS);
	cr_assert_eq(cfs_counter_load(&high), (uint64_t)THREADS * ROUNDS - 1);
	cr_assert_eq(cfs_counter_load(&low), 1);
	cr_assert_eq(cfs_counter_load(&now), 0);
	cr_assert_eq(cfs_counter_load(&now_max), THREADS);
	cfs_counter_store(&total, 7);
	cr_assert_eq(cfs_counter_load(&total), 7);
	cfs_counter_max(&total, 5);
	cfs_counter_min(&total, 9);
	cr_assert_eq(cfs_counter_load(&total), 7, "max and min leave a value past them alone");
}
