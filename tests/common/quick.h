/*
 * quick.h — TS_QUICK: 1 in a sanitizer build (AddressSanitizer, UndefinedBehaviorSanitizer),
 * else 0.
 *
 * A sanitized build runs numeric code 3-20x slower. Tests whose work is a cross product (every
 * architecture x every weight type, every grammar x every step) use TS_QUICK to cover each
 * factor rather than every combination there: the sanitizers look for memory errors and
 * undefined behaviour, which do not need every combination, and the plain build runs them all.
 * What a quick run leaves out is said where TS_QUICK is used (docs/testing.md lists them).
 */
#ifndef TS_TESTS_COMMON_QUICK_H
#define TS_TESTS_COMMON_QUICK_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define TS_QUICK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define TS_QUICK 1
#endif
#endif
#ifndef TS_QUICK
#define TS_QUICK 0
#endif

#endif /* TS_TESTS_COMMON_QUICK_H */
