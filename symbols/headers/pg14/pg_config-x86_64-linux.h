/*
 * Appended to include/pg_config.h by scripts/gen-header-packs before
 * symbols/pack-types.c is compiled against these headers.
 *
 * libpg_query configured PostgreSQL 14.6 on aarch64-apple-darwin.  Every
 * value that sets a size or an alignment (SIZEOF_*, ALIGNOF_*,
 * MAXIMUM_ALIGNOF, PG_INT64_TYPE, INT64_MODIFIER, BLCKSZ, ...) is what
 * configure gives on x86-64 Linux with gcc (compared with the pg_config.h of
 * the 13 and 15 servers scripts/pg-build builds, and with the 14.25
 * x86_64-pc-linux-gnu constants of pgrx-pg-sys 0.19.4), except the few
 * below, set here to their x86-64 Linux values.  None of them reaches a
 * struct the pack records: the pack is byte-identical with and without
 * this block; it is applied so that nothing of darwin's configure is left
 * where a later pack-types.c could reach it.  include/pg_config_os.h stays
 * darwin's (port/darwin.h: __darwin__, which selects a clock id in
 * portability/instr_time.h and a macro in utils/elog.h, no type).
 */
#undef PG_VERSION_STR
#define PG_VERSION_STR "PostgreSQL 14.6 on x86_64-pc-linux-gnu, 64-bit"
/* gcc on x86-64 has __int128 (libpg_query undefines it on every platform) */
#define PG_INT128_TYPE __int128
/* Linux's struct sockaddr has no sa_len */
#undef HAVE_STRUCT_SOCKADDR_SA_LEN
#undef HAVE_STRUCT_SOCKADDR_STORAGE_SS_LEN
/* Linux builds use unnamed POSIX semaphores, darwin SysV ones */
#undef USE_SYSV_SEMAPHORES
#define USE_UNNAMED_POSIX_SEMAPHORES 1
/* epoll, not kqueue */
#undef HAVE_KQUEUE
#undef HAVE_SYS_EVENT_H
#define HAVE_SYS_EPOLL_H 1
/* x86-64 CRC-32C and popcount instead of ARMv8's (code only) */
#undef USE_ARMV8_CRC32C
#define USE_SSE42_CRC32C_WITH_RUNTIME_CHECK 1
