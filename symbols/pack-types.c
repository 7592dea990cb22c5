/*
 * symbols/pack-types.c: the types a layout pack records, compiled with -g
 * against one major's server headers by scripts/gen-header-packs; pgdbg
 * symbols extract then reads the pack from this program's DWARF, exactly
 * as from a debug build of the server.  No type or offset is written here:
 * each global is redeclared with __typeof__ of the header's own declaration
 * (gcc checks it), the structs come from the headers as they are.
 */
#include "postgres.h"

#if PG_VERSION_NUM >= 180000
#include "commands/explain_state.h"
#else
#include "commands/explain.h"
#endif
#include "executor/execdesc.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/memnodes.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "nodes/plannodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/portal.h"
#if PG_VERSION_NUM >= 140000
#include "utils/wait_event.h"
#endif

/* the structs (typedef names, as pgdbg asks for them) */
CachedPlanSource pack_CachedPlanSource;
CachedPlan pack_CachedPlan;
List pack_List;
PlannedStmt pack_PlannedStmt;
Query pack_Query;
ExplainState pack_ExplainState;
StringInfoData pack_StringInfoData;
PortalData pack_PortalData;
QueryDesc pack_QueryDesc;
ErrorData pack_ErrorData;
PGPROC pack_PGPROC;
struct config_enum_entry pack_config_enum_entry;
MemoryContextData pack_MemoryContextData;
Latch pack_Latch;
PgBackendStatus pack_PgBackendStatus;

/* the enums (typedef names, as pgdbg asks for them) */
WaitEventActivity pack_WaitEventActivity;
WaitEventClient pack_WaitEventClient;
WaitEventIPC pack_WaitEventIPC;
WaitEventTimeout pack_WaitEventTimeout;
WaitEventIO pack_WaitEventIO;
#if PG_VERSION_NUM >= 170000
WaitEventBufferPin pack_WaitEventBufferPin;
#endif

/* the globals, typed by the headers' own declarations */
__typeof__(MyProc) MyProc;
__typeof__(MyProcPid) MyProcPid;
#if PG_VERSION_NUM >= 140000
__typeof__(my_wait_event_info) my_wait_event_info;
#endif
__typeof__(ActivePortal) ActivePortal;
__typeof__(debug_query_string) debug_query_string;
__typeof__(CurrentMemoryContext) CurrentMemoryContext;
__typeof__(TopMemoryContext) TopMemoryContext;
__typeof__(InterruptHoldoffCount) InterruptHoldoffCount;
__typeof__(QueryCancelHoldoffCount) QueryCancelHoldoffCount;
__typeof__(CritSectionCount) CritSectionCount;
__typeof__(plan_cache_mode) plan_cache_mode;
__typeof__(cpu_operator_cost) cpu_operator_cost;

/* what pgdbg reads as the major (PG_VERSION_STR of a server) */
const char pack_version[] = "PostgreSQL " PG_VERSION " on x86_64-pc-linux-gnu, layouts from its server headers (" PACK_SOURCE ")";

int
main(void)
{
	return pack_version[0] == 'P' ? 0 : 1;
}
