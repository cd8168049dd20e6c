/* mix.h - the 64-bit finalizer that spreads a key's bits before it picks a hash slot. */
#ifndef WARMLANE_MIX_H
#define WARMLANE_MIX_H

#include <stdint.h>

/* MurmurHash3's fmix64: a bijection in which every input bit flips each
 * output bit with probability about 1/2, so small integer keys (tests,
 * callers) spread over the low bits a slot mask keeps. */
static inline uint64_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

#endif
